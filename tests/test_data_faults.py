"""Faults in a domain's raw data (issue 26, section 5), each named before the store changes: a mirror MIDI file that
is not MIDI, a MAESTRO index listing a performance twice, an HRG evaluation chromosome that is all N, and the
Sleep-EDF nights left out when too few subjects remain."""

from __future__ import annotations

import gzip
import logging
import re
import shutil

import numpy as np
import pytest

from domains.fetch import FetchError
from domains.hrg import HRGDataModule
from domains.maestro import MaestroDataModule
from domains.maestro.archive import CSV_NAME, read_index, read_index_file
from domains.sleep_edf import SleepEDFDataModule
from domains.sleep_edf.recordings import SleepEDFError
from tests.hrg_fixtures import SMALL_LENGTHS, SMALL_SPLIT, fasta_record, write_mirror
from tests.maestro_fixtures import small_maestro_mirror
from tests.sample_fixtures import SAMPLES
from tests.sleep_edf_fixtures import NightSpec, short_night, write_night

HRG_TINY = dict(window_bases=610, stride_bases=605, max_jitter=9, example_tokens=100)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """An empty data folder and a mirror folder, both in tmp_path."""
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    return tmp_path


# ---- MAESTRO ---------------------------------------------------------------------------------------------------------
def maestro(**kwargs) -> MaestroDataModule:
    args = {"context": 256, "batch_size": 2, "eval_batch_size": 8, "seed": 0, "tokenize_workers": 1}
    return MaestroDataModule(**{**args, **kwargs})


def maestro_mirror(root):
    """tests.maestro_fixtures' small mirror (the sample's three smallest performances) and the fourth smallest, so
    that losing one still leaves a train/val/test split."""
    small_maestro_mirror(root)
    fourth = sorted((SAMPLES / "maestro").rglob("*.midi"), key=lambda p: p.stat().st_size)[3]
    dest = root / "maestro" / fourth.relative_to(SAMPLES / "maestro")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fourth, dest)
    return root


def store_files(store):
    return {path.relative_to(store): path.read_bytes() for path in sorted(store.rglob("*")) if path.is_file()}


def test_a_mirror_midi_file_that_is_not_midi_fails_naming_it_and_keeps_the_good_local_copy(env):
    maestro_mirror(env / "mirror")
    dm = maestro()
    meta = dm.prepare_data()
    performance = sorted((env / "mirror" / "maestro").rglob("*.midi"))[0]
    name = performance.relative_to(env / "mirror" / "maestro").as_posix()
    local = env / "data" / "raw" / "maestro" / name
    good, before = local.read_bytes(), store_files(dm.store)
    performance.write_bytes(b"<html>503 Service Unavailable</html>\n")  # a mirror sync gone wrong
    with pytest.raises(FetchError, match=rf"^{re.escape(str(performance))}: not a readable MIDI file .*; the "
                                         rf"local copy {re.escape(str(local))} .* is kept"):  # fmt: skip
        maestro().prepare_data()
    assert local.read_bytes() == good  # the good local copy stays
    assert store_files(dm.store) == before and maestro().meta == meta  # and so do the store and its split


def test_a_bad_mirror_midi_file_without_a_local_copy_is_still_skipped_by_name(env):
    """Nothing is lost by copying it: it is skipped at preparation with its reason, as before."""
    maestro_mirror(env / "mirror")
    performance = sorted((env / "mirror" / "maestro").rglob("*.midi"))[0]
    performance.write_bytes(b"not a MIDI file at all\n")
    meta = maestro().prepare_data()
    name = performance.relative_to(env / "mirror" / "maestro").as_posix()
    assert meta["skipped"][name].startswith("not a readable MIDI file")


def csv_with_a_duplicate(folder) -> str:
    """The mirror's CSV with the row of its first present performance listed again at the end; its name."""
    lines = (folder / CSV_NAME).read_text(encoding="utf-8").splitlines(keepends=True)
    present = {p.relative_to(folder).as_posix() for p in folder.rglob("*.midi")}
    row = next(line for line in lines[1:] if line.split(",")[4] in present)  # midi_filename is the 5th column
    (folder / CSV_NAME).write_text("".join(lines) + row, encoding="utf-8")
    return row.split(",")[4]


def test_a_performance_listed_twice_in_the_index_is_refused_by_name(env):
    small_maestro_mirror(env / "mirror")
    folder = env / "mirror" / "maestro"
    name = csv_with_a_duplicate(folder)
    lines = (folder / CSV_NAME).read_text(encoding="utf-8").splitlines()
    first = 1 + next(i for i, line in enumerate(lines) if line.split(",")[4] == name)
    with pytest.raises(ValueError, match=rf"{re.escape(str(folder / CSV_NAME))} line {len(lines)}: {re.escape(name)} "
                                         rf"is listed again \(first at line {first}\)"):  # fmt: skip
        maestro().prepare_data()
    assert not (env / "data" / "raw" / "maestro" / CSV_NAME).exists()  # nothing copied, no store
    assert not (env / "data" / "stores" / "maestro" / "meta.json").exists()


def test_the_zip_index_refuses_a_performance_listed_twice_too():
    text = "split,midi_filename\ntrain,2018/a.midi\ntest,2018/b.midi\ntest,2018/a.midi\n"
    with pytest.raises(ValueError, match=r"^zip:csv line 4: 2018/a\.midi is listed again \(first at line 2\)"):
        read_index(text, "zip:csv")


def test_every_performance_of_the_store_is_in_exactly_one_split(env):
    small_maestro_mirror(env / "mirror")
    dm = maestro()
    dm.prepare_data()
    rows = [row.split(",") for row in (dm.store / "performances.csv").read_text().splitlines()[1:]]
    used = [name for name, split, *_ in rows if split in ("train", "val", "test")]
    assert len(used) == len(set(used)) == 3  # and performances.csv lists each once
    listed = read_index_file(env / "mirror" / "maestro" / CSV_NAME)
    assert sorted(name for name, *_ in rows) == sorted(p.midi_filename for p in listed)  # the others: missing


# ---- HRG -------------------------------------------------------------------------------------------------------------
def hrg(**kwargs) -> HRGDataModule:
    settings = dict(context=100, batch_size=4, eval_batch_size=8, seed=0, split=SMALL_SPLIT, **HRG_TINY)
    return HRGDataModule(**{**settings, **kwargs})


def all_n(env, chromosome: str) -> None:
    """Replace the mirror's `chromosome` by a record of only N (and n: soft-masked N), of its length."""
    letters = np.full(SMALL_LENGTHS[chromosome], ord("N"), dtype=np.uint8)
    letters[: len(letters) // 3] = ord("n")
    (env / "mirror" / "hrg" / f"{chromosome}.fa.gz").write_bytes(gzip.compress(fasta_record(chromosome, letters, 60)))


@pytest.mark.parametrize("chromosome, split", [("chr22", "test"), ("chr21", "val")])
def test_an_evaluation_chromosome_that_is_all_n_is_refused_by_name(env, chromosome, split):
    write_mirror(env / "mirror", SMALL_LENGTHS, seed=3)
    dm = hrg(checksums=None)
    meta = dm.prepare_data()
    before = store_files(dm.store)
    all_n(env, chromosome)
    with pytest.raises(ValueError, match=rf"^hrg: {chromosome} \({split} split, {chromosome}\.fa\.gz\) is all N: none "
                                         rf"of its {SMALL_LENGTHS[chromosome]:,} bases is A, C, G or T"):  # fmt: skip
        hrg(checksums=None).prepare_data()
    assert store_files(dm.store) == before and hrg(checksums=None).meta == meta  # the store as it was


def test_a_training_chromosome_that_is_all_n_is_named_in_a_warning(env, caplog):
    write_mirror(env / "mirror", SMALL_LENGTHS, seed=3)
    all_n(env, "chr2")
    with caplog.at_level(logging.WARNING, logger="posbench.hrg"):
        hrg(checksums=None).prepare_data()
    assert "hrg: chr2 (train split, chr2.fa.gz) is all N: none of its 5,333 bases is A, C, G or T" in caplog.text


# ---- Sleep-EDF -------------------------------------------------------------------------------------------------------
def test_too_few_subjects_names_every_night_left_out_and_why(env):
    folder = env / "mirror" / "sleep_edf"
    write_night(folder, short_night(2, 1))
    write_night(folder, short_night(13, 1, hypnogram=False))
    write_night(folder, NightSpec(36, 2, (("W", 900), ("?", 300)), 900))  # scored wake only: no sleep stage
    dm = SleepEDFDataModule(context=128, batch_size=4, eval_batch_size=16, seed=0)
    with pytest.raises(SleepEDFError) as error:
        dm.prepare_data()
    message = str(error.value)
    assert message.startswith("1 subject(s) with usable nights (2); a train/val/test split needs at least 3")
    assert "SC4131E0-PSG.edf: no hypnogram file for this night" in message
    assert "SC4362E0-PSG.edf: no epoch scored 1/2/3/4/R within the recording's 900 s" in message
    assert not (env / "data" / "stores" / "sleep_edf" / "meta.json").exists()


def test_too_few_subjects_with_nothing_left_out_says_so(env):
    folder = env / "mirror" / "sleep_edf"
    for subject in (2, 13):
        write_night(folder, short_night(subject, 1))
    with pytest.raises(SleepEDFError, match=r"^2 subject\(s\) with usable nights \(2, 13\); .* No night was left out"):
        SleepEDFDataModule(context=128, batch_size=4, eval_batch_size=16, seed=0).prepare_data()
