"""Paper 000's claims against a study (pipelines.report.paper_claims), on summaries written out by hand: each outcome
follows from the verdicts the summary holds, whichever order a pair is stored in."""

from __future__ import annotations

from pipelines.report.paper_claims import CLAIMS, Claim, claims_rows, finding


def record(verdict: str, delta: float, lo: float, hi: float, score: float, look: int = 2) -> dict:
    return {
        "verdict": verdict,
        "delta": delta,
        "decision_lo": lo,
        "decision_hi": hi,
        "decision_level": 0.99,
        "verdict_look": look,
        "score": score,
    }


def pair(a: str, b: str, verdict: str, delta: float, lo: float, hi: float) -> dict:
    return {"a": a, "b": b, "verdict": verdict, "delta": delta, "ci": [lo, hi], "p_holm": 0.01}


def domain(encodings: dict, pairs: list, lower_is_better: bool = True) -> dict:
    return {"reference": "rope10k", "lower_is_better": lower_is_better, "encodings": encodings, "pairs": pairs}


JSB = domain(
    {
        "rope10k": {"verdict": "", "delta": 0.0, "score": 0.80},
        "darope": record("better", -0.02, -0.03, -0.01, 0.78),
        "hope": record("inconclusive", -0.01, -0.03, 0.01, 0.79),
        "nope": record("worse", 0.40, 0.35, 0.45, 1.20),
    },
    [
        pair("hope", "darope", "worse", 0.012, 0.004, 0.020),  # stored hope-first: darope is the better one
        pair("hope", "nope", "better", -0.41, -0.46, -0.36),
        pair("darope", "nope", "better", -0.42, -0.47, -0.37),
    ],
)


def test_a_pair_stored_in_the_other_order_is_turned_round():
    claim = next(c for c in CLAIMS if c.a == "darope" and c.b == "hope")
    found = finding(claim, {"domains": {"jsb": JSB}}, "jsb")
    assert found.outcome == "reproduces"
    assert found.evidence.startswith("darope − hope -0.0120 [-0.0200, -0.0040] (95%), better")


def test_against_the_reference_the_designs_verdict_and_interval_are_read_either_way():
    beats = Claim("F", "darope beats rope10k", "better", ("jsb",), "darope", "rope10k")
    found = finding(beats, {"domains": {"jsb": JSB}}, "jsb")
    assert (found.outcome, found.evidence) == (
        "reproduces",
        "darope − rope10k -0.0200 [-0.0300, -0.0100] (99%), better (look 2)",
    )
    reverse = Claim("F", "rope10k beats darope", "better", ("jsb",), "rope10k", "darope")
    found = finding(reverse, {"domains": {"jsb": JSB}}, "jsb")
    assert (found.outcome, found.evidence) == (
        "contradicts",
        "rope10k − darope +0.0200 [+0.0100, +0.0300] (99%), worse (look 2)",
    )
    not_better = Claim("F", "hope not better than rope10k", "not_better", ("jsb",), "hope", "rope10k")
    assert finding(not_better, {"domains": {"jsb": JSB}}, "jsb").outcome == "undecided"


def test_first_and_last_need_every_pair_decided_and_fall_on_one_decided_the_other_way():
    summary = {"domains": {"jsb": JSB}}
    last = Claim("F", "nope last", "last", ("jsb",), "nope", among=("rope10k", "darope", "hope", "nope"))
    assert finding(last, summary, "jsb").outcome == "reproduces"
    first = Claim("F", "darope first", "first", ("jsb",), "darope", among=("rope10k", "darope", "hope", "nope"))
    assert finding(first, summary, "jsb").outcome == "reproduces"  # hope (pair), rope10k (design), nope (pair)
    hope_first = Claim("F", "hope first", "first", ("jsb",), "hope", among=("rope10k", "darope", "hope", "nope"))
    found = finding(hope_first, summary, "jsb")
    assert (found.outcome, found.evidence) == ("contradicts", "2 of 4 by score; darope: worse")
    open_pair = domain({**JSB["encodings"], "pope": record("open", 0.01, -0.1, 0.1, 0.85)}, JSB["pairs"])
    pope_last = Claim("F", "pope last", "last", ("jsb",), "pope", among=("rope10k", "pope"))
    assert finding(pope_last, {"domains": {"jsb": open_pair}}, "jsb").outcome == "undecided"  # an untested newcomer
    open_first = Claim("F", "hope first of two", "first", ("jsb",), "hope", among=("rope10k", "hope"))
    assert (
        finding(open_first, summary, "jsb").evidence == "1 of 2 by score; better than 0 of the other 1, the rest open"
    )


def test_an_equivalent_verdict_contradicts_a_claimed_difference_and_a_missing_domain_is_said():
    equivalent = domain({"rope10k": {"verdict": "", "delta": 0.0, "score": 0.8}, "darope": record("equivalent", 0.001,
                        -0.004, 0.004, 0.801)}, [])  # fmt: skip
    beats = Claim("F", "darope beats rope10k", "better", ("jsb", "hrg"), "darope", "rope10k")
    summary = {"domains": {"jsb": equivalent}}
    assert finding(beats, summary, "jsb").outcome == "contradicts"
    assert (finding(beats, summary, "hrg").outcome, finding(beats, summary, "hrg").evidence) == (
        "no study",
        "no hrg study in this comparison",
    )


def test_a_mean_rank_is_decided_only_where_nemenyi_separates():
    friedman = {"blocks": ["jsb", "maestro"], "cd": 2.0, "mean_ranks": {"darope": 1.0, "hope": 2.0, "nope": 4.0}}
    claim = Claim("F", "darope best mean rank", "mean_rank_first", ("all",), "darope")
    together = {"friedman": {"domains": {**friedman, "not_separated": [["darope", "hope"], ["nope"]]}}}
    assert finding(claim, together, "all").evidence.endswith("Nemenyi separates it from 1 of the other 2")
    apart = {"friedman": {"domains": {**friedman, "not_separated": [["darope"], ["hope"], ["nope"]]}}}
    found = finding(claim, apart, "all")
    assert (found.outcome, found.evidence) == (
        "reproduces",
        "1 of 3 (mean rank 1.00 over JSB, MAESTRO; Nemenyi CD 2.0)",
    )


def test_every_claim_renders_a_row_per_domain_with_its_outcome_in_bold_when_decided():
    rows = claims_rows({"domains": {"jsb": JSB}, "friedman": {}})
    assert len(rows) == sum(len(claim.domains) for claim in CLAIMS)
    outcomes = {row[3] for row in rows}
    assert outcomes <= {"**reproduces**", "**contradicts**", "undecided", "no study"}
    jsb_darope_hope = next(row for row in rows if row[1].startswith("DaRoPE improves over HoPE") and row[2] == "JSB")
    assert jsb_darope_hope[3] == "**reproduces**"
