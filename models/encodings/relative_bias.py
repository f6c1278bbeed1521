"""Shared by the bias encodings whose term depends on the distance n = i - j (T5's buckets, KERPLE, FIRE).

A causal query at position i sees keys at the distances n = 0..i, so over a sequence of T consecutive positions
such a bias has only T distinct values per head: `prepare` builds the lags 0..T-1 and a (T, T) index of each
entry's lag once per forward pass, and a layer computes its (H, T) values on the lags and lays them out as the
(H, T, T) term with one gather (`LagLogits.masked_by_lag`), instead of evaluating its function on H T^2 entries.
Attention on the CPU takes the (H, T) values themselves (`PositionalEncoding.lag_bias`) and builds no (H, T, T)
term at all; the dense one is what `logit_bias` returns (SDPA's path: CUDA, attention dropout; inspection).

The index holds the actual distances (0 above the diagonal, where the causal mask hides the entry), so positions
that are not consecutive give the right values as long as every distance is below T; a larger one is an index
error, not a silent clamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from models.encodings.base import CausalLogits


@dataclass(frozen=True)
class LagLogits:
    """A forward pass's causal logits (distances, mask) with the lags a distance-indexed bias is computed on."""

    logits: CausalLogits
    lags: torch.Tensor  # (T,) fp32: the distances 0..T-1
    lag_index: torch.Tensor  # (T * T,) long: row-major i - j, clamped to 0 above the diagonal

    def by_lag(self, values: torch.Tensor) -> torch.Tensor:
        """values (..., T) on the lags -> (..., T, T): entry (i, j) takes the value at lag i - j."""
        T = self.lags.shape[0]
        return values.index_select(-1, self.lag_index).view(*values.shape[:-1], T, T)

    def masked_by_lag(self, values: torch.Tensor) -> torch.Tensor:
        """values (H, T) on the lags -> the additive term attention takes: (1, H, T, T), causal mask included."""
        return self.logits.masked(self.by_lag(values))


def consecutive(pos: torch.Tensor) -> bool:
    """Whether the positions step by one, so that the distances are the lags 0..T-1: read on the host, so on the CPU
    only (free there); elsewhere False, and the dense term is used."""
    return pos.device.type == "cpu" and bool((pos.diff() == 1).all())


def lag_logits(logits: CausalLogits) -> LagLogits:
    T = logits.pos.shape[0]
    lags = torch.arange(T, device=logits.pos.device, dtype=torch.float32)
    return LagLogits(logits, lags, logits.distance.clamp(min=0).flatten())


@dataclass(frozen=True)
class SharedLagTerm:
    """A term that is the same in every layer (ALiBi's slopes, T5's shared table): its (H, T) values on the lags,
    computed once per forward pass, and its dense (1, H, T, T) layout, built once if a layer asks for it."""

    lagged: LagLogits
    values: torch.Tensor  # (H, T)

    @cached_property
    def dense(self) -> torch.Tensor:
        return self.lagged.masked_by_lag(self.values)
