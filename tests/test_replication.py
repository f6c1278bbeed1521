"""Whether an exploratory study's verdicts hold in a confirmatory one (pipelines.report.replication): each word on
hand-set verdicts, a study set against itself (every decided verdict holds, every open one stays open), and the
refusal of two studies with different references."""

from __future__ import annotations

import json

import pytest

from pipelines.report.replication import compare_verdicts, main, replication_table
from tests.sample_fixtures import REPO


def summary(reference, verdicts):
    """A summary.json with one domain's encodings: name -> (verdict, delta)."""
    encodings = {name: {"verdict": v, "delta": d, "seeds_used": "3/10", "verdict_look": 1} for name, (v, d) in
                 verdicts.items()}  # fmt: skip
    encodings[reference] = {"verdict": "", "delta": 0.0}
    return {"domains": {"jsb": {"reference": reference, "encodings": encodings}}}


EXPLORATORY = summary("rope10k", {
    "nope": ("worse", 1.3), "alibi": ("worse", 0.1), "fox": ("stopped", 0.004), "irope": ("inconclusive", -0.1),
    "hope": ("inconclusive", 0.02), "prope": ("stopped", 0.0), "lerope": ("stopped", 0.001),
    "only_here": ("worse", 0.5),
})  # fmt: skip
CONFIRMATORY = summary("rope10k", {
    "nope": ("worse", 1.2), "alibi": ("better", -0.05), "fox": ("inconclusive", 0.01), "irope": ("better", -0.09),
    "hope": ("inconclusive", 0.03), "prope": ("worse", 0.02), "lerope": ("equivalent", -0.002),
})  # fmt: skip


def test_each_encoding_gets_the_word_its_two_verdicts_give():
    words = {row.encoding: row.word for row in compare_verdicts(EXPLORATORY, CONFIRMATORY, "jsb")}
    assert words == {
        "nope": "holds",  # worse in both
        "alibi": "flips",  # worse, then better
        "prope": "flips",  # stopped for futility, then worse
        "lerope": "holds",  # stopped for futility, then equivalent: no difference either way
        "fox": "not yet",  # stopped, then open
        "irope": "new",  # open, then better
        "hope": "open",
    }  # `only_here` is in one study only: no row; the reference has none
    lines = replication_table(compare_verdicts(EXPLORATORY, CONFIRMATORY, "jsb"))
    assert lines[0] == "flips: 2; holds: 2; not yet: 1; new: 1; open: 1 (of 7 encodings)"
    assert (
        lines[4]
        == "| `alibi` | flips | worse (look 1, 3/10 seeds), Δ +0.1000 | better (look 1, 3/10 seeds), Δ -0.0500 |"
    )


def test_a_published_study_against_itself_holds_every_decided_verdict():
    """docs/results/jsb-cpu: 8 worse and 3 stopped for futility (its answer), so 11 hold and 13 stay open."""
    study = json.loads((REPO / "docs" / "results" / "jsb-cpu" / "summary.json").read_text())
    words = [row.word for row in compare_verdicts(study, study, "jsb")]
    assert (words.count("holds"), words.count("open"), len(words)) == (11, 13, 24)


def test_studies_with_other_references_are_refused_and_the_command_writes_its_table(tmp_path, capsys):
    with pytest.raises(ValueError, match="the exploratory study's reference is rope10k, the confirmatory one's darope"):
        compare_verdicts(EXPLORATORY, summary("darope", {"nope": ("worse", 1.0)}), "jsb")
    for name, data in (("a", EXPLORATORY), ("b", CONFIRMATORY)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(data))
    out = tmp_path / "held.md"
    assert main(["--exploratory", str(tmp_path / "a"), "--confirmatory", str(tmp_path / "b"), "--out", str(out)]) == 0
    assert out.read_text().startswith("flips: 2; holds: 2;")
    with pytest.raises(SystemExit):
        main(["--exploratory", str(tmp_path / "a"), "--confirmatory", str(tmp_path / "missing")])
    assert f"{tmp_path / 'missing' / 'summary.json'}: no jsb verdicts to read" in capsys.readouterr().err
