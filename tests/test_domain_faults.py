"""What every domain must survive (issue 18): a `debug=fast` run on each, and settings that cannot work refused
by name before anything is read."""

from __future__ import annotations

import json

import pytest

from pipelines.experiment.config import build_datamodule, compose_config, domain_names
from pipelines.experiment.training import train_and_evaluate
from pipelines.inspection.run import inspect_run
from pipelines.report.inspection import write_inspection
from tests.domain_fixtures import DOMAIN_DATA


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["tiny", "cpu"])  # paper's models are for GPUs (HRG's alone is 300M parameters)
@pytest.mark.parametrize("domain", domain_names())
def test_debug_fast_trains_and_evaluates_every_domain_on_eight_examples(domain, preset, tmp_path_factory, monkeypatch):
    root = tmp_path_factory.mktemp(domain)
    monkeypatch.setenv("POSBENCH_DATA", str(root / "data"))
    overrides = DOMAIN_DATA[domain](root, monkeypatch)
    cfg = compose_config(
        [f"domain={domain}", f"preset={preset}", "debug=fast", f"runs_root={root / 'runs'}", *overrides]
    )
    folder = train_and_evaluate(cfg)
    assert (folder / "done.json").is_file()
    assert json.loads((folder / "manifest.json").read_text())["steps"] == 6
    splits = json.loads((folder / "metrics" / "summary.json").read_text())["splits"]
    assert set(splits) == set(build_datamodule(cfg).eval_split_names)
    assert splits["test"]["examples"] == 8
    assert all(entry["examples"] <= 8 for entry in splits.values() if "skipped" not in entry)
    # the run can be looked inside (issue 19): its data rebuilt, the content under a window named
    inspection = inspect_run(folder, "test", 2, "cpu")
    assert inspection.views == [] and inspection.recency.layers[0].query_sum_min == pytest.approx(1.0, abs=1e-5)
    assert write_inspection(inspection, root / "inspect")[0].name == "test.json"


@pytest.mark.parametrize("domain", domain_names())
@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("model.context", 1, "context must be an integer >= 2, got 1"),
        ("trainer.batch_size", 0, "batch_size must be an integer >= 1, got 0"),
        ("trainer.eval_batch_size", -4, "eval_batch_size must be an integer >= 1, got -4"),
        ("seed", -1, "seed must be an integer >= 0, got -1"),
        ("trainer.num_workers", -1, "num_workers must be an integer >= 0, got -1"),
        ("domain.args.eval_examples", 0, "eval_examples must be an integer >= 1, got 0"),
    ],
)
def test_sizes_counts_and_seeds_that_cannot_work_are_refused_by_name(domain, setting, value, message):
    with pytest.raises(ValueError, match=rf"^{domain}: {message}$"):
        build_datamodule(compose_config([f"domain={domain}", f"{setting}={value}"]))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["domain=jsb", "domain.args.eval_stride=0"], "jsb: eval_stride must be an integer >= 1, got 0"),
        (["domain=jsb", "domain.args.eval_stride=256"], "jsb: eval_stride must be below the context 256, got 256"),
        (["domain=maestro", "domain.args.transpose=-3"], "maestro: transpose must be an integer >= 0, got -3"),
        (["domain=maestro", "domain.args.split_seed=-1"], "maestro: split_seed must be an integer >= 0, got -1"),
        (["domain=maestro", "domain.args.tokenize_workers=0"], "maestro: tokenize_workers must be an integer >= 1"),
        (["domain=maestro", "domain.args.chunk_length=1"], "maestro: chunk_length must be an integer >= 2, got 1"),
        (["domain=sleep_edf", "domain.args.split_seed=-4"], "sleep_edf: split_seed must be an integer >= 0, got -4"),
        (["domain=hrg", "domain.args.extrapolation=[2.5]"], r"hrg: extrapolation factors must be integers >= 2"),
    ],
)
def test_domain_settings_that_cannot_work_are_refused_by_name(overrides, message):
    with pytest.raises(ValueError, match=rf"^{message}"):
        build_datamodule(compose_config(overrides))
