"""Run folders in the train pipeline's format, built by hand so that every number a report shows is known: the
fixtures of the comparison tests (tests/test_compare.py, tests/test_study.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from pipelines.analysis.domain import analyse_runs
from pipelines.analysis.study import analyse_study
from pipelines.report.domain import write_domain_report
from pipelines.report.study import write_study_report


def compare(runs_root: Path, domain: str, out_dir: Path, ref: str | None = None) -> Path:
    """One domain's report, as `make compare` writes it into results/<domain>/; returns its summary.md."""
    return write_domain_report(analyse_runs(runs_root, domain, ref), Path(out_dir))


def study(runs_root: Path, domains: list[str] | None, out: Path, ref: str | None = None) -> Path:
    """The whole study, as `make compare` writes it; returns results/summary.md."""
    return write_study_report(analyse_study(runs_root, domains, ref), Path(out))


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CONTEXT = 16
TEST_HASH = "ab" * 32


def manifest(domain, pe, seed, *, task=None, chance=None, preset="tiny", encoding_parameters=0, **changes):
    """A manifest as pipelines.train writes it; `changes` alter what check_comparable compares."""
    model = {"n_layer": changes.get("n_layer", 2), "n_head": 2, "d_model": 32, "context": CONTEXT, "dropout": 0.0}
    return {
        "run": {"domain": domain, "task": task, "pe": pe.split("+")[-1], "pe_id": pe, "seed": seed, "preset": preset},
        "config": {
            "domain": {"name": domain, "args": {"task": task} if task else {}},
            "model": {**model, "bias": False, "norm": "layernorm", "tie_embeddings": True},
            "trainer": {"max_steps": changes.get("max_steps", 800), "batch_size": 4, "eval_batch_size": 8},
            "pe": {"id": pe, "name": pe, "options": {}},
            "preset": preset,
            "seed": seed,
        },
        "chance": chance,
        "data_hashes": changes.get("data_hashes", {"eval/test": f"{task or domain}-{TEST_HASH}"}),
        "n_params": 5000 + encoding_parameters + changes.get("extra_parameters", 0),
        "encoding": {"name": pe, "mechanism": "qk", "parameters": encoding_parameters},
        "tokens_per_s": 1.0,
        "steps": changes.get("max_steps", 800),
        "git": {"sha": "0" * 40, "dirty": False},
        "packages": {},
    }


def write_run(run_dir, *, domain, pe, seed, splits, task=None, chance=None, finished=True, **manifest_changes):
    """A run folder in the train pipeline's format; `splits` maps a split to its summary entry."""
    (run_dir / "metrics").mkdir(parents=True)
    manifest_data = manifest(domain, pe, seed, task=task, chance=chance, **manifest_changes)
    (run_dir / "manifest.json").write_text(json.dumps(manifest_data))
    (run_dir / "metrics" / "summary.json").write_text(json.dumps({"splits": splits}))
    if finished:
        (run_dir / "done.json").write_text(json.dumps({"finished": "2025-01-01T00:00:00"}))


def write_csv(path, header, rows):
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def read_csv(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def section(markdown, title):
    """The text of one `## title` section."""
    return markdown.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def assert_png(path):
    assert path.read_bytes()[:8] == PNG_SIGNATURE


EXAMPLE_IDS = [3, 7, 11, 15, 19, 23]


def lm_tree(root):
    """jsb: rope10k and nope x seeds 0, 1; returns per-example NLL as {encoding: {seed: {id: nll}}}."""
    rng = np.random.default_rng(1)
    values = {}
    for pe, offset in (("rope10k", 0.45), ("nope", 1.1)):
        values[pe] = {}
        for seed in (0, 1):
            nll = {i: offset + rng.uniform(0, 0.2) for i in EXAMPLE_IDS}
            values[pe][seed] = nll
            run_dir = root / "jsb" / pe / f"seed{seed}"
            entry = {"nll": 0.0, "accuracy": 0.5, "exact_match": 0.0, "examples": 6, "tokens": 60}
            write_run(run_dir, domain="jsb", pe=pe, seed=seed, splits={"test": entry})
            order = EXAMPLE_IDS if seed == 0 else EXAMPLE_IDS[::-1]  # rows in any order: aligned by id
            write_csv(
                run_dir / "metrics" / "test.per_example.csv",
                ["example", "nll", "tokens", "correct", "exact"],
                [[i, repr(nll[i]), 10, 5, 0] for i in order],
            )
            write_csv(
                run_dir / "metrics" / "test.per_position.csv",
                ["position", "nll_sum", "tokens"],
                [[p, offset * 6 + p, 6] for p in range(1, 5)],
            )
    return values


SKIP_REASON = "learned absolute table of length 256 cannot be evaluated at 2048"
# accuracy per (task, encoding, seed) for test, test_2x, test_8x (None = skipped)
ACCURACY = {
    ("parity", "rope10k", 0): (0.9, 0.7, 0.55),
    ("parity", "rope10k", 1): (0.8, 0.6, 0.65),
    ("parity", "ape_learned", 0): (0.7, 0.5, None),
    ("parity", "ape_learned", 1): (0.6, 0.52, None),
    ("reverse_string", "rope10k", 0): (0.95, 0.2, 0.2),
    ("reverse_string", "rope10k", 1): (0.05, 0.05, 0.05),  # unfinished: must not count
    ("reverse_string", "ape_learned", 0): (0.5, 0.3, None),
    ("reverse_string", "ape_learned", 1): (0.6, 0.2, None),
}
CHANCE = {"parity": 0.5, "reverse_string": 0.1}


def write_positions(run_dir, split, positions, nll):
    """metrics/<split>.per_position.csv with 2 tokens at each position and the given mean NLL there."""
    nll = np.broadcast_to(np.asarray(nll, dtype=float), np.shape(positions))
    rows = [[p, repr(2 * float(v)), 2] for p, v in zip(positions, nll, strict=True)]
    write_csv(run_dir / "metrics" / f"{split}.per_position.csv", ["position", "nll_sum", "tokens"], rows)


SPLIT_FACTOR = {"test": 1, "test_2x": 2, "test_8x": 8}
INSTANCE_OFFSETS = np.array([-0.03, -0.01, 0.01, 0.03])  # each test instance's accuracy about the run's (mean 0)
INSTANCE_TOKENS = 100


def instance_correct(accuracy, pe, seed):
    """The correct tokens, out of INSTANCE_TOKENS, of each of a task run's 4 test instances: their mean accuracy is
    `accuracy`; how they spread depends on the encoding and seed."""
    return np.round(INSTANCE_TOKENS * (accuracy + np.roll(INSTANCE_OFFSETS, len(pe) + seed))).astype(int)


def write_instances(run_dir, accuracy, pe, seed):
    """metrics/test.per_example.csv of a task run (instance_correct)."""
    correct = instance_correct(accuracy, pe, seed)
    rows = [[i, repr(1.0 - accuracy), INSTANCE_TOKENS, c, int(c == INSTANCE_TOKENS)] for i, c in enumerate(correct)]
    write_csv(run_dir / "metrics" / "test.per_example.csv", ["example", "nll", "tokens", "correct", "exact"], rows)


def synthetic_tree(root):
    for (task, pe, seed), accuracies in ACCURACY.items():
        run_dir = root / "synthetic" / task / pe / f"seed{seed}"
        splits = {
            split: {"skipped": SKIP_REASON}
            if acc is None
            else {"nll": 1.0 - acc, "accuracy": acc, "exact_match": 0.0, "examples": 4, "tokens": 400}
            for split, acc in zip(SPLIT_FACTOR, accuracies, strict=True)
        }
        write_run(
            run_dir,
            domain="synthetic",
            task=task,
            pe=pe,
            seed=seed,
            chance=CHANCE[task],
            splits=splits,
            finished=(task, pe, seed) != ("reverse_string", "rope10k", 1),
        )
        write_instances(run_dir, accuracies[0], pe, seed)
        for split, acc in zip(SPLIT_FACTOR, accuracies, strict=True):
            if acc is not None:
                write_positions(run_dir, split, np.arange(1, SPLIT_FACTOR[split] * CONTEXT), 1.0 - acc)


def pair(root, **changes):
    """jsb: darope (520 parameters of its own, legitimately) and nope, seed 0; `changes` go to nope."""
    for pe, extra in (("darope", {"encoding_parameters": 520}), ("nope", changes)):
        run_dir = root / "jsb" / pe / "seed0"
        write_run(run_dir, domain="jsb", pe=pe, seed=0, splits={"test": {"nll": 1.0}}, **extra)
        write_csv(run_dir / "metrics" / "test.per_example.csv", ["example", "nll"], [[0, 1.0], [1, 2.0]])
        write_positions(run_dir, "test", [1, 2], 1.0)


def lm_domain(root, domain, nll, seeds=(0, 1, 2), seed_step=0.01, ids=None, **manifest_changes):
    """Finished runs of a domain compared per example: encoding -> its per-example NLL (one value per example id);
    seed k scores nll + seed_step * (k - 1), so every example's average over seeds 0, 1, 2 is exactly `nll`;
    `manifest_changes` go to every run's manifest (manifest)."""
    for pe, values in nll.items():
        values = np.asarray(values, dtype=float)
        example_ids = list(range(values.size)) if ids is None else ids
        for seed in seeds:
            run_dir = root / domain / pe / f"seed{seed}"
            scored = values + seed_step * (seed - 1)
            entry = {"nll": float(scored.mean()), "accuracy": 0.5, "examples": values.size, "tokens": 10 * values.size}
            write_run(run_dir, domain=domain, pe=pe, seed=seed, splits={"test": entry}, **manifest_changes)
            write_csv(
                run_dir / "metrics" / "test.per_example.csv",
                ["example", "nll", "tokens", "correct", "exact"],
                [[i, repr(float(v)), 10, 5, 0] for i, v in zip(example_ids, scored, strict=True)],
            )
            write_positions(run_dir, "test", [1, 2, 3], float(scored.mean()))


def with_composed_configs(root, domain="jsb", preset="tiny"):
    """Give the fabricated runs of `domain` under `root` the config pipelines.train composes for them (a real run's
    manifest holds it; a derived run's, `rope10k+yarn`, is its trained run's), so that a study of them can be
    re-trained (make reproduce) and joined by composed runs."""
    from omegaconf import OmegaConf

    from pipelines.experiment.config import compose_config

    for path in sorted(Path(root).glob(f"{domain}/*/seed*/manifest.json")):
        manifest = json.loads(path.read_text())
        run = manifest["run"]
        overrides = [f"domain={domain}", f"preset={preset}", f"pe={run['pe_id'].split('+')[0]}", f"seed={run['seed']}"]
        manifest["config"] = OmegaConf.to_container(compose_config(overrides), resolve=True)
        path.write_text(json.dumps(manifest))


def edit_study_file(study, name, edit):
    """Change one file of a published study as someone might by hand: `edit` gets its content (runs.json.gz and
    settle records parsed, CSV files as lists of rows with the header) and returns the new one; where study.json
    lists its files' sha256, the file's is updated, so that the change meets the study's other checks."""
    import gzip
    import hashlib
    import io

    path = Path(study) / name
    raw = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    if name.endswith(".csv.gz"):
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(edit(list(csv.reader(io.StringIO(raw.decode())))))
        raw = out.getvalue().encode()
    else:
        raw = json.dumps(edit(json.loads(raw))).encode()
    path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    description = json.loads((Path(study) / "study.json").read_text())
    if "files" in description:
        description["files"][name] = hashlib.sha256(path.read_bytes()).hexdigest()
        (Path(study) / "study.json").write_text(json.dumps(description))
