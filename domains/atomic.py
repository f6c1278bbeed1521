"""Write-then-rename helpers: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path`, on error it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would make results unreadable to other users
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike, write: Callable[[IO[Any]], None], mode: str = "w") -> Path:
    with atomic_path(path) as tmp, open(tmp, mode) as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    return Path(path)


def write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write(path, lambda handle: handle.write(text))


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_npy(path: str | os.PathLike, array: np.ndarray) -> Path:
    return atomic_write(path, lambda handle: np.save(handle, array), mode="wb")
