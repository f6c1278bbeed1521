"""The Makefile's environment rule (issue 49): make installs only into an environment it created (marked
.posbench-created); an environment VENV points at that make did not create is left as it is, make names the command
that would install into it, and goes on only if posbench is installed there. Run against a fake environment whose
bin/python is a shell script that records its arguments, so nothing is installed anywhere."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TORCH_SPEC = "TORCH_SPEC=torch==2.13.0"  # the Makefile's default, fixed here against one set in the environment
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")

# The fake interpreter: logs each call's arguments; `import torch` fails where the environment holds no-torch, the
# posbench check fails unless it holds has-posbench; everything else (pip) succeeds.
STUB = """#!/bin/sh
venv="$(cd "$(dirname "$0")/.." && pwd)"
printf '%s\\n' "$*" >> "$venv/calls.log"
case "$*" in
  *"import torch"*) test ! -e "$venv/no-torch" ;;
  *posbench*) test -e "$venv/has-posbench" ;;
  *) exit 0 ;;
esac
"""


def fake_env(folder: Path, *names: str) -> Path:
    """An environment folder with the stub as bin/python and the given marker files."""
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.write_text(STUB)
    python.chmod(0o755)
    for name in names:
        (folder / name).touch()
    return folder


def make_env(venv: Path, python: str = "false") -> subprocess.CompletedProcess:
    """`make env VENV=venv`; PYTHON (what creates a missing environment) fails unless one is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), "env", f"VENV={venv}", f"PYTHON={python}", TORCH_SPEC],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def calls(venv: Path) -> list[str]:
    log = venv / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_an_environment_make_did_not_create_is_not_installed_into(tmp_path):
    venv = fake_env(tmp_path / "user-env", "has-posbench")
    result = make_env(venv)
    assert result.returncode == 0, result.stderr
    assert not any("pip" in call for call in calls(venv)), calls(venv)
    assert f'{venv}/bin/python -m pip install -e ".[dev]"' in result.stderr
    assert f"touch {venv}/.posbench-created" in result.stderr
    assert not (venv / ".posbench-installed").exists() and not (venv / ".posbench-created").exists()
    assert sorted(p.name for p in venv.iterdir()) == ["bin", "calls.log", "has-posbench"]  # nothing else written


def test_without_posbench_make_stops_and_names_the_command_with_the_torch_it_would_take(tmp_path):
    venv = fake_env(tmp_path / "user-env", "no-torch")
    result = make_env(venv)
    assert result.returncode != 0
    assert not any("pip" in call for call in calls(venv)), calls(venv)
    assert f'{venv}/bin/python -m pip install "torch==2.13.0" -e ".[dev]"' in result.stderr
    assert f"posbench is not installed in {venv}: stopping" in result.stderr
    assert not (venv / ".posbench-installed").exists()


def test_an_environment_make_created_is_installed_into(tmp_path):
    venv = fake_env(tmp_path / "made-env", ".posbench-created")
    result = make_env(venv)
    assert result.returncode == 0, result.stderr
    assert "-m pip install -q -e .[dev]" in calls(venv)
    assert (venv / ".posbench-installed").exists() and "installs nothing" not in result.stderr


def test_a_missing_environment_is_created_marked_and_installed_into(tmp_path):
    """The default flow (`make test` in a fresh clone creates .venv): PYTHON -m venv makes it, make marks it as
    its own and installs torch and posbench into it."""
    template = fake_env(tmp_path / "template", "no-torch") / "bin" / "python"
    creator = tmp_path / "python3"
    creator.write_text(f'#!/bin/sh\nmkdir -p "$3/bin" && touch "$3/no-torch" && cp "{template}" "$3/bin/python"\n')
    creator.chmod(0o755)
    venv = tmp_path / "fresh" / ".venv"
    result = make_env(venv, str(creator))
    assert result.returncode == 0, result.stderr
    assert (venv / ".posbench-created").exists() and (venv / ".posbench-installed").exists()
    assert "-m pip install -q torch==2.13.0 -e .[dev]" in calls(venv)
