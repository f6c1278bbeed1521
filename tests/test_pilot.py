"""What a preset costs a verdict (pipelines.analysis.pilot, python -m pipelines.pilot): paired SDs, the seeds a pair
needs (against statsmodels' power of the paired t-test), core-seconds of the verdict's part of a run, the validation
interaction by step, and the command over fabricated run folders against numbers computed here from their files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as sps
from statsmodels.stats.power import TTestPower

from pipelines.analysis.loading import FINISHED, LoadedRun
from pipelines.analysis.pilot import (
    Arm,
    arm_cost,
    cheapest,
    detectable_effect,
    interaction_by_step,
    mean_gap,
    paired_sd,
    run_core_seconds,
)
from pipelines.pilot import main
from pipelines.runs.layout import RunKey
from tests.run_fixtures import write_csv, write_positions, write_run


def loaded(encoding, seed, manifest, splits, curves=None):
    key = RunKey("maestro", None, encoding, seed)
    return LoadedRun(key, Path(key.label), FINISHED, manifest=manifest, splits=splits, training_curves=curves)


def test_paired_sd_is_over_the_seeds_both_finished():
    scores = {"rope10k": {0: 2.0, 1: 2.3, 2: 2.1, 3: 9.0}, "kerple": {0: 1.9, 1: 2.0, 2: 2.0}}
    # differences -0.1, -0.3, -0.1 on seeds 0-2 (seed 3 is the reference's alone): SD sqrt(((1/15)^2 ...)) by hand
    differences = [-0.1, -0.3, -0.1]
    mean = sum(differences) / 3
    by_hand = math.sqrt(sum((d - mean) ** 2 for d in differences) / 2)
    assert paired_sd(scores, "kerple", "rope10k") == pytest.approx(by_hand)
    assert by_hand == pytest.approx(0.11547, abs=1e-5)
    assert mean_gap(scores, "kerple", "rope10k") == pytest.approx(-0.5 / 3)
    assert math.isnan(paired_sd({"a": {0: 1.0}, "b": {0: 2.0, 1: 3.0}}, "a", "b"))  # one matched seed: no SD


def test_an_arm_needs_the_seeds_the_paired_t_test_needs_and_their_core_hours():
    rng = np.random.default_rng(0)
    ref = {s: 2.7 + rng.normal(0, 0.1) for s in range(3)}
    scores = {"rope10k": ref, **{e: {s: ref[s] - 0.05 + rng.normal(0, sd) for s in range(3)}
                                  for e, sd in (("kerple", 0.02), ("alibi", 0.05), ("nope", 0.08))}}  # fmt: skip
    arm = Arm("B", scores, run_seconds=[900.0, 1000.0, 1300.0], validation={})
    cost = arm_cost(arm, "rope10k", effect=0.02, alpha=0.0125, roster_size=24)
    median = float(np.median([paired_sd(scores, e, "rope10k") for e in ("kerple", "alibi", "nope")]))
    assert cost.median_sd == pytest.approx(median)
    # statsmodels: the smallest n whose two-sided paired t-test at alpha 0.0125 has 80% power for d = 0.02 / SD
    power = TTestPower()
    d = 0.02 / median
    n = next(n for n in range(2, 2000) if power.power(effect_size=d, nobs=n, alpha=0.0125) >= 0.8)
    assert cost.seeds == n
    assert cost.seconds_per_run == 1000.0  # the median run
    assert cost.core_hours == pytest.approx(n * 24 * 1000.0 / 3600)


@pytest.mark.parametrize("seeds", [3, 5, 8, 10])
@pytest.mark.parametrize("sd", [0.004, 0.011, 0.1])
def test_the_detectable_difference_is_statsmodels_effect_size_at_80_percent_power(sd, seeds):
    """The Δ a paired t-test at alpha 0.0125 detects with 80% power over `seeds` seeds: statsmodels' power of the
    paired t-test is 0.8 at it, and simulated paired t-tests reject at that rate there and clearly less at 0.9 Δ.
    (statsmodels' solve_power is not the check: at 3 seeds its noncentral t returns nan below d of about 5.4 and
    the solver stops at a false root, d = 5.0, whose power is 0.61.)"""
    delta = detectable_effect(sd, seeds, alpha=0.0125)
    assert TTestPower().power(effect_size=delta / sd, nobs=seeds, alpha=0.0125) == pytest.approx(0.8, abs=1e-6)
    rng = np.random.default_rng(seeds)
    for scale, low, high in ((1.0, 0.79, 0.81), (0.9, 0.0, 0.78)):
        differences = rng.normal(scale * delta, sd, size=(100_000, seeds))
        p = sps.ttest_1samp(differences, 0.0, axis=1).pvalue
        assert low < float(np.mean(p < 0.0125)) < high, (scale, float(np.mean(p < 0.0125)))
    assert math.isnan(detectable_effect(math.nan, seeds, 0.0125)) and math.isnan(detectable_effect(sd, 1, 0.0125))


def test_the_cheapest_arm_weighs_noise_against_a_runs_cost():
    """Half the paired SD needs about a quarter of the seeds: such an arm wins at three times the cost a run, and
    loses at five times."""

    def arm(name, sd, seconds):
        scores = {"ref": {0: 0.0, 1: 0.0, 2: 0.0}, "e": {0: -sd, 1: 0.0, 2: sd}}  # paired SD exactly sd
        return Arm(name, scores, [seconds], {})

    noisy = arm_cost(arm("noisy", 0.10, 400.0), "ref", 0.02, 0.0125, 24)
    quiet_3x = arm_cost(arm("quiet", 0.05, 1200.0), "ref", 0.02, 0.0125, 24)
    quiet_5x = arm_cost(arm("quiet", 0.05, 2000.0), "ref", 0.02, 0.0125, 24)
    assert noisy.median_sd == pytest.approx(0.10) and quiet_3x.median_sd == pytest.approx(0.05)
    assert 3.5 < noisy.seeds / quiet_3x.seeds < 4.5
    assert cheapest([noisy, quiet_3x]) is quiet_3x
    assert cheapest([noisy, quiet_5x]) is noisy
    unpriced = arm_cost(Arm("none", {"ref": {0: 1.0}, "e": {0: 1.0}}, [], {}), "ref", 0.02, 0.0125, 24)
    assert unpriced.seeds is None and cheapest([unpriced]) is None


def test_a_runs_core_seconds_are_its_training_and_the_1x_test_only():
    splits = {"test": {"tokens": 1000, "tokens_per_s": 100.0, "cpu_seconds": 12.0},
              "test_2x": {"tokens": 1000, "tokens_per_s": 50.0, "cpu_seconds": 25.0}}  # fmt: skip
    measured = {"train_cpu_seconds_this_process": 600.0, "train_seconds_this_process": 700.0}
    assert run_core_seconds(loaded("rope10k", 0, measured, splits)) == 612.0
    # recorded before CPU seconds: wall seconds (training, then the test split's tokens / tokens per s) x threads
    walled = {"train_seconds_this_process": 700.0, "machine": {"threads": 2}}
    assert run_core_seconds(loaded("rope10k", 0, walled, splits)) == (700.0 + 10.0) * 2
    assert run_core_seconds(loaded("rope10k", 0, {**measured, "device": "cuda:0"}, splits)) is None
    assert run_core_seconds(loaded("rope10k+yarn", 0, measured, splits)) is None  # trains nothing


def test_the_validation_interaction_is_the_median_sd_of_paired_differences_at_each_step():
    validation = {
        "ref": {0: {50: 3.0, 100: 2.8}, 1: {50: 3.2, 100: 2.9}, 2: {50: 3.1}},
        "a": {0: {50: 3.1, 100: 2.7}, 1: {50: 3.1, 100: 2.9}, 2: {50: 3.3}},  # differences 0.1, -0.1, 0.2 | -0.1, 0
        "b": {0: {50: 3.0}, 1: {50: 3.2}},  # differences 0, 0 at step 50; nothing at 100
    }
    by_step = interaction_by_step(validation, "ref")
    a50 = float(np.std([0.1, -0.1, 0.2], ddof=1))
    assert by_step[50] == pytest.approx(np.median([a50, 0.0]))
    assert by_step[100] == pytest.approx(float(np.std([-0.1, 0.0], ddof=1)))


def fabricate(root: Path, offsets: dict[str, list[float]], train_cpu: float) -> dict[str, list[float]]:
    """MAESTRO-shaped run folders of 3 seeds: encoding e's seed s scores examples [2.0, 2.5, 3.0] + offsets[e][s];
    each run logged validation at steps 50 and 100; returns encoding -> per-seed mean test NLL, from the values."""
    means = {}
    for encoding, per_seed in offsets.items():
        means[encoding] = []
        for seed, offset in enumerate(per_seed):
            run = root / "maestro" / encoding / f"seed{seed}"
            nll = np.array([2.0, 2.5, 3.0]) + offset
            entry = {"nll": float(nll.mean()), "examples": 3, "tokens": 300, "tokens_per_s": 30.0, "cpu_seconds": 9.0}
            write_run(run, domain="maestro", pe=encoding, seed=seed, splits={"test": entry})
            manifest_path = run / "manifest.json"
            manifest_path.write_text(
                manifest_path.read_text().replace(
                    '"tokens_per_s"', f'"train_cpu_seconds_this_process": {train_cpu}, "tokens_per_s"', 1
                )  # fmt: skip
            )
            write_csv(run / "metrics" / "test.per_example.csv", ["example", "nll", "tokens"],
                      [[i, repr(float(v)), 100] for i, v in enumerate(nll)])  # fmt: skip
            write_positions(run, "test", [1, 2, 3], float(nll.mean()))
            (run / "logs").mkdir()
            write_csv(run / "logs" / "metrics.csv", ["step", "train/loss", "val/loss"],
                      [[50, "", 3.0 + offset], [100, "", 2.5 + offset]])  # fmt: skip
            means[encoding].append(float(nll.mean()))
    return means


def test_the_command_prices_each_arm_from_its_run_folders(tmp_path, capsys):
    noisy = fabricate(tmp_path / "B", {"rope10k": [0.0, 0.2, 0.0], "kerple": [-0.1, -0.1, -0.1],
                                       "nope": [0.3, 0.3, 0.4]}, train_cpu=400.0)  # fmt: skip
    quiet = fabricate(tmp_path / "C", {"rope10k": [0.0, 0.01, 0.0], "kerple": [-0.1, -0.1, -0.09],
                                       "nope": [0.3, 0.31, 0.31]}, train_cpu=800.0)  # fmt: skip
    assert main(["--domain", "maestro", "--arm", f"B={tmp_path / 'B'}", "--arm", f"C={tmp_path / 'C'}",
                 "--encodings", "rope10k", "kerple", "nope", "--roster-size", "10"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    for name, means in (("B", noisy), ("C", quiet)):
        sds = [float(np.std(np.subtract(means[e], means["rope10k"]), ddof=1)) for e in ("kerple", "nope")]
        row = next(line for line in out.splitlines() if line.startswith(f"| {name} |"))
        assert row.split(" | ")[1:4] == [f"{sds[0]:.3f}", f"{sds[1]:.3f}", f"{np.median(sds):.3f}"]
        assert f"| {400 + 9 if name == 'B' else 800 + 9:,} |" in row  # training + the 1x test's CPU seconds
    assert "fewest core-hours for the roster against rope10k: arm C" in out
    sd_c = np.median([float(np.std(np.subtract(quiet[e], quiet["rope10k"]), ddof=1)) for e in ("kerple", "nope")])
    looks = ", ".join(f"{n} seeds {detectable_effect(sd_c, n, 0.0125):.3f}" for n in (3, 5, 8, 10))
    assert f"  C: {looks}" in out  # the design's looks from 3 seeds to 10
    # the validation points move with the test offsets: the interaction at each step equals the test's
    sd_b = np.median([float(np.std(np.subtract(noisy[e], noisy["rope10k"]), ddof=1)) for e in ("kerple", "nope")])
    assert f"B: 50: {sd_b:.3f}, 100: {sd_b:.3f}" in out


def test_the_command_refuses_an_arm_without_a_listed_encoding(tmp_path):
    fabricate(tmp_path / "B", {"rope10k": [0.0, 0.1, 0.0], "kerple": [0.0, 0.0, 0.0]}, train_cpu=1.0)
    with pytest.raises(SystemExit, match="arm B: no finished run of nope in maestro"):
        main(["--domain", "maestro", "--arm", f"B={tmp_path / 'B'}", "--encodings", "rope10k", "kerple", "nope"])
