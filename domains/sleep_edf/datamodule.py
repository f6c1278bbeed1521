"""SleepEDFDataModule (SPEC section 2): one EEG channel of whole nights, quantised sample by sample to 256 tokens.

Data flow:
  fetch (`domains.sleep_edf.sources`): the Sleep Cassette PSGs and hypnograms, paired by the first six characters
  of their names (SC4ssN: subject ss, night N), from mne's downloader or the mirror folder.
    -> scan (every night, headers and hypnograms only; `domains.sleep_edf.recordings`): the night's trim window.
       A PSG without hypnogram, a hypnogram without PSG and a night with no scored sleep are skipped and listed
       in meta.json with the reason.
    -> split (`domains.sleep_edf.split`): subjects (ages from the table mne ships) -> train/val/test,
       subject-disjoint and age-stratified, 62/8/8 of 78 subjects.
    -> pass 1 (training nights, one at a time): read `EEG Fpz-Cz` only, trim, normalise by the night's median
       and interquartile range, clip to +-20, keep the night's distinct values and their counts. The pooled counts
       give the exact quantiles k/256 (k = 1..255) of all training samples (`domains.sleep_edf.quantiles`), as
       numpy's default (linear) quantile of the concatenated samples would, without ever holding more than one
       night.
    -> pass 2 (every night): same signal, token = bin index = searchsorted(boundaries, x, side="right") (0..255,
       uint8), over whole nights.
    -> token store: one example per night (store order = meta.json's `nights[split]`), boundaries, split,
       per-night trim, statistics and 30-s stage string in meta.json.

Windows: training draws a window of `context` tokens uniformly over all window positions of all training nights
(each training sample equally likely, whatever the night's length). Evaluation (val and test) cuts every night into
consecutive non-overlapping windows of `context` tokens from the night's first token; each window is one test
example (its first token has no context and is not scored) and a night's trailing partial window (< context
tokens, under 10.24 s at context 1024) is dropped, so every example has the same length. The paper's
N = 57,782 test sequences for 59.2M test tokens fits this rule (so would keeping the partial windows: at most 16
of them, within the rounding of 59.2M). `eval_examples` (a debugging aid) keeps only that
many evenly spaced windows; `render_example`/`plot_example` number windows exactly as the evaluation does.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from domains.atomic import atomic_path
from domains.base import EmptySplitError, EvalWindows, Window, check_minimum
from domains.fetch import mirror_root, raw_dir
from domains.sleep_edf.quantiles import VOCAB_SIZE, pooled_quantiles, quantise
from domains.sleep_edf.recordings import (
    CHANNEL,
    CLIP,
    EPOCH_S,
    MARGIN_S,
    SFREQ,
    Night,
    SleepEDFError,
    read_eeg,
    robust_scale,
    scan_night,
)
from domains.sleep_edf.sources import (
    AGE_TABLE,
    PHYSIONET_URL,
    RAW_SUBDIR,
    copy_recordings,
    download_recordings,
    listed_recordings,
    mirror_recordings,
    pair_recordings,
)
from domains.sleep_edf.split import SPLIT_RULE, SPLIT_SEED, SPLIT_SUBJECTS, read_age_table, split_subjects
from domains.stored import RawFile, TokenStoreDataModule

log = logging.getLogger("posbench.sleep_edf")


def check_enough_subjects(subjects: list[int], skipped: list[dict[str, Any]]) -> None:
    """A split needs 3 subjects with usable nights; fewer is refused naming them and every night left out, why."""
    if len(subjects) >= 3:
        return
    left_out = "; ".join(f"{entry['file']}: {entry['reason']}" for entry in skipped)
    raise SleepEDFError(
        f"{len(subjects)} subject(s) with usable nights ({', '.join(map(str, subjects)) or 'none'}); a train/val/test "
        f"split needs at least 3. "
        + (f"Nights left out: {left_out}" if skipped else "No night was left out: the raw files hold no other subject.")
    )


def grid_windows(lengths: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray]:
    """(night index, start token) of every full non-overlapping window of `context` tokens, night by night."""
    per_night = np.asarray(lengths, dtype=np.int64) // context
    night = np.repeat(np.arange(len(per_night)), per_night)
    first = np.concatenate([[0], np.cumsum(per_night)[:-1]])
    start = (np.arange(len(night)) - first[night]) * context
    return night, start


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}{f'{seconds - whole:.2f}'[1:]}"


class SleepEDFDataModule(TokenStoreDataModule):
    domain = "sleep_edf"
    pad_id = 0  # never written: training and evaluation windows are always full (the 256 tokens have no pad)
    amount_unit = "samples"

    def __init__(
        self,
        *,
        subjects: list[int] | None = None,
        split_seed: int = SPLIT_SEED,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_minimum(self.domain, 0, split_seed=split_seed)
        self.subjects = sorted(int(s) for s in subjects) if subjects is not None else None
        self.split_seed = split_seed
        self._train_starts: np.ndarray | None = None

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    def prepared_amount(self, meta: dict[str, Any]) -> int:
        return sum(split["tokens"] for split in meta["splits"].values())  # one token per sample

    def preparation_settings(self) -> dict[str, Any]:
        return {
            "channel": CHANNEL,
            "sfreq": SFREQ,
            "margin_s": MARGIN_S,
            "clip": CLIP,
            "split_subjects": list(SPLIT_SUBJECTS),
            "split_seed": self.split_seed,
            "subjects": self.subjects,
        }

    # ---- raw files -----------------------------------------------------------------------------------------
    def raw_files(self) -> list[RawFile]:
        """Every PSG and hypnogram of the chosen subjects: the mirror folder's files when $POSBENCH_MIRROR is set,
        else those mne's record table lists (nights 1 and 2)."""
        return [RawFile(f"{RAW_SUBDIR}/{name}", PHYSIONET_URL + name) for name in self.recording_names()]

    def recording_names(self) -> list[str]:
        """The file names of raw_files, sorted."""
        mirror = mirror_root()
        if mirror is not None:
            return mirror_recordings(mirror / self.domain, self._wanted)
        return listed_recordings(self.subjects)

    def _wanted(self, subject: int) -> bool:
        return self.subjects is None or subject in self.subjects

    def fetch_raw(self) -> dict[str, Path]:
        """Bring the recordings into raw/sleep_edf/physionet-sleep-data/: copies of the mirror's (each checked
        before it replaces a local copy, `copy_recordings`), or mne's downloader, after which the base class finds
        each of them (and downloads any it left out)."""
        names = self.recording_names()  # lists the mirror, or checks the subjects, before anything is written
        mirror = mirror_root()
        if mirror is not None:
            folder = raw_dir(self.domain) / RAW_SUBDIR
            copy_recordings(mirror / self.domain, names, folder)
            return {f"{RAW_SUBDIR}/{name}": folder / name for name in names}
        subjects = self.subjects if self.subjects is not None else sorted(read_age_table())
        download_recordings(subjects, raw_dir(self.domain))
        return super().fetch_raw()

    # ---- building the store ----------------------------------------------------------------------------------
    def build_splits(self, raw: dict[str, Path]) -> tuple[dict[str, list[np.ndarray]], dict[str, Any]]:
        folder = raw_dir(self.domain)
        pairs = pair_recordings([Path(relpath).name for relpath in raw])
        by_name = {Path(relpath).name: path for relpath, path in raw.items()}
        table = read_age_table()
        nights, skipped = [], []
        for night_id, (psg, hyp) in pairs.items():
            if psg is None or hyp is None:
                have, lacks = (psg, "hypnogram") if hyp is None else (hyp, "PSG")
                skipped.append({"night": night_id, "file": have, "reason": f"no {lacks} file for this night"})
                continue
            scanned = scan_night(night_id, by_name[psg], by_name[hyp], folder)
            if isinstance(scanned, str):
                skipped.append({"night": night_id, "file": psg, "reason": scanned})
                continue
            if scanned.subject not in table:
                raise SleepEDFError(f"{by_name[psg]}: subject {scanned.subject} is not in mne's age table {AGE_TABLE}")
            scanned.age, scanned.sex = table[scanned.subject].age, table[scanned.subject].sex
            nights.append(scanned)
        for entry in skipped:
            log.info("skipped %s (%s): %s", entry["night"], entry["file"], entry["reason"])
        check_enough_subjects(sorted({night.subject for night in nights}), skipped)
        subjects = split_subjects({n.subject: n.age for n in nights}, self.split_seed)
        split_of = {subject: name for name, members in subjects.items() for subject in members}
        for night in nights:
            night.split = split_of[night.subject]

        value_counts = []  # pass 1: the training nights' distinct normalised values and their counts
        for night in nights:
            if night.split == "train":
                normalised = self.normalised(night, folder)
                value_counts.append(np.unique(normalised, return_counts=True))
        boundaries = pooled_quantiles(value_counts, np.arange(1, VOCAB_SIZE) / VOCAB_SIZE)

        splits: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
        listed: dict[str, list[dict[str, Any]]] = {"train": [], "val": [], "test": []}
        for night in nights:  # pass 2: tokens over whole nights
            splits[night.split].append(quantise(self.normalised(night, folder), boundaries))
            listed[night.split].append(asdict(night))
        train_counts = np.zeros(VOCAB_SIZE, dtype=np.int64)
        for tokens in splits["train"]:
            train_counts += np.bincount(tokens, minlength=VOCAB_SIZE)
        extra = {
            "boundaries": boundaries.tolist(),
            "split": {
                "rule": SPLIT_RULE,
                "seed": self.split_seed,
                "subjects": subjects,
                "nights": {name: len(members) for name, members in listed.items()},
            },
            "nights": listed,
            "skipped": skipped,
            "train_token_counts": train_counts.tolist(),
        }
        return splits, extra

    def normalised(self, night: Night, folder: Path) -> np.ndarray:
        """The trimmed night, normalised by its median and IQR and clipped; records the statistics on `night`."""
        start, stop = night.sample_span
        signal = read_eeg(folder / night.psg, start, stop)
        try:
            scaled, night.median_uV, night.iqr_uV = robust_scale(signal)
        except SleepEDFError as err:
            raise SleepEDFError(f"{folder / night.psg}: {CHANNEL} samples {start}..{stop}: {err}") from err
        night.samples = len(signal)
        night.clipped = float(np.mean(np.abs(scaled) > CLIP))
        return np.clip(scaled, -CLIP, CLIP, out=scaled)

    # ---- windows -------------------------------------------------------------------------------------------
    def draw_train_window(self, rng: np.random.Generator) -> Window:
        """A window of `context` tokens whose start is uniform over every window position of every training night."""
        train = self.split("train")
        if self._train_starts is None:
            positions = np.maximum(np.diff(train.offsets) - self.context + 1, 0)
            if not positions.sum():
                raise EmptySplitError(f"no training night of the {self.store} store holds {self.context} tokens")
            self._train_starts = np.cumsum(positions)
        draw = int(rng.integers(self._train_starts[-1]))
        night = int(np.searchsorted(self._train_starts, draw, side="right"))
        start = int(train.offsets[night]) + draw - (int(self._train_starts[night - 1]) if night else 0)
        scored = np.ones(self.context, dtype=bool)
        scored[0] = False
        return np.asarray(train.tokens[start : start + self.context], dtype=np.int64), scored

    def eval_grid(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """(night index, start token) of the split's evaluation windows in example order: every full
        non-overlapping window of every night, or `eval_examples` of them evenly spaced (a debugging aid)."""
        night, start = grid_windows(np.diff(self.split(split).offsets), self.context)
        if not len(night):
            raise EmptySplitError(f"{split}: no night of the {self.store} store holds {self.context} tokens")
        keep = self.eval_example_indices(len(night))
        return night[keep], start[keep]

    def build_split_windows(self, split: str) -> EvalWindows:
        """The eval_grid windows of `context` tokens; each window is one example, its first token unscored.
        (Extrapolation splits, test_<f>x, cut the whole test nights into windows of f x context: the base class.)"""
        data = self.split(split)
        night, start = self.eval_grid(split)
        tokens = np.empty((len(night), self.context), dtype=data.tokens.dtype)  # uint8: loaded as int64
        for n in np.unique(night):  # the night as rows of `context` tokens, read once from the memory-mapped store
            rows = np.flatnonzero(night == n)
            full = (data.offsets[n + 1] - data.offsets[n]) // self.context * self.context
            grid = np.asarray(data.tokens[data.offsets[n] : data.offsets[n] + full]).reshape(-1, self.context)
            tokens[rows] = grid[start[rows] // self.context]
        scored = np.ones(tokens.shape, dtype=bool)
        scored[:, 0] = False
        return EvalWindows(
            tokens=tokens,
            scored=scored,
            example=np.arange(len(tokens), dtype=np.int64),
            start=np.zeros(len(tokens), dtype=np.int64),
            n_examples=len(tokens),
            max_length=self.context,
        )

    # ---- a readable look at the data ---------------------------------------------------------------------------
    def example_count(self, split: str) -> int:
        """How many examples render_example numbers in `split`: its evaluation windows, not its nights."""
        return len(self.eval_grid(split)[0])

    def window(self, split: str, index: int) -> tuple[dict[str, Any], int, np.ndarray]:
        """Evaluation window `index` of the split (row `index` of the per-example metrics for test): its night's
        meta.json entry, its first sample in the trimmed night, and its tokens."""
        data = self.split(split)
        night, start = self.eval_grid(split)
        if not 0 <= index < len(night):
            raise IndexError(f"{split} has {len(night)} evaluation windows of {self.context} tokens; no window {index}")
        entry = self.meta["nights"][split][int(night[index])]
        first = int(data.offsets[night[index]]) + int(start[index])
        return entry, int(start[index]), np.asarray(data.tokens[first : first + self.context])

    def render_example(self, split: str, index: int, max_tokens: int) -> str:
        """Window `index` (as numbered in the per-example test metrics): night, time, sleep stages, first tokens."""
        entry, start, tokens = self.window(split, index)
        begin_s = entry["trim_start_s"] + start / SFREQ
        end_s = begin_s + len(tokens) / SFREQ
        first_epoch = int(start / SFREQ // EPOCH_S)
        epochs = entry["stages"][first_epoch : int((start + len(tokens) - 1) / SFREQ // EPOCH_S) + 1]
        clock = ""
        if entry["start"]:
            clock = f", clock {datetime.fromisoformat(entry['start']) + timedelta(seconds=begin_s):%H:%M:%S}"
        return (
            f"{split}[{index}]: night {entry['id']} (subject {entry['subject']}, night {entry['night']}, "
            f"age {entry['age']}, {entry['sex']})\n"
            f"  time {_clock(begin_s)} - {_clock(end_s)} from the recording start{clock}; {len(tokens)} samples\n"
            f"  sleep stage per 30-s epoch spanned: {' '.join(epochs)} "
            "(W wake, 1-4 stages 1-4, R REM, ? unscored, M movement, . no annotation)\n"
            f"  tokens: {' '.join(str(int(t)) for t in tokens[:max_tokens])}"
        )

    def plot_example(self, split: str, index: int, path: str | Path) -> Path:
        """Draw window `index`'s normalised Fpz-Cz signal (re-read from the raw PSG) and its tokens to a PNG."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        entry, start, tokens = self.window(split, index)
        psg = raw_dir(self.domain) / entry["psg"]
        if not psg.is_file():
            raise FileNotFoundError(f"{psg}: the raw PSG of night {entry['id']} is gone; run `make data-sleep_edf`")
        first = round(entry["trim_start_s"] * SFREQ) + start
        signal = (read_eeg(psg, first, first + len(tokens)) - entry["median_uV"]) / entry["iqr_uV"]
        seconds = first / SFREQ + np.arange(len(tokens)) / SFREQ
        figure = Figure(figsize=(11, 5.5), layout="constrained")
        FigureCanvasAgg(figure)
        top, bottom = figure.subplots(2, 1, sharex=True)
        top.plot(seconds, np.clip(signal, -CLIP, CLIP), lw=0.7, color="tab:blue")
        top.set_ylabel(f"{CHANNEL} / IQR")
        top.set_title(self.render_example(split, index, 0).split("\n  tokens")[0], fontsize=8, loc="left")
        bottom.step(seconds, tokens, where="post", lw=0.7, color="tab:orange")
        bottom.set_ylim(-4, VOCAB_SIZE + 3)
        bottom.set_ylabel("token (quantile bin)")
        bottom.set_xlabel("seconds from the recording start")
        path = Path(path)
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format="png", dpi=110)
        return path
