"""Sleep-EDF tokens: 256 quantile bins of the normalised signal, their boundaries computed exactly from the pooled
training samples one night at a time.
"""

from __future__ import annotations

import numpy as np

VOCAB_SIZE = 256


def quantise(normalised: np.ndarray, boundaries: np.ndarray) -> np.ndarray:
    """Token = index of the bin: the number of boundaries <= x (0..len(boundaries)), as uint8."""
    return np.searchsorted(boundaries, normalised, side="right").astype(np.uint8)


def pooled_quantiles(value_counts: list[tuple[np.ndarray, np.ndarray]], probabilities: np.ndarray) -> np.ndarray:
    """numpy.quantile(concatenated samples, probabilities) (default linear method) from per-part value counts.

    `value_counts` holds, per part, its distinct values and how often each occurs (np.unique(..., return_counts)),
    so the pooled samples are never materialised: a night of 12-bit EEG has at most 4096 distinct values.
    """
    values = np.concatenate([v for v, _ in value_counts])
    counts = np.concatenate([c for _, c in value_counts]).astype(np.int64)
    distinct, inverse = np.unique(values, return_inverse=True)
    totals = np.zeros(len(distinct), dtype=np.int64)
    np.add.at(totals, inverse, counts)
    ends = np.cumsum(totals)  # sorted sample p is distinct[searchsorted(ends, p, side="right")]
    n = int(ends[-1])
    virtual = (n - 1) * np.asarray(probabilities, dtype=np.float64)
    below = np.floor(virtual)
    gamma = virtual - below
    low = below.astype(np.int64)
    a = distinct[np.searchsorted(ends, low, side="right")]
    b = distinct[np.searchsorted(ends, np.minimum(low + 1, n - 1), side="right")]
    # numpy's _lerp, including its switch to interpolating from b above gamma 0.5, so the results are identical
    return np.where(gamma >= 0.5, b - (b - a) * (1 - gamma), a + (b - a) * gamma)
