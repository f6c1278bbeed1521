"""Where a domain's noise lives: the variance components of its (encoding, seed, example) scores (SPEC 3), by the
method of moments on the crossed three-way layout of the seeds every encoding finished."""

from __future__ import annotations

import numpy as np

VARIANCE_COMPONENTS = ("encoding", "seed", "example", "encoding x seed", "encoding x example", "seed x example")


def variance_components(values: np.ndarray) -> dict[str, float]:
    """Variance components of a complete (E encodings, S seeds, N examples) array, one score per cell, by the
    method of moments on the crossed three-way ANOVA (every factor random): the expected mean squares
      MS_e  = s2 + S s2_ei + N s2_es + S N s2_e      MS_es = s2 + N s2_es
      MS_s  = s2 + E s2_si + N s2_es + E N s2_s      MS_ei = s2 + S s2_ei
      MS_i  = s2 + E s2_si + S s2_ei + E S s2_i      MS_si = s2 + E s2_si
      MS_residual = s2 (the three-way interaction, confounded with the error)
    solved for the components; a negative estimate is reported as 0 (the usual truncation). Needs E, S, N >= 2."""
    values = np.asarray(values, float)
    e, s, n = values.shape
    if min(e, s, n) < 2 or not np.isfinite(values).all():
        raise ValueError(f"variance components need a complete array of at least 2 x 2 x 2, got {values.shape}")
    grand = values.mean()
    m_e, m_s, m_i = values.mean(axis=(1, 2)), values.mean(axis=(0, 2)), values.mean(axis=(0, 1))
    m_es, m_ei, m_si = values.mean(axis=2), values.mean(axis=1), values.mean(axis=0)
    ss_e = s * n * ((m_e - grand) ** 2).sum()
    ss_s = e * n * ((m_s - grand) ** 2).sum()
    ss_i = e * s * ((m_i - grand) ** 2).sum()
    ss_es = n * ((m_es - m_e[:, None] - m_s[None, :] + grand) ** 2).sum()
    ss_ei = s * ((m_ei - m_e[:, None] - m_i[None, :] + grand) ** 2).sum()
    ss_si = e * ((m_si - m_s[:, None] - m_i[None, :] + grand) ** 2).sum()
    residual = (
        values
        - m_es[:, :, None]
        - m_ei[:, None, :]
        - m_si[None, :, :]
        + m_e[:, None, None]
        + m_s[None, :, None]
        + m_i[None, None, :]
        - grand
    )
    ms = {
        "e": ss_e / (e - 1),
        "s": ss_s / (s - 1),
        "i": ss_i / (n - 1),
        "es": ss_es / ((e - 1) * (s - 1)),
        "ei": ss_ei / ((e - 1) * (n - 1)),
        "si": ss_si / ((s - 1) * (n - 1)),
        "r": (residual**2).sum() / ((e - 1) * (s - 1) * (n - 1)),
    }
    s2 = ms["r"]
    s2_es, s2_ei, s2_si = (ms["es"] - s2) / n, (ms["ei"] - s2) / s, (ms["si"] - s2) / e
    components = {
        "encoding": (ms["e"] - s2 - s * s2_ei - n * s2_es) / (s * n),
        "seed": (ms["s"] - s2 - e * s2_si - n * s2_es) / (e * n),
        "example": (ms["i"] - s2 - e * s2_si - s * s2_ei) / (e * s),
        "encoding x seed": s2_es,
        "encoding x example": s2_ei,
        "seed x example": s2_si,
        "residual": s2,
    }
    return {name: max(0.0, float(value)) for name, value in components.items()}
