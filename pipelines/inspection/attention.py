"""Attention by distance: a trained model's attention weights (models.gpt's `GPT.attention_weights`, computed
exactly as the model attends) summed by query-key distance over a few evaluation windows, one window at a time
(memory: n_layer x H x T^2 weights), into a RecencyProfile (pipelines.inspection.recency)."""

from __future__ import annotations

import math

import numpy as np
import torch

from models.encodings.darope import DaRoPE
from models.encodings.lerope import LeRoPE
from models.encodings.pope import PoPE
from models.encodings.rope import RoPE
from models.gpt import GPT
from pipelines.inspection.recency import REFERENCE_BASE, LayerRecency, RecencyProfile, reference_wavelength


def band_frequencies(model: GPT) -> tuple[np.ndarray, np.ndarray] | None:
    """The frequencies the encoding turns its bands (PoPE: its components) at, as trained (LeRoPE's learned
    exp(a_j) theta_j), and which of them are fast: theta_j >= 2 pi / L, or DaRoPE's position-driven bands (its
    slow bands turn by the content coordinate). None for an encoding without bands."""
    encoding = model.encoding
    if not isinstance(encoding, RoPE | PoPE):
        return None
    with torch.no_grad():
        theta = encoding.theta.double()
        if isinstance(encoding, LeRoPE):
            theta = theta * encoding.log_scale.double().exp()
        theta = theta.cpu().numpy()
    fast = theta >= 2 * math.pi / model.cfg.context
    if isinstance(encoding, DaRoPE):
        fast = np.arange(theta.size) < encoding.n_fast
    return theta, fast


def wavelengths(model: GPT) -> tuple[float, str, float]:
    """(the distance the far mass is measured at, where it comes from in words, the base-10k reference)."""
    L, d = model.cfg.context, model.encoding.head_dim
    reference = reference_wavelength(d, L)
    bands = band_frequencies(model)
    if bands is not None and bands[1].any():
        theta, fast = bands
        own = float(2 * math.pi / theta[fast].min())
        return (
            own,
            f"the encoding's fast bands ({int(fast.sum())} of {theta.size} turn at least once in L = {L})",
            reference,
        )
    why = "has no bands" if bands is None else "has no fast band"
    return reference, f"the encoding {why}: a base-{REFERENCE_BASE:g} RoPE of head dim {d} at L = {L}", reference


def real_length(scored: np.ndarray) -> int:
    """The window's tokens before its padding: up to its last scored token (padding is never scored)."""
    scored_at = np.flatnonzero(scored)
    return int(scored_at[-1]) + 1 if scored_at.size else scored.size


def recency_profile(model: GPT, windows: list[tuple[np.ndarray, np.ndarray]], device: torch.device) -> RecencyProfile:
    """The recency profile of `model` (in eval mode) over `windows` of (tokens, scored), each window one forward
    pass: its real tokens only (queries and keys past its last scored token are padding)."""
    T = max(tokens.size for tokens, _ in windows)
    sums = [[np.zeros(T) for _ in range(4)] for _ in model.blocks]  # count, weight, weight^2, uniform
    query_sums = [[math.inf, -math.inf] for _ in model.blocks]
    for tokens, scored in windows:
        n = real_length(scored)
        batch = torch.as_tensor(tokens[:n], dtype=torch.long, device=device)[None]
        query, key = np.tril_indices(n)
        distance = query - key
        uniform = np.bincount(distance, 1.0 / (query + 1), T)
        for layer, weights in enumerate(model.attention_weights(batch)):
            w = weights[0].double().cpu().numpy()  # (H, n, n)
            H = w.shape[0]
            below = w[:, query, key]  # (H, pairs): every query's weights on its causal keys
            count, weight, square, uniform_sum = sums[layer]
            count += H * np.bincount(distance, minlength=T)
            weight += np.bincount(np.tile(distance, H), below.ravel(), T)
            square += np.bincount(np.tile(distance, H), below.ravel() ** 2, T)
            uniform_sum += H * uniform
            row_sums = w.sum(-1)
            query_sums[layer] = [min(query_sums[layer][0], row_sums.min()), max(query_sums[layer][1], row_sums.max())]
    layers = [
        LayerRecency(count, weight, square, uniform_sum, float(low), float(high))
        for (count, weight, square, uniform_sum), (low, high) in zip(sums, query_sums, strict=True)
    ]
    wavelength, source, reference = wavelengths(model)
    return RecencyProfile(layers, model.cfg.context, T, wavelength, source, reference)
