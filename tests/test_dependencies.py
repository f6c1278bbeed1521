"""Dependencies (issue 17): every third-party module the code imports is declared in pyproject.toml, and every
declared distribution is imported, or used by name where nothing imports it (listed below, with why)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "domains", "pipelines")
# Declared but reached without an import statement of ours.
USED_BY_NAME = {
    "hydra-submitit-launcher": "Hydra loads the launcher plugin by name (configs/hydra/launcher/slurm.yaml)",
    "tensorboard": "Lightning's TensorBoardLogger writes through it (logger=tensorboard)",
    "wandb": "Lightning's WandbLogger writes through it (logger=wandb)",
    "pytest": "runs the tests",
    "pytest-xdist": "make test runs the tests in its workers (pytest -n)",
    "ruff": "make lint",
}


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> dict[str, set[str]]:
    """Extra ("" for the main dependencies) -> distribution names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    return {extra: {normalised(re.match(r"[A-Za-z0-9_.-]+", req)[0]) for req in reqs} for extra, reqs in groups.items()}


def imported_distributions(folders: tuple[str, ...]) -> dict[str, set[str]]:
    """Distribution -> the files that import it, over the third-party top-level modules of `folders`."""
    local = {*PACKAGES, "tests"}
    distributions = importlib.metadata.packages_distributions()
    found: dict[str, set[str]] = {}
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top in sys.stdlib_module_names or top in local:
                        continue
                    for distribution in distributions.get(top, [f"<not installed: {top}>"]):
                        found.setdefault(normalised(distribution), set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_package_imports_only_its_main_dependencies():
    main = declared()[""]
    undeclared = {d: files for d, files in imported_distributions(PACKAGES).items() if d not in main}
    assert not undeclared, f"imported but not in [project] dependencies: {undeclared}"


def test_the_tests_import_only_main_and_dev_dependencies():
    groups = declared()
    undeclared = {d: f for d, f in imported_distributions(("tests",)).items() if d not in groups[""] | groups["dev"]}
    assert not undeclared, f"imported by the tests but not in dependencies or the dev extra: {undeclared}"


def test_every_declared_distribution_is_imported_or_used_by_name():
    by_name = {normalised(name) for name in USED_BY_NAME}
    groups = declared()
    # a main dependency is one the package needs; what only the tests import belongs in the dev extra
    unused = groups[""] - set(imported_distributions(PACKAGES)) - by_name
    assert not unused, f"main dependencies the package never imports: {unused}"
    used = set(imported_distributions((*PACKAGES, "tests"))) | by_name
    unused_extras = {extra: names - used for extra, names in groups.items() if extra and names - used}
    assert not unused_extras, f"extras never imported: {unused_extras}"
