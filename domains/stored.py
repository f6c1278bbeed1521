"""Bases for domains prepared once from raw files into a store (JSB, MAESTRO, HRG, Sleep-EDF).

`StoredDataModule` is what every prepared domain shares: it fetches the raw files a domain names (network or
mirror), has the domain bring its store up to date (`build_store`), and serves training windows and evaluation
windows from the store's splits, each an `ExampleSplit` (a length and numbered token arrays).

`TokenStoreDataModule` is the usual kind: the domain turns its raw files into token arrays per split, kept in
`domains.store`'s token store, and preparation is skipped when the store was built from the same raw bytes with the
same settings and its files are intact; otherwise a new store is built beside the old one and replaces it only
when complete (a failed build leaves the old store as it was). A domain whose store holds something else (HRG:
base codes per chromosome, tokenised when read) subclasses `StoredDataModule` directly with its own `build_store`
and `open_split`.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from domains.base import (
    EmptySplitError,
    EvalWindows,
    SequenceDataModule,
    Window,
    check_minimum,
    padded_window,
    windows_from_examples,
)
from domains.fetch import fetch, store_dir
from domains.hash_cache import cached_sha256
from domains.store import (
    SPLITS,
    Split,
    StoreError,
    building,
    damage,
    is_current,
    locked,
    read_meta,
    read_split,
    write_store,
)

log = logging.getLogger("posbench.store")


@dataclass(frozen=True)
class RawFile:
    relpath: str  # inside raw/<domain>/ and inside the mirror's <domain>/ folder
    url: str
    sha256: str | None = None


@runtime_checkable
class ExampleSplit(Protocol):
    """The examples of one split of a store: how many there are and the tokens of each."""

    def __len__(self) -> int: ...

    def example(self, i: int) -> np.ndarray: ...


SplitT = TypeVar("SplitT", bound=ExampleSplit)


class StoredDataModule(SequenceDataModule, Generic[SplitT]):
    """A domain prepared once from raw files into a store, whose splits are `SplitT`s (see the module doc)."""

    pad_id: ClassVar[int]
    window_alignment: ClassVar[int] = 1  # training windows start on a multiple of this many tokens
    amount_unit: ClassVar[str] = "examples"  # what prepared_amount counts
    eval_split_names = ("test",)

    def __init__(
        self,
        *,
        store: str | Path | None = None,
        eval_stride: int | None = None,
        extrapolation: list[int] | None = None,
        eval_examples: int | None = None,
        **kwargs: Any,
    ) -> None:
        """eval_stride: tokens between sliding evaluation windows past the context (None: context // 2);
        extrapolation: factors f of the test_<f>x splits; eval_examples: a debugging aid, evaluate only this many
        evenly spaced examples of each evaluation split (None: every example)."""
        super().__init__(**kwargs)
        self.store = Path(store) if store else store_dir(self.domain)
        self.eval_stride = self.context // 2 if eval_stride is None else eval_stride
        check_minimum(self.domain, 1, eval_stride=self.eval_stride)
        if self.eval_stride >= self.context:  # each window's first scored token needs history
            raise ValueError(f"{self.domain}: eval_stride must be below the context {self.context}, got {eval_stride}")
        if eval_examples is not None:
            check_minimum(self.domain, 1, eval_examples=eval_examples)
        self.eval_examples = eval_examples
        self._splits: dict[str, SplitT] = {}
        # Extrapolation splits test_<f>x: test material in windows of f x context tokens, scored whole
        for factor in extrapolation or ():
            if isinstance(factor, bool) or not isinstance(factor, (int, np.integer)) or factor < 2:
                raise ValueError(f"{self.domain}: extrapolation factors must be integers >= 2, got {extrapolation}")
        self.extrapolation = tuple(int(f) for f in extrapolation or ())
        self.eval_split_names = ("test", *(f"test_{f}x" for f in self.extrapolation))

    # ---- what a stored domain provides ------------------------------------------------------------------
    @abstractmethod
    def raw_files(self) -> list[RawFile]:
        """The raw files preparation reads, known before anything is fetched."""

    @abstractmethod
    def build_store(self, raw: dict[str, Path]) -> dict[str, Any]:
        """Bring the store up to date from the fetched raw files, leaving a current store as it is; returns
        meta.json's content (which records `raw_sha256`, the raw files' digests)."""

    @abstractmethod
    def open_split(self, name: str) -> SplitT:
        """The examples of split `name` (train, val or test) of the prepared store."""

    def preparation_settings(self) -> dict[str, Any]:
        """Settings that change the store's content; a store built with other settings is rebuilt."""
        return {}

    def prepared_amount(self, meta: dict[str, Any]) -> int:
        """How much raw material a prepared store holds, in `amount_unit`, from its meta.json."""
        return sum(split["examples"] for split in meta["splits"].values())

    def preparation_record(self) -> dict[str, Any]:
        """How the store was built (times, workers, memory), where the domain keeps such a record; else empty."""
        return {}

    def preparation_summary(self, meta: dict[str, Any]) -> list[str]:
        """Lines `python -m pipelines.prepare` prints after the split counts (none by default)."""
        return []

    # ---- preparation --------------------------------------------------------------------------------------
    def fetch_raw(self) -> dict[str, Path]:
        """The raw files on disk, by relative path (downloaded, or copied from the mirror)."""
        return {f.relpath: fetch(self.domain, f.relpath, f.url, f.sha256) for f in self.raw_files()}

    def prepare_data(self) -> dict[str, Any]:
        """Fetch the raw files and bring the store up to date. Returns meta.json's content."""
        return self.build_store(self.fetch_raw())

    @property
    def meta(self) -> dict[str, Any]:
        meta = read_meta(self.store)
        if meta is None:
            raise FileNotFoundError(
                f"{self.store}/meta.json: the {self.domain} store is not prepared; run `make data-{self.domain}`"
            )
        return meta

    def split(self, name: str) -> SplitT:
        """The examples of split `name`, opened once."""
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; valid: {SPLITS}")
        if name not in self._splits:
            self._splits[name] = self.open_split(name)
        return self._splits[name]

    # ---- windows ------------------------------------------------------------------------------------------
    def draw_train_window(self, rng: np.random.Generator) -> Window:
        """A uniformly chosen training example, and a uniformly placed window of `context` tokens in it that starts
        on a multiple of `window_alignment` (a domain whose tokens come in frames, e.g. JSB's 4 voices, sets it)."""
        train = self.split("train")
        example = train.example(int(rng.integers(len(train))))
        starts = max(0, len(example) - self.context) // self.window_alignment + 1
        start = self.window_alignment * int(rng.integers(starts))
        return padded_window(example[start : start + self.context], self.context, self.pad_id)

    def build_eval_windows(self, split: str) -> EvalWindows:
        """Extrapolation splits (test_<f>x) from long_test_sequences; val and test from build_split_windows."""
        factor = self.extrapolation_factor(split)
        if not factor:
            return self.build_split_windows(split)
        length = factor * self.context
        sequences = self.long_test_sequences(length)
        if not sequences:
            raise EmptySplitError(f"{self.domain} {split}: no test material of {length} tokens ({factor}x context)")
        sequences = [sequences[i] for i in self.eval_example_indices(len(sequences))]
        return windows_from_examples(sequences, length, length, self.pad_id)

    def build_split_windows(self, split: str) -> EvalWindows:
        """Evaluation windows of a stored split: each example (of eval_example_indices) scored whole with sliding
        windows of `context`."""
        data = self.split(split)
        examples = [np.asarray(data.example(i)) for i in self.eval_example_indices(len(data))]
        return windows_from_examples(examples, self.context, self.eval_stride, self.pad_id)

    def eval_example_indices(self, count: int) -> np.ndarray:
        """Which of an evaluation split's `count` examples are scored: all, or `eval_examples` of them evenly
        spaced from the first to the last (a debugging aid)."""
        if self.eval_examples is None or self.eval_examples >= count:
            return np.arange(count)
        return np.linspace(0, count - 1, self.eval_examples).round().astype(np.int64)

    def extrapolation_factor(self, split: str) -> int | None:
        """f for an extrapolation split `test_<f>x` of this datamodule, None for any other split."""
        for factor in self.extrapolation:
            if split == f"test_{factor}x":
                return factor
        return None

    def long_test_sequences(self, length: int) -> list[np.ndarray]:
        """Test material cut into sequences of exactly `length` tokens, each scored whole (every position up to
        `length` gets a score: the NLL curve past the training context). By default consecutive non-overlapping
        pieces of the test examples that are long enough; a domain whose test examples are cut at the context
        (chunks, fixed windows) overrides this with longer material."""
        data = self.split("test")
        pieces = []
        for i in range(len(data)):
            example = np.asarray(data.example(i))
            pieces += [example[start : start + length] for start in range(0, len(example) - length + 1, length)]
        return pieces

    # ---- a readable look at the data (`python -m pipelines.samples --domain <name>`) -----------------------
    def example_count(self, split: str) -> int:
        """How many examples render_example numbers in `split`."""
        return len(self.split(split))

    def render_example(self, split: str, index: int, max_tokens: int) -> str:
        """Example `index` of `split` as a person reads it; domains override this with decoded events."""
        tokens = self.split(split).example(index)[:max_tokens]
        return f"{split}[{index}]: " + " ".join(str(int(t)) for t in tokens)

    def plot_example(self, split: str, index: int, path: str | Path) -> Path:
        """Draw example `index` of `split` to a PNG at `path`; only domains with a picture to draw (signals)."""
        raise ValueError(f"domain {self.domain!r} cannot draw its examples (plots exist for signal domains)")

    def data_hashes(self) -> dict[str, str]:
        return {**{f"raw/{k}": v for k, v in self.meta["raw_sha256"].items()}, **super().data_hashes()}

    def other_raw_data(self, meta: dict[str, Any], wanted: dict[str, str]) -> str | None:
        """Why the prepared store (its `meta`) is not the raw data whose digests are `wanted` (a study's runs'
        `raw/<file>` hashes: pipelines.launch.jobs.check_prepared_data), and what to run; None when it is. Only the
        files `wanted` names are compared."""
        mine = meta.get("raw_sha256") or {}
        differ = sorted(name for name, digest in wanted.items() if mine.get(name) != digest)
        if not differ:
            return None
        return (
            f"the local {self.domain} store ({self.store}) was prepared from other raw files than the study's runs "
            f"({', '.join(differ)} differ); prepare the data the study was prepared from: `make data-{self.domain}` "
            "(README, the domain's section)"
        )


class TokenStoreDataModule(StoredDataModule[Split]):
    """A stored domain whose store is token arrays per split (`domains.store`), rebuilt only when the raw files'
    digests or the preparation settings change, or the store is damaged."""

    _building: Path | None = None  # the new store's folder while build_store builds it

    @abstractmethod
    def build_splits(self, raw: dict[str, Path]) -> tuple[dict[str, list[np.ndarray]], dict[str, Any]]:
        """Token arrays per split (train/val/test) and extra meta.json entries, from the fetched raw files; any
        file of the domain's own in the store is written to `new_store_file(name)`."""

    def raw_hashes(self, raw: dict[str, Path]) -> dict[str, str]:
        """What identifies the raw inputs in meta.json (and the run manifests): their sha256 by default (cached
        beside the files by size and mtime, so an unchanged file is not read again)."""
        digests = cached_sha256(raw.values())
        return {relpath: digests[Path(path)] for relpath, path in raw.items()}

    def build_store(self, raw: dict[str, Path]) -> dict[str, Any]:
        """Build the token store unless meta.json records these raw digests and preparation settings and the
        store's files are intact. A new store is built beside the old one and replaces it when complete."""
        hashes = self.raw_hashes(raw)
        settings = self.preparation_settings()
        with locked(self.store):
            meta = self.current_meta(hashes, settings)
            if meta is not None:
                return meta
            with building(self.store) as folder:
                self._building = folder
                try:
                    splits, extra = self.build_splits(raw)
                    meta = write_store(
                        folder,
                        domain=self.domain,
                        vocab_size=self.vocab_size,
                        splits=splits,
                        raw_sha256=hashes,
                        extra={"settings": settings, **extra},
                    )
                    self.record_preparation(folder, meta)
                finally:
                    self._building = None
        self._splits.clear()  # splits and windows opened before come from the replaced store
        self._windows.clear()
        return meta

    def record_preparation(self, folder: Path, meta: dict[str, Any]) -> None:
        """Called when the new store's files and meta.json are written into `folder`, before it replaces the old
        store: a domain may write a record of how it was built there (not a file of the store: meta.json, written
        already, does not list it). Nothing by default."""

    def current_meta(self, raw_sha256: dict[str, str], settings: dict[str, Any]) -> dict[str, Any] | None:
        """meta.json when the store was built from these raw files and settings and its files are intact (every
        file's size and sha256), else None; a damaged store is logged."""
        try:
            meta = read_meta(self.store)
        except StoreError as err:
            log.warning("%s; rebuilding the %s store", err, self.domain)
            return None
        if not is_current(meta, raw_sha256, settings=settings):
            return None
        reason = damage(self.store, meta)
        if reason is not None:
            log.warning("the %s store is damaged (%s); rebuilding it", self.domain, reason)
            return None
        return meta

    def new_store_file(self, name: str) -> Path:
        """Where build_splits writes a file of its own beside the splits: into the store being built (recorded in
        its meta.json and swapped in with it)."""
        if self._building is None:
            raise RuntimeError(f"{self.domain}: store files are written only while build_store builds the store")
        return self._building / name

    def open_split(self, name: str) -> Split:
        return read_split(self.store, name, self.meta)
