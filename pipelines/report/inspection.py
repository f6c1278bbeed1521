"""A run's inspection on disk: <run>/inspect/ (or another folder) holds, per split inspected, <split>.json (the
numbers behind the figures: pipelines.inspection's Inspection) and its figures (pipelines.report.
inspection_figures), written all or nothing (pipelines.report.files.publish). Inspecting a split again replaces
that split's files and leaves the other splits' alone."""

from __future__ import annotations

import json
from pathlib import Path

from domains.atomic import write_text
from pipelines.inspection.run import Inspection
from pipelines.report.files import jsonable, publish
from pipelines.report.inspection_figures import plot_recency, plot_view


def inspection_files(split: str) -> tuple[str, str]:
    """(the JSON, the recency figure) of one split's inspection: the names every inspected run has."""
    return f"{split}.json", f"{split}.recency.png"


def write_inspection(inspection: Inspection, out: Path) -> list[Path]:
    """Write the split's JSON and figures into `out`, all or nothing; return their paths."""
    out = Path(out)
    earlier = [path.name for path in out.glob(f"{inspection.split}.*")]
    publish(out, lambda folder: render_inspection(inspection, folder), owned=earlier)
    return sorted(out.glob(f"{inspection.split}.*"))


def render_inspection(inspection: Inspection, folder: Path) -> list[str]:
    """Write the split's figures and JSON into `folder`; return their names."""
    split, context = inspection.split, inspection.recency.context
    data, recency_figure = inspection_files(split)
    windows = len(inspection.windows)
    title = (
        f"{inspection.encoding}, {inspection.run}: mean attention weight by query-key distance on {split} "
        f"({windows} window{'s' * (windows != 1)} x every head, T = {inspection.recency.window})"
    )
    plot_recency(inspection.recency, title, folder / recency_figure)
    figures = [recency_figure]
    for view in inspection.views:
        name = f"{split}.{view.kind}.png"
        plot_view(view, context, folder / name)
        figures.append(name)
    # one line: per-distance and per-token arrays would take a line per number indented
    write_text(folder / data, json.dumps(jsonable({**inspection.as_json(), "figures": figures})) + "\n")
    return [data, *figures]
