"""The throughput pipeline: FLOP counts, the CPU memory tracker, and a tiny end-to-end run (no timing asserted)."""

import csv
import json
import math
import time
from types import SimpleNamespace

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from models.flops import forward_flops_per_token, layer_flops_per_token, training_flops_per_token
from models.gpt import GPT, GPTConfig
from pipelines import throughput
from pipelines.benchmarks import loader, machine, model_report
from pipelines.benchmarks import step as step_module
from pipelines.benchmarks.model import predicted_over_limits
from pipelines.benchmarks.step import LiveTensorMemory
from pipelines.experiment.config import roster
from tests.sample_fixtures import SAMPLES


def test_one_layer_flops_match_a_hand_count():
    cfg = GPTConfig(vocab_size=11, context=6, n_layer=2, n_head=2, d_model=8, pe="nope")
    # per token, forward, multiply-add = 2: qkv 8 -> 24, q.k and p.v over (6 + 1) / 2 = 3.5 keys at width 8,
    # output projection 8 -> 8, MLP 8 -> 32 -> 8
    assert layer_flops_per_token(cfg, 6) == {
        "qkv": 2 * 8 * 24,
        "attention": 2 * 2 * 8 * 3.5,
        "projection": 2 * 8 * 8,
        "mlp": 2 * 8 * 32 + 2 * 32 * 8,
    }
    model = GPT(cfg)
    counts = forward_flops_per_token(cfg, 6, model.encoding)
    assert counts["total"] == 2 * (384 + 112 + 128 + 1024) + 2 * 8 * 11  # two layers and the output layer
    assert training_flops_per_token(cfg, 6, model.encoding) == 3 * counts["total"]


def test_matmul_flops_agree_with_torch_flop_counter():
    """torch's FlopCounterMode counts every matmul the model runs (it does not count the fused attention
    kernel): it must equal our count without the attention term, over all B x T tokens."""
    cfg = GPTConfig(vocab_size=13, context=10, n_layer=3, n_head=4, d_model=16, mlp_ratio=3, pe="nope")
    model = GPT(cfg)
    tokens = torch.randint(0, 13, (2, 10))
    with FlopCounterMode(display=False) as counter:
        model(tokens)
    counts = forward_flops_per_token(cfg, 10, model.encoding)
    assert counter.get_total_flops() == 2 * 10 * (counts["total"] - counts["attention"])


def test_encoding_flops_are_added_to_the_total():
    cfg = GPTConfig(vocab_size=11, context=6, n_layer=2, n_head=2, d_model=8, pe="alibi")
    counts = forward_flops_per_token(cfg, 6, GPT(cfg).encoding)
    assert counts["encoding"] == 2 * 2 * 3.5  # one bias add per visible key, head and layer
    assert counts["total"] == 2 * (384 + 112 + 128 + 1024) + 2 * 8 * 11 + 14


def test_live_tensor_memory_follows_allocations_and_frees():
    kept = torch.empty(0)
    with LiveTensorMemory() as tracker:
        a = torch.zeros(1024)  # 4 KiB
        b = torch.zeros(2048)  # 8 KiB: 12 KiB live
        view = b[:100]  # a view allocates nothing
        del a  # 8 KiB live
        kept = torch.zeros(512)  # 10 KiB live
        b.add_(1.0)  # in place: nothing new
    assert tracker.peak == 12 * 1024
    assert tracker.live == 10 * 1024
    del b, view
    assert tracker.live == 2 * 1024 and kept.numel() == 512


def test_live_tensor_memory_sees_the_backward_pass():
    """The (T, T) scores of explicit attention are saved for backward and their gradient is built there."""
    q = torch.randn(1, 2, 64, 8, requires_grad=True)
    with LiveTensorMemory() as tracker:
        out = torch.softmax(q @ q.transpose(-1, -2), dim=-1) @ q
        forward_peak = tracker.peak
        out.sum().backward()
    scores = 2 * 64 * 64 * 4
    assert forward_peak >= 2 * scores  # the scores and their softmax
    assert tracker.peak > forward_peak  # backward allocates the gradients on top


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("throughput")
    argv = ["--domains", "synthetic", "--contexts", "64", "128", "--warmup", "1", "--reps", "1", "--rounds", "2"]
    argv += ["--max-step-seconds", "1e9", "--data-domains", "--out", str(out)]  # no skip on a loaded machine
    assert throughput.main(argv) == 0
    with open(out / "throughput.csv") as handle:
        return out, list(csv.DictReader(handle))


@pytest.mark.slow
def test_tiny_run_writes_one_row_per_encoding_and_context(tiny_run):
    out, rows = tiny_run
    encodings = roster("full")
    assert rows and list(rows[0]) == model_report.COLUMNS
    preset = [r for r in rows if r["kind"] == "preset"]
    sweep = [r for r in rows if r["kind"] == "context"]
    assert [r["encoding"] for r in preset] == encodings
    assert {r["context"] for r in preset} == {"32"}  # the synthetic tiny preset's context
    assert sorted((r["encoding"], int(r["context"])) for r in sweep) == sorted(
        (e, c) for e in encodings for c in (64, 128)
    )
    for row in rows:
        assert row["status"] == "ok", row
        for column in ("train_tokens_per_s", "eval_tokens_per_s", "step_mib", "train_flops_per_token"):
            assert float(row[column]) > 0, (row["encoding"], column)
        assert float(row["fraction_of_peak"]) > 0 and float(row["params"]) > 0
        if row["encoding"] == "rope10k":
            assert float(row["train_vs_ref"]) == float(row["eval_vs_ref"]) == float(row["peak_vs_ref"]) == 1.0
    assert (out / "throughput.png").stat().st_size > 0 and (out / "throughput.json").exists()


@pytest.mark.slow
def test_memory_grows_linearly_except_where_a_bias_matrix_is_built(tmp_path):
    """Memory figures are allocation counts, not timings. Doubling a long context doubles the forward + backward
    memory of a fused encoding and of CoPE (its tiled kernel keeps O(T) per head plus a fixed-size workspace),
    and nearly quadruples it where a T x T buffer is built: ALiBi's (H, T, T) bias."""
    argv = ["--domains", "synthetic", "--encodings", "nope", "cope", "alibi", "--contexts", "512", "1024"]
    argv += [
        "--warmup",
        "1",
        "--reps",
        "1",
        "--rounds",
        "1",
        "--max-step-seconds",
        "1e9",
        "--data-domains",
        "--loader-domains",  # none: this test reads memory, not the loaders' speed
        "--out",
        str(tmp_path),
    ]
    assert throughput.main(argv) == 0
    with open(tmp_path / "throughput.csv") as handle:
        rows = [row for row in csv.DictReader(handle) if row["kind"] == "context"]
    memory = {(r["encoding"], int(r["context"])): float(r["backward_peak_mib"]) for r in rows}
    assert sorted({e for e, _ in memory}) == ["alibi", "cope", "nope", "rope10k"]  # the reference joins
    growth = {e: math.log2(memory[(e, 1024)] / memory[(e, 512)]) for e in {e for e, _ in memory}}
    assert 0.9 < growth["rope10k"] <= 1.05 and 0.9 < growth["nope"] <= 1.05, growth
    assert 0.9 < growth["cope"] <= 1.1, growth
    assert growth["alibi"] > 1.5, growth


def test_a_sweep_point_is_skipped_when_predicted_over_the_limits():
    settings = SimpleNamespace(memory_limit_gb=1.0, max_step_seconds=10.0)
    history = [  # forward + backward memory grows as T^2; the step's peak is 256 MiB at 2048
        {"status": "ok", "context": 1024, "backward_peak_mib": 50.0, "step_mib": 64.0, "train_step_s": 0.3},
        {"status": "ok", "context": 2048, "backward_peak_mib": 200.0, "step_mib": 256.0, "train_step_s": 0.5},
    ]
    assert predicted_over_limits(history, 4096, settings) is None  # 1 GiB (not over 1 GiB); 2 s
    assert predicted_over_limits(history, 8192, settings) == "skipped: predicted 4.0 GiB > limit 1.0 GiB"
    slow = SimpleNamespace(memory_limit_gb=100.0, max_step_seconds=3.0)  # time: quadratic from the last point
    assert predicted_over_limits(history, 8192, slow) == "skipped: predicted step 8 s > 3 s"
    assert predicted_over_limits(history[:1], 4096, settings) is None  # 4.8 s; one point: no memory
    history.append({"status": "out of memory", "context": 4096})  # a failed point predicts nothing
    assert predicted_over_limits(history, 8192, slow) == "skipped: predicted step 8 s > 3 s"


@pytest.mark.slow
def test_the_run_times_each_domains_training_loader_on_both_paths_and_every_worker_count(tiny_run):
    out, rows = tiny_run
    training = next(
        float(r["train_tokens_per_s"]) for r in rows if r["kind"] == "preset" and r["encoding"] == "rope10k"
    )
    with open(out / "throughput_loader.csv") as handle:
        loaders = list(csv.DictReader(handle))
    assert [(r["path"], r["method"], int(r["workers"])) for r in loaders] == loader.configurations([0, 1, 2])
    assert loader.configurations([0, 2]) == [
        ("dataloader", "main", 0), ("dataloader", "process", 2), ("nodes", "main", 0),
        ("nodes", "thread", 2), ("nodes", "process", 2),
    ]  # fmt: skip
    for row in loaders:
        assert row["domain"] == "synthetic" and row["preset"] == "tiny" and not row["skipped"]
        tokens = int(row["batches"]) * int(row["batch"]) * int(row["context"])
        assert float(row["tokens_per_s"]) == pytest.approx(tokens / float(row["seconds"]))
        assert float(row["batches_per_s"]) == pytest.approx(int(row["batches"]) / float(row["seconds"]))
        assert float(row["train_tokens_per_s"]) == pytest.approx(training)
        assert float(row["loader_vs_train"]) == pytest.approx(float(row["tokens_per_s"]) / training)


@pytest.mark.slow
def test_a_stored_domain_is_prepared_from_the_mirror_and_a_missing_one_is_skipped_by_name(tmp_path):
    rows = loader.measure_loaders(["jsb"], "tiny", SAMPLES, workers=[0, 1], batches=2, warmup=1)
    assert [(r["path"], r["workers"]) for r in rows] == [("dataloader", 0), ("dataloader", 1), ("nodes", 0)] + [
        ("nodes", 1)
    ] * 2
    assert all(r["batch"] == 8 and r["context"] == 256 and r["tokens_per_s"] > 0 for r in rows)
    assert all(r["loader_vs_train"] is None for r in rows)  # no training figure given
    [skipped] = loader.measure_loaders(["jsb"], "tiny", tmp_path, workers=[0], batches=1)
    assert skipped["skipped"].startswith("FetchError") and str(tmp_path / "jsb") in skipped["skipped"]


SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480C
flags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512dq avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 \
amx_bf16 amx_tile amx_int8
"""


def test_the_cpu_is_named_by_its_model_kind_and_vector_extensions(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(SAPPHIRE_RAPIDS)
    figures = machine.cpu_figures(cpuinfo)
    assert figures["cpu"] == "Intel(R) Xeon(R) Platinum 8480C"
    assert figures["cpu_flags"] == [
        "avx",
        "avx2",
        "fma",
        "avx512f",
        "avx512_bf16",
        "avx512_vnni",
        "amx_tile",
        "amx_bf16",
    ]  # fmt: skip  (the kind, as a run's manifest records it)
    assert figures["vector_extensions"] == ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw",
                                            "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
                                            "amx_bf16", "amx_int8"]  # fmt: skip
    line = machine.cpu_line(figures)
    assert line.startswith("CPU: Intel(R) Xeon(R) Platinum 8480C (") and "avx512_bf16 avx512_fp16 amx_tile" in line
    missing = machine.cpu_figures(tmp_path / "absent")
    assert missing["vector_extensions"] is None and "vector extensions: unknown" in machine.cpu_line(missing)


def test_every_table_and_file_names_the_cpu(tmp_path, capsys):
    """A one-encoding run: the CPU line heads the run and the preset table, and throughput.csv's rows and
    throughput.json record the CPU's model, kind and vector extensions."""
    argv = ["--domains", "synthetic", "--encodings", "nope", "--contexts", "64", "--warmup", "0", "--reps", "1"]
    argv += ["--rounds", "1", "--max-step-seconds", "1e9", "--data-domains", "--loader-domains", "--out", str(tmp_path)]
    assert throughput.main(argv) == 0
    printed = capsys.readouterr().out
    figures = machine.cpu_figures()
    line = machine.cpu_line(figures)
    assert printed.startswith(line + "\n")
    assert printed.count(line) == 1 + 1 + 2  # the run's head, the preset table, the sweep's two tables
    with open(tmp_path / "throughput.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and all(row["cpu"] == (figures["cpu"] or "") for row in rows)
    assert all(row["vector_extensions"] == " ".join(figures["vector_extensions"] or []) for row in rows)
    assert all(row["cpu_capability"] == figures["cpu_capability"] for row in rows)
    assert json.loads((tmp_path / "throughput.json").read_text())["cpu"] == figures


def test_the_cpu_clock_counts_the_process_work_not_the_time_it_waits():
    """--clock cpu: a step that sleeps takes wall seconds and no CPU seconds (what a niced sweep's share of the
    cores adds to a wall figure is time this process waits, as here); refused off the CPU."""
    cpu = torch.device("cpu")
    assert step_module.time_calls(lambda: time.sleep(0.05), cpu, 1)[0] >= 0.05
    assert step_module.time_calls(lambda: time.sleep(0.05), cpu, 1, step_module.CLOCKS["cpu"])[0] < 0.02
    with pytest.raises(SystemExit):
        throughput.parse_args(["--clock", "cpu", "--device", "cuda"])
