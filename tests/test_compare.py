"""Tests of one domain's analysis and report on run folders in the train pipeline's format (tests/run_fixtures.py):
the per-domain reports, missing and failed runs, the refusal of incomparable runs, and the per-position curves."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from scipy import stats as sps

from pipelines.analysis.curves import pooled_positions, split_length
from pipelines.analysis.evidence import check_comparable, missing_runs
from pipelines.analysis.loading import IncomparableRunsError, load_runs
from pipelines.report.figures import binned_curve
from pipelines.runs.layout import discover_runs
from pipelines.runs.metrics import read_csv as read_numeric_csv
from tests.run_fixtures import (
    ACCURACY,
    CHANCE,
    EXAMPLE_IDS,
    SKIP_REASON,
    TEST_HASH,
    assert_png,
    compare,
    lm_domain,
    lm_tree,
    pair,
    read_csv,
    section,
    synthetic_tree,
    write_csv,
    write_run,
)


def test_compare_lm_domain_end_to_end(tmp_path):
    values = lm_tree(tmp_path / "runs")
    out = tmp_path / "results" / "jsb"
    summary = compare(tmp_path / "runs", "jsb", out, ref="rope10k")

    assert summary == out / "summary.md"
    # independent computation: average each example id over the seeds, then over the examples
    avg = {pe: np.array([np.mean([values[pe][s][i] for s in (0, 1)]) for i in EXAMPLE_IDS]) for pe in values}
    rows = {row["encoding"]: row for row in read_csv(out / "summary.csv")}
    assert list(rows) == ["rope10k", "nope"]  # best rank first
    # within-example (Cousineau-Morey, K = 2): each example minus its mean over the two encodings, plus the grand mean
    example_mean = (avg["rope10k"] + avg["nope"]) / 2
    grand = example_mean.mean()
    for pe, x in avg.items():
        row = rows[pe]
        lo, hi = sps.t.interval(0.95, x.size - 1, loc=x.mean(), scale=sps.sem(x))
        assert float(row["nll"]) == pytest.approx(x.mean(), rel=1e-12)
        assert (float(row["between_lo"]), float(row["between_hi"])) == (pytest.approx(lo), pytest.approx(hi))
        normalised = x - example_mean + grand
        half = sps.t.ppf(0.975, x.size - 1) * np.sqrt(2 / 1) * normalised.std(ddof=1) / np.sqrt(x.size)
        within = (float(row["within_lo"]), float(row["within_hi"]))
        assert within == (pytest.approx(x.mean() - half), pytest.approx(x.mean() + half))
        seed_means = [np.mean(list(values[pe][s].values())) for s in (0, 1)]
        assert float(row["seed_min"]) == pytest.approx(min(seed_means))
        assert float(row["seed_max"]) == pytest.approx(max(seed_means))
        assert (row["seeds"], row["examples"]) == ("2", "6")
    assert (rows["rope10k"]["rank"], rows["nope"]["rank"]) == ("1.0", "2.0")

    # paper 000 C.2's column: the per-example paired t-test of the seed-averaged examples
    test = sps.ttest_rel(avg["nope"], avg["rope10k"])
    nope = rows["nope"]
    assert float(nope["paper_mean_diff"]) == pytest.approx(np.mean(avg["nope"] - avg["rope10k"]))
    assert float(nope["paper_p"]) == pytest.approx(test.pvalue, rel=1e-9)
    assert float(nope["paper_p_holm"]) == pytest.approx(test.pvalue, rel=1e-9)  # one baseline: Holm = raw
    assert rows["rope10k"]["paper_p"] == "" and rows["rope10k"]["verdict"] == ""
    # the verdict: paired t-test on the two per-seed mean differences (scipy), and the crossed bootstrap interval
    per_seed = {pe: [np.mean(list(values[pe][s].values())) for s in (0, 1)] for pe in values}
    seed_test = sps.ttest_rel(per_seed["nope"], per_seed["rope10k"])
    assert float(nope["seed_p"]) == pytest.approx(seed_test.pvalue, rel=1e-9)
    assert float(nope["delta"]) == pytest.approx(np.mean(per_seed["nope"]) - np.mean(per_seed["rope10k"]))
    assert float(nope["delta_lo"]) <= float(nope["delta"]) <= float(nope["delta_hi"])
    assert float(nope["p_better"]) == 0.0  # nope loses on both seeds

    markdown = summary.read_text()
    assert f"**{avg['rope10k'].mean():.4f}**" in markdown
    assert f"**{avg['nope'].mean():.4f}**" not in markdown
    nope_line = next(line for line in markdown.splitlines() if line.startswith("|") and "`nope`" in line)
    assert f"{test.pvalue:.3g}" in nope_line and f"{seed_test.pvalue:.3g}" in nope_line
    # two seeds: the seed-level test cannot separate them at 0.05 though the per-example one does
    assert (seed_test.pvalue > 0.05) == (nope["verdict"] == "inconclusive")
    assert "Δ vs rope10k" in markdown and "conditional on the trained models" in markdown
    assert section(markdown, "Missing runs").strip() == "None."
    for name in ("nll.png", "nll_by_position.png", "cd_examples.png"):
        assert_png(out / name)
    assert sorted(p.name for p in out.iterdir()) == [
        "cd_examples.png",
        "nll.png",
        "nll_by_position.png",
        "pairs.csv",
        "summary.csv",
        "summary.md",
    ]  # no temporary files left behind


def test_compare_synthetic_end_to_end(tmp_path):
    synthetic_tree(tmp_path / "runs")
    out = tmp_path / "results" / "synthetic"
    summary = compare(tmp_path / "runs", "synthetic", out)

    rows = {(r["task"], r["encoding"], r["split"]): r for r in read_csv(out / "summary.csv")}
    assert len(rows) == 2 * 2 * 3 + 2  # and one `all` row per encoding: its domain score and verdict
    # reverse_string rope10k seed 1 is unfinished: the task tables compare every encoding on the seeds all of
    # them finished on every task, seed 0 (the domain's score, the `all` row, takes each encoding's own seeds)
    seeds = {"rope10k": [0], "ape_learned": [0]}
    for (task, pe, split), row in rows.items():
        if task == "all":
            continue
        index = ("test", "test_2x", "test_8x").index(split)
        finished = seeds[pe]
        accs = [ACCURACY[task, pe, s][index] for s in finished]
        if None in accs:
            assert (row["status"], row["accuracy"], row["seeds"]) == ("n/a", "", "0")
            continue
        acc = float(np.mean(accs))
        assert row["status"] == "ok" and row["seeds"] == str(len(finished))
        assert float(row["accuracy"]) == pytest.approx(acc)
        assert float(row["chance_normalised"]) == pytest.approx((acc - CHANCE[task]) / (1 - CHANCE[task]))
        assert float(row["nll"]) == pytest.approx(1.0 - acc)
    assert float(rows["reverse_string", "rope10k", "test"]["accuracy"]) == pytest.approx(0.95)
    # the domain score: mean over the tasks of the chance-normalised accuracy, over each encoding's seeds
    norm = {t: lambda a, t=t: (a - CHANCE[t]) / (1 - CHANCE[t]) for t in CHANCE}
    ape = np.mean([np.mean([norm[t](ACCURACY[t, "ape_learned", s][0]) for t in CHANCE]) for s in (0, 1)])
    assert float(rows["all", "ape_learned", "test"]["chance_normalised"]) == pytest.approx(ape)
    # against rope10k on the one seed both finished on every task: a Δ, no test, no verdict yet
    assert rows["all", "ape_learned", "test"]["verdict"] == "open"

    markdown = summary.read_text()
    assert "seed 1 was not finished by every encoding" in markdown
    assert "N = 2 tasks (2 encodings scored on all of them); 1-2 seeds per encoding" in markdown
    test = section(markdown, "test")
    # on seed 0, the one both finished on every task: parity ape_learned 0.7 -> (0.7 - 0.5) / 0.5 = 0.4, rope10k
    # 0.9 -> 0.8, best of its task
    assert "| parity | 0.5 | 0.700 (0.400) | **0.900 (0.800)** |" in test
    # reverse_string: ape_learned 0.5 -> (0.5 - 0.1) / 0.9 = 0.444, rope10k 0.95 -> 0.944
    assert "| reverse_string | 0.1 | 0.500 (0.444) | **0.950 (0.944)** |" in test
    # ranks: rope10k first on both tasks
    assert "| mean rank |  | 2.00 ± 0.00 | **1.00 ± 0.00** |" in test
    # test_2x: parity rope10k first (0.7 > 0.5), reverse_string ape_learned first (0.3 > 0.2):
    # both encodings [1, 2] -> mean 1.5, se std([1, 2], ddof=1) / sqrt(2) = 0.5
    assert "| mean rank |  | **1.50 ± 0.50** | **1.50 ± 0.50** |" in section(markdown, "test_2x")
    test_8x = section(markdown, "test_8x")
    assert "| parity | 0.5 | n/a | **0.550 (0.100)** |" in test_8x
    assert "| mean rank |  | n/a | **1.00 ± 0.00** |" in test_8x
    assert f"n/a for `ape_learned` (parity, reverse_string): {SKIP_REASON}" in test_8x

    missing = section(markdown, "Missing runs")
    assert "synthetic/reverse_string/rope10k/seed1: unfinished (no done.json)" in missing
    assert len(missing.strip().splitlines()) == 1
    assert_png(out / "accuracy.png")


def test_compare_raises_on_an_empty_domain(tmp_path):
    with pytest.raises(FileNotFoundError, match="maestro"):
        compare(tmp_path / "runs", "maestro", tmp_path / "results" / "maestro")
    (tmp_path / "runs" / "hrg" / "nope" / "seed0").mkdir(parents=True)  # never finished
    with pytest.raises(FileNotFoundError, match="no finished run"):
        compare(tmp_path / "runs", "hrg", tmp_path / "results" / "hrg")
    assert not (tmp_path / "results").exists()


def test_a_failed_run_is_reported_with_its_error(tmp_path):
    for pe in ("rope10k", "nope"):
        (tmp_path / "jsb" / pe / "seed0").mkdir(parents=True)
    (tmp_path / "jsb" / "nope" / "seed0" / "failed.json").write_text('{"error": "NonFiniteLossError: loss is nan"}')
    assert missing_runs(load_runs(discover_runs(tmp_path, "jsb"))) == [
        "jsb/nope/seed0: failed (NonFiniteLossError: loss is nan)",
        "jsb/rope10k/seed0: unfinished (no done.json)",
    ]


# ------------------------------------------------------------------------------------------ refusal


@pytest.mark.parametrize(
    ("change", "aspect", "darope_value", "nope_value"),
    [
        (
            {"data_hashes": {"eval/test": "cd" * 32}},
            "data hashes",
            f"eval/test=jsb-{TEST_HASH}",
            f"eval/test={'cd' * 32}",
        ),
        ({"max_steps": 400}, "token budget", "800 x 4 x 16 = 51200", "400 x 4 x 16 = 25600"),
        ({"n_layer": 3}, "model", "n_layer=2", "n_layer=3"),
        ({"extra_parameters": 10}, "model", "; 5000 parameters", "; 5010 parameters"),
        ({"preset": "paper"}, "preset", "tiny", "paper"),
    ],
)
def test_mismatched_runs_are_refused_naming_them(tmp_path, change, aspect, darope_value, nope_value):
    pair(tmp_path / "runs", **change)
    with pytest.raises(IncomparableRunsError) as error:
        compare(tmp_path / "runs", "jsb", tmp_path / "results" / "jsb")
    message = str(error.value)
    assert f"jsb: the runs differ in {aspect}" in message
    lines = message.splitlines()
    assert any(darope_value in line and line.endswith(": jsb/darope/seed0") for line in lines)
    assert any(nope_value in line and line.endswith(": jsb/nope/seed0") for line in lines)
    assert sum("differ in" in line for line in lines) == 1  # only the property that differs
    assert not (tmp_path / "results" / "jsb" / "summary.md").exists()


def test_encodings_parameters_and_separate_tasks_are_not_mismatches(tmp_path):
    pair(tmp_path / "runs")  # darope holds 520 more parameters, all of them its encoding's
    check_comparable(load_runs(discover_runs(tmp_path / "runs", "jsb")))
    # two synthetic tasks have different data (own hashes) and that is fine: each task is its own group
    for task in ("parity", "needle"):
        run_dir = tmp_path / "runs" / "synthetic" / task / "nope" / "seed0"
        write_run(run_dir, domain="synthetic", pe="nope", seed=0, task=task, chance=0.5, splits={})
    check_comparable(load_runs(discover_runs(tmp_path / "runs", "synthetic")))


# ------------------------------------------------------------------------------------- small helpers


def test_split_length_from_the_record_or_the_name():
    assert split_length("test", {"window_length": 64}, 32) == 64
    assert split_length("test_4x", {"nll": 1.0}, 32) == 128
    assert split_length("test", {"nll": 1.0}, 32) is None  # scored at L (sliding windows are not extrapolation)


def test_pooled_positions_and_binned_curve(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write_csv(a, ["position", "nll_sum", "tokens"], [[1, 2.0, 2], [3, 3.0, 1]])
    write_csv(b, ["position", "nll_sum", "tokens"], [[3, 1.0, 1], [4, 8.0, 4]])
    positions, nll_sum, tokens = pooled_positions([read_numeric_csv(a), read_numeric_csv(b)])
    np.testing.assert_array_equal(positions, [1, 3, 4])
    np.testing.assert_allclose(nll_sum, [2.0, 4.0, 8.0])
    np.testing.assert_allclose(tokens, [2, 2, 4])
    x, y = binned_curve(positions, nll_sum, tokens)  # few positions: unbinned
    np.testing.assert_allclose(y, [1.0, 2.0, 2.0])
    # 2 bins over positions 1..4: [1, 2.5) holds position 1, [2.5, 4] holds 3 and 4 -> (4 + 8) / (2 + 4)
    x, y = binned_curve(positions, nll_sum, tokens, bins=2)
    np.testing.assert_allclose(y, [1.0, 2.0])
    # the plain rule: the token-weighted mean over a bin is sum(nll_sum) / sum(tokens) of its positions
    rng = np.random.default_rng(0)
    positions = np.arange(1, 1000)
    tokens = rng.integers(1, 5, positions.size).astype(float)
    nll_sum = tokens * rng.uniform(0, 3, positions.size)
    x, y = binned_curve(positions, nll_sum, tokens, bins=10)
    edges = np.linspace(1, 1000, 11)
    expected = [
        nll_sum[(positions >= lo) & (positions < hi)].sum() / tokens[(positions >= lo) & (positions < hi)].sum()
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    ]
    np.testing.assert_allclose(y, expected)


def test_a_per_example_domain_gets_a_friedman_test_and_cd_diagram_over_its_test_examples(tmp_path):
    rng = np.random.default_rng(5)
    base = rng.uniform(0.5, 2.0, 30)  # examples differ in difficulty; the encodings' offsets are what ranks see
    nll = {"rope10k": base, "hope": base + 0.01 + rng.normal(0, 0.02, 30), "nope": base + 0.5 + rng.normal(0, 0.2, 30)}
    lm_domain(tmp_path / "runs", "jsb", nll)
    out = tmp_path / "results" / "jsb"
    markdown = compare(tmp_path / "runs", "jsb", out, ref="rope10k").read_text()
    order = [row["encoding"] for row in read_csv(out / "summary.csv")]
    chi2, p = sps.friedmanchisquare(*(nll[name] for name in order))
    q = sps.studentized_range.ppf(0.95, 3, np.inf) / np.sqrt(2)
    cd = q * np.sqrt(3 * 4 / (6 * 30))  # Demsar: q_alpha sqrt(k (k + 1) / (6 n))
    assert f"Friedman test over the 30 test examples (blocks) of the 3 encodings: chi2 = {chi2:.1f}, p = {p:.3g}" in (
        markdown
    )
    assert f"Nemenyi critical difference of mean ranks at alpha 0.05: {cd:.3f}" in markdown
    assert_png(out / "cd_examples.png")


@pytest.mark.parametrize(
    ("change", "aspect", "darope_value", "nope_value"),
    [
        ({"lr": 0.001}, "trainer and optimiser settings", "optim.lr=0.002", "optim.lr=0.001"),
        ({"warmup_steps": 5}, "trainer and optimiser settings", "optim.warmup_steps=30", "optim.warmup_steps=5"),
        ({"weight_decay": 0.0}, "trainer and optimiser settings", "optim.weight_decay=0.1", "optim.weight_decay=0.0"),
        ({"eval_stride": 8}, "domain settings", "args.eval_stride=None", "args.eval_stride=8"),
    ],
)
def test_runs_trained_or_scored_with_other_settings_are_refused_naming_them(
    tmp_path, change, aspect, darope_value, nope_value
):
    """An edited default (the optimiser's lr, warmup, weight decay) or another evaluation stride changes the numbers:
    refused like the data or the model; where the runs live, the logger or the checkpoint cadence may differ."""
    pair(tmp_path / "runs")
    manifest_path = tmp_path / "runs" / "jsb" / "nope" / "seed0" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    config = manifest["config"]
    optim = {"lr": 0.002, "warmup_steps": 30, "weight_decay": 0.1}
    config["trainer"]["optim"] = {key: change.get(key, value) for key, value in optim.items()}
    config["domain"]["args"]["eval_stride"] = change.get("eval_stride")
    config["trainer"]["ckpt_every"], config["runs_root"] = 7, "elsewhere"  # cannot change a result: allowed
    manifest_path.write_text(json.dumps(manifest))
    darope_path = tmp_path / "runs" / "jsb" / "darope" / "seed0" / "manifest.json"
    darope = json.loads(darope_path.read_text())
    darope["config"]["trainer"]["optim"] = optim
    darope["config"]["domain"]["args"]["eval_stride"] = None
    darope_path.write_text(json.dumps(darope))
    with pytest.raises(IncomparableRunsError) as error:
        compare(tmp_path / "runs", "jsb", tmp_path / "results" / "jsb")
    lines = str(error.value).splitlines()
    assert sum("differ in" in line for line in lines) == 1 and any(f"differ in {aspect}" in line for line in lines)
    assert any(darope_value in line and line.endswith(": jsb/darope/seed0") for line in lines)
    assert any(nope_value in line and line.endswith(": jsb/nope/seed0") for line in lines)


def test_a_copied_run_folder_is_refused_naming_what_its_manifest_says(tmp_path):
    pair(tmp_path / "runs")
    shutil.copytree(tmp_path / "runs" / "jsb" / "nope" / "seed0", tmp_path / "runs" / "jsb" / "nope" / "seed2")
    with pytest.raises(
        IncomparableRunsError, match="the folder says jsb/nope/seed2 but its manifest records jsb/nope/seed0"
    ):
        compare(tmp_path / "runs", "jsb", tmp_path / "results" / "jsb")
    shutil.rmtree(tmp_path / "runs" / "jsb" / "nope" / "seed2")
    (tmp_path / "runs" / "jsb" / "alibi").mkdir()
    (tmp_path / "runs" / "jsb" / "alibi" / "seed0").symlink_to(tmp_path / "runs" / "jsb" / "nope" / "seed0")
    with pytest.raises(IncomparableRunsError, match="jsb/alibi/seed0 but its manifest records jsb/nope/seed0"):
        compare(tmp_path / "runs", "jsb", tmp_path / "results" / "jsb")


def test_runs_at_other_commits_are_reported_not_refused(tmp_path):
    pair(tmp_path / "runs")
    path = tmp_path / "runs" / "jsb" / "nope" / "seed0" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["git"] = {"sha": "1" * 40, "dirty": True}
    path.write_text(json.dumps(manifest))
    text = compare(tmp_path / "runs", "jsb", tmp_path / "out").read_text()
    assert "the runs were trained at 2 commits: `000000000000` (1 run); `111111111111+dirty` (1 run)" in text


def test_the_per_example_column_averages_only_the_seeds_both_finished_even_when_they_share_one(tmp_path):
    """Paper 000 C.2's column pairs examples, not seeds: a baseline with seed 0 alone is tested against the
    reference's seed 0, not against the reference averaged over seeds the baseline never ran (scipy's paired test on
    the hand-built seed-0 values)."""
    base = np.array([1.0, 1.2, 0.9, 1.1, 1.3, 1.05])
    lm_domain(tmp_path / "runs", "jsb", {"rope10k": base}, seeds=(0, 1), seed_step=0.2)
    lm_domain(tmp_path / "runs", "jsb", {"nope": base + np.array([0.1, 0.3, 0.0, 0.2, 0.1, 0.25])}, seeds=(0,))
    out = tmp_path / "results" / "jsb"
    compare(tmp_path / "runs", "jsb", out, ref="rope10k")
    nope = {row["encoding"]: row for row in read_csv(out / "summary.csv")}["nope"]
    ref0 = base - 0.2  # the reference's seed 0 (seed k scores base + 0.2 (k - 1))
    nope0 = base + np.array([0.1, 0.3, 0.0, 0.2, 0.1, 0.25]) - 0.01
    expected = sps.ttest_rel(nope0, ref0)
    assert float(nope["paper_mean_diff"]) == pytest.approx(np.mean(nope0 - ref0), rel=1e-12)
    assert float(nope["paper_p"]) == pytest.approx(expected.pvalue, rel=1e-9)
    assert float(nope["paper_mean_diff"]) != pytest.approx(np.mean(nope0 - (base - 0.1)))  # not both seeds' mean
