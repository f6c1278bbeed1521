"""Whether an exploratory study's verdicts hold in a confirmatory one (pipelines.report.replication): each word on
hand-set verdicts, a study set against itself (every decided verdict holds, every open one stays open), and the
refusals: two studies with different references, a confirmatory study whose reference was chosen from its data, a
study as its own replication (or a copy of it), two studies at other settings (named with --other-settings); and
summary.json records the settings it is told by."""

from __future__ import annotations

import json

import pytest

from pipelines.analysis.design import REF_RULES
from pipelines.report.replication import compare_verdicts, main, replication_table
from tests.run_fixtures import lm_domain, study
from tests.sample_fixtures import REPO


def summary(reference, verdicts, seeds=(0, 1, 2), rule=REF_RULES["default"], settings=None):
    """A summary.json with one domain's encodings: name -> (verdict, delta)."""
    encodings = {name: {"verdict": v, "delta": d, "seeds_used": "3/10", "verdict_look": 1} for name, (v, d) in
                 verdicts.items()}  # fmt: skip
    encodings[reference] = {"verdict": "", "delta": 0.0}
    domain = {"reference": reference, "reference_rule": rule, "encodings": encodings}
    domain |= {"seeds": {"expected": list(seeds), "used": list(seeds)}}
    domain |= {"settings": settings or {"model.n_layer": 2, "trainer.max_steps": 300}}
    return {"domains": {"jsb": domain}}


EXPLORATORY = summary("rope10k", {
    "nope": ("worse", 1.3), "alibi": ("worse", 0.1), "fox": ("stopped", 0.004), "irope": ("inconclusive", -0.1),
    "hope": ("inconclusive", 0.02), "prope": ("stopped", 0.0), "lerope": ("stopped", 0.001),
    "only_here": ("worse", 0.5),
})  # fmt: skip
CONFIRMATORY = summary("rope10k", {
    "nope": ("worse", 1.2), "alibi": ("better", -0.05), "fox": ("inconclusive", 0.01), "irope": ("better", -0.09),
    "hope": ("inconclusive", 0.03), "prope": ("worse", 0.02), "lerope": ("equivalent", -0.002),
}, seeds=(10, 11, 12))  # fmt: skip


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


def _folders(tmp_path, **studies):
    """Each summary.json written into a folder of its name under tmp_path; the folders."""
    for name, data in studies.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(data))
    return [tmp_path / name for name in studies]


@pytest.mark.parametrize(
    ("confirmatory", "message"),
    [
        (
            summary("rope10k", {"nope": ("worse", 1.2)}, seeds=(10, 11, 12), rule=REF_RULES["data"]),
            "{b}: its reference `rope10k` was chosen from the data: a study whose reference was not fixed before its "
            "scores were read confirms nothing",
        ),
        (
            summary("rope10k", {"nope": ("worse", 1.2)}, seeds=(10, 11, 12), rule=REF_RULES["unrecorded"]),
            "{b}: its reference `rope10k` was not recorded: a study whose reference",
        ),
        (
            summary("rope10k", {"nope": ("worse", 1.2)}),
            "{b}: trains jsb at {a}'s settings on its seeds 0, 1, 2: the same runs replicate nothing",
        ),
        (
            summary("rope10k", {"nope": ("worse", 1.2)}, seeds=(10, 11), settings={"model.n_layer": 4}),
            "{b} trains jsb at other settings than {a} (model.n_layer 2 / 4; trainer.max_steps 300 / (not set)): its "
            "verdicts answer another question; pass --other-settings",
        ),
    ],
    ids=["reference from the data", "reference unrecorded", "a copy of the study", "other settings"],
)
def test_a_study_that_cannot_be_the_replication_is_refused_by_name(tmp_path, capsys, confirmatory, message):
    a, b = _folders(tmp_path, a=EXPLORATORY, b=confirmatory)
    with pytest.raises(SystemExit) as exit_:
        main(["--exploratory", str(a), "--confirmatory", str(b)])
    assert exit_.value.code == 1
    assert f"error: {message.format(a=a, b=b)}" in capsys.readouterr().err


def test_the_published_studies_at_other_settings_are_named_and_a_study_is_not_its_own_replication(capsys):
    """maestro-cpu (4 layers, 300 steps) against maestro-confirm (2 layers, 600 steps): both summary.json said only
    preset "cpu", and the report called one the other's replication; their settings come from study.json where the
    summary does not record them. jsb-cpu's reference was chosen from its data: it cannot be the confirmatory one."""
    results = REPO / "docs" / "results"
    maestro = ["--exploratory", str(results / "maestro-cpu"), "--confirmatory", str(results / "maestro-confirm")]
    with pytest.raises(SystemExit):
        main([*maestro, "--domain", "maestro"])
    assert "model.n_layer 4 / 2; trainer.max_steps 300 / 600" in capsys.readouterr().err
    assert main([*maestro, "--domain", "maestro", "--other-settings"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "at other settings (exploratory / confirmatory): model.n_layer 4 / 2; trainer.max_steps 300 / 600\n"
    )
    for exploratory, confirmatory in (("jsb-confirm", "jsb-cpu"), ("jsb-cpu", "jsb-cpu")):
        with pytest.raises(SystemExit):
            main(["--exploratory", str(results / exploratory), "--confirmatory", str(results / confirmatory)])
        err = capsys.readouterr().err
        assert ("chosen from the data" if exploratory != confirmatory else "a study is not its own replication") in err
    assert main(["--exploratory", str(results / "jsb-cpu"), "--confirmatory", str(results / "jsb-confirm")]) == 0


def test_summary_json_records_the_settings_every_run_of_the_domain_was_trained_with(tmp_path):
    lm_domain(tmp_path / "runs", "jsb", {"darope": [0.2, 1.4, 0.6], "nope": [0.5, 1.7, 0.9]}, n_layer=3)
    study(tmp_path / "runs", None, tmp_path / "out")
    settings = json.loads((tmp_path / "out" / "summary.json").read_text())["domains"]["jsb"]["settings"]
    assert settings["model.n_layer"] == 3 and settings["trainer.max_steps"] == 800 and settings["effective batch"] == 4
    assert settings["data_hashes.eval/test"].startswith("jsb-") and "seed" not in settings and "pe.name" not in settings
