"""Look inside trained runs: attention by distance, and what the run's encoding learned.

    python -m pipelines.inspect RUN [RUN ...] [--split test] [--examples 4] [--out DIR] [--device cpu]

For each run, on `--examples` evaluation windows of the split (evenly spaced over it): the mean attention weight
by query-key distance per layer (weights computed exactly as the model attends) and the share of attention
beyond the longest wavelength of the fast bands; and the views of its encoding (DaRoPE's coordinates along an
example with its content beneath, FoX's gates, CoPE's contextual positions, the bias curves of ALiBi, KERPLE,
FIRE and T5, LeRoPE's frequency scales, PoPE's phase biases, HD-RoPE's basis, xPos's decay). Writes
DIR/<split>.json (the numbers) and DIR/<split>.*.png, DIR = RUN/inspect/ by default; `make compare` overlays the
recency profiles of the runs that have them (pipelines.inspection for what is computed, pipelines.report.
inspection for the files).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from pipelines.inspection.run import inspect_run
from pipelines.report.inspection import write_inspection
from pipelines.runs.layout import INSPECT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="finished run folders (with model.pt)")
    parser.add_argument("--split", default="test", help="an evaluation split of the run's domain (default test)")
    parser.add_argument("--examples", type=int, default=4, help="evaluation windows to inspect (default 4)")
    parser.add_argument("--out", type=Path, help=f"output folder (default RUN/{INSPECT}/; one run only)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    if args.out is not None and len(args.runs) > 1:
        parser.error("--out takes one run; without it each run's files go to RUN/inspect/")
    failed = 0
    for run in args.runs:
        try:
            inspection = inspect_run(run, args.split, args.examples, args.device)
            paths = write_inspection(inspection, args.out or run / INSPECT)
        except (ValueError, FileNotFoundError) as error:  # a damaged run file, an empty split included
            print(f"error: {error}", file=sys.stderr)
            failed += 1
            continue
        profile = inspection.recency
        far = ", ".join(f"{share:.0%}" for share in profile.far_mass_json(profile.wavelength)["layers"])
        print(f"{run} ({inspection.encoding}, {args.split}): beyond λ = {profile.wavelength:.1f}, per layer: {far}")
        for path in paths:
            print(f"  {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
