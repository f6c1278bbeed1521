"""The on-disk token store every prepared domain shares.

    <store>/meta.json               domain, vocab_size, format_version, raw_sha256 {file: sha256},
                                    splits.{train,val,test}.{examples,tokens}, plus domain extras
    <store>/<split>.tokens.npy      all examples of the split, concatenated (uint8/uint16/uint32)
    <store>/<split>.offsets.npy     int64, examples + 1 entries: example i is tokens[offsets[i]:offsets[i+1]]

Arrays are read memory-mapped. meta.json is written last, so a store without it is incomplete and is
rebuilt; every file is written under a temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from domains.atomic import write_json, write_npy

FORMAT_VERSION = 1
SPLITS = ("train", "val", "test")


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


def write_store(
    store: Path,
    *,
    domain: str,
    vocab_size: int,
    splits: dict[str, Iterable[np.ndarray]],
    raw_sha256: dict[str, str],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write every split and then meta.json. `splits` maps split name -> iterable of 1-D token arrays."""
    store.mkdir(parents=True, exist_ok=True)
    (store / "meta.json").unlink(missing_ok=True)  # the store is incomplete until meta.json is back
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
        tokens = np.concatenate(examples).astype(dtype) if examples else np.zeros(0, dtype)
        write_npy(store / f"{name}.tokens.npy", tokens)
        write_npy(store / f"{name}.offsets.npy", offsets)
        counts[name] = {"examples": len(examples), "tokens": int(lengths.sum())}
    meta = {
        "domain": domain,
        "format_version": FORMAT_VERSION,
        "vocab_size": vocab_size,
        "raw_sha256": dict(sorted(raw_sha256.items())),
        "splits": counts,
        **(extra or {}),
    }
    write_json(store / "meta.json", meta)
    return meta


def read_meta(store: Path) -> dict[str, Any] | None:
    path = store / "meta.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err}); delete the store to rebuild it") from err


def read_split(store: Path, name: str) -> Split:
    paths = [store / f"{name}.tokens.npy", store / f"{name}.offsets.npy"]
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"{path}: split {name!r} missing from the token store; prepare the domain")
    split = Split(np.load(paths[0], mmap_mode="r"), np.load(paths[1], mmap_mode="r"))
    if len(split.offsets) == 0 or split.offsets[-1] != len(split.tokens):
        raise ValueError(f"{paths[1]}: offsets end at {split.offsets[-1]} but the split has {len(split.tokens)} tokens")
    return split


def is_current(meta: dict[str, Any] | None, raw_sha256: dict[str, str], **want: Any) -> bool:
    """True when a store was built from exactly these raw files (by hash) with this format and settings."""
    if meta is None or meta.get("format_version") != FORMAT_VERSION:
        return False
    if meta.get("raw_sha256") != dict(sorted(raw_sha256.items())):
        return False
    return all(meta.get(key) == value for key, value in want.items())
