"""argparse types the command lines share: a value outside its range is refused by argparse, naming the argument
("argument --n: must be a whole number >= 1, got '-2'"), before anything is read or written; and the one line a
command prints for a file it could not write (os_error_text: a full disk, a read-only folder, a file where a folder
must be), instead of a traceback."""

from __future__ import annotations

import argparse
import errno
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


# what to do about the errors a write meets, by errno
_WRITE_HINTS = {
    errno.ENOSPC: "the disk is full: free space and run the command again",
    errno.EDQUOT: "the disk quota is spent: free space and run the command again",
    errno.EACCES: "the folder is not writable: choose another, or change its permissions",
    errno.EPERM: "the folder is not writable: choose another, or change its permissions",
    errno.EROFS: "the file system is read-only: choose a folder on another",
    errno.ENOTDIR: "a file is where a folder must be: move it, or choose another folder",
    errno.EEXIST: "a file is where a folder must be: move it, or choose another folder",
}


def os_error_text(error: OSError) -> str:
    """An OSError as a command's one-line error: the file, what the system said and, where it is known, what to do
    about it (`runs/jsb: Not a directory (a file is where a folder must be: ...)`)."""
    where = f"{error.filename}: " if error.filename else ""
    hint = _WRITE_HINTS.get(error.errno)
    return f"{where}{error.strerror or error}" + (f" ({hint})" if hint else "")
