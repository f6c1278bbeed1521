"""argparse types the command lines share: a value outside its range is refused by argparse, naming the argument
("argument --n: must be a whole number >= 1, got '-2'"), before anything is read or written."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole_number(least: int, most: int | None = None) -> Callable[[str], int]:
    """An int in least..most (no upper bound when `most` is None)."""
    span = f"in {least}..{most}" if most is not None else f">= {least}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < least or (most is not None and value > most):
            raise argparse.ArgumentTypeError(f"must be a whole number {span}, got {text!r}")
        return value

    return parse


def finite_number(least: float) -> Callable[[str], float]:
    """A finite float >= least (nan and inf refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value >= least):
            raise argparse.ArgumentTypeError(f"must be a finite number >= {least:g}, got {text!r}")
        return value

    return parse
