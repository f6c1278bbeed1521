"""Paper 000's published test NLL (SPEC 3; mean of 3 seeds), shown beside ours for runs at the paper preset."""

from __future__ import annotations

import math

PAPER_PRESET = "paper"
PAPER_NLL = {
    "darope": {"jsb": 0.4547, "maestro": 1.4180, "hrg": 4.3153, "sleep_edf": 4.2235},
    "hope": {"jsb": 0.4567, "maestro": 1.4289, "hrg": 4.3164, "sleep_edf": 4.2255},
    "nope": {"jsb": 1.1634, "maestro": 1.5075, "hrg": 4.3494, "sleep_edf": 4.4320},
    "pope": {"hrg": 4.3127},
}


def paper_nll(encoding: str, domain: str, preset: str) -> float:
    """The published value comparable to a run of this encoding, domain and preset; nan when there is none (other
    presets train smaller models on smaller budgets)."""
    return PAPER_NLL.get(encoding, {}).get(domain, math.nan) if preset == PAPER_PRESET else math.nan
