"""Looking inside a run (`python -m pipelines.inspect`): attention by distance against the weights themselves, the
far-mass measure by hand, each domain's content beneath a view, the files of an inspection, and the study's
overlay of the inspected runs (`make compare`)."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch

from domains.jsb import JSBDataModule
from domains.synthetic import SyntheticDataModule
from models.gpt import GPT, GPTConfig
from pipelines.analysis.study import analyse_study
from pipelines.inspect import main
from pipelines.inspection.attention import recency_profile, wavelengths
from pipelines.inspection.content import content_track
from pipelines.inspection.recency import LayerRecency, RecencyProfile, reference_wavelength
from pipelines.inspection.run import inspect_run
from pipelines.runs.layout import INSPECT
from pipelines.runs.metrics import RunFileError
from tests.inspect_fixtures import inspection_json, tiny_run
from tests.run_fixtures import assert_png, section, study

# ------------------------------------------------------------------------------------- the numbers


def test_recency_profile_is_the_attention_weights_summed_by_distance():
    """Each distance's count, weight sum and uniform sum, by a double loop over the real tokens of each window
    (the padding after the last scored token is left out)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=13, context=8, n_layer=2, n_head=2, d_model=16, pe="alibi")).eval()
    rng = np.random.default_rng(0)
    windows = []
    for length in (12, 7):  # the second window: 7 real tokens, then padding
        tokens = np.zeros(12, dtype=np.int64)
        tokens[:length] = rng.integers(1, 13, length)
        scored = np.zeros(12, dtype=bool)
        scored[1:length] = True
        windows.append((tokens, scored))
    profile = recency_profile(model, windows, torch.device("cpu"))
    count, weight, uniform = np.zeros((2, 12)), np.zeros((2, 12)), np.zeros((2, 12))
    for tokens, scored in windows:
        n = int(scored.nonzero()[0][-1]) + 1
        for layer, w in enumerate(model.attention_weights(torch.as_tensor(tokens[:n])[None])):
            for head in range(2):
                for i in range(n):
                    assert w[0, head, i].sum().item() == pytest.approx(1.0, abs=1e-6)
                    for j in range(i + 1):
                        count[layer, i - j] += 1
                        weight[layer, i - j] += w[0, head, i, j].item()
                        uniform[layer, i - j] += 1 / (i + 1)
    for layer, sums in enumerate(profile.layers):
        assert np.array_equal(sums.count, count[layer])
        assert np.allclose(sums.weight_sum, weight[layer], atol=1e-9)
        assert np.allclose(sums.uniform_sum, uniform[layer])
        assert sums.query_sum_min == pytest.approx(1.0, abs=1e-6) and sums.query_sum_max == pytest.approx(1.0, abs=1e-6)
    assert (profile.window, profile.context) == (12, 8)


def hand_layer() -> LayerRecency:
    """One window of 4 tokens, one head, rows q0: [1], q1: [.5 .5], q2: [.2 .3 .5], q3: [.1 .2 .3 .4]."""
    weights = [[1.0], [0.5, 0.5], [0.2, 0.3, 0.5], [0.1, 0.2, 0.3, 0.4]]
    count, weight, square, uniform = np.zeros(4), np.zeros(4), np.zeros(4), np.zeros(4)
    for i, row in enumerate(weights):
        for j, a in enumerate(row):
            count[i - j] += 1
            weight[i - j] += a
            square[i - j] += a * a
            uniform[i - j] += 1 / (i + 1)
    return LayerRecency(count, weight, square, uniform, 1.0, 1.0)


def test_far_mass_averages_over_the_queries_that_have_keys_that_far():
    layer = hand_layer()
    # beyond 1.5 tokens: q2 has 0.2 at distance 2, q3 has 0.2 + 0.1; q0 and q1 have no key that far
    assert layer.far_mass(1.5) == pytest.approx((0.2 + 0.3) / 2)
    assert layer.far_mass(1.5, uniform=True) == pytest.approx((1 / 3 + 2 / 4) / 2)
    assert layer.far_mass(2.0) == pytest.approx(0.1)  # strictly beyond: distance 3 only, query q3
    assert math.isnan(layer.far_mass(3.0))  # no query has a key further than 3 back
    assert layer.mean[1] == pytest.approx((0.5 + 0.3 + 0.3) / 3)
    assert layer.std[0] == pytest.approx(np.std([1.0, 0.5, 0.5, 0.4]))


def test_a_profile_pools_seeds_by_adding_sums_and_survives_its_json():
    profile = RecencyProfile([hand_layer()], context=4, window=4, wavelength=1.5, wavelength_source="s", reference=2.0)
    again = RecencyProfile.from_json(json.loads(json.dumps(profile.as_json())))
    assert np.allclose(again.layers[0].weight_sum, profile.layers[0].weight_sum)
    assert again.layers[0].far_mass(1.5) == pytest.approx(0.25)
    pooled = profile.pooled(again)
    assert np.array_equal(pooled.layers[0].count, 2 * profile.layers[0].count)
    assert pooled.layers[0].far_mass(1.5) == pytest.approx(0.25)  # the same windows twice: the same share
    with pytest.raises(KeyError):
        RecencyProfile.from_json({"layers": [{"count": [1]}]})


def test_the_distance_is_the_fast_bands_own_or_the_base_10k_one():
    """Head dim 16, L = 32: base 10k turns bands 0 and 1 (theta 1, 10^-0.5) within L, so its longest fast
    wavelength is 2 pi sqrt(10); base 500k turns band 0 only (500k^-1/8 < 2 pi / 32): 2 pi."""
    assert reference_wavelength(16, 32) == pytest.approx(2 * math.pi * math.sqrt(10))

    def model(pe, **options):
        return GPT(GPTConfig(vocab_size=5, context=32, n_layer=1, n_head=4, d_model=64, pe=pe, pe_options=options))

    assert wavelengths(model("rope", base=500_000.0))[:2] == (
        pytest.approx(2 * math.pi),
        "the encoding's fast bands (1 of 8 turn at least once in L = 32)",
    )
    own, source, reference = wavelengths(model("alibi"))
    assert own == reference == pytest.approx(2 * math.pi * math.sqrt(10)) and "has no bands" in source
    assert wavelengths(model("darope"))[0] == pytest.approx(2 * math.pi)  # its position-driven bands


# ---------------------------------------------------------------------------------- under a window


def test_content_beneath_a_window():
    synthetic = SyntheticDataModule(task="reverse_string", context=32, batch_size=1, eval_batch_size=1, seed=0)
    text = "R:1234>4321"
    track = content_track(synthetic, "test", np.frombuffer(text.encode(), dtype=np.uint8), 5, 0)
    assert track.text == text and track.spans == [(0, 7, "prompt"), (7, 11, "answer (scored)")]
    assert track.where.startswith("test example 5")
    # JSB: a bar is 16 steps x 4 voices = 64 tokens; a window starting 8 tokens before bar 3 of its chorale
    jsb = JSBDataModule(context=256, batch_size=1, eval_batch_size=1, seed=0)
    track = content_track(jsb, "test", np.zeros(100, dtype=np.int64), 2, 120)
    assert track.marks == [(8, "bar 3"), (72, "bar 4")]


# ------------------------------------------------------------------------------------- whole runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """darope and alibi, reverse_string, a few training steps each."""
    root = tmp_path_factory.mktemp("runs")
    return root, {pe: tiny_run(root, pe) for pe in ("darope", "alibi")}


@pytest.mark.slow
def test_inspect_writes_the_numbers_and_figures_of_two_encodings(runs, capsys):
    _, folders = runs
    assert main([str(folders["darope"]), str(folders["alibi"]), "--split", "test_2x", "--examples", "3"]) == 0
    assert "beyond λ = 6.3" in capsys.readouterr().out  # darope: its one fast band at base 500k, d = 16, L = 32
    for folder in folders.values():
        data = inspection_json(folder, "test_2x")
        recency = data["recency"]
        T, L = recency["window"], recency["context"]
        assert (T, L, len(data["windows"])) == (64, 32, 3)
        for layer in recency["layers"]:
            sums = layer["query_weight_sum"]  # every query's weights sum to 1
            assert sums["min"] == pytest.approx(1.0, abs=1e-5) and sums["max"] == pytest.approx(1.0, abs=1e-5)
            assert all(0 <= d < T for d in layer["distance"]) and len(layer["distance"]) == T
            assert layer["count"][0] > 0
        assert all(0.0 <= share <= 1.0 for share in recency["far_mass_reference"]["layers"])
        for name in data["figures"]:
            assert_png(folder / INSPECT / name)
        assert sorted(path.name for path in (folder / INSPECT).iterdir()) == sorted(["test_2x.json", *data["figures"]])
    coordinates = np.array(inspection_json(folders["darope"], "test_2x")["views"]["darope_coordinates"]["coordinates"])
    assert coordinates.shape[:2] == (2, 4) and np.all((coordinates > 0) & (coordinates < 32))
    bias = inspection_json(folders["alibi"], "test_2x")["views"]["bias_curves"]
    assert bias["shared"] and np.allclose(np.array(bias["bias"])[0, 0, :5], -(2.0**-2) * np.arange(5))  # 4 heads
    # another split adds its own files and leaves these alone
    assert main([str(folders["alibi"]), "--split", "test", "--examples", "1"]) == 0
    assert (folders["alibi"] / INSPECT / "test.json").is_file() and (
        folders["alibi"] / INSPECT / "test_2x.json"
    ).is_file()


@pytest.mark.slow
def test_inspect_refuses_what_it_cannot_look_inside(runs, tmp_path, capsys):
    _, folders = runs
    assert main([str(folders["darope"]), "--split", "test_16x"]) == 1
    assert "no split 'test_16x'; the domain evaluates test, test_2x, test_8x" in capsys.readouterr().err
    yarn = tmp_path / "rope10k+yarn" / "seed0"
    yarn.mkdir(parents=True)
    (yarn / "manifest.json").write_text(json.dumps({"run": {"pe_id": "rope10k+yarn", "pe": "yarn"}}))
    with pytest.raises(ValueError, match=r"rope10k\+yarn is an evaluation of a trained run, not a model"):
        inspect_run(yarn, "test", 4, "cpu")


@pytest.mark.slow
def test_compare_overlays_the_inspected_runs_and_names_the_others(runs, tmp_path):
    source, _ = runs
    root = tmp_path / "runs"
    shutil.copytree(source, root)
    for folder in root.glob("synthetic/*/*/seed0/inspect"):
        shutil.rmtree(folder)
    darope = root / "synthetic" / "reverse_string" / "darope" / "seed0"
    assert main([str(darope), "--split", "test", "--examples", "2"]) == 0
    out = tmp_path / "results"
    summary = study(root, ["synthetic"], out).read_text()
    assert_png(out / "recency.png")
    text = section(summary, "Attention by distance")
    assert "| synthetic/reverse_string | test | 1 | `darope` | 0 | 19.9 |" in text
    assert "Finished runs without an inspection (1): `synthetic/reverse_string/alibi` (seed 0)." in text
    rows = json.loads((out / "summary.json").read_text())["attention_by_distance"]["far_mass"]
    expected = (
        RecencyProfile.from_json(inspection_json(darope, "test")["recency"])
        .layers[1]
        .far_mass(reference_wavelength(16, 32))
    )
    assert [(row["encoding"], row["seeds"]) for row in rows] == [("darope", [0])]
    assert rows[0]["far_mass_reference"] == pytest.approx(expected)
    # a damaged inspection stops the comparison, naming it; without any, the figure goes and the summary says so
    (darope / INSPECT / "test.json").write_text("{")
    with pytest.raises(RunFileError, match=r"inspect/test.json: truncated or corrupt.*encoding darope, seed 0"):
        analyse_study(root, ["synthetic"], None)
    shutil.rmtree(darope / INSPECT)
    summary = study(root, ["synthetic"], out).read_text()
    assert not (out / "recency.png").exists()
    assert "No run was inspected: `python -m pipelines.inspect RUN" in section(summary, "Attention by distance")
