"""What a study is, for the first lines of its page (issue 64): its name (its folder's), where it stands (complete,
look k of N, superseded by another study), the scale its runs were trained at, and the studies it joins or
supersedes. All of it is recorded in summary.json (`study`, and each domain's `status` and `scale`) as data, which
the page renders (HELM's rule: a study is data first).

Supersession is a judgment, not a computation: a study's folder says it in a file written by hand beside its
README, SUPERSEDED_BY ({"study": "<the folder name of the study that supersedes it>", "because": "<one sentence>"}),
which every report of the study reads (make publish, make compare --out) and no report writes or removes. The study
it names then lists this one as a study it supersedes (the sibling folders' files are read for that).
"""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.analysis.results import DomainResult
from pipelines.analysis.study import Study
from pipelines.runs.settings import effective_batch

SUPERSEDED_BY = "superseded_by.json"
README = "README.md"


def read_superseded_by(folder: Path) -> dict | None:
    """The SUPERSEDED_BY record of the study in `folder` ({"study", "because"}), None without one; ValueError naming
    the file when it is not that object (a report refuses it before anything is written)."""
    path = Path(folder) / SUPERSEDED_BY
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error}); nothing written") from None
    if (
        not isinstance(record, dict)
        or set(record) != {"study", "because"}
        or not all(isinstance(record[key], str) and record[key].strip() for key in record)
        or "/" in record["study"]
    ):
        raise ValueError(
            f'{path}: must be {{"study": "<a study folder\'s name>", "because": "<why>"}}; nothing written'
        )
    return {"study": record["study"], "because": record["because"]}


def study_about(out: Path, joined: list[Path] = (), bridged: list[Path] = ()) -> dict:
    """summary.json's `study`: its name (the folder `out`), whether it has a README, the studies whose runs it joins
    (--with, less itself: a grown study is published with its own folder) and bridges (--bridge), the study that
    supersedes it (SUPERSEDED_BY) and those it supersedes (the sibling folders whose SUPERSEDED_BY names it)."""
    out = Path(out).resolve()

    def names(folders) -> list[str]:
        return list(dict.fromkeys(Path(f).resolve().name for f in folders if Path(f).resolve() != out))

    supersedes = []
    if out.parent.is_dir():
        for sibling in sorted(out.parent.glob(f"*/{SUPERSEDED_BY}")):
            if sibling.parent != out and (read_superseded_by(sibling.parent) or {}).get("study") == out.name:
                supersedes.append(sibling.parent.name)
    return {
        "name": out.name,
        "readme": (out / README).is_file(),
        "joins": names(joined),
        "bridges": names(bridged),
        "superseded_by": read_superseded_by(out),
        "supersedes": supersedes,
    }


def domain_status(result: DomainResult) -> str:
    """Where the domain's design stands: `complete (look k of N)` when no pair of its own is left open for a look
    (decided, stopped, or at the design's cap), else `look k of N`; a joined family still open is named after it."""
    verdicts = result.verdicts
    if verdicts is None or verdicts.family is None:
        return "no paired tests"
    family = verdicts.family
    design = family.design
    if not design.sequential:
        return "complete (a fixed sample: no looks)"
    count = len(design.looks)
    if not family.looks:
        return f"look 0 of {count}: the first look is not reached"
    own = f"look {len(family.looks)} of {count}"
    text = own if family.looks[-1].calls_for else f"complete ({own})"
    joined = verdicts.joined
    if joined is not None and joined.looks and joined.looks[-1].calls_for:
        text += f"; its joined encodings at look {len(joined.looks)} of {count}"
    return text


def _span(values: set) -> list:
    """[value] when the runs agree, else [least, most]."""
    ordered = sorted(values)
    return ordered[:1] if len(ordered) == 1 else [ordered[0], ordered[-1]]


def domain_scale(study: Study, domain: str) -> dict:
    """The scale the domain's trained runs (a bridged study's too, by its name) were trained at, from their manifests:
    parameters (the reference's, and the range over the encodings), layers, width, context, training steps, the
    effective batch and the tokens seen in training (steps x effective batch x context). Each a list: [value] where
    the runs agree, [least, most] where they do not. Empty without a finished trained run."""
    runs = [run for run in study.runs if run.domain == domain and run.finished and not run.derived]
    if not runs:
        return {}
    result = next((r for r in study.results if r.domain == domain), None)
    ref = result.ref if result else None

    def of(run) -> dict:
        config = run.manifest["config"]
        model, trainer = config["model"], config["trainer"]
        steps = int(run.manifest.get("steps") or trainer["max_steps"])
        batch = effective_batch(trainer)
        return {
            "layers": model["n_layer"],
            "d_model": model["d_model"],
            "context": model["context"],
            "steps": steps,
            "effective_batch": batch,
            "training_tokens": steps * batch * model["context"],
            "parameters": run.manifest.get("n_params"),
        }

    each = [of(run) for run in runs]
    scale = {key: _span({e[key] for e in each if e[key] is not None}) for key in each[0]}
    scale["reference_parameters"] = next(
        (e["parameters"] for e, run in zip(each, runs, strict=True) if run.encoding == ref), None
    )
    return scale
