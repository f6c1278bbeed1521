"""`make throughput`: training and evaluation speed, peak memory and FLOP utilisation of every encoding.

    python -m pipelines.throughput [--domains synthetic jsb ...] [--preset tiny|paper] [--roster full]
        [--dtype fp32 bf16] [--compile off|on|both] [--device auto|cpu|cuda] [--contexts 256 ... 8192]

Everything is measured in one process, on the same batch of random tokens:
- preset rows: each domain's model preset at its training context and batch size, every encoding of the
  roster: training tokens/s (forward + backward + clipping + AdamW step, as DecoderLM trains), evaluation
  tokens/s, memory (pipelines.benchmarks.step), model FLOPs per token (`models.flops`, each encoding's own
  share included) and the achieved FLOP/s as a fraction of the matmul peak measured at the start of the run;
- context rows: the synthetic domain's model (--sweep-domain) at contexts 256 ... 8192 with one sequence per
  step, so the growth of memory with the context shows each encoding's attention: linear for the fused kernels
  (and CoPE's tiled kernel), quadratic where a T x T matrix is kept (ALiBi's bias). A point is skipped when its
  predicted memory or step time is over the limits, so a long sweep stops where the machine does;
- data rows: the preparation throughput of each stored domain (pipelines.benchmarks.data), from the mirror
  folder given by --data-source or $POSBENCH_MIRROR;
- loader rows: batches/s and tokens/s of each domain's training input at the preset, torch's DataLoader against
  torchdata.nodes on threads and processes, at --loader-workers workers (pipelines.benchmarks.loader), beside the
  training tokens/s of the preset's reference encoding measured here.
Within a group (a domain preset, or one context of the sweep) every encoding's model is built and warmed up,
then all are timed in --rounds interleaved rounds of --reps steps: the figure is the median of those steps, and
"spread" half their interquartile range over the median. Every figure also appears as a ratio to the
reference encoding (rope10k) of the same group (with --clock cpu, tokens per CPU second of the process: on a machine
shared with niced work, one thread, a ratio the others' load moves little; a quiet machine's wall seconds are the
figure to publish). A ratio holds for the CPU kind it was measured on, so every table
is printed under the CPU's model, vector extensions and torch's kernel width (pipelines.benchmarks.machine), which
throughput.csv's rows and throughput.json also record. Writes results/throughput.csv, throughput_data.csv,
throughput_loader.csv, throughput.png and throughput.json (settings, device, CPU, threads, matmul peak, git sha,
package versions).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from domains.stored import StoredDataModule
from pipelines.benchmarks import model
from pipelines.benchmarks.data import measure_preparation
from pipelines.benchmarks.data_report import print_loader_table, print_table, write_loader_rows, write_rows
from pipelines.benchmarks.loader import measure_loaders
from pipelines.benchmarks.machine import cpu_figures
from pipelines.benchmarks.model_report import (
    context_table,
    machine_line,
    peak_line,
    preset_table,
    progress_line,
    write_outputs,
)
from pipelines.benchmarks.step import CLOCKS, matmul_peak
from pipelines.experiment.config import config_options, datamodule_class, domain_names, encoding_name
from pipelines.host_memory import keep_freed_memory

CONTEXTS = (256, 512, 1024, 2048, 4096, 8192)


def main(argv: list[str] | None = None) -> int:
    settings = parse_args(argv)
    if settings.malloc == "keep":  # as every run trains (pipelines.host_memory); "default" measures without it
        keep_freed_memory()
    encodings = model.measured_encodings(settings)
    machine = machine_line(settings)
    print(machine, flush=True)
    for dtype in settings.dtype:
        settings.peak_flops[dtype] = matmul_peak(settings.device, dtype, clock=CLOCKS[settings.clock])
        print(peak_line(dtype, settings.device, settings.peak_flops[dtype]), flush=True)
    rows = model.run(settings, encodings, on_row=lambda row: print(progress_line(row), flush=True))
    asked = settings.data_domains if settings.data_domains is not None else settings.domains
    # a domain generated on the fly has no preparation to time
    data_domains = [domain for domain in asked if issubclass(datamodule_class(domain), StoredDataModule)]
    source = settings.data_source or os.environ.get("POSBENCH_MIRROR")
    data_rows = measure_preparation(data_domains, source) if data_domains and source else []
    training = {
        row["domain"]: row["train_tokens_per_s"]
        for row in rows
        if row["kind"] == "preset" and row["encoding"] == settings.ref and row.get("train_tokens_per_s")
    }
    loader_domains = settings.domains if settings.loader_domains is None else settings.loader_domains
    loader_rows = measure_loaders(
        loader_domains,
        settings.preset,
        Path(source) if source else None,
        workers=settings.loader_workers,
        batches=settings.loader_batches,
        train_tokens_per_s=training,
    )
    written = write_outputs(rows, settings, settings.out)
    if data_rows:
        written.append(settings.out / "throughput_data.csv")
        write_rows(data_rows, written[-1])
    if loader_rows:
        written.append(settings.out / "throughput_loader.csv")
        write_loader_rows(loader_rows, written[-1])
    print()
    print(preset_table(rows, settings.peak_flops, machine))
    sweep = context_table(rows, machine)
    if sweep:
        print("\n" + sweep)
    if data_rows:
        print("\n" + machine)
        print_table(data_rows)
    elif data_domains:
        print("\ndata preparation not measured: give --data-source (a mirror folder) or set POSBENCH_MIRROR")
    if loader_rows:
        print("\n" + machine)
        print_loader_table(loader_rows)
    print(f"\nwrote {', '.join(str(path) for path in written)}")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domains", nargs="+", default=domain_names(), choices=config_options("domain"))
    parser.add_argument("--preset", default="tiny", choices=config_options("preset"))
    parser.add_argument("--roster", default="full", choices=config_options("roster"))
    parser.add_argument(
        "--encodings",
        nargs="+",
        type=encoding_name,
        default=None,
        help="a subset of the roster (the reference is kept)",
    )
    parser.add_argument("--ref", default="rope10k", help="the encoding every ratio is taken against")
    parser.add_argument("--batch-size", type=int, default=None, help="sequences per step (default: the preset's)")
    parser.add_argument("--dtype", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    parser.add_argument("--compile", default="off", choices=["off", "on", "both"], help="torch.compile the model")
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:1, ...")
    parser.add_argument("--contexts", nargs="*", type=int, default=list(CONTEXTS), help="context sweep; none: skip")
    parser.add_argument(
        "--sweep-domain", default=None, help="the context sweep's model (default: synthetic, else the first domain)"
    )
    parser.add_argument("--sweep-batch", type=int, default=1, help="sequences per step in the context sweep")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps after building each model")
    parser.add_argument("--reps", type=int, default=3, help="timed steps per encoding and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the encodings, interleaved")
    parser.add_argument("--clock", default="wall", choices=list(CLOCKS),
                        help="wall: seconds as they pass; cpu: this process's CPU seconds (CPU only: a ratio that "
                        "niced work sharing the cores does not move, beside a sweep)")  # fmt: skip
    parser.add_argument("--malloc", default="keep", choices=["keep", "default"],
                        help="keep: freed memory stays with the allocator, as runs train (pipelines.host_memory); "
                        "default: glibc's own settings, what runs trained with before")  # fmt: skip
    parser.add_argument("--memory-limit-gb", type=float, default=None, help="skip sweep points predicted above it")
    parser.add_argument("--max-step-seconds", type=float, default=20.0, help="skip sweep points predicted slower")
    parser.add_argument("--data-source", type=Path, default=None, help="mirror folder (default: $POSBENCH_MIRROR)")
    parser.add_argument("--data-domains", nargs="*", default=None, help="domains whose preparation is timed")
    parser.add_argument("--loader-domains", nargs="*", default=None, help="domains whose training loader is timed")
    parser.add_argument("--loader-workers", nargs="+", type=int, default=[0, 1, 2], help="loader workers to time")
    parser.add_argument("--loader-batches", type=int, default=20, help="timed batches per loader configuration")
    parser.add_argument("--out", type=Path, default=Path("results"))
    settings = parser.parse_args(argv)
    for option, least in (
        ("rounds", 1),
        ("reps", 1),
        ("warmup", 0),
        ("batch_size", 1),
        ("sweep_batch", 1),
        ("loader_batches", 1),
    ):
        value = getattr(settings, option)
        if value is not None and value < least:
            parser.error(f"--{option.replace('_', '-')} must be >= {least}, got {value}")
    if any(count < 0 for count in settings.loader_workers):
        parser.error(f"--loader-workers must all be >= 0, got {settings.loader_workers}")
    if any(context < 2 for context in settings.contexts):
        parser.error(f"--contexts must all be >= 2, got {settings.contexts}")
    for option in ("memory_limit_gb", "max_step_seconds"):
        if getattr(settings, option) is not None and getattr(settings, option) <= 0:
            parser.error(f"--{option.replace('_', '-')} must be > 0, got {getattr(settings, option)}")
    if settings.device == "auto":
        settings.device = "cuda" if torch.cuda.is_available() else "cpu"
    settings.device = torch.device(settings.device)
    if settings.clock == "cpu" and settings.device.type != "cpu":
        parser.error("--clock cpu times the CPU's work only: use it with --device cpu")
    if settings.device.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32, as training on a GPU uses it
    settings.compiled = {"off": [False], "on": [True], "both": [False, True]}[settings.compile]
    if settings.memory_limit_gb is None:
        settings.memory_limit_gb = model.default_memory_limit_gb(settings.device)
    if settings.sweep_domain is None:  # synthetic, as when the default domains began with it
        settings.sweep_domain = "synthetic" if "synthetic" in settings.domains else settings.domains[0]
    settings.peak_flops = {}
    settings.cpu = cpu_figures()
    return settings


if __name__ == "__main__":
    raise SystemExit(main())
