"""What an encoding may be built with: each option it takes, its kind and range, checked before it is built.

Options: each keyword an encoding's `__init__` takes is declared in its class's `option_rules` (an `Option`: a
number, a whole number or a flag, and its range), merged along the class's bases (RoPE's `base` serves every
rotary subclass). `build_encoding` checks the options against the rules before the encoding is built, so a bad
value fails naming the encoding, the option and the rule ("encoding 'rope': option base=-1 (must be a number > 1
...)") instead of training on NaN; checks that need the model's sizes (DaRoPE's `n_slow` against the head's
bands) stay in the constructors. A class whose `__init__` takes an undeclared option is refused when defined.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KIND_WORDS = {"number": "a number", "whole": "a whole number", "flag": "true or false"}


def _any(value: Any) -> bool:
    return True


@dataclass(frozen=True)
class Option:
    """One option an encoding takes: its kind, "number" (an int or float, finite), "whole" (an int) or "flag" (a
    bool), its range (`valid`, stated in words by `rule`) and what it means (`why`); `optional`: None (the default
    of a derived value) is allowed too."""

    kind: str
    rule: str = ""
    valid: Callable[[Any], bool] = _any
    optional: bool = False
    why: str = ""  # what the value means, for the error

    def __post_init__(self) -> None:
        if self.kind not in KIND_WORDS:
            raise ValueError(f"option kind {self.kind!r} is not one of {list(KIND_WORDS)}")

    @property
    def requirement(self) -> str:
        """'must be a number > 1: <why>', 'must be a whole number >= 1 or null: <why>', ..."""
        words = " ".join(part for part in (KIND_WORDS[self.kind], self.rule) if part)
        return f"must be {words}{' or null' if self.optional else ''}{': ' + self.why if self.why else ''}"

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if self.kind == "flag":
            return isinstance(value, bool)
        if isinstance(value, bool):  # True is an int to Python, not a number here
            return False
        if self.kind == "whole" and not isinstance(value, numbers.Integral):
            return False
        if not isinstance(value, numbers.Real) or not math.isfinite(value):
            return False
        return bool(self.valid(value))
