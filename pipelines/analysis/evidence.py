"""Which runs a comparison may use (SPEC section 3).

1. Completeness: every expected (group, encoding, seed) of a domain (the combinations of the groups, encodings and
   seeds seen in its run folders) without a finished result is listed, never dropped: no run folder, failed (with
   its error) or unfinished.
2. Common seeds: a domain's comparison uses only the seeds that every compared encoding finished ("within a domain
   and seed, every encoding sees the same data"), so a lost seed cannot average one encoding over fewer seeds than
   the others; the seeds left out are reported (SeedSelection).
3. Comparability: the finished runs of one group (the domain, or one of its tasks) must agree on their data hashes,
   token budget (max_steps x batch_size x context), model (config.model and the parameters outside the encoding)
   and preset; otherwise IncomparableRunsError names the groups of runs ("every encoding sees the same data in the
   same order with the same token budget").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipelines.runs.layout import FAILED, MANIFEST, RunFolder, RunKey
from pipelines.runs.metrics import read_run_json, run_file_error


class EvidenceError(ValueError):
    """The runs of a domain cannot be compared as they are; the message says which and why."""


class IncomparableRunsError(EvidenceError):
    """Finished runs of one domain (one task) differ in what SPEC 3 holds fixed."""


class IncompleteEvidenceError(EvidenceError):
    """No seed was finished by every encoding of a domain."""


def finished_by(runs: Iterable[RunFolder], *keys: str) -> dict[tuple, list[RunFolder]]:
    """Finished runs grouped by the given RunFolder attributes, seeds ascending."""
    grouped = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.seed):
        if run.finished:
            grouped[tuple(getattr(run, key) for key in keys)].append(run)
    return dict(grouped)


def missing_runs(runs: list[RunFolder]) -> list[str]:
    """One line per expected run without a finished result (see the module docstring)."""
    present = {(r.key.task, r.encoding, r.seed): r for r in runs}
    domain = runs[0].domain
    lines = []
    for task in sorted({r.key.task for r in runs}, key=lambda t: t or ""):
        for encoding in sorted({r.encoding for r in runs}):
            for seed in sorted({r.seed for r in runs}):
                run = present.get((task, encoding, seed))
                if run is None:
                    lines.append(f"{RunKey(domain, task, encoding, seed).label}: no run folder")
                elif run.failed:
                    lines.append(f"{run.label}: failed ({read_run_json(run, run.path / FAILED).get('error')})")
                elif not run.finished:
                    lines.append(f"{run.label}: unfinished (no done.json)")
    return lines


def _value(run: RunFolder, manifest: dict, *keys: str):
    value = manifest
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise run_file_error(run, run.path / MANIFEST, f"no {'.'.join(keys)}")
        value = value[key]
    return value


def manifest_value(run: RunFolder, *keys: str):
    """A value of the run's manifest.json by its key path; RunFileError naming the run when it is absent."""
    return _value(run, read_run_json(run, run.path / MANIFEST), *keys)


@dataclass(frozen=True)
class SeedSelection:
    """The seeds a domain's comparison uses (finished by every compared encoding) of those it expected (every seed
    with a run folder in the domain)."""

    used: list[int]
    expected: list[int]

    @property
    def left_out(self) -> list[int]:
        return [seed for seed in self.expected if seed not in self.used]

    @property
    def label(self) -> str:
        """`3 seeds`, or `2/3 seeds` when some were left out."""
        used, expected = len(self.used), len(self.expected)
        return f"{used} seed{'s' * (used != 1)}" if used == expected else f"{used}/{expected} seeds"


def select_seeds(runs: list[RunFolder], compared: Iterable[list[RunFolder]]) -> SeedSelection:
    """The seeds every group of finished runs in `compared` (one per encoding, or per task and encoding) holds.
    IncompleteEvidenceError naming the groups when no seed is common to all of them."""
    compared = [group for group in compared if group]
    expected = sorted({run.seed for run in runs if not run.derived})
    used = set(expected)
    for group in compared:
        used &= {run.seed for run in group}
    if not used:
        held = "; ".join(f"{g[0].key.group_label}/{g[0].encoding}: {[r.seed for r in g]}" for g in compared)
        raise IncompleteEvidenceError(
            f"{runs[0].domain}: no seed was finished by every compared encoding, so no comparison on the same data is "
            f"possible (finished seeds: {held}); finish the missing runs (make train) or compare fewer encodings"
        )
    return SeedSelection(sorted(used), expected)


def with_seeds(runs: list[RunFolder], seeds: SeedSelection) -> list[RunFolder]:
    """The runs of the selected seeds."""
    return [run for run in runs if run.seed in seeds.used]


def run_properties(run: RunFolder) -> dict[str, str]:
    """What must agree between the finished runs of one domain or task, each as printable text.

    The model is config.model (the encoding is its own config group) and the parameter count outside the
    encoding, n_params - encoding["parameters"]: encodings legitimately add their own parameters.
    """
    manifest = read_run_json(run, run.path / MANIFEST)

    def get(*keys):
        return _value(run, manifest, *keys)

    model = get("config", "model")
    trainer = get("config", "trainer")
    devices = trainer.get("devices", 1)
    # the effective batch: per device x accumulated micro-batches x devices (runs from before accumulation: 1)
    batch = (
        get("config", "trainer", "batch_size")
        * trainer.get("accumulate", 1)
        * (devices if isinstance(devices, int) else 1)
    )
    steps, context = get("config", "trainer", "max_steps"), model.get("context")
    if context is None:
        raise run_file_error(run, run.path / MANIFEST, "no config.model.context")
    non_encoding = get("n_params") - get("encoding", "parameters")
    model_text = ", ".join(f"{key}={value}" for key, value in sorted(model.items()))
    return {
        "data hashes": ", ".join(f"{name}={digest}" for name, digest in sorted(get("data_hashes").items())),
        "token budget (max_steps x effective batch x context)": f"{steps} x {batch} x {context} = "
        f"{steps * batch * context}",
        "model (config.model and the parameters outside the encoding)": f"{model_text}; {non_encoding} parameters",
        "preset": str(get("run", "preset")),
    }


def check_comparable(runs: list[RunFolder]) -> None:
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
            "refusing to compare runs that must share data, token budget, model and preset (SPEC 3):\n"
            + "\n".join(problems)
        )


def training_context(runs: list[RunFolder]) -> int:
    """Training context of the runs (config.model.context; check_comparable makes them agree)."""
    return int(manifest_value(runs[0], "config", "model", "context"))


def preset_of(runs: list[RunFolder]) -> str:
    """The preset of the first finished run (check_comparable makes the finished runs agree)."""
    return str(manifest_value(next(r for r in runs if r.finished), "run", "preset"))


def require_finished(runs: list[RunFolder], runs_root: Path) -> None:
    """FileNotFoundError naming the domain's folder when none of its runs has finished."""
    if not any(run.finished for run in runs):
        domain = runs[0].domain
        raise FileNotFoundError(
            f"no finished run for domain {domain!r} in {Path(runs_root) / domain} ({len(runs)} unfinished run folders)"
        )
