"""The study summary's section on attention by distance (pipelines.analysis.recency's panels as a table)."""

from __future__ import annotations

from collections import defaultdict

from pipelines.analysis.study import Study
from pipelines.report.markdown import markdown_table


def recency_section(study: Study) -> list[str]:
    """`## Attention by distance`: the share of attention beyond a wavelength, per inspected encoding, and the
    runs not inspected."""
    recency = study.recency
    lines = ["## Attention by distance", ""]
    if not recency.panels:
        return [
            *lines,
            "No run was inspected: `python -m pipelines.inspect RUN [--split SPLIT]` writes a run's attention by "
            "distance into RUN/inspect/, and the next comparison overlays it here.",
            "",
        ]
    rank = {encoding: i for i, encoding in enumerate(study.order)}
    rows = sorted(recency.far_mass(), key=lambda row: (row["panel"], rank.get(row["encoding"], len(rank))))
    table = [
        [
            row["group"],
            row["split"],
            str(row["layer"]),
            f"`{row['encoding']}`",
            ", ".join(map(str, row["seeds"])),
            f"{row['reference_wavelength']:.1f}",
            f"{row['far_mass_reference']:.1%}",
            f"{row['uniform_reference']:.1%}",
            f"{row['wavelength']:.1f}",
            f"{row['far_mass']:.1%}",
        ]
        for row in rows
    ]
    header = [
        "group",
        "split",
        "layer",
        "encoding",
        "seeds",
        "λ(10k)",
        "beyond λ(10k)",
        "uniform",
        "own λ",
        "beyond it",
    ]
    not_inspected = recency.not_inspected
    seeds = defaultdict(list)  # a run's folder without its seed -> the seeds not inspected
    for label in not_inspected:
        folder, seed = label.rsplit("/seed", 1)
        seeds[folder].append(seed)
    listed = "; ".join(f"`{folder}` (seed{'s' * (len(ks) > 1)} {', '.join(ks)})" for folder, ks in seeds.items())
    return [
        *lines,
        "The share of a query's attention on keys further back than λ, at the last layer, over the windows "
        "`python -m pipelines.inspect` looked at (seeds pooled; queries with keys that far only): λ(10k) is the "
        "longest wavelength of a base-10k RoPE's fast bands (theta_j >= 2 pi / L) at the same head dim, one "
        "distance for every encoding; its own λ is that of the encoding's own fast bands (λ(10k) for an encoding "
        "without bands). Uniform: attention spread evenly over the causal window. Curves: `recency.png`.",
        "",
        *markdown_table(header, table),
        "",
        f"Finished runs without an inspection ({len(not_inspected)}): {listed or 'none'}.",
        "",
    ]
