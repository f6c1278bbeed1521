"""Where the Sleep Cassette recordings come from: the files mne's record table lists (fetched by mne's downloader,
which checks its own sha1 table) or the files of a mirror folder, and how their names pair into nights.

Either way they end up in $POSBENCH_DATA/raw/sleep_edf/physionet-sleep-data/ (mne's layout). The mirror
($POSBENCH_MIRROR/sleep_edf/) is a flat folder of PhysioNet-named files, copied by `domains.fetch`'s rule: a
local copy with the mirror file's size and modification time is kept; any other mirror file must pass
`check_edf` (a readable EDF header, every data record it announces present) before its copy replaces the local
one, and one that fails raises SleepEDFError naming it, leaving the local copy as it was.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from pathlib import Path

import mne

from domains.fetch import FetchError, copy_verified
from domains.sleep_edf.recordings import SleepEDFError, check_edf

RAW_SUBDIR = "physionet-sleep-data"  # where mne's fetch_data puts the files under its `path`
PHYSIONET_URL = mne.datasets.sleep_physionet.age.BASE_URL
AGE_TABLE = Path(mne.datasets.sleep_physionet.__file__).parent / "age_records.csv"
# PhysioNet names: SC4 + subject (2 digits) + night (1 digit) + E/F/G, then 0 for the PSG or the scorer's letter
# for the hypnogram. A suffix before .edf is allowed (the shared sample is SC4001E0-PSG_first300s.edf).
PSG_NAME = re.compile(r"SC4(\d\d)(\d)[A-Z]0-PSG[\w.-]*\.edf")
HYPNOGRAM_NAME = re.compile(r"SC4(\d\d)(\d)[A-Z]{2}-Hypnogram[\w.-]*\.edf")


def listed_recordings(subjects: list[int] | None) -> list[str]:
    """The PSG and hypnogram names mne's record table lists for `subjects` (None: all), nights 1 and 2, sorted."""
    with open(AGE_TABLE, newline="") as handle:
        rows = list(csv.DictReader(handle))
    known = sorted({int(row["subject"]) for row in rows})
    unknown = sorted(set(subjects or ()) - set(known))
    if unknown:
        raise SleepEDFError(f"subjects {unknown} are not in the Sleep Cassette (valid: {known})")
    wanted = set(known if subjects is None else subjects)
    return sorted(row["fname"] for row in rows if int(row["subject"]) in wanted and int(row["night"]) in (1, 2))


def download_recordings(subjects: list[int], folder: Path) -> None:
    """Have mne's downloader bring the recordings of `subjects` into `folder`/physionet-sleep-data/; files already
    there are kept."""
    # The three nights the corpus lacks (subject 13 night 2, 36 and 52 night 1) are known: not worth a warning.
    try:
        mne.datasets.sleep_physionet.age.fetch_data(
            subjects, recording=[1, 2], path=folder, on_missing="ignore", verbose="error"
        )
    except (OSError, ValueError, RuntimeError) as err:
        raise FetchError(
            f"{PHYSIONET_URL}: downloading the Sleep Cassette into {folder / RAW_SUBDIR} failed ({err}); a re-run "
            "fetches only the missing files. Without network, set POSBENCH_MIRROR to a folder holding "
            "sleep_edf/SC4*.edf."
        ) from err


def mirror_recordings(source: Path, wanted: Callable[[int], bool]) -> list[str]:
    """The Sleep Cassette file names in the mirror folder `source` whose subject is `wanted`, sorted."""
    if not source.is_dir():
        raise FetchError(f"{source}: not in the mirror $POSBENCH_MIRROR (expected a folder of SC4*.edf files)")
    names = sorted(
        p.name
        for p in source.iterdir()
        if (match := PSG_NAME.fullmatch(p.name) or HYPNOGRAM_NAME.fullmatch(p.name)) and wanted(int(match.group(1)))
    )
    if not names:
        raise FetchError(f"{source}: no Sleep Cassette files (SC4ssNE0-PSG.edf, SC4ssNEx-Hypnogram.edf)")
    return names


def copy_recordings(source: Path, names: list[str], dest: Path) -> None:
    """Copy the named files from the mirror folder `source` into `dest` by `domains.fetch`'s rule (see the
    module doc): unchanged ones are kept, changed ones are checked with `check_edf` first."""
    for name in names:
        copy_verified(source / name, dest / name, verify=check_edf)


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
