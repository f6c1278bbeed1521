"""Sleep-EDF recordings: reading one night's PSG and hypnogram, checking them, trimming and normalising the night.

A night is a PSG (plain EDF, 30-s data records, 100 Hz and 1 Hz channels mixed) and a hypnogram (EDF+, stage
annotations only). Only `EEG Fpz-Cz` is read. The hypnogram gives the first and last 30-s epoch scored
1/2/3/4/R that lie inside the recording (a hypnogram longer than the signal is clipped) and the night is trimmed
to [first - 30 min, last + 30 min], clipped to the recording; the trimmed signal is normalised by its own median
and interquartile range and clipped to +-20. A file that is truncated, unreadable or lacks the channel fails
naming the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import mne
import numpy as np

CHANNEL = "EEG Fpz-Cz"
SFREQ = 100.0  # Hz; every Sleep Cassette Fpz-Cz channel
EPOCH_S = 30.0  # hypnogram scoring epoch
MARGIN_S = 1800.0  # wake kept before the first and after the last scored-sleep epoch
CLIP = 20.0  # normalised samples are clipped to +-CLIP interquartile ranges

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


class SleepEDFError(ValueError):
    """A recording or hypnogram that cannot be used as it is; the message names the file and what was wrong."""


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


# ---- a night ----------------------------------------------------------------------------------------------------
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
