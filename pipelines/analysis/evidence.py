"""Which runs a comparison may use (SPEC section 3).

1. Completeness: every expected (group, encoding, seed) of a domain without a finished result is listed, never
   dropped: no run folder, failed (with its error) or unfinished. Expected: the combinations of the groups,
   encodings and seeds seen in its run folders; under a design of `make settle`, the combinations of its first
   look's seeds, and every run folder the design's later looks started.
2. Seeds: each encoding is scored over the seeds it finished, and each pair is compared on the seeds both finished
   (seed k shares its data order across encodings: "within a domain and seed, every encoding sees the same
   data"). SeedSelection states the seeds every encoding finished, of those with a run folder.
3. Comparability: the finished runs of one group (the domain, or one of its tasks) must agree on their data hashes,
   token budget (max_steps x batch_size x context), model (config.model and the parameters outside the encoding)
   preset, trainer and optimiser settings and domain settings (pipelines.runs.settings: all but what cannot change a
   result); otherwise IncomparableRunsError names the groups of runs ("every encoding sees the same data in the
   same order with the same token budget"). A folder whose manifest names another run (copied, linked) is refused
   when it is loaded (pipelines.analysis.loading).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.analysis.loading import IncomparableRunsError, LoadedRun
from pipelines.runs.layout import MANIFEST, RunKey, is_derived
from pipelines.runs.settings import effective_batch, fixed_properties

if TYPE_CHECKING:
    from pipelines.analysis.design import Design
    from pipelines.analysis.matrix import Evidence


def finished_by(runs: Iterable[LoadedRun], *keys: str) -> dict[tuple, list[LoadedRun]]:
    """Finished runs grouped by the given LoadedRun attributes, seeds ascending."""
    grouped = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.seed):
        if run.finished:
            grouped[tuple(getattr(run, key) for key in keys)].append(run)
    return dict(grouped)


def missing_runs(runs: list[LoadedRun], design: Design | None = None) -> list[str]:
    """One line per expected run without a finished result (see the module docstring)."""
    present = {(r.key.task, r.encoding, r.seed): r for r in runs}
    domain = runs[0].domain
    seeds = sorted({r.seed for r in runs}) if design is None else list(design.look_seeds(0))
    expected = {
        (task, encoding, seed)
        for task in {r.key.task for r in runs}
        for encoding in {r.encoding for r in runs}
        for seed in seeds
        if design is None or not is_derived(encoding)
    } | set(present)
    lines = []
    for task, encoding, seed in sorted(expected, key=lambda k: (k[0] or "", k[1], k[2])):
        run = present.get((task, encoding, seed))
        if run is None:
            lines.append(f"{RunKey(domain, task, encoding, seed).label}: no run folder")
        elif run.failed:
            lines.append(f"{run.label}: failed ({run.failure})")
        elif not run.finished:
            lines.append(f"{run.label}: unfinished (no done.json)")
    return lines


@dataclass(frozen=True)
class SeedSelection:
    """The seeds every compared encoding finished (`used`) of those with a run folder in the domain (`expected`),
    and the seeds each encoding finished (`per_encoding`): each encoding is scored over its own."""

    used: list[int]
    expected: list[int]
    per_encoding: dict[str, list[int]] = field(default_factory=dict)

    @property
    def left_out(self) -> list[int]:
        return [seed for seed in self.expected if seed not in self.used]

    @property
    def label(self) -> str:
        """`3 seeds`, or `2/3 seeds` when some were not finished by every encoding."""
        used, expected = len(self.used), len(self.expected)
        return f"{used} seed{'s' * (used != 1)}" if used == expected else f"{used}/{expected} seeds"

    @property
    def uniform(self) -> bool:
        """Every encoding finished the same seeds."""
        return len({tuple(seeds) for seeds in self.per_encoding.values()}) <= 1


def seed_selection(runs: list[LoadedRun], evidence: Evidence | None, own: list[str] | None = None) -> SeedSelection:
    """The seeds of a domain's comparison (see SeedSelection); none used without evidence. `own`: the study's own
    encodings, whose common seeds are the ones used (an encoding that joined the study does not change them)."""
    expected = sorted({run.seed for run in runs if not run.derived})
    if evidence is None:
        return SeedSelection([], expected)
    per_encoding = {name: evidence.seeds_of(name) for name in evidence.encodings}
    return SeedSelection(evidence.common_seeds(tuple(own) if own else None), expected, per_encoding)


def run_properties(run: LoadedRun) -> dict[str, str]:
    """What must agree between the finished runs of one domain or task, each as printable text.

    The model is config.model (the encoding is its own config group) and the parameter count outside the
    encoding, n_params - encoding["parameters"]: encodings legitimately add their own parameters. The trainer and
    optimiser settings and the domain's arguments are everything of config.trainer and config.domain that can
    change a result (pipelines.runs.settings)."""
    manifest, get = run.manifest, run.manifest_value

    model = get("config", "model")
    trainer = get("config", "trainer")
    batch = effective_batch(trainer)
    steps, context = get("config", "trainer", "max_steps"), model.get("context")
    if context is None:
        raise run.file_error(run.path / MANIFEST, "no config.model.context")
    non_encoding = get("n_params") - get("encoding", "parameters")
    model_text = ", ".join(f"{key}={value}" for key, value in sorted(model.items()))
    fixed = fixed_properties(manifest)

    budget = ("trainer.max_steps", "trainer.batch_size", "trainer.accumulate")  # in the token budget already

    def listed(prefix: str) -> str:
        kept = sorted((k, v) for k, v in fixed.items() if k.startswith(prefix) and k not in budget)
        return ", ".join(f"{k.removeprefix(prefix)}={v}" for k, v in kept)

    return {
        "data hashes": ", ".join(f"{name}={digest}" for name, digest in sorted(get("data_hashes").items())),
        "token budget (max_steps x effective batch x context)": f"{steps} x {batch} x {context} = "
        f"{steps * batch * context}",
        "model (config.model and the parameters outside the encoding)": f"{model_text}; {non_encoding} parameters",
        "preset": str(get("run", "preset")),
        "trainer and optimiser settings (config.trainer but what cannot change a result)": listed("trainer."),
        "domain settings (config.domain.args)": listed("domain."),
    }


def commit_label(git: dict) -> str:
    """A manifest's `git` record as `<sha>` or `<sha>+dirty` (12 hex digits)."""
    return (git.get("sha") or "unknown")[:12] + ("+dirty" if git.get("dirty") else "")


def commits(runs: list[LoadedRun]) -> dict[str, list[str]]:
    """The code commits the finished runs were trained at (`<sha>` or `<sha>+dirty`) -> their labels: differing
    commits are reported, not refused (what they change is refused by check_comparable)."""
    held = defaultdict(list)
    for run in runs:
        if run.finished:
            held[commit_label(run.manifest.get("git") or {})].append(run.label)
    return dict(held)


def check_comparable(runs: list[LoadedRun]) -> None:
    """Raise IncomparableRunsError listing, per property that differs, the groups of runs sharing a value."""
    problems = []
    for (_,), group_runs in sorted(finished_by(runs, "group").items()):
        properties = {run.label: run_properties(run) for run in group_runs}
        for name in next(iter(properties.values())):
            holders = defaultdict(list)
            for label, values in properties.items():
                holders[values[name]].append(label)
            if len(holders) > 1:
                groups = "".join(f"\n  {value}: {', '.join(labels)}" for value, labels in holders.items())
                problems.append(f"{group_runs[0].key.group_label}: the runs differ in {name}:{groups}")
    if problems:
        raise IncomparableRunsError(
            "refusing to compare runs that must share data, token budget, model, preset and training settings "
            "(SPEC 3):\n" + "\n".join(problems)
        )


def training_context(runs: list[LoadedRun]) -> int:
    """Training context of the runs (config.model.context; check_comparable makes them agree)."""
    return int(runs[0].manifest_value("config", "model", "context"))


def preset_of(runs: list[LoadedRun]) -> str:
    """The preset of the first finished run (check_comparable makes the finished runs agree)."""
    return str(next(r for r in runs if r.finished).manifest_value("run", "preset"))


def require_finished(runs: list[LoadedRun], runs_root: Path) -> None:
    """FileNotFoundError naming the domain's folder when none of its runs has finished."""
    if not any(run.finished for run in runs):
        domain = runs[0].domain
        raise FileNotFoundError(
            f"no finished run for domain {domain!r} in {Path(runs_root) / domain} ({len(runs)} unfinished run folders)"
        )
