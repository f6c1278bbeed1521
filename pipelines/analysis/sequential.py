"""Verdict families and the group-sequential design that buys seeds where a question needs them (SPEC 3).

The primary family: every baseline against the reference. A fixed-sample comparison is one look: the seed-level
test of each pair (pipelines.analysis.verdict) on the seeds both encodings finished, Holm over the family at
alpha = 0.05. `make settle` adds seeds in a design fixed before the first look (`Design`, written to
<runs>/<domain>/settle.json):

- looks at n_1 < n_2 < ... < n_K seeds per encoding (n_1: the seeds the study starts with; by default K = 4 looks
  up to --max-seeds, e.g. 3, 5, 8, 10), the seed ids fixed in order (`Design.seeds`);
- alpha spent linearly over the looks, alpha k / K by look k (AdaStop's spending), so look k tests at its
  increment alpha_k = alpha / K; a Bonferroni bound over the looks keeps the family-wise error at most alpha
  whatever the correlation between looks;
- at look k, Holm at alpha_k over the pairs not yet rejected; a rejected pair is `better` or `worse` for good; a
  pair whose (1 - alpha_k) interval lies inside the region is `equivalent`; the others are `inconclusive`, and
  those with |Δ| outside the region get the next look's seeds (their encoding and the reference); the rest stop;
- the reference is fixed at the first look (the best encoding then, or the one given).

Every look is recomputed from the runs: the verdicts are a pure function of the evidence and the design, and a
look counts only once the reference and every encoding it called for hold all its seeds. `tests/test_settle.py`
simulates the rule's family-wise error under the null and its power against a difference of one seed SD.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from pipelines.analysis.matrix import Evidence
from pipelines.analysis.stats import holm_adjust
from pipelines.analysis.verdict import (
    PairVerdict,
    compare_pair,
    example_resampled_means,
    seeds_needed,
    variance_components,
    verdict_word,
)
from pipelines.runs.layout import SETTLE as SETTLE_FILE

ALPHA = 0.05
DEFAULT_LOOKS = 4


@dataclass(frozen=True)
class Design:
    """Looks at looks[k] seeds per encoding (the first looks[k] of `seeds`), alpha spent alpha / K per look."""

    seeds: tuple[int, ...]  # every seed id the design may train, in the order they are added
    looks: tuple[int, ...]  # seeds per encoding at each look, increasing; looks[-1] == len(seeds)
    alpha: float = ALPHA
    ref: str | None = None  # fixed at the first look; None: decided there (the best encoding)
    sequential: bool = True  # False: a fixed-sample comparison (one look over whatever seeds the runs hold)
    encodings: tuple[str, ...] = ()  # the baselines the design settles (empty: every encoding with runs)

    def __post_init__(self) -> None:
        if not self.sequential:
            return
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
        counts = np.unique(np.round(np.linspace(len(first), max_seeds, looks)).astype(int))
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
            "encodings": list(self.encodings),
            "spending": "linear: alpha k / K by look k (AdaStop); Holm within a look; Bonferroni over looks",
        }

    @classmethod
    def from_json(cls, data: dict) -> Design:
        return cls(
            tuple(data["seeds"]),
            tuple(data["looks"]),
            data["alpha"],
            data.get("ref"),
            encodings=tuple(data.get("encodings") or ()),
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


def fixed_design(evidence: Evidence, ref: str | None, alpha: float = ALPHA) -> Design:
    """One look over every seed the runs hold: a fixed-sample comparison."""
    return Design(tuple(evidence.seeds), (len(evidence.seeds),), alpha, ref, sequential=False)


@dataclass
class Look:
    """One look of a design: its seeds, the pairs tested, their verdicts, and the encodings it calls for next."""

    number: int  # 1-based
    seeds: tuple[int, ...]
    alpha: float
    pairs: dict[str, PairVerdict]  # baseline -> its verdict at this look (the family of this look)
    calls_for: list[str] = field(default_factory=list)  # baselines given the next look's seeds

    def to_json(self) -> dict:
        return {
            "look": self.number,
            "seeds": list(self.seeds),
            "alpha": self.alpha,
            "pairs": {
                name: {
                    "delta": pair.delta,
                    "ci": [pair.ci_lo, pair.ci_hi],
                    "p": pair.p,
                    "p_holm": pair.p_holm,
                    "seeds": len(pair.seeds_a),
                    "verdict": pair.verdict,
                }
                for name, pair in self.pairs.items()
            },
            "calls_for": self.calls_for,
        }


@dataclass
class FamilyResult:
    """The primary family's final verdicts (baseline -> verdict, with the look that decided it) and the looks."""

    ref: str
    design: Design
    verdicts: dict[str, PairVerdict]
    looks: list[Look]
    next_runs: list[tuple[str, int]]  # (encoding, seed) the design calls for next; empty when settled or capped

    @property
    def settled(self) -> bool:
        return not self.next_runs


class Comparator:
    """Pair statistics over one Evidence, with the bootstrap's example resampling done once per domain."""

    def __init__(self, evidence: Evidence, replicates: int | None = None) -> None:
        self.evidence = evidence
        kwargs = {} if replicates is None else {"replicates": replicates}
        self.resampled = example_resampled_means(evidence.values, **kwargs)  # (R, E, S)

    def pair(self, a: str, b: str, seeds: tuple[int, ...] | None = None) -> PairVerdict:
        """a against b on their finished seeds (those among `seeds` when given)."""
        ev = self.evidence
        sa, sb = ev.seeds_of(a, within=seeds), ev.seeds_of(b, within=seeds)
        ia, ib = ev.encodings.index(a), ev.encodings.index(b)
        cols_a, cols_b = [ev.seeds.index(s) for s in sa], [ev.seeds.index(s) for s in sb]
        return compare_pair(
            a,
            b,
            ev.values[ia, cols_a],
            ev.values[ib, cols_b],
            sa,
            sb,
            self.resampled[:, ia, cols_a],
            self.resampled[:, ib, cols_b],
            region=ev.metric.equivalence,
            higher_is_better=ev.metric.higher_is_better,
        )


def decide(pairs: list[PairVerdict], alpha: float, look: int | None, plan_seeds: bool = True) -> list[PairVerdict]:
    """Holm over `pairs` at `alpha`, each pair's verdict word and, when inconclusive (and `plan_seeds`), the seeds
    it would need."""
    if not pairs:
        return []
    raw = np.array([pair.p if math.isfinite(pair.p) else 1.0 for pair in pairs])
    adjusted = holm_adjust(raw)
    decided = []
    for pair, p_holm in zip(pairs, adjusted, strict=True):
        p_holm = float(p_holm) if math.isfinite(pair.p) else math.nan
        word = verdict_word(pair, p_holm, alpha)
        needed = None
        if word == "inconclusive" and plan_seeds:
            effect = max(abs(pair.delta), pair.region)
            needed = seeds_needed(effect, pair.seed_sd, alpha / len(pairs), pair.paired)
        decided.append(replace(pair, p_holm=p_holm, alpha=alpha, verdict=word, seeds_needed=needed, look=look))
    return decided


def best_encoding(evidence: Evidence) -> str:
    """The encoding with the best score over its seeds (ties: the first name)."""
    sign = -1 if evidence.metric.higher_is_better else 1
    return min(sorted(evidence.encodings), key=lambda name: sign * evidence.score(name))


def primary_family(comparator: Comparator, design: Design, ref: str, plan_seeds: bool = True) -> FamilyResult:
    """Every baseline against `ref` under `design` (see the module docstring); `plan_seeds=False` leaves out the
    seeds an inconclusive pair would need (simulations of the rule do not read them)."""
    ev = comparator.evidence
    baselines = [name for name in ev.encodings if name != ref and (not design.encodings or name in design.encodings)]
    final: dict[str, PairVerdict] = {}
    looks: list[Look] = []
    active = set(baselines)  # encodings the current look expects to hold its seeds
    next_runs: list[tuple[str, int]] = []
    for k in range(len(design.looks)):
        seeds = design.look_seeds(k) if design.sequential else None
        if design.sequential:
            lacking = [(name, s) for name in [ref, *sorted(active)] for s in seeds if s not in ev.seeds_of(name)]
            if lacking:
                next_runs = lacking
                break
        family = [b for b in baselines if final.get(b) is None or final[b].verdict not in ("better", "worse")]
        decided = decide([comparator.pair(b, ref, seeds) for b in family], design.level, k + 1, plan_seeds)
        look = Look(k + 1, tuple(seeds or ev.seeds), design.level, {pair.a: pair for pair in decided})
        for pair in decided:
            before = final.get(pair.a)
            if before is None or before.verdict == "inconclusive" or pair.verdict in ("better", "worse"):
                final[pair.a] = pair
        look.calls_for = [
            b for b in baselines if final[b].verdict == "inconclusive" and abs(final[b].delta) >= final[b].region
        ]
        looks.append(look)
        active = set(look.calls_for)
        if not design.sequential or not active:
            break
    return FamilyResult(ref, design, {b: final[b] for b in baselines if b in final}, looks, next_runs)


def every_pair(comparator: Comparator, alpha: float = ALPHA) -> list[PairVerdict]:
    """The secondary family: every pair of encodings (a before b in the evidence's order), each on the seeds both
    finished, Holm over all pairs at `alpha` (fixed sample; not part of any sequential design)."""
    names = comparator.evidence.encodings
    pairs = [comparator.pair(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    return decide(pairs, alpha, None)


@dataclass
class SeedVerdicts:
    """A domain's seed-aware statistics: the primary family against `ref`, every pair, the variance components."""

    ref: str | None
    no_tests_reason: str | None  # why there is no primary family (one encoding; a reference given but not run)
    family: FamilyResult | None
    pairs: list[PairVerdict]
    variance: dict[str, float] | str  # components, or why they could not be estimated
    comparator: Comparator | None = None
    ref_note: str = ""  # how the reference was chosen when it was neither given nor the default


def seed_verdicts(
    evidence: Evidence, ref: str | None, design: Design | None, default_ref: str, replicates: int | None = None
) -> SeedVerdicts:
    """The verdicts of a domain. The reference: the design's, else `ref` (given), else `default_ref` when it has
    finished runs, else the best encoding. A design (from make settle) makes the primary family sequential."""
    try:
        variance: dict[str, float] | str = variance_components(evidence.complete())
    except ValueError:
        variance = (
            f"not estimated: needs at least 2 encodings x 2 seeds every encoding finished x 2 {evidence.blocks}s; "
            f"here {len(evidence.encodings)} x {len(evidence.common_seeds())} x {len(evidence.example_ids)}"
        )
    if len(evidence.encodings) < 2:
        return SeedVerdicts(None, "No paired tests: only one encoding has finished runs.", None, [], variance)
    chosen = (design.ref if design else None) or ref
    if chosen is not None and chosen not in evidence.encodings:
        why = "the design's" if design and design.ref else "given"
        reason = f"No paired tests: `{chosen}` ({why}) has no finished run here; choose one with `--ref`."
        return SeedVerdicts(None, reason, None, [], variance)
    note = ""
    if chosen is None:
        chosen = default_ref if default_ref in evidence.encodings else best_encoding(evidence)
        if chosen != default_ref:
            note = f"the best encoding: `{default_ref}`, the default reference, has no finished run here"
    comparator = Comparator(evidence, replicates)
    design = design or fixed_design(evidence, chosen)
    family = primary_family(comparator, design, chosen)
    return SeedVerdicts(chosen, None, family, every_pair(comparator), variance, comparator, note)
