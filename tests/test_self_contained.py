"""The repository carries its test data: everything under tests/data lies inside the checkout, every file
tests/data/PROVENANCE.md lists is there with its size and sha256 (and every mirror file is listed), and no code,
config, command or document of the repository names a folder beside the checkout (the development machines' shared
data and papers: a user's clone has neither)."""

from __future__ import annotations

import ast
import hashlib
import os
import re
from pathlib import Path

from tests.sample_fixtures import PROVENANCE, REPO, SAMPLES

DATA = REPO / "tests" / "data"
# The folder that lies beside the checkout on the development machines. Its path is assembled here, never written
# out, so that this file (which looks for it) is not itself a file that names it.
SIBLING = "shared"
BESIDE = "/".join(("..", SIBLING))
CODE_FOLDERS = ("tests", "pipelines", "domains", "models")
NOT_DATA = {"NOTICE"}  # licence notices written beside the data, not data themselves
ROW = re.compile(r"^\| `(?P<file>[^`]+)` \|")
# Beside-the-checkout data paths in prose and commands (docstrings, comments, README, Makefile).
DATA_PATH = re.compile(re.escape(f"{SIBLING}/data"))
# A README command pointing a path option or variable at a folder beside the checkout (POSBENCH_MIRROR=../x).
README_COMMAND = re.compile(r"(=|--source\s+|--data-source\s+|--mirror\s+)\.\./")


def provenance_rows() -> dict[str, dict[str, str]]:
    """The Files table of PROVENANCE.md: path relative to tests/data -> its cells by column name."""
    lines = PROVENANCE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| file |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        match = ROW.match(line)
        assert match, f"PROVENANCE.md: a Files row without a `path` first: {line[:80]}"
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        rows[match["file"]] = dict(zip(header, cells, strict=True))
    return rows


def inside(path: Path) -> bool:
    return path.resolve().is_relative_to(REPO)


def python_files() -> list[Path]:
    """Every Python file of the code folders but this one (whose patterns and probes name what they look for)."""
    this = Path(__file__).resolve()
    return sorted(p for folder in CODE_FOLDERS for p in (REPO / folder).rglob("*.py") if p.resolve() != this)


def climbs(node: ast.AST) -> int | None:
    """How many folders `node` climbs from the file it is in, where it is Path(__file__) followed by `.parent`,
    `.parents[n]` and `.resolve()`; None for anything else."""
    n = 0
    while True:
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            n, node = n + 1, node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
            if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int)):
                return None
            n, node = n + node.slice.value + 1, node.value.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "resolve":
            node = node.func.value
        else:
            return n if n and "__file__" in ast.unparse(node) else None


def reads_beside_the_checkout(path: Path, text: str | None = None) -> list[str]:
    """What in one Python file names a path outside the checkout: a string literal holding BESIDE (docstrings too:
    a user's clone has no such folder, so a paper is cited by its title and arXiv number), a SIBLING path component
    (`... / SIBLING`, os.path.join or joinpath(..., SIBLING)), Path(__file__) climbing above the repository
    (`.parents[n]`, `.parent.parent...`), or SIBLING/data anywhere (comments too)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    tree = ast.parse(text, filename=str(path))
    found = {f"line {n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if DATA_PATH.search(line)}

    def shared(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value == SIBLING

    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            at = max(node.value.find(BESIDE), node.value.find(BESIDE.replace("/", "\\")))
            if at >= 0:
                found.add(f"{where}: string ...{node.value[max(0, at - 40) : at + 40]!r}...")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and (shared(node.left) or shared(node.right)):
            found.add(f"{where}: a '{SIBLING}' path component")
        elif isinstance(node, ast.Call) and "join" in ast.unparse(node.func) and any(map(shared, node.args)):
            found.add(f"{where}: a '{SIBLING}' path component (join)")
        elif (n := climbs(node)) is not None:
            parents = path.resolve().parents
            if n > len(parents) or not inside(parents[n - 1]):
                found.add(f"{where}: {ast.unparse(node)} is outside the checkout")
    return sorted(found)


# ---- tests/data lies inside the checkout -------------------------------------------------------------------------
def test_every_path_under_tests_data_resolves_inside_the_checkout():
    assert DATA.is_dir() and not DATA.is_symlink() and inside(DATA) and inside(SAMPLES)
    outside = []
    for folder, dirs, files in os.walk(DATA, followlinks=False):
        for name in dirs + files:
            path = Path(folder) / name
            if not inside(path):  # a symlink (to a file or a folder) out of the repository
                outside.append(f"{path.relative_to(REPO)} -> {path.resolve()}")
    assert not outside, "paths under tests/data that resolve outside the checkout:\n" + "\n".join(outside)


def test_the_sample_mirror_has_each_stored_domain_folder():
    assert sorted(p.name for p in SAMPLES.iterdir() if p.is_dir()) == ["hrg", "jsb", "maestro", "sleep_edf"]
    assert (SAMPLES / "maestro" / "LICENSE").is_file() and (SAMPLES / "maestro" / "NOTICE").is_file()
    assert "CC BY-NC-SA 4.0" in (SAMPLES / "maestro" / "NOTICE").read_text(encoding="utf-8")
    assert "CC BY-NC-SA 4.0" in PROVENANCE.read_text(encoding="utf-8")


# ---- PROVENANCE.md matches the files ---------------------------------------------------------------------------
def test_every_file_provenance_lists_is_there_with_its_size_and_sha256():
    rows = provenance_rows()
    assert len(rows) >= 4
    wrong = []
    for name, row in rows.items():
        path = DATA / name
        if not path.is_file():
            wrong.append(f"{name}: missing")
            continue
        data = path.read_bytes()
        if len(data) != int(row["size (bytes)"]):
            wrong.append(f"{name}: {len(data)} bytes, PROVENANCE.md says {row['size (bytes)']}")
        if hashlib.sha256(data).hexdigest() != row["sha256"]:
            wrong.append(f"{name}: sha256 {hashlib.sha256(data).hexdigest()}, PROVENANCE.md says {row['sha256']}")
    assert not wrong, "\n".join(wrong)


def test_every_mirror_file_has_its_provenance_row():
    listed = set(provenance_rows())
    present = {str(p.relative_to(DATA)) for p in SAMPLES.rglob("*") if p.is_file() and p.name not in NOT_DATA}
    assert not present - listed, f"files under tests/data/mirror without a PROVENANCE.md row: {present - listed}"


# ---- nothing reads beside the checkout -------------------------------------------------------------------------
def test_no_python_file_reads_beside_the_checkout():
    found = {str(path.relative_to(REPO)): hits for path in python_files() if (hits := reads_beside_the_checkout(path))}
    assert not found, f"paths outside the checkout (use tests.sample_fixtures.SAMPLES): {found}"


def test_the_check_catches_what_it_is_for():
    probe = REPO / "tests" / "probe.py"  # never written: its text is passed in
    cases = {
        f'X = Path(__file__).resolve().parents[2] / "{SIBLING}" / "data"\n': 2,  # above the repository, SIBLING
        f'X = ROOT / "{SIBLING}"\n': 1,
        f'X = "{BESIDE}/papers/x.pdf"\n': 1,
        f"X = os.path.join(ROOT, '{SIBLING}')\n": 1,
        "X = Path(__file__).parent.parent.parent\n": 1,
        f'"""Usage: --source {BESIDE}/data"""\n': 2,  # the docstring's line and its string
        f"X = 1  # as in {BESIDE}/data/PROVENANCE.md\n": 1,
        f'"""Paper 002 in {BESIDE}/papers."""\nX = Path(__file__).resolve().parents[1] / "configs"\n': 1,
        '"""RoPE (Su et al., 2021, arXiv 2104.09864)."""\nX = Path(__file__).resolve().parents[1] / "configs"\n': 0,
        'X = Path(__file__).parent.parent / "tests" / "data"\n': 0,
        f'X = {{"{SIBLING}": True}}["{SIBLING}"]\n': 0,
    }
    for source, expected in cases.items():
        assert len(reads_beside_the_checkout(probe, source)) == expected, source


def test_no_command_or_config_reads_beside_the_checkout():
    """The Makefile, CI's script and the configs (comment lines aside); the README and the documents under docs/
    (the published studies' READMEs too) name no folder beside the checkout, nor run a command pointed at one."""
    beside = re.compile(f"{re.escape(BESIDE)}|{DATA_PATH.pattern}")
    checks = [(REPO / "Makefile", beside), (REPO / ".ci" / "run", re.compile(r"\.\./"))]
    checks += [(path, beside) for path in sorted((REPO / "configs").rglob("*.yaml"))]
    checks += [(path, beside) for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]]
    checks += [(REPO / "README.md", README_COMMAND)]
    found = []
    for path, pattern in checks:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line) and not (path.name != "README.md" and line.lstrip().startswith("#")):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "commands that read beside the checkout:\n" + "\n".join(found)
