"""`make throughput`: training and evaluation speed, peak memory and FLOP utilisation of every encoding.

    python -m pipelines.throughput [--domains synthetic jsb ...] [--preset tiny|paper] [--roster full]
        [--dtype fp32 bf16] [--compile off|on|both] [--device auto|cpu|cuda] [--contexts 256 ... 8192]

Everything is measured in one process, on the same batch of random tokens:
- preset rows: each domain's model preset at its training context and batch size, every encoding of the
  roster: training tokens/s (forward + backward + clipping + AdamW step, as DecoderLM trains), evaluation
  tokens/s, memory (pipelines.measure), model FLOPs per token (`models.flops`, each encoding's own share
  included) and the achieved FLOP/s as a fraction of the matmul peak measured at the start of the run;
- context rows: the first domain's model at contexts 256 ... 8192 with one sequence per step, so the growth
  of memory with the context shows each encoding's attention: linear for the fused kernels (and CoPE's tiled
  kernel), quadratic where a T x T matrix is kept (ALiBi's bias). A point is skipped when its predicted memory
  or step time is over the limits, so a long sweep stops where the machine does;
- data rows: the preparation throughput of each stored domain (pipelines.prep_throughput), from the mirror
  folder given by --data-source or $POSBENCH_MIRROR.
Within a group (a domain preset, or one context of the sweep) every encoding's model is built and warmed up,
then all are timed in --rounds interleaved rounds of --reps steps: the figure is the median of those steps, and
"spread" half their interquartile range over the median. Every figure also appears as a ratio to the
reference encoding (rope10k) of the same group. Writes results/throughput.csv, throughput_data.csv,
throughput.png and throughput.json (settings, device, threads, matmul peak, git sha, package versions).
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from matplotlib import colormaps
from matplotlib.figure import Figure
from omegaconf import OmegaConf

from domains.atomic import write_json
from models.flops import TRAINING_MULTIPLIER, training_flops_per_token
from models.gpt import GPT
from pipelines import prep_throughput
from pipelines.config import build_datamodule, compose_config, config_options, model_config, roster
from pipelines.manifest import git_state, package_versions
from pipelines.measure import MIB, StepBench, StepFigures, matmul_peak
from pipelines.runs import save_figure, write_csv

DOMAINS = ("synthetic", "jsb", "maestro", "hrg", "sleep_edf")
CONTEXTS = (256, 512, 1024, 2048, 4096, 8192)
COLUMNS = [
    "kind", "domain", "preset", "encoding", "context", "batch", "dtype", "compiled", "device", "status",
    "train_tokens_per_s", "train_spread", "train_vs_ref", "first_step_s",
    "eval_tokens_per_s", "eval_spread", "eval_vs_ref",
    "activation_mib", "backward_peak_mib", "step_mib", "peak_mib", "peak_vs_ref",
    "params", "train_flops_per_token", "encoding_flops_per_token", "achieved_tflops", "fraction_of_peak",
]  # fmt: skip


@dataclass
class Case:
    """One measurement: an encoding at one model size, context and batch."""

    kind: str  # "preset" | "context"
    domain: str
    preset: str
    encoding: str  # the roster entry (pe config id)
    model: dict[str, Any]  # GPTConfig fields, vocabulary and encoding included
    optim: dict[str, Any]
    batch: int


def domain_cases(domain: str, preset: str, encodings: list[str], batch: int | None) -> list[Case]:
    cases = []
    for entry in encodings:
        cfg = compose_config([f"domain={domain}", f"preset={preset}", f"pe={entry}"])
        optim = {**OmegaConf.to_container(cfg.trainer.optim, resolve=True), "max_steps": cfg.trainer.max_steps}
        model = model_config(cfg, build_datamodule(cfg).vocab_size)
        cases.append(Case("preset", domain, preset, entry, model, optim, batch or cfg.trainer.batch_size))
    return cases


def with_context(case: Case, context: int, batch: int) -> Case:
    return Case(
        "context", case.domain, case.preset, case.encoding, {**case.model, "context": context}, case.optim, batch
    )


def out_of_memory(err: Exception) -> bool:
    return isinstance(err, torch.OutOfMemoryError) or (
        isinstance(err, RuntimeError) and ("out of memory" in str(err) or "can't allocate" in str(err))
    )


def measure_group(cases: list[Case], settings: argparse.Namespace, dtype: str, compiled: bool) -> list[dict]:
    """Rows of cases measured together: each model is built and warmed up once, then all are timed in
    `settings.rounds` interleaved rounds of `settings.reps` steps, so that the machine's drift (clock, other
    processes, the allocator's state) does not favour whichever encoding happens to run first."""
    device = settings.device
    rows = [{**row_header(case, dtype, compiled, device), "status": "ok"} for case in cases]
    benches: dict[int, StepBench] = {}

    def failed(i: int, err: Exception) -> None:
        if not out_of_memory(err):
            raise err
        rows[i]["status"] = "out of memory"
        benches.pop(i, None)
        if device.type == "cuda":
            torch.cuda.empty_cache()

    for i, case in enumerate(cases):
        try:
            benches[i] = StepBench(case.model, case.optim, case.batch, device, dtype, compiled, settings.warmup)
        except (RuntimeError, torch.OutOfMemoryError) as err:
            failed(i, err)
    for _ in range(settings.rounds):
        for i in list(benches):
            try:
                benches[i].time(settings.reps)
            except (RuntimeError, torch.OutOfMemoryError) as err:
                failed(i, err)
    for i, bench in benches.items():
        rows[i].update(figure_columns(cases[i], bench.figures(), bench.module.model, settings.peak_flops[dtype]))
    return rows


def figure_columns(case: Case, figures: StepFigures, model: GPT, peak_flops: float) -> dict:
    context = case.model["context"]
    tokens = case.batch * context
    train_flops = training_flops_per_token(model.cfg, context, model.encoding)
    train_tps = tokens / figures.train.median
    achieved = train_tps * train_flops
    memory = figures.memory
    return {
        "train_tokens_per_s": train_tps,
        "train_spread": figures.train.spread,
        "first_step_s": figures.train.first_seconds,
        "eval_tokens_per_s": tokens / figures.evaluation.median,
        "eval_spread": figures.evaluation.spread,
        "activation_mib": None if memory is None else memory.saved / MIB,
        "backward_peak_mib": None if memory is None else memory.through_backward / MIB,
        "step_mib": None if memory is None else memory.step / MIB,
        "peak_mib": None if memory is None else (memory.step + figures.held_bytes) / MIB,
        "params": figures.n_params,
        "train_flops_per_token": train_flops,
        "encoding_flops_per_token": model.encoding.flops_per_token(context),
        "achieved_tflops": achieved / 1e12,
        "fraction_of_peak": achieved / peak_flops,
        "train_step_s": figures.train.median,
    }


def predicted_over_limits(history: list[dict], context: int, settings: argparse.Namespace) -> str | None:
    """Why the next context point should be skipped, or None. Memory is extrapolated with the growth measured
    between the two longest points (allocations are exact counts); time, which is noisy, as quadratic in the
    context from the longest point alone: an upper bound, since a step is at most quadratic in T."""
    done = [row for row in history if row["status"] == "ok"]
    if not done:
        return None
    b = done[-1]
    if len(done) >= 2 and done[-2]["backward_peak_mib"] and b["backward_peak_mib"]:
        a = done[-2]
        growth = math.log(context / b["context"]) / math.log(b["context"] / a["context"])
        memory = b["step_mib"] * (b["backward_peak_mib"] / a["backward_peak_mib"]) ** growth
        if memory > settings.memory_limit_gb * 1024:
            return f"skipped: predicted {memory / 1024:.1f} GiB > limit {settings.memory_limit_gb:.1f} GiB"
    seconds = b["train_step_s"] * (context / b["context"]) ** 2
    if seconds > settings.max_step_seconds:
        return f"skipped: predicted step {seconds:.0f} s > {settings.max_step_seconds:.0f} s"
    return None


def add_ratios(rows: list[dict], ref: str) -> None:
    """Each figure over the reference encoding's, measured with the same kind, domain, context and settings."""
    key = ("kind", "domain", "preset", "context", "batch", "dtype", "compiled", "device")
    refs = {tuple(r[k] for k in key): r for r in rows if r["encoding"] == ref and r["status"] == "ok"}
    for row in rows:
        reference = refs.get(tuple(row[k] for k in key))
        for column, figure in (
            ("train_vs_ref", "train_tokens_per_s"),
            ("eval_vs_ref", "eval_tokens_per_s"),
            ("peak_vs_ref", "peak_mib"),
        ):
            value = row.get(figure)
            base = None if reference is None else reference.get(figure)
            row[column] = value / base if value is not None and base else None


def memory_growth(rows: list[dict]) -> dict[tuple, float]:
    """Exponent e of the peak memory over forward and backward ~ T^e between the two longest measured contexts,
    per encoding and setting."""
    series: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["kind"] == "context" and row["status"] == "ok" and row.get("backward_peak_mib"):
            series.setdefault((row["encoding"], row["dtype"], row["compiled"]), []).append(row)
    growth = {}
    for key, points in series.items():
        if len(points) >= 2:
            a, b = sorted(points, key=lambda r: r["context"])[-2:]
            growth[key] = math.log(b["backward_peak_mib"] / a["backward_peak_mib"]) / math.log(
                b["context"] / a["context"]
            )
    return growth


def default_memory_limit_gb(device: torch.device) -> float:
    """Half of what is free now on the CPU (other processes, the OS), 90% of the GPU."""
    if device.type == "cuda":
        return 0.9 * torch.cuda.mem_get_info(device)[1] / 2**30
    try:
        with open("/proc/meminfo") as handle:
            info = dict(line.split(":", 1) for line in handle)
        return 0.5 * int(info["MemAvailable"].split()[0]) / 2**20
    except (OSError, KeyError, ValueError):
        return 4.0


def run(settings: argparse.Namespace) -> list[dict]:
    """Measure every case; returns the rows (also printed as they come)."""
    encodings = roster(settings.roster)
    if settings.encodings:
        unknown = sorted(set(settings.encodings) - set(encodings))
        if unknown:
            raise ValueError(f"--encodings {unknown} are not in roster {settings.roster!r}: {encodings}")
        encodings = [e for e in encodings if e in settings.encodings or e == settings.ref]
    if settings.ref not in encodings:
        raise ValueError(f"reference {settings.ref!r} is not in roster {settings.roster!r}: {encodings}")
    rows: list[dict] = []
    variants = [(dtype, compiled) for dtype in settings.dtype for compiled in settings.compiled]
    for dtype in settings.dtype:
        settings.peak_flops[dtype] = matmul_peak(settings.device, dtype)
        print(f"matmul peak ({dtype}, {settings.device.type}, {torch.get_num_threads()} threads): "
              f"{settings.peak_flops[dtype] / 1e9:.1f} GFLOP/s", flush=True)  # fmt: skip
    for domain in settings.domains:
        cases = domain_cases(domain, settings.preset, encodings, settings.batch_size)
        for dtype, compiled in variants:
            rows += report(measure_group(cases, settings, dtype, compiled))
    if settings.contexts:
        sweep_domain = settings.sweep_domain or settings.domains[0]
        cases = domain_cases(sweep_domain, settings.preset, encodings, settings.sweep_batch)
        for dtype, compiled in variants:
            history: dict[str, list[dict]] = {case.encoding: [] for case in cases}
            for context in settings.contexts:
                points, skipped = [], []
                for case in cases:
                    point, past = with_context(case, context, settings.sweep_batch), history[case.encoding]
                    if past and past[-1]["status"] != "ok":
                        reason = f"skipped: context {past[-1]['context']} was not measured"
                    else:
                        reason = predicted_over_limits(past, context, settings)
                    if reason:
                        skipped.append({**row_header(point, dtype, compiled, settings.device), "status": reason})
                    else:
                        points.append(point)
                for row in report(measure_group(points, settings, dtype, compiled) + skipped):
                    history[row["encoding"]].append(row)
                    rows.append(row)
    add_ratios(rows, settings.ref)
    return rows


def report(rows: list[dict]) -> list[dict]:
    for row in rows:
        print(progress_line(row), flush=True)
    return rows


def row_header(case: Case, dtype: str, compiled: bool, device: torch.device) -> dict:
    return {
        "kind": case.kind,
        "domain": case.domain,
        "preset": case.preset,
        "encoding": case.encoding,
        "context": case.model["context"],
        "batch": case.batch,
        "dtype": dtype,
        "compiled": compiled,
        "device": device.type,
    }


# ---- report ---------------------------------------------------------------------------------------------------
def variant_label(row: dict) -> str:
    return f"{row['dtype']}, {'compiled' if row['compiled'] else 'eager'}"


def fmt(value: float | None, spec: str) -> str:
    """`format(value, spec)`, or "-" at the spec's width for a figure that was not measured."""
    if value is None:
        return "-".rjust(int(re.match(r"\d*", spec).group() or 0))
    return format(value, spec)


def progress_line(row: dict) -> str:
    where = f"{row['kind']:7s} {row['domain']:9s} {row['encoding']:9s} T={row['context']:<5d} {variant_label(row)}"
    if row["status"] != "ok":
        return f"{where}  {row['status']}"
    return (
        f"{where}  train {row['train_tokens_per_s']:10,.0f} tok/s  eval {row['eval_tokens_per_s']:10,.0f} tok/s  "
        f"forward+backward {fmt(row['backward_peak_mib'], '8.2f')} MiB"
    )


def preset_table(rows: list[dict], peak_flops: dict[str, float]) -> str:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["kind"] == "preset":
            groups.setdefault((row["domain"], row["preset"], row["dtype"], row["compiled"]), []).append(row)
    blocks = []
    for (domain, preset, dtype, _), members in groups.items():
        first = members[0]
        lines = [
            f"{domain} {preset}: context {first['context']}, batch {first['batch']}, {variant_label(first)}, "
            f"{first['device']}; matmul peak {peak_flops[dtype] / 1e9:,.1f} GFLOP/s",
            f"{'encoding':10s} {'train tok/s':>12s} {'spread':>7s} {'x ref':>6s} {'eval tok/s':>12s} {'x ref':>6s} "
            f"{'peak MiB':>9s} {'x ref':>6s} {'MFLOP/tok':>10s} {'pe share':>8s} {'of peak':>8s}",
        ]
        for row in members:
            if row["status"] != "ok":
                lines.append(f"{row['encoding']:10s} {row['status']}")
                continue
            share = TRAINING_MULTIPLIER * row["encoding_flops_per_token"] / row["train_flops_per_token"]
            lines.append(
                f"{row['encoding']:10s} {row['train_tokens_per_s']:12,.0f} {row['train_spread']:7.1%} "
                f"{fmt(row['train_vs_ref'], '6.2f')} {row['eval_tokens_per_s']:12,.0f} "
                f"{fmt(row['eval_vs_ref'], '6.2f')} {fmt(row['peak_mib'], '9.1f')} {fmt(row['peak_vs_ref'], '6.2f')} "
                f"{row['train_flops_per_token'] / 1e6:10.3f} {share:8.1%} {row['fraction_of_peak']:8.1%}"
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def context_table(rows: list[dict]) -> str:
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
            header = f"{'encoding':10s}" + "".join(f"{c:>16d}" for c in contexts)
            lines = [
                f"context sweep, {first['domain']} {first['preset']} model, batch {first['batch']}, "
                f"{variant_label(first)}: {title}",
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
                lines.append(f"{encoding:10s}" + "".join(f"{c:>16s}" for c in cells) + tail)
            blocks.append("\n".join(lines))
    blocks.append("T^e: growth of that memory between the two longest measured contexts (1: linear, 2: quadratic)")
    return "\n\n".join(blocks)


def plot(rows: list[dict], path: Path) -> None:
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


def write_outputs(rows: list[dict], data_rows: list[dict], settings: argparse.Namespace, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "throughput.csv", COLUMNS, [[row.get(c) for c in COLUMNS] for row in rows])
    if data_rows:
        prep_throughput.write_rows(data_rows, out / "throughput_data.csv")
    plot(rows, out / "throughput.png")
    write_json(
        out / "throughput.json",
        {
            "settings": {
                key: str(value) if isinstance(value, (Path, torch.device)) else value
                for key, value in vars(settings).items()
            },
            "device": device_name(settings.device),
            "threads": torch.get_num_threads(),
            "matmul_peak_flops": settings.peak_flops,
            "git": git_state(),
            "packages": package_versions(),
        },
    )


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({os.cpu_count()} cores)"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", nargs="+", default=list(DOMAINS), choices=config_options("domain"))
    parser.add_argument("--preset", default="tiny", choices=config_options("preset"))
    parser.add_argument("--roster", default="full", choices=config_options("roster"))
    parser.add_argument("--encodings", nargs="+", default=None, help="a subset of the roster (the reference is kept)")
    parser.add_argument("--ref", default="rope10k", help="the encoding every ratio is taken against")
    parser.add_argument("--batch-size", type=int, default=None, help="sequences per step (default: the preset's)")
    parser.add_argument("--dtype", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    parser.add_argument("--compile", default="off", choices=["off", "on", "both"], help="torch.compile the model")
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:1, ...")
    parser.add_argument("--contexts", nargs="*", type=int, default=list(CONTEXTS), help="context sweep; none: skip")
    parser.add_argument("--sweep-domain", default=None, help="model of the context sweep (default: first domain)")
    parser.add_argument("--sweep-batch", type=int, default=1, help="sequences per step in the context sweep")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps after building each model")
    parser.add_argument("--reps", type=int, default=3, help="timed steps per encoding and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the encodings, interleaved")
    parser.add_argument("--memory-limit-gb", type=float, default=None, help="skip sweep points predicted above it")
    parser.add_argument("--max-step-seconds", type=float, default=20.0, help="skip sweep points predicted slower")
    parser.add_argument("--data-source", type=Path, default=None, help="mirror folder (default: $POSBENCH_MIRROR)")
    parser.add_argument("--data-domains", nargs="*", default=None, help="domains whose preparation is timed")
    parser.add_argument("--out", type=Path, default=Path("results"))
    settings = parser.parse_args(argv)
    if settings.device == "auto":
        settings.device = "cuda" if torch.cuda.is_available() else "cpu"
    settings.device = torch.device(settings.device)
    settings.compiled = {"off": [False], "on": [True], "both": [False, True]}[settings.compile]
    if settings.memory_limit_gb is None:
        settings.memory_limit_gb = default_memory_limit_gb(settings.device)
    settings.peak_flops = {}
    return settings


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    rows = run(settings)
    stored = settings.data_domains if settings.data_domains is not None else settings.domains
    data_domains = [domain for domain in stored if domain != "synthetic"]  # generated on the fly: nothing to time
    source = settings.data_source or os.environ.get("POSBENCH_MIRROR")
    data_rows = prep_throughput.measure_preparation(data_domains, source) if data_domains and source else []
    write_outputs(rows, data_rows, settings, settings.out)
    print()
    print(preset_table(rows, settings.peak_flops))
    sweep = context_table(rows)
    if sweep:
        print("\n" + sweep)
    if data_rows:
        print()
        prep_throughput.print_table(data_rows)
    elif data_domains:
        print("\ndata preparation not measured: give --data-source (a mirror folder) or set POSBENCH_MIRROR")
    written = ["throughput.csv", "throughput.png", "throughput.json"] + (["throughput_data.csv"] if data_rows else [])
    print(f"\nwrote {', '.join(str(settings.out / name) for name in written)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
