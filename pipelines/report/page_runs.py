"""The study page's one-run view (pipelines.report.html): every finished run's manifest, training curves and
per-example test NLL set against the reference's run of the same seed, at a detail per run the page budget allows.
"""

from __future__ import annotations

import math

from pipelines.analysis.loading import LoadedRun
from pipelines.analysis.study import Study

# The one-run view's detail per run: at most this many points per training curve (every k-th logged step) and this
# many test examples. A page over PAGE_BUDGET is drawn again at each coarser level in turn (RUN_DETAIL_LEVELS).
TRAINING_POINTS = 400
RUN_EXAMPLES = 300
RUN_DETAIL_LEVELS = ((TRAINING_POINTS, RUN_EXAMPLES), (200, 150), (100, 75), (50, 40), (25, 20), (12, 10), (6, 5))
LOSS_DIGITS = 4  # significant digits of a training curve's loss on the page: a chart cannot show more


def _key_of(run: LoadedRun) -> tuple:
    return run.domain, run.key.task, run.encoding, run.seed


def _per_example_nll(run: LoadedRun) -> dict[int, float]:
    """The run's test NLL per example, as loaded (none for a YaRN entry)."""
    table = run.per_example
    if table is None:
        return {}
    return {int(e): float(v) for e, v in zip(table["example"], table["nll"], strict=True)}


def _shown_examples(nll: dict[int, float], most: int = RUN_EXAMPLES) -> list[list]:
    """[[example, NLL], ...] in example order: at most `most` of them (every k-th, the same ones in every run of
    the test set), each to 6 significant digits: what the scatter draws and its tooltip prints (4 decimals); the
    exact values are in the run's files."""
    ids = sorted(nll)
    stride = max(1, math.ceil(len(ids) / most))
    return [[example, float(f"{nll[example]:.6g}")] for example in ids[::stride]]


def run_records(study: Study, detail: tuple[int, int] = RUN_DETAIL_LEVELS[0]) -> list[dict]:
    """Every finished run of the study: its manifest, training curves (when its folder has a training log), its
    per-example test NLL, and the reference's run of the same seed (and task) that the page sets it against.
    `detail`: at most this many points per training curve and test examples per run."""
    points, most = detail
    finished = [run for run in study.runs if run.finished]
    by_key = {_key_of(run): run for run in finished}
    refs = {result.domain: result.ref for result in study.results}
    records = []
    for run in sorted(finished, key=lambda r: (r.domain, r.key.task or "", r.encoding, r.seed)):
        ref = refs.get(run.domain)
        nll = _per_example_nll(run)
        record = {
            "label": run.label,
            "domain": run.domain,
            "encoding": run.encoding,
            "seed": run.seed,
            "manifest": run.manifest,
            "train": _training_rows(run, points),
            "examples": _shown_examples(nll, most),
            "total_examples": len(nll),
            "ref": None,
            "note": "",
        }
        ref_run = by_key.get((run.domain, run.key.task, ref, run.seed)) if ref else None
        if ref is None:
            record["note"] = "the domain has no reference"
        elif run.encoding == ref:
            record["note"] = "this run is the reference's"
        elif ref_run is None:
            record["note"] = f"the reference {ref} has no finished seed {run.seed} here"
        elif not nll:
            record["note"] = "this run has no per-example test scores"
        else:
            record["ref"] = ref_run.label
        records.append(record)
    return records


def _training_rows(run: LoadedRun, most: int = TRAINING_POINTS) -> list[list] | None:
    """[[curve, step, loss], ...], at most `most` per curve (every k-th point, the last kept), the loss to LOSS_DIGITS
    significant digits (a float32 loss's full digits gzip 4 times larger, and no chart shows them); None when the
    run folder holds no training log."""
    curves = run.training_curves
    if curves is None:
        return None
    rows = []
    for name, points in curves.items():
        stride = max(1, math.ceil(len(points) / most))
        kept = points[::stride] + ([points[-1]] if (len(points) - 1) % stride else [])
        rows += [[name, step, float(f"{loss:.{LOSS_DIGITS}g}")] for step, loss in kept]
    return rows
