"""What lies under an evaluation window, to draw beneath a view along it (DaRoPE's coordinates, FoX's gates): bar
lines for music, sleep stages for EEG, the locus for the genome, the text for a synthetic task. Each domain's
facts come from its DataModule (token layout, Bar token, meta.json's stages, the genome windows); a domain not
listed here gets token positions only."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from domains.base import SequenceDataModule
from domains.hrg import HRGDataModule
from domains.jsb import VOICES, JSBDataModule
from domains.maestro import MaestroDataModule
from domains.sleep_edf import SleepEDFDataModule
from domains.sleep_edf.recordings import EPOCH_S, SFREQ
from domains.synthetic import SyntheticDataModule
from domains.synthetic.task import SEPARATOR

JSB_BAR_STEPS = 16  # sixteenth-note steps per 4/4 bar
STAGE_NAMES = {"W": "wake", "R": "REM", "?": "unscored", "M": "movement", ".": "no annotation"}  # else "stage k"


@dataclass
class ContentTrack:
    """A window's content, by token position: `marks` are labelled lines (bars), `spans` labelled stretches
    [start, end) (stages, prompt and answer), `text` one character per token (synthetic tasks)."""

    where: str  # the window's origin, one line
    what: str  # what the marks and spans are, one line
    marks: list[tuple[int, str]] = field(default_factory=list)
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    text: str | None = None

    def as_json(self) -> dict:
        return {"where": self.where, "what": self.what, "marks": self.marks, "spans": self.spans, "text": self.text}


def content_track(dm: SequenceDataModule, split: str, tokens: np.ndarray, example: int, start: int) -> ContentTrack:
    """The content of one evaluation window: its real `tokens` (no padding), the example it scores (the index in
    the split's evaluation windows' numbering) and its first token's offset in that example."""
    origin = f"{split} example {example}" + (f", tokens {start}..{start + tokens.size - 1}" if start else "")
    if isinstance(dm, SyntheticDataModule):
        return _synthetic(tokens, origin)
    if isinstance(dm, JSBDataModule):
        return _jsb(tokens, start, origin)
    if isinstance(dm, MaestroDataModule):
        return _maestro(dm, tokens, origin)
    if isinstance(dm, SleepEDFDataModule):
        return _sleep(dm, split, tokens, example, origin)
    if isinstance(dm, HRGDataModule):
        return _genome(dm, split, tokens, example, start, origin)
    return ContentTrack(origin, "token positions")


def _synthetic(tokens: np.ndarray, origin: str) -> ContentTrack:
    text = bytes(tokens.astype(np.uint8).tolist()).decode("ascii", errors="replace")
    separator = text.find(SEPARATOR)
    spans = [] if separator < 0 else [(0, separator + 1, "prompt"), (separator + 1, len(text), "answer (scored)")]
    return ContentTrack(f"{origin}: {len(text)} bytes", "the example's text, one byte per token", [], spans, text)


def _jsb(tokens: np.ndarray, start: int, origin: str) -> ContentTrack:
    per_bar = JSB_BAR_STEPS * len(VOICES)
    first = -start % per_bar  # the first token of a bar in the window
    marks = [(t, f"bar {(start + t) // per_bar + 1}") for t in range(first, tokens.size, per_bar)]
    what = f"bar lines: a bar is {JSB_BAR_STEPS} sixteenth-note steps of {len(VOICES)} tokens (S, A, T, B)"
    return ContentTrack(f"{origin} (a chorale)", what, marks)


def _maestro(dm: MaestroDataModule, tokens: np.ndarray, origin: str) -> ContentTrack:
    bars = np.flatnonzero(tokens == dm.bar_id)
    marks = [(int(t), f"bar {i + 1}") for i, t in enumerate(bars)]
    return ContentTrack(f"{origin} (a performance chunk)", "REMI Bar tokens, numbered within the window", marks)


def _sleep(dm: SleepEDFDataModule, split: str, tokens: np.ndarray, example: int, origin: str) -> ContentTrack:
    what = f"the sleep stage of each {EPOCH_S:g}-s epoch of the hypnogram ({SFREQ:g} tokens a second)"
    if split not in ("val", "test"):
        return ContentTrack(origin, f"{what}: known for the test windows only, not for {split}")
    night, first, _ = dm.window(split, example)
    epochs = ((first + np.arange(tokens.size)) / SFREQ // EPOCH_S).astype(int)
    stages = [night["stages"][e] if e < len(night["stages"]) else "." for e in epochs]
    spans, begin = [], 0
    for t in range(1, tokens.size + 1):
        if t == tokens.size or stages[t] != stages[begin]:
            spans.append((begin, t, STAGE_NAMES.get(stages[begin], f"stage {stages[begin]}")))
            begin = t
    where = f"{origin}: night {night['id']}, {first / SFREQ:.2f} s from the trimmed night's start"
    return ContentTrack(where, what, [], spans)


def _genome(dm: HRGDataModule, split: str, tokens: np.ndarray, example: int, start: int, origin: str) -> ContentTrack:
    what = "token position (a token is a 6-mer, or a single base where N or the window's end breaks the 6-mers)"
    if split not in ("val", "test"):
        return ContentTrack(f"{origin} ({split}: a longer window of the test chromosomes)", what)
    windows = dm.split(split)
    index = int(dm.eval_example_indices(len(windows))[example])
    chromosome, first_base = windows.locate(index)
    locus = f"{windows.chromosomes[chromosome]}:{first_base + 1}-{first_base + windows.window}"
    return ContentTrack(f"{origin}: {locus}, from token {start}", what)
