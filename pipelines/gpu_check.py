"""`make gpu-check`: one prepared run for the first session on a CUDA GPU, in under 10 minutes, one report.

    python -m pipelines.gpu_check [--preset paper] [--device auto] [--domains ...] [--roster paper] [--steps 3]
                                  [--throughput-domains jsb maestro] [--throughput-encodings ...]
                                  [--out results/gpu_check]

Writes OUT/report.md and OUT/report.json (pipelines.benchmarks.gpu_check): for every domain's preset model and
every encoding of the roster, a few bf16 training steps, evaluation steps on the device and the peak memory;
CoPE's attention timed at several tile budgets; the model benchmark's ratios to rope10k at the JSB and MAESTRO
presets (and its throughput.csv/png/json); the share of the measured bf16 matmul peak that rope10k reaches. It
runs on a CPU too, at `--preset tiny` (the tests do), so it is known to work before a GPU ever sees it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from pipelines import throughput
from pipelines.benchmarks import gpu_check, model
from pipelines.benchmarks.model_report import write_outputs
from pipelines.benchmarks.step import matmul_peak
from pipelines.experiment.config import config_options, domain_names, roster
from pipelines.runs.manifest import git_state, package_versions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="paper", choices=config_options("preset"))
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cuda, cuda:1, cpu")
    parser.add_argument("--domains", nargs="+", default=domain_names(), choices=domain_names())
    parser.add_argument("--roster", default="paper", choices=config_options("roster"))
    parser.add_argument("--steps", type=int, default=3, help="timed training and evaluation steps per model")
    parser.add_argument("--throughput-domains", nargs="*", default=["jsb", "maestro"], choices=domain_names())
    parser.add_argument(
        "--throughput-encodings", nargs="+", default=None, help="model benchmark: these of the roster (default: all)"
    )
    parser.add_argument("--tile-mib", nargs="+", type=int, default=None, help="CoPE workspace budgets to time")
    parser.add_argument("--rounds", type=int, default=2, help="model benchmark: interleaved rounds")
    parser.add_argument("--out", type=Path, default=Path("results/gpu_check"))
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1 or any(m < 1 for m in args.tile_mib or [1]):
        parser.error("--steps, --rounds and --tile-mib must be >= 1")
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else args.device)
    if device.type == "auto":
        device = torch.device("cpu")
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")
    budgets = args.tile_mib or ([16, 64, 256, 1024] if device.type == "cuda" else [2, 8, 32])
    began = time.perf_counter()

    steps = []
    for domain in args.domains:
        steps += gpu_check.preset_steps(domain, args.preset, roster(args.roster), device, args.steps)
        done = [f"{row['encoding']} {row['status']}" for row in steps if row["domain"] == domain]
        print(f"{domain}: {', '.join(done)}", flush=True)
    tile_domain = "jsb" if "jsb" in args.domains else args.domains[0]
    tiles = gpu_check.cope_tiles(tile_domain, args.preset, device, budgets, args.steps)
    print(
        f"cope tiles ({tile_domain}): "
        + ", ".join(f"{r['tile_mib']} MiB {r.get('seconds', r['status'])}" for r in tiles)
    )

    rows = []
    if args.throughput_domains:
        settings = throughput.parse_args(
            ["--domains", *args.throughput_domains, "--preset", args.preset, "--roster", args.roster,
             "--dtype", "bf16", "--device", str(device), "--contexts", "--rounds", str(args.rounds),
             "--reps", "2", "--warmup", "1", "--out", str(args.out),
             *(["--encodings", *args.throughput_encodings] if args.throughput_encodings else [])]
        )  # fmt: skip
        settings.peak_flops["bf16"] = matmul_peak(device, "bf16")
        rows = model.run(settings, model.measured_encodings(settings))
        write_outputs(rows, settings, args.out)
    report = gpu_check.write_report(
        args.out,
        {
            "device": torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else f"cpu ({torch.get_num_threads()} threads)",
            "preset": args.preset,
            "roster": args.roster,
            "torch": torch.__version__,
            "git": git_state()["sha"],
            "packages": package_versions(),
            "seconds": round(time.perf_counter() - began, 1),
        },
        {
            "preset_steps": steps,
            "cope_tiles": tiles,
            "throughput": rows,
            "rope_peak": gpu_check.rope_fraction_of_peak(rows),
        },
    )
    print(f"\n{report.read_text()}\nwrote {report} and {report.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
