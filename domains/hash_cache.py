"""sha256 of raw files, cached beside them, so that every preparation (each training run's start) does not re-read
the raw data it has already hashed (Sleep-EDF: about 7.4 GB).

Each folder holding hashed files gets `.sha256-cache.json`: {file name: {"size", "mtime_ns", "sha256"}}. A file
whose size and modification time (ns) are the recorded ones is not read; any other file is hashed and recorded,
unless it changed while it was read. Like make's or rsync's quick check, this misses a file rewritten with the same
size and the same mtime, which the raw folders do not see: fetch renames fresh files into place, mirror copies
carry their source's mtime. The cache is written atomically once per call and folder (a reader sees a whole
cache); two processes updating it at once may drop each other's new entries, which only costs a re-hash later.
Where the cache cannot be written (a read-only folder) every call hashes, with a warning.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from domains.atomic import write_json
from domains.store import sha256_file

log = logging.getLogger("posbench.hash_cache")

CACHE_NAME = ".sha256-cache.json"


def cached_sha256(paths: Iterable[str | os.PathLike]) -> dict[Path, str]:
    """sha256 of each file, from the cache beside it where its size and mtime_ns match, else read and recorded."""
    digests: dict[Path, str] = {}
    caches: dict[Path, dict[str, Any]] = {}
    changed: set[Path] = set()
    for path in map(Path, paths):
        cache = caches.setdefault(path.parent, _read(path.parent))
        before = path.stat()
        entry = cache.get(path.name)
        if isinstance(entry, dict) and _identity(entry) == _identity(before) and isinstance(entry.get("sha256"), str):
            digests[path] = entry["sha256"]
            continue
        digests[path] = sha256_file(path)
        if _identity(path.stat()) == _identity(before):  # not written to while it was read
            cache[path.name] = {"size": before.st_size, "mtime_ns": before.st_mtime_ns, "sha256": digests[path]}
            changed.add(path.parent)
    for folder in changed:
        _write(folder, caches[folder])
    return digests


def remember_sha256(path: str | os.PathLike, sha256: str) -> None:
    """Record the digest of a file just written whose content was hashed before it was renamed into place."""
    path = Path(path)
    stat = path.stat()
    cache = _read(path.parent)
    cache[path.name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}
    _write(path.parent, cache)


def _identity(item: os.stat_result | dict[str, Any]) -> tuple[Any, Any]:
    if isinstance(item, dict):
        return item.get("size"), item.get("mtime_ns")
    return item.st_size, item.st_mtime_ns


def _read(folder: Path) -> dict[str, Any]:
    """The folder's cache; empty when there is none or it is unreadable (every file is then hashed again)."""
    try:
        cache = json.loads((folder / CACHE_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def _write(folder: Path, cache: dict[str, Any]) -> None:
    """Write the cache without the entries of files that are gone; a folder that refuses it is not an error."""
    kept = {name: entry for name, entry in cache.items() if (folder / name).is_file()}
    try:
        write_json(folder / CACHE_NAME, kept)
    except OSError as err:
        log.warning("%s: sha256 cache not written (%s); its files are hashed again next time", folder, err)
