"""A study publishes its runs' training logs (format 4, pipelines.runs.published_training): each kept run's log reads
back as the run wrote it, a page built from the published evidence draws the same curves as one built from the run
folders, a damaged row is refused by its file and line, and a study of format 3 (none) still reads."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from pipelines.compare import main as compare_main
from pipelines.publish import main as publish_main
from pipelines.runs.layout import TRAIN_METRICS, RunFolder, RunKey
from pipelines.runs.metrics import RunFileError
from pipelines.runs.published_export import export_study
from pipelines.runs.published_format import StudyError
from pipelines.runs.published_join import materialize
from pipelines.runs.published_read import read_study
from pipelines.runs.published_training import TRAINING_HEADER, training_file
from pipelines.runs.train_log import read_training_curves
from tests.browser import unpacked
from tests.run_fixtures import edit_study_file, lm_domain

X = np.array([0.2, 1.4, 0.6, 2.5, 1.0, 0.8])
# logs/metrics.csv as the run's CSVLogger writes it: a training row per step, validation rows apart
LOG = (
    "epoch,lr,step,train/grad_norm,train/loss,train/tokens_per_s,val/loss\n"
    ",0.001,0,3.25,4.5341877937316895,,\n"
    ",0.002,1,2.5,4.125,,\n"
    "0,,1,,,,4.0625\n"
    ",0.001,2,1.75,3.875,812.5,\n"
    "0,,2,,,,3.9375\n"
)


def _runs_with_logs(root):
    lm_domain(root, "jsb", {"darope": X, "nope": X + 0.3})
    for label in ("darope/seed0", "nope/seed2"):
        (root / "jsb" / label / TRAIN_METRICS).parent.mkdir(parents=True)
        (root / "jsb" / label / TRAIN_METRICS).write_text(LOG)
    return root


def _runs_data(page: str) -> dict[str, list]:
    return {run["label"]: run["train"] for run in unpacked(page, "runs-data")}


def test_a_published_runs_log_reads_back_as_written_and_its_page_draws_the_same_curves(tmp_path):
    runs = _runs_with_logs(tmp_path / "runs")
    study = tmp_path / "study"
    export_study(runs, ["jsb"], study)
    published = read_study(study)
    assert json.loads((study / "study.json").read_text())["format"] == 4
    assert sorted(published.training) == ["jsb/darope/seed0", "jsb/nope/seed2"]  # the runs that had a log
    assert published.training["jsb/nope/seed2"] == [
        ["0", "4.5341877937316895", "", "0.001", "3.25"],  # the step's training and validation rows merged
        ["1", "4.125", "4.0625", "0.002", "2.5"],
        ["2", "3.875", "3.9375", "0.001", "1.75"],
    ]
    with gzip.open(study / training_file("nope")) as handle:
        assert handle.readline().decode().strip() == ",".join(TRAINING_HEADER)
    # a run joined from the study gets its log back, and reads as the run folder's own
    folder = materialize(published, "jsb/nope/seed2", tmp_path / "joined")
    key = RunKey("jsb", None, "nope", 2)
    original = read_training_curves(RunFolder(key, runs / "jsb" / "nope" / "seed2"))
    assert read_training_curves(RunFolder(key, folder)) == original
    assert original["validation"] == [(1, 4.0625), (2, 3.9375)]
    # the page from the run folders and the page from the published evidence draw the same curves
    assert compare_main(["--runs", str(runs), "--out", str(tmp_path / "local")]) == 0
    assert compare_main(["--runs", "none", "--with", str(study), "--out", str(tmp_path / "evidence")]) == 0
    local = _runs_data((tmp_path / "local" / "index.html").read_text())
    evidence = _runs_data((tmp_path / "evidence" / "index.html").read_text())
    assert local == evidence and local["jsb/darope/seed0"] and local["jsb/darope/seed1"] is None
    # re-published from its own evidence alone, the study's files are the same, byte for byte
    again = [
        "--runs",
        str(tmp_path / "none"),
        "--domains",
        "jsb",
        "--with",
        str(study),
        "--out",
        str(tmp_path / "again"),
    ]
    assert publish_main(again) == 0
    for name in ("runs.json.gz", training_file("darope"), training_file("nope"), "per_example/nope.csv.gz"):
        assert (tmp_path / "again" / name).read_bytes() == (study / name).read_bytes(), name


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda rows: rows + [["jsb/nope/seed2", "2", "3.0", "", "", ""]],
            r"line 5: jsb/nope/seed2, step 2 listed twice",
        ),
        (
            lambda rows: [rows[0], [rows[1][0], rows[1][1], "-1.5", *rows[1][3:]], *rows[2:]],
            r"line 2: jsb/nope/seed2, step 0: train_loss '-1.5', expected a finite number >= 0",
        ),
        (
            lambda rows: rows + [["jsb/darope/seed0", "7", "1.0", "", "", ""]],
            r"line 5: a row of jsb/darope/seed0, "
            r"which is no run of nope",
        ),
        (
            lambda rows: [rows[0], [*rows[1][:2], "nan", *rows[1][3:]], *rows[2:]],
            r"line 2: jsb/nope/seed2, step 0: train_loss 'nan'",
        ),
        (
            lambda rows: rows + [["jsb/nope/seed2", "999999", "1.0", "", "", ""]],
            r"line 5: jsb/nope/seed2, step 999999 is past the run's 800 steps \(logged from 0 to 799\)",
        ),
        (
            lambda rows: rows + [["jsb/nope/seed2", "00", "3.0", "", "", ""]],
            r"line 5: jsb/nope/seed2, step '00', expected a whole number >= 0 in ASCII digits, without a leading zero",
        ),
        (
            lambda rows: rows + [["jsb/nope/seed2", "\u00b2", "3.0", "", "", ""]],
            r"line 5: jsb/nope/seed2, step '\u00b2', expected a whole number >= 0 in ASCII digits",
        ),
    ],
    ids=["twice", "negative", "another encoding", "nan", "past the budget", "leading zero", "not ASCII"],
)
def test_a_damaged_training_row_is_refused_by_its_file_and_line(tmp_path, edit, message):
    study = tmp_path / "study"
    export_study(_runs_with_logs(tmp_path / "runs"), ["jsb"], study)
    edit_study_file(study, training_file("nope"), edit)
    with pytest.raises(StudyError, match=rf"{study / training_file('nope')}: {message}"):
        read_study(study)


def test_a_format_3_study_lists_no_training_file_and_reads_without_logs(tmp_path):
    study = tmp_path / "study"
    export_study(_runs_with_logs(tmp_path / "runs"), ["jsb"], study)
    description = json.loads((study / "study.json").read_text())
    description["format"] = 3
    (study / "study.json").write_text(json.dumps(description))
    with pytest.raises(StudyError, match=r"lists 'training/darope.csv.gz', which is no file of a study of jsb"):
        read_study(study)
    description["files"] = {name: digest for name, digest in description["files"].items() if "training/" not in name}
    (study / "study.json").write_text(json.dumps(description))
    assert read_study(study).training == {}


def test_a_local_run_that_reproduces_a_published_one_brings_the_log_it_was_published_without(tmp_path):
    """A study published before format 4 holds no training log; republished with the local runs that reproduce it
    (make publish --runs runs WITH=<study>), it carries their logs (a run that disagrees is refused, as before)."""
    runs = _runs_with_logs(tmp_path / "runs")
    logs = {label: (runs / "jsb" / label / TRAIN_METRICS) for label in ("darope/seed0", "nope/seed2")}
    kept = {label: path.read_text() for label, path in logs.items()}
    for path in logs.values():
        path.unlink()
    study = tmp_path / "study"
    export_study(runs, ["jsb"], study)
    assert read_study(study).training == {}  # published without logs
    for label, path in logs.items():
        path.write_text(kept[label])
    command = ["--runs", str(runs), "--domains", "jsb", "--with", str(study), "--out", str(study)]
    assert publish_main(command) == 0
    grown = read_study(study)
    assert sorted(grown.training) == ["jsb/darope/seed0", "jsb/nope/seed2"]
    assert grown.training["jsb/nope/seed2"][1] == ["1", "4.125", "4.0625", "0.002", "2.5"]


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("\u00b2", "step '\u00b2', expected a whole number >= 0 in ASCII digits, without a leading zero"),
        ("00", "step '00', expected a whole number >= 0 in ASCII digits, without a leading zero"),
        ("999999", "step 999999 is past the run's 800 steps (logged from 0 to 799)"),
    ],
    ids=["not ASCII", "leading zero", "past the budget"],
)
def test_a_run_folder_s_log_with_a_step_the_run_cannot_have_is_named_by_its_step(tmp_path, step, message):
    """A run's own logs/metrics.csv, as the page reads it and as publish exports it: a step written `²` is refused
    as a step (it passed str.isdigit, and the error then blamed the loss column), so are `00` (a second row of step
    0) and a step past the run's budget (800 steps)."""
    runs = _runs_with_logs(tmp_path / "runs")
    log = runs / "jsb" / "nope" / "seed2" / TRAIN_METRICS
    log.write_text(LOG + f",0.001,{step},1.5,3.5,812.5,\n")
    with pytest.raises(RunFileError) as error:
        read_training_curves(RunFolder(RunKey("jsb", None, "nope", 2), log.parents[1]))
    assert f"{log}: data row 6: {message}" in str(error.value)
    with pytest.raises(StudyError) as error:
        export_study(runs, ["jsb"], tmp_path / "study")
    assert f"{log}: line 7: {message}: not a log this posbench wrote for jsb/nope/seed2" in str(error.value)
    assert not (tmp_path / "study").exists()
