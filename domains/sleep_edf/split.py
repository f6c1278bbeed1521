"""The Sleep-EDF split: subject-disjoint and age-stratified, ages from the Sleep Cassette table mne ships."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from domains.sleep_edf.recordings import SleepEDFError
from domains.sleep_edf.sources import AGE_TABLE

SPLIT_SUBJECTS = (62, 8, 8)  # train/val/test subjects of the 78 (paper 000 appendix C.1)
# The smallest seed for which `split_subjects` on mne's table reproduces the paper's 122/15/16 nights.
SPLIT_SEED = 4


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
