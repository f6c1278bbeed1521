"""MAESTRO's REMI tokenizer (SPEC section 2) and the parallel, cached tokenisation of many MIDI files.

Every TokenizerConfig field the vocabulary depends on is set explicitly: miditok's defaults move between
releases (3.1.0 turns time signatures on), and the suite pins miditok 3.0.4 and asserts the 328 tokens.

Tokenising is a pure function of a file's bytes and the tokenizer, so results are cached by the file's sha256
under a folder named after the tokenizer's own digest: a rebuild with other chunking or split settings, or a
re-run after an interruption, tokenises only the files it has not seen. Each entry is written (under a temporary
name, then renamed) as soon as its file is done, so an interruption, kill -9 included, loses only the files in
flight. A file that cannot be read (corrupt, truncated, no notes in range) is cached as a failure with its
reason, so it is skipped again without retrying.
Workers are processes forked from the caller on Linux: they start at once, where `spawn` re-imports miditok,
torch and the caller's main module in every worker (5-15 s each here). Forking is safe for them for the reason
it is for torch's DataLoader workers, which fork by default: a worker only parses MIDI and runs miditok's Python
and numpy code, never torch's or OpenMP's thread pools. Other platforms use `spawn`. With one worker everything
runs in the calling process. Workers end with the process that started them (on Linux, even when it is killed)
and leave Ctrl-C to it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from importlib.metadata import version
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from miditok import REMI, TokenizerConfig
from miditok.constants import CHORD_MAPS
from miditok.utils import merge_tracks
from symusic import Score

from domains.atomic import atomic_path, write_text
from domains.maestro.progress import ProgressOutput, Tally, TokenisingProgress

log = logging.getLogger("posbench.maestro")

MIDITOK_VERSION = "3.0.4"
VOCAB_SIZE = 328
SPECIAL_TOKENS = ("PAD", "BOS", "EOS", "MASK")
PITCH_RANGE = (21, 109)  # miditok's half-open range: pitches 21..108, the 88 piano keys

TOKENIZER_CONFIG = dict(
    pitch_range=PITCH_RANGE,
    beat_res={(0, 4): 8, (4, 12): 4},  # 8 positions per beat for the first 4 beats, then 4, up to 12 beats
    num_velocities=32,
    special_tokens=list(SPECIAL_TOKENS),
    use_velocities=True,
    use_note_duration_programs=list(range(-1, 128)),
    use_chords=True,
    chord_maps=CHORD_MAPS,
    chord_tokens_with_root_note=False,  # root-free chord tokens: a transposition leaves them valid
    chord_unknown=None,
    use_rests=False,
    use_tempos=True,
    num_tempos=32,
    tempo_range=(40, 250),
    log_tempos=False,
    delete_equal_successive_tempo_changes=False,
    use_time_signatures=False,
    use_sustain_pedals=False,
    use_pitch_bends=False,
    use_programs=False,
    use_pitch_intervals=False,
    use_pitchdrum_tokens=True,  # part of the 328: 61 PitchDrum tokens that piano never uses
    remove_duplicated_notes=False,
    encode_ids_split="no",  # no BPE: ids are the base vocabulary
    use_bar_end_tokens=False,  # REMI-specific (config.additional_params)
    max_bar_embedding=None,
)


def build_tokenizer() -> REMI:
    """SPEC's REMI tokenizer; refuses to run with another miditok or another vocabulary size."""
    installed = version("miditok")
    tokenizer = REMI(TokenizerConfig(**TOKENIZER_CONFIG))
    if installed != MIDITOK_VERSION or len(tokenizer) != VOCAB_SIZE:
        raise RuntimeError(
            f"MAESTRO's REMI vocabulary has {len(tokenizer)} tokens with miditok {installed}; SPEC section 2 "
            f"requires {VOCAB_SIZE} with miditok {MIDITOK_VERSION} (pinned in pyproject.toml)"
        )
    return tokenizer


def tokenizer_digest(tokenizer: REMI) -> str:
    """sha256 of the tokenizer's saved parameters (config and miditok/symusic versions)."""
    return hashlib.sha256(json.dumps(tokenizer.to_dict(), sort_keys=True).encode()).hexdigest()


class UnreadableMidi(ValueError):
    """A MIDI file that cannot be tokenised; the message says why."""


def read_score(data: bytes) -> Score:
    """One MIDI file's bytes parsed by symusic (miditok's reader), or UnreadableMidi saying why not."""
    try:
        return Score.from_midi(data)
    except RuntimeError as err:  # symusic reports every parse error (truncated, bad chunk, not MIDI) this way
        raise UnreadableMidi(f"not a readable MIDI file ({err})") from err


def tokenize_midi(data: bytes, tokenizer: REMI) -> np.ndarray:
    """REMI token ids (uint16) of one MIDI file's bytes; every track is merged into one piano stream."""
    score = read_score(data)
    tracks = [track for track in score.tracks if not track.is_drum and len(track.notes)]
    if not tracks:
        raise UnreadableMidi("no pitched notes")
    if len(tracks) > 1:
        merge_tracks(tracks)
    score.tracks = tracks[:1]
    score.tracks[0].program = 0
    sequences = tokenizer.encode(score)  # one sequence per track (REMI without programs)
    ids = np.asarray(sequences[0].ids if sequences else [], dtype=np.uint16)
    first, last = tokenizer.vocab[f"Pitch_{PITCH_RANGE[0]}"], tokenizer.vocab[f"Pitch_{PITCH_RANGE[1] - 1}"]
    if not np.any((ids >= first) & (ids <= last)):  # the tempo and the first Bar are there even without notes
        raise UnreadableMidi(f"no notes with pitch in {PITCH_RANGE[0]}..{PITCH_RANGE[1] - 1}")
    return ids


_worker_tokenizer: REMI | None = None


PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h): the signal a process gets when its parent dies


def _init_worker(parent: int) -> None:
    """A tokenising worker's start: it ends with the preparation that started it, leaves Ctrl-C to it (which
    cancels the files not started; the worker finishes its file), and builds its tokenizer."""
    global _worker_tokenizer
    _end_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_tokenizer = build_tokenizer()


def _end_with_parent(parent: int) -> None:
    """On Linux, have the kernel kill this worker when its parent dies, kill -9 included: a pool's worker whose
    parent is gone otherwise waits forever for work, holding its memory (the workers forked from a preparation
    outlive a kill -9 of it). The parent starts the workers from its main thread, whose end is the process's."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)


def tokenize_or_reason(data: bytes, tokenizer: REMI) -> np.ndarray | str:
    """Token ids, or the reason the file cannot be tokenised (what the cache stores and workers send back)."""
    try:
        return tokenize_midi(data, tokenizer)
    except UnreadableMidi as err:
        return str(err)


def _tokenize_in_worker(data: bytes) -> np.ndarray | str:
    return tokenize_or_reason(data, _worker_tokenizer)


@dataclass
class MidiFile:
    name: str  # as in the CSV, e.g. 2018/MIDI-...midi
    sha256: str
    data: bytes = field(repr=False)


@dataclass
class Tokenised:
    tokens: dict[str, np.ndarray]  # name -> ids of the files that tokenised
    skipped: dict[str, str]  # name -> reason
    tokenised: int  # files tokenised by this call (the rest came from the cache)
    from_cache: int
    workers: int
    seconds: float  # spent tokenising (with the workers' start)
    new_tokens: int  # tokens of the files tokenised by this call


def available_cpus() -> int:
    """CPUs this process may run on (a batch scheduler's limit, where os.cpu_count() reports the whole node)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class TokenCache:
    """<folder>/<sha256>.npy holds a file's ids; <sha256>.skipped.txt the reason it could not be tokenised. An
    entry that cannot be read (damaged on disk) is a miss: the file is tokenised again and the entry rewritten."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, sha256: str) -> np.ndarray | str | None:
        tokens, skipped = self.folder / f"{sha256}.npy", self.folder / f"{sha256}.skipped.txt"
        try:
            if tokens.exists():
                return np.load(tokens)
            if skipped.exists():
                return skipped.read_text()
        except (OSError, ValueError, EOFError) as err:
            log.warning("%s.*: damaged token cache entry (%s); tokenising the file again", self.folder / sha256, err)
        return None

    def put(self, sha256: str, result: np.ndarray | str) -> None:
        if isinstance(result, str):
            write_text(self.folder / f"{sha256}.skipped.txt", result)
        else:
            with atomic_path(self.folder / f"{sha256}.npy") as tmp, open(tmp, "wb") as handle:
                np.save(handle, result)


def tokenize_files(
    files: Iterable[MidiFile], cache: TokenCache, workers: int | None = None, progress: ProgressOutput | None = None
) -> Tokenised:
    """Tokenise every file not in the cache over `workers` processes (default: every CPU available), the largest
    first, showing the progress (`domains.maestro.progress`; default: stderr); returns the ids or the skip reason
    of every file.

    Each result is cached as soon as it arrives, so an interrupted call (an error, Ctrl-C, kill -9) loses only the
    files in flight, and a re-run tokenises only the others. Largest first: the last file to finish is then a
    small one, and no process waits idle at the end while another tokenises a long performance.
    """
    files = list(files)
    workers = workers or available_cpus()
    results: dict[str, np.ndarray | str] = {}
    todo = []
    for file in files:
        cached = cache.get(file.sha256)
        if cached is None:
            todo.append(file)
        else:
            results[file.name] = cached
    todo.sort(key=lambda file: len(file.data), reverse=True)
    tally = Tally(
        performances=len(files),
        from_cache=len(results),
        cached_tokens=sum(len(r) for r in results.values() if not isinstance(r, str)),
        cached_skipped=sum(isinstance(r, str) for r in results.values()),
        to_tokenise=len(todo),
        bytes_to_tokenise=sum(len(file.data) for file in todo),
    )
    workers = min(workers, max(len(todo), 1))
    with TokenisingProgress(tally, progress or ProgressOutput.default(), workers) as shown:

        def done(file: MidiFile, result: np.ndarray | str) -> None:
            cache.put(file.sha256, result)
            results[file.name] = result
            tally.add(len(file.data), result)
            shown.update()

        if workers == 1:
            tokenizer = build_tokenizer()
            for file in todo:
                done(file, tokenize_or_reason(file.data, tokenizer))
        else:
            try:
                _tokenize_in_processes(todo, workers, done)
            except BrokenProcessPool as err:
                raise RuntimeError(
                    f"a tokenising worker died (a crash in symusic or miditok, or out of memory) with "
                    f"{len(files) - len(results)} of {len(files)} files left; the files done are cached in "
                    f"{cache.folder} and a re-run continues from there"
                ) from err
    return Tokenised(
        tokens={name: r for name, r in results.items() if not isinstance(r, str)},
        skipped={name: r for name, r in results.items() if isinstance(r, str)},
        tokenised=len(todo),
        from_cache=len(files) - len(todo),
        workers=workers,
        seconds=time.perf_counter() - tally.began,
        new_tokens=tally.tokens,
    )


def _tokenize_in_processes(
    todo: list[MidiFile], workers: int, done: Callable[[MidiFile, np.ndarray | str], None]
) -> None:
    """Tokenise `todo` over a pool of `workers` processes, calling `done` in this process as each file returns.
    When anything stops the loop (an error in `done`, Ctrl-C) the files not yet started are cancelled and only
    those in flight finish, unused: leaving the pool otherwise waits for every file submitted."""
    context = get_context("fork" if sys.platform == "linux" else "spawn")
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(os.getpid(),))
    try:
        futures = {pool.submit(_tokenize_in_worker, file.data): file for file in todo}
        for future in as_completed(futures):
            done(futures[future], future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
