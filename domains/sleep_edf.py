"""Sleep-EDF (SPEC section 2): one EEG channel of whole nights, quantised sample by sample to 256 tokens.

Data flow:
  Sleep Cassette recordings of Sleep-EDF Expanded (PhysioNet): per night a PSG (EDF, 30-s data records, 100 Hz
  and 1 Hz channels mixed) and a hypnogram (EDF+, annotations only), paired by the first six characters of their
  names (SC4ssN: subject ss, night N). They come from mne's downloader
  (`mne.datasets.sleep_physionet.age.fetch_data`, which checks its own sha1 table) or, when $POSBENCH_MIRROR is
  set, from the flat folder $POSBENCH_MIRROR/sleep_edf/; either way they end up in
  $POSBENCH_DATA/raw/sleep_edf/physionet-sleep-data/ (mne's layout).
    -> scan (every night, headers and hypnograms only): hypnogram -> the first and last 30-s epoch scored
       1/2/3/4/R that lie inside the recording (a hypnogram longer than the signal is clipped) -> trim window
       [first - 30 min, last + 30 min] clipped to the recording. A PSG without hypnogram, a hypnogram without
       PSG and a night with no scored sleep are skipped and listed in meta.json with the reason.
    -> split: subjects (ages from the table mne ships) -> train/val/test, subject-disjoint and age-stratified,
       62/8/8 of 78 subjects (see `split_subjects` for the rule and how it scales to fewer subjects).
    -> pass 1 (training nights, one at a time): read `EEG Fpz-Cz` only, trim, normalise by the night's median
       and interquartile range, clip to +-20, keep the night's distinct values and their counts. The pooled counts
       give the exact quantiles k/256 (k = 1..255) of all training samples, as numpy's default (linear) quantile
       of the concatenated samples would, without ever holding more than one night.
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

import csv
import filecmp
import logging
import math
import re
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import mne
import numpy as np

from domains.atomic import atomic_path
from domains.base import EmptySplitError, EvalWindows, Window
from domains.fetch import FetchError, mirror_root, raw_dir
from domains.stored import RawFile, StoredDataModule

log = logging.getLogger("posbench.sleep_edf")

CHANNEL = "EEG Fpz-Cz"
SFREQ = 100.0  # Hz; every Sleep Cassette Fpz-Cz channel
EPOCH_S = 30.0  # hypnogram scoring epoch
MARGIN_S = 1800.0  # wake kept before the first and after the last scored-sleep epoch
CLIP = 20.0  # normalised samples are clipped to +-CLIP interquartile ranges
VOCAB_SIZE = 256
SPLIT_SUBJECTS = (62, 8, 8)  # train/val/test subjects of the 78 (paper 000 appendix C.1)
# The smallest seed for which `split_subjects` on mne's table reproduces the paper's 122/15/16 nights.
SPLIT_SEED = 4

# Hypnogram labels (one-character codes for meta.json's stage strings); scored sleep is 1/2/3/4/R.
STAGE_CODES = {
    "Sleep stage W": "W",
    "Sleep stage 1": "1",
    "Sleep stage 2": "2",
    "Sleep stage 3": "3",
    "Sleep stage 4": "4",
    "Sleep stage R": "R",
    "Sleep stage ?": "?",
    "Movement time": "M",
}
SLEEP_LABELS = frozenset({"Sleep stage 1", "Sleep stage 2", "Sleep stage 3", "Sleep stage 4", "Sleep stage R"})
NO_ANNOTATION = "."  # an epoch no hypnogram annotation covers

RAW_SUBDIR = "physionet-sleep-data"  # where mne's fetch_data puts the files under its `path`
PHYSIONET_URL = mne.datasets.sleep_physionet.age.BASE_URL
AGE_TABLE = Path(mne.datasets.sleep_physionet.__file__).parent / "age_records.csv"
# PhysioNet names: SC4 + subject (2 digits) + night (1 digit) + E/F/G, then 0 for the PSG or the scorer's letter
# for the hypnogram. A suffix before .edf is allowed (the shared sample is SC4001E0-PSG_first300s.edf).
PSG_NAME = re.compile(r"SC4(\d\d)(\d)[A-Z]0-PSG[\w.-]*\.edf")
HYPNOGRAM_NAME = re.compile(r"SC4(\d\d)(\d)[A-Z]{2}-Hypnogram[\w.-]*\.edf")


class SleepEDFError(ValueError):
    """A recording or hypnogram that cannot be used as it is; the message names the file and what was wrong."""


# ---- the age table ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Subject:
    age: int
    sex: str
    nights: tuple[int, ...]  # night numbers the corpus holds


def read_age_table(path: Path = AGE_TABLE) -> dict[int, Subject]:
    """Subject number -> age, sex and nights, from the Sleep Cassette table mne ships (one row per file)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: mne's Sleep Cassette age table is missing; is mne installed whole?")
    rows: dict[int, dict[str, Any]] = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            subject = rows.setdefault(int(row["subject"]), {"age": int(row["age"]), "sex": row["sex"], "nights": set()})
            subject["nights"].add(int(row["night"]))
    return {s: Subject(r["age"], r["sex"], tuple(sorted(r["nights"]))) for s, r in sorted(rows.items())}


# ---- hypnograms and trimming ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hypnogram:
    onset: np.ndarray  # seconds from the recording start (the hypnogram starts with its PSG)
    duration: np.ndarray
    label: np.ndarray  # full label text, e.g. "Sleep stage 2"


def check_edf(path: Path) -> str:
    """The EDF header's reserved field ('EDF+C', 'EDF+D' or blank for plain EDF), after checking that the file
    holds every data record its header announces (mne would read a truncated file silently)."""
    with open(path, "rb") as handle:
        header = handle.read(256)
        try:
            if len(header) < 256 or header[:8] != b"0       ":
                raise ValueError("no EDF header")
            header_bytes, records, signals = int(header[184:192]), int(header[236:244]), int(header[252:256])
            handle.seek(256 + signals * 216)  # label 16, transducer 80, 5 x 8, prefiltering 80: samples per record
            per_record = [int(handle.read(8)) for _ in range(signals)]
        except ValueError as err:
            raise SleepEDFError(f"{path}: not a readable EDF file ({err})") from err
    expected = header_bytes + max(records, 0) * 2 * sum(per_record)  # 16-bit samples; -1 records = unknown
    if path.stat().st_size < expected:
        raise SleepEDFError(
            f"{path}: truncated, {path.stat().st_size} bytes where the header announces {records} data records "
            f"({expected} bytes)"
        )
    return header[192:236].decode("ascii", errors="replace")


def read_hypnogram(path: str | Path) -> Hypnogram:
    """The stage annotations of a Sleep-EDF hypnogram (EDF+ with annotations only)."""
    path = Path(path)
    if not check_edf(path).startswith("EDF+"):
        raise SleepEDFError(f"{path}: not an EDF+ file, so it holds no hypnogram annotations")
    try:
        annotations = mne.read_annotations(path)
    except (OSError, ValueError, RuntimeError, IndexError) as err:
        raise SleepEDFError(f"{path}: unreadable hypnogram ({err})") from err
    labels = np.array([str(label) for label in annotations.description], dtype=str)
    unknown = sorted(set(labels) - set(STAGE_CODES))
    if unknown:
        raise SleepEDFError(f"{path}: unknown hypnogram labels {unknown}; expected {sorted(STAGE_CODES)}")
    return Hypnogram(np.asarray(annotations.onset, float), np.asarray(annotations.duration, float), labels)


def sleep_period(hypnogram: Hypnogram, recording_s: float) -> tuple[float, float] | None:
    """(start of the first, end of the last) epoch scored 1/2/3/4/R inside [0, recording_s); None if there is none.

    Annotations are runs of whole 30-s epochs, so the first and last scored-sleep epochs start and end the
    first and last sleep runs; the parts of runs past the end of the signal are dropped.
    """
    end = np.minimum(hypnogram.onset + hypnogram.duration, recording_s)
    inside = np.isin(hypnogram.label, list(SLEEP_LABELS)) & (hypnogram.onset < recording_s) & (end > hypnogram.onset)
    if not inside.any():
        return None
    return float(hypnogram.onset[inside].min()), float(end[inside].max())


def trim_bounds(first_sleep_s: float, last_sleep_end_s: float, recording_s: float) -> tuple[float, float]:
    """The kept span in seconds: 30 minutes before the first and after the last scored-sleep epoch, clipped."""
    return max(0.0, first_sleep_s - MARGIN_S), min(recording_s, last_sleep_end_s + MARGIN_S)


def stage_string(hypnogram: Hypnogram, start_s: float, stop_s: float) -> str:
    """One code per 30-s epoch from start_s (STAGE_CODES, '.' where no annotation covers the epoch's middle)."""
    middles = start_s + EPOCH_S * (np.arange(math.ceil((stop_s - start_s) / EPOCH_S)) + 0.5)
    order = np.argsort(hypnogram.onset, kind="stable")
    onset, end = hypnogram.onset[order], (hypnogram.onset + hypnogram.duration)[order]
    codes = np.array([STAGE_CODES[label] for label in hypnogram.label[order]] + [NO_ANNOTATION])
    latest = np.searchsorted(onset, middles, side="right") - 1  # the last annotation starting before the middle
    covered = (latest >= 0) & (middles < end[np.maximum(latest, 0)])
    return "".join(codes[np.where(covered, latest, -1)])


# ---- the EEG channel --------------------------------------------------------------------------------------------
def open_eeg(path: str | Path) -> mne.io.BaseRaw:
    """The PSG with only EEG Fpz-Cz (never resampled together with the 1 Hz channels), data not yet read."""
    path = Path(path)
    check_edf(path)
    try:
        raw = mne.io.read_raw_edf(path, include=[CHANNEL], preload=False, verbose="error")
    except (OSError, ValueError, RuntimeError, IndexError) as err:
        raise SleepEDFError(f"{path}: not a readable EDF file ({err})") from err
    if raw.ch_names != [CHANNEL]:
        channels = mne.io.read_raw_edf(path, preload=False, verbose="error").ch_names
        raise SleepEDFError(f"{path}: no channel {CHANNEL!r}; the file has {channels}")
    if raw.info["sfreq"] != SFREQ:
        raise SleepEDFError(f"{path}: {CHANNEL} is sampled at {raw.info['sfreq']} Hz, expected {SFREQ:g} Hz")
    return raw


def read_eeg(path: str | Path, start: int, stop: int) -> np.ndarray:
    """Samples start..stop-1 of EEG Fpz-Cz in microvolts (float64)."""
    raw = open_eeg(path)
    try:
        return raw.get_data(start=start, stop=stop, units="uV")[0]
    except (OSError, ValueError, RuntimeError, IndexError) as err:
        raise SleepEDFError(f"{path}: {CHANNEL} samples {start}..{stop} could not be read ({err})") from err


def robust_scale(signal: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(signal - median) / IQR, with the median and IQR; IQR = 75th - 25th percentile (numpy's linear rule)."""
    median = float(np.median(signal))
    low, high = np.percentile(signal, [25, 75])
    if not high > low:
        raise SleepEDFError(f"interquartile range {high - low}: the signal is flat")
    return (signal - median) / (high - low), median, float(high - low)


def quantise(normalised: np.ndarray, boundaries: np.ndarray) -> np.ndarray:
    """Token = index of the bin: the number of boundaries <= x (0..len(boundaries)), as uint8."""
    return np.searchsorted(boundaries, normalised, side="right").astype(np.uint8)


def pooled_quantiles(value_counts: list[tuple[np.ndarray, np.ndarray]], probabilities: np.ndarray) -> np.ndarray:
    """numpy.quantile(concatenated samples, probabilities) (default linear method) from per-part value counts.

    `value_counts` holds, per part, its distinct values and how often each occurs (np.unique(..., return_counts)),
    so the pooled samples are never materialised: a night of 12-bit EEG has at most 4096 distinct values.
    """
    values = np.concatenate([v for v, _ in value_counts])
    counts = np.concatenate([c for _, c in value_counts]).astype(np.int64)
    distinct, inverse = np.unique(values, return_inverse=True)
    totals = np.zeros(len(distinct), dtype=np.int64)
    np.add.at(totals, inverse, counts)
    ends = np.cumsum(totals)  # sorted sample p is distinct[searchsorted(ends, p, side="right")]
    n = int(ends[-1])
    virtual = (n - 1) * np.asarray(probabilities, dtype=np.float64)
    below = np.floor(virtual)
    gamma = virtual - below
    low = below.astype(np.int64)
    a = distinct[np.searchsorted(ends, low, side="right")]
    b = distinct[np.searchsorted(ends, np.minimum(low + 1, n - 1), side="right")]
    # numpy's _lerp, including its switch to interpolating from b above gamma 0.5, so the results are identical
    return np.where(gamma >= 0.5, b - (b - a) * (1 - gamma), a + (b - a) * gamma)


# ---- nights and the split ----------------------------------------------------------------------------------------
@dataclass
class Night:
    id: str  # SC4ssN
    subject: int
    night: int
    psg: str  # relative path in the raw folder
    hypnogram: str
    start: str  # recording start, ISO 8601 (anonymised dates in the real data)
    recording_s: float
    first_sleep_s: float
    last_sleep_end_s: float
    trim_start_s: float
    trim_stop_s: float
    stages: str  # one code per 30-s epoch from trim_start_s (STAGE_CODES)
    age: int = -1
    sex: str = ""
    split: str = ""
    samples: int = 0
    median_uV: float = 0.0
    iqr_uV: float = 0.0
    clipped: float = 0.0  # fraction of samples clipped to +-CLIP

    @property
    def sample_span(self) -> tuple[int, int]:
        return round(self.trim_start_s * SFREQ), round(self.trim_stop_s * SFREQ)


def pair_recordings(names: list[str]) -> dict[str, tuple[str | None, str | None]]:
    """Night id (the first six characters) -> (PSG name, hypnogram name); either is None when the other is alone."""
    pairs: dict[str, list[str | None]] = {}
    for name in sorted(names):
        if not (PSG_NAME.fullmatch(name) or HYPNOGRAM_NAME.fullmatch(name)):
            raise SleepEDFError(f"{name}: not a Sleep Cassette file name (SC4ssNE0-PSG.edf, SC4ssNEx-Hypnogram.edf)")
        kind = 0 if PSG_NAME.fullmatch(name) else 1
        pair = pairs.setdefault(name[:6], [None, None])
        if pair[kind] is not None:
            raise SleepEDFError(f"{name} and {pair[kind]}: two {('PSG', 'hypnogram')[kind]} files for night {name[:6]}")
        pair[kind] = name
    return {night: (psg, hyp) for night, (psg, hyp) in sorted(pairs.items())}


def scan_night(night_id: str, psg: Path, hypnogram: Path, folder: Path) -> Night | str:
    """A night's trim and stages from its hypnogram and PSG header, or the reason it is skipped."""
    raw = open_eeg(psg)
    recording_s = raw.n_times / SFREQ
    stages = read_hypnogram(hypnogram)
    period = sleep_period(stages, recording_s)
    if period is None:
        return f"no epoch scored 1/2/3/4/R within the recording's {recording_s:g} s"
    start_s, stop_s = trim_bounds(*period, recording_s)
    meas_date = raw.info["meas_date"]
    return Night(
        id=night_id,
        subject=int(night_id[3:5]),
        night=int(night_id[5]),
        psg=psg.relative_to(folder).as_posix(),
        hypnogram=hypnogram.relative_to(folder).as_posix(),
        start=meas_date.isoformat() if meas_date else "",
        recording_s=recording_s,
        first_sleep_s=period[0],
        last_sleep_end_s=period[1],
        trim_start_s=start_s,
        trim_stop_s=stop_s,
        stages=stage_string(stages, start_s, stop_s),
    )


def split_sizes(n_subjects: int) -> tuple[int, int, int]:
    """Train/val/test subject counts: val and test each 8/78 of the subjects (rounded half up, at least 1)."""
    if n_subjects < 3:
        raise SleepEDFError(f"{n_subjects} subject(s) with usable nights; a train/val/test split needs at least 3")
    held_out = max(1, math.floor(n_subjects * SPLIT_SUBJECTS[1] / sum(SPLIT_SUBJECTS) + 0.5))
    return n_subjects - 2 * held_out, held_out, held_out


SPLIT_RULE = (
    "val and test each get round_half_up(n * 8/78) subjects (at least 1) of the n subjects with usable nights; "
    "subjects sorted by (age, number) are cut into that many consecutive strata of near-equal size "
    "(numpy.array_split); in each stratum, numpy.random.default_rng(seed).permutation sends the first subject to "
    "val, the second to test, the rest to train (one rng, strata from youngest to oldest)"
)


def split_subjects(ages: dict[int, int], seed: int) -> dict[str, list[int]]:
    """Subject-disjoint, age-stratified split: 62/8/8 of 78 subjects, the same proportions of fewer (SPLIT_RULE).

    Every age band gives one subject to val and one to test, so the held-out splits span the whole age range.
    """
    _, held_out, _ = split_sizes(len(ages))
    ordered = np.array(sorted(ages, key=lambda s: (ages[s], s)))
    rng = np.random.default_rng(seed)
    split: dict[str, list[int]] = {"train": [], "val": [], "test": []}
    for stratum in np.array_split(ordered, held_out):
        chosen = rng.permutation(stratum).tolist()
        split["val"].append(chosen[0])
        split["test"].append(chosen[1])
        split["train"].extend(chosen[2:])
    return {name: sorted(subjects) for name, subjects in split.items()}


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


class SleepEDFDataModule(StoredDataModule):
    domain = "sleep_edf"
    pad_id = 0  # never written: training and evaluation windows are always full (the 256 tokens have no pad)

    def __init__(
        self,
        *,
        subjects: list[int] | None = None,
        split_seed: int = SPLIT_SEED,
        eval_examples: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.eval_examples = eval_examples
        self.subjects = sorted(int(s) for s in subjects) if subjects is not None else None
        self.split_seed = split_seed
        self._raw_names: list[str] | None = None
        self._train_starts: np.ndarray | None = None

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

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
    def prepare_data(self) -> dict[str, Any]:
        """Bring the recordings into the raw folder (mne's downloader or the mirror), then build the store as
        every stored domain does: skipped when meta.json records the same raw sha256s and settings."""
        self._raw_names = self.obtain_raw()
        return super().prepare_data()

    def raw_files(self) -> list[RawFile]:
        if self._raw_names is None:
            raise RuntimeError("SleepEDFDataModule.raw_files: prepare_data obtains the recordings first")
        return [RawFile(f"{RAW_SUBDIR}/{name}", PHYSIONET_URL + name) for name in self._raw_names]

    def _wanted(self, subject: int) -> bool:
        return self.subjects is None or subject in self.subjects

    def obtain_raw(self) -> list[str]:
        """File names of the recordings now in raw/sleep_edf/physionet-sleep-data/."""
        dest = raw_dir(self.domain) / RAW_SUBDIR
        mirror = mirror_root()
        if mirror is not None:
            return self._copy_mirror(mirror / self.domain, dest)
        table = read_age_table()
        subjects = self.subjects if self.subjects is not None else sorted(table)
        unknown = sorted(set(subjects) - set(table))
        if unknown:
            raise SleepEDFError(f"subjects {unknown} are not in the Sleep Cassette (valid: {sorted(table)})")
        # The three nights the corpus lacks (subject 13 night 2, 36 and 52 night 1) are known: not worth a warning.
        try:
            pairs = mne.datasets.sleep_physionet.age.fetch_data(
                subjects, recording=[1, 2], path=raw_dir(self.domain), on_missing="ignore", verbose="error"
            )
        except (OSError, ValueError, RuntimeError) as err:
            raise FetchError(
                f"{PHYSIONET_URL}: downloading the Sleep Cassette into {dest} failed ({err}); a re-run fetches only "
                "the missing files. Without network, set POSBENCH_MIRROR to a folder holding sleep_edf/SC4*.edf."
            ) from err
        return sorted(Path(path).name for pair in pairs for path in pair)

    def _copy_mirror(self, source: Path, dest: Path) -> list[str]:
        if not source.is_dir():
            raise FetchError(f"{source}: not in the mirror $POSBENCH_MIRROR (expected a folder of SC4*.edf files)")
        names = sorted(
            p.name
            for p in source.iterdir()
            if (match := PSG_NAME.fullmatch(p.name) or HYPNOGRAM_NAME.fullmatch(p.name))
            and self._wanted(int(match.group(1)))
        )
        if not names:
            raise FetchError(f"{source}: no Sleep Cassette files (SC4ssNE0-PSG.edf, SC4ssNEx-Hypnogram.edf)")
        dest.mkdir(parents=True, exist_ok=True)
        for name in names:
            # copy2 keeps the mtime, so a shallow comparison (size and mtime) spots a changed mirror file
            if not (dest / name).is_file() or not filecmp.cmp(source / name, dest / name, shallow=True):
                with atomic_path(dest / name) as tmp:
                    shutil.copy2(source / name, tmp)
        return names

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
        if self.eval_examples is not None and self.eval_examples < len(night):
            keep = np.unique(np.linspace(0, len(night) - 1, self.eval_examples).round().astype(np.int64))
            night, start = night[keep], start[keep]
        return night, start

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
