"""Verdict families and the group-sequential design that buys seeds where a question needs them (SPEC 3).

The primary family: every baseline against the reference. A fixed-sample comparison is one look: the seed-level
test of each pair (pipelines.analysis.verdict) on the seeds both encodings finished, Holm over the family at
alpha = 0.05. `make settle` adds seeds in a design fixed before the first look
(pipelines.analysis.design): at look k, Holm at alpha_k over the pairs still open; see `Design` for the looks and
the spending.

Every look is recomputed from the runs: the verdicts are a pure function of the evidence and the design, and a
look counts only once the reference and every encoding it called for hold all its seeds. Each open pair carries its
predictive power at the next look (plan_next_look), a planning figure.

A study's figures are its own: under a design, the encodings that joined the study later are a family apart (their
looks, their every-pair Holm, their pooled variance), and no figure of the study's own encodings reads a joined one
(SeedVerdicts.members). The family-wise error of the rule under the global null, its power and the planning
figure's calibration are simulated as make settle trains the design (tests/test_verdict_simulations.py,
tests/test_settle_simulations.py, tests/test_moderated_simulations.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from pipelines.analysis.design import ALPHA, DEFAULT_REF, REF_RULES, Design, fixed_design
from pipelines.analysis.matrix import Evidence
from pipelines.analysis.moderated import MIN_ENCODINGS, MIN_SEEDS, Prior, blocked_prior, fit_prior
from pipelines.analysis.stats import holm_adjust
from pipelines.analysis.variance import variance_components
from pipelines.analysis.verdict import (
    DECIDED,
    OPEN,
    Belief,
    NextTest,
    PairVerdict,
    compare_pair,
    futile,
    predictive_power,
    seeds_needed,
    verdict_word,
)
from pipelines.experiment.config import roster


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
                    "decision": [pair.decision_level, *pair.decision_interval()[1:]],
                    "df": pair.df,
                    "variance": pair.variance,
                    "predictive_power": pair.predictive_power,
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
    """Pair statistics over one Evidence. `blocked`: the pairs against a reference borrow strength for their seed
    variance from the other encodings of their family (pipelines.analysis.moderated) where its rules allow."""

    def __init__(self, evidence: Evidence, blocked: bool = True) -> None:
        self.evidence = evidence
        self.blocked = blocked
        self._priors: dict[tuple, Prior] = {}
        self._pairs: dict[tuple, PairVerdict] = {}

    def prior(self, seeds: tuple[int, ...], ref: str, pool: tuple[str, ...], min_seeds: int = MIN_SEEDS) -> Prior:
        """The blocked prior at `seeds` over the encodings of `pool` (a family: its baselines and `ref`, the
        reference) that finished all of them (cached; `min_seeds`: see blocked_prior). Only the family's own
        encodings: an encoding of another family (one that joined the study) never moves this family's variances."""
        key = (tuple(seeds), ref, tuple(sorted(pool)), min_seeds)
        if key not in self._priors:
            ev = self.evidence
            names = [name for name in ev.encodings if name in pool and set(seeds) <= set(ev.seeds_of(name))]
            columns = [ev.seeds.index(s) for s in seeds]
            table = np.array([ev.values[ev.encodings.index(name)][columns].mean(axis=1) for name in names])
            ref_row = names.index(ref) if ref in names else None
            self._priors[key] = blocked_prior(table.reshape(len(names), len(seeds)), ref_row, min_seeds)
        return self._priors[key]

    def pair(
        self, a: str, b: str, seeds: tuple[int, ...] | None = None, pool: tuple[str, ...] | None = None
    ) -> PairVerdict:
        """a against b on their finished seeds (those among `seeds` when given; cached by the seeds each holds).
        `pool`: b is the reference of the family whose encodings `pool` names (b included), and the pair's seed
        variance is moderated toward theirs where the blocked analysis's rules allow; None: the pair's own variance."""
        ev = self.evidence
        sa, sb = ev.seeds_of(a, within=seeds), ev.seeds_of(b, within=seeds)
        key = (a, b, tuple(sa), tuple(sb), None if pool is None else tuple(sorted(pool)))
        if key not in self._pairs:
            self._pairs[key] = self._compare(a, b, sa, sb, pool)
        return self._pairs[key]

    def _compare(self, a: str, b: str, sa: list[int], sb: list[int], pool: tuple[str, ...] | None) -> PairVerdict:
        ev = self.evidence
        ia, ib = ev.encodings.index(a), ev.encodings.index(b)
        common = tuple(s for s in sa if s in sb)
        prior = self.prior(common, b, pool) if pool is not None and self.blocked and len(common) >= 2 else None
        return compare_pair(
            a,
            b,
            ev.values[ia, [ev.seeds.index(s) for s in sa]],
            ev.values[ib, [ev.seeds.index(s) for s in sb]],
            sa,
            sb,
            region=ev.metric.equivalence,
            higher_is_better=ev.metric.higher_is_better,
            prior=prior,
        )


def decide(pairs: list[PairVerdict], alpha: float, look: int | None, plan_seeds: bool = True) -> list[PairVerdict]:
    """Holm over the `pairs` that have a test at `alpha`, each pair's verdict word (verdict_word), the level of the
    interval it rests on (PairVerdict.decision_level) and, when inconclusive (and `plan_seeds`), the seeds it would
    need to detect a difference of the region's edge at the first Holm level. A pair without a test (one seed a
    side, or one shared seed) is in no correction: it gets no Holm p and the word `open` (no verdict yet), and counting
    it would only make the tested pairs' levels stricter (SPEC 3)."""
    if not pairs:
        return []
    tested = [i for i, pair in enumerate(pairs) if math.isfinite(pair.p)]
    m = len(tested)
    raw = np.array([pairs[i].p for i in tested])
    adjusted = np.full(len(pairs), math.nan)
    rank = np.zeros(len(pairs), int)
    if m:
        adjusted[tested] = holm_adjust(raw)
        rank[np.array(tested)[np.argsort(raw, kind="stable")]] = np.arange(1, m + 1)
    # Holm stops at the first rank it does not reject; every pair it leaves open has p >= that rank's level
    stop = min((int(rank[i]) for i in tested if not adjusted[i] < alpha), default=m + 1)
    decided = []
    for pair, p_holm, j in zip(pairs, adjusted, rank, strict=True):
        p_holm = float(p_holm)
        word = verdict_word(pair, p_holm, alpha)
        needed = None
        if word == "inconclusive" and plan_seeds and m:
            needed = seeds_needed(pair.region, pair.seed_sd, alpha / m, pair.paired)
        if not math.isfinite(pair.p):
            level = math.nan
        elif word == "equivalent":
            level = 1 - 2 * alpha
        elif word in DECIDED:
            level = 1 - alpha / (m - int(j) + 1)
        else:
            level = 1 - alpha / (m - stop + 1) if stop <= m else 1 - alpha
        decided.append(
            replace(
                pair,
                p_holm=p_holm,
                alpha=alpha,
                verdict=word,
                seeds_needed=needed,
                look=look,
                decision_level=level,
                holm_rank=int(j),
                family_size=m if math.isfinite(pair.p) else 0,
            )
        )
    return decided


def primary_family(comparator: Comparator, design: Design, ref: str, plan_seeds: bool = True) -> FamilyResult:
    """Every baseline against `ref` under `design` (see the module docstring); `plan_seeds=False` leaves out the
    planning figures (the seeds an inconclusive pair would need, its predictive power at the next look: simulations
    of the rule do not read them)."""
    ev = comparator.evidence
    baselines = [name for name in ev.encodings if name != ref and (not design.encodings or name in design.encodings)]
    return family_over(comparator, design, ref, baselines, plan_seeds)


def family_over(
    comparator: Comparator,
    design: Design,
    ref: str,
    baselines: list[str],
    plan_seeds: bool = True,
    predict: bool | None = None,
) -> FamilyResult:
    """The design's looks over `baselines` against `ref` (see the module docstring), one family at alpha; `predict`
    (by default as `plan_seeds`): each open pair's predictive power at the next look (plan_next_look)."""
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
        pool = (ref, *baselines)  # the family's own encodings: their variances alone are pooled
        decided = decide([comparator.pair(b, ref, seeds, pool) for b in family], design.level, k + 1, plan_seeds)
        last = not design.sequential or k == len(design.looks) - 1
        for pair in decided:
            before = final.get(pair.a)
            if before is not None and before.verdict in ("equivalent", "stopped") and pair.verdict not in DECIDED:
                # it keeps its word and the look that gave it, with this look's Holm p and decision level: it is
                # in this look's family, whose size sets them
                level = pair.decision_level if before.verdict == "stopped" else before.decision_level
                final[pair.a] = replace(
                    before,
                    p_holm=pair.p_holm,
                    holm_rank=pair.holm_rank,
                    family_size=pair.family_size,
                    decision_level=level,
                )
                continue
            if design.sequential and not last and pair.verdict == "inconclusive":
                # the design's futility rule, at the look's first Holm level (the power at the cap were the true Δ
                # its 95% interval's far end)
                cap, first_level = design.looks[-1], design.level / len(decided)
                if futile(pair, design.futility, cap, first_level):
                    pair = replace(pair, verdict="stopped", seeds_needed=None)
            final[pair.a] = pair
        look = Look(k + 1, tuple(seeds or ev.seeds), design.level, {b: final[b] for b in family})
        look.calls_for = [] if last else [b for b in family if final[b].verdict == "inconclusive"]
        if look.calls_for and (plan_seeds if predict is None else predict):
            plan_next_look(comparator, design, k, ref, final, decided, look.calls_for, baselines)
            look.pairs = {b: final[b] for b in family}
        looks.append(look)
        active = set(look.calls_for)
        if not active:
            break
    return FamilyResult(ref, design, {b: final[b] for b in baselines if b in final}, looks, next_runs)


def plan_next_look(
    comparator: Comparator,
    design: Design,
    k: int,
    ref: str,
    final: dict[str, PairVerdict],
    tested: list[PairVerdict],
    open_pairs: list[str],
    baselines: list[str],
) -> None:
    """Planning, not evidence: each open pair's predictive power at the design's next look (k + 1, 0-based), set in
    `final`: the probability that the look's test shows it different, over the Δ and seed SD its seeds so far make
    plausible (verdict.predictive_power, under what the look's pairs together say: family_belief). The test is the
    one the next look will run as far as this look can tell (next_test), at the level Holm will test it at: its
    alpha over the pairs the family will hold less those expected to be shown different before it (the other open
    pairs' predictive powers at Holm's first level, summed)."""
    family_size = sum(final[b].verdict not in DECIDED for b in baselines)
    test = next_test(comparator, design, k, ref, open_pairs, family_size)
    belief = family_belief(tested)

    def power(name: str, alpha: float) -> float:
        pair = final[name]
        return predictive_power(len(pair.seeds_a), pair.delta, pair.own_sd, replace(test, alpha=alpha), belief)

    first = {name: power(name, test.alpha) for name in open_pairs}
    expected = sum(value for value in first.values() if math.isfinite(value))
    for name in open_pairs:
        ahead = expected - (first[name] if math.isfinite(first[name]) else 0.0)
        final[name] = replace(final[name], predictive_power=power(name, design.level / max(1.0, family_size - ahead)))


def family_belief(pairs: list[PairVerdict]) -> Belief:
    """What the pairs one look tested say about any one of them before its own seeds (verdict.Belief), by the
    method of moments: the spread of the true differences, the mean of Δ^2 - se^2 (each Δ's square overstates its
    true one's by se^2 on average), at least 0; and the prior of a pair's variance of seed differences, limma's fit
    to the pairs' own variances (moderated.fit_prior). Without them a flat prior took a chance extreme for an
    effect: under the global null, pairs shown at 0.5-0.9 were decided 2% of the time."""
    tested = [pair for pair in pairs if math.isfinite(pair.contrast.se) and pair.paired]
    if len(tested) < 2:
        return Belief()
    spread = max(0.0, float(np.mean([pair.delta**2 - pair.contrast.se**2 for pair in tested])))
    raw = np.array([pair.own_sd**2 for pair in tested])
    if np.any(raw <= 0) or len({len(pair.seeds_a) for pair in tested}) > 1:
        return Belief(spread)
    d0, s0_squared = fit_prior(raw, len(tested[0].seeds_a) - 1.0)
    return Belief(spread, d0, s0_squared)


def next_test(
    comparator: Comparator, design: Design, k: int, ref: str, open_pairs: list[str], family_size: int
) -> NextTest:
    """The test the next look (k + 1) will run on each open pair, forecast from look k: its seeds, its first Holm
    level (alpha over `family_size`), and the prior of the encodings that will hold its seeds (the reference and
    `open_pairs`, as make settle trains them) fitted on look k's seeds, where the blocked analysis's rules (but the
    number of seeds, which the next look will have) hold: pipelines.analysis.moderated."""
    seeds = len(design.look_seeds(k + 1))
    level = design.level / family_size
    if seeds < MIN_SEEDS or len(open_pairs) + 1 < MIN_ENCODINGS:
        return NextTest(seeds, level)
    prior = comparator.prior(design.look_seeds(k), ref, (ref, *open_pairs), min_seeds=2)
    if not prior.used:
        return NextTest(seeds, level)
    return NextTest(seeds, level, prior.d0, prior.s0_squared, float(len(open_pairs) * (seeds - 1)))


def every_pair(
    comparator: Comparator, alpha: float = ALPHA, members: tuple[str, ...] | None = None
) -> list[PairVerdict]:
    """The secondary family: every pair of encodings (a before b in the evidence's order), each on the seeds both
    finished, Holm at `alpha` (fixed sample; not part of any sequential design). With `members` (a study's own
    encodings), the pairs among them are one family and every pair with an encoding that joined the study another:
    no joined encoding changes a correction of the study's own pairs."""
    names = comparator.evidence.encodings
    pairs = [comparator.pair(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    if members is None:
        return decide(pairs, alpha, None)
    own = [pair.a in members and pair.b in members for pair in pairs]
    decided = iter(decide([pair for pair, mine in zip(pairs, own, strict=True) if mine], alpha, None))
    joined = iter(decide([pair for pair, mine in zip(pairs, own, strict=True) if not mine], alpha, None))
    return [next(decided) if mine else next(joined) for mine in own]


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
    # the study's own encodings (a design's recorded baselines and its reference), whose figures no joined encoding
    # changes; None: every encoding is the study's (no design, or one that records no membership)
    members: tuple[str, ...] | None = None

    def corrections(self, names) -> list[list[str]]:
        """`names` as the families each correction runs over: the study's own encodings, then those that joined it
        (a Holm correction over both would let a joined encoding move the study's own p-values); one family
        without a membership. Empty families are left out."""
        own = [name for name in names if self.members is None or name in self.members]
        joined = [name for name in names if name not in own]
        return [family for family in (own, joined) if family]

    def verdicts(self) -> dict[str, PairVerdict]:
        """Every baseline's verdict against the reference: the design's family, the joined one, the provisional."""
        out = dict(self.family.verdicts) if self.family else {}
        out.update(self.joined.verdicts if self.joined else {})
        out.update(self.provisional)
        return out

    def looks_record(self) -> dict:
        """What a settle record holds beside its design, recomputed from the evidence: the design's looks, the
        joined family's, and the runs the next look needs (pipelines.settle.record; make publish writes it into the
        study's record so that the record and the report never disagree)."""
        return {
            "looks": [look.to_json() for look in self.family.looks] if self.family else [],
            "joined_looks": [look.to_json() for look in self.joined.looks] if self.joined else [],
            "next_runs": [f"{name}/seed{seed}" for name, seed in self.next_runs],
        }

    @property
    def next_runs(self) -> list[tuple[str, int]]:
        """The runs the next look needs, of the design's family and of the joined one, each once: both families
        call for the reference's new seeds, which one run serves."""
        runs = [*(self.family.next_runs if self.family else []), *(self.joined.next_runs if self.joined else [])]
        return list(dict.fromkeys(runs))


def fallback_reference(evidence: Evidence) -> str:
    """The reference when the default has no runs: the first encoding of the suite's roster order (the `anchors`
    roster) with finished runs, else the first name; a choice made without looking at any score."""
    order = roster("anchors")
    return next((name for name in order if name in evidence.encodings), sorted(evidence.encodings)[0])


def design_members(evidence: Evidence, design: Design, ref: str) -> tuple[list[str], list[str]]:
    """(the baselines of the design's own family, those that joined the study later): the design's recorded
    encodings, those without a run yet included (a design fixed before its runs: their first look's runs are due,
    never dropped from the family), or in a design that records none, every encoding holding the first look's
    seeds."""
    baselines = [name for name in evidence.encodings if name != ref]
    if design.encodings:
        unrun = sorted(name for name in design.encodings if name != ref and name not in evidence.encodings)
        members = [name for name in baselines if name in design.encodings] + unrun
    else:
        first = set(design.look_seeds(0))
        members = [name for name in baselines if first <= set(evidence.seeds_of(name))]
    return members, [name for name in baselines if name not in members]


def joined_verdicts(
    comparator: Comparator, design: Design, ref: str, newcomers: list[str]
) -> tuple[FamilyResult | None, dict[str, PairVerdict]]:
    """The encodings that joined a designed study: their own family over the design's looks and alpha (the study's
    verdicts never change for them), and for those below its first look their Δ on the seeds they share with the
    reference, without a verdict word (one budget: the joined family's), said to be so."""
    if not newcomers:
        return None, {}
    first = set(design.look_seeds(0))
    below = [name for name in newcomers if not first <= set(comparator.evidence.seeds_of(name))]
    at_look = [name for name in newcomers if name not in below]
    joined = family_over(comparator, design, ref, at_look) if at_look else None
    if joined is not None:
        joined.verdicts = {name: replace(pair, scope="joined") for name, pair in joined.verdicts.items()}
    # below the first look: Δ on the seeds shared with the reference, and no verdict word (a fixed-sample test here
    # would spend an alpha of its own beside the joined family's, and its seeds then join that family's looks)
    provisional = {}
    for name in below:
        pair = comparator.pair(name, ref)
        held = len(set(comparator.evidence.seeds_of(name)) & first)
        scope = f"below the design's first look: {held} of {len(first)} seeds, no verdict yet"
        provisional[name] = replace(pair, scope=scope, alpha=design.level, verdict=OPEN)
    # the runs those below the first look need next: its seeds they lack
    lacking = [(name, s) for name in below for s in design.look_seeds(0) if s not in comparator.evidence.seeds_of(name)]
    if lacking:
        joined = joined or FamilyResult(ref, design, {}, [], [])
        joined.next_runs += lacking
    return joined, provisional


def seed_verdicts(evidence: Evidence, ref: str | None, design: Design | None) -> SeedVerdicts:
    """The verdicts of a domain. The reference: the design's, else `ref` (given), else DEFAULT_REF when it has
    finished runs, else fallback_reference: never chosen by its score. A design (from make settle) makes the primary
    family sequential; encodings outside its family get their own (joined_verdicts), and every figure of the
    study's own encodings (its every-pair family, its variance components) is computed from them alone."""
    # a design's reference alone (a first look's first runs) still has the runs that look needs: its family says them
    first_runs = design is not None and design.sequential and list(evidence.encodings) == [design.ref]
    if len(evidence.encodings) < 2 and not first_runs:
        reason = "No paired tests: only one encoding has finished runs."
        return SeedVerdicts(None, reason, None, [], components(evidence))
    chosen = (design.ref if design else None) or ref
    if chosen is not None and chosen not in evidence.encodings:
        why = "the design's" if design and design.ref else "given"
        reason = f"No paired tests: `{chosen}` ({why}) has no finished run here; choose one with `--ref`."
        return SeedVerdicts(None, reason, None, [], components(evidence))
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
    joined, provisional, own = None, {}, None
    if design is not None and design.sequential:
        members, newcomers = design_members(evidence, design, chosen)
        family = family_over(comparator, design, chosen, members)
        joined, provisional = joined_verdicts(comparator, design, chosen, newcomers)
        own = (chosen, *members)
    else:
        family = primary_family(comparator, design or fixed_design(evidence.seeds, chosen), chosen)
    pairs = every_pair(comparator, members=own)
    studied = evidence if own is None else evidence.only(own)
    return SeedVerdicts(
        chosen, None, family, pairs, components(studied), comparator, note, joined, provisional, members=own
    )


def components(evidence: Evidence) -> dict[str, float] | str:
    """The variance components of the seeds every encoding of `evidence` finished, or why they are not estimated."""
    try:
        return variance_components(evidence.complete())
    except ValueError:
        return (
            f"not estimated: needs at least 2 encodings x 2 seeds every encoding finished x 2 {evidence.blocks}s; "
            f"here {len(evidence.encodings)} x {len(evidence.common_seeds())} x {len(evidence.example_ids)}"
        )


def matched_scores(evidence: Evidence, verdicts: SeedVerdicts) -> dict[str, float]:
    """What ranks a domain's encodings (DomainResult.matched): each encoding's Δ to the reference over every seed
    both finished (SPEC 3; a verdict decided at an earlier look rests on that look's seeds, and its table row shows
    that Δ), the reference 0. Without a reference: each encoding's score on the seeds every encoding finished (its
    own seeds when none is common to all)."""
    if verdicts.ref is None or verdicts.comparator is None:
        common = tuple(evidence.common_seeds())
        return {name: evidence.score(name, within=common or None) for name in evidence.encodings}
    ref = verdicts.ref
    return {name: 0.0 if name == ref else verdicts.comparator.pair(name, ref).delta for name in evidence.encodings}
