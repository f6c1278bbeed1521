"""JSB Chorales (SPEC section 2): Bach's four-voice chorales on a 16th-note grid, one token per voice and step.

Data flow:
  Jsb16thSeparated.npz (czhuang/JSB-Chorales-dataset; fetched or copied from $POSBENCH_MIRROR/jsb/, sha256 pinned)
    -> read_chorales: arrays train/valid/test of (T, 4) float pitches S,A,T,B, NaN = the voice is silent;
       validated (keys, shapes, whole MIDI pitches 21..108), errors name the file and what was wrong
    -> chorale_tokens: token = pitch - 21 (0..87), silence = 88, serialised time-major
       (t0 S,A,T,B, t1 S,A,T,B, ...); padding = 89 is never in the store (vocabulary 90)
    -> token store: splits train/val/test = the file's train/valid/test, 229/76/77 chorales.

Training draws a chorale uniformly and a window of `context` tokens in it that starts on a timestep (a multiple
of 4 tokens), so position 0 of a window is always a soprano; shorter chorales are padded. Evaluation scores each
test chorale whole as one example (N = 77), with sliding windows (also starting on timesteps) past the context.
The extrapolation split test_<f>x (`domain.args.extrapolation`) holds the test chorales longer than the context,
each scored from its start in one window of up to f x context tokens (at the cpu preset, L = 1024: 25 chorales,
2 of them cut at 2L), so every position past the training length is scored on real music.

A held note and a repeated note of the same pitch are the same tokens in this encoding; `write_midi` therefore
writes a pitch that sounds on consecutive steps as one note.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pretty_midi

from domains.atomic import atomic_path
from domains.stored import RawFile, TokenStoreDataModule

RAW_NAME = "Jsb16thSeparated.npz"
# The commit of czhuang/JSB-Chorales-dataset that last changed the file (tests/data/PROVENANCE.md).
RAW_COMMIT = "fee571938ea47b471260666fff853d84ac664ed8"
RAW_URL = f"https://github.com/czhuang/JSB-Chorales-dataset/raw/{RAW_COMMIT}/{RAW_NAME}"
RAW_SHA256 = "2adcdf0d57880c3763f104555072285fe7f9e3d6049fcc4b9830557b8d4a7820"
SPLIT_KEYS = {"train": "train", "val": "valid", "test": "test"}  # store split -> array name in the npz

VOICES = ("S", "A", "T", "B")  # column order in the npz and token order within a timestep
LOWEST_PITCH, HIGHEST_PITCH = 21, 108  # MIDI piano range A0..C8: tokens 0..87
SILENCE_ID = 88
PAD_ID = 89
VOCAB_SIZE = 90

# write_midi: a 16th note is a quarter of a beat; at 120 beats per minute that is 0.125 s.
TEMPO_BPM = 120.0
STEP_SECONDS = 60.0 / TEMPO_BPM / 4
MIDI_PROGRAM = 52  # General MIDI "Choir Aahs": the chorales are sung
MIDI_VELOCITY = 80
VOICE_NAMES = ("Soprano", "Alto", "Tenor", "Bass")

_PITCH_CLASSES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
# Display name per token id: scientific pitch notation (MIDI 60 = C4), '-' for silence, '.' for padding.
TOKEN_NAMES = tuple(
    [f"{_PITCH_CLASSES[p % 12]}{p // 12 - 1}" for p in range(LOWEST_PITCH, HIGHEST_PITCH + 1)] + ["-", "."]
)


class JSBFormatError(ValueError):
    """The chorale file is unreadable or does not hold what Jsb16thSeparated.npz holds; names the file."""


def read_chorales(path: str | Path) -> dict[str, list[np.ndarray]]:
    """Store split name -> chorales as float64 (T, 4) arrays of MIDI pitches (NaN = silent), validated.

    The arrays are pickled object arrays, so the file is read with allow_pickle: prepare_data only calls this on
    a file whose sha256 matched the pinned one.
    """
    path = Path(path)
    if not zipfile.is_zipfile(path):  # np.load would otherwise try to unpickle the whole file
        raise JSBFormatError(f"{path}: not a readable npz archive (no zip structure)")
    try:
        with np.load(path, allow_pickle=True, encoding="latin1") as archive:
            names = list(archive.files)
            arrays = {split: archive[key] for split, key in SPLIT_KEYS.items() if key in names}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, pickle.UnpicklingError) as err:
        raise JSBFormatError(f"{path}: not a readable npz archive ({type(err).__name__}: {err})") from err
    missing = [key for split, key in SPLIT_KEYS.items() if split not in arrays]
    if missing:
        raise JSBFormatError(f"{path}: no array {', '.join(missing)}; expected train, valid and test, found {names}")
    for split, chorales in arrays.items():
        if np.ndim(chorales) == 0 or len(chorales) == 0:
            raise JSBFormatError(f"{path}: {SPLIT_KEYS[split]} holds no list of chorales (shape {np.shape(chorales)})")
    return {
        split: [_checked_chorale(path, SPLIT_KEYS[split], i, c) for i, c in enumerate(chorales)]
        for split, chorales in arrays.items()
    }


def _checked_chorale(path: Path, key: str, index: int, chorale: Any) -> np.ndarray:
    where = f"{path}: {key}[{index}]"
    try:
        pitches = np.asarray(chorale, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise JSBFormatError(f"{where} is not a numeric array ({err})") from err
    if pitches.ndim != 2 or pitches.shape[0] == 0 or pitches.shape[1] != len(VOICES):
        raise JSBFormatError(f"{where} has shape {pitches.shape}; expected (timesteps >= 1, 4) for S,A,T,B")
    sounding = pitches[~np.isnan(pitches)]
    bad = sounding[(sounding != np.round(sounding)) | (sounding < LOWEST_PITCH) | (sounding > HIGHEST_PITCH)]
    if bad.size:
        raise JSBFormatError(
            f"{where} holds {bad.size} values that are not whole MIDI pitches in {LOWEST_PITCH}..{HIGHEST_PITCH} "
            f"or NaN (silence), e.g. {np.unique(bad)[:5].tolist()}"
        )
    return pitches


def chorale_tokens(pitches: np.ndarray) -> np.ndarray:
    """(T, 4) pitches with NaN silences -> 4T tokens, time-major: t0 S,A,T,B, t1 S,A,T,B, ..."""
    silent = np.isnan(pitches)
    tokens = np.where(silent, SILENCE_ID, np.nan_to_num(pitches) - LOWEST_PITCH)
    return tokens.astype(np.uint8).reshape(-1)


class JSBDataModule(TokenStoreDataModule):
    domain = "jsb"
    pad_id = PAD_ID
    amount_unit = "pieces"  # prepared_amount counts chorales: one example each
    window_alignment: ClassVar[int] = len(VOICES)  # windows start on a timestep (also read by pipelines.generate)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name, value in (("context", self.context), ("eval_stride", self.eval_stride)):
            if value % self.window_alignment:
                raise ValueError(
                    f"jsb: {name}={value} is not a multiple of {self.window_alignment} tokens (one timestep S,A,T,B),"
                    " so windows would not start on a timestep"
                )

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    def raw_files(self) -> list[RawFile]:
        return [RawFile(RAW_NAME, RAW_URL, RAW_SHA256)]

    def preparation_settings(self) -> dict[str, Any]:
        return {"tokens": f"pitch-{LOWEST_PITCH}, silence {SILENCE_ID}, padding {PAD_ID}, time-major S,A,T,B"}

    def build_splits(self, raw: dict[str, Path]) -> tuple[dict[str, list[np.ndarray]], dict[str, Any]]:
        chorales = read_chorales(raw[RAW_NAME])
        splits = {split: [chorale_tokens(c) for c in items] for split, items in chorales.items()}
        extra = {
            "grid": "16th notes",
            "voices": "".join(VOICES),
            "timesteps": {split: sum(len(c) for c in items) for split, items in chorales.items()},
            "longest_chorale_timesteps": max(len(c) for items in chorales.values() for c in items),
        }
        return splits, extra

    def long_test_sequences(self, length: int) -> list[np.ndarray]:
        """The test chorales longer than the training context, each cut to its first `length` tokens (a multiple of
        4, so a whole timestep): one window per chorale, padded when it is shorter than `length`."""
        test = self.split("test")
        chorales = (np.asarray(test.example(i)) for i in range(len(test)))
        return [chorale[:length] for chorale in chorales if len(chorale) > self.context]

    def render_example(self, split: str, index: int, max_tokens: int) -> str:
        """One line per timestep with the note of each voice, e.g. `t=0    S:E5 A:C5 T:G4 B:C3`."""
        tokens = np.asarray(self.split(split).example(index))
        steps = min(len(tokens), max_tokens) // len(VOICES)
        header = (
            f"{split}[{index}]: {len(tokens) // len(VOICES)} timesteps of a 16th note ({len(tokens)} tokens), "
            f"first {steps} shown; '-' = silent voice"
        )
        grid = tokens[: steps * len(VOICES)].reshape(steps, len(VOICES))
        return "\n".join([header, *(render_timestep(t, row) for t, row in enumerate(grid))])

    def write_midi(self, tokens: np.ndarray, path: str | Path) -> Path:
        """Tokens of this encoding -> a four-instrument MIDI file (Soprano, Alto, Tenor, Bass) at 120 bpm.

        A trailing partial timestep is dropped. A pitch sounding on consecutive steps becomes one note; silence
        and padding tokens sound nothing. The file is written under a temporary name and renamed.
        """
        tokens = np.asarray(tokens)
        if tokens.ndim != 1 or (tokens.size and (tokens.min() < 0 or tokens.max() >= VOCAB_SIZE)):
            raise ValueError(f"{path}: expected a 1-D array of token ids 0..{VOCAB_SIZE - 1}, got {tokens!r}")
        steps = len(tokens) // len(VOICES)
        grid = tokens[: steps * len(VOICES)].reshape(steps, len(VOICES)).astype(np.int64)
        midi = pretty_midi.PrettyMIDI(initial_tempo=TEMPO_BPM)
        for voice, name in enumerate(VOICE_NAMES):
            instrument = pretty_midi.Instrument(program=MIDI_PROGRAM, name=name)
            for token, first, end in held_notes(grid[:, voice]):
                instrument.notes.append(
                    pretty_midi.Note(
                        velocity=MIDI_VELOCITY,
                        pitch=token + LOWEST_PITCH,
                        start=first * STEP_SECONDS,
                        end=end * STEP_SECONDS,
                    )
                )
            midi.instruments.append(instrument)
        path = Path(path)
        with atomic_path(path) as tmp:
            midi.write(str(tmp))
        return path


def render_timestep(t: int, tokens: np.ndarray) -> str:
    cells = " ".join(f"{voice}:{TOKEN_NAMES[int(token)]:<3}" for voice, token in zip(VOICES, tokens, strict=True))
    return f"t={t:<5d}{cells}".rstrip()


def held_notes(voice: np.ndarray) -> list[tuple[int, int, int]]:
    """(token, first step, end step) of each run of one pitch token in a voice's steps; silence and padding
    are not notes."""
    if not len(voice):
        return []
    change = np.flatnonzero(np.diff(voice)) + 1
    firsts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(voice)]])
    keep = voice[firsts] < SILENCE_ID
    return list(zip(voice[firsts][keep].tolist(), firsts[keep].tolist(), ends[keep].tolist(), strict=True))
