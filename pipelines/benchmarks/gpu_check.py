"""The GPU check: what a first session on a CUDA GPU must learn, measured in one run (`make gpu-check`).

- Paper presets: every encoding of a roster at each domain's preset model and per-device batch, a few bf16 training
  steps (forward, backward, clipping, AdamW, as DecoderLM trains) and an evaluation step on the device: the step
  times, the peak memory (the allocator's own count on a GPU) and whether the loss stayed finite. A model that does
  not fit is a row saying so, not a crash.
- CoPE's tiles: its attention, forward and backward, at a preset's size for several workspace budgets
  (`pe_options: {tile_bytes: ...}`), so the GPU default can be chosen by measurement.
- The model benchmark's ratios to rope10k and the fraction of the measured bf16 matmul peak that rope10k reaches
  come from `pipelines.benchmarks.model` (the same code as `make throughput`).
Rows are plain dicts; `write_report` renders them into report.md and report.json.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from domains.atomic import write_json, write_text
from models.encodings import build_encoding
from models.training import synchronize
from pipelines.benchmarks.model import domain_cases, out_of_memory
from pipelines.benchmarks.step import MIB, StepBench, time_calls
from pipelines.report.markdown import markdown_table

Row = dict[str, Any]


def preset_steps(domain: str, preset: str, encodings: list[str], device: torch.device, steps: int) -> list[Row]:
    """A row per encoding: `steps` timed bf16 training steps and evaluation steps of the domain's preset model."""
    rows = []
    for case in domain_cases(domain, preset, encodings, batch=None):
        row = {"domain": domain, "preset": preset, "encoding": case.encoding, "batch": case.batch}
        row["context"] = case.model["context"]
        try:
            bench = StepBench(case.model, case.optim, case.batch, device, "bf16", compiled=False, warmup=1)
            bench.time(steps)
            bench.unpark()
            loss = float(bench.forward().detach())
            bench.park()
        except (RuntimeError, torch.OutOfMemoryError) as error:
            if not out_of_memory(error):
                raise
            rows.append({**row, "status": "out of memory"})
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        figures = bench.figures()
        peak = None if figures.memory is None else (figures.memory.step + figures.held_bytes) / MIB
        rows.append(
            {
                **row,
                "status": "ok" if math.isfinite(loss) else f"loss {loss}",
                "train_step_s": figures.train.median,
                "eval_step_s": figures.evaluation.median,
                "train_tokens_per_s": case.batch * case.model["context"] / figures.train.median,
                "peak_mib": peak,
                "params": figures.n_params,
                "loss": loss,
            }
        )
        del bench
    return rows


def cope_tiles(domain: str, preset: str, device: torch.device, budgets_mib: list[int], reps: int) -> list[Row]:
    """A row per workspace budget: CoPE's attention of one layer, forward and backward, at the preset's size."""
    (case,) = domain_cases(domain, preset, ["cope"], batch=None)
    model = case.model
    dims = {key: model[key] for key in ("n_layer", "n_head", "d_model", "context")}
    head_dim, T = model["d_model"] // model["n_head"], model["context"]
    generator = torch.Generator().manual_seed(0)
    shape = (case.batch, model["n_head"], T, head_dim)
    q, k, v = (torch.randn(shape, generator=generator).to(device, torch.bfloat16) for _ in range(3))
    rows = []
    for budget in budgets_mib:
        cope = build_encoding("cope", {"tile_bytes": budget << 20}, **dims).to(device)
        with torch.no_grad():
            cope.table.normal_(std=0.02)
        inputs = [t.detach().requires_grad_() for t in (q, k, v)]

        def step(cope=cope, inputs=inputs):
            out = cope.attend(*inputs, cope.prepare(torch.arange(T, device=device)), layer=0, dropout_p=0.0)
            out.float().sum().backward()

        try:
            seconds = time_calls(step, device, 1 + reps)[1:]
        except (RuntimeError, torch.OutOfMemoryError) as error:
            if not out_of_memory(error):
                raise
            rows.append({"domain": domain, "tile_mib": budget, "status": "out of memory"})
            continue
        synchronize(device)
        rows.append({"domain": domain, "tile_mib": budget, "status": "ok", "seconds": min(seconds)})
    return rows


def rope_fraction_of_peak(throughput_rows: list[Row], ref: str = "rope10k") -> list[Row]:
    """The reference's achieved share of the bf16 matmul peak, per domain preset of the model benchmark."""
    return [
        {"domain": row["domain"], "preset": row["preset"], "fraction_of_peak": row["fraction_of_peak"]}
        for row in throughput_rows
        if row["kind"] == "preset" and row["encoding"] == ref and row["status"] == "ok" and row["dtype"] == "bf16"
    ]


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def write_report(out: Path, header: dict[str, Any], sections: dict[str, list[Row]]) -> Path:
    """report.json (everything) and report.md (one table per section) in `out`; returns report.md."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "report.json", json.loads(json.dumps({**header, **sections}, default=str)))
    lines = ["# GPU check", "", *[f"- {key}: {value}" for key, value in header.items()], ""]
    steps = sections["preset_steps"]
    lines += ["## Paper-preset steps (bf16)", ""]
    lines += markdown_table(
        ["domain", "encoding", "batch x context", "status", "train step s", "eval step s", "train tok/s", "peak MiB"],
        [
            [
                r["domain"],
                r["encoding"],
                f"{r['batch']} x {r['context']}",
                r["status"],
                _fmt(r.get("train_step_s"), ".3f"),
                _fmt(r.get("eval_step_s"), ".3f"),
                _fmt(r.get("train_tokens_per_s"), ",.0f"),
                _fmt(r.get("peak_mib"), ",.0f"),
            ]
            for r in steps
        ],
    )
    tiles = sections["cope_tiles"]
    lines += ["", "## CoPE attention by tile budget (one layer, forward + backward)", ""]
    lines += markdown_table(
        ["domain", "tile MiB", "status", "seconds"],
        [[r["domain"], str(r["tile_mib"]), r["status"], _fmt(r.get("seconds"), ".4f")] for r in tiles],
    )
    ratios = sections["throughput"]
    lines += ["", "## Training tokens/s over rope10k (model benchmark, bf16)", ""]
    lines += markdown_table(
        ["domain", "encoding", "status", "train tok/s", "x rope10k", "eval x rope10k", "peak MiB"],
        [
            [
                r["domain"],
                r["encoding"],
                r["status"],
                _fmt(r.get("train_tokens_per_s"), ",.0f"),
                _fmt(r.get("train_vs_ref"), ".2f"),
                _fmt(r.get("eval_vs_ref"), ".2f"),
                _fmt(r.get("peak_mib"), ",.0f"),
            ]
            for r in ratios
            if r["kind"] == "preset"
        ],
    )
    lines += ["", "## rope10k's share of the measured bf16 matmul peak", ""]
    lines += markdown_table(
        ["domain", "preset", "fraction of peak"],
        [[r["domain"], r["preset"], f"{r['fraction_of_peak']:.1%}"] for r in sections["rope_peak"]],
    )
    path = out / "report.md"
    write_text(path, "\n".join(lines) + "\n")
    return path
