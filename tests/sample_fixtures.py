"""The real data samples the tests read, inside the repository: `tests/data/mirror/` is a mirror folder laid out as
`$POSBENCH_MIRROR` expects (one folder per domain holding its raw files as the real download lays them out), so
`POSBENCH_MIRROR=tests/data/mirror make data-jsb` works offline. Where each file comes from, its sha256 and its
licence: `tests/data/PROVENANCE.md` (checked by tests/test_self_contained.py). No test reads outside the checkout."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "tests" / "data" / "mirror"  # jsb/, maestro/, hrg/, sleep_edf/
PROVENANCE = REPO / "tests" / "data" / "PROVENANCE.md"
