"""What each encoding learned, as plain numbers: one View per picture, for the encodings that have one.

kind (file stem)      encodings           data
darope_coordinates    darope              coordinates (layers, H, n): c_h(x_m) along the example, in (0, L)
fox_gates             fox                 gates (layers, H, n): f_t = sigmoid(w_h . x_t + b_h) along the example
cope_positions        cope                queries (Q,), positions (layers, H, Q, n): p_ij of query i at key j <= i,
                                          cap: npos - 1
bias_curves           alibi kerple fire   bias (layers or 1, H, n): the logit term at distance 0..n-1, for the
                      t5_bias             example's last query (FIRE's depends on the query), `shared` if one for all
lerope_scales         lerope              theta (d/2,) the initial frequencies, scale (d/2,) the learned exp(a_j)
pope_phases           pope                delta (layers, H, d): the phase biases as the forward pass clamps them,
                                          raw: as stored
rotation_basis        hdrope rope_dup     basis (N, N): HD-RoPE's Q (rope_dup: the identity), theta (d/2,): the
                                          frequency of each rotation plane, the same for both encodings
xpos_decay            xpos                zeta (d/2,), decay (d/2, n): zeta_j^(distance / B)

Views along an example read the model's layer inputs for that one window (models.gpt's `GPT.layer_inputs`); n is
its real length (no padding).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from models.encodings.cope import CoPE
from models.encodings.darope import DaRoPE
from models.encodings.fox import FoX
from models.encodings.hdrope import HDRoPE
from models.encodings.lerope import LeRoPE
from models.encodings.pope import PoPE
from models.encodings.rope_dup import DuplicatedRoPE
from models.encodings.xpos import XPos
from models.gpt import GPT
from pipelines.inspection.content import ContentTrack

COPE_QUERIES = 4  # queries drawn per head: evenly spaced over the example, the last one included


@dataclass
class View:
    """One picture's numbers: `kind` names it (and its PNG), `title` says what it shows."""

    kind: str
    title: str
    data: dict[str, Any]
    content: ContentTrack | None = None  # the window under a view along an example
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        data = {key: _listed(value) if isinstance(value, np.ndarray) else value for key, value in self.data.items()}
        view = {"title": self.title, **data, "notes": self.notes}
        return view if self.content is None else {**view, "content": self.content.as_json()}


def encoding_views(model: GPT, tokens: np.ndarray, content: ContentTrack) -> list[View]:
    """The views of the model's encoding (none for an encoding without one), along `tokens`: one window's real
    tokens, whose content is `content`."""
    encoding = model.encoding
    batch = torch.as_tensor(tokens, dtype=torch.long, device=next(model.parameters()).device)[None]
    state, inputs = model.layer_inputs(batch)
    views = []
    with torch.no_grad():
        if isinstance(encoding, DaRoPE):
            views.append(_darope(encoding, state, inputs, content))
        if isinstance(encoding, FoX):
            views.append(_fox(encoding, inputs, content))
        if isinstance(encoding, CoPE):
            views.append(_cope(model, inputs))
        if encoding.mechanism == "bias":
            views.append(_bias(model, state, inputs))
        if isinstance(encoding, LeRoPE):
            views.append(_lerope(encoding))
        if isinstance(encoding, PoPE):
            views.append(_pope(encoding))
        if isinstance(encoding, DuplicatedRoPE):
            views.append(_basis(encoding))
        if isinstance(encoding, XPos):
            views.append(_xpos(encoding, tokens.size))
    return views


def _listed(values: np.ndarray) -> list:
    """An array as nested lists, floats to six significant digits: the JSON stays small and readable."""
    if values.dtype.kind != "f":
        return values.tolist()
    return np.vectorize(lambda v: float(f"{v:.6g}"), otypes=[object])(values).tolist()


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().double().cpu().numpy()


def _darope(encoding: DaRoPE, state: dict, inputs: list[torch.Tensor], content: ContentTrack) -> View:
    coordinates = [encoding.coordinates(x, state["prior"], layer)[0].T for layer, x in enumerate(inputs)]  # (H, n)
    L = encoding.context
    return View(
        "darope_coordinates",
        f"DaRoPE's content coordinates c_h(x_m) = L sigmoid(w_h . x_m + alpha_h beta_m), bounded by (0, L = {L}), "
        f"that turn its {encoding.n_slow} slow bands",
        {"coordinates": _numpy(torch.stack(coordinates)), "context": L, "slow_bands": encoding.n_slow},
        content,
        ["with w = 0 and alpha = 1 the coordinate is m + 0.5: RoPE (dashed)"],
    )


def _fox(encoding: FoX, inputs: list[torch.Tensor], content: ContentTrack) -> View:
    gates = []
    for layer, x in enumerate(inputs):
        cumulative = encoding.cumulative_log_forget(x, layer)[0]  # F_t, (H, n)
        gates.append(cumulative.diff(dim=-1, prepend=cumulative.new_zeros(encoding.n_head, 1)).exp())
    gates = _numpy(torch.stack(gates))
    return View(
        "fox_gates",
        "FoX's forget gates f_t = sigmoid(w_h . x_t + b_h): a key keeps the product of the gates opened after it",
        {"gates": gates},
        content,
        [f"median gate over the example {float(np.median(gates)):.3f}: a key d tokens back keeps about median^d"],
    )


def _cope(model: GPT, inputs: list[torch.Tensor]) -> View:
    encoding: CoPE = model.encoding
    n = inputs[0].shape[1]
    queries = np.unique(np.linspace(n - 1, 0, COPE_QUERIES + 1)[:-1].round().astype(int))
    positions = []
    for block, x in zip(model.blocks, inputs, strict=True):
        q, k, _ = block.attn.heads(x)
        positions.append(encoding.contextual_positions(q, k)[0][:, queries])  # (H, Q, n): 0 past each query
    return View(
        "cope_positions",
        f"CoPE's contextual positions p_ij (open gates between key j and query i, capped at npos - 1 = "
        f"{encoding.npos - 1}) against the token distance i - j + 1 (dashed: every gate open)",
        {"queries": queries, "positions": _numpy(torch.stack(positions)), "cap": encoding.npos - 1},
    )


def _bias(model: GPT, state: Any, inputs: list[torch.Tensor]) -> View:
    encoding = model.encoding
    last = inputs[0].shape[1] - 1
    curves = []
    for layer, x in enumerate(inputs):
        row = encoding.logit_bias(state, layer, x)[0, :, last]  # (H, n): keys 0..last of the last query
        curves.append(row.flip(-1))  # by distance last - j = 0..last
    bias = _numpy(torch.stack(curves))
    shared = bool(np.allclose(bias, bias[:1]))
    notes = ["the same in every layer" if shared else "one curve per layer and head"]
    if encoding.name == "fire":
        notes.append(f"FIRE's term depends on the query: drawn for the last, i = {last}")
    return View(
        "bias_curves",
        f"{encoding.name}: the learned term added to the attention logits, by query-key distance",
        {"bias": bias[:1] if shared else bias, "shared": shared, "query": last},
        notes=notes,
    )


def _lerope(encoding: LeRoPE) -> View:
    scale = _numpy(encoding.log_scale.exp())
    fast = encoding.theta.double().cpu().numpy() >= 2 * math.pi / encoding.context
    return View(
        "lerope_scales",
        "LeRoPE's learned frequency scales exp(a_j) (initially 1) per band, shared by every layer and head",
        {"theta": _numpy(encoding.theta), "scale": scale, "context": encoding.context, "fast_at_init": fast},
    )


def _pope(encoding: PoPE) -> View:
    raw = _numpy(encoding.phase_bias)
    delta = np.clip(raw, -2 * math.pi, 0.0)
    stuck = int((raw > 0).sum() + (raw < -2 * math.pi).sum())
    return View(
        "pope_phases",
        "PoPE's learned phase biases delta (radians, clamped to [-2 pi, 0]; initially 0) per head and component",
        {"delta": delta, "raw": raw},
        notes=[
            f"{stuck} of {raw.size} sit outside the clamp: the forward pass uses the bound and passes them no gradient"
        ],
    )


def _basis(encoding: DuplicatedRoPE) -> View:
    block = encoding.block
    basis = _numpy(encoding.block_basis[:block, :block]) if isinstance(encoding, HDRoPE) else np.eye(block)
    return View(
        "rotation_basis",
        f"{encoding.name}: the basis of each {block}-channel block (HD-RoPE: the Paley basis Q; rope_dup: none) and "
        f"the frequency of each rotation plane (the same {encoding.head_dim // block} frequencies for both)",
        {"basis": basis, "theta": _numpy(encoding.theta), "block": block, "context": encoding.context},
        notes=["HD-RoPE = rope_dup after the fixed orthogonal change of basis Q, which W_q and W_k can absorb"],
    )


def _xpos(encoding: XPos, n: int) -> View:
    distance = torch.arange(n, dtype=torch.float64)
    zeta = encoding.zeta.double().cpu()
    decay = zeta[:, None] ** (distance[None, :] / encoding.scale_base)
    return View(
        "xpos_decay",
        f"xPos: band j's factor zeta_j^(distance / {encoding.scale_base:g}) on the score (fixed, not learned)",
        {"zeta": zeta.numpy(), "decay": decay.numpy(), "scale_base": encoding.scale_base},
    )
