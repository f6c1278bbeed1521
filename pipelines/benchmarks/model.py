"""The model benchmark: every encoding of a roster at each domain's model preset and over a context sweep.

A case is one encoding at one model size, context and batch. Cases are measured in groups (a domain preset, or
one context of the sweep): every case's model is built and warmed up (`step.StepBench`), then all are timed in
interleaved rounds, so that the machine's drift does not favour whichever encoding runs first. A row is a plain
dict per case and (dtype, compiled) variant: the case, its status ("ok", "out of memory", "skipped: <why>") and
its figures, with ratios to the reference encoding of the same group added once every row is measured. The sweep
stops an encoding where its next point is predicted over the memory or step-time limit.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import OmegaConf

from models.flops import training_flops_per_token
from models.gpt import GPT
from pipelines.benchmarks.step import CLOCKS, MIB, StepBench, StepFigures
from pipelines.experiment.config import build_datamodule, compose_config, model_config, roster

Row = dict[str, Any]


@dataclass
class Case:
    """One measurement: an encoding at one model size, context and batch."""

    kind: str  # "preset" | "context"
    domain: str
    preset: str
    encoding: str  # the encoding's config id (configs/pe/<id>.yaml)
    model: dict[str, Any]  # GPTConfig fields, vocabulary and encoding included
    optim: dict[str, Any]
    batch: int


def measured_encodings(settings: argparse.Namespace) -> list[str]:
    """The roster's encodings, or the subset `settings.encodings` with the reference `settings.ref` kept."""
    encodings = roster(settings.roster)
    if settings.encodings:
        unknown = sorted(set(settings.encodings) - set(encodings))
        if unknown:
            raise ValueError(f"--encodings {unknown} are not in roster {settings.roster!r}: {encodings}")
        encodings = [e for e in encodings if e in settings.encodings or e == settings.ref]
    if settings.ref not in encodings:
        raise ValueError(f"reference {settings.ref!r} is not in roster {settings.roster!r}: {encodings}")
    return encodings


def run(settings: argparse.Namespace, encodings: list[str], on_row: Callable[[Row], None] | None = None) -> list[Row]:
    """The rows of every domain preset, then of the context sweep; each is passed to `on_row` once its group is
    measured. `settings` holds the command line's choices (`pipelines.throughput`) and `peak_flops`, the matmul
    peak of each dtype (`step.matmul_peak`) that the achieved FLOP/s are a fraction of."""
    rows: list[Row] = []
    variants = [(dtype, compiled) for dtype in settings.dtype for compiled in settings.compiled]
    for domain in settings.domains:
        cases = domain_cases(domain, settings.preset, encodings, settings.batch_size)
        for dtype, compiled in variants:
            rows += passed_on(measure_group(cases, settings, dtype, compiled), on_row)
    if settings.contexts:
        cases = domain_cases(settings.sweep_domain, settings.preset, encodings, settings.sweep_batch)
        for dtype, compiled in variants:
            rows += context_sweep(cases, settings, dtype, compiled, on_row)
    add_ratios(rows, settings.ref)
    return rows


def domain_cases(domain: str, preset: str, encodings: list[str], batch: int | None) -> list[Case]:
    cases = []
    for encoding in encodings:
        cfg = compose_config([f"domain={domain}", f"preset={preset}", f"pe={encoding}"])
        optim = {**OmegaConf.to_container(cfg.trainer.optim, resolve=True), "max_steps": cfg.trainer.max_steps}
        model = model_config(cfg, build_datamodule(cfg).vocab_size)
        cases.append(Case("preset", domain, preset, encoding, model, optim, batch or cfg.trainer.batch_size))
    return cases


def context_sweep(
    cases: list[Case],
    settings: argparse.Namespace,
    dtype: str,
    compiled: bool,
    on_row: Callable[[Row], None] | None,
) -> list[Row]:
    """Each case's model at every context of `settings.contexts`, one group per context. An encoding's point is
    skipped when its previous point was not measured or when it is predicted over the limits."""
    history: dict[str, list[Row]] = {case.encoding: [] for case in cases}
    rows = []
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
        for row in passed_on(measure_group(points, settings, dtype, compiled) + skipped, on_row):
            history[row["encoding"]].append(row)
            rows.append(row)
    return rows


def with_context(case: Case, context: int, batch: int) -> Case:
    return Case(
        "context", case.domain, case.preset, case.encoding, {**case.model, "context": context}, case.optim, batch
    )


def passed_on(rows: list[Row], on_row: Callable[[Row], None] | None) -> list[Row]:
    """`rows`, each given to `on_row` first (the caller's progress report)."""
    if on_row:
        for row in rows:
            on_row(row)
    return rows


def measure_group(cases: list[Case], settings: argparse.Namespace, dtype: str, compiled: bool) -> list[Row]:
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
            benches[i] = StepBench(
                case.model, case.optim, case.batch, device, dtype, compiled, settings.warmup, CLOCKS[settings.clock]
            )
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


def row_header(case: Case, dtype: str, compiled: bool, device: torch.device) -> Row:
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


def out_of_memory(err: Exception) -> bool:
    return isinstance(err, torch.OutOfMemoryError) or (
        isinstance(err, RuntimeError) and ("out of memory" in str(err) or "can't allocate" in str(err))
    )


def figure_columns(case: Case, figures: StepFigures, model: GPT, peak_flops: float) -> Row:
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


def predicted_over_limits(history: list[Row], context: int, settings: argparse.Namespace) -> str | None:
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


def add_ratios(rows: list[Row], ref: str) -> None:
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


def memory_growth(rows: list[Row]) -> dict[tuple, float]:
    """Exponent e of the peak memory over forward and backward ~ T^e between the two longest measured contexts,
    per encoding and setting."""
    series: dict[tuple, list[Row]] = {}
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
