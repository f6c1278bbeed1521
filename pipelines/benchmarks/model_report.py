"""The model benchmark's report: progress lines, the preset and context tables, the figure, and the files
throughput.csv (one line per row), throughput.png and throughput.json (settings, device, the CPU's model, kind and
vector extensions, threads, matmul peak, git sha, package versions). Every table names the machine it was measured
on (pipelines.benchmarks.machine): a ratio to the reference holds for that CPU kind only.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import torch
from matplotlib import colormaps
from matplotlib.figure import Figure

from domains.atomic import write_json
from models.flops import TRAINING_MULTIPLIER
from pipelines.benchmarks.machine import cpu_line
from pipelines.benchmarks.model import Row, memory_growth
from pipelines.host_memory import allocator_state
from pipelines.report.files import save_figure, write_csv
from pipelines.runs.manifest import git_state, package_versions

COLUMNS = [
    "kind", "domain", "preset", "encoding", "context", "batch", "dtype", "compiled", "device", "status",
    "train_tokens_per_s", "train_spread", "train_vs_ref", "first_step_s",
    "eval_tokens_per_s", "eval_spread", "eval_vs_ref",
    "activation_mib", "backward_peak_mib", "step_mib", "peak_mib", "peak_vs_ref",
    "params", "train_flops_per_token", "encoding_flops_per_token", "achieved_tflops", "fraction_of_peak",
    "cpu", "vector_extensions", "cpu_capability",
]  # fmt: skip
MACHINE_COLUMNS = ("cpu", "vector_extensions", "cpu_capability")  # the same on every row: settings.cpu's


def write_outputs(rows: list[Row], settings: argparse.Namespace, out: Path) -> list[Path]:
    """throughput.csv, throughput.png and throughput.json in `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "throughput.csv", out / "throughput.png", out / "throughput.json"]
    machine = {**settings.cpu, "vector_extensions": " ".join(settings.cpu.get("vector_extensions") or [])}
    lines = [[machine[c] if c in MACHINE_COLUMNS else row.get(c) for c in COLUMNS] for row in rows]
    write_csv(paths[0], COLUMNS, lines)
    plot(rows, paths[1])
    write_json(
        paths[2],
        {
            "settings": {
                key: str(value) if isinstance(value, (Path, torch.device)) else value
                for key, value in vars(settings).items()
                if key != "cpu"
            },
            "device": device_name(settings.device),
            "cpu": settings.cpu,
            "threads": torch.get_num_threads(),
            "allocator": allocator_state(),
            "matmul_peak_flops": settings.peak_flops,
            "git": git_state(),
            "packages": package_versions(),
        },
    )
    return paths


def peak_line(dtype: str, device: torch.device, flops: float) -> str:
    return f"matmul peak ({dtype}, {device.type}, {torch.get_num_threads()} threads): {flops / 1e9:.1f} GFLOP/s"


def progress_line(row: Row) -> str:
    where = f"{row['kind']:7s} {row['domain']:9s} {row['encoding']:12s} T={row['context']:<5d} {variant_label(row)}"
    if row["status"] != "ok":
        return f"{where}  {row['status']}"
    return (
        f"{where}  train {row['train_tokens_per_s']:10,.0f} tok/s  eval {row['eval_tokens_per_s']:10,.0f} tok/s  "
        f"forward+backward {fmt(row['backward_peak_mib'], '8.2f')} MiB"
    )


def machine_line(settings: argparse.Namespace) -> str:
    """The machine a table was measured on: the CPU (model, vector extensions, torch's kernels), and the GPU."""
    line = cpu_line(settings.cpu)
    if getattr(settings, "clock", "wall") == "cpu":
        line += "; timed in the process's CPU seconds"
    return line if settings.device.type != "cuda" else f"{line}; GPU: {device_name(settings.device)}"


def preset_table(rows: list[Row], peak_flops: dict[str, float], machine: str = "") -> str:
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        if row["kind"] == "preset":
            groups.setdefault((row["domain"], row["preset"], row["dtype"], row["compiled"]), []).append(row)
    blocks = []
    for (domain, preset, dtype, _), members in groups.items():
        first = members[0]
        lines = [
            f"{domain} {preset}: context {first['context']}, batch {first['batch']}, {variant_label(first)}, "
            f"{first['device']}; matmul peak {peak_flops[dtype] / 1e9:,.1f} GFLOP/s",
            *([machine] if machine else []),
            f"{'encoding':13s} {'train tok/s':>12s} {'spread':>7s} {'x ref':>6s} {'eval tok/s':>12s} {'x ref':>6s} "
            f"{'peak MiB':>9s} {'x ref':>6s} {'MFLOP/tok':>10s} {'pe share':>8s} {'of peak':>8s}",
        ]
        for row in members:
            if row["status"] != "ok":
                lines.append(f"{row['encoding']:13s} {row['status']}")
                continue
            share = TRAINING_MULTIPLIER * row["encoding_flops_per_token"] / row["train_flops_per_token"]
            lines.append(
                f"{row['encoding']:13s} {row['train_tokens_per_s']:12,.0f} {row['train_spread']:7.1%} "
                f"{fmt(row['train_vs_ref'], '6.2f')} {row['eval_tokens_per_s']:12,.0f} "
                f"{fmt(row['eval_vs_ref'], '6.2f')} {fmt(row['peak_mib'], '9.1f')} {fmt(row['peak_vs_ref'], '6.2f')} "
                f"{row['train_flops_per_token'] / 1e6:10.3f} {share:8.1%} {row['fraction_of_peak']:8.1%}"
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def context_table(rows: list[Row], machine: str = "") -> str:
    sweep = [row for row in rows if row["kind"] == "context"]
    if not sweep:
        return ""
    growth = memory_growth(rows)
    contexts = sorted({row["context"] for row in sweep})
    blocks = []
    for variant in sorted({(row["dtype"], row["compiled"]) for row in sweep}):
        members = [row for row in sweep if (row["dtype"], row["compiled"]) == variant]
        first = members[0]
        encodings = list(dict.fromkeys(row["encoding"] for row in members))
        cell = {(row["encoding"], row["context"]): row for row in members}
        for title, figure, spec in (
            ("train tokens/s (x ref)", "train_tokens_per_s", ",.0f"),
            ("memory MiB: peak over forward and backward", "backward_peak_mib", ",.2f"),
        ):
            header = f"{'encoding':13s}" + "".join(f"{c:>16d}" for c in contexts)
            lines = [
                f"context sweep, {first['domain']} {first['preset']} model, batch {first['batch']}, "
                f"{variant_label(first)}: {title}",
                *([machine] if machine else []),
                header + ("  T^e" if figure == "backward_peak_mib" else ""),
            ]
            for encoding in encodings:
                cells = []
                for context in contexts:
                    row = cell.get((encoding, context))
                    if row is None or row["status"] != "ok":
                        cells.append("oom" if row and row["status"] == "out of memory" else "-")
                    elif figure == "train_tokens_per_s":
                        cells.append(f"{row[figure]:{spec}} ({fmt(row['train_vs_ref'], '.2f')})")
                    else:
                        cells.append(fmt(row[figure], spec))
                exponent = growth.get((encoding, *variant))
                tail = f"  {exponent:.2f}" if figure == "backward_peak_mib" and exponent is not None else ""
                lines.append(f"{encoding:13s}" + "".join(f"{c:>16s}" for c in cells) + tail)
            blocks.append("\n".join(lines))
    blocks.append("T^e: growth of that memory between the two longest measured contexts (1: linear, 2: quadratic)")
    return "\n\n".join(blocks)


def plot(rows: list[Row], path: Path) -> None:
    """Left: training speed over the reference per domain preset. Middle and right: the context sweep."""
    ok = [row for row in rows if row["status"] == "ok"]
    first = next(((r["dtype"], r["compiled"]) for r in ok), None)
    ok = [row for row in ok if (row["dtype"], row["compiled"]) == first]
    preset = [row for row in ok if row["kind"] == "preset"]
    sweep = [row for row in ok if row["kind"] == "context"]
    encodings = list(dict.fromkeys(row["encoding"] for row in ok))
    colour = {e: colormaps["tab20"](i % 20) for i, e in enumerate(encodings)}
    fig = Figure(figsize=(17, 4.5), layout="constrained")
    bars, speed, memory = fig.subplots(1, 3)
    domains = list(dict.fromkeys(row["domain"] for row in preset))
    width = 0.8 / max(1, len(encodings))
    for i, encoding in enumerate(encodings):
        values = {r["domain"]: r["train_vs_ref"] for r in preset if r["encoding"] == encoding}
        xs = [d + (i - len(encodings) / 2) * width for d in range(len(domains))]
        bars.bar(xs, [values.get(d) or 0 for d in domains], width, color=colour[encoding], label=encoding)
    bars.axhline(1.0, color="black", linewidth=0.8)
    bars.set_xticks(range(len(domains)), domains)
    bars.set_ylabel("training tokens/s over the reference")
    bars.set_title("domain presets")
    growth = memory_growth(rows)
    for encoding in encodings:
        points = sorted((r for r in sweep if r["encoding"] == encoding), key=lambda r: r["context"])
        if not points:
            continue
        contexts = [r["context"] for r in points]
        speed.plot(contexts, [r["train_tokens_per_s"] for r in points], marker="o", color=colour[encoding])
        exponent = growth.get((encoding, *first))
        label = encoding if exponent is None else f"{encoding} (T^{exponent:.2f})"
        if points[0].get("backward_peak_mib") is not None:
            memory.plot(
                contexts, [r["backward_peak_mib"] for r in points], marker="o", color=colour[encoding], label=label
            )
    for axis, label in ((speed, "training tokens/s"), (memory, "peak over forward + backward (MiB)")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("context (tokens, batch of one sequence)")
        axis.set_ylabel(label)
    speed.set_title("context sweep: speed")
    memory.set_title("context sweep: memory")
    bars.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    if memory.get_legend_handles_labels()[0]:
        memory.legend(fontsize=7)
    save_figure(fig, path)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({os.cpu_count()} cores)"


def variant_label(row: Row) -> str:
    return f"{row['dtype']}, {'compiled' if row['compiled'] else 'eager'}"


def fmt(value: float | None, spec: str) -> str:
    """`format(value, spec)`, or "-" at the spec's width for a figure that was not measured."""
    if value is None:
        return "-".rjust(int(re.match(r"\d*", spec).group() or 0))
    return format(value, spec)
