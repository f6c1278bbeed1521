"""The seed-paired test of extrapolation (SPEC 3): each encoding's NLL past the training length against the
reference's, seed by seed, on every split scored at a longer window."""

from __future__ import annotations

import numpy as np

from pipelines.analysis.curves import Curve
from pipelines.analysis.design import ALPHA
from pipelines.analysis.sequential import SeedVerdicts, decide
from pipelines.analysis.verdict import PairVerdict, compare_pair
from pipelines.runs.layout import DERIVED_MARK


def past_length_verdicts(
    curves: list[Curve], verdicts: SeedVerdicts | None, region: float
) -> dict[tuple[str, str], list[PairVerdict]]:
    """The seed-paired test of the extrapolation: on each (group, split) scored past the training context, every
    encoding (YaRN rows included) against the reference by its NLL at positions >= L, seed by seed (compare_pair on
    one value per seed), Holm at ALPHA over the split's baselines of each family (the study's own encodings, those
    that joined it: a YaRN row goes with its rope run), TOST at `region`: fixed-sample families per split, apart
    from the verdict's. Empty without a reference or where the reference has no curve."""
    ref = verdicts.ref if verdicts is not None else None
    if ref is None:
        return {}
    by_split: dict[tuple[str, str], dict[str, Curve]] = {}
    for curve in curves:
        if curve.status == "ok" and curve.seed_past:
            by_split.setdefault((curve.group, curve.split), {})[curve.encoding] = curve
    out = {}
    for key, found in by_split.items():
        if ref not in found:
            continue
        base = found[ref]
        pairs = {name: past_pair(name, ref, curve, base, region) for name, curve in found.items() if name != ref}
        trained = {name.split(DERIVED_MARK)[0] for name in pairs}
        decided = {}
        for family in verdicts.corrections(sorted(trained)):
            members = [name for name in pairs if name.split(DERIVED_MARK)[0] in family]
            decided.update({pair.a: pair for pair in decide([pairs[name] for name in members], ALPHA, None)})
        out[key] = [decided[name] for name in pairs]
    return out


def past_pair(name: str, ref: str, curve: Curve, base: Curve, region: float) -> PairVerdict:
    """`name`'s NLL past L against the reference's, one value per seed."""
    seeds_a, seeds_b = sorted(curve.seed_past), sorted(base.seed_past)
    return compare_pair(
        name,
        ref,
        np.array([[curve.seed_past[s]] for s in seeds_a]),
        np.array([[base.seed_past[s]] for s in seeds_b]),
        seeds_a,
        seeds_b,
        region=region,
        higher_is_better=False,
    )
