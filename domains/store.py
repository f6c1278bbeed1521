"""The on-disk token store every prepared domain shares.

    <store>/meta.json               domain, vocab_size, format_version, raw_sha256 {file: sha256},
                                    splits.{train,val,test}.{examples,tokens}, files {name: {bytes, sha256}} of
                                    every other file of the store, plus domain extras
    <store>/<split>.tokens.npy      all examples of the split, concatenated (uint8/uint16/uint32)
    <store>/<split>.offsets.npy     int64, examples + 1 entries: example i is tokens[offsets[i]:offsets[i+1]]

Arrays are read memory-mapped. A store is built whole in a new folder beside the old one (`building`), meta.json
last, and swapped in only when complete: a failed or killed build leaves the previous store as it was. Every
file is written under a temporary name and renamed.

A store damaged after it was built (a file truncated, replaced or gone) is caught two ways: opening a file of the
store compares its size with meta.json's record (a stat, every time) and raises StoreError naming the file;
preparation (`damage`) also compares every file's sha256, and rebuilds a damaged store. A store written before
the files were recorded (format 1) is not current: preparation rebuilds it; until then it is read without the
size checks.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from domains.atomic import write_json, write_npy

FORMAT_VERSION = 2  # 2: meta.json records every file's size and sha256
SPLITS = ("train", "val", "test")
META_NAME = "meta.json"


class StoreError(ValueError):
    """A store file that cannot be read, or is not the file meta.json records (truncated, replaced); the message
    names the file and how to rebuild the store."""


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def token_dtype(vocab_size: int) -> np.dtype:
    for dtype in (np.uint8, np.uint16, np.uint32):
        if vocab_size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    raise ValueError(f"vocabulary of {vocab_size} tokens does not fit in uint32")


@dataclass
class Split:
    tokens: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def example(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]


# ---- building a store -----------------------------------------------------------------------------------------
@contextmanager
def locked(store: Path) -> Iterator[None]:
    """Hold the store's lock (`.<name>.lock` beside it): one process at a time checks and builds a store, so
    runs started together on an unprepared store build it once. Where no lock can be had (a read-only folder
    holding a prepared store, a filesystem without locks) the block runs unlocked, as preparation did before."""
    with ExitStack() as stack:
        with suppress(OSError):  # no lock to be had: the block runs unlocked
            store.parent.mkdir(parents=True, exist_ok=True)
            handle = stack.enter_context(open(store.parent / f".{store.name}.lock", "a"))
            fcntl.flock(handle, fcntl.LOCK_EX)  # held until the file is closed, after the block
        yield


@contextmanager
def building(store: Path) -> Iterator[Path]:
    """A new empty folder beside `store` to build a whole store in (call it holding `locked(store)`).

    When the block completes, the folder replaces `store`: the old store is renamed aside, the new one renamed
    into place, the old one removed. When the block raises, the folder is removed and `store` is as it was. A
    process killed between the two renames leaves no `store` (the next preparation builds it again from the raw
    files); the folders a killed build leaves beside the store are removed when the next build starts.
    """
    for leftover in store.parent.glob(f".{store.name}.*-*"):
        if leftover.is_dir():  # a killed build's: the lock says no other build is running
            shutil.rmtree(leftover, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=f".{store.name}.building-", dir=store.parent))
    try:
        yield folder
        os.chmod(folder, 0o755)  # mkdtemp's 0700 would hide the store from other users
        if store.exists():
            old = store.parent / f".{store.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(store, old)
            try:
                os.replace(folder, store)
            except BaseException:
                os.replace(old, store)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(folder, store)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def file_records(folder: Path) -> dict[str, dict[str, Any]]:
    """{name: {"bytes", "sha256"}} of every file in `folder` but meta.json: what meta.json records."""
    return {
        path.name: {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name != META_NAME
    }


def write_store(
    folder: Path,
    *,
    domain: str,
    vocab_size: int,
    splits: dict[str, Iterable[np.ndarray]],
    raw_sha256: dict[str, str],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write every split into `folder` (a new store's folder from `building`), then meta.json, which records
    every file of the folder (the splits and any file the domain wrote there) with its size and sha256.
    `splits` maps split name -> iterable of 1-D token arrays."""
    dtype = token_dtype(vocab_size)
    counts = {}
    for name, examples in splits.items():
        examples = [np.asarray(e) for e in examples]
        for i, example in enumerate(examples):
            if example.size and (example.min() < 0 or example.max() >= vocab_size):
                raise ValueError(
                    f"{domain}/{name} example {i}: token ids {example.min()}..{example.max()} "
                    f"outside the vocabulary 0..{vocab_size - 1}"
                )
        lengths = np.array([len(e) for e in examples], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        tokens = np.concatenate(examples).astype(dtype, copy=False) if examples else np.zeros(0, dtype)
        write_npy(folder / f"{name}.tokens.npy", tokens)
        write_npy(folder / f"{name}.offsets.npy", offsets)
        counts[name] = {"examples": len(examples), "tokens": int(lengths.sum())}
    meta = {
        "domain": domain,
        "format_version": FORMAT_VERSION,
        "vocab_size": vocab_size,
        "raw_sha256": dict(sorted(raw_sha256.items())),
        "splits": counts,
        **(extra or {}),
        "files": file_records(folder),
    }
    write_json(folder / META_NAME, meta)
    return meta


# ---- reading a store ------------------------------------------------------------------------------------------
def read_meta(store: Path) -> dict[str, Any] | None:
    """The store's meta.json, None when there is none (no store, or an incomplete one)."""
    path = store / META_NAME
    if not path.exists():
        return None
    try:
        meta = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise StoreError(f"{path}: not valid JSON ({err}); prepare the domain to rebuild the store") from err
    if not isinstance(meta, dict):
        raise StoreError(f"{path}: holds {type(meta).__name__}, not a JSON object; prepare the domain to rebuild it")
    return meta


def damage(store: Path, meta: dict[str, Any]) -> str | None:
    """Why the store's files are not the ones meta.json records (a file missing, of another size or another
    sha256), or None when every one is. This reads the whole store: preparation's check."""
    for name, record in sorted(meta.get("files", {}).items()):
        path = store / name
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != record["bytes"]:
            return f"{path} has {path.stat().st_size} bytes, meta.json records {record['bytes']}"
        if sha256_file(path) != record["sha256"]:
            return f"{path}: its sha256 is not the one meta.json records"
    return None


def store_file(store: Path, name: str, meta: dict[str, Any]) -> Path:
    """The path of a file of the store, once it exists with the size meta.json records (format 1: exists)."""
    path = store / name
    domain = meta.get("domain", store.name)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing from the {domain} store; run `make data-{domain}` to rebuild it")
    record = meta.get("files", {}).get(name)
    if record is not None and path.stat().st_size != record["bytes"]:
        raise StoreError(
            f"{path}: {path.stat().st_size} bytes, meta.json records {record['bytes']}; the {domain} store is "
            f"damaged, run `make data-{domain}` to rebuild it"
        )
    return path


def load_array(store: Path, name: str, meta: dict[str, Any], mmap: bool = True) -> np.ndarray:
    """An array file of the store (memory-mapped by default), checked by `store_file`; errors name the file."""
    path = store_file(store, name, meta)
    try:
        return np.load(path, mmap_mode="r" if mmap else None)
    except (OSError, ValueError, EOFError) as err:
        domain = meta.get("domain", store.name)
        raise StoreError(f"{path}: unreadable ({err}); run `make data-{domain}` to rebuild the {domain} store") from err


def read_split(store: Path, name: str, meta: dict[str, Any] | None = None) -> Split:
    """Split `name` of the store, memory-mapped; `meta` is the store's meta.json (read when not given)."""
    meta = meta if meta is not None else read_meta(store)
    if meta is None:
        raise FileNotFoundError(f"{store / META_NAME}: no prepared token store here; prepare the domain")
    tokens = load_array(store, f"{name}.tokens.npy", meta)
    offsets = load_array(store, f"{name}.offsets.npy", meta)
    if len(offsets) == 0 or offsets[-1] != len(tokens):
        end = offsets[-1] if len(offsets) else "nowhere"
        path = store / f"{name}.offsets.npy"
        raise StoreError(f"{path}: offsets end at {end} but the split has {len(tokens)} tokens; rebuild the store")
    return Split(tokens, offsets)


def is_current(meta: dict[str, Any] | None, raw_sha256: dict[str, str], **want: Any) -> bool:
    """True when a store was built from exactly these raw files (by hash) with this format and settings."""
    if meta is None or meta.get("format_version") != FORMAT_VERSION:
        return False
    if meta.get("raw_sha256") != dict(sorted(raw_sha256.items())):
        return False
    return all(meta.get(key) == value for key, value in want.items())
