"""A published study: its evidence exported and read back as run folders (the same report as from the runs
themselves, byte-stable files), local runs joining it (`make compare WITH=...`: a matching run joins, one with
another budget, data, preset or model size is refused by name, a disagreeing copy of a published run stops the
comparison), and `make reproduce` on a tiny study made here (within tolerance; a tampered value named)."""

from __future__ import annotations

import csv
import errno
import gzip
import hashlib
import io
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from pipelines import reproduce as reproduce_module
from pipelines.compare import main as compare_main
from pipelines.experiment.config import compose_config, roster
from pipelines.experiment.training import train_and_evaluate
from pipelines.launch.jobs import default_tasks
from pipelines.publish import main as publish_main
from pipelines.reproduce import main as reproduce_main
from pipelines.runs.metrics import RunFileError
from pipelines.runs.published_export import export_study
from pipelines.runs.published_format import StudyError, example_file
from pipelines.runs.published_join import join
from pipelines.runs.published_read import read_study
from pipelines.runs.tolerance import copy_tolerance
from tests.browser import inflated, unpacked
from tests.run_fixtures import edit_study_file, lm_domain, read_csv, with_composed_configs
from tests.sample_fixtures import REPO, SAMPLES

X = np.array([0.2, 1.4, 0.6, 2.5, 1.0, 0.8])
NOPE_EXAMPLES = example_file("nope")  # per_example/nope.csv.gz: the per-example rows of nope's runs

ROSTER_2 = {"t5_bias", "kerple", "fire", "xpos", "fox"}  # SPEC 1b, the anchors without randomized positions


def published(tmp_path):
    """A study of darope and nope at seeds 0-2, exported into tmp_path/study."""
    lm_domain(tmp_path / "published_runs", "jsb", {"darope": X, "nope": X + 0.3})
    export_study(tmp_path / "published_runs", ["jsb"], tmp_path / "study")
    return tmp_path / "study"


def test_a_study_read_back_gives_the_report_its_runs_give_and_exports_byte_for_byte(tmp_path, capsys):
    study = published(tmp_path)
    assert compare_main(["--runs", str(tmp_path / "published_runs"), "--out", str(tmp_path / "direct")]) == 0
    assert (
        compare_main(["--runs", str(tmp_path / "none"), "--out", str(tmp_path / "joined"), "--with", str(study)]) == 0
    )
    for name in ("jsb/summary.csv", "jsb/pairs.csv"):
        assert (tmp_path / "direct" / name).read_text() == (tmp_path / "joined" / name).read_text(), name
    data = json.loads((study / "study.json").read_text())
    assert data["domains"] == {"jsb": [f"jsb/{pe}/seed{s}" for pe in ("darope", "nope") for s in (0, 1, 2)]}
    fixed = data["holds_fixed"]["jsb"]
    assert fixed["trainer.max_steps"] == 800 and fixed["effective batch"] == 4 and fixed["preset"] == "tiny"
    assert "trainer.ckpt_every" not in fixed and "runs_root" not in fixed and "pe.id" not in fixed
    before = {str(p.relative_to(study)): p.read_bytes() for p in study.rglob("*.gz")}
    per_encoding = [f"{kind}/{pe}.csv.gz" for kind in ("per_example", "per_position") for pe in ("darope", "nope")]
    assert sorted(before) == [*per_encoding, "runs.json.gz"]  # one file per encoding: each stays small
    assert {row[0] for row in _csv_rows(study / NOPE_EXAMPLES)[1:]} == {f"jsb/nope/seed{s}" for s in (0, 1, 2)}
    export_study(tmp_path / "published_runs", ["jsb"], study)
    assert before == {str(p.relative_to(study)): p.read_bytes() for p in study.rglob("*.gz")}
    assert publish_main(["--runs", str(tmp_path / "published_runs"), "--domains", "jsb", "--out", str(study)]) == 0
    assert "published 6 trained runs of jsb" in capsys.readouterr().out
    # the runs folder by its name: a published study names no folder of the machine it was built on
    assert json.loads((study / "summary.json").read_text())["runs"] == "published_runs"


def test_a_matching_local_run_joins_and_gets_its_verdict_against_every_published_one(tmp_path, capsys):
    study = published(tmp_path)
    lm_domain(tmp_path / "runs", "jsb", {"hope": X + 0.002})
    args = ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--with", str(study), "--ref", "darope"]
    assert compare_main(args) == 0
    rows = {row["encoding"]: row for row in read_csv(tmp_path / "out" / "jsb" / "summary.csv")}
    assert set(rows) == {"darope", "hope", "nope"} and rows["hope"]["verdict"] in ("worse", "equivalent")
    pairs = read_csv(tmp_path / "out" / "jsb" / "pairs.csv")
    assert {(p["a"], p["b"]) for p in pairs} == {("darope", "hope"), ("darope", "nope"), ("hope", "nope")}
    assert "Runs: `" in capsys.readouterr().out  # the folders by name (absolute ones are this machine's)
    assert "Runs: `runs + study`" in (tmp_path / "out" / "summary.md").read_text()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_steps": 200}, "jsb/hope/seed0: trainer.max_steps 200, the study has 800"),
        ({"data_hashes": {"eval/test": "cd" * 32}}, f"jsb/hope/seed0: data_hashes.eval/test {'cd' * 32}, the study"),
        (  # the hashes alone did not say what to do (issue 68: a run trained on 11 of MAESTRO's 1,276 performances)
            {"data_hashes": {"eval/test": "cd" * 32}},
            "jsb/hope/seed0: trained on other data than the study's runs (a store prepared from other files, such as "
            "part of the set's: `make data-jsb` prints how many of how many); prepare the data the study was "
            "prepared from and train it again",
        ),
        ({"preset": "paper"}, "jsb/hope/seed0: preset paper, the study has tiny"),
        ({"n_layer": 3}, "jsb/hope/seed0: model.n_layer 3, the study has 2"),
    ],
)
def test_a_local_run_that_differs_in_what_the_study_holds_fixed_is_refused_by_name(tmp_path, capsys, change, message):
    study = published(tmp_path)
    lm_domain(tmp_path / "runs", "jsb", {"hope": X + 0.002}, seeds=(0,))
    path = tmp_path / "runs" / "jsb" / "hope" / "seed0" / "manifest.json"
    manifest = json.loads(path.read_text())
    if "max_steps" in change:
        manifest["config"]["trainer"]["max_steps"] = change["max_steps"]
    if "data_hashes" in change:
        manifest["data_hashes"] = change["data_hashes"]
    if "preset" in change:
        manifest["config"]["preset"] = manifest["run"]["preset"] = change["preset"]
    if "n_layer" in change:
        manifest["config"]["model"]["n_layer"] = change["n_layer"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(SystemExit) as exit_:
        compare_main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--with", str(study)])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "refusing to join" in err and message in err
    assert not (tmp_path / "out").exists()


MACHINE = {"threads": 1, "cpu": "Some CPU", "cpu_flags": ["avx2", "fma"], "torch_build": "cpu, MKL"}


def _set_machine(manifest_path, machine, packages=None):
    manifest = json.loads(manifest_path.read_text())
    manifest["machine"], manifest["packages"] = machine, packages or {"torch": "2.13.0"}
    manifest_path.write_text(json.dumps(manifest))


def test_a_local_copy_of_a_published_run_must_agree_with_it_within_the_bound_of_its_conditions(tmp_path):
    """Recorded without a machine (as the fixture's runs are): the cross-machine bound, 1e-3; a published run whose
    machine is recorded: its copy on that machine must be bit for bit, at another thread count within the study's
    1e-5, on another CPU within 1e-3 again."""
    study = published(tmp_path)

    def copy(name, shift, machine=None):
        lm_domain(tmp_path / name, "jsb", {"nope": X + 0.3 + np.array([0, 0, 0, shift, 0, 0])}, seeds=(1,))
        if machine is not None:
            _set_machine(tmp_path / name / "jsb" / "nope" / "seed1" / "manifest.json", machine)
        return join([read_study(study)], tmp_path / name, tmp_path / f"merged-{name}", ["jsb"])

    assert copy("same", 0.0) == ["jsb/nope/seed1: the local run reproduces the published one within 0.001 nats"]
    assert copy("near", 5e-4) == ["jsb/nope/seed1: the local run reproduces the published one within 0.001 nats"]
    with pytest.raises(StudyError, match=r"jsb/nope/seed1: test example 3 differs from the published run by 0.002 "):
        copy("far", 0.002)

    def record_machine(records):
        records["jsb/nope/seed1"]["manifest"].update(machine=MACHINE, packages={"torch": "2.13.0"})
        return records

    edit_study_file(study, "runs.json.gz", record_machine)
    assert copy("recorded", 0.0, MACHINE) == [
        "jsb/nope/seed1: the local run reproduces the published one within 0 nats"
    ]
    with pytest.raises(StudyError, match=r"by 1e-06 nats \(tolerance 0: trained as recorded .*expect bit for bit"):
        copy("last-bit", 1e-6, MACHINE)
    assert copy("threads", 1e-6, {**MACHINE, "threads": 2}) == [
        "jsb/nope/seed1: the local run reproduces the published one within 1e-05 nats"
    ]
    with pytest.raises(StudyError, match=r"tolerance 1e-05: differs from the recorded run in threads: recorded 1"):
        copy("threads-far", 5e-5, {**MACHINE, "threads": 2})
    assert copy("cpu", 5e-4, {**MACHINE, "cpu": "Another CPU"}) == [
        "jsb/nope/seed1: the local run reproduces the published one within 0.001 nats"
    ]
    with pytest.raises(StudyError, match=r"tolerance 0.001: differs from the recorded run in CPU model: recorded "):
        copy("cpu-far", 0.002, {**MACHINE, "cpu": "Another CPU"})


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"machine": "x"}, "machine is 'x', not a record of the machine (threads, CPU model and flags, torch build)"),
        ({"machine": {**MACHINE, "threads": "one"}}, "machine.threads is 'one', expected a whole number"),
        ({"encoding": {"name": "nope", "revision": "x"}}, "encoding.revision is 'x', expected a whole number >= 1"),
        (
            {"machine": None, "train_cpu_seconds": 10.0},
            "no machine record, yet it holds train_cpu_seconds, which only code that records the machine writes",
        ),
    ],
    ids=["not a record", "threads", "revision", "removed"],
)
def test_a_malformed_or_removed_machine_record_is_refused_by_its_file_and_run(tmp_path, capsys, change, problem):
    """`"machine": "x"` ended compare and reproduce in an AttributeError, a revision "x" in `invalid literal for
    int()` naming nothing, and a machine record removed from a manifest written with one held its copies to the
    cross-machine bound (a copy 5e-4 off "reproduced" a run it must match bit for bit). In a published record the
    study is refused at reading (compare, reproduce), naming runs.json.gz and the run; in a local run folder, its
    manifest (compare, a join)."""
    study = published(tmp_path)

    def machine_recorded(records):
        records["jsb/nope/seed1"]["manifest"].update(machine=MACHINE, packages={"torch": "2.13.0"})
        return records

    edit_study_file(study, "runs.json.gz", machine_recorded)
    local = tmp_path / "local"
    lm_domain(local, "jsb", {"nope": X + 0.3 + np.array([0, 0, 0, 5e-4, 0, 0])}, seeds=(1,))
    manifest_path = local / "jsb" / "nope" / "seed1" / "manifest.json"
    _set_machine(manifest_path, MACHINE)
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, **change}))
    with pytest.raises(RunFileError) as error:
        join([read_study(study)], local, tmp_path / "merged", ["jsb"])
    assert f"{manifest_path}: {problem}" in str(error.value)
    err = _compare_refuses(tmp_path, capsys, study, runs="local")
    assert f"{manifest_path}: {problem}" in err and "Traceback" not in err

    def damaged(records):
        records["jsb/nope/seed1"]["manifest"].update(change)
        return records

    edit_study_file(study, "runs.json.gz", damaged)
    err = _compare_refuses(tmp_path, capsys, study)
    assert f"{study / 'runs.json.gz'}: jsb/nope/seed1: its manifest's {problem}" in err
    with pytest.raises(SystemExit) as exit_:
        reproduce_main(["--study", str(study), "--runs", "nope/1", "--scratch", str(tmp_path / "scratch")])
    assert exit_.value.code == 1
    assert f"{study / 'runs.json.gz'}: jsb/nope/seed1: its manifest's {problem}" in capsys.readouterr().err


def test_another_revision_of_the_encodings_computation_is_held_to_the_cross_machine_bound():
    """The same machine, but the encoding's arithmetic reordered since the run (a revision recorded in its manifest;
    none recorded reads as 1): the cross-machine bound, naming both revisions."""
    recorded = {"machine": MACHINE, "packages": {"torch": "2.13.0"}, "encoding": {"name": "fire"}}
    same = {**recorded, "encoding": {"name": "fire", "revision": 1}}
    assert copy_tolerance(recorded, same, 1e-5)[0] == 0.0
    bound, why = copy_tolerance(recorded, {**recorded, "encoding": {"name": "fire", "revision": 2}}, 1e-5)
    assert bound == 1e-3 and "the encoding's computation: revision 1 recorded, 2 here" in why
    threads_too = {**recorded, "machine": {**MACHINE, "threads": 2}, "encoding": {"revision": 2}}
    assert copy_tolerance(recorded, threads_too, 1e-5)[0] == 1e-3


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def _csv_rows(path):
    return list(csv.reader(io.StringIO(gzip.decompress(path.read_bytes()).decode())))


def _shift(run, split, example, value):
    """An edit of a per-example file (edit_study_file) setting one run's NLL of one example: `value(old)`."""

    def edit(rows):
        for row in rows[1:]:
            if row[:3] == [run, split, str(example)]:
                row[3] = repr(value(float(row[3])))
        return rows

    return edit


def _compare_refuses(tmp_path, capsys, *studies, runs="none"):
    """compare --with the studies: exit status 1, nothing written; returns what it printed to stderr."""
    args = ["--runs", str(tmp_path / runs), "--out", str(tmp_path / "out"), "--with", *map(str, studies)]
    with pytest.raises(SystemExit) as exit_:
        compare_main(args)
    assert exit_.value.code == 1
    assert not (tmp_path / "out").exists()
    return capsys.readouterr().err


def test_an_edited_value_is_refused_by_its_checksum_and_by_its_records_summary(tmp_path, capsys):
    """One NLL lowered by hand would make nope rank 1: study.json's sha256 of the file refuses it, and where the
    sum is updated too, the record's summary (the mean of its rows) does."""
    study = published(tmp_path)
    path = study / NOPE_EXAMPLES
    edit = _shift("jsb/nope/seed0", "test", 3, lambda nll: nll - 2.5)
    before = path.read_bytes()
    edit_study_file(study, NOPE_EXAMPLES, edit)
    (study / "study.json").write_text(
        (study / "study.json").read_text().replace(sha256(path.read_bytes()), sha256(before))
    )
    err = _compare_refuses(tmp_path, capsys, study)
    assert f"{path}: its sha256 is {sha256(path.read_bytes())}, study.json lists {sha256(before)}: the file " in err

    study = published(tmp_path / "again")
    edit_study_file(study, NOPE_EXAMPLES, edit)  # the sum updated: the rows are read, and disagree with the record
    err = _compare_refuses(tmp_path, capsys, study)
    assert f"{study / 'runs.json.gz'}: jsb/nope/seed0: its test summary has nll " in err
    assert "the mean of its 6 rows in per_example/nope.csv.gz is " in err and "the record and its rows disagree" in err


def test_a_record_that_claims_another_run_is_refused(tmp_path, capsys):
    """A record listed as nope's whose manifest names darope would be laid out over darope's run."""
    study = published(tmp_path)

    def claim(records):
        records["jsb/nope/seed0"]["manifest"]["run"]["pe_id"] = "darope"
        return records

    edit_study_file(study, "runs.json.gz", claim)
    err = _compare_refuses(tmp_path, capsys, study)
    assert (
        f"{study / 'runs.json.gz'}: jsb/nope/seed0: its manifest records jsb/darope/seed0: a record must be the run "
        "it is listed as" in err
    )


def test_a_stray_file_beside_the_studys_own_is_not_read(tmp_path):
    """per_position/nope.old.csv.gz beside nope.csv.gz: only the files study.json lists are read."""
    study = published(tmp_path)
    before = read_study(study).positions
    stray = gzip.decompress((study / "per_position" / "nope.csv.gz").read_bytes()).decode().replace(",2\n", ",4\n")
    (study / "per_position" / "nope.old.csv.gz").write_bytes(gzip.compress(stray.encode()))
    assert read_study(study).positions == before
    assert len(before["jsb/nope/seed0"]["test"]) == 3


def test_two_studies_that_disagree_on_a_run_are_refused_in_either_order_and_one_named_twice_is_read_once(
    tmp_path, capsys
):
    first = published(tmp_path)
    lm_domain(tmp_path / "other_runs", "jsb", {"hope": X + 0.002})
    lm_domain(tmp_path / "other_runs", "jsb", {"nope": X + 0.3 + np.array([0, 0, 0.004, 0, 0, 0])}, seeds=(1,))
    second = tmp_path / "other"
    export_study(tmp_path / "other_runs", ["jsb"], second)
    for a, b in ((first, second), (second, first)):
        err = _compare_refuses(tmp_path, capsys, a, b)
        assert (
            f"jsb/nope/seed1: {a / NOPE_EXAMPLES} and {b / NOPE_EXAMPLES} hold it with other numbers: test example 2 "
            "differs by 0.004 nats (tolerance 1e-05); at most one of them is this run" in err
        )
    lm_domain(tmp_path / "runs", "jsb", {"hope": X + 0.002})
    for name, studies in (("once", [first]), ("twice", [first, first])):
        args = ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / name), "--with", *map(str, studies)]
        assert compare_main(args) == 0
    assert f"warning: --with names {first} twice: it is read once" in capsys.readouterr().err
    assert (tmp_path / "twice/jsb/summary.csv").read_text() == (tmp_path / "once/jsb/summary.csv").read_text()


def test_damage_is_named_by_the_studys_own_file_and_run(tmp_path, capsys):
    """Neither a temporary folder deleted at exit nor the study's folder alone: the file, the run, what is wrong."""
    study = published(tmp_path)
    edit_study_file(study, NOPE_EXAMPLES, _shift("jsb/nope/seed1", "test", 2, lambda nll: math.nan))
    err = _compare_refuses(tmp_path, capsys, study)
    assert f"{study / NOPE_EXAMPLES}: jsb/nope/seed1, test example 2 (line 10): nll nan, expected a number of" in err
    assert "posbench-" not in err

    study = published(tmp_path / "manifest")  # what only the analysis reads of a record: named in the study's terms

    def without_parameters(records):
        del records["jsb/nope/seed1"]["manifest"]["n_params"]
        return records

    edit_study_file(study, "runs.json.gz", without_parameters)
    err = _compare_refuses(tmp_path, capsys, study)
    assert f"{study / 'runs.json.gz'} (the manifest of jsb/nope/seed1): no n_params" in err
    assert "posbench-" not in err

    study = published(tmp_path / "gzip")
    (study / NOPE_EXAMPLES).write_bytes(b"not gzip")
    with pytest.raises(StudyError, match=f"{study / NOPE_EXAMPLES}: its sha256 is "):
        read_study(study)
    description = json.loads((study / "study.json").read_text())
    description["files"][NOPE_EXAMPLES] = sha256(b"not gzip")
    (study / "study.json").write_text(json.dumps(description))
    with pytest.raises(StudyError, match=f"{study / NOPE_EXAMPLES}: damaged, not gzipped CSV"):
        read_study(study)
    with pytest.raises(StudyError, match="study.json: missing"):
        read_study(tmp_path / "nowhere")


def test_an_absurd_finite_nll_is_refused_by_name_and_the_largest_a_model_can_score_is_reported(tmp_path, capsys):
    study = published(tmp_path)
    edit_study_file(study, NOPE_EXAMPLES, _shift("jsb/nope/seed1", "test", 2, lambda nll: 1e308))
    err = _compare_refuses(tmp_path, capsys, study)
    assert (
        f"{study / NOPE_EXAMPLES}: jsb/nope/seed1, test example 2 (line 10): nll 1e+308, expected a number of " in err
    )
    assert "in [0, 3.4e+38]" in err

    study = published(tmp_path / "largest")  # float32's largest, the record agreeing: a report, not a traceback
    edit_study_file(study, NOPE_EXAMPLES, _shift("jsb/nope/seed1", "test", 2, lambda nll: 3.4e38))

    def summary(records):
        records["jsb/nope/seed1"]["summary"]["splits"]["test"]["nll"] = (
            math.fsum([*(X + 0.3)[[0, 1, 3, 4, 5]], 3.4e38]) / 6
        )
        return records

    edit_study_file(study, "runs.json.gz", summary)
    args = ["--runs", str(tmp_path / "none"), "--out", str(tmp_path / "out"), "--with", str(study)]
    assert compare_main(args) == 0


def test_a_study_with_an_infinite_tolerance_or_an_older_format_is_read_as_such(tmp_path, capsys):
    study = published(tmp_path)
    description = json.loads((study / "study.json").read_text())
    (study / "study.json").write_text(json.dumps({**description, "tolerance_nats": math.inf}))
    with pytest.raises(
        StudyError, match=r"study.json: the tolerance must be a finite positive number of nats, got inf"
    ):
        read_study(study)
    (study / "study.json").write_text(json.dumps(description))
    current = read_study(study)
    # format 2 (every run's per-example rows in one file): read as such, each number the same
    _as_format_2(study)
    assert not (study / "per_example").exists() and read_study(study).examples == current.examples
    # format 1 (before the checksums): every other check, and a warning saying how to re-publish it
    description = json.loads((study / "study.json").read_text())
    del description["files"]
    (study / "study.json").write_text(json.dumps({**description, "format": 1}))
    assert read_study(study).examples == current.examples
    assert f"re-publish it to add them (make publish WITH={study} STUDY={study}" in capsys.readouterr().err
    assert (
        publish_main(["--runs", str(tmp_path / "none"), "--domains", "jsb", "--out", str(study), "--with", str(study)])
        == 0
    )  # re-published in the current format: one file per encoding, the single file gone
    assert json.loads((study / "study.json").read_text())["format"] == 4 and not (study / "per_example.csv.gz").exists()
    assert read_study(study).examples == current.examples


def _as_format_2(study):
    """Rewrite a study into format 2, as posbench wrote it before format 3: every run's per-example rows in one
    file, per_example.csv.gz (runs in label order, as it listed them), its sha256 in study.json."""
    rows = [row for path in sorted((study / "per_example").glob("*.csv.gz")) for row in _csv_rows(path)[1:]]
    header = _csv_rows(study / NOPE_EXAMPLES)[0]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *sorted(rows, key=lambda row: row[0])])
    data = gzip.compress(out.getvalue().encode(), mtime=0)
    (study / "per_example.csv.gz").write_bytes(data)
    shutil.rmtree(study / "per_example")
    description = json.loads((study / "study.json").read_text())
    files = {k: v for k, v in description["files"].items() if not k.startswith("per_example/")}
    description.update(format=2, files={**files, "per_example.csv.gz": sha256(data)})
    (study / "study.json").write_text(json.dumps(description))


def test_a_study_of_the_current_format_lists_every_encoding_s_per_example_file(tmp_path):
    study = published(tmp_path)
    description = json.loads((study / "study.json").read_text())
    del description["files"][NOPE_EXAMPLES]
    (study / "study.json").write_text(json.dumps(description))
    with pytest.raises(StudyError, match=r"study.json: `files` does not list per_example/nope.csv.gz, the per-example"):
        read_study(study)
    description["files"]["per_example.csv.gz"] = sha256(b"")  # a format-2 file in a format-3 study
    (study / "study.json").write_text(json.dumps(description))
    with pytest.raises(StudyError, match=r"lists 'per_example.csv.gz', which is no file of a study of jsb"):
        read_study(study)


def _files(folder):
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_publish_refuses_to_replace_a_study_it_would_shrink_or_change_and_says_what_replace_drops(tmp_path, capsys):
    study = published(tmp_path)
    before = _files(study)
    lm_domain(tmp_path / "two", "jsb", {"hope": X + 0.002}, seeds=(0, 1))
    args = ["--runs", str(tmp_path / "two"), "--domains", "jsb", "--out", str(study)]
    with pytest.raises(SystemExit) as exit_:
        publish_main(args)
    assert exit_.value.code == 1 and _files(study) == before
    err = capsys.readouterr().err
    assert (
        f"refusing to publish into {study}: the study there holds 6 runs, the new one 2: it drops 6: "
        "jsb/darope/seed0, jsb/darope/seed1, "
        in err
        and "Publish into another folder, grow the study (--with" in err
    )
    lm_domain(tmp_path / "changed", "jsb", {"darope": X, "nope": X + 0.3}, seeds=(0, 2))
    lm_domain(tmp_path / "changed", "jsb", {"darope": X, "nope": X + 0.3 + np.array([0, 0, 0, 0.5, 0, 0])}, seeds=(1,))
    with pytest.raises(SystemExit):
        publish_main(["--runs", str(tmp_path / "changed"), "--domains", "jsb", "--out", str(study)])
    assert "it changes the numbers of 1: jsb/nope/seed1" in capsys.readouterr().err and _files(study) == before

    assert publish_main([*args, "--with", str(study)]) == 0  # grown: every run kept, two added
    assert f"{study}: the study grows by 2 runs: jsb/hope/seed0, jsb/hope/seed1" in capsys.readouterr().out
    assert json.loads((study / "summary.json").read_text())["runs"] == f"two + {study.name}"
    assert publish_main([*args, "--replace"]) == 0
    out = capsys.readouterr().out
    assert f"replacing the study in {study}: the study there holds 8 runs, the new one 2: it drops 6: " in out
    assert json.loads((study / "study.json").read_text())["domains"] == {"jsb": ["jsb/hope/seed0", "jsb/hope/seed1"]}


def test_a_publish_that_fails_part_way_leaves_the_study_as_it_was(tmp_path, capsys):
    """A publish whose second domain is refused has written nothing: not the first domain's settle record."""
    from pipelines.analysis.design import Design

    lm_domain(tmp_path / "published_runs", "jsb", {"darope": X, "nope": X + 0.3})
    design = {"design": Design.grow([0, 1, 2], 10, ref="darope").to_json(), "looks": []}
    (tmp_path / "published_runs/jsb/settle.json").write_text(json.dumps(design))
    export_study(tmp_path / "published_runs", ["jsb"], tmp_path / "study")
    before = _files(tmp_path / "study")
    lm_domain(tmp_path / "runs", "jsb", {"darope": X, "nope": X + 0.3})
    design = {"design": Design.grow([0, 1, 2], 6, ref="darope").to_json(), "looks": []}
    (tmp_path / "runs/jsb/settle.json").write_text(json.dumps(design))
    lm_domain(tmp_path / "runs", "maestro", {"darope": X, "nope": X + 0.3})
    manifest = tmp_path / "runs/maestro/nope/seed2/manifest.json"
    manifest.write_text(manifest.read_text().replace('"max_steps": 800', '"max_steps": 200'))
    args = ["--runs", str(tmp_path / "runs"), "--domains", "jsb", "maestro", "--out", str(tmp_path / "study")]
    with pytest.raises(SystemExit):
        publish_main(args)
    assert "maestro/nope/seed2: differs from the other runs of maestro in trainer.max_steps" in capsys.readouterr().err
    assert _files(tmp_path / "study") == before


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _read_only(folder):
    """tempfile.TemporaryDirectory, refused in `folder` as a read-only folder refuses it (the tests run as root,
    whom a folder's permissions do not stop)."""
    real = tempfile.TemporaryDirectory

    def temporary(*args, dir=None, **kwargs):
        if dir is not None and Path(dir) == folder:
            raise PermissionError(errno.EACCES, "Permission denied", str(dir))
        return real(*args, dir=dir, **kwargs)

    return temporary


@pytest.mark.parametrize("fault", ["full disk", "read-only folder", "a file where the folder must be"])
@pytest.mark.parametrize("command", ["publish", "compare"])
def test_a_write_that_fails_is_one_line_naming_the_file_and_loses_nothing(
    tmp_path, monkeypatch, capsys, command, fault
):
    """publish and compare on a full disk, into a read-only folder, or where their folder is a file, ended in
    tracebacks: now one line naming the file, what the system said and what to do; the study or report already in
    the folder is as it was, byte for byte."""
    lm_domain(tmp_path / "runs", "jsb", {"darope": X, "nope": X + 0.3})
    out = tmp_path / "out"
    args = {
        "publish": ["--runs", str(tmp_path / "runs"), "--domains", "jsb", "--out", str(out)],
        "compare": ["--runs", str(tmp_path / "runs"), "--out", str(out)],
    }[command]
    main = {"publish": publish_main, "compare": compare_main}[command]
    assert main(args) == 0
    lm_domain(tmp_path / "runs", "jsb", {"hope": X + 0.1})  # the next report would add hope
    capsys.readouterr()
    if fault == "full disk":
        monkeypatch.setattr(os, "fsync", _full_disk)
        expected = "No space left on device (the disk is full: free space and run the command again)"
    elif fault == "read-only folder":
        monkeypatch.setattr(tempfile, "TemporaryDirectory", _read_only(tmp_path))
        expected = f"{tmp_path}: Permission denied (the folder is not writable: choose another"
    else:
        shutil.rmtree(out)
        out.write_text("a file\n")
        expected = f"{out}: File exists (a file is where a folder must be: move it, or choose another folder)"
    before = _files(out) if out.is_dir() else out.read_bytes()
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and expected in err and "Traceback" not in err, err
    assert (_files(out) if out.is_dir() else out.read_bytes()) == before
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]  # no staging folder left


def test_publish_refuses_a_study_of_no_run_and_an_infinite_tolerance(tmp_path, capsys):
    lm_domain(tmp_path / "runs", "jsb", {"darope": X})
    for done in (tmp_path / "runs").rglob("done.json"):
        done.unlink()  # every run unfinished
    args = ["--runs", str(tmp_path / "runs"), "--domains", "jsb", "--out", str(tmp_path / "study")]
    with pytest.raises(SystemExit) as exit_:
        publish_main(args)
    assert exit_.value.code == 1 and not (tmp_path / "study").exists()
    assert f"{tmp_path / 'runs' / 'jsb'}: no finished run of jsb: nothing to publish" in capsys.readouterr().err
    lm_domain(tmp_path / "finished", "jsb", {"darope": X})
    with pytest.raises(SystemExit) as exit_:
        publish_main(
            ["--runs", str(tmp_path / "finished"), "--domains", "jsb", "--out", str(tmp_path / "study")]
            + ["--tolerance", "inf"]
        )
    assert exit_.value.code == 2 and not (tmp_path / "study").exists()
    assert "--tolerance must be a finite positive number of nats, got inf" in capsys.readouterr().err


def composed_study(tmp_path):
    """A study of darope and nope at seeds 0-2 whose records hold composed configs (make reproduce can train them)."""
    lm_domain(tmp_path / "published_runs", "jsb", {"darope": X, "nope": X + 0.3})
    with_composed_configs(tmp_path / "published_runs")
    export_study(tmp_path / "published_runs", ["jsb"], tmp_path / "study")
    return tmp_path / "study"


def _reproduce_refuses(study, scratch, monkeypatch, capsys, *runs):
    """reproduce exits 1 before anything trains; returns what it printed to stderr."""
    trained = []
    monkeypatch.setattr(reproduce_module, "run_local", lambda jobs, workers, threads: trained.extend(jobs) or [])
    with pytest.raises(SystemExit) as exit_:
        reproduce_main(["--study", str(study), "--runs", *runs, "--scratch", str(scratch)])
    assert exit_.value.code == 1 and trained == []
    return capsys.readouterr().err


def test_reproduce_refuses_a_stale_run_in_its_scratch_folder_before_training(tmp_path, monkeypatch, capsys):
    study = composed_study(tmp_path)
    stale = tmp_path / "scratch" / "jsb" / "darope" / "seed0"
    shutil.copytree(tmp_path / "published_runs/jsb/nope/seed0", stale)  # another encoding's finished run
    err = _reproduce_refuses(study, tmp_path / "scratch", monkeypatch, capsys, "darope/0")
    assert (
        f"{stale}: a finished run of other settings is there already (it is jsb/nope/seed0, not jsb/darope/seed0): "
        "it would be compared instead of a run trained from the study; delete it, or choose another --scratch" in err
    )
    shutil.rmtree(stale)
    shutil.copytree(tmp_path / "published_runs/jsb/darope/seed0", stale)  # the run, trained for fewer steps
    manifest = json.loads((stale / "manifest.json").read_text())
    steps = manifest["config"]["trainer"]["max_steps"]
    manifest["config"]["trainer"]["max_steps"] = 5
    (stale / "manifest.json").write_text(json.dumps(manifest))
    err = _reproduce_refuses(study, tmp_path / "scratch", monkeypatch, capsys, "darope/0")
    assert f"({'trainer.max_steps'} 5, the study's run has {steps})" in err


def test_reproduce_refuses_a_record_that_contradicts_study_json_before_training(tmp_path, monkeypatch, capsys):
    study = composed_study(tmp_path)
    steps = json.loads((study / "study.json").read_text())["holds_fixed"]["jsb"]["trainer.max_steps"]

    def fewer_steps(records):
        records["jsb/darope/seed0"]["manifest"]["config"]["trainer"]["max_steps"] = 5
        return records

    edit_study_file(study, "runs.json.gz", fewer_steps)
    err = _reproduce_refuses(study, tmp_path / "scratch", monkeypatch, capsys, "darope/0")
    assert (
        f"{study / 'runs.json.gz'}: jsb/darope/seed0: its manifest contradicts what study.json holds fixed: "
        f"trainer.max_steps 5 (study.json: {steps})" in err
    )


def test_reproduce_reports_the_yarn_evaluation_its_training_scores_and_a_zero_difference_names_no_example(
    tmp_path, monkeypatch, capsys
):
    """Naming rope10k/0 re-scores its YaRN evaluation too: that copy is compared and reported as well (here it
    differs, and the command fails on it); a copy that agrees bit for bit names no example ("at test example 0")."""
    lm_domain(tmp_path / "published_runs", "jsb", {"rope10k": X, "rope10k+yarn": X + 0.1})
    with_composed_configs(tmp_path / "published_runs")
    study = tmp_path / "study"
    export_study(tmp_path / "published_runs", ["jsb"], study)

    def trained_as_published(jobs, workers, threads):  # each job's training: the published folders, one shifted
        for job in jobs:
            for encoding in ("rope10k", "rope10k+yarn"):
                copy = tmp_path / "scratch" / "jsb" / encoding / f"seed{job.key.seed}"
                shutil.copytree(tmp_path / "published_runs" / "jsb" / encoding / f"seed{job.key.seed}", copy)
            _shift_local(copy, 2, 5e-3)
        return []

    monkeypatch.setattr(reproduce_module, "run_local", trained_as_published)
    assert reproduce_main(["--study", str(study), "--runs", "rope10k/0", "--scratch", str(tmp_path / "scratch")]) == 1
    out = capsys.readouterr().out
    assert "jsb/rope10k+yarn/seed0: compared too: the training of jsb/rope10k/seed0 scores it again" in out
    assert (
        "jsb/rope10k/seed0: largest per-example difference 0 nats (every example of test bit for bit); within the "
        "tolerance 0.001" in out
    )
    assert "jsb/rope10k+yarn/seed0: largest per-example difference 0.005 nats (test example 2); OUTSIDE" in out
    assert "test example 0" not in out


def _shift_local(run, example, by):
    """Add `by` to one example's NLL in a run folder's test.per_example.csv."""
    path = run / "metrics" / "test.per_example.csv"
    rows = read_csv(path)
    rows[example]["nll"] = repr(float(rows[example]["nll"]) + by)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.slow
def test_reproduce_retrains_a_published_run_and_its_yarn_evaluation_and_names_a_forged_value(
    tmp_path, monkeypatch, capsys
):
    """rope10k/0 and its YaRN evaluation (one training), into a scratch folder whose name is outside ASCII and holds
    quotes; then a value forged with its record and checksum updated (it passes every check of the study's own):
    only re-training shows it."""
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    short = ["trainer.max_steps=6", "trainer.optim.warmup_steps=2", "trainer.val_every=6", "trainer.val_batches=1"]
    short += ["domain.args.eval_examples=4"]
    cfg = compose_config(
        ["domain=jsb", "preset=tiny", "pe=rope10k", "seed=0", f"runs_root={tmp_path / 'runs'}", *short]
    )
    train_and_evaluate(cfg)
    study = tmp_path / "study"
    export_study(tmp_path / "runs", ["jsb"], study)
    labels = json.loads((study / "study.json").read_text())["domains"]["jsb"]
    assert labels == ["jsb/rope10k+yarn/seed0", "jsb/rope10k/seed0"]
    scratch = tmp_path / "résumé" / 'it\'s "again"'
    args = ["--study", str(study), "--runs", "rope10k/0", "rope10k+yarn/0", "--scratch", str(scratch)]
    assert reproduce_main(args) == 0
    out = capsys.readouterr().out
    # trained here, in this process, and again by reproduce in its own with the thread count the manifest records:
    # the same conditions, so the same bits
    for label in ("jsb/rope10k/seed0", "jsb/rope10k+yarn/seed0"):
        line = next(line for line in out.splitlines() if line.startswith(f"{label}: trained here with "))
        assert line.endswith(
            "; trained as recorded (threads, CPU, torch build, packages): expect bit for bit, tolerance 0"
        )
        assert f"{label}: largest per-example difference 0 nats" in out and "within the tolerance 0" in out
    assert (scratch / "jsb" / "rope10k+yarn" / "seed0" / "done.json").is_file()

    edit_study_file(study, example_file("rope10k"), _shift("jsb/rope10k/seed0", "test", 2, lambda nll: nll + 0.01))

    def summary(records):
        records["jsb/rope10k/seed0"]["summary"]["splits"]["test"]["nll"] += 0.01 / 4
        return records

    edit_study_file(study, "runs.json.gz", summary)
    assert reproduce_main(args[:4] + args[5:]) == 1  # the runs are kept: only the comparison is redone
    out = capsys.readouterr().out
    assert "jsb/rope10k/seed0: largest per-example difference 0.01 nats (test example 2); OUTSIDE" in out


def test_the_published_jsb_study_reads_back_and_todays_cpu_preset_still_joins_it():
    """docs/results/jsb-cpu: every run's evidence is there (the full roster, rosters 2 and 3), the YaRN runs beside
    their rope runs, and a run composed today at the study's preset holds fixed what the study does (else a new
    encoding could no longer join it)."""
    from omegaconf import OmegaConf

    from pipelines.runs.settings import fixed_properties
    from tests.sample_fixtures import REPO

    study = read_study(REPO / "docs" / "results" / "jsb-cpu")
    labels = study.study["domains"]["jsb"]
    trained = [label.split("/")[1:] for label in labels if "+yarn" not in label]
    yarn = sorted(label.replace("+yarn", "") for label in labels if "+yarn" in label)
    studied = set(roster("full")) | ROSTER_2 | set(roster("patterns"))  # rosters 2 and 3 joined at 3 seeds
    assert {pe for pe, _ in trained} == studied
    assert all([pe, f"seed{s}"] in trained for pe in studied for s in (0, 1, 2))  # every encoding's study
    assert yarn == sorted(f"jsb/{pe}/{seed}" for pe, seed in trained if pe.startswith("rope") and "_" not in pe)
    assert all(len(study.nll(label)) == 77 and len(study.nll(label, "test_2x")) == 25 for label in labels)
    fixed = study.study["holds_fixed"]["jsb"]
    cfg = compose_config(["domain=jsb", "preset=cpu", "pe=hope", "seed=5"])
    mine = fixed_properties({"config": OmegaConf.to_container(cfg, resolve=True), "data_hashes": {}})
    hashes = {k: v for k, v in fixed.items() if k.startswith("data_hashes.")}
    assert {**mine, **hashes} == fixed


def test_the_published_synthetic_study_holds_the_cpu_preset_s_tasks_and_todays_cpu_preset_still_joins_it():
    """docs/results/synthetic-cpu: the full roster at 3 seeds on each of the cpu preset's tasks (one per level of
    the Chomsky hierarchy and per probe kind), YaRN beside the rope runs, every test instance scored, each file of
    the study under the 2 MB a repository takes, and a run composed today at the preset still joins it."""
    from omegaconf import OmegaConf

    from pipelines.runs.settings import fixed_properties
    from tests.sample_fixtures import REPO

    folder = REPO / "docs" / "results" / "synthetic-cpu"
    study = read_study(folder)
    tasks = default_tasks("synthetic", "cpu")
    assert set(study.study["holds_fixed"]) == {f"synthetic/{task}" for task in tasks}
    labels = study.study["domains"]["synthetic"]
    trained = {tuple(label.split("/")[1:]) for label in labels if "+yarn" not in label}
    seeds = {task: {(pe, seed) for t, pe, seed in trained if t == task} for task in tasks}
    assert all(seeds[task] >= {(pe, f"seed{s}") for pe in roster("full") for s in (0, 1, 2)} for task in tasks)
    yarn = sorted(label.replace("+yarn", "") for label in labels if "+yarn" in label)
    assert yarn == sorted(f"synthetic/{t}/{pe}/{seed}" for t, pe, seed in trained if pe in ("rope10k", "rope500k"))
    assert {len(study.nll(label)) for label in labels} == {500}
    assert max(path.stat().st_size for path in folder.rglob("*") if path.is_file()) < 2_000_000
    for task in tasks:
        cfg = compose_config(["domain=synthetic", "preset=cpu", f"domain.args.task={task}", "pe=hope", "seed=5"])
        mine = fixed_properties({"config": OmegaConf.to_container(cfg, resolve=True), "data_hashes": {}})
        fixed = study.study["holds_fixed"][f"synthetic/{task}"]
        assert {**mine, **{k: v for k, v in fixed.items() if k.startswith("data_hashes.")}} == fixed


def test_the_published_study_across_domains_is_its_domains_studies_and_its_mean_rank_recomputes():
    """docs/results/study-cpu: each domain's entries are those of the domain's own published study, the one its
    record says it joined (a study re-published without the cross-domain one being recomputed would differ here), and
    its mean rank is recomputed from them independently: per domain, scipy's average ranks of the matched Δ among the
    encodings every domain scored, then the mean over the domains (each synthetic study one domain, as in paper 000's
    Figure 3). A bridged study (MAESTRO's patterns at 4 layers, `--bridge`) is its own study's domain under its
    folder's name, and its encodings the domain lacks are ranked in that domain by their own matched Δ."""
    from scipy.stats import rankdata

    from tests.sample_fixtures import REPO

    results = REPO / "docs" / "results"
    across = json.loads((results / "study-cpu" / "summary.json").read_text())
    domains = across["domains"]
    assert set(domains) >= {"jsb", "synthetic"}
    # "none + docs/results/jsb-confirm + ...": no local runs, then the studies joined, then any bridged
    local, *joined = across["runs"].split(" + ")
    assert local == "none" and all(folder.startswith("docs/results/") for folder in joined)
    studies = {folder: json.loads((REPO / folder / "summary.json").read_text())["domains"] for folder in joined}
    ranked_with = {name: entry["ranked_with"] for name, entry in domains.items() if entry.get("ranked_with")}
    bridges, ranked_into = {f"docs/results/{name}" for name in ranked_with}, set(ranked_with.values())

    def strip(encodings: dict, keys: tuple[str, ...]) -> dict:
        return {n: {k: v for k, v in record.items() if k not in keys} for n, record in encodings.items()}

    blocks: dict[str, dict] = {}  # domain -> {encoding: matched}, the domain's own first
    for name, entry in sorted(domains.items(), key=lambda item: item[1].get("ranked_with") is not None):
        bridged = entry.get("ranked_with")
        if bridged is None:
            # exactly one joined study holds it (a bridge holds the same domain under its own name)
            (own,) = [study[name] for folder, study in studies.items() if name in study and folder not in bridges]
        else:
            own = studies[f"docs/results/{name}"][bridged]
        # a bridge ranks its encodings into the domain: there, and in the domain, `rank` is the rank among both
        renamed = ("rank", "domain") if bridged is not None or name in ranked_into else ()
        assert strip(entry["encodings"], renamed) == strip(own["encodings"], renamed), name
        block = blocks.setdefault(bridged or name, {"lower": entry["lower_is_better"], "matched": {}, "entries": []})
        block["entries"].append(entry["encodings"])
        for encoding, record in entry["encodings"].items():
            block["matched"].setdefault(encoding, record["matched"])
    for domain in ranked_into:  # each entry's rank: its matched Δ's among the domain's and its bridges' encodings
        block = blocks[domain]
        names = sorted(block["matched"])
        sign = 1 if block["lower"] else -1
        union = dict(zip(names, rankdata([sign * block["matched"][n] for n in names]), strict=True))
        assert all(record["rank"] == union[n] for entries in block["entries"] for n, record in entries.items())
    common = sorted(set.intersection(*(set(block["matched"]) for block in blocks.values())))
    ranks = {}
    for domain, block in blocks.items():
        sign = 1 if block["lower"] else -1
        values = [sign * block["matched"][name] for name in common]
        ranks.update({(domain, name): rank for name, rank in zip(common, rankdata(values), strict=True)})
    mean_rank = across["mean_rank"]
    assert sorted(mean_rank) == common
    for name in common:
        expected = np.mean([ranks[(domain, name)] for domain in blocks])
        assert mean_rank[name]["mean"] == pytest.approx(expected, abs=1e-12), name
        assert mean_rank[name]["domains"] == len(blocks)


def test_the_published_maestro_study_scores_the_whole_protocol_test_split_and_todays_cpu_preset_still_joins_it():
    """docs/results/maestro-cpu: the full roster and roster 2 at seeds 0-2 (issue 32), every run scored on the whole
    test split of the paper's protocol (64 performances in 729 chunks) and the 2x and 4x windows over them (591, 280),
    the YaRN runs beside their rope runs, make settle's design fixed over every baseline against rope10k, every file
    under 2 MB, and a run composed today at the preset with the settings it had then (4 layers, 300 steps; the
    preset has 2 and 600 since issue 48's pilot) still joins it."""
    from omegaconf import OmegaConf

    from pipelines.runs.settings import fixed_properties
    from tests.sample_fixtures import REPO

    folder = REPO / "docs" / "results" / "maestro-cpu"
    study = read_study(folder)
    labels = study.study["domains"]["maestro"]
    trained = [label for label in labels if "+yarn" not in label]
    studied = set(roster("full")) | ROSTER_2
    assert {label.split("/")[1] for label in trained} == studied
    assert all(f"maestro/{pe}/seed{s}" in trained for pe in studied for s in (0, 1, 2))
    design = json.loads((folder / "settle" / "maestro.json").read_text())["design"]
    assert design["ref"] == "rope10k" and set(design["encodings"]) == studied - {"rope10k"}
    yarn = sorted(label.replace("+yarn", "") for label in labels if "+yarn" in label)
    assert yarn == sorted(label for label in trained if label.split("/")[1] in ("rope10k", "rope500k"))
    for label in labels:
        sizes = [len(study.nll(label, split)) for split in ("test", "test_2x", "test_4x")]
        assert sizes == [729, 591, 280] or ("+yarn" in label and sizes == [0, 591, 280]), (label, sizes)
    assert max(path.stat().st_size for path in folder.rglob("*") if path.is_file()) < 2_000_000
    fixed = study.study["holds_fixed"]["maestro"]
    then = ["model.n_layer=4", "trainer.max_steps=300"]
    cfg = compose_config(["domain=maestro", "preset=cpu", "pe=hope", "seed=5", *then])
    mine = fixed_properties({"config": OmegaConf.to_container(cfg, resolve=True), "data_hashes": {}})
    assert {**mine, **{k: v for k, v in fixed.items() if k.startswith("data_hashes.")}} == fixed


@pytest.mark.parametrize(
    ("study", "family", "settings"),
    [
        ("maestro-confirm", sorted((set(roster("full")) | ROSTER_2) - {"rope10k"}), "the cpu preset"),
        ("maestro-patterns", sorted(set(roster("patterns")) - {"rope10k"}), "model.n_layer=4 trainer.max_steps=900"),
    ],
)
def test_maestros_new_studies_keep_the_designs_fixed_before_their_runs(study, family, settings):
    """docs/results/maestro-confirm and maestro-patterns (issue 48) were designed before any of their runs, and their
    READMEs state the design: the settle record holds it (a republished look may add looks, not change it)."""
    from tests.sample_fixtures import REPO

    folder = REPO / "docs" / "results" / study
    design = json.loads((folder / "settle" / "maestro.json").read_text())["design"]
    assert (design["ref"], design["ref_rule"], design["encodings"]) == ("rope10k", "default", family)
    assert (design["seeds"], design["looks"], design["alpha"]) == (list(range(10, 20)), [3, 5, 8, 10], 0.05)
    assert design["futility"] == "interval"
    readme = " ".join((folder / "README.md").read_text().split())
    assert "seeds 10-19" in readme and "looks at 3, 5, 8 and 10 seeds" in readme and settings in readme
    assert [name for name in family if not re.search(rf"(?<![\w-]){name}(?![\w-])", readme)] == []


MACHINE_PATH = re.compile(r"(?<![\w.~])/(?:work|tmp|home|root|Users|mnt|var|opt|srv|private|scratch)/")


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


# the page's packed script elements that hold the study's data (the third, vega-bundle, is the charting library)
PAGE_DATA = ("runs-data", "charts-data")


def machine_paths(path: Path) -> list[str]:
    """What in one file of a published study names a machine's folder: a JSON string of its evidence or of its
    page's packed data (tests.browser.unpacked: the run manifests the page embeds) that is an absolute path, and any
    text naming a machine's folders (MACHINE_PATH), the page's inflated data included."""
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    text = data.decode("utf-8", errors="replace")
    values = [json.loads(text)] if path.name == "runs.json.gz" else []
    if path.suffix == ".html":
        values += [unpacked(text, element) for element in PAGE_DATA]
        text += "".join(inflated(text, element) for element in PAGE_DATA)
    found = [f"{path}: {s}" for value in values for s in _strings(value) if s.startswith("/")][:3]
    return found + [f"{path}: ...{text[m.start() - 20 : m.end() + 30]}..." for m in MACHINE_PATH.finditer(text)][:3]


def test_no_published_file_names_a_machine_path():
    """Every file of every published study, its page included: no JSON string of its evidence or of the data its
    page embeds is an absolute path, and no text names a machine's folders (a published study must not depend on
    where it was built). The pages published before issue 68 embed local runs' manifests (runs_root, derived_from):
    this passes once they are published again (publish builds the page from the evidence)."""
    offenders = []
    for path in sorted(p for p in (REPO / "docs" / "results").rglob("*") if p.is_file()):
        if path.suffix != ".png":
            offenders += machine_paths(path)
    assert not offenders, "\n".join(offenders[:20])


def test_a_study_published_from_local_runs_names_no_folder_of_the_machine_in_any_file(tmp_path):
    """Runs trained here record their runs folder (runs_root) and a YaRN entry its rope run's folder (derived_from),
    absolute paths of this machine. runs.json.gz wrote them relative to the runs folder, but the page was built from
    the run folders and embedded the manifests as they were: the report is built from the published evidence, so no
    file of the study names them."""
    runs = tmp_path / "machine" / "runs"
    lm_domain(runs, "jsb", {"rope10k": X, "rope10k+yarn": X - 0.05, "nope": X + 0.3})
    for manifest_path in runs.glob("jsb/*/seed*/manifest.json"):
        manifest = json.loads(manifest_path.read_text())
        manifest["config"]["runs_root"] = str(runs)
        if "+yarn" in manifest_path.parts[-3]:
            rope = manifest_path.parents[2] / "rope10k" / manifest_path.parent.name
            manifest["derived_from"] = str(rope)
            (manifest_path.parent / "done.json").write_text(json.dumps({"derived_from": str(rope)}))
        manifest_path.write_text(json.dumps(manifest))
    study = tmp_path / "study"
    assert publish_main(["--runs", str(runs), "--domains", "jsb", "--out", str(study)]) == 0
    page = (study / "index.html").read_text()
    embedded = {run["label"]: run["manifest"] for run in unpacked(page, "runs-data")}
    assert embedded["jsb/rope10k/seed0"]["config"]["runs_root"] == "."
    assert embedded["jsb/rope10k+yarn/seed0"]["derived_from"] == "jsb/rope10k/seed0"
    offenders = [found for path in sorted(study.rglob("*")) if path.is_file() for found in machine_paths(path)]
    assert not offenders, "\n".join(offenders)
