"""List a roster: each encoding's mechanism, whether attention runs fused, and its extra parameters.

    python -m pipelines.roster [--roster full] [--domain synthetic] [--preset paper]

The encodings are built at the model size of the domain and preset (the same dims a run would use), so the
parameter counts are the ones a run's manifest records under "encoding".
"""

from __future__ import annotations

import argparse
import sys

from pipelines.experiment.config import compose_config, config_options, describe_roster

DETAIL_KEYS = ("base", "rotating_bands", "fast_bands", "slow_bands", "p", "block", "qk_width",
               "random_positions", "random_positions_eval", "fraction", "fourier_bands", "mixing",
               "pattern")  # fmt: skip


def format_rows(rows: list[dict]) -> str:
    """One line per encoding; a layer pattern's details end with its layers (`pattern`: '3 x rope(...), nope')."""
    id_width = max([12, *(len(row["id"]) for row in rows)])
    name_width = max([9, *(len(row["name"]) for row in rows)])
    header = (
        f"{'id':{id_width}s} {'name':{name_width}s} {'mechanism':9s} {'fused':5s} {'params':>8s} {'per layer':>10s}"
        "  details"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        details = ", ".join(f"{k}={row[k]}" for k in DETAIL_KEYS if row.get(k) is not None)
        lines.append(
            f"{row['id']:{id_width}s} {row['name']:{name_width}s} {row['mechanism']:9s} "
            f"{'yes' if row['fused_attention'] else 'no':5s} {row['parameters']:8d} {row['parameters_per_layer']:10.1f}"
            f"  {details}".rstrip()
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--roster", default="full", choices=config_options("roster"))
    parser.add_argument("--domain", default="synthetic", choices=config_options("domain"))
    parser.add_argument("--preset", default="paper", choices=config_options("preset"))
    args = parser.parse_args(argv)
    cfg = compose_config([f"domain={args.domain}", f"preset={args.preset}"])
    m = cfg.model
    print(
        f"roster {args.roster} at the {args.domain} {args.preset} model: {m.n_layer} layers, {m.n_head} heads, "
        f"d_model {m.d_model}, head dim {m.d_model // m.n_head}, context {m.context}\n"
    )
    print(format_rows(describe_roster(args.roster, args.domain, args.preset)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
