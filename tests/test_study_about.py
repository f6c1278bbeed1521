"""What a study page says first (issue 64): which study it is (its folder's name in its title and heading), where
it stands (complete, look k of N, superseded by another study, as the study's folder says in superseded_by.json),
the scale its runs were trained at (from their manifests) and links to its README and the studies it joins or
supersedes; all of it recorded in summary.json as data, which the page renders."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pipelines.analysis.design import SETTLE_FILE, Design
from pipelines.compare import main as compare_main
from pipelines.report.html import INDEX
from pipelines.report.study_about import SUPERSEDED_BY, read_superseded_by, study_about
from tests.run_fixtures import CONTEXT, lm_domain, study
from tests.sample_fixtures import REPO

X = np.array([0.2, 1.4, 0.6, 2.5, 1.0, 0.8])
# the futility rule of the published JSB designs: |Δ|'s point estimate inside the region stops a pair
DESIGN = Design((0, 1, 2), (2, 3), ref="darope", encodings=("hope", "nope", "prope"), futility="small_delta")


def _status(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page.split('id="status">', 1)[1].split("</p>", 1)[0])).strip()


def _designed(root, hope_noise: float) -> None:
    """jsb under DESIGN at seeds 0 and 1 (its first look): `nope` far worse; `prope` 0.001 worse with seed
    differences 0.08 apart (stopped for futility: its |Δ| inside the region, its interval far wider); `hope` 0.001
    worse, its seed differences spread by `hope_noise` (none: shown equivalent; large: left open)."""
    lm_domain(root, "jsb", {"darope": X}, seeds=(0, 1), seed_step=0.01)
    lm_domain(root, "jsb", {"nope": X + 0.3}, seeds=(0, 1), seed_step=0.012)
    lm_domain(root, "jsb", {"prope": X + 0.021}, seeds=(0, 1), seed_step=0.05)  # -0.019 and +0.021 a seed
    lm_domain(root, "jsb", {"hope": X + 0.001}, seeds=(0, 1), seed_step=0.01 + hope_noise)
    (root / "jsb" / SETTLE_FILE).write_text(json.dumps({"design": DESIGN.to_json(), "looks": []}))


def test_a_page_names_its_study_its_scale_and_the_study_that_supersedes_it(tmp_path):
    """Two studies side by side, as under docs/results: the older one's folder says the newer supersedes it. Each
    page's title and heading name its study; the older one's status names the newer and links it, the newer one
    links back as the study it supersedes; both link their README; the facts table states the manifests' scale."""
    lm_domain(tmp_path / "runs", "jsb", {"darope": X, "nope": X + 0.3})
    results = tmp_path / "results"
    old, new = results / "jsb-old", results / "jsb-new"
    old.mkdir(parents=True)
    (old / "README.md").write_text("# The old study\n")
    because = "the confirmatory study, its design fixed before its runs"
    (old / SUPERSEDED_BY).write_text(json.dumps({"study": "jsb-new", "because": because}))
    study(tmp_path / "runs", None, old)
    study(tmp_path / "runs", None, new)

    summary = json.loads((old / "summary.json").read_text())
    assert summary["study"] == {
        "name": "jsb-old",
        "readme": True,
        "joins": [],
        "bridges": [],
        "superseded_by": {"study": "jsb-new", "because": because},
        "supersedes": [],
    }
    # lm_domain's manifests: 2 layers, context CONTEXT, 800 steps of batch 4, 5000 parameters
    assert summary["domains"]["jsb"]["scale"] == {
        "layers": [2],
        "d_model": [32],
        "context": [CONTEXT],
        "steps": [800],
        "effective_batch": [4],
        "training_tokens": [800 * 4 * CONTEXT],
        "parameters": [5000],
        "reference_parameters": 5000,
    }
    page = (old / INDEX).read_text()
    assert "<title>posbench study jsb-old: jsb</title>" in page
    assert "<h1>posbench study jsb-old: jsb</h1>" in page
    status = _status(page)
    assert status.startswith(f"Status: superseded by jsb-new: {because}. As it was left: ")
    assert '<a href="../jsb-new/index.html">jsb-new</a>' in page and '<a href="README.md">README.md</a>' in page
    cells = dict(re.findall(r'<td data-key="(\w+)">([^<]*)</td>', page.split('class="facts"', 1)[1]))
    assert cells == {
        "parameters": "5,000",
        "layers": "2",
        "context": str(CONTEXT),
        "steps": "800",
        "training_tokens": f"{800 * 4 * CONTEXT:,} (800 steps x 4 sequences x {CONTEXT})",
    }

    newer = (new / INDEX).read_text()
    assert "<h1>posbench study jsb-new: jsb</h1>" in newer and "superseded" not in _status(newer)
    assert "supersedes jsb-old" in _status(newer) and '<a href="../jsb-old/index.html">jsb-old</a>' in newer
    assert "README.md" not in _status(newer)  # it has none


def test_a_malformed_supersession_file_is_refused_before_anything_is_written(tmp_path, capsys):
    lm_domain(tmp_path / "runs", "jsb", {"darope": X, "nope": X + 0.3})
    out = tmp_path / "results"
    out.mkdir()
    (out / SUPERSEDED_BY).write_text(json.dumps({"study": "../elsewhere"}))
    with pytest.raises(SystemExit):
        compare_main(["--runs", str(tmp_path / "runs"), "--out", str(out)])
    assert f"{out / SUPERSEDED_BY}: must be" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == [SUPERSEDED_BY]


@pytest.mark.parametrize(
    ("hope_noise", "status"),
    [(0.0, "complete (look 1 of 2)"), (0.2, "look 1 of 2")],
    ids=["decided-at-look-1", "open-at-look-1"],
)
def test_the_status_is_complete_only_when_no_pair_is_left_open_for_a_look(tmp_path, hope_noise, status):
    _designed(tmp_path / "runs", hope_noise)
    study(tmp_path / "runs", None, tmp_path / "designed")
    summary = json.loads((tmp_path / "designed" / "summary.json").read_text())
    jsb = summary["domains"]["jsb"]
    open_pairs = [r["encoding"] for r in jsb["encodings"].values() if r["verdict"] == "inconclusive"]
    assert jsb["status"] == status and bool(open_pairs) == (status == "look 1 of 2")
    assert _status((tmp_path / "designed" / INDEX).read_text()) == f"Status: {status}."


def test_each_published_supersession_names_a_published_study():
    """docs/results: maestro-cpu is superseded by maestro-confirm (its README's status), jsb-cpu by jsb-confirm (the
    study to believe where the two differ, its README says); each file reads and names a study published beside it."""
    results = REPO / "docs" / "results"
    declared = {path.parent.name: read_superseded_by(path.parent) for path in results.glob(f"*/{SUPERSEDED_BY}")}
    assert {name: record["study"] for name, record in declared.items()} == {
        "maestro-cpu": "maestro-confirm",
        "jsb-cpu": "jsb-confirm",
    }
    for record in declared.values():
        assert (results / record["study"] / "study.json").is_file()
    assert study_about(results / "maestro-confirm")["supersedes"] == ["maestro-cpu"]


def test_the_answer_gives_each_decided_pairs_delta_in_a_list_and_a_stop_no_size(tmp_path):
    """Issue 64: the answer gave no Δ, ran on in one sentence, and a futility stop read "small |Δ|" beside a wide
    interval. Each decided pair is named with summary.json's Δ and the interval its verdict rests on (excluding 0),
    one list item per kind of verdict; a stopped pair gets no size, only what stopped it; the page shows the list
    and a glossary of the words it uses."""
    _designed(tmp_path / "runs", 0.0)
    study(tmp_path / "runs", None, tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    jsb = summary["domains"]["jsb"]
    records = jsb["encodings"]
    assert [records[e]["verdict"] for e in ("nope", "hope", "prope")] == ["worse", "equivalent", "stopped"]
    head, *items = jsb["answer"].split("\n")
    assert head.startswith("**jsb** (reference `darope`") and all(item.startswith("- ") for item in items)
    assert max(len(line) for line in jsb["answer"].split("\n")) < 200
    nope = records["nope"]
    lo, hi = nope["decision_lo"], nope["decision_hi"]
    assert lo > 0  # worse: the interval the verdict rests on excludes 0, as the word says
    assert f"- worse: `nope` Δ {nope['delta']:+.4f} [{lo:+.4f}, {hi:+.4f}] (look 1, 2 seeds)" in items  # NLL: 4 places
    stopped = next(item for item in items if item.startswith("- stopped for futility"))
    assert stopped.endswith(": `prope`") and "Δ +" not in stopped and "small" not in stopped
    assert "whatever its interval" in stopped and "not shown equivalent" in stopped
    # prope's interval is far wider than the region: nothing on the page calls it small
    prope = records["prope"]
    assert prope["decision_hi"] - prope["decision_lo"] > 10 * jsb["equivalence_region"]

    page = (tmp_path / "out" / INDEX).read_text()
    answer = page.split('<div class="answer" data-domain="jsb">', 1)[1].split("</div>", 1)[0]
    assert answer.count("<li>") == len(items) and "<code>nope</code> Δ +" in answer
    terms = re.findall(r"<dt>(\w+)</dt>", page.split('id="glossary"', 1)[1].split("</dl>", 1)[0])
    assert terms == ["look", "Holm", "cap", "futility", "moderated", "TOST", "joined", "bridge"]
    assert "small |Δ|" not in page
