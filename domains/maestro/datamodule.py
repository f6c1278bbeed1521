"""MaestroDataModule: MAESTRO v3 piano performances as REMI tokens (SPEC section 2, paper 000 appendix C.1).

Data flow:
  raw      the official maestro-v3.0.0-midi.zip, downloaded or taken from $POSBENCH_MIRROR/maestro/; or the
           mirror's unpacked folder, copied into $POSBENCH_DATA/raw/maestro/ (`domains.maestro.archive`). A zip
           must hold every performance its CSV lists; an unpacked folder may hold only some: the preparation uses
           those present and records how many were missing.
  tokens   miditok 3.0.4 REMI with SPEC's configuration, vocabulary 328 (`domains.maestro.tokenizer`), in
           parallel processes, largest file first, with a progress bar (plain lines in a log), cached by each
           file's sha256 in raw/maestro/token_cache/ as each file is done (a rebuild with other split or chunk
           settings tokenises nothing; an interrupted preparation run again tokenises only the files not yet
           cached). A file that cannot be read is skipped, with its name and reason in meta.json.
  split    over the performances that tokenised: 90/5/5 with `split_seed`, or the CSV's own split column
           (`split: official`; `domains.maestro.split`).
  chunks   each performance is BOS + its REMI tokens + EOS, cut into chunks of `chunk_length` tokens that end
           before a Bar token and overlap by two bars (`domains.maestro.chunks`; the exceptions are counted in
           meta.json).
  store    one example per chunk, plus tokenizer.json (miditok's saved parameters, to decode any run's tokens)
           and performances.csv (a row per performance the CSV lists: its split, sha256, tokens and chunks, or
           skipped / missing and why; `domains.maestro.performances` checks it accounts for each once before
           anything is written). meta.json depends on the raw files, the settings and the code only;
           preparation.json, beside it, records how this build went: phase times, tokenised / from the cache,
           workers, wall time, peak memory (`domains.maestro.preparation`), and `make data-maestro` prints it.
  train    a uniformly chosen chunk of the training split, a uniform window of `context` tokens in it, then
           a pitch transposition by an offset drawn uniformly among those of -3..+3 that keep every Pitch
           token of the window inside 21..108 (offset 0 always qualifies); all from the stream's rng.
  eval     every chunk of val/test as stored, never transposed; a chunk longer than the context is scored
           with sliding windows.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from miditok import REMI

from domains.atomic import atomic_path, write_npy
from domains.base import Window, check_minimum
from domains.fetch import raw_dir
from domains.maestro.archive import (
    CSV_NAME,
    DOMAIN,
    URL,
    ZIP_NAME,
    MaestroArchive,
    archive_hashes,
    fetch_archive,
    is_whole_set,
    read_midi_files,
)
from domains.maestro.chunks import OVERLAP_BARS, chunk_bounds
from domains.maestro.performances import (
    MISSING,
    MISSING_REASON,
    PERFORMANCES_FILE,
    SKIPPED,
    check_against_index,
    write_performances,
)
from domains.maestro.preparation import Stopwatch, preparation_record, read_record, summary_lines, write_record
from domains.maestro.split import SPLIT_MODES, assign_splits
from domains.maestro.tokenizer import VOCAB_SIZE, TokenCache, build_tokenizer, tokenize_files, tokenizer_digest
from domains.store import StoreError, load_array, store_file, token_dtype
from domains.stored import RawFile, TokenStoreDataModule

TOKENIZER_FILE = "tokenizer.json"
TEST_PERFORMANCES = "test_performances"  # whole test performances (.tokens.npy + .offsets.npy): extrapolation


class MaestroDataModule(TokenStoreDataModule):
    domain = DOMAIN
    pad_id: ClassVar[int] = 0
    amount_unit = "pieces"

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
        check_minimum(self.domain, 2, chunk_length=chunk_length)
        check_minimum(self.domain, 0, split_seed=split_seed, transpose=transpose)
        if tokenize_workers is not None:
            check_minimum(self.domain, 1, tokenize_workers=tokenize_workers)
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
        self.stopwatch = Stopwatch()  # the phases of a preparation (preparation.json)
        self._tokenisation: dict[str, Any] = {}
        self._built_now = False  # whether the last prepare_data built the store

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

    def prepared_amount(self, meta: dict[str, Any]) -> int:
        return meta["performances"]["present"]

    def other_raw_data(self, meta: dict[str, Any], wanted: dict[str, str]) -> str | None:
        """The stored domains' rule (StoredDataModule.other_raw_data); a store of part of the set (a mirror holding
        some performances, as the 11 samples) says how many of how many, and how to prepare the whole set."""
        why = super().other_raw_data(meta, wanted)
        counts = meta.get("performances") or {}
        present, listed = counts.get("present"), counts.get("listed")
        if why is None or not isinstance(present, int) or not isinstance(listed, int) or present >= listed:
            return why
        theirs = f"all {listed:,}" if is_whole_set(wanted) else "another set of files"
        return (
            f"the local MAESTRO store ({self.store}) holds {present:,} of the {listed:,} performances its CSV lists "
            f"(prepared from a mirror holding only those), the study's runs were prepared from {theirs}: prepare "
            f"the whole set first, `POSBENCH_MIRROR=<the unpacked MAESTRO v3.0.0 set> make data-maestro` (the "
            f"folder holding {CSV_NAME} and every performance at its CSV path, or holding it as maestro/), or "
            "`make data-maestro` without POSBENCH_MIRROR to download the zip"
        )

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
        return fetch_archive()

    def raw_hashes(self, raw: dict[str, Path]) -> dict[str, str]:
        """The zip's sha256, or the CSV's and one digest over every MIDI file's (short run manifests)."""
        hashes = archive_hashes(raw)
        self.stopwatch.lap("hash")
        return hashes

    def prepare_data(self) -> dict[str, Any]:
        """Fetch and build as every stored domain does, timing each phase for the preparation record."""
        self.stopwatch.restart()
        self._built_now = False
        raw = self.fetch_raw()
        self.stopwatch.lap("fetch")
        return self.build_store(raw)

    def build_splits(self, raw: dict[str, Path]) -> tuple[dict[str, list[np.ndarray]], dict[str, Any]]:
        """Tokenise, split and chunk; also writes tokenizer.json, performances.csv and the whole test performances
        into the store. Every performance the CSV lists is accounted for before anything is written."""
        self._performances = self._saved_tokenizer = None  # both files are written anew below
        self.stopwatch.lap("check")  # since the hashes: whether the store is current, the folder to build in
        archive = MaestroArchive(raw)
        try:
            files, skipped = read_midi_files(archive)
        finally:
            archive.close()
        sha = {f.name: f.sha256 for f in files}
        self.stopwatch.lap("read")
        cache = TokenCache(raw_dir(DOMAIN) / "token_cache" / self.tokenizer_sha256[:16])
        result = tokenize_files(files, cache, self.tokenize_workers)
        del files  # the MIDI bytes (84 MB for the whole set) are not needed past here
        self.stopwatch.lap("tokenise")
        skipped.update(result.skipped)
        usable = [p for p in archive.present if p.midi_filename in result.tokens]
        split_of = dict(
            zip((p.midi_filename for p in usable), assign_splits(usable, self.split_mode, self.split_seed), strict=True)
        )
        present = {p.midi_filename for p in archive.present}

        dtype = token_dtype(VOCAB_SIZE)
        splits: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
        rows, test_sequences, reduced, cut = [], [], 0, 0
        per_split = {name: {"performances": 0, "tokens": 0} for name in splits}
        for performance in archive.index:
            name = performance.midi_filename
            row = {"midi_filename": name, "csv_split": performance.csv_split, "sha256": sha.get(name, "")}
            if name in split_of:
                label = split_of[name]
                sequence = np.concatenate(([self.bos_id], result.tokens[name], [self.eos_id])).astype(dtype)
                chunks = chunk_bounds(sequence, self.bar_id, self.chunk_length)
                reduced, cut = reduced + chunks.reduced_overlap, cut + chunks.cut_inside_bar
                row |= {"split": label, "tokens": len(sequence), "first_chunk": len(splits[label])}
                row["chunks"] = len(chunks.bounds)
                splits[label].extend(sequence[a:b] for a, b in chunks.bounds)
                per_split[label]["performances"] += 1
                per_split[label]["tokens"] += len(sequence)
                if label == "test":
                    test_sequences.append(sequence)
            elif name in skipped:
                row |= {"split": SKIPPED, "skipped": skipped[name]}
            elif name not in present:
                row |= {"split": MISSING, "skipped": MISSING_REASON}
            else:  # present, neither tokenised nor skipped: check_against_index names it
                continue
            rows.append(row)
        check_against_index(rows, archive.index, self.split_mode, archive.index_origin)
        self.stopwatch.lap("split and chunk")

        lengths = np.array([0] + [len(t) for t in test_sequences], dtype=np.int64)
        tokens = np.concatenate(test_sequences) if test_sequences else np.zeros(0, dtype)
        write_npy(self.new_store_file(f"{TEST_PERFORMANCES}.tokens.npy"), tokens)
        write_npy(self.new_store_file(f"{TEST_PERFORMANCES}.offsets.npy"), np.cumsum(lengths))
        with atomic_path(self.new_store_file(TOKENIZER_FILE)) as tmp:
            self.tokenizer.save(tmp)
        write_performances(self.new_store_file(PERFORMANCES_FILE), rows)
        csv_per_split = {name: 0 for name in splits}
        for performance in archive.index:
            csv_per_split[performance.csv_split] += 1
        extra = {
            "source": archive.source,
            "performances": {
                "listed": len(archive.index),
                "present": len(archive.present),
                "missing": len(archive.index) - len(archive.present),
                "skipped": len(skipped),
                "used": len(usable),
                "per_split": per_split,
                "csv_per_split": csv_per_split,
            },
            "skipped": dict(sorted(skipped.items())),
            "tokenizer": {"file": TOKENIZER_FILE, "class": "REMI", "sha256": self.tokenizer_sha256},
            "chunks": {
                "length": self.chunk_length,
                "overlap_bars": OVERLAP_BARS,
                "reduced_overlap": reduced,
                "cut_inside_bar": cut,
            },
        }
        self._tokenisation = {
            "performances": len(result.tokens) + len(result.skipped),
            "tokenised": result.tokenised,
            "from_cache": result.from_cache,
            "skipped": len(result.skipped),
            "workers": result.workers,
            "tokens": result.new_tokens,
            "seconds": round(result.seconds, 2),
            "files_per_second": round(result.tokenised / result.seconds, 3) if result.seconds else 0.0,
            "tokens_per_second": round(result.new_tokens / result.seconds, 1) if result.seconds else 0.0,
        }
        return splits, extra

    def record_preparation(self, folder: Path, meta: dict[str, Any]) -> None:
        """preparation.json beside the new store's files (`domains.maestro.preparation`): written last, so its
        phases add up to the whole preparation but the store's swap into place."""
        self.stopwatch.lap("write")
        write_record(folder, preparation_record(self.stopwatch, self._tokenisation))
        self._built_now = True

    def preparation_record(self) -> dict[str, Any]:
        return read_record(self.store)

    def preparation_summary(self, meta: dict[str, Any]) -> list[str]:
        return summary_lines(meta, self.preparation_record(), built_now=self._built_now)

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
        tokens = load_array(self.store, f"{TEST_PERFORMANCES}.tokens.npy", self.meta)
        offsets = load_array(self.store, f"{TEST_PERFORMANCES}.offsets.npy", self.meta, mmap=False)
        pieces = []
        for begin, end in zip(offsets[:-1], offsets[1:], strict=True):
            pieces += [
                np.asarray(tokens[s : s + length], dtype=np.int64) for s in range(begin, end - length + 1, length)
            ]
        return pieces

    def performances(self) -> list[dict[str, str]]:
        """Rows of the store's performances.csv."""
        if self._performances is None:
            with open(store_file(self.store, PERFORMANCES_FILE, self.meta), newline="") as handle:
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
            path = store_file(self.store, TOKENIZER_FILE, self.meta)
            try:
                self._saved_tokenizer = REMI(params=path)
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise StoreError(f"{path}: not a saved miditok tokenizer ({err}); run `make data-maestro`") from err
        return self._saved_tokenizer

    def write_midi(self, tokens: np.ndarray | list[int], path: str | Path) -> Path:
        """Decode REMI ids with the saved tokenizer (special tokens dropped) and write a MIDI file atomically."""
        ids = [int(t) for t in np.asarray(tokens).ravel() if int(t) not in self.special_ids]
        score = self.saved_tokenizer.decode([ids])
        with atomic_path(path) as tmp:
            score.dump_midi(str(tmp))
        return Path(path)
