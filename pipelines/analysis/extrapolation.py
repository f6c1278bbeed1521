"""The seed-paired test of extrapolation (SPEC 3): each encoding's NLL past the training length against the
reference's, seed by seed, on every split scored at a longer window."""

from __future__ import annotations

import numpy as np

from pipelines.analysis.curves import Curve
from pipelines.analysis.design import ALPHA
from pipelines.analysis.sequential import decide
from pipelines.analysis.verdict import PairVerdict, compare_pair


def past_length_verdicts(
    curves: list[Curve], ref: str | None, region: float
) -> dict[tuple[str, str], list[PairVerdict]]:
    """The seed-paired test of the extrapolation: on each (group, split) scored past the training context, every
    encoding (YaRN rows included) against `ref` by its NLL at positions >= L, seed by seed (compare_pair on one
    value per seed), Holm over the split's baselines at ALPHA, TOST at `region`: a fixed-sample family per split,
    apart from the verdict's. Empty without a reference or where `ref` has no curve."""
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
        pairs = []
        for name, curve in found.items():
            if name == ref:
                continue
            seeds_a, seeds_b = sorted(curve.seed_past), sorted(base.seed_past)
            pairs.append(
                compare_pair(
                    name,
                    ref,
                    np.array([[curve.seed_past[s]] for s in seeds_a]),
                    np.array([[base.seed_past[s]] for s in seeds_b]),
                    seeds_a,
                    seeds_b,
                    region=region,
                    higher_is_better=False,
                )
            )
        out[key] = decide(pairs, ALPHA, None)
    return out
