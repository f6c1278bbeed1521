"""A published study: its evidence exported and read back as run folders (the same report as from the runs
themselves, byte-stable files), local runs joining it (`make compare WITH=...`: a matching run joins, one with
another budget, data, preset or model size is refused by name, a disagreeing copy of a published run stops the
comparison), and `make reproduce` on a tiny study made here (within tolerance; a tampered value named)."""

from __future__ import annotations

import csv
import gzip
import io
import json

import numpy as np
import pytest

from pipelines.compare import main as compare_main
from pipelines.experiment.config import compose_config, roster
from pipelines.experiment.training import train_and_evaluate
from pipelines.publish import main as publish_main
from pipelines.reproduce import main as reproduce_main
from pipelines.runs.published import PER_EXAMPLE, StudyError, export_study, join, read_study
from tests.run_fixtures import lm_domain, read_csv
from tests.sample_fixtures import SAMPLES

X = np.array([0.2, 1.4, 0.6, 2.5, 1.0, 0.8])


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
    per_encoding = ["per_position/darope.csv.gz", "per_position/nope.csv.gz"]  # one file per encoding: each small
    assert sorted(before) == ["per_example.csv.gz", *per_encoding, "runs.json.gz"]
    export_study(tmp_path / "published_runs", ["jsb"], study)
    assert before == {str(p.relative_to(study)): p.read_bytes() for p in study.rglob("*.gz")}
    assert publish_main(["--runs", str(tmp_path / "published_runs"), "--domains", "jsb", "--out", str(study)]) == 0
    assert "published 6 runs of jsb" in capsys.readouterr().out


def test_a_matching_local_run_joins_and_gets_its_verdict_against_every_published_one(tmp_path, capsys):
    study = published(tmp_path)
    lm_domain(tmp_path / "runs", "jsb", {"hope": X + 0.002})
    args = ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--with", str(study), "--ref", "darope"]
    assert compare_main(args) == 0
    rows = {row["encoding"]: row for row in read_csv(tmp_path / "out" / "jsb" / "summary.csv")}
    assert set(rows) == {"darope", "hope", "nope"} and rows["hope"]["verdict"] in ("worse", "equivalent")
    pairs = read_csv(tmp_path / "out" / "jsb" / "pairs.csv")
    assert {(p["a"], p["b"]) for p in pairs} == {("darope", "hope"), ("darope", "nope"), ("hope", "nope")}
    assert "Runs: `" in capsys.readouterr().out and str(study) in (tmp_path / "out" / "summary.md").read_text()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_steps": 200}, "jsb/hope/seed0: trainer.max_steps 200, the study has 800"),
        ({"data_hashes": {"eval/test": "cd" * 32}}, f"jsb/hope/seed0: data_hashes.eval/test {'cd' * 32}, the study"),
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


def test_a_local_copy_of_a_published_run_must_agree_with_it(tmp_path):
    study = published(tmp_path)
    lm_domain(tmp_path / "runs", "jsb", {"nope": X + 0.3}, seeds=(1,))  # the same run: joins, read from the study
    notes = join(read_study(study), tmp_path / "runs", tmp_path / "merged", ["jsb"])
    assert notes == ["jsb/nope/seed1: the local run reproduces the published one within 1e-05 nats"]
    lm_domain(tmp_path / "runs2", "jsb", {"nope": X + 0.3 + np.array([0, 0, 0, 0.002, 0, 0])}, seeds=(1,))
    with pytest.raises(StudyError, match=r"jsb/nope/seed1: test example 3 differs from the published run by 0.002"):
        join(read_study(study), tmp_path / "runs2", tmp_path / "merged2", ["jsb"])


def test_a_damaged_study_is_named(tmp_path):
    study = published(tmp_path)
    (study / PER_EXAMPLE).write_bytes(b"not gzip")
    with pytest.raises(StudyError, match="a file of the study is damaged"):
        read_study(study)
    with pytest.raises(StudyError, match="study.json: missing"):
        read_study(tmp_path / "nowhere")


def _tamper(study, run, split, example, delta):
    """Shift one published per-example NLL by delta (the gzip rewritten)."""
    path = study / PER_EXAMPLE
    rows = list(csv.reader(io.StringIO(gzip.decompress(path.read_bytes()).decode())))
    for row in rows[1:]:
        if row[0] == run and row[1] == split and row[2] == str(example):
            row[3] = repr(float(row[3]) + delta)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_bytes(gzip.compress(out.getvalue().encode()))


@pytest.mark.slow
def test_reproduce_retrains_a_published_run_within_tolerance_and_names_a_tampered_value(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    short = ["trainer.max_steps=6", "trainer.optim.warmup_steps=2", "trainer.val_every=6", "trainer.val_batches=1"]
    short += ["domain.args.eval_examples=4"]
    cfg = compose_config(
        ["domain=jsb", "preset=tiny", "pe=rope10k", "seed=0", f"runs_root={tmp_path / 'runs'}", *short]
    )
    train_and_evaluate(cfg)
    export_study(tmp_path / "runs", ["jsb"], tmp_path / "study")
    args = ["--study", str(tmp_path / "study"), "--runs", "rope10k/0", "--scratch", str(tmp_path / "again")]
    assert reproduce_main(args) == 0
    out = capsys.readouterr().out
    assert "jsb/rope10k/seed0: largest per-example difference" in out and "within the tolerance 1e-05" in out
    _tamper(tmp_path / "study", "jsb/rope10k/seed0", "test", 2, 0.01)
    assert reproduce_main(args) == 1  # the runs are kept: only the comparison is redone
    out = capsys.readouterr().out
    assert "jsb/rope10k/seed0: largest per-example difference 0.01 nats (test example 2); OUTSIDE" in out


def test_the_published_jsb_study_reads_back_and_todays_cpu_preset_still_joins_it():
    """docs/results/jsb-cpu: every run's evidence is there, the YaRN runs beside their rope runs, and a run composed
    today at the study's preset holds fixed what the study does (else a new encoding could no longer join it)."""
    from omegaconf import OmegaConf

    from pipelines.runs.settings import fixed_properties
    from tests.sample_fixtures import REPO

    study = read_study(REPO / "docs" / "results" / "jsb-cpu")
    labels = study.study["domains"]["jsb"]
    trained = [label.split("/")[1:] for label in labels if "+yarn" not in label]
    yarn = sorted(label.replace("+yarn", "") for label in labels if "+yarn" in label)
    assert {pe for pe, _ in trained} == set(roster("full"))
    assert all([pe, f"seed{s}"] in trained for pe in roster("full") for s in (0, 1, 2))  # every encoding's study
    assert yarn == sorted(f"jsb/{pe}/{seed}" for pe, seed in trained if pe.startswith("rope") and "_" not in pe)
    assert all(len(study.nll(label)) == 77 and len(study.nll(label, "test_2x")) == 25 for label in labels)
    fixed = study.study["holds_fixed"]["jsb"]
    cfg = compose_config(["domain=jsb", "preset=cpu", "pe=hope", "seed=5"])
    mine = fixed_properties({"config": OmegaConf.to_container(cfg, resolve=True), "data_hashes": {}})
    hashes = {k: v for k, v in fixed.items() if k.startswith("data_hashes.")}
    assert {**mine, **hashes} == fixed
