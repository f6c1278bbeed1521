"""Data preparation throughput rows: exact amounts on the real samples and on generated HRG / Sleep-EDF mirrors,
well-formed figures, skip rows, and the command line. No timing assertions."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

from domains.hrg.windows import example_count
from pipelines.benchmarks.data import COLUMNS, measure_preparation
from pipelines.experiment.config import compose_config
from pipelines.prep_throughput import main
from tests.hrg_fixtures import write_mirror
from tests.maestro_fixtures import small_maestro_mirror
from tests.sample_fixtures import SAMPLES
from tests.sleep_edf_fixtures import NightSpec, copy_real_sample, write_night

SLEEP_RUNS = (("W", 300), ("1", 60), ("2", 120), ("3", 60), ("4", 60), ("R", 90), ("W", 240), ("?", 600))


def by_stage(rows: list[dict]) -> dict[str, dict]:
    assert len({row["stage"] for row in rows}) == len(rows)
    return {row["stage"]: row for row in rows}


def assert_measured(row: dict, domain: str, unit: str, amount: int) -> None:
    assert set(row) == set(COLUMNS)
    assert (row["domain"], row["unit"], row["amount"], row["skipped"]) == (domain, unit, amount, "")
    assert row["seconds_min"] <= row["seconds"] <= row["seconds_max"] and row["seconds_min"] > 0
    assert row["per_second"] == pytest.approx(amount / row["seconds"])
    assert row["workers"] >= 1 and row["detail"]


def test_jsb_counts_every_chorale_of_the_sample_with_median_of_repeats(monkeypatch):
    monkeypatch.setenv("POSBENCH_MIRROR", "/mirror/of/the/caller")
    monkeypatch.setenv("POSBENCH_DATA", "/data/of/the/caller")
    with np.load(SAMPLES / "jsb" / "Jsb16thSeparated.npz", allow_pickle=True, encoding="latin1") as npz:
        chorales = sum(len(npz[key]) for key in ("train", "valid", "test"))
    rows = by_stage(measure_preparation(["jsb"], SAMPLES, repeats=3))
    assert list(rows) == ["prepare", "tokenise"]
    for row in rows.values():
        assert_measured(row, "jsb", "pieces", chorales)
        assert row["repeats"] == 3 and row["workers"] == 1 and row["source"] == str(SAMPLES / "jsb")
    # the domain code ran with the sample as mirror and a temporary data root; the caller's settings are back
    assert not Path("/data/of/the/caller").exists()
    assert (os.environ["POSBENCH_MIRROR"], os.environ["POSBENCH_DATA"]) == (
        "/mirror/of/the/caller",
        "/data/of/the/caller",
    )


def test_maestro_prepare_counts_every_midi_file_of_the_sample():
    midi_files = list((SAMPLES / "maestro").rglob("*.midi"))
    rows = measure_preparation(["maestro"], SAMPLES, workers=1, kernels=False)
    assert len(rows) == 1
    assert_measured(rows[0], "maestro", "pieces", len(midi_files))
    assert rows[0]["stage"] == "prepare" and rows[0]["workers"] == 1


def test_maestro_tokenise_kernel_counts_the_files_of_a_small_mirror(tmp_path):
    rows = by_stage(measure_preparation(["maestro"], small_maestro_mirror(tmp_path / "mirror"), workers=1))
    assert list(rows) == ["prepare", "tokenise"]
    for row in rows.values():
        assert_measured(row, "maestro", "pieces", 3)


def test_hrg_generated_mirror_counts_exactly_its_bases(tmp_path):
    letters = write_mirror(tmp_path / "mirror", {"chr1": 7_000, "chr2": 9_300, "chr21": 4_000}, seed=1)
    rows = by_stage(measure_preparation(["hrg"], tmp_path / "mirror"))
    assert list(rows) == ["prepare", "encode", "tokenise"]
    bases = sum(len(sequence) for sequence in letters.values())
    assert_measured(rows["prepare"], "hrg", "bases", bases)
    assert_measured(rows["encode"], "hrg", "bases", bases)
    geometry = compose_config(["domain=hrg"]).domain.args  # the default preset's example windows
    windows = sum(example_count(len(s), geometry.window_bases, geometry.stride_bases) for s in letters.values())
    assert windows > 0
    assert_measured(rows["tokenise"], "hrg", "bases", windows * geometry.window_bases)


def test_hrg_shared_chrm_sample_counts_its_bases():
    fasta = (SAMPLES / "hrg" / "GRCh38_chrM.fa").read_text().splitlines()
    bases = sum(len(line) for line in fasta if not line.startswith(">"))
    row = measure_preparation(["hrg"], SAMPLES, kernels=False)[0]
    assert_measured(row, "hrg", "bases", bases)
    assert bases == 16_569


def test_sleep_edf_generated_mirror_counts_every_sample_of_the_trimmed_nights(tmp_path):
    """Three subjects, one night each, whose sleep lies within 30 minutes of both ends: nothing is trimmed, so
    every sample of every night is tokenised."""
    folder = tmp_path / "mirror" / "sleep_edf"
    specs = [NightSpec(subject, 1, SLEEP_RUNS, recording_s=990) for subject in (2, 13, 22)]
    for spec in specs:
        write_night(folder, spec)
    rows = by_stage(measure_preparation(["sleep_edf"], tmp_path / "mirror"))
    assert list(rows) == ["prepare", "read", "quantise"]
    samples = sum(spec.recording_s * 100 for spec in specs)
    for row in rows.values():
        assert_measured(row, "sleep_edf", "samples", samples)


def test_missing_domain_folders_and_failed_preparations_give_skip_rows(tmp_path):
    (tmp_path / "hrg").mkdir()
    (tmp_path / "hrg" / "README").write_text("no chromosome here")
    copy_real_sample(tmp_path / "sleep_edf")  # one all-wake night: no subject to split
    rows = measure_preparation(["jsb", "maestro", "hrg", "sleep_edf"], tmp_path)
    assert [(row["domain"], row["stage"]) for row in rows] == [
        ("jsb", "prepare"),
        ("maestro", "prepare"),
        ("hrg", "prepare"),
        ("sleep_edf", "prepare"),
    ]
    for row in rows:
        assert set(row) == set(COLUMNS) and row["amount"] is None and row["per_second"] is None
        assert row["source"] == str(tmp_path / row["domain"])
    skipped = {row["domain"]: row["skipped"] for row in rows}
    assert skipped["jsb"] == f"{tmp_path / 'jsb'}: no such folder (expected the jsb raw files there)"
    assert skipped["maestro"].startswith(f"{tmp_path / 'maestro'}: no such folder")
    assert str(tmp_path / "hrg") in skipped["hrg"] and "no chromosome FASTA file" in skipped["hrg"]
    assert skipped["sleep_edf"].startswith(str(tmp_path / "sleep_edf")) and "at least 3" in skipped["sleep_edf"]


def test_source_defaults_to_the_mirror_variable_and_is_required(monkeypatch):
    monkeypatch.delenv("POSBENCH_MIRROR", raising=False)
    with pytest.raises(ValueError, match="no source folder"):
        measure_preparation(["jsb"])
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    assert measure_preparation(["jsb"], kernels=False)[0]["source"] == str(SAMPLES / "jsb")
    with pytest.raises(ValueError, match="unknown domains"):
        measure_preparation(["synthetic"], SAMPLES)


def test_command_line_prints_the_table_and_writes_the_csv(tmp_path, capsys):
    out = tmp_path / "prep.csv"
    assert main(["--domains", "jsb", "maestro", "--source", str(tmp_path / "nowhere"), "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Data preparation throughput" in printed and "jsb skipped:" in printed and "maestro skipped:" in printed
    assert main(["--domains", "jsb", "--source", str(SAMPLES), "--prepare-only", "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "382 pieces" in printed and "pieces/s" in printed
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [list(row) for row in rows] == [list(COLUMNS)]
    assert (rows[0]["domain"], rows[0]["stage"], rows[0]["amount"], rows[0]["skipped"]) == ("jsb", "prepare", "382", "")
    assert float(rows[0]["per_second"]) == pytest.approx(382 / float(rows[0]["seconds"]))
