"""A study's figures are facts of the study (SPEC 3): null encodings joined to a designed study (one on one seed,
one on the first look's seeds, one on every seed) change no figure of summary.json about the study's own encodings:
their verdicts and looks, every pair among them and its Holm p, the variance components, the extrapolation tests,
paper 000's per-example column, the within-example intervals and the runs the study's own family calls for. Only
what compares every encoding with every other by definition may move: the ranks and what is computed from them
(RELATIVE), the answer sentence and the totals that count the joined runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pipelines.analysis.design import Design
from pipelines.analysis.study import analyse_study
from pipelines.report.files import jsonable
from pipelines.report.study import extrapolation_rows, study_records
from pipelines.report.study_json import study_json
from tests.run_fixtures import CONTEXT, write_csv, write_positions, write_run

EXAMPLES = np.array([0.2, 1.4, 0.6, 2.5, 1.0, 0.8, 1.7, 0.4])
# the study's own: the reference and six baselines, two of them worse, one better, at a per-seed SD of about 0.01
OWN = {"rope10k": 0.0, "nope": 0.03, "alibi": 0.01, "darope": -0.02, "hope": 0.0, "pope": 0.002, "cope": 0.0}
JOINED = {"fire": 1, "kerple": 2, "xpos": 10}  # null newcomers and the seeds each holds
# fields that compare an encoding with every other encoding, joined ones included, by definition
RELATIVE = ("rank", "rank_lo", "rank_hi", "p_rank_1")


def write_runs(root, encodings: dict[str, float], seeds: range, rng) -> None:
    """A jsb run per (encoding, seed): each test example's NLL moved by the encoding's Δ, a shift of its own on this
    seed and one every encoding shares on it; test_2x scored past the training context the same way."""
    shared = {seed: np.random.default_rng(100 + seed).normal(0, 0.01) for seed in range(10)}
    for name, delta in encodings.items():
        for seed in seeds:
            own = rng.normal(0, 0.007)
            nll = EXAMPLES + delta + own + shared[seed] + rng.normal(0, 0.002, EXAMPLES.size)
            past = 1.5 + delta + own + shared[seed] + rng.normal(0, 0.003, 2 * CONTEXT - 1)
            run = root / "jsb" / name / f"seed{seed}"
            entries = {"nll": float(nll.mean()), "accuracy": 0.5, "examples": EXAMPLES.size, "tokens": 80}
            write_run(run, domain="jsb", pe=name, seed=seed, splits={"test": entries, "test_2x": dict(entries)})
            rows = [[i, repr(float(v)), 10, 5, 0] for i, v in enumerate(nll)]
            write_csv(run / "metrics" / "test.per_example.csv", ["example", "nll", "tokens", "correct", "exact"], rows)
            write_positions(run, "test", np.arange(1, CONTEXT), nll.mean())
            write_positions(run, "test_2x", np.arange(1, 2 * CONTEXT), past)


def summary(root) -> dict:
    """summary.json's object for the jsb study under `root`, as make compare writes it."""
    study = analyse_study(root, ["jsb"], None)
    return jsonable(study_json(study, study_records(study), extrapolation_rows(study)))


def own_part(data: dict) -> dict:
    """Every figure of summary.json about the study's own encodings (the reference and its design's baselines)."""
    domain = data["domains"]["jsb"]
    encodings = {
        name: {key: value for key, value in record.items() if key not in RELATIVE}
        for name, record in domain["encodings"].items()
        if name in OWN
    }
    return {
        "encodings": encodings,
        "pairs": [pair for pair in domain["pairs"] if pair["a"] in OWN and pair["b"] in OWN],
        "looks": domain["looks"],
        "design": domain["verdict_design"],
        "variance": domain["variance_components"],
        "seeds": domain["seeds"]["used"],
        "next_runs": [run for run in domain["next_runs"] if run.split("/")[0] in OWN],
        "extrapolation": [row for row in data["extrapolation"] if row["encoding"].split("+")[0] in OWN],
        "cost": {name: hours for name, hours in data["cost"]["all"]["hours_per_encoding"].items() if name in OWN},
    }


@pytest.fixture(scope="module")
def joined_and_alone(tmp_path_factory):
    """The study alone, and with the null encodings joined (their runs beside the study's)."""
    root = tmp_path_factory.mktemp("study")
    rng = np.random.default_rng(65)
    write_runs(root, OWN, range(10), rng)
    members = tuple(name for name in OWN if name != "rope10k")
    design = Design.grow([0, 1, 2], 10, ref="rope10k", ref_rule="default", encodings=members)
    (root / "jsb" / "settle.json").write_text(json.dumps({"design": design.to_json(), "looks": []}))
    alone = summary(root)
    for name, seeds in JOINED.items():
        write_runs(root, {name: 0.0}, range(seeds), rng)
    return alone, summary(root)


def test_joined_encodings_change_no_figure_of_the_studys_own(joined_and_alone):
    alone, joined = joined_and_alone
    assert set(joined["domains"]["jsb"]["encodings"]) == set(OWN) | set(JOINED)
    before, after = own_part(alone), own_part(joined)
    for part in before:
        assert after[part] == before[part], part
    # what the study holds that a join could reach: a moderated look, an every-pair family, tests past L
    looks = alone["domains"]["jsb"]["looks"]
    assert any(pair["variance"].startswith("moderated") for look in looks for pair in look["pairs"].values())
    assert len(before["pairs"]) == math.comb(len(OWN), 2) and before["extrapolation"]


def test_the_joined_encodings_are_families_of_their_own_and_a_pair_without_a_test_is_in_none(joined_and_alone):
    _, joined = joined_and_alone
    domain = joined["domains"]["jsb"]
    records = domain["encodings"]
    # one seed: no test, no verdict yet; below the first look: no verdict yet; at every seed: the joined family's
    assert records["fire"]["verdict"] == records["kerple"]["verdict"] == "open"
    assert domain["joined_looks"] and "xpos" in domain["joined_looks"][0]["pairs"]
    pairs = [pair for pair in domain["pairs"] if not ({pair["a"], pair["b"]} <= set(OWN))]
    untested = [pair for pair in pairs if pair["p"] is None]
    assert untested and all(pair["p_holm"] is None and pair["verdict"] == "open" for pair in untested)
    # the joined pairs' Holm p: over those of them with a test alone
    tested = [pair for pair in pairs if pair["p"] is not None]
    p = np.array([pair["p"] for pair in tested])
    order = np.argsort(p)
    expected = np.minimum(1, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    assert [pair["p_holm"] for pair in np.array(tested)[order]] == pytest.approx(expected, rel=1e-12)
    past = [row for row in joined["extrapolation"] if row["encoding"] == "fire"]
    assert past and all(row["past_verdict"] == "open" and row["past_p_holm"] is None for row in past)
