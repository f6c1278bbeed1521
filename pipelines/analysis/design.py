"""The group-sequential design `make settle` fixes before its first look (SPEC 3), written to
<runs>/<domain>/settle.json:

- the reference, fixed before any score is seen: the one the user names (`--ref`) or the SPEC's default
  (DEFAULT_REF, rope10k); the design records which (`ref_rule`). A design written before this rule existed took the
  best encoding at its first look, a choice from the data: its report says so (REF_RULES);
- looks at n_1 < n_2 < ... < n_K seeds per encoding (n_1: the seeds the study starts with; by default K = 4 looks
  up to --max-seeds, e.g. 3, 5, 8, 10), the seed ids fixed in order (`Design.seeds`);
- alpha spent linearly over the looks, alpha k / K by look k (AdaStop's spending), so look k tests at its
  increment alpha_k = alpha / K; a Bonferroni bound over the looks keeps the family-wise error at most alpha
  whatever the correlation between looks;
- at look k, Holm at alpha_k over the pairs still open (a pair decided at an earlier look keeps its verdict and
  leaves the family); a rejected pair is `better` or `worse`; a pair whose TOST rejects |Δ| >= r at alpha_k is
  `equivalent`; an open pair is `stopped` for futility by the design's rule (FUTILITY_RULES: by default when its
  conditional power at the cap would stay below 0.1 even at its 95% interval's far end; in designs recorded before
  that rule, when |Δ| is inside the region); the others are `inconclusive` and
  get the next look's seeds (their encoding and the reference), or stay inconclusive at the design's last look;
- each pair's seed variance borrows strength from the look's other encodings (the blocked analysis,
  pipelines.analysis.moderated) where its rules allow.

pipelines.analysis.sequential runs the looks over it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipelines.runs.layout import SETTLE as SETTLE_FILE

ALPHA = 0.05
DEFAULT_LOOKS = 4
# SPEC 3: the reference when none is named: RoPE at base 10k, the baseline every decoder starts from (fixed in
# advance, so that choosing it spends nothing of the design's alpha)
DEFAULT_REF = "rope10k"
# how a design's reference was chosen (Design.ref_rule), as the reports say it
REF_RULES = {
    "given": "named with `--ref` before the first look",
    "default": "the SPEC's default, fixed before the first look",
    "data": "chosen from the data: the best of the design's encodings at its first look, whose seeds the tests then "
    "used; with such a reference the design's family-wise error is 0.08-0.10 under the global null instead of at "
    "most 0.05 (tests/test_verdict_simulations.py)",
    "unrecorded": "not recorded (a design written before the reference was fixed in advance: `--ref` when given, "
    "else the best encoding at the first look, chosen from the data)",
}


# how an open pair stops for futility (Design.futility), as the reports say it
FUTILITY_RULES = {
    "interval": "conditional power at the cap below 0.1 even if the true Δ were the end of its 95% interval farthest "
    "from 0",
    "small_delta": "|Δ| inside the region of practical equivalence (a point estimate: the rule of designs fixed "
    "before the interval rule, kept for them because their looks called for runs under it)",
}


@dataclass(frozen=True)
class Design:
    """Looks at looks[k] seeds per encoding (the first looks[k] of `seeds`), alpha spent alpha / K per look."""

    seeds: tuple[int, ...]  # every seed id the design may train, in the order they are added
    looks: tuple[int, ...]  # seeds per encoding at each look, increasing; looks[-1] == len(seeds)
    alpha: float = ALPHA
    ref: str | None = None  # fixed before the first look (a fixed-sample comparison may leave it to the caller)
    sequential: bool = True  # False: a fixed-sample comparison (one look over whatever seeds the runs hold)
    # the baselines the design settles, recorded when it is fixed; an encoding that joins later is outside its family
    # (empty, in designs written before they were recorded: every encoding holding the first look's seeds)
    encodings: tuple[str, ...] = ()
    ref_rule: str = "given"  # how `ref` was chosen: a key of REF_RULES
    # the futility rule, fixed with the design (it decides which runs each look calls for): a key of FUTILITY_RULES
    futility: str = "interval"

    def __post_init__(self) -> None:
        if self.futility not in FUTILITY_RULES:
            raise ValueError(f"a design's futility must be one of {', '.join(FUTILITY_RULES)}, got {self.futility!r}")
        if self.ref_rule not in REF_RULES:
            raise ValueError(f"a design's ref_rule must be one of {', '.join(REF_RULES)}, got {self.ref_rule!r}")
        if not self.sequential:
            return
        if not self.ref:
            raise ValueError("a design's reference must be fixed before its first look, got none")
        if not self.looks or list(self.looks) != sorted(set(self.looks)) or self.looks[0] < 2:
            raise ValueError(f"a design's looks must increase from at least 2 seeds, got {list(self.looks)}")
        if self.looks[-1] != len(self.seeds) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"a design's seeds must be {self.looks[-1]} distinct ids, got {list(self.seeds)}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")

    @classmethod
    def grow(cls, first: list[int], max_seeds: int, looks: int = DEFAULT_LOOKS, **kwargs) -> Design:
        """The default design: from the seeds `first` (the study's, sorted) up to max_seeds, with `looks` looks
        evenly spaced in seeds (rounded), the new seeds numbered on from the largest of `first`."""
        first = sorted(first)
        if max_seeds < len(first):
            raise ValueError(f"--max-seeds {max_seeds} is below the {len(first)} seeds the runs already hold")
        seeds = first + list(range(max(first) + 1, max(first) + 1 + max_seeds - len(first)))
        if looks < 1:
            raise ValueError(f"a design needs at least one look, got {looks}")
        # one look: a fixed sample at max_seeds (its first and last look)
        counts = (
            [max_seeds] if looks == 1 else np.unique(np.round(np.linspace(len(first), max_seeds, looks)).astype(int))
        )
        return cls(tuple(seeds), tuple(int(c) for c in counts), **kwargs)

    @property
    def level(self) -> float:
        """alpha_k: each look's share of alpha."""
        return self.alpha / len(self.looks) if self.sequential else self.alpha

    def look_seeds(self, k: int) -> tuple[int, ...]:
        return self.seeds[: self.looks[k]]

    def to_json(self) -> dict:
        return {
            "seeds": list(self.seeds),
            "looks": list(self.looks),
            "alpha": self.alpha,
            "alpha_per_look": self.level,
            "ref": self.ref,
            "ref_rule": self.ref_rule,
            "encodings": list(self.encodings),
            "spending": "linear: alpha k / K by look k (AdaStop); Holm within a look; Bonferroni over looks",
            # a record without the key is a design of the small-|Δ| rule (those recorded before the key existed), so
            # that such a design written again is the same record
            **({} if self.futility == "small_delta" else {"futility": self.futility}),
        }

    @classmethod
    def from_json(cls, data: dict) -> Design:
        return cls(
            tuple(data["seeds"]),
            tuple(data["looks"]),
            data["alpha"],
            data.get("ref"),
            encodings=tuple(data.get("encodings") or ()),
            ref_rule=data.get("ref_rule", "unrecorded"),
            # a design recorded before the rule was: its looks called for runs under the small-|Δ| stop
            futility=data.get("futility", "small_delta"),
        )


def read_design(domain_folder: Path) -> Design | None:
    """The design make settle fixed for the domain whose runs are in `domain_folder`, None when it has none;
    ValueError naming the file when it is damaged."""
    path = Path(domain_folder) / SETTLE_FILE
    if not path.is_file():
        return None
    try:
        return Design.from_json(json.loads(path.read_text())["design"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: not a design written by make settle ({type(error).__name__}: {error})") from None


def fixed_design(seeds: tuple[int, ...], ref: str | None, alpha: float = ALPHA) -> Design:
    """One look over every seed the runs hold (`seeds`): a fixed-sample comparison."""
    return Design(tuple(seeds), (len(seeds),), alpha, ref, sequential=False)
