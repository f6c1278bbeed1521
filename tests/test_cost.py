"""What a study cost (pipelines.analysis.cost): core-hours from the runs' manifests and summaries, per encoding and
per decided pair, checked against hand-computed figures, and the same figures in the answer, the summary and
summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipelines.analysis.cost import combined, runs_cost
from pipelines.analysis.loading import FAILED_STATUS, FINISHED, LoadedRun
from pipelines.report.cost import timing_sentence
from pipelines.runs.layout import RunKey
from tests.run_fixtures import lm_domain, section, study

X = np.array([0.2, 1.4, 0.6, 2.5, 1.0, 0.8])


def loaded(
    encoding, seed, *, train=None, cpu=None, splits=None, threads=None, device="cpu", status=FINISHED, totals=None
):
    manifest = {"device": device}
    if train is not None:
        manifest["train_seconds_this_process"] = train
    if cpu is not None:
        manifest["train_cpu_seconds_this_process"] = cpu
    if totals is not None:  # (wall, CPU) over every process of a resumed run, as manifests record them now
        manifest["train_seconds"], manifest["train_cpu_seconds"] = totals
    if threads is not None:
        manifest["machine"] = {"threads": threads}
    key = RunKey("jsb", None, encoding, seed)
    return LoadedRun(key, Path(key.label), status, manifest=manifest, splits=splits or {})


def test_core_seconds_are_training_plus_each_splits_scoring_times_the_threads():
    runs = [
        # 100 s of training, the test split's 3,000 tokens at 1,000 tokens/s, 2 threads: (100 + 3) x 2
        loaded("rope10k", 0, train=100.0, splits={"test": {"tokens": 3000, "tokens_per_s": 1000.0}}, threads=2),
        # no thread record (an older manifest): one thread; a skipped split costs nothing
        loaded(
            "rope10k",
            1,
            train=50.0,
            splits={"test": {"tokens": 500, "tokens_per_s": 250.0}, "test_2x": {"skipped": "no longer windows"}},
        ),  # fmt: skip
        # a YaRN entry trains nothing: its own scoring, under its rope encoding
        loaded("rope10k+yarn", 0, train=100.0, splits={"test_2x": {"tokens": 800, "tokens_per_s": 400.0}}),
        loaded("alibi", 0, train=30.0, splits={}, threads=1),
        loaded("alibi", 1, splits={"test": {"tokens": 10, "tokens_per_s": 10.0}}),  # no training time: not counted
        loaded("nope", 0, status=FAILED_STATUS),  # unfinished and failed runs cost nothing counted
        loaded("fire", 0, train=3600.0, device="cuda:0", threads=8),  # a GPU run: GPU-seconds, threads aside
    ]
    cost = runs_cost(runs)
    assert cost.core_seconds == pytest.approx({"rope10k": 206.0 + 52.0 + 2.0, "alibi": 30.0})
    assert cost.gpu_seconds == {"fire": 3600.0}
    assert (cost.runs, cost.untimed) == (4, ("jsb/alibi/seed1",))  # the YaRN entry is no run of its own
    assert cost.evaluations == 1  # ... but counted as what it is: a count of the records says both (issue 64)
    assert cost_phrase_runs(cost) == "4 trained runs and their 1 YaRN evaluation"
    assert cost.core_hours == pytest.approx(290.0 / 3600) and cost.gpu_hours == pytest.approx(1.0)
    assert cost.per_decided(2) == pytest.approx((290.0 / 3600 + 1.0) / 2) and cost.per_decided(0) is None
    both = combined([cost, runs_cost([loaded("alibi", 2, train=70.0)])])
    assert both.core_seconds["alibi"] == pytest.approx(100.0) and both.runs == 5 and both.evaluations == 1


def test_a_run_that_records_its_cpu_seconds_costs_them_whatever_shared_its_cores():
    """A run recorded since CPU seconds were: its training's and each scored split's CPU seconds, not wall x
    threads (it trained beside other work: 600 s of wall on 1 thread, 250 s of CPU). A split without them (a record
    half old) sends the run back to wall x threads; a GPU run counts its wall seconds as GPU-seconds."""
    scored = {"test": {"tokens": 3000, "tokens_per_s": 100.0, "cpu_seconds": 12.5}, "test_2x": {"skipped": "none"}}
    half = {"test": {"tokens": 3000, "tokens_per_s": 100.0}}
    runs = [
        loaded("rope10k", 0, train=600.0, cpu=250.0, splits=scored, threads=1),  # 250 + 12.5
        loaded("rope10k", 1, train=600.0, cpu=250.0, splits=half, threads=1),  # (600 + 30) x 1: no split CPU time
        loaded("rope10k+yarn", 0, train=600.0, cpu=250.0, splits=scored),  # trains nothing: its scoring, 12.5
        loaded("alibi", 0, train=100.0, cpu=190.0, splits={}, threads=2),  # two threads busy: 190 CPU seconds
        loaded("fire", 0, train=50.0, cpu=49.0, device="cuda:0"),  # GPU: wall seconds
    ]
    cost = runs_cost(runs)
    assert cost.core_seconds == pytest.approx({"rope10k": 262.5 + 630.0 + 12.5, "alibi": 190.0})
    assert cost.gpu_seconds == {"fire": 50.0} and cost.runs == 4 and cost.untimed == ()
    assert (cost.cpu_timed, cost.wall_timed) == (3, 1)  # the YaRN entry's scoring counted; the GPU run neither
    assert timing_sentence(cost).startswith("3 entries count their CPU seconds instead (every thread of the run's ")
    older = "; 1 recorded before that count wall-clock seconds, not CPU time: runs that shared their cores with "
    assert timing_sentence(cost).endswith(older + "other work record more than they needed alone.")
    assert timing_sentence(runs_cost(runs[1:2])).startswith("Wall-clock seconds, not CPU time")


def test_a_resumed_run_costs_every_process_that_trained_it_where_its_manifest_records_them():
    """A run resumed across sessions: 700 CPU seconds before its checkpoint, 300 after (its last process); counted
    1,000 + its scoring. A total of null (resumed from a checkpoint older than the record) and a manifest without
    totals count the last process, the lower bound older studies state; wall seconds likewise."""
    scored = {"test": {"tokens": 3000, "tokens_per_s": 100.0, "cpu_seconds": 10.0}}
    walled = {"test": {"tokens": 3000, "tokens_per_s": 100.0}}
    runs = [
        loaded("rope10k", 0, train=320.0, cpu=300.0, totals=(760.0, 1000.0), splits=scored),  # 1000 + 10
        loaded("rope10k", 1, train=320.0, cpu=300.0, totals=(None, None), splits=scored),  # 300 + 10
        loaded("alibi", 0, train=320.0, cpu=300.0, splits=scored),  # 300 + 10: an older manifest
        loaded("alibi", 1, train=320.0, totals=(760.0, None), splits=walled, threads=2),  # (760 + 30) x 2
    ]
    cost = runs_cost(runs)
    assert cost.core_seconds == pytest.approx({"rope10k": 1010.0 + 310.0, "alibi": 310.0 + 1580.0})
    assert (cost.cpu_timed, cost.wall_timed) == (3, 1)


def cost_phrase_runs(cost) -> str:
    """The runs a cost phrase counts, as the answer says them (pipelines.report.cost.cost_phrase)."""
    from pipelines.report.markdown import runs_text

    return runs_text(cost.runs, cost.evaluations, joiner=" and their ")


def timed_study(root: Path) -> None:
    """jsb: darope (the reference), nope (0.3 worse on every seed: decided), hope (open); every run 360 s of
    training on 2 threads and its test split's 720 tokens at 20 tokens/s (36 s): 792 core-seconds a run."""
    lm_domain(root, "jsb", {"darope": X, "nope": X + 0.3}, seed_step=0.01)
    lm_domain(root, "jsb", {"hope": X + 0.02}, seed_step=0.05)  # its seeds spread: inconclusive
    for run in root.glob("jsb/*/seed*"):
        manifest = json.loads((run / "manifest.json").read_text())
        manifest.update(train_seconds_this_process=360.0, machine={"threads": 2})
        (run / "manifest.json").write_text(json.dumps(manifest))
        summary = json.loads((run / "metrics" / "summary.json").read_text())
        summary["splits"]["test"].update(tokens=720, tokens_per_s=20.0)
        (run / "metrics" / "summary.json").write_text(json.dumps(summary))


def test_the_answer_the_summary_and_its_data_state_what_the_study_cost(tmp_path):
    timed_study(tmp_path / "runs")
    summary = study(tmp_path / "runs", None, tmp_path / "out", ref="darope").read_text()
    hours = 9 * 792 / 3600  # 9 runs: 1.98 core-hours; one decided pair (nope worse)
    assert f"spent {hours:.1f} core-hours on 9 trained runs ({hours:.1f} per decided pair, 1 decided)" in section(
        summary, "The answer"
    )
    table = section(summary, "What it cost")
    assert f"| jsb | 9 | {hours:.1f} | 1 | {hours:.1f} |" in table
    assert f"| `darope` | {3 * 792 / 3600:.1f} | {3 * 792 / 3600:.1f} |" in table
    cost = json.loads((tmp_path / "out" / "summary.json").read_text())["cost"]
    assert cost["all"]["core_hours"] == pytest.approx(hours) and cost["all"]["decided_pairs"] == 1
    assert cost["domains"]["jsb"]["hours_per_encoding"] == pytest.approx({e: 3 * 792 / 3600 for e in
                                                                          ("darope", "hope", "nope")})  # fmt: skip
