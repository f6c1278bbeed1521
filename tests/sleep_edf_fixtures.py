"""Generated Sleep Cassette recordings (EDF PSG + EDF+ hypnogram per night) for the Sleep-EDF tests and demos.

The files copy the real ones' layout (tests/data/PROVENANCE.md): PSG in plain EDF with 30-s data records and
the seven real signals (EEG Fpz-Cz, EEG Pz-Oz and EOG at 100 Hz; respiration, EMG, temperature and the event marker
at 1 Hz), hypnogram in EDF+C holding only stage annotations that start with the PSG, names SC4ssNE0-PSG.edf and
SC4ssNEC-Hypnogram.edf. The EEG is AR(1) noise whose amplitude follows the stage, with a per-night gain and offset.
Fpz-Cz is written with a 16-bit digital range (the real files use 12 bits) so that ties between ADC levels do not
decide whether the quantile bins come out equal.

Write a mirror folder for `make data-sleep_edf` (`$POSBENCH_MIRROR/sleep_edf/` is what the domain reads):

    python -m tests.sleep_edf_fixtures /tmp/sleep_mirror [--subjects 20] [--hours 2] [--seed 0]
    POSBENCH_MIRROR=/tmp/sleep_mirror POSBENCH_DATA=/tmp/sleep_data make data-sleep_edf
"""

from __future__ import annotations

import argparse
import datetime
import shutil
from dataclasses import dataclass
from pathlib import Path

import edfio
import numpy as np
from scipy.signal import lfilter

from domains.sleep_edf.recordings import CHANNEL, SFREQ
from domains.sleep_edf.split import read_age_table
from tests.sample_fixtures import SAMPLES

RECORD_S = 30  # PSG data record, as in the real files
START = datetime.datetime(1989, 4, 24, 22, 13, 0)
REAL_SAMPLE = SAMPLES / "sleep_edf"
# Standard deviation of the generated EEG per stage code, microvolts
STAGE_UV = {"W": 12.0, "1": 15.0, "2": 22.0, "3": 34.0, "4": 40.0, "R": 14.0, "?": 12.0, "M": 30.0}
LABELS = {
    "W": "Sleep stage W",
    "1": "Sleep stage 1",
    "2": "Sleep stage 2",
    "3": "Sleep stage 3",
    "4": "Sleep stage 4",
    "R": "Sleep stage R",
    "?": "Sleep stage ?",
    "M": "Movement time",
}
# (label, sfreq, physical range, digital range) of the other six real signals
OTHER_SIGNALS = [
    ("EEG Pz-Oz", 100, (-197.0, 196.0), (-2048, 2047)),
    ("EOG horizontal", 100, (-1009.0, 1009.0), (-2048, 2047)),
    ("Resp oro-nasal", 1, (-2048.0, 2047.0), (-2048, 2047)),
    ("EMG submental", 1, (-5.0, 5.0), (-2500, 2500)),
    ("Temp rectal", 1, (34.0, 40.0), (-2849, 2731)),
    ("Event marker", 1, (-2047.0, 2048.0), (-2047, 2048)),
]


@dataclass(frozen=True)
class NightSpec:
    """One generated night: the hypnogram as (stage code, seconds) runs from the recording start; the recording
    itself is `recording_s` long (a multiple of 30 s; shorter than the runs when the hypnogram outlasts it)."""

    subject: int
    night: int
    runs: tuple[tuple[str, int], ...]
    recording_s: int
    hypnogram: bool = True  # False: the PSG comes without its hypnogram
    eeg_label: str = CHANNEL  # another label: a PSG lacking EEG Fpz-Cz
    scorer: str = "C"  # the hypnogram name's last letter (PhysioNet's vary: SC4011EH, SC4022EJ, ...)
    gain: float = 1.0
    offset_uv: float = 0.0

    @property
    def psg_name(self) -> str:
        return f"SC4{self.subject:02d}{self.night}E0-PSG.edf"

    @property
    def hypnogram_name(self) -> str:
        return f"SC4{self.subject:02d}{self.night}E{self.scorer}-Hypnogram.edf"

    def annotations(self) -> list[tuple[float, float, str]]:
        onsets = np.concatenate([[0], np.cumsum([seconds for _, seconds in self.runs])[:-1]])
        return [(float(o), float(s), LABELS[code]) for o, (code, s) in zip(onsets, self.runs, strict=True)]

    def stage_per_sample(self) -> np.ndarray:
        codes = np.repeat([code for code, _ in self.runs], [round(s * SFREQ) for _, s in self.runs])
        n = round(self.recording_s * SFREQ)
        return np.concatenate([codes, np.full(max(0, n - len(codes)), "W")])[:n]


def synthetic_eeg(spec: NightSpec, rng: np.random.Generator) -> np.ndarray:
    """Microvolts at 100 Hz: unit-variance AR(1) noise (coefficient 0.9) scaled by the stage's amplitude."""
    stages = spec.stage_per_sample()
    noise = lfilter([np.sqrt(1 - 0.9**2)], [1, -0.9], rng.standard_normal(len(stages)))
    amplitude = np.vectorize(STAGE_UV.get, otypes=[float])(stages)
    return np.clip(spec.offset_uv + spec.gain * amplitude * noise, -191.0, 191.0)


def write_psg(path: Path, eeg_uv: np.ndarray, rng: np.random.Generator, eeg_label: str = CHANNEL) -> Path:
    seconds = len(eeg_uv) / SFREQ
    if seconds % RECORD_S:
        raise ValueError(f"{path}: {seconds} s is not a whole number of {RECORD_S}-s data records")
    signals = [
        edfio.EdfSignal(
            eeg_uv,
            SFREQ,
            label=eeg_label,
            transducer_type="Ag-AgCl electrodes",
            physical_dimension="uV",
            physical_range=(-192.0, 192.0),
            digital_range=(-32768, 32767),
            prefiltering="HP:0.5Hz LP:100Hz [enhanced cassette BW]",
        )
    ]
    for label, sfreq, (low, high), digital in OTHER_SIGNALS:
        middle = (low + high) / 2
        values = middle + 0.2 * (rng.uniform(low, high, round(seconds * sfreq)) - middle)
        signals.append(edfio.EdfSignal(values, sfreq, label=label, physical_range=(low, high), digital_range=digital))
    edf = edfio.Edf(
        signals,
        recording=edfio.Recording(startdate=START.date()),
        starttime=START.time(),
        data_record_duration=RECORD_S,
    )
    edf.write(path)
    return path


def write_hypnogram(path: Path, annotations: list[tuple[float, float, str]]) -> Path:
    edf = edfio.Edf(
        [],
        recording=edfio.Recording(startdate=START.date()),
        starttime=START.time(),
        annotations=[edfio.EdfAnnotation(onset, duration, text) for onset, duration, text in annotations],
    )
    edf.write(path)
    return path


def write_night(folder: Path, spec: NightSpec, seed: int = 0) -> None:
    rng = np.random.default_rng([seed, spec.subject, spec.night])
    folder.mkdir(parents=True, exist_ok=True)
    write_psg(folder / spec.psg_name, synthetic_eeg(spec, rng), rng, spec.eeg_label)
    if spec.hypnogram:
        write_hypnogram(folder / spec.hypnogram_name, spec.annotations())


def short_night(subject, night, wake_before=300, wake_after=240, **kwargs) -> NightSpec:
    """Minutes-long night: wake, all stages and a movement epoch, wake, then '?' past the end of the recording."""
    sleep = (("1", 60), ("2", 120), ("M", 30), ("3", 60), ("4", 60), ("2", 30), ("R", 90))
    runs = (("W", wake_before), *sleep, ("W", wake_after), ("?", 600))
    return NightSpec(subject, night, runs, wake_before + 450 + wake_after, **kwargs)


def write_small_mirror(folder: Path) -> Path:
    """Three subjects' short nights (subjects 2, 13, 36: one train, one val, one test subject) in `folder`."""
    for subject in (2, 13, 36):
        write_night(folder, short_night(subject, 2 if subject == 36 else 1))
    return folder


def copy_real_sample(folder: Path) -> bool:
    """The real first 300 s of SC4001E0 and its hypnogram (all wake: a night the preparation skips), if present."""
    if not REAL_SAMPLE.is_dir():
        return False
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("SC4001E0-PSG_first300s.edf", "SC4001EC-Hypnogram.edf"):
        shutil.copyfile(REAL_SAMPLE / name, folder / name)
    return True


def night_runs(rng: np.random.Generator, hours: float) -> tuple[tuple[tuple[str, int], ...], int]:
    """A plausible night of `hours`: wake, then 90-minute-like cycles of 1/2/3/4/2/R scaled to fit, then wake,
    and a final '?' run past the end of the recording (as in the real files). Runs are whole 30-s epochs."""
    total = int(hours * 3600) // 30
    wake_before = int(rng.integers(total // 8, total // 3))
    wake_after = int(rng.integers(total // 10, total // 4))
    sleep = total - wake_before - wake_after
    cycle = ["1", "2", "3", "4", "2", "R"]
    weights = np.array([1, 4, 1.5, 1.5, 2, 2])
    runs, left = [("W", wake_before * 30)], sleep
    while left > 0:
        for code, weight in zip(cycle, weights, strict=True):
            epochs = min(left, max(1, int(weight * rng.uniform(2, 6))))
            if epochs:
                runs.append((code, epochs * 30))
                left -= epochs
        if left > 4 and rng.random() < 0.5:
            runs.append(("M", 30))
            left -= 1
    runs += [("W", wake_after * 30), ("?", 1800)]
    return tuple(runs), total * 30


def demo_specs(n_subjects: int, hours: float, seed: int) -> list[NightSpec]:
    """Subjects spread over the age table (subject 0 is left to the real sample), each with its real nights; the
    last one's first night lacks its hypnogram, to show a skipped night."""
    table = {s: v for s, v in read_age_table().items() if s != 0}
    by_age = sorted(table, key=lambda s: (table[s].age, s))
    chosen = sorted({by_age[round(i)] for i in np.linspace(0, len(by_age) - 1, n_subjects)})
    rng = np.random.default_rng(seed)
    specs = []
    for subject in chosen:
        for night in table[subject].nights:
            runs, recording_s = night_runs(rng, hours)
            specs.append(
                NightSpec(
                    subject,
                    night,
                    runs,
                    recording_s,
                    hypnogram=not (subject == chosen[-1] and night == 1),
                    gain=float(rng.uniform(0.6, 1.6)),
                    offset_uv=float(rng.uniform(-15, 15)),
                )
            )
    return specs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mirror", type=Path, help="mirror root; the files go to <mirror>/sleep_edf/")
    parser.add_argument("--subjects", type=int, default=20)
    parser.add_argument("--hours", type=float, default=2.0, help="length of each night")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    folder = args.mirror / "sleep_edf"
    specs = demo_specs(args.subjects, args.hours, args.seed)
    for spec in specs:
        write_night(folder, spec, args.seed)
    real = copy_real_sample(folder)
    print(
        f"{folder}: {len(specs)} generated nights of {args.hours:g} h from {len({s.subject for s in specs})} subjects"
        + (" + the real SC4001 sample (300 s, all wake)" if real else "")
    )
    print(f"POSBENCH_MIRROR={args.mirror} make data-sleep_edf")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
