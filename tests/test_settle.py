"""make settle: the group-sequential design (its looks and alpha per look), the rule that picks the runs of the
next look, `--plan` on a fabricated runs folder, the loop that trains, records and stops (training replaced by
fabricated finished runs), compare reading the design, and simulations of the rule's family-wise error under the
null and of its power against a difference of one seed SD."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipelines import settle as settle_module
from pipelines.analysis.sequential import Comparator, Design, primary_family
from pipelines.compare import main as compare_main
from pipelines.publish import main as publish_main
from pipelines.runs.published import export_study
from tests.run_fixtures import compare, lm_domain, read_csv, section, synthetic_tree
from tests.test_verdict import evidence

X = np.array([0.2, 1.4, 0.6, 2.5, 1.0, 0.8])  # six test examples of very different difficulty


def test_the_default_design_looks_at_3_5_8_10_seeds_and_spends_alpha_evenly():
    design = Design.grow([0, 1, 2], 10)
    assert design.looks == (3, 5, 8, 10) and design.seeds == tuple(range(10))
    assert design.level == pytest.approx(0.0125) and design.look_seeds(1) == (0, 1, 2, 3, 4)
    assert Design.from_json(json.loads(json.dumps(design.to_json()))) == design
    assert Design.grow([0, 1, 2], 3).looks == (3,)
    with pytest.raises(ValueError, match="below the 3 seeds"):
        Design.grow([0, 1, 2], 2)
    with pytest.raises(ValueError, match="increase from at least 2"):
        Design((0, 1, 2), (3, 2, 3))


def fabricated_study(root):
    """jsb at seeds 0-2: darope (the reference); nope (0.3 worse on every seed: decided at the first look); hope
    (0.001 worse, seeds spreading 0.002: equivalent); rope10k (0.02 worse, seeds spreading 0.04: inconclusive with
    |Δ| outside the region, so the design calls for its next seeds)."""
    lm_domain(root, "jsb", {"darope": X, "nope": X + 0.3}, seed_step=0.01)
    lm_domain(root, "jsb", {"hope": X + 0.001}, seed_step=0.012)
    lm_domain(root, "jsb", {"rope10k": X + 0.02}, seed_step=0.05)


def test_plan_lists_exactly_the_runs_the_rule_calls_for(tmp_path, capsys):
    fabricated_study(tmp_path / "runs")
    assert settle_module.main(["--domain", "jsb", "--runs", str(tmp_path / "runs"), "--ref", "darope", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "looks at 3, 5, 8, 10 seeds" in out and "reference darope" in out
    verdicts = {line.split()[0]: line for line in out.splitlines() if " vs darope: " in line}
    assert ": worse (look 1)" in verdicts["nope"] and ": equivalent (look 1)" in verdicts["hope"]
    assert ": inconclusive (look 1)" in verdicts["rope10k"]
    runs = [line.split()[0] for line in out.splitlines() if line.startswith("  jsb/")]
    assert runs == ["jsb/darope/seed3", "jsb/darope/seed4", "jsb/rope10k/seed3", "jsb/rope10k/seed4"]
    assert "plan: the next look needs 4 runs" in out
    assert not (tmp_path / "runs" / "jsb" / "settle.json").exists()  # --plan writes nothing
    assert not (tmp_path / "runs" / "jsb" / "rope10k" / "seed3").exists()


def fake_training(root, trained):
    """run_local replaced by finished runs in `root`: rope10k is 0.02 worse, darope as it was; seed k adds 0.001 k."""

    def run_local(jobs, workers):
        for job in jobs:
            pe, seed = job.key.encoding, job.key.seed
            trained.append(job.label)
            shift = {"darope": 0.0, "rope10k": 0.02}[pe] + 0.001 * seed
            lm_domain(root, "jsb", {pe: X + shift}, seeds=(seed,), seed_step=0.0)
        return []

    return run_local


def test_settle_trains_the_called_runs_records_the_looks_and_compare_reports_the_same(tmp_path, monkeypatch, capsys):
    root = tmp_path / "runs"
    fabricated_study(root)
    trained = []
    fake_run_local = fake_training(root, trained)
    monkeypatch.setattr(settle_module, "run_local", fake_run_local)
    assert settle_module.main(["--domain", "jsb", "--runs", str(root), "--ref", "darope"]) == 0
    out = capsys.readouterr().out
    # look 1 calls for rope10k's seeds 3, 4; at look 2 its five differences (0.02 spread by seeds 0-2, then 0.02)
    # are not yet significant at 0.0125; ... until decided or the last look
    assert trained[:4] == ["jsb/darope/seed3", "jsb/darope/seed4", "jsb/rope10k/seed3", "jsb/rope10k/seed4"]
    record = json.loads((root / "jsb" / "settle.json").read_text())
    assert record["design"]["looks"] == [3, 5, 8, 10] and record["design"]["ref"] == "darope"
    assert [look["look"] for look in record["looks"]] == list(range(1, len(record["looks"]) + 1))
    assert record["looks"][0]["calls_for"] == ["rope10k"]
    final = record["looks"][-1]["pairs"]["rope10k"]["verdict"]
    assert record["next_runs"] == []
    assert f"look {len(record['looks'])} of 4" in out

    # compare reads the design: the same verdicts, the looks listed, every seed of rope10k and darope used
    summary = compare(root, "jsb", tmp_path / "out").read_text()
    rows = {row["encoding"]: row for row in read_csv(tmp_path / "out" / "summary.csv")}
    assert rows["rope10k"]["verdict"] == final and rows["nope"]["verdict"] == "worse"
    assert rows["hope"]["verdict"] == "equivalent" and rows["hope"]["seeds"] == "3"
    assert int(rows["rope10k"]["seeds"]) == len(record["looks"][-1]["seeds"])
    assert float(rows["rope10k"]["verdict_alpha"]) == pytest.approx(0.0125)
    assert "## Looks (make settle)" in summary and "follow make settle's design" in summary
    looks = section(summary, "Looks (make settle)")
    assert (
        "- look 1 at 3 seeds (alpha 0.0125): worse: `nope`; equivalent: `hope`; calls for more seeds: `rope10k`."
        in looks
    )
    # rope10k's seeds 0-2 spread 0.05 apart, so the four looks never decide it: at the last no more seeds
    assert final == "inconclusive" and len(record["looks"]) == 4
    assert "- look 4 at 10 seeds (alpha 0.0125): equivalent: `hope`; inconclusive at the cap: `rope10k`." in looks
    assert "Status: the design's last look is reached; 1 pair stays inconclusive." in looks
    # a second settle with another design is refused: the design was fixed at the first look
    with pytest.raises(SystemExit):
        settle_module.main(["--domain", "jsb", "--runs", str(root), "--max-seeds", "6"])
    assert "cannot change: max seeds 6 (the design has 10)" in capsys.readouterr().err


def run_rule(values, design, replicates=100):
    """The settle rule on a simulated study: values (E, max seeds, N); seeds past the first look appear only when
    the rule calls for them. Returns the final family."""
    trained = np.zeros(values.shape[:2], bool)
    trained[:, : design.looks[0]] = True
    names = tuple(f"e{i}" for i in range(values.shape[0]))
    while True:
        ev = evidence(np.where(trained[:, :, None], values, np.nan), encodings=names)
        family = primary_family(Comparator(ev, replicates), design, "e0", plan_seeds=False)
        if not family.next_runs:
            return family
        for name, seed in family.next_runs:
            trained[names.index(name), seed] = True


def simulated(rng, n_enc, shift, seeds=10, examples=20, seed_sd=0.02):
    hardness = rng.normal(0.8, 0.3, examples)
    shifts = np.zeros(n_enc)
    shifts[1] = shift
    return (
        hardness
        + shifts[:, None, None]
        + rng.normal(0, seed_sd, (n_enc, seeds, 1))
        + rng.normal(0, 0.02, (n_enc, seeds, examples))
    )


def test_simulation_the_settle_rule_keeps_the_family_wise_error_and_has_power(capsys):
    """1,000 null studies of 4 equal encodings (each seed shifts an encoding by SD 0.02), grown from 3 seeds up
    to 10 by the rule: the share with any `better` or `worse` verdict stays at most alpha = 0.05 (with the Monte
    Carlo error of 1,000 studies). Then 300 studies where one baseline is worse by one seed SD (0.02)."""
    design = Design.grow([0, 1, 2], 10)
    rng = np.random.default_rng(11)
    studies, false, seeds_used = 1000, 0, []
    for _ in range(studies):
        family = run_rule(simulated(rng, 4, 0.0), design)
        false += any(pair.verdict in ("better", "worse") for pair in family.verdicts.values())
        seeds_used.append(sum(len(pair.seeds_a) for pair in family.verdicts.values()))
    power_studies, found = 200, 0
    for _ in range(power_studies):
        family = run_rule(simulated(rng, 2, 0.02), design)
        found += family.verdicts["e1"].verdict == "worse"
    fwer, power = false / studies, found / power_studies
    with capsys.disabled():
        print(
            f"\nsettle rule (looks 3, 5, 8, 10; alpha 0.05): family-wise error {fwer:.3f} over {studies} null "
            f"studies of 4 encodings (mean {np.mean(seeds_used) / 3:.1f} seeds per baseline); power {power:.2f} "
            f"against a difference of one seed SD over {power_studies} studies"
        )
    assert fwer <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / studies)
    assert power > 0.3


def test_plan_on_a_domain_with_tasks_lists_every_task_of_the_called_seeds(tmp_path, capsys):
    """The demo's layout: synthetic tasks, seeds 0 and 1 (the first look), rope10k best, ape_learned open."""
    synthetic_tree(tmp_path / "runs")
    (tmp_path / "runs" / "synthetic" / "reverse_string" / "rope10k" / "seed1" / "done.json").write_text("{}")
    assert settle_module.main(["--domain", "synthetic", "--runs", str(tmp_path / "runs"), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "looks at 2, 5, 7, 10 seeds" in out and "reference rope10k" in out
    assert ": inconclusive (look 1)" in next(line for line in out.splitlines() if "ape_learned vs rope10k" in line)
    runs = sorted(line.split()[0] for line in out.splitlines() if line.startswith("  synthetic/"))
    assert runs == sorted(
        f"synthetic/{task}/{pe}/seed{seed}"
        for task in ("parity", "reverse_string")
        for pe in ("ape_learned", "rope10k")
        for seed in (2, 3, 4)
    )


def test_settle_with_a_published_study_trains_locally_what_its_own_runs_would_need(tmp_path, monkeypatch, capsys):
    """A published study grown without its run folders (--with): the same plan, the same runs trained and the same
    looks as settling the study's own runs; the new runs land in the local folder only, and publish --with
    writes the grown study, which compare reads with the design's verdicts."""
    fabricated_study(tmp_path / "published_runs")
    export_study(tmp_path / "published_runs", ["jsb"], tmp_path / "study")
    # the fabricated manifests are not composed configs: check_joinable is tested on its own below
    monkeypatch.setattr(settle_module, "check_joinable", lambda jobs, studies: None)
    local, args = tmp_path / "local", ["--domain", "jsb", "--ref", "darope"]
    assert settle_module.main([*args, "--runs", str(local), "--with", str(tmp_path / "study"), "--plan"]) == 0
    planned = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  jsb/")]
    assert planned == ["jsb/darope/seed3", "jsb/darope/seed4", "jsb/rope10k/seed3", "jsb/rope10k/seed4"]
    assert not local.exists()

    direct, joined = [], []
    monkeypatch.setattr(settle_module, "run_local", fake_training(tmp_path / "published_runs", direct))
    assert settle_module.main([*args, "--runs", str(tmp_path / "published_runs")]) == 0
    monkeypatch.setattr(settle_module, "run_local", fake_training(local, joined))
    assert settle_module.main([*args, "--runs", str(local), "--with", str(tmp_path / "study")]) == 0
    assert joined == direct and len(joined) >= 4
    mine = json.loads((local / "jsb" / "settle.json").read_text())
    assert mine == json.loads((tmp_path / "published_runs" / "jsb" / "settle.json").read_text())
    assert sorted(p.parent.name + "/" + p.name for p in (local / "jsb").glob("*/seed*")) == sorted(
        label.removeprefix("jsb/") for label in joined
    )
    assert (
        publish_main(
            [
                "--runs",
                str(local),
                "--domains",
                "jsb",
                "--out",
                str(tmp_path / "grown"),
                "--with",
                str(tmp_path / "study"),
            ]
        )
        == 0
    )
    grown = json.loads((tmp_path / "grown" / "study.json").read_text())["domains"]["jsb"]
    assert len(grown) == 12 + len(joined)
    assert json.loads((tmp_path / "grown" / "settle" / "jsb.json").read_text()) == mine
    summary = compare(tmp_path / "published_runs", "jsb", tmp_path / "direct_out")
    assert (
        compare_main(
            ["--runs", str(tmp_path / "none"), "--out", str(tmp_path / "grown_out"), "--with", str(tmp_path / "grown")]
        )
        == 0
    )
    assert (tmp_path / "grown_out" / "jsb" / "summary.csv").read_text() == (summary.parent / "summary.csv").read_text()


def test_settle_with_refuses_a_local_design_other_than_the_studys(tmp_path, capsys):
    fabricated_study(tmp_path / "published_runs")
    assert settle_module.main(["--domain", "jsb", "--runs", str(tmp_path / "published_runs"), "--plan"]) == 0
    (tmp_path / "published_runs" / "jsb" / "settle.json").write_text(
        json.dumps({"design": Design.grow([0, 1, 2], 10, ref="darope").to_json(), "looks": []})
    )
    export_study(tmp_path / "published_runs", ["jsb"], tmp_path / "study")
    local = tmp_path / "local" / "jsb"
    local.mkdir(parents=True)
    (local / "settle.json").write_text(json.dumps({"design": Design.grow([0, 1, 2], 6, ref="darope").to_json()}))
    with pytest.raises(SystemExit):
        settle_module.main(["--domain", "jsb", "--runs", str(local.parent), "--with", str(tmp_path / "study")])
    err = capsys.readouterr().err
    assert f"{local / 'settle.json'}: another make-settle design than the study's" in err


def test_settle_with_refuses_before_training_a_run_the_study_would_not_take(tmp_path, capsys):
    """The study holds fixed what a run composed at its preset has (as a real published study does); a settle
    whose overrides change the budget is refused by name before any folder is made."""
    from omegaconf import OmegaConf

    from pipelines.experiment.config import compose_config
    from pipelines.runs.settings import fixed_properties

    fabricated_study(tmp_path / "published_runs")
    export_study(tmp_path / "published_runs", ["jsb"], tmp_path / "study")
    cfg = compose_config(["domain=jsb", "preset=tiny", "pe=darope", "seed=0"])
    data = json.loads((tmp_path / "study" / "study.json").read_text())
    data["holds_fixed"]["jsb"] = fixed_properties(
        {"config": OmegaConf.to_container(cfg, resolve=True), "data_hashes": {}}
    )
    (tmp_path / "study" / "study.json").write_text(json.dumps(data))
    args = ["--domain", "jsb", "--runs", str(tmp_path / "local"), "--with", str(tmp_path / "study"), "--ref", "darope"]
    assert settle_module.main([*args, "--plan"]) == 0
    assert "plan: the next look needs 4 runs" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        settle_module.main([*args, "trainer.max_steps=7"])
    err = capsys.readouterr().err
    assert (
        "refusing to train for" in err
        and f"jsb/darope/seed3: trainer.max_steps 7, the study has {cfg.trainer.max_steps}" in err
    )
    assert not (tmp_path / "local").exists()
