"""A study of one domain at other settings bridged into the domain's ranking (`make compare --bridge`,
pipelines.analysis.bridge): MAESTRO's layer patterns train at 4 layers beside the roster at 2, each with its own
reference runs. The numbers are built so that every rank and mean rank is known by hand."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pipelines.compare import main as compare_main
from pipelines.runs.published_export import export_study
from tests.browser import unpacked
from tests.run_fixtures import lm_domain, read_csv, section

X = np.array([0.9, 1.7, 1.2, 2.6])  # jsb's four test examples
Y = np.array([1.5, 0.9, 1.1])  # maestro's three


def _publish(tmp_path, name, domain, nll, **changes):
    runs = tmp_path / f"{name}-runs"
    lm_domain(runs, domain, nll, **changes)
    export_study(runs, [domain], tmp_path / name)
    return tmp_path / name


@pytest.fixture
def studies(tmp_path):
    """jsb at 2 layers (rope10k, alibi +0.05, nope +0.20), jsb-patterns at 4 layers (its rope10k 0.3 better than the
    2-layer one; irope 0.10 better than that rope10k, alibi 0.01 worse), maestro at 2 layers (nope -0.05, irope
    -0.02, rope10k, alibi +0.10)."""
    jsb = _publish(tmp_path, "jsb-roster", "jsb", {"rope10k": X, "alibi": X + 0.05, "nope": X + 0.20})
    patterns = _publish(
        tmp_path, "jsb-patterns", "jsb", {"rope10k": X - 0.3, "irope": X - 0.4, "alibi": X - 0.29}, n_layer=4
    )
    maestro = _publish(
        tmp_path,
        "maestro-roster",
        "maestro",
        {"rope10k": Y, "alibi": Y + 0.1, "nope": Y - 0.05, "irope": Y - 0.02},
    )
    return tmp_path, jsb, patterns, maestro


def _compare(tmp_path, *args):
    out = tmp_path / "out"
    code = compare_main(["--runs", str(tmp_path / "none"), "--out", str(out), *map(str, args)])
    return code, out


def test_a_bridged_encoding_is_ranked_in_its_domain_by_its_delta_to_its_own_reference(studies):
    tmp_path, jsb, patterns, maestro = studies
    code, out = _compare(tmp_path, "--with", jsb, maestro, "--bridge", patterns)
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    # jsb's ranking: irope (Δ -0.10 to the 4-layer rope10k), rope10k, alibi (+0.05: jsb's own, not the bridged
    # study's +0.01), nope (+0.20); maestro's: nope, irope, rope10k, alibi
    rows = {(row["domain"], row["encoding"]): row for row in read_csv(out / "summary.csv")}
    jsb_rank = {enc: float(rows["jsb", enc]["rank"]) for enc in ("rope10k", "alibi", "nope")}
    assert jsb_rank == {"rope10k": 2.0, "alibi": 3.0, "nope": 4.0}
    assert ("jsb", "irope") not in rows  # a bridged encoding's row is its study's, with the rank in its domain
    assert {enc: float(rows["jsb-patterns", enc]["rank"]) for enc in ("irope", "rope10k", "alibi")} == {
        "irope": 1.0,
        "rope10k": 2.0,
        "alibi": 3.0,
    }
    assert float(rows["jsb-patterns", "irope"]["delta"]) == pytest.approx(-0.10)
    assert float(rows["jsb-patterns", "alibi"]["delta"]) == pytest.approx(0.01)  # its own row keeps its own Δ
    # mean over the two domains: irope (1 + 2) / 2, rope10k (2 + 3) / 2, nope (4 + 1) / 2, alibi (3 + 4) / 2
    mean = {enc: entry["mean"] for enc, entry in summary["mean_rank"].items()}
    assert mean == pytest.approx({"irope": 1.5, "rope10k": 2.5, "nope": 2.5, "alibi": 3.5})
    assert {entry["domains"] for entry in summary["mean_rank"].values()} == {2}
    assert summary["friedman"]["domains"]["blocks"] == ["jsb", "maestro"]
    bridged = summary["domains"]["jsb-patterns"]
    assert bridged["ranked_with"] == "jsb" and bridged["bridge_settings"] == {"model.n_layer": [4, 2]}
    assert summary["domains"]["jsb"]["ranked_with"] is None
    text = (out / "summary.md").read_text()
    assert "**jsb-patterns** (jsb at model.n_layer 4; ranked in jsb by each encoding's Δ to this study's own" in text
    assert "`jsb-patterns`: jsb trained at other settings (model.n_layer 4 (the domain's 2))" in text
    assert (out / "jsb-patterns" / "summary.md").is_file()
    # bold: the first of the domain's ranking, irope in the bridged column; not rope10k, jsb's own first
    table = section(text, "Test results by domain and encoding")
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:5]] for line in table.splitlines()
             if line.startswith("| `")}  # fmt: skip
    assert cells["`irope`"][2].startswith("**1.2000") and not cells["`rope10k` (ref)"][0].startswith("**")


def test_without_the_bridge_the_patterns_have_no_mean_rank(studies):
    tmp_path, jsb, _, maestro = studies
    code, out = _compare(tmp_path, "--with", jsb, maestro)
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "irope" not in summary["mean_rank"] and summary["not_ranked"]["irope"] == {"rank_in": {"maestro": 2.0}}
    mean = {enc: entry["mean"] for enc, entry in summary["mean_rank"].items()}
    # among the three scored in both: jsb rope10k, alibi, nope; maestro nope, rope10k, alibi
    assert mean == pytest.approx({"rope10k": 1.5, "nope": 2.0, "alibi": 2.5})


def test_the_page_keeps_the_bridged_runs_apart_and_says_what_the_bridge_ranks(studies):
    tmp_path, jsb, patterns, maestro = studies
    _, out = _compare(tmp_path, "--with", jsb, maestro, "--bridge", patterns)
    page = (out / "index.html").read_text()
    labels = {run["label"]: run["domain"] for run in unpacked(page, "runs-data")}  # the one-run view's runs
    assert labels["jsb-patterns/irope/seed0"] == "jsb-patterns" and labels["jsb/nope/seed0"] == "jsb"
    # the across-domains table says which ranks a bridge entered, from summary.json
    note = " ".join(page.split("<strong>jsb-patterns</strong> is jsb at other settings", 1)[1].split("</p>")[0].split())
    assert note.startswith("(model.n_layer 4 (the domain&#39;s 2)), with its own runs of <code>rope10k</code>")


def test_the_page_states_each_settings_scale_and_links_the_studies_it_joins_and_bridges(studies):
    """Issue 64: study-cpu read "maestro, cpu" for three settings. A bridged study's scale is its own row of the facts
    table beside its domain's (4 layers against 2), and the page links every study it joins or bridges."""
    tmp_path, jsb, patterns, maestro = studies
    _, out = _compare(tmp_path, "--with", jsb, maestro, "--bridge", patterns)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["study"]["joins"] == ["jsb-roster", "maestro-roster"] and summary["study"]["bridges"] == [
        "jsb-patterns"
    ]
    layers = {name: domain["scale"]["layers"] for name, domain in summary["domains"].items()}
    assert layers == {"jsb": [2], "maestro": [2], "jsb-patterns": [4]}
    page = (out / "index.html").read_text()
    facts = page.split('class="facts"', 1)[1].split("</table>", 1)[0]
    rows = dict(re.findall(r'<tr data-domain="([^"]+)">.*?<td data-key="layers">(\d+)</td>', facts))
    assert rows == {"jsb": "2", "maestro": "2", "jsb-patterns": "4"}
    for name, what in (("jsb-roster", "joins"), ("maestro-roster", "joins"), ("jsb-patterns", "bridges")):
        assert f'{what} <a href="../{name}/index.html">{name}</a>' in page, name


@pytest.mark.parametrize(
    "case, why",
    [
        ("same settings", "trained at jsb's settings: join it as runs (--with), not as a bridge"),
        ("other data", "its runs read other data (data_hashes.eval/test)"),
        ("domain not compared", "bridged into jsb's ranking, but jsb is not compared here"),
        ("two domains", "a bridged study holds one domain; it holds jsb, maestro"),
        (
            "two bridges of irope",
            "jsb-patterns: bridges `irope` into jsb's ranking, as jsb-deeper does (each by its Δ to its own "
            "`rope10k`): its rank would depend on which is named first",
        ),
        (
            "two bridges of irope, the other order",
            "jsb-deeper: bridges `irope` into jsb's ranking, as jsb-patterns does",
        ),
    ],
)
def test_a_bridge_that_cannot_stand_is_refused_by_name(studies, case, why, capsys):
    """Two bridges holding one encoding the domain lacks: ranked by whichever was named first (alibi 1.0 one way,
    3.0 the other), so refused in either order."""
    tmp_path, jsb, patterns, maestro = studies
    if case == "same settings":
        bridge = _publish(tmp_path, "jsb-same", "jsb", {"rope10k": X, "irope": X - 0.1})
        args = ["--with", jsb, maestro, "--bridge", bridge]
    elif case == "other data":
        bridge = _publish(
            tmp_path, "jsb-other", "jsb", {"rope10k": X, "irope": X - 0.1}, n_layer=4, data_hashes={"eval/test": "x"}
        )
        args = ["--with", jsb, maestro, "--bridge", bridge]
    elif case.startswith("two bridges"):  # irope 0.10 better than its rope10k in one, 0.05 worse in the other
        deeper = _publish(tmp_path, "jsb-deeper", "jsb", {"rope10k": X - 0.4, "irope": X - 0.35}, n_layer=6)
        bridges = [deeper, patterns] if case.endswith("two bridges of irope") else [patterns, deeper]
        args = ["--with", jsb, maestro, "--bridge", *bridges]
    elif case == "domain not compared":
        args = ["--with", maestro, "--bridge", patterns]
    else:
        runs = tmp_path / "two-runs"
        lm_domain(runs, "jsb", {"rope10k": X}, n_layer=4)
        lm_domain(runs, "maestro", {"rope10k": Y}, n_layer=4)
        export_study(runs, ["jsb", "maestro"], tmp_path / "two")
        args = ["--with", jsb, maestro, "--bridge", tmp_path / "two"]
    with pytest.raises(SystemExit) as stop:
        _compare(tmp_path, *args)
    assert stop.value.code == 1
    assert why in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_bridge_without_the_domains_reference_is_refused(studies, capsys):
    """Ranked by --ref nope, jsb's Δ are to nope; the bridged study has no nope run, so no Δ to put beside them."""
    tmp_path, jsb, patterns, maestro = studies
    with pytest.raises(SystemExit):
        _compare(tmp_path, "--ref", "nope", "--with", jsb, maestro, "--bridge", patterns)
    err = capsys.readouterr().err
    assert "jsb-patterns: bridged into jsb's ranking, which needs the same reference and metric" in err, err
