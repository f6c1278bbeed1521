"""Fetch a domain's raw files (network or $POSBENCH_MIRROR) and build its token store; `make data-<domain>`.

    python -m pipelines.prepare --domain jsb [hydra overrides, e.g. domain.args.chromosomes=[chr21,chr22]]

Preparation is idempotent: a store built from the same raw bytes with the same settings is left as it is.
Prints meta.json's split counts and how long the preparation took.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from domains.fetch import FetchError
from pipelines.experiment.config import config_options, stored_datamodule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", required=True, choices=config_options("domain"))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the domain's config")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        meta = stored_datamodule(args.domain, args.overrides).prepare_data()
    except (FetchError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary = {"domain": meta["domain"], "vocab_size": meta["vocab_size"], "splits": meta["splits"]}
    print(json.dumps(summary, indent=1))
    print(f"store ready in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
