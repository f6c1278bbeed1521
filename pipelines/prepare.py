"""Fetch a domain's raw files (network or $POSBENCH_MIRROR) and build its token store; `make data-<domain>`.

    python -m pipelines.prepare --domain jsb [hydra overrides, e.g. preset=cpu or domain.source=ucsc]

Preparation is idempotent: a store built from the same raw bytes with the same settings is left as it is.
Prints meta.json's split counts, the domain's summary of its preparation where it has one (MAESTRO: the
performances against its CSV, the split, tokens and chunks per split, skipped files and why, the phases' times,
peak memory) and how long the preparation took. An interrupted preparation is continued by running it again
(MAESTRO keeps every file tokenised so far in its token cache).
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
        datamodule = stored_datamodule(args.domain, args.overrides)
        meta = datamodule.prepare_data()
    except (FetchError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the store is as it was; run the same command again to continue", file=sys.stderr)
        return 130
    summary = {"domain": meta["domain"], "vocab_size": meta["vocab_size"], "splits": meta["splits"]}
    print(json.dumps(summary, indent=1))
    for line in datamodule.preparation_summary(meta):
        print(line)
    print(f"store ready in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
