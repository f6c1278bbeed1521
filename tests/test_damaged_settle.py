"""A damaged make-settle record is named, never met as a traceback (issue 49): a local runs folder's settle.json or
a study's settle/<domain>.json that is cut short, lacks its design or looks, or holds a design make settle would not
write stops `make compare` (and `make publish`) with exit 1 and one line naming that file, never the copy the
commands lay out in a temporary folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from pipelines.analysis.design import Design
from pipelines.compare import main as compare_main
from pipelines.publish import main as publish_main
from pipelines.runs.published_export import export_study
from tests.run_fixtures import lm_domain

X = np.array([0.2, 1.4, 0.6, 2.5, 1.0])
GOOD = {"design": Design.grow([0, 1, 2], 6, ref="darope").to_json(), "looks": [], "next_runs": []}
# damaged records, by what is wrong: each is refused naming its file
DAMAGED = {
    "cut short": json.dumps(GOOD)[:40],
    "no looks": json.dumps({"design": GOOD["design"]}),
    "no design": json.dumps({"looks": []}),
    "a list": json.dumps([GOOD]),
    "a design without seeds": json.dumps({**GOOD, "design": {k: v for k, v in GOOD["design"].items() if k != "seeds"}}),
    "a design make settle would not write": json.dumps({**GOOD, "design": {**GOOD["design"], "looks": [1, 6]}}),
}


def study(tmp_path: Path, record: str | None = None) -> Path:
    """A published study of jsb (darope and rope10k at seeds 0-2), with `record` as its settle/jsb.json (written in
    place after the export, its sha256 in study.json updated, as a hand edit that keeps the checksums would)."""
    lm_domain(tmp_path / "published_runs", "jsb", {"darope": X, "rope10k": X + 0.2})
    folder = tmp_path / "study"
    if record is None:
        export_study(tmp_path / "published_runs", ["jsb"], folder)
        return folder
    (tmp_path / "published_runs" / "jsb" / "settle.json").write_text(json.dumps(GOOD))
    export_study(tmp_path / "published_runs", ["jsb"], folder)
    (folder / "settle" / "jsb.json").write_text(record)
    description = json.loads((folder / "study.json").read_text())
    description["files"]["settle/jsb.json"] = hashlib.sha256(record.encode()).hexdigest()
    (folder / "study.json").write_text(json.dumps(description))
    return folder


def local_runs(tmp_path: Path, record: str) -> Path:
    """A local runs folder holding only jsb/settle.json."""
    (tmp_path / "local" / "jsb").mkdir(parents=True)
    (tmp_path / "local" / "jsb" / "settle.json").write_text(record)
    return tmp_path / "local"


def refusal(capsys, main, args: list[str]) -> str:
    """The command's stderr, once it has exited with status 1."""
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 1
    return capsys.readouterr().err


def assert_one_line_naming(err: str, path: Path) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {path.resolve()}: ") or lines[0].startswith(f"error: {path}: "), err
    assert "posbench-" not in err and "Traceback" not in err


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_compare_names_a_damaged_local_settle_record_joined_to_a_study(tmp_path, capsys, damage):
    local = local_runs(tmp_path, DAMAGED[damage])
    args = ["--domains", "jsb", "--runs", str(local), "--with", str(study(tmp_path)), "--out", str(tmp_path / "o")]
    assert_one_line_naming(refusal(capsys, compare_main, args), local / "jsb" / "settle.json")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_compare_names_a_damaged_settle_record_of_a_study(tmp_path, capsys, damage):
    folder = study(tmp_path, DAMAGED[damage])
    args = ["--runs", str(tmp_path / "none"), "--with", str(folder), "--out", str(tmp_path / "o")]
    assert_one_line_naming(refusal(capsys, compare_main, args), folder / "settle" / "jsb.json")


@pytest.mark.parametrize("damage", ["cut short", "a design make settle would not write"])
def test_compare_and_publish_of_the_local_runs_alone_name_the_record(tmp_path, capsys, damage):
    """Without a study nothing is laid out: read_design's refusal names the file, in one line."""
    lm_domain(tmp_path / "runs", "jsb", {"darope": X, "rope10k": X + 0.2})
    record = tmp_path / "runs" / "jsb" / "settle.json"
    record.write_text(DAMAGED[damage])
    args = ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "o")]
    assert_one_line_naming(refusal(capsys, compare_main, args), record)
    args = ["--runs", str(tmp_path / "runs"), "--domains", "jsb", "--out", str(tmp_path / "published")]
    assert_one_line_naming(refusal(capsys, publish_main, args), record)
    assert not (tmp_path / "published").exists()


def test_a_sound_local_record_joins_a_study_without_one(tmp_path, capsys):
    """The checks refuse only damage: make settle's own record joins, and compare reads its design."""
    local = local_runs(tmp_path, json.dumps(GOOD))
    args = ["--domains", "jsb", "--runs", str(local), "--with", str(study(tmp_path)), "--out", str(tmp_path / "o")]
    assert compare_main(args) == 0
    assert (tmp_path / "o" / "jsb" / "summary.md").is_file() and (local / "jsb" / "settle.json").is_file()
