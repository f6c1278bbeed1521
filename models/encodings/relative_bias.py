"""Shared by the bias encodings whose term depends on the distance n = i - j (T5's buckets, KERPLE, FIRE).

A causal query at position i sees keys at the distances n = 0..i, so over a sequence of T consecutive positions
such a bias has only T distinct values per head: `prepare` builds the lags 0..T-1 and a (T, T) index of each
entry's lag once per forward pass, and a layer computes its (H, T) values on the lags and lays them out as the
(H, T, T) term with one gather (`LagLogits.masked_by_lag`), instead of evaluating its function on H T^2 entries.

The index holds the actual distances (0 above the diagonal, where the causal mask hides the entry), so positions
that are not consecutive give the right values as long as every distance is below T; a larger one is an index
error, not a silent clamp.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def lag_logits(logits: CausalLogits) -> LagLogits:
    T = logits.pos.shape[0]
    lags = torch.arange(T, device=logits.pos.device, dtype=torch.float32)
    return LagLogits(logits, lags, logits.distance.clamp(min=0).flatten())
