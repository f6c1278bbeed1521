"""A run's manifest says what ran (issue 49): a code file git does not track makes the run dirty and is listed with
its sha256, and the manifest records the threads, the CPU and the torch build the run's speed depends on."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import torch
from omegaconf import OmegaConf

from pipelines.runs.manifest import cpu_description, git_state, write_run_manifest


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True
    )


def committed_repo(tmp_path: Path) -> Path:
    """A repository with one committed file under models/ and an ignored cache folder."""
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "gpt.py").write_text("X = 1\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def test_an_untracked_code_file_makes_the_run_dirty_and_is_listed_with_its_sha256(tmp_path):
    repo = committed_repo(tmp_path)
    (repo / "notes.txt").write_text("not code\n")
    (repo / "models" / "__pycache__").mkdir()
    (repo / "models" / "__pycache__" / "gpt.pyc").write_bytes(b"ignored")
    clean = git_state(repo)
    assert clean["dirty"] is False and clean["untracked"] == {} and clean["modified"] == {}
    assert len(clean["sha"]) == 40

    source = b"class RopeLF:\n    pass\n"
    (repo / "models" / "encodings").mkdir()
    (repo / "models" / "encodings" / "rope_lf.py").write_bytes(source)
    state = git_state(repo)
    assert state["dirty"] is True and state["sha"] == clean["sha"]
    assert state["untracked"] == {"models/encodings/rope_lf.py": hashlib.sha256(source).hexdigest()}


def test_a_changed_published_study_does_not_make_the_tree_dirty_and_a_changed_readme_does(tmp_path):
    repo = committed_repo(tmp_path)
    (repo / "docs" / "results" / "a").mkdir(parents=True)
    (repo / "docs" / "results" / "a" / "summary.md").write_text("one\n")
    (repo / "README.md").write_text("readme\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "a study")
    (repo / "docs" / "results" / "a" / "summary.md").write_text("two\n")  # another study republished beside it
    assert git_state(repo)["dirty"] is False
    (repo / "README.md").write_text("changed\n")
    assert git_state(repo)["dirty"] is True


def test_a_changed_code_file_is_listed_and_a_deleted_one_has_no_hash(tmp_path):
    repo = committed_repo(tmp_path)
    (repo / "models" / "gpt.py").write_text("X = 2\n")
    state = git_state(repo)
    assert state["dirty"] is True and state["untracked"] == {}
    assert state["modified"] == {"models/gpt.py": hashlib.sha256(b"X = 2\n").hexdigest()}
    (repo / "models" / "gpt.py").unlink()
    assert git_state(repo)["modified"] == {"models/gpt.py": None}


def test_outside_a_repository_the_state_is_unknown_not_clean(tmp_path):
    assert git_state(tmp_path) == {"sha": None, "dirty": None, "untracked": None, "modified": None}


def test_the_cpu_is_read_from_cpuinfo_and_named_without_it(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Example CPU 9000\nflags\t\t: fpu sse avx avx2 fma avx512f\n\n"
        "processor\t: 1\nmodel name\t: Example CPU 9000\nflags\t\t: fpu sse avx avx2 fma avx512f\n"
    )
    assert cpu_description(cpuinfo) == {"cpu": "Example CPU 9000", "cpu_flags": ["avx", "avx2", "fma", "avx512f"]}
    elsewhere = cpu_description(tmp_path / "absent")
    assert elsewhere["cpu_flags"] is None and elsewhere["cpu"]  # platform.processor() or the machine type


def test_the_manifest_records_threads_cpu_and_torch_build(tmp_path):
    cfg = OmegaConf.create(
        {"seed": 0, "preset": "tiny", "domain": {"name": "jsb", "args": {}}, "pe": {"id": "rope10k", "name": "rope"}}
    )
    datamodule = SimpleNamespace(describe=lambda: {"chance": None}, data_hashes=lambda: {"eval/test": "ab"})
    model = SimpleNamespace(num_parameters=lambda: 10, encoding=SimpleNamespace(describe=lambda: {"name": "rope"}))
    evaluation = {"splits": {"test": {"tokens_per_s": 5.0}}}
    manifest = write_run_manifest(
        tmp_path,
        cfg,
        datamodule,
        model,
        evaluation,
        tokens_per_s=1.0,
        train_seconds=2.0,
        train_cpu_seconds=1.5,
        steps=3,
        device="cpu",
    )
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest
    machine = manifest["machine"]
    assert machine["threads"] == torch.get_num_threads() and machine["interop_threads"] >= 1
    assert isinstance(machine["cpu"], str) and machine["cpu"]
    build = machine["torch_build"]
    assert build["components"] and not any(line.startswith("Build settings") for line in build["components"])
    assert build["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert build["mkldnn"] == torch.backends.mkldnn.is_available()
    assert {"sha", "dirty", "untracked", "modified"} <= set(manifest["git"])
