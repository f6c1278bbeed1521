"""The contract every positional encoding fulfils, and the registry that finds them.

An encoding is exactly one mechanism, declared by its class attribute `mechanism`, and it overrides
exactly the hook that belongs to that mechanism (checked when the class is defined):

| mechanism   | hook            | what it does                                                              |
|-------------|-----------------|---------------------------------------------------------------------------|
| "none"      | (none)          | no positional signal; the causal mask is the only order information       |
| "embedding" | `embed`         | adds a positional vector to the token embeddings                          |
| "qk"        | `transform_qk`  | rewrites q and k per position (may read the block's normalised input and  |
|             |                 | may change the q/k width); attention stays fused                          |
| "bias"      | `logit_bias`    | an additive term on the scaled attention logits, the causal mask included |
|             |                 | (may read the block's normalised input: a data-dependent bias); one that  |
|             |                 | depends on i - j alone also gives its values on the lags (`lag_bias`)     |
| "scores"    | `attend`        | replaces the attention computation entirely (it gets q, k, v)             |

`prepare(pos)` runs once per forward pass, so per-position tables (cos/sin, biases) are built once and
shared by every layer. Because the hook set is fixed per mechanism, a model can never carry two
positional mechanisms at once (say a learned table left on beside RoPE).

Layers may differ. Every hook but `embed` is called with its layer's index, and `attention_window(layer)` says
which earlier keys that layer attends to: None (the default) for every one of them, or an `AttentionWindow`
(models.windows: the last W tokens, or the query's own chunk of C tokens). A window restricts the fused causal
kernel, so only the mechanisms that attend through it ("none" and "qk") may define windows, checked when the
class is defined (a bias or scores encoding writes its own mask). A layer pattern (models.encodings.pattern) is
this per-layer dispatch made whole: one "qk" encoding whose hook hands each layer's q and k to the encoding that
layer has (built once from the registry: no copy of RoPE per pattern) and whose windows are that layer's.

A bias encoding's `prepare` starts from `causal_logits(pos)`: the distances i - j and the additive causal mask
(0, or -inf where the key lies in the query's future), built once per forward pass in the dtype attention runs
in. A bias that is the same in every layer (ALiBi, T5's shared table) is built once, masked, in `prepare`; one
with parameters per layer builds only its own term per layer from those shared pieces. The term handed to
attention is (1 or B, H, T, T) and contiguous: SDPA's fast kernels take that layout (a (H, T, T) mask sends them
to a path several times slower).

Randomized positions (Ruoss et al., 2023, "Randomized Positional Encodings Boost Length Generalization of
Transformers") are an option of this base class, `random_positions = r`, so they apply to any encoding that takes
positions without a copy of it: with M = r L, a training forward pass replaces the positions 0..T-1 by

    p_1 < p_2 < ... < p_T,   a sample without replacement of T integers from [0, M)   (T <= M)

(M = 8L in the roster's `*_rand` entries). `prepare` draws them, and every encoding computes its tables from what
`prepare` returns (RoPE's angles, the sinusoidal table, ALiBi's distances p_i - p_j). Choices:
- One sample per forward pass, shared by the batch: the reference code (google-deepmind/randomized_positional_
  encodings) draws one (T,) index set per call and broadcasts it over the batch (its Figure 1: "Random positional
  encoding vector for each batch"), and `GPT.forward` takes one (T,) position vector.
- Training draws from torch's default generator on the positions' device. models.training re-seeds it with
  seed_generators(dropout_seed(seed, step, rank, micro-batch)) at every training batch start, before the forward
  pass, so the draw is a function of (seed, step, rank, micro-batch), like the dropout masks drawn after it: a
  resumed run draws the same positions, and DDP ranks and accumulated micro-batches draw their own.
- Evaluation randomizes too, as the paper's experiments did: the reference code samples in every call, its
  evaluation over test lengths included, and its authors answer "During inference, the randomized PE is also
  used?" with "Yes, we also randomize at test time." (issue #1 of that repository). The paper's Figure 1 (the
  repository's overview.png) draws evaluation positions as 1..M, under the caption "Our approach avoids this
  problem by assigning a random (ordered) positional encoding vector using the full range of possible test
  positions to each training example."; the code and the authors' answer are what was run. So that an
  evaluation is deterministic and independent of batching, an evaluation pass of T tokens draws from its own
  generator seeded by T (every window of one length is scored at the same sample; the default generator is left
  untouched). That generator is the CPU's on every device, the sample moved to the positions' device afterwards:
  a CUDA generator draws other numbers from the same seed, so a GPU evaluation would score other positions than a
  CPU one. `random_positions_eval=False` scores at 0..T-1 instead.
- ALiBi sees differences of the sampled positions, as every other encoding sees the positions (SPEC 1b). The
  reference's noisy ALiBi samples the distances instead (offset k gets the k-th of a sorted sample: a Toeplitz
  bias); both put training distances anywhere in [0, M).
An encoding with `max_positions` (a learned table) refuses the option: its table ends below M.

Options: each keyword an encoding's `__init__` takes is declared in its class's `option_rules`
(models.encodings.options).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import math
import pkgutil
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from models.encodings.options import Option
from models.windows import AttentionWindow

HOOK_OF_MECHANISM = {
    "none": None,
    "embedding": "embed",
    "qk": "transform_qk",
    "bias": "logit_bias",
    "scores": "attend",
}

WINDOWED_MECHANISMS = ("none", "qk")  # those whose attention is the fused causal kernel, which a window restricts

_REGISTRY: dict[str, type[PositionalEncoding]] = {}
RANDOM_EVAL_ENTROPY = 0x7A2D_0E15  # an evaluation of T tokens draws its positions from SeedSequence([this, T])


DIMENSIONS = ("n_layer", "n_head", "d_model", "context")  # what every encoding is built with; not options


def attention_dtype(device: torch.device) -> torch.dtype:
    """The dtype attention runs in here: autocast's when it is on (an additive mask must match q), else fp32."""
    if device.type in ("cpu", "cuda", "mps", "xpu") and torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return torch.float32


@dataclass(frozen=True)
class CausalLogits:
    """What the layers of a bias encoding share in one forward pass (see the module docstring)."""

    pos: torch.Tensor  # (T,) long
    distance: torch.Tensor  # (T, T) long, i - j; negative above the diagonal
    mask: torch.Tensor  # (1, 1, T, T) in the attention dtype: 0 where j <= i, -inf where j > i

    @property
    def dtype(self) -> torch.dtype:
        return self.mask.dtype

    def masked(self, bias: torch.Tensor) -> torch.Tensor:
        """bias (H, T, T) or (B, H, T, T) in any float dtype -> the additive term attention takes, causal mask
        included, in the attention dtype, (1 or B, H, T, T) and contiguous."""
        return (bias.to(self.dtype) + self.mask).reshape(-1, *bias.shape[-3:]).contiguous()


@dataclass(frozen=True)
class LagTerm:
    """A bias encoding's term where it depends on the distance alone (`PositionalEncoding.lag_bias`): its values on
    the lags 0..T-1 for the first `rows` queries, and the later queries' term laid out densely with the causal mask,
    `rest` (1, H, T - rows, T), where they have another (FIRE's queries past its threshold), else None."""

    values: torch.Tensor  # (H, T)
    rows: int
    rest: torch.Tensor | None = None

    @property
    def requires_grad(self) -> bool:
        return self.values.requires_grad or (self.rest is not None and self.rest.requires_grad)

    def to(self, dtype: torch.dtype) -> LagTerm:
        rest = None if self.rest is None else self.rest.to(dtype)
        return LagTerm(self.values.to(dtype), self.rows, rest)


def causal_logits(pos: torch.Tensor) -> CausalLogits:
    """The per-forward pieces of every bias encoding: distances i - j and the causal mask (once, not per layer)."""
    distance = pos[:, None] - pos[None, :]
    future = torch.zeros(distance.shape, dtype=attention_dtype(pos.device), device=pos.device)
    future.masked_fill_(distance < 0, float("-inf"))
    return CausalLogits(pos, distance, future[None, None])


def outside_autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """A region kept in the tensors' own precision under mixed-precision autocast (angle math in fp32). Devices
    without autocast (meta, used to check that a forward pass makes no tensor on the wrong device) need none."""
    if device.type in ("cpu", "cuda", "mps", "xpu"):
        return torch.autocast(device_type=device.type, enabled=False)
    return contextlib.nullcontext()


class PositionalEncoding(nn.Module):
    """Base class. Subclasses set `name` and `mechanism` and override that mechanism's hook."""

    name: ClassVar[str]
    mechanism: ClassVar[str]
    evaluation_only: ClassVar[bool] = False  # applied to a trained model at evaluation (YaRN), never trained
    # False where the encoding's signal does not come from the positions it is given (CoPE's contextual positions,
    # FoX's gates) or its tables cover only the distances of one window (the relative biases): `random_positions`
    # would then be ignored or out of range, and is refused
    takes_random_positions: ClassVar[bool] = True
    # raised when a change reorders the float arithmetic: older runs reproduce to rounding (pipelines.runs.tolerance)
    revision: ClassVar[int] = 1
    # True where a "qk" encoding's attention trains faster on the CPU in the lag route's tiles without a term
    # (models.biased_attention.tiled_causal_attention) than in SDPA's flash kernel: PoPE, q and k twice v's width
    tiled_training: ClassVar[bool] = False
    # the options this class's __init__ adds (merged with its bases' by `declared_options`; module docstring)
    option_rules: ClassVar[dict[str, Option]] = {
        "random_positions": Option("whole", ">= 1", lambda v: v >= 1, optional=True, why="M / L"),
        "random_positions_eval": Option("flag"),
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        undeclared = sorted(cls.init_keywords() - set(cls.declared_options()))
        if undeclared:
            raise TypeError(
                f"{cls.__name__}: options {undeclared} of its __init__ have no rule; declare each in option_rules "
                "(models.encodings.options.Option: its kind and range), so a bad value is refused by name"
            )
        if cls.mechanism not in HOOK_OF_MECHANISM:
            raise TypeError(f"{cls.__name__}: mechanism {cls.mechanism!r} is not one of {list(HOOK_OF_MECHANISM)}")
        overridden = [
            hook
            for hook in HOOK_OF_MECHANISM.values()
            if hook is not None and getattr(cls, hook) is not getattr(PositionalEncoding, hook)
        ]
        expected = [HOOK_OF_MECHANISM[cls.mechanism]] if HOOK_OF_MECHANISM[cls.mechanism] else []
        if overridden != expected:
            raise TypeError(
                f"{cls.__name__} declares mechanism {cls.mechanism!r} but overrides hooks {overridden}; "
                f"an encoding is exactly one mechanism and must override exactly {expected}"
            )
        windowed = cls.attention_window is not PositionalEncoding.attention_window
        if windowed and cls.mechanism not in WINDOWED_MECHANISMS:
            raise TypeError(
                f"{cls.__name__} declares mechanism {cls.mechanism!r} and attention windows; a window restricts the "
                f"fused causal kernel, which only mechanisms {list(WINDOWED_MECHANISMS)} attend through"
            )
        if cls.tiled_training and (cls.mechanism != "qk" or windowed):
            raise TypeError(
                f"{cls.__name__} declares tiled_training with mechanism {cls.mechanism!r}"
                f"{' and attention windows' if windowed else ''}; the tiles replace the fused causal kernel of a "
                "'qk' encoding without windows"
            )

    def __init__(
        self,
        n_layer: int,
        n_head: int,
        d_model: int,
        context: int,
        *,
        random_positions: int | None = None,
        random_positions_eval: bool = True,
    ) -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model={d_model} is not divisible by n_head={n_head}")
        self.n_layer, self.n_head, self.d_model, self.context = n_layer, n_head, d_model, context
        self.head_dim = d_model // n_head
        self.random_positions, self.random_positions_eval = random_positions, bool(random_positions_eval)
        if random_positions is not None:
            self._check_random_positions(random_positions)

    @classmethod
    def declared_options(cls) -> dict[str, Option]:
        """Every option the encoding takes and its rule: `option_rules` of the class and of its bases."""
        merged: dict[str, Option] = {}
        for klass in reversed(cls.__mro__):
            merged.update(vars(klass).get("option_rules", {}))
        return merged

    @classmethod
    def init_keywords(cls) -> set[str]:
        """The keywords the __init__ methods of the class and its bases take, the model's sizes left out."""
        taken = set()
        for klass in cls.__mro__:
            if "__init__" in vars(klass) and issubclass(klass, PositionalEncoding):
                for parameter in inspect.signature(vars(klass)["__init__"]).parameters.values():
                    if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                        taken.add(parameter.name)
        return taken - {"self", *DIMENSIONS}

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Refuse an unknown option or a value outside its rule, by name, before anything is built."""
        rules = cls.declared_options()
        unknown = [key for key in options if key not in rules]
        if unknown:
            raise ValueError(
                f"bad options {options} for encoding {cls.name!r}: unknown option{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; its options are {', '.join(sorted(rules)) or 'none'}"
            )
        for key, value in options.items():
            if not rules[key].accepts(value):
                raise ValueError(f"encoding {cls.name!r}: option {key}={value!r} ({rules[key].requirement})")

    def _check_random_positions(self, ratio: Any) -> None:
        if isinstance(ratio, bool) or not isinstance(ratio, int) or ratio < 1:
            raise ValueError(f"{self.name}: random_positions is M / L, a whole number >= 1; got {ratio!r}")
        if self.mechanism == "none" or not self.takes_random_positions:
            raise ValueError(f"{self.name} does not take its signal from the positions: random_positions is refused")
        if self.max_positions is not None:
            raise ValueError(
                f"{self.name} represents positions 0..{self.max_positions - 1} only; random_positions draws them "
                f"from [0, {ratio * self.context}): use an encoding defined at every position"
            )

    # ---- shared by all mechanisms -------------------------------------------------------------------
    @property
    def fused(self) -> bool:
        """True when attention runs as `scaled_dot_product_attention(is_causal=True)` (FlashAttention on GPU), or in a
        window through the same fused kernels (models.windows), never holding a T x T matrix."""
        return self.mechanism in ("none", "embedding", "qk")

    def attention_window(self, layer: int) -> AttentionWindow | None:
        """The keys layer `layer` attends to besides causality: None for every earlier key (see the module
        docstring; only "none" and "qk" encodings may return a window)."""
        return None

    @property
    def max_positions(self) -> int | None:
        """Longest sequence the encoding can represent, or None for no limit."""
        return None

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim)

    def prepare(self, pos: torch.Tensor) -> Any:
        """Per-forward state shared by all layers; `pos` is a (T,) long tensor of the positions 0..T-1, and this
        base version returns the positions the encoding uses: `pos`, or with `random_positions` a sorted random
        sample (see the module docstring). Subclasses build their tables from what it returns. An encoding with
        `max_positions` refuses a longer sequence by its shape (reading the positions' values would wait for the
        device every step)."""
        limit = self.max_positions
        if limit is not None and pos.shape[-1] > limit:
            raise ValueError(
                f"encoding {self.name!r} represents positions 0..{limit - 1}; "
                f"asked for positions up to {pos.shape[-1] - 1}"
            )
        if self.random_positions is not None and (self.training or self.random_positions_eval):
            return self.sampled_positions(pos.shape[-1], pos.device)
        return pos

    def sampled_positions(self, T: int, device: torch.device) -> torch.Tensor:
        """(T,) sorted sample without replacement from [0, M), M = random_positions * L: in training from the
        default generator of the positions' device (seeded per batch by models.training), at evaluation from a CPU
        generator seeded by T, moved to `device` (the same positions on every device)."""
        M = self.random_positions * self.context
        if T > M:
            raise ValueError(f"{self.name}: {T} positions cannot be drawn without replacement from [0, {M})")
        if self.training:
            return torch.randperm(M, device=device)[:T].sort().values
        # evaluation: the CPU generator's draw on every device (a CUDA generator draws other numbers), then moved
        seed = int(np.random.SeedSequence([RANDOM_EVAL_ENTROPY, T]).generate_state(1)[0])
        generator = torch.Generator(device="cpu").manual_seed(seed)
        return torch.randperm(M, generator=generator, device="cpu")[:T].sort().values.to(device)

    def flops_per_token(self, T: int) -> float:
        """Forward FLOPs per token that this encoding adds to the whole model (all layers) on sequences of T
        tokens, on top of the plain decoder of `models.flops` (causal attention at width head_dim, no positional
        signal). Conventions: a multiply-add is 2 FLOPs, any other elementwise op (cos, exp, sigmoid, a compare
        included) is 1; a causal query attends (T + 1) / 2 keys on average. Training counts 3x forward."""
        return 0.0

    def optimizer_groups(self) -> list[dict[str, Any]]:
        """The encoding's own parameter groups ("params" and options: weight_decay, clip_norm); the rest: default."""
        return []

    def describe(self) -> dict[str, Any]:
        """What a manifest and `pipelines.roster` report about this encoding."""
        n_total = sum(p.numel() for p in self.parameters())
        description = {
            "name": self.name,
            "revision": self.revision,
            "mechanism": self.mechanism,
            "fused_attention": self.fused,
            "parameters": n_total,
            "parameters_per_layer": n_total / self.n_layer,
        }
        if self.random_positions is not None:
            description.update(
                random_positions=self.random_positions,  # M / L
                random_positions_range=self.random_positions * self.context,  # M
                random_positions_eval="sampled" if self.random_positions_eval else "0..T-1",
            )
        return description

    # ---- hooks (override exactly one, the one of `mechanism`) ---------------------------------------
    def embed(self, x: torch.Tensor, state: Any) -> torch.Tensor:
        raise NotImplementedError

    def transform_qk(
        self, q: torch.Tensor, k: torch.Tensor, state: Any, x: torch.Tensor, layer: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q, k: (B, H, T, D); x: (B, T, d_model), the block's normalised input. Returns new q, k."""
        raise NotImplementedError

    def logit_bias(self, state: Any, layer: int, x: torch.Tensor) -> torch.Tensor:
        """The additive term on layer `layer`'s logits after the softmax scaling, causal mask included
        (`CausalLogits.masked`): (1 or B, H, T, T), contiguous, in the attention dtype. x: (B, T, d_model), the
        block's normalised input, for a bias computed from the data."""
        raise NotImplementedError

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state: Any, layer: int, dropout_p: float
    ) -> torch.Tensor:
        """Full causal attention; returns (B, H, T, Dv)."""
        raise NotImplementedError

    # ---- not a hook: a bias of the distance alone --------------------------------------------------------------
    def lag_bias(self, state: Any, layer: int, x: torch.Tensor) -> LagTerm | None:
        """A "bias" encoding's term as its values on the lags 0..T-1 (`LagTerm`: (H, T) in fp32), where the term of
        the leading queries depends on the distance i - j alone (`logit_bias` is then these values laid out with the
        causal mask, and the later queries' rows), else None. Where it is not None, attention on the CPU builds no
        (H, T, T) term for those queries (models.biased_attention.lag_biased_attention); None, the default, keeps
        `logit_bias`'s dense term."""
        return None

    # ---- not a hook: looking inside ---------------------------------------------------------------------------
    def attention_weights(self, q: torch.Tensor, k: torch.Tensor, state: Any, layer: int) -> torch.Tensor:
        """A "scores" encoding's softmax weights (B, H, T, T), written out explicitly (its `attend` is a kernel
        that returns none): what models.gpt's `CausalSelfAttention.attention_weights` asks of it. The other
        mechanisms need nothing here: their weights follow from their hook."""
        raise NotImplementedError(f"{self.name}: a 'scores' encoding states its attention weights explicitly")


def register(cls: type[PositionalEncoding]) -> type[PositionalEncoding]:
    """Class decorator: make an encoding available under `cls.name`."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"two encodings are named {cls.name!r}: {_REGISTRY[cls.name]} and {cls}")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    """Import every module of this package once, so a new encoding file needs no other edit."""
    package = importlib.import_module(__package__)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{__package__}.{module.name}")


def available() -> list[str]:
    _discover()
    return sorted(_REGISTRY)


def encoding_class(name: str) -> type[PositionalEncoding]:
    _discover()
    if name not in _REGISTRY:
        raise ValueError(f"unknown positional encoding {name!r}; valid names: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def build_encoding(
    name: str, options: dict[str, Any], *, n_layer: int, n_head: int, d_model: int, context: int
) -> PositionalEncoding:
    cls = encoding_class(name)
    cls.check_options(options)
    try:
        return cls(n_layer=n_layer, n_head=n_head, d_model=d_model, context=context, **options)
    except TypeError as err:
        raise ValueError(f"bad options {options} for encoding {name!r}: {err}") from err
