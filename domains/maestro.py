"""MAESTRO v3 piano performances as REMI tokens (SPEC section 2, paper 000 appendix C.1).

Data flow:
  raw      the official maestro-v3.0.0-midi.zip, downloaded or taken from $POSBENCH_MIRROR/maestro/; or the
           mirror's unpacked folder (maestro-v3.0.0.csv at its root, each MIDI file at its CSV path), copied
           into $POSBENCH_DATA/raw/maestro/. A zip must hold every performance its CSV lists (else it fails,
           naming the missing ones); an unpacked folder may hold only some (the sample mirror has 11 of the
           1276): the preparation uses those present and records how many were missing, and fails only when
           none is present.
  tokens   miditok 3.0.4 REMI with SPEC's configuration, vocabulary 328 (domains.maestro_tokenize), in
           parallel processes, cached by each file's sha256 in raw/maestro/token_cache/ (a rebuild with other
           split or chunk settings tokenises nothing). A file that cannot be read is skipped, with its name
           and reason in meta.json.
  split    over the performances that tokenised: 90/5/5 from a permutation drawn with `split_seed` (val and
           test get round(5%) each, at least one; at least 3 performances are needed), or the CSV's own split
           column (`split: official`).
  chunks   each performance is BOS + its REMI tokens + EOS, cut into chunks of `chunk_length` tokens. A chunk
           ends just before a Bar token (whole bars only) and the next one starts at the Bar token two bars
           before that end, so consecutive chunks share exactly two bars. Exceptions, counted in meta.json:
           when the two overlapping bars and the bar after them do not fit in one chunk (the next chunk would
           bring nothing new) the overlap shrinks to one bar, then to none; a single bar longer than a chunk
           is cut at `chunk_length` tokens and the next chunk continues from the cut, without overlap.
  store    one example per chunk, plus tokenizer.json (miditok's saved parameters, to decode any run's tokens)
           and performances.csv (each performance's split, sha256, tokens, chunks or skip reason).
  train    a uniformly chosen chunk of the training split, a uniform window of `context` tokens in it, then
           a pitch transposition by an offset drawn uniformly among those of -3..+3 that keep every Pitch
           token of the window inside 21..108 (offset 0 always qualifies); all from the stream's rng.
  eval     every chunk of val/test as stored, never transposed; a chunk longer than the context is scored
           with sliding windows.
"""

from __future__ import annotations

import csv
import hashlib
import io
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from miditok import REMI

from domains.atomic import atomic_path, write_npy, write_text
from domains.base import Window
from domains.fetch import FetchError, fetch, mirror_root, raw_dir
from domains.hash_cache import cached_sha256
from domains.maestro_tokenize import (
    VOCAB_SIZE,
    MidiFile,
    TokenCache,
    build_tokenizer,
    tokenize_files,
    tokenizer_digest,
)
from domains.store import token_dtype
from domains.stored import RawFile, StoredDataModule

DOMAIN = "maestro"
URL = "https://storage.googleapis.com/magentadata/datasets/maestro/v3.0.0/maestro-v3.0.0-midi.zip"
ZIP_NAME = "maestro-v3.0.0-midi.zip"
ZIP_ROOT = "maestro-v3.0.0/"  # every member of the official zip is under this folder
CSV_NAME = "maestro-v3.0.0.csv"
CSV_SPLITS = {"train": "train", "validation": "val", "test": "test"}
SPLIT_MODES = ("random", "official")
EVAL_FRACTION = 0.05  # of the performances, for val and for test each
OVERLAP_BARS = 2
TOKENIZER_FILE = "tokenizer.json"
PERFORMANCES_FILE = "performances.csv"
TEST_PERFORMANCES = "test_performances"  # whole test performances (.tokens.npy + .offsets.npy): extrapolation
MIDI_SUMS = "midi/SHA256SUMS"  # raw_sha256 key of an unpacked folder's MIDI files: sha256 of "sha256  name" lines


@dataclass(frozen=True)
class Performance:
    midi_filename: str  # relative to the dataset root, e.g. 2018/MIDI-...midi
    csv_split: str  # the CSV's split, as train/val/test


def read_index(text: str, origin: str) -> list[Performance]:
    """The performances a MAESTRO CSV lists, in its order."""
    reader = csv.DictReader(io.StringIO(text))
    missing = {"midi_filename", "split"} - set(reader.fieldnames or ())
    if missing:
        raise ValueError(f"{origin}: not a MAESTRO index, columns {sorted(missing)} are missing")
    performances = []
    for line, row in enumerate(reader, start=2):
        if row["split"] not in CSV_SPLITS:
            raise ValueError(f"{origin} line {line}: split {row['split']!r}, expected one of {list(CSV_SPLITS)}")
        performances.append(Performance(row["midi_filename"], CSV_SPLITS[row["split"]]))
    if not performances:
        raise ValueError(f"{origin}: the index lists no performance")
    return performances


# ---- raw data: the official zip, or an unpacked folder ------------------------------------------------------
class MaestroArchive:
    """The CSV index and the bytes of each performance present, read from the zip or from a folder."""

    def __init__(self, raw: dict[str, Path]) -> None:
        if ZIP_NAME in raw:
            self.source = "zip"
            self.origin = raw[ZIP_NAME]
            try:
                self.zip: zipfile.ZipFile | None = zipfile.ZipFile(self.origin)
            except zipfile.BadZipFile as err:
                raise FetchError(f"{self.origin}: not a valid zip archive ({err}); delete it and fetch again") from err
            try:
                self.index = self.present = self._check_zip()
            except BaseException:
                self.zip.close()
                raise
        else:
            self.source, self.zip = "folder", None
            self.origin = raw[CSV_NAME].parent
            self.index = read_index(raw[CSV_NAME].read_text(encoding="utf-8"), str(raw[CSV_NAME]))
            self.present = [p for p in self.index if p.midi_filename in raw]
            if not self.present:
                raise FetchError(
                    f"{self.origin}: none of the {len(self.index)} performances listed in {CSV_NAME} is present "
                    "(each MIDI file belongs at its midi_filename path, relative to the CSV)"
                )

    def _check_zip(self) -> list[Performance]:
        """The CSV inside the zip, once every performance it lists is known to be in the archive too."""
        members = set(self.zip.namelist())
        if ZIP_ROOT + CSV_NAME not in members:
            raise FetchError(f"{self.origin}: {ZIP_ROOT}{CSV_NAME} is missing; not the MAESTRO v3.0.0 MIDI archive")
        index = read_index(self.zip.read(ZIP_ROOT + CSV_NAME).decode("utf-8"), f"{self.origin}:{CSV_NAME}")
        absent = [p.midi_filename for p in index if ZIP_ROOT + p.midi_filename not in members]
        if absent:
            raise FetchError(
                f"{self.origin}: {len(absent)} of the {len(index)} performances its CSV lists are missing from the "
                f"archive: {', '.join(absent[:5])}{', ...' if len(absent) > 5 else ''} (delete it to fetch it again)"
            )
        return index

    def read(self, name: str) -> bytes:
        if self.zip is not None:
            return self.zip.read(ZIP_ROOT + name)
        return (self.origin / name).read_bytes()

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()


def fetch_raw() -> dict[str, Path]:
    """Local raw data: {ZIP_NAME: path} or, for an unpacked copy, {CSV_NAME: path, <midi_filename>: path, ...}.

    Without a mirror, a local zip is used, else a local unpacked copy (from an earlier mirror), else the zip is
    downloaded. With a mirror, its zip is copied if it has one, else its unpacked folder.
    """
    local = raw_dir(DOMAIN)
    mirror = mirror_root()
    if mirror is None:
        if not (local / ZIP_NAME).exists() and (local / CSV_NAME).is_file():
            return unpacked_files(local)
        return {ZIP_NAME: fetch(DOMAIN, ZIP_NAME, URL)}
    source = mirror / DOMAIN
    if (source / ZIP_NAME).is_file():
        return {ZIP_NAME: fetch(DOMAIN, ZIP_NAME, URL)}
    if not (source / CSV_NAME).is_file():
        raise FetchError(
            f"{source}: this MAESTRO mirror folder holds neither {ZIP_NAME} nor {CSV_NAME} (the index of the "
            "unpacked dataset, with each MIDI file at its midi_filename path); $POSBENCH_MIRROR/maestro must hold one"
        )
    copy_if_changed(source / CSV_NAME, local / CSV_NAME)
    for performance in read_index((source / CSV_NAME).read_text(encoding="utf-8"), str(source / CSV_NAME)):
        if (source / performance.midi_filename).is_file():
            copy_if_changed(source / performance.midi_filename, local / performance.midi_filename)
    return unpacked_files(local)


def copy_if_changed(source: Path, dest: Path) -> None:
    """Copy under a temporary name and rename, unless dest already has the source's size and modification time."""
    if dest.exists():
        have, want = dest.stat(), source.stat()
        if have.st_size == want.st_size and have.st_mtime_ns == want.st_mtime_ns:
            return
    with atomic_path(dest) as tmp:
        shutil.copy2(source, tmp)


def unpacked_files(root: Path) -> dict[str, Path]:
    index = read_index((root / CSV_NAME).read_text(encoding="utf-8"), str(root / CSV_NAME))
    present = {p.midi_filename: root / p.midi_filename for p in index if (root / p.midi_filename).is_file()}
    return {CSV_NAME: root / CSV_NAME, **present}


def raw_hashes(raw: dict[str, Path]) -> dict[str, str]:
    """meta.json's raw_sha256: the zip's, or the CSV's and one digest over every MIDI file's sha256 (cached)."""
    digests = cached_sha256(raw.values())
    if ZIP_NAME in raw:
        return {ZIP_NAME: digests[raw[ZIP_NAME]]}
    sums = "".join(f"{digests[path]}  {name}\n" for name, path in sorted(raw.items()) if name != CSV_NAME)
    return {CSV_NAME: digests[raw[CSV_NAME]], MIDI_SUMS: hashlib.sha256(sums.encode()).hexdigest()}


def read_midi_files(archive: MaestroArchive) -> tuple[list[MidiFile], dict[str, str]]:
    """The bytes and sha256 of each performance present; those that cannot be read are skipped with the reason."""
    files, skipped = [], {}
    for performance in archive.present:
        try:
            data = archive.read(performance.midi_filename)
        except (OSError, zipfile.BadZipFile) as err:  # a damaged zip member (bad CRC) or an unreadable file
            skipped[performance.midi_filename] = f"cannot be read ({err})"
            continue
        files.append(MidiFile(performance.midi_filename, hashlib.sha256(data).hexdigest(), data))
    return files, skipped


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """performances.csv: one row per performance used or skipped."""
    table = io.StringIO()
    columns = ["midi_filename", "split", "csv_split", "sha256", "tokens", "first_chunk", "chunks", "skipped"]
    writer = csv.DictWriter(table, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, table.getvalue())


# ---- splits and chunks ---------------------------------------------------------------------------------------
def assign_splits(performances: list[Performance], mode: str, seed: int) -> list[str]:
    """The split of each performance: `random` (90/5/5 with `seed`) or `official` (the CSV's column)."""
    n = len(performances)
    if mode == "official":
        labels = [p.csv_split for p in performances]
        for split in ("train", "val", "test"):
            if split not in labels:
                raise ValueError(f"maestro: the CSV's official split puts no usable performance (of {n}) in {split}")
        return labels
    if n < 3:
        raise ValueError(f"maestro: {n} usable performance(s); a train/val/test split needs at least 3")
    n_eval = max(1, round(EVAL_FRACTION * n))
    order = np.random.default_rng(seed).permutation(n)
    labels = np.full(n, "train", dtype=object)
    labels[order[:n_eval]] = "test"
    labels[order[n_eval : 2 * n_eval]] = "val"
    return labels.tolist()


@dataclass
class Chunks:
    bounds: list[tuple[int, int]]  # (start, end) token offsets in the performance
    reduced_overlap: int  # chunks followed by an overlap of fewer than two bars
    cut_inside_bar: int  # chunks that end inside a bar longer than a chunk


def chunk_bounds(tokens: np.ndarray, bar_id: int, length: int, overlap_bars: int = OVERLAP_BARS) -> Chunks:
    """Chunks of at most `length` tokens that end before a Bar token and overlap by `overlap_bars` bars.

    See the module docstring for the rule and its two exceptions.
    """
    n = len(tokens)
    bars = np.flatnonzero(tokens == bar_id)
    bounds, reduced, cut = [], 0, 0

    def reaches_past(start: int, end: int) -> bool:
        """Whether a chunk starting at `start` ends after `end` (so the next chunk brings new tokens)."""
        return n - start <= length or bool(np.any((bars > end) & (bars <= start + length)))

    start = 0
    while n - start > length:
        boundaries = bars[(bars > start) & (bars <= start + length)]
        if len(boundaries):
            end = int(boundaries[-1])
            inside = bars[(bars > start) & (bars < end)]  # bar starts after the chunk's first token
            candidates = [int(inside[-k]) for k in range(overlap_bars, 0, -1) if len(inside) >= k] + [end]
            following = next(c for c in candidates if c == end or reaches_past(c, end))
            reduced += int(np.count_nonzero((bars >= following) & (bars < end)) < overlap_bars)
        else:  # the bar starting at `start` (or the BOS) holds more than `length` tokens
            end = following = start + length
            cut += 1
        bounds.append((start, end))
        start = following
    bounds.append((start, n))
    return Chunks(bounds, reduced, cut)


# ---- the DataModule --------------------------------------------------------------------------------------------
class MaestroDataModule(StoredDataModule):
    domain = DOMAIN
    pad_id: ClassVar[int] = 0

    def __init__(
        self,
        *,
        split: str = "random",
        split_seed: int = 0,
        chunk_length: int = 2048,
        transpose: int = 3,
        tokenize_workers: int | None = None,
        **kwargs: Any,
    ) -> None:
        """split: random (90/5/5 with split_seed) or official (the CSV's); chunk_length: tokens per stored chunk;
        transpose: largest training transposition in semitones (0 turns it off); tokenize_workers: processes
        for tokenising (default: every CPU available)."""
        super().__init__(**kwargs)
        if split not in SPLIT_MODES:
            raise ValueError(f"maestro: unknown split {split!r}; valid: {', '.join(SPLIT_MODES)}")
        if chunk_length < 2:
            raise ValueError(f"maestro: chunk_length must be at least 2 tokens, got {chunk_length}")
        self.split_mode, self.split_seed, self.chunk_length = split, split_seed, chunk_length
        self.max_transpose, self.tokenize_workers = transpose, tokenize_workers
        self.tokenizer = build_tokenizer()
        vocab = self.tokenizer.vocab
        if self.tokenizer.pad_token_id != self.pad_id:
            raise RuntimeError(f"REMI's PAD id is {self.tokenizer.pad_token_id}, expected {self.pad_id}")
        self.bos_id, self.eos_id, self.bar_id = vocab["BOS_None"], vocab["EOS_None"], vocab["Bar_None"]
        pitch_ids = [vocab[f"Pitch_{p}"] for p in range(21, 109)]
        if pitch_ids != list(range(pitch_ids[0], pitch_ids[0] + 88)):
            raise RuntimeError("REMI's Pitch tokens are not consecutive ids; transposition by id offset would be wrong")
        self.pitch_ids = (pitch_ids[0], pitch_ids[-1])
        self.special_ids = frozenset(self.tokenizer.special_tokens_ids)
        self.tokenizer_sha256 = tokenizer_digest(self.tokenizer)
        self._saved_tokenizer: REMI | None = None
        self._performances: list[dict[str, str]] | None = None

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "split": self.split_mode,
            "split_seed": self.split_seed,
            "chunk_length": self.chunk_length,
            "transpose": self.max_transpose,
        }

    # ---- preparation ----------------------------------------------------------------------------------------
    def raw_files(self) -> list[RawFile]:
        """The official download; a mirror may hold its unpacked folder instead (see fetch_raw)."""
        return [RawFile(ZIP_NAME, URL)]

    def preparation_settings(self) -> dict[str, Any]:
        return {
            "split": self.split_mode,
            "split_seed": self.split_seed,
            "chunk_length": self.chunk_length,
            "tokenizer": self.tokenizer_sha256,
            "whole_test_performances": True,  # stores built before they were kept are rebuilt (from the cache)
        }

    def fetch_raw(self) -> dict[str, Path]:
        """The zip, or the files of an unpacked mirror folder (see the module docstring)."""
        return fetch_raw()

    def raw_hashes(self, raw: dict[str, Path]) -> dict[str, str]:
        """The zip's sha256, or the CSV's and one digest over every MIDI file's (short run manifests)."""
        return raw_hashes(raw)

    def build_splits(self, raw: dict[str, Path]) -> tuple[dict[str, list[np.ndarray]], dict[str, Any]]:
        """Tokenise, split and chunk; also writes tokenizer.json and performances.csv into the store."""
        self._performances = self._saved_tokenizer = None  # both files are written anew below
        archive = MaestroArchive(raw)
        try:
            files, skipped = read_midi_files(archive)
        finally:
            archive.close()
        cache = TokenCache(raw_dir(DOMAIN) / "token_cache" / self.tokenizer_sha256[:16])
        result = tokenize_files(files, cache, self.tokenize_workers)
        skipped.update(result.skipped)
        usable = [p for p in archive.present if p.midi_filename in result.tokens]
        labels = assign_splits(usable, self.split_mode, self.split_seed)

        splits: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
        sha = {f.name: f.sha256 for f in files}
        rows, reduced, cut = [], 0, 0
        per_split = {name: {"performances": 0, "tokens": 0} for name in splits}
        for performance, label in zip(usable, labels, strict=True):
            name = performance.midi_filename
            sequence = np.concatenate([[self.bos_id], result.tokens[name], [self.eos_id]]).astype(np.int64)
            chunks = chunk_bounds(sequence, self.bar_id, self.chunk_length)
            reduced, cut = reduced + chunks.reduced_overlap, cut + chunks.cut_inside_bar
            rows.append(
                {
                    "midi_filename": name,
                    "split": label,
                    "csv_split": performance.csv_split,
                    "sha256": sha[name],
                    "tokens": len(sequence),
                    "first_chunk": len(splits[label]),
                    "chunks": len(chunks.bounds),
                }
            )
            splits[label].extend(sequence[a:b] for a, b in chunks.bounds)
            per_split[label]["performances"] += 1
            per_split[label]["tokens"] += len(sequence)
        for name, reason in sorted(skipped.items()):
            rows.append({"midi_filename": name, "split": "skipped", "sha256": sha.get(name, ""), "skipped": reason})

        test_sequences = [
            np.concatenate([[self.bos_id], result.tokens[p.midi_filename], [self.eos_id]])
            for p, label in zip(usable, labels, strict=True)
            if label == "test"
        ]
        lengths = np.array([0] + [len(t) for t in test_sequences], dtype=np.int64)
        tokens = np.concatenate(test_sequences) if test_sequences else np.zeros(0)
        write_npy(self.store / f"{TEST_PERFORMANCES}.tokens.npy", tokens.astype(token_dtype(VOCAB_SIZE)))
        write_npy(self.store / f"{TEST_PERFORMANCES}.offsets.npy", np.cumsum(lengths))
        with atomic_path(self.store / TOKENIZER_FILE) as tmp:
            self.tokenizer.save(tmp)
        write_csv(self.store / PERFORMANCES_FILE, rows)
        extra = {
            "source": archive.source,
            "performances": {
                "listed": len(archive.index),
                "present": len(archive.present),
                "missing": len(archive.index) - len(archive.present),
                "skipped": len(skipped),
                "used": len(usable),
                "per_split": per_split,
            },
            "skipped": dict(sorted(skipped.items())),
            "tokenizer": {"file": TOKENIZER_FILE, "class": "REMI", "sha256": self.tokenizer_sha256},
            "tokenisation": {
                "tokenised": result.tokenised,
                "from_cache": result.from_cache,
                "workers": result.workers,
                "seconds": round(result.seconds, 3),
            },
            "chunks": {
                "length": self.chunk_length,
                "overlap_bars": OVERLAP_BARS,
                "reduced_overlap": reduced,
                "cut_inside_bar": cut,
            },
        }
        return splits, extra

    # ---- training windows --------------------------------------------------------------------------------------
    def draw_train_window(self, rng: np.random.Generator) -> Window:
        tokens, scored = super().draw_train_window(rng)
        return self.transpose(tokens, rng), scored

    def transpose(self, tokens: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Shift every Pitch token by one offset drawn uniformly among those of -T..+T keeping all in 21..108."""
        if not self.max_transpose:
            return tokens
        first, last = self.pitch_ids
        is_pitch = (tokens >= first) & (tokens <= last)
        low, high = -self.max_transpose, self.max_transpose
        if is_pitch.any():
            pitches = tokens[is_pitch]
            low, high = max(low, first - int(pitches.min())), min(high, last - int(pitches.max()))
        offset = int(rng.integers(low, high + 1))
        out = tokens.copy()
        out[is_pitch] += offset
        return out

    # ---- reading the data ------------------------------------------------------------------------------------
    def token_names(self, tokens: np.ndarray) -> list[str]:
        """REMI names of token ids, without miditok's `_None` suffix (Bar, BOS, PAD)."""
        return [self.tokenizer[int(t)].removesuffix("_None") for t in tokens]

    def long_test_sequences(self, length: int) -> list[np.ndarray]:
        """Extrapolation material: the whole test performances (the stored test chunks stop at chunk_length),
        cut into consecutive pieces of `length` tokens."""
        tokens = np.load(self.store / f"{TEST_PERFORMANCES}.tokens.npy", mmap_mode="r")
        offsets = np.load(self.store / f"{TEST_PERFORMANCES}.offsets.npy")
        pieces = []
        for begin, end in zip(offsets[:-1], offsets[1:], strict=True):
            pieces += [
                np.asarray(tokens[s : s + length], dtype=np.int64) for s in range(begin, end - length + 1, length)
            ]
        return pieces

    def performances(self) -> list[dict[str, str]]:
        """Rows of the store's performances.csv."""
        if self._performances is None:
            with open(self.store / PERFORMANCES_FILE, newline="") as handle:
                self._performances = list(csv.DictReader(handle))
        return self._performances

    def render_example(self, split: str, index: int, max_tokens: int) -> str:
        """The chunk's REMI token names, one bar per line, under the performance it comes from."""
        tokens = self.split(split).example(index)
        rows = [row for row in self.performances() if row["split"] == split]
        row = next(r for r in rows if int(r["first_chunk"]) <= index < int(r["first_chunk"]) + int(r["chunks"]))
        where = f"{row['midi_filename']}, chunk {index - int(row['first_chunk']) + 1} of {row['chunks']}"
        lines, line = [], []
        for name in self.token_names(tokens[:max_tokens]):
            if name == "Bar" and line:
                lines.append(" ".join(line))
                line = []
            line.append(name)
        lines.append(" ".join(line))
        shown = f"first {max_tokens} of " if len(tokens) > max_tokens else ""
        return f"{split}[{index}]: {where} ({shown}{len(tokens)} tokens)\n" + "\n".join(lines)

    @property
    def saved_tokenizer(self) -> REMI:
        """The tokenizer saved with the store: it decodes the store's tokens even if the code's config changes."""
        if self._saved_tokenizer is None:
            path = self.store / TOKENIZER_FILE
            if not path.exists():
                raise FileNotFoundError(f"{path}: the maestro store is not prepared; run `make data-maestro`")
            self._saved_tokenizer = REMI(params=path)
        return self._saved_tokenizer

    def write_midi(self, tokens: np.ndarray | list[int], path: str | Path) -> Path:
        """Decode REMI ids with the saved tokenizer (special tokens dropped) and write a MIDI file atomically."""
        ids = [int(t) for t in np.asarray(tokens).ravel() if int(t) not in self.special_ids]
        score = self.saved_tokenizer.decode([ids])
        with atomic_path(path) as tmp:
            score.dump_midi(str(tmp))
        return Path(path)
