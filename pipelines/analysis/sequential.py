"""Verdict families and the group-sequential design that buys seeds where a question needs them (SPEC 3).

The primary family: every baseline against the reference. A fixed-sample comparison is one look: the seed-level
test of each pair (pipelines.analysis.verdict) on the seeds both encodings finished, Holm over the family at
alpha = 0.05. `make settle` adds seeds in a design fixed before the first look (`Design`, written to
<runs>/<domain>/settle.json):

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
  `equivalent`; an open pair with |Δ| inside the region is `stopped` (a futility stop: small |Δ|, not shown
  equivalent; the design buys no seeds to resolve a difference that small); the others are `inconclusive` and get
  the next look's seeds (their encoding and the reference), or stay inconclusive at the design's last look.

Every look is recomputed from the runs: the verdicts are a pure function of the evidence and the design, and a
look counts only once the reference and every encoding it called for hold all its seeds. The family-wise error of
this rule under the global null, and its power, are simulated in tests/test_verdict_simulations.py with the code's
own `primary_family`.
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
    DECIDED,
    PairVerdict,
    compare_pair,
    seeds_needed,
    variance_components,
    verdict_word,
)
from pipelines.experiment.config import roster
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
    "data": "chosen from the data: the best encoding at the first look, whose seeds the tests then used; with such a "
    "reference the design's family-wise error is 0.08-0.10 under the global null instead of at most 0.05 "
    "(tests/test_verdict_simulations.py)",
    "unrecorded": "not recorded (a design written before the reference was fixed in advance: `--ref` when given, "
    "else the best encoding at the first look, chosen from the data)",
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

    def __post_init__(self) -> None:
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
            "ref_rule": self.ref_rule,
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
            ref_rule=data.get("ref_rule", "unrecorded"),
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
                    "p_tost": pair.p_tost,
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
    """Pair statistics over one Evidence."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence

    def pair(self, a: str, b: str, seeds: tuple[int, ...] | None = None) -> PairVerdict:
        """a against b on their finished seeds (those among `seeds` when given)."""
        ev = self.evidence
        sa, sb = ev.seeds_of(a, within=seeds), ev.seeds_of(b, within=seeds)
        ia, ib = ev.encodings.index(a), ev.encodings.index(b)
        return compare_pair(
            a,
            b,
            ev.values[ia, [ev.seeds.index(s) for s in sa]],
            ev.values[ib, [ev.seeds.index(s) for s in sb]],
            sa,
            sb,
            region=ev.metric.equivalence,
            higher_is_better=ev.metric.higher_is_better,
        )


def decide(pairs: list[PairVerdict], alpha: float, look: int | None, plan_seeds: bool = True) -> list[PairVerdict]:
    """Holm over `pairs` at `alpha`, each pair's verdict word (verdict_word) and, when inconclusive (and
    `plan_seeds`), the seeds it would need to detect a difference of the region's edge at the first Holm level."""
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
            needed = seeds_needed(pair.region, pair.seed_sd, alpha / len(pairs), pair.paired)
        decided.append(replace(pair, p_holm=p_holm, alpha=alpha, verdict=word, seeds_needed=needed, look=look))
    return decided


def primary_family(comparator: Comparator, design: Design, ref: str, plan_seeds: bool = True) -> FamilyResult:
    """Every baseline against `ref` under `design` (see the module docstring); `plan_seeds=False` leaves out the
    seeds an inconclusive pair would need (simulations of the rule do not read them)."""
    ev = comparator.evidence
    baselines = [name for name in ev.encodings if name != ref and (not design.encodings or name in design.encodings)]
    return family_over(comparator, design, ref, baselines, plan_seeds)


def family_over(
    comparator: Comparator, design: Design, ref: str, baselines: list[str], plan_seeds: bool = True
) -> FamilyResult:
    """The design's looks over `baselines` against `ref` (see the module docstring), one family at alpha."""
    ev = comparator.evidence
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
        # the family: every pair not yet shown different, so that each look's Holm covers every true null still
        # standing (a futility stop or an equivalence does not leave it; leaving would let the design choose a
        # smaller family from the data); a stopped or equivalent pair keeps its word unless a look rejects it
        family = [b for b in baselines if b not in final or final[b].verdict not in DECIDED]
        decided = decide([comparator.pair(b, ref, seeds) for b in family], design.level, k + 1, plan_seeds)
        last = not design.sequential or k == len(design.looks) - 1
        for pair in decided:
            before = final.get(pair.a)
            if before is not None and before.verdict in ("equivalent", "stopped") and pair.verdict not in DECIDED:
                continue
            if design.sequential and not last and pair.verdict == "inconclusive" and abs(pair.delta) < pair.region:
                pair = replace(pair, verdict="stopped", seeds_needed=None)  # futility: small |Δ|, not equivalent
            final[pair.a] = pair
        look = Look(k + 1, tuple(seeds or ev.seeds), design.level, {b: final[b] for b in family})
        look.calls_for = [] if last else [b for b in family if final[b].verdict == "inconclusive"]
        looks.append(look)
        active = set(look.calls_for)
        if not active:
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
    """A domain's seed-aware statistics: the primary family against `ref`, every pair, the variance components.
    Under a published design, the encodings outside its family (they joined the study later) form their own family
    over the same looks (`joined`), or, below its first look, fixed-sample comparisons (`provisional`)."""

    ref: str | None
    no_tests_reason: str | None  # why there is no primary family (one encoding; a reference given but not run)
    family: FamilyResult | None
    pairs: list[PairVerdict]
    variance: dict[str, float] | str  # components, or why they could not be estimated
    comparator: Comparator | None = None
    ref_note: str = ""  # how the reference was chosen (REF_RULES, or why another than the default)
    joined: FamilyResult | None = None
    provisional: dict[str, PairVerdict] = field(default_factory=dict)

    def verdicts(self) -> dict[str, PairVerdict]:
        """Every baseline's verdict against the reference: the design's family, the joined one, the provisional."""
        out = dict(self.family.verdicts) if self.family else {}
        out.update(self.joined.verdicts if self.joined else {})
        out.update(self.provisional)
        return out

    @property
    def next_runs(self) -> list[tuple[str, int]]:
        """The runs the next look needs, of the design's family and of the joined one."""
        return [*(self.family.next_runs if self.family else []), *(self.joined.next_runs if self.joined else [])]


def fallback_reference(evidence: Evidence) -> str:
    """The reference when the default has no runs: the first encoding of the suite's roster order (the `anchors`
    roster) with finished runs, else the first name; a choice made without looking at any score."""
    order = roster("anchors")
    return next((name for name in order if name in evidence.encodings), sorted(evidence.encodings)[0])


def design_members(evidence: Evidence, design: Design, ref: str) -> tuple[list[str], list[str]]:
    """(the baselines of the design's own family, those that joined the study later): the design's recorded
    encodings, or in a design that records none, every encoding holding the first look's seeds."""
    baselines = [name for name in evidence.encodings if name != ref]
    if design.encodings:
        members = [name for name in baselines if name in design.encodings]
    else:
        first = set(design.look_seeds(0))
        members = [name for name in baselines if first <= set(evidence.seeds_of(name))]
    return members, [name for name in baselines if name not in members]


def joined_verdicts(
    comparator: Comparator, design: Design, ref: str, newcomers: list[str]
) -> tuple[FamilyResult | None, dict[str, PairVerdict]]:
    """The encodings that joined a designed study: their own family over the design's looks and alpha (the study's
    verdicts never change for them), and for those below its first look a fixed-sample comparison on the seeds they
    share with the reference (Holm among them at alpha), said to be so."""
    if not newcomers:
        return None, {}
    first = set(design.look_seeds(0))
    below = [name for name in newcomers if not first <= set(comparator.evidence.seeds_of(name))]
    at_look = [name for name in newcomers if name not in below]
    joined = family_over(comparator, design, ref, at_look) if at_look else None
    if joined is not None:
        joined.verdicts = {name: replace(pair, scope="joined") for name, pair in joined.verdicts.items()}
    provisional = {}
    for pair in decide([comparator.pair(name, ref) for name in below], design.alpha, None):
        held = len(set(comparator.evidence.seeds_of(pair.a)) & first)
        scope = f"below the design's first look: {held} of {len(first)} seeds"
        provisional[pair.a] = replace(pair, scope=scope)
    # the runs those below the first look need next: its seeds they lack
    lacking = [(name, s) for name in below for s in design.look_seeds(0) if s not in comparator.evidence.seeds_of(name)]
    if lacking:
        joined = joined or FamilyResult(ref, design, {}, [], [])
        joined.next_runs += lacking
    return joined, provisional


def seed_verdicts(evidence: Evidence, ref: str | None, design: Design | None) -> SeedVerdicts:
    """The verdicts of a domain. The reference: the design's, else `ref` (given), else DEFAULT_REF when it has
    finished runs, else fallback_reference: never chosen by its score. A design (from make settle) makes the primary
    family sequential; encodings outside its family get their own (joined_verdicts)."""
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
    if design is not None:
        note = REF_RULES[design.ref_rule]
    elif chosen is not None:
        note = REF_RULES["given"]
    elif DEFAULT_REF in evidence.encodings:
        chosen, note = DEFAULT_REF, REF_RULES["default"]
    else:
        chosen = fallback_reference(evidence)
        note = f"the first encoding of the roster order with runs: `{DEFAULT_REF}`, the default, has none here"
    comparator = Comparator(evidence)
    joined, provisional = None, {}
    if design is not None and design.sequential:
        members, newcomers = design_members(evidence, design, chosen)
        family = family_over(comparator, design, chosen, members)
        joined, provisional = joined_verdicts(comparator, design, chosen, newcomers)
    else:
        family = primary_family(comparator, design or fixed_design(evidence, chosen), chosen)
    pairs = every_pair(comparator)
    return SeedVerdicts(chosen, None, family, pairs, variance, comparator, note, joined, provisional)


def matched_scores(evidence: Evidence, verdicts: SeedVerdicts) -> dict[str, float]:
    """What ranks a domain's encodings (DomainResult.matched): each encoding's Δ to the reference on the seeds both
    finished (its verdict's Δ where it has one: the Δ its table row shows), the reference 0. Without a reference:
    each encoding's score on the seeds every encoding finished (its own seeds when none is common to all)."""
    if verdicts.ref is None or verdicts.comparator is None:
        common = tuple(evidence.common_seeds())
        return {name: evidence.score(name, within=common or None) for name in evidence.encodings}
    ref, family = verdicts.ref, verdicts.verdicts()
    return {
        name: 0.0
        if name == ref
        else (family[name].delta if name in family else verdicts.comparator.pair(name, ref).delta)
        for name in evidence.encodings
    }
