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
from domains.stored import StoredDataModule
from pipelines.config import build_datamodule, compose_config, config_options


def stored_datamodule(domain: str, overrides: list[str] = ()) -> StoredDataModule:
    """The datamodule of a domain prepared from raw files, as its config (plus overrides) builds it."""
    dm = build_datamodule(compose_config([f"domain={domain}", *overrides]))
    if not isinstance(dm, StoredDataModule):
        raise ValueError(f"domain {domain!r} is generated on the fly: it has no store")
    return dm


def prepare(domain: str, overrides: list[str] = ()) -> dict:
    return stored_datamodule(domain, overrides).prepare_data()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", required=True, choices=config_options("domain"))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the domain's config")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        meta = prepare(args.domain, args.overrides)
    except (FetchError, ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary = {"domain": meta["domain"], "vocab_size": meta["vocab_size"], "splits": meta["splits"]}
    print(json.dumps(summary, indent=1))
    print(f"store ready in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
