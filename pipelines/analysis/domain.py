"""One domain's result from its run folders (SPEC section 3).

A domain without tasks is compared per test example (pipelines.analysis.per_example: NLL averaged over seeds,
paired tests against the reference); a domain with tasks, per task (pipelines.analysis.per_task: accuracy, and
its chance-normalised mean over the tasks as the domain's score). The metric, its unit and direction come from
the domain's DataModule (`metric`), declared there once.

YaRN entries (`<encoding>+yarn`) equal their rope run at the training length (scale 1), so they are kept out of
every in-distribution comparison (tables, tests, ranks) and appear on the longer splits only.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.analysis.cost import runs_cost
from pipelines.analysis.design import Design
from pipelines.analysis.evidence import check_comparable, require_finished
from pipelines.analysis.loading import LoadedRun, load_domain
from pipelines.analysis.per_example import analyse_per_example
from pipelines.analysis.per_task import analyse_per_task
from pipelines.analysis.results import DomainResult
from pipelines.runs.layout import has_tasks


def analyse_domain(domain: str, runs: list[LoadedRun], ref: str | None, design: Design | None = None) -> DomainResult:
    """Check the loaded runs are comparable (IncomparableRunsError naming them otherwise) and analyse them.
    `ref` is the reference of the verdicts and paired tests (`darope` when None and it has run, else the best
    encoding; SPEC 3); `design` the group-sequential design of make settle, when the domain has one."""
    check_comparable(runs)
    analyse = analyse_per_task if has_tasks(domain) else analyse_per_example
    result = analyse(domain, runs, ref, design)
    result.cost = runs_cost(runs)
    return result


def analyse_runs(runs_root: Path, domain: str, ref: str | None = None) -> DomainResult:
    """The domain's result from the run folders under `runs_root` (and its settle.json, when make settle wrote
    one). FileNotFoundError naming the folder when the domain has no run folder, or no finished run."""
    loaded = load_domain(runs_root, domain)
    require_finished(loaded.runs, runs_root)
    return analyse_domain(domain, loaded.runs, ref, loaded.design)
