"""Re-train named runs of a published study and check they reproduce it: `make reproduce STUDY=... RUNS=...`.

    python -m pipelines.reproduce --study docs/results/jsb-cpu --runs rope10k/0 darope/2 [--scratch DIR] [--jobs N]

Each run (`<encoding>/<seed>`, or `<task>/<encoding>/<seed>` in a domain with tasks) is trained from its published
manifest's config: the domain, preset, encoding and seed, plus every setting the published run had that the preset
does not (e.g. a shortened budget), into a scratch runs folder (default runs/reproduce/). Its per-example NLL of
every evaluation split is then compared with the published values: the largest difference per run, its split and
example, and whether it is within the tolerance of its condition:
- trained here as it was recorded (the same thread count, CPU model and flags, torch build and package versions:
  the manifest's `machine` and `packages`): bit for bit, tolerance 0;
- on the same CPU with another thread count: the study's tolerance (study.json, 1e-5 nats);
- on another CPU, torch build or packages, or a run recorded before the manifest held its machine: the cross-machine
  bound (pipelines.runs.tolerance; README, "make reproduce", says what was measured).
Each run trains with the thread count its manifest records (else this machine's share: cores / jobs), and before
anything trains each run's line says what differs from the machine it was recorded on. Exit status 1 when any run is
outside its tolerance.

A YaRN evaluation (`rope10k+yarn/0`) is reproduced by training its rope run, which evaluates YaRN as well (one
training for both when both are named); a rope run's YaRN evaluation that the study holds is compared too when only
the rope run is named (its training scores it again: its line says so). A copy that agrees bit for bit is reported
as such, with no example named. Before anything trains, a finished run already in the scratch folder must
be the one the study describes (its key and every setting a comparison holds fixed), else it is refused by name:
it would be skipped and compared. The study is read strictly (pipelines.runs.published_read.read_study): a record that
contradicts study.json is refused, naming the record and the setting, before anything trains.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from omegaconf import OmegaConf

from models.encodings import encoding_class
from pipelines.experiment.config import compose_config, override_value
from pipelines.launch.jobs import check_prepared_data, plan
from pipelines.launch.local import run_local, visible_gpus
from pipelines.runs.layout import DERIVED_MARK, DONE, MANIFEST, RunFolder, RunKey
from pipelines.runs.manifest import machine_state, package_versions
from pipelines.runs.metrics import RunFileError, read_json_file
from pipelines.runs.published_format import PublishedStudy, StudyError, record_key
from pipelines.runs.published_join import local_metrics, worst_difference
from pipelines.runs.published_read import read_study
from pipelines.runs.settings import RESULT_NEUTRAL, differences, fixed_properties, flat_settings, without
from pipelines.runs.tolerance import copy_tolerance


def run_overrides(published: PublishedStudy, label: str) -> tuple[str, str, int, str | None, list[str]]:
    """(domain, encoding, seed, task, overrides) that recompose the config of the run trained for the published one
    (of a YaRN evaluation, `rope10k+yarn`: its rope run, whose config it records): every result-relevant setting
    that differs from its preset's default."""
    manifest = published.records[label]["manifest"]
    run, config = manifest["run"], manifest["config"]
    encoding = trained_encoding(run["pe_id"])
    base = [f"domain={run['domain']}", f"preset={run['preset']}", f"pe={encoding}", f"seed={run['seed']}"]
    if run.get("task"):
        base.append(f"domain.args.task={run['task']}")
    default = flat_settings(OmegaConf.to_container(compose_config(base), resolve=True))
    wanted = without(flat_settings(config), (*RESULT_NEUTRAL, "preset", "seed", "pe.id", "domain.datamodule"))
    extra = [f"{key}={override_value(value)}" for key, value in sorted(wanted.items()) if default.get(key) != value]
    unknown = [key for key in wanted if key not in default]
    if unknown:
        raise StudyError(f"{label}: the published config has settings today's configs lack: {', '.join(unknown)}")
    return run["domain"], encoding, int(run["seed"]), run.get("task"), extra


def trained_encoding(encoding: str) -> str:
    """The encoding whose training gives a published run: itself, or a derived run's (`rope10k+yarn`: rope10k,
    whose training evaluates YaRN too: pipelines.experiment.evaluation.evaluate_yarn)."""
    return encoding.split(DERIVED_MARK)[0]


def check_scratch(published: PublishedStudy, label: str, folder: Path) -> None:
    """StudyError, before anything trains, when `folder` holds a finished run other than the one trained for the
    study's record `label` (another run's, or one trained with other settings): it would be skipped and then
    compared as if it were a reproduction."""
    if not (folder / DONE).exists():
        return
    manifest = read_json_file(folder / MANIFEST)
    try:
        key, mine = record_key({"manifest": manifest}), fixed_properties(manifest)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise StudyError(f"{folder / MANIFEST}: a finished run without a run key or config is there already") from None
    wanted = published.key(label)
    trained = RunKey(wanted.domain, wanted.task, trained_encoding(wanted.encoding), wanted.seed)
    theirs = fixed_properties(published.records[label]["manifest"])
    what = [f"it is {key.label}, not {trained.label}"] if key != trained else []
    what += [
        f"{name} {mine.get(name, '(not set)')}, the study's run has {theirs.get(name, '(not set)')}"
        for name in differences(mine, theirs)
    ]
    if what:
        raise StudyError(
            f"{folder}: a finished run of other settings is there already ({'; '.join(what)}): it would be compared "
            "instead of a run trained from the study; delete it, or choose another --scratch"
        )


def find_label(published: PublishedStudy, spec: str) -> str:
    """The published run a `<encoding>/<seed>` (or `<task>/<encoding>/<seed>`) names; StudyError listing the runs."""
    parts = spec.strip("/").split("/")
    if len(parts) not in (2, 3) or not parts[-1].removeprefix("seed").isdigit():
        raise StudyError(f"{spec!r}: name a run as <encoding>/<seed> or <task>/<encoding>/<seed>, e.g. rope10k/0")
    *head, seed = parts
    matches = [
        label
        for labels in published.study["domains"].values()
        for label in labels
        if label.split("/")[1:] == [*head, f"seed{int(seed.removeprefix('seed'))}"]
    ]
    if len(matches) != 1:
        listed = ", ".join(
            "/".join(label.split("/")[1:]) for labels in published.study["domains"].values() for label in labels
        )
        raise StudyError(
            f"{spec!r}: {'no' if not matches else 'more than one'} such run in {published.folder}; it holds {listed}"
        )
    return matches[0]


def recorded_threads(published: PublishedStudy, label: str) -> int | None:
    """The torch threads the published run trained with (None: its manifest predates the record)."""
    threads = (published.records[label]["manifest"].get("machine") or {}).get("threads")
    return threads if isinstance(threads, int) and threads > 0 else None


def condition(published: PublishedStudy, label: str, threads: int) -> tuple[float, str]:
    """(the tolerance, the sentence that says why) for re-training `label` here with `threads` threads."""
    recorded = published.records[label]["manifest"]
    revision = encoding_class(recorded["config"]["pe"]["name"]).revision  # this code's, for the run's encoding
    here = {
        "machine": {**machine_state(), "threads": threads},
        "packages": package_versions(),
        "encoding": {"revision": revision},
    }
    tolerance, why = copy_tolerance(recorded, here, published.tolerance)
    return tolerance, f"trained here with {threads} thread{'s' * (threads > 1)}; {why}"


def trained_with(published: PublishedStudy, label: str) -> list[str]:
    """The study's runs one training for `label` scores: its trained run and that run's derived evaluations (a rope
    run and its YaRN entry), `label` first."""
    key = published.key(label)
    siblings = [
        other
        for other in published.labels
        if (found := published.key(other)).domain == key.domain
        and found.task == key.task
        and found.seed == key.seed
        and trained_encoding(found.encoding) == trained_encoding(key.encoding)
    ]
    return [label, *(other for other in siblings if other != label)]


def compare_run(published: PublishedStudy, label: str, folder: Path, tolerance: float) -> tuple[bool, str]:
    """(within tolerance, the line that says so) for the re-trained copy of one published run: its largest
    per-example difference with the split and example where it is, or that every example agrees bit for bit."""
    mine = local_metrics(RunFolder(published.key(label), folder))
    diff, split, example = worst_difference(mine, published.metrics(label))
    within = diff <= tolerance
    if diff == 0:
        splits = sorted(mine)
        return within, (
            f"{label}: largest per-example difference 0 nats (every example of {', '.join(splits)} bit for bit); "
            f"within the tolerance {tolerance:g}"
        )
    where = f"{split} example {example}" if example is not None else f"{split}: other examples scored"
    return within, (
        f"{label}: largest per-example difference {diff:.3g} nats ({where}); "
        f"{'within' if within else 'OUTSIDE'} the tolerance {tolerance:g}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", type=Path, required=True, help="a published study folder (docs/results/<name>)")
    parser.add_argument("--runs", nargs="+", required=True, metavar="RUN", help="<encoding>/<seed> ..., e.g. rope10k/0")
    parser.add_argument("--scratch", type=Path, default=Path("runs") / "reproduce", help="runs root to train into")
    parser.add_argument("--jobs", type=int, default=None, help="runs at once (default: one per GPU, else per core)")
    args = parser.parse_args(argv)
    try:
        published = read_study(args.study)
        named = list(dict.fromkeys(find_label(published, spec) for spec in args.runs))
        labels = list(dict.fromkeys(other for label in named for other in trained_with(published, label)))
        for label in labels:
            if label not in named:
                trained = next(name for name in named if label in trained_with(published, name))
                print(f"{label}: compared too: the training of {trained} scores it again", flush=True)
        jobs, planned, threads, tolerances = [], set(), {}, {}
        share = max(1, (os.cpu_count() or 1) // (args.jobs or len(visible_gpus()) or os.cpu_count() or 1))
        for label in labels:
            own = recorded_threads(published, label)
            tolerances[label], why = condition(published, label, own or share)
            print(f"{label}: {why}", flush=True)
            domain, encoding, seed, task, extra = run_overrides(published, label)
            preset = published.records[label]["manifest"]["run"]["preset"]
            if (domain, task, encoding, seed) in planned:  # a rope run and its YaRN evaluation: one training
                continue
            planned.add((domain, task, encoding, seed))
            job = plan(domain, [encoding], [seed], preset, args.scratch, [task] if task else None, extra)[0]
            check_scratch(published, label, job.folder)
            jobs.append(job)
            threads[job.label] = own
        check_prepared_data(jobs, [published])  # a store of other data would train runs that cannot reproduce it
        failed = []
        for count in sorted({threads[job.label] or share for job in jobs}):  # the runs of one thread count at once
            group = [job for job in jobs if (threads[job.label] or share) == count]
            workers = args.jobs or len(visible_gpus()) or max(1, (os.cpu_count() or 1) // count)
            failed += run_local(group, workers=workers, threads=count)
        for job in failed:
            print(f"failed run: {job.label}: {job.error}", file=sys.stderr)
        if failed:
            return 1
        results = [
            compare_run(published, label, published.key(label).folder(args.scratch), tolerances[label])
            for label in labels
        ]
    except (StudyError, RunFileError, FileNotFoundError) as error:
        parser.exit(1, f"error: {error}\n")
    for _, line in results:
        print(line)
    return 0 if all(within for within, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
