"""The recency profile of a run, as plain numbers: how much attention a query gives a key d tokens back.

Per layer, over the inspected windows, every head and every query i (a real token: padding is left out) and
each of its keys j = i - d (d = 0..i), the profile keeps, per distance d:

    count[d]        how many (window, head, query) pairs have a key at distance d
    weight_sum[d]   the sum of their attention weights a_ij;  weight_sq_sum[d] the sum of a_ij^2
    uniform_sum[d]  the sum of 1 / (i + 1): the weights of attention spread evenly over the causal window

so mean[d] = weight_sum / count and std[d] (the spread over windows, heads and queries) pool exactly over seeds
(sums add). The mass beyond a distance lam is the fraction of a query's attention on keys further than lam
tokens back, averaged over the queries that have such keys (i > lam):

    far_mass(lam) = sum_{d > lam} weight_sum[d] / count[floor(lam) + 1]

(a key at distance floor(lam) + 1 exists exactly for those queries), and the same of uniform_sum is what
position-blind attention would give. lam is the longest wavelength 2 pi / theta of the encoding's fast bands
(theta >= 2 pi / L, SPEC 1), or, for an encoding without bands, that of a base-10k RoPE of the same head dim
(`REFERENCE_BASE`), which is also recorded for every encoding so that all are compared at one distance.

`as_json`/`from_json` are the on-disk form (pipelines.report.inspection writes it into the run's inspect/
folder; pipelines.analysis.recency reads it for the study's overlay).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

REFERENCE_BASE = 10_000.0  # the RoPE whose fast-band wavelength measures the encodings without bands


def reference_wavelength(head_dim: int, context: int) -> float:
    """The longest fast-band wavelength 2 pi / theta_j (theta_j >= 2 pi / L) of a base-10k RoPE of this head dim
    at training context L (2 pi, band 0's, when L is too short for any band to turn once)."""
    theta = REFERENCE_BASE ** (-np.arange(0, head_dim, 2) / head_dim)
    fast = theta[theta >= 2 * math.pi / context]
    return float(2 * math.pi / fast.min()) if fast.size else 2 * math.pi


@dataclass
class LayerRecency:
    """One layer's sums by distance (index d = 0..T-1) and the range of the per-query weight sums (1 if softmax)."""

    count: np.ndarray
    weight_sum: np.ndarray
    weight_sq_sum: np.ndarray
    uniform_sum: np.ndarray
    query_sum_min: float
    query_sum_max: float

    @property
    def mean(self) -> np.ndarray:
        return self.weight_sum / np.maximum(self.count, 1)

    @property
    def std(self) -> np.ndarray:
        mean = self.mean
        return np.sqrt(np.maximum(self.weight_sq_sum / np.maximum(self.count, 1) - mean**2, 0.0))

    @property
    def uniform(self) -> np.ndarray:
        """The mean weight at each distance of attention spread evenly over the causal window."""
        return self.uniform_sum / np.maximum(self.count, 1)

    def far_mass(self, wavelength: float, uniform: bool = False) -> float:
        """Mean share of attention beyond `wavelength` tokens, over the queries that have keys that far (nan when
        none has)."""
        first = math.floor(wavelength) + 1
        if first >= self.count.size or self.count[first] == 0:
            return math.nan
        sums = self.uniform_sum if uniform else self.weight_sum
        return float(sums[first:].sum() / self.count[first])

    def pooled(self, other: LayerRecency) -> LayerRecency:
        """The profile over both sets of windows (a longer one keeps its far distances)."""
        size = max(self.count.size, other.count.size)

        def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return np.pad(a, (0, size - a.size)) + np.pad(b, (0, size - b.size))

        return LayerRecency(
            add(self.count, other.count),
            add(self.weight_sum, other.weight_sum),
            add(self.weight_sq_sum, other.weight_sq_sum),
            add(self.uniform_sum, other.uniform_sum),
            min(self.query_sum_min, other.query_sum_min),
            max(self.query_sum_max, other.query_sum_max),
        )


@dataclass
class RecencyProfile:
    """A run's recency profile on one split: one LayerRecency per layer and the distances it is measured at."""

    layers: list[LayerRecency]
    context: int  # training context L
    window: int  # the split's window length T
    wavelength: float  # the encoding's longest fast-band wavelength, or the reference for an encoding without bands
    wavelength_source: str  # which of the two, in words
    reference: float  # the base-10k RoPE's, the same distance for every encoding

    def as_json(self) -> dict:
        return {
            "context": self.context,
            "window": self.window,
            "wavelength": self.wavelength,
            "wavelength_source": self.wavelength_source,
            "reference_wavelength": self.reference,
            "reference_source": f"base-{REFERENCE_BASE:g} RoPE of the same head dim",
            "far_mass": self.far_mass_json(self.wavelength),
            "far_mass_reference": self.far_mass_json(self.reference),
            "layers": [
                {
                    "distance": np.arange(layer.count.size).tolist(),
                    "count": layer.count.astype(int).tolist(),
                    "mean": _rounded(layer.mean),
                    "std": _rounded(layer.std),
                    "uniform": _rounded(layer.uniform),
                    "weight_sum": _rounded(layer.weight_sum, 10),
                    "weight_sq_sum": _rounded(layer.weight_sq_sum, 10),
                    "uniform_sum": _rounded(layer.uniform_sum, 10),
                    "query_weight_sum": {"min": layer.query_sum_min, "max": layer.query_sum_max},
                }
                for layer in self.layers
            ],
        }

    def far_mass_json(self, wavelength: float) -> dict:
        """The mass beyond `wavelength` per layer, with attention spread evenly over the causal window beside it."""
        return {
            "beyond": wavelength,
            "layers": [layer.far_mass(wavelength) for layer in self.layers],
            "uniform": [layer.far_mass(wavelength, uniform=True) for layer in self.layers],
        }

    @classmethod
    def from_json(cls, data: dict) -> RecencyProfile:
        """The profile `as_json` wrote; KeyError, TypeError or ValueError when the data is not one."""
        layers = [
            LayerRecency(
                np.asarray(layer["count"], dtype=float),
                np.asarray(layer["weight_sum"], dtype=float),
                np.asarray(layer["weight_sq_sum"], dtype=float),
                np.asarray(layer["uniform_sum"], dtype=float),
                float(layer["query_weight_sum"]["min"]),
                float(layer["query_weight_sum"]["max"]),
            )
            for layer in data["layers"]
        ]
        if not layers or any(not np.all(np.isfinite(layer.weight_sum)) for layer in layers):
            raise ValueError("no layers, or non-finite weights")
        return cls(
            layers,
            int(data["context"]),
            int(data["window"]),
            float(data["wavelength"]),
            str(data["wavelength_source"]),
            float(data["reference_wavelength"]),
        )

    def pooled(self, other: RecencyProfile) -> RecencyProfile:
        """Both profiles' windows together (seeds of one encoding): the layers' sums added."""
        if len(other.layers) != len(self.layers):
            raise ValueError(f"profiles of {len(self.layers)} and {len(other.layers)} layers cannot be pooled")
        layers = [a.pooled(b) for a, b in zip(self.layers, other.layers, strict=True)]
        return RecencyProfile(
            layers,
            self.context,
            max(self.window, other.window),
            self.wavelength,
            self.wavelength_source,
            self.reference,
        )


def _rounded(values: np.ndarray, digits: int = 6) -> list[float]:
    """Values to `digits` significant digits, so that the JSON stays small and readable."""
    return [float(f"{v:.{digits}g}") for v in values]
