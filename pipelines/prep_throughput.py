"""Data preparation throughput of the stored domains: pieces/s (JSB, MAESTRO), bases/s (HRG), samples/s (Sleep-EDF).

    python -m pipelines.prep_throughput --domains jsb maestro --source tests/data/mirror [--repeats 3] [--csv out.csv]

The source is a mirror folder laid out as `$POSBENCH_MIRROR/<domain>/...` (default: $POSBENCH_MIRROR); nothing
is ever downloaded. Prints the rows as a table, then why each skipped domain was skipped.

Where to find inputs: tests/data/mirror is a mirror for jsb, maestro, hrg (chrM) and sleep_edf (one all-wake
night, too few subjects to split: skipped); generated mirrors come from `python -m tests.hrg_fixtures OUT` and
`python -m tests.sleep_edf_fixtures OUT`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.benchmarks import data
from pipelines.benchmarks.data_report import print_table, write_rows
from pipelines.experiment.config import stored_domain_names


def main(argv: list[str] | None = None) -> int:
    # --help also says what each stage times (the library's docstring)
    parser = argparse.ArgumentParser(
        description=f"{__doc__}\n{data.__doc__}", formatter_class=argparse.RawDescriptionHelpFormatter
    )
    domains = stored_domain_names()
    parser.add_argument("--domains", nargs="+", default=domains, choices=domains)
    parser.add_argument("--source", type=Path, help="mirror folder (<source>/<domain>/...); default $POSBENCH_MIRROR")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per stage (median reported)")
    parser.add_argument("--workers", type=int, help="MAESTRO tokenising processes (default: every CPU available)")
    parser.add_argument("--prepare-only", action="store_true", help="time the whole preparation only, no kernels")
    parser.add_argument("--workdir", type=Path, help="where the temporary data roots go (default: system temp)")
    parser.add_argument("--csv", type=Path, help="also write the rows to this CSV file")
    args = parser.parse_args(argv)
    try:
        rows = data.measure_preparation(
            args.domains,
            args.source,
            repeats=args.repeats,
            workers=args.workers,
            kernels=not args.prepare_only,
            workdir=args.workdir,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print_table(rows)
    if args.csv:
        write_rows(rows, args.csv)
        print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
