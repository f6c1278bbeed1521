"""No word on a study page beside an interval that contradicts it (issue 64): the extrapolation tables printed 95%
intervals excluding 0 beside `inconclusive` (8 rows on jsb-cpu, 6 on maestro-confirm, 10 of 20 in one synthetic
split), the verdict having been reached after Holm. Each row now shows the interval its verdict rests on, at the
Holm level of its rank (TOST's for an equivalent pair): better and worse exclude 0 on their side, inconclusive and
stopped hold it, equivalent lies inside the region. Checked on a freshly compared study, and on every published
study's summary.json through the very function the page renders its tables with."""

from __future__ import annotations

import json

import pytest

from pipelines.report.page_detail import UNCORRECTED, extrapolation_tables
from tests.run_fixtures import study
from tests.sample_fixtures import REPO
from tests.test_study import _study_tree

PAST_REGION = 0.005  # NLL past L, in every domain
PUBLISHED = sorted(path.parent for path in (REPO / "docs" / "results").glob("*/summary.json"))


def _shown(summary: dict) -> list[tuple[str, str, str, float, float, str]]:
    """Every tested row of the page's extrapolation tables: (table, encoding, verdict, lo, hi, the interval's text
    with its label), as the page shows them."""
    rows = []
    for table in extrapolation_tables(summary):
        for row in table["rows"]:
            verdict, delta = row["cells"]["verdict"].value, row["cells"]["delta"]
            if verdict in ("", "reference") or not isinstance(delta.lo, int | float):
                continue
            rows.append((table["title"], row["encoding"], verdict, delta.lo, delta.hi, delta.sub))
    return rows


def _contradiction(verdict: str, lo: float, hi: float) -> bool:
    """Whether [lo, hi] says other than `verdict` of Δ = NLL(encoding) - NLL(reference) past L (lower is better)."""
    if verdict == "better":
        return not hi < 0
    if verdict == "worse":
        return not lo > 0
    if verdict == "equivalent":
        return not -PAST_REGION < lo <= hi < PAST_REGION
    return lo > 0 or hi < 0  # inconclusive or stopped: nothing shown


def test_a_fresh_study_shows_each_extrapolation_verdict_beside_its_own_interval(tmp_path):
    _study_tree(tmp_path / "runs")
    study(tmp_path / "runs", None, tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    tested = [e for e in summary["extrapolation"] if e["past_verdict"]]
    assert tested and all(isinstance(e["past_decision_level"], float) for e in tested)
    rows = _shown(summary)
    assert len(rows) == len(tested)
    for title, encoding, verdict, lo, hi, text in rows:
        assert UNCORRECTED not in text and text.endswith("%"), (title, encoding, text)
        assert not _contradiction(verdict, lo, hi), (title, encoding, verdict, lo, hi)


@pytest.mark.parametrize("folder", PUBLISHED, ids=[folder.name for folder in PUBLISHED])
def test_no_published_extrapolation_row_shows_an_interval_that_contradicts_its_word(folder):
    """Every published study: a row's interval at its verdict's level agrees with the word. A summary.json written
    before rows recorded that interval shows the 95% one labelled as before Holm (never as the verdict's), until
    the study is published again."""
    summary = json.loads((folder / "summary.json").read_text())
    rows = _shown(summary)
    recorded = [e for e in summary["extrapolation"] if "past_decision_lo" in e]
    for title, encoding, verdict, lo, hi, text in rows:
        if recorded:
            assert not _contradiction(verdict, lo, hi), (title, encoding, verdict, lo, hi)
        elif _contradiction(verdict, lo, hi):
            assert text.endswith(UNCORRECTED), (title, encoding, verdict, text)
