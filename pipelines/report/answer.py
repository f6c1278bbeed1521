"""The answer a reader came for, first: per domain, what is shown better or worse than the reference (by how much, at
what level, on how many seeds), what is equivalent or stopped, what is still open, what the next look needs and what
the evidence cost. One function of the domain's verdicts; summary.md, each domain's summary.md, the study README and
the study page print the same text: a line saying what was compared, then one markdown list item per kind of
verdict (issue 64: one sentence of up to 916 characters was read as a wall)."""

from __future__ import annotations

from pipelines.analysis.results import DomainResult
from pipelines.analysis.verdict import OPEN, PairVerdict
from pipelines.report.cost import cost_phrase
from pipelines.report.looks import runs_needed
from pipelines.report.markdown import counted
from pipelines.report.verdicts import capped, interval_text

# why a pair stopped, under each futility rule of a design (pipelines.analysis.design.FUTILITY_RULES)
STOPPED_BECAUSE = {
    "interval": "the design's conditional power to decide them by its cap was below its threshold",
    "small_delta": "this design's rule: Δ's point estimate inside ±{region:g} at a look, whatever its interval",
}


# beside an encoding that joined the study after its design was fixed (the glossary's `joined`)
JOINED_MARK = "(joined family)"


def _names(pairs: list[PairVerdict], with_seeds: bool = True, digits: int | None = None) -> str:
    """The pairs' encodings, by look then name; `with_seeds`: the look and seeds that decided each; `digits`: each
    one's Δ with the interval its verdict rests on (decision_interval: it excludes 0, as the word says)."""

    def one(pair: PairVerdict) -> str:
        look = f"look {pair.look}, " if pair.look else ""
        size = ""
        if digits is not None:
            _, lo, hi = pair.decision_interval()
            size = f" Δ {pair.delta:+.{digits}f} {interval_text(lo, hi, digits)}"
        # an encoding that joined the study is tested in a family of its own: said beside its name (issue 64: the
        # irope ablations were listed among jsb-confirm's better encodings as if of the study's own design)
        name = f"`{pair.a}`" + (f" {JOINED_MARK}" if pair.scope == "joined" else "")
        return f"{name}{size} ({look}{len(pair.seeds_a)} seeds)" if with_seeds else f"{name}{size}"

    return ", ".join(one(pair) for pair in sorted(pairs, key=lambda p: (p.look or 0, p.a)))


def answer_text(result: DomainResult) -> str:
    """One paragraph of markdown: the domain's verdicts against its reference, in the order a reader asks."""
    verdicts = result.verdicts
    if verdicts is None or verdicts.family is None or verdicts.ref is None:
        why = (verdicts.no_tests_reason if verdicts else None) or result.no_tests_reason or "no paired tests"
        return f"{result.heading}: {why}"
    ref, design = verdicts.ref, verdicts.family.design
    every = verdicts.verdicts()
    joined = set(verdicts.joined.verdicts) if verdicts.joined else set()
    provisional = set(verdicts.provisional)
    by_word: dict[str, list[PairVerdict]] = {}
    for name, pair in every.items():
        if name in provisional:
            continue
        key = "capped" if capped(pair, design) else pair.verdict
        by_word.setdefault(key, []).append(pair)
    better, worse = by_word.get("better", []), by_word.get("worse", [])
    level = (
        f"alpha {design.level:.4g} a look, Holm within each look" if design.sequential else f"Holm at {design.alpha:g}"
    )
    chosen = ", chosen from the data at the first look" if design.ref_rule == "data" else ""
    if not every and design.sequential:  # the design's first look not reached: nothing tested yet
        spent = cost_phrase(result)
        return (
            f"{result.heading} (reference `{ref}`{chosen}; a design of {len(design.encodings)} encodings against "
            f"it, looks at {', '.join(map(str, design.looks))} seeds): its first look is not reached, so no pair "
            f"is tested yet; the first look needs {counted(len(verdicts.next_runs), 'more run')}"
            + (f"; {spent}." if spent else ".")
        )
    digits = result.metric.digits
    head = f"{result.heading} (reference `{ref}`{chosen}, {len(every)} encodings against it; {level}; Δ with the "
    head += "interval its verdict rests on):"
    parts = [
        f"better than `{ref}`: {_names(better, digits=digits)}" if better else f"no encoding shown better than `{ref}`",
        f"worse: {_names(worse, digits=digits)}" if worse else "none shown worse",
    ]
    if by_word.get("equivalent"):
        region = result.metric.equivalence
        parts.append(f"equivalent (within ±{region:g}): {_names(by_word['equivalent'], False, digits)}")
    if by_word.get("stopped"):
        # what happened, never a size: a stopped pair's interval may be the widest of the domain
        why = STOPPED_BECAUSE[design.futility].format(region=result.metric.equivalence)
        parts.append(f"stopped for futility ({why}; not shown equivalent): {_names(by_word['stopped'], False)}")
    if by_word.get("capped"):
        parts.append(f"inconclusive at the design's cap ({design.looks[-1]} seeds): {_names(by_word['capped'], False)}")
    still = [pair for pair in by_word.get("inconclusive", []) if pair.a not in joined]
    if still:
        parts.append(f"open: {_names(still, False)}")
    untested = [pair for pair in by_word.get(OPEN, []) if pair.a not in joined]
    if untested:
        parts.append(f"no test yet (one seed): {_names(untested, False)}")
    open_joined = [pair for pair in by_word.get("inconclusive", []) if pair.a in joined]
    if open_joined:
        looks = sorted({pair.look for pair in open_joined if pair.look})
        at = f" at look {', '.join(map(str, looks))} of {len(design.looks)}" if looks else ""
        parts.append(f"{len(open_joined)} joined encoding{'s' * (len(open_joined) > 1)} open{at}")
    if provisional:
        parts.append(f"{len(provisional)} below the design's first look (no verdict yet)")
    runs = verdicts.next_runs
    if runs:
        parts.append(f"the next look needs {runs_needed(len(runs), result)}")
    elif design.sequential:
        parts.append("nothing left to train under the design")
    spent = cost_phrase(result)
    if spent:
        parts.append(spent)
    return "\n".join([head, *(f"- {part}" for part in parts)])


def answer_order(results: list[DomainResult]) -> list[DomainResult]:
    """The domains in the order the answer gives them, in summary.md, on the page and in the README alike: the
    study's, each bridged study right after the domain it is ranked in (the README had them so, summary.md not:
    issue 64 asks that the two agree)."""
    domains = {result.domain for result in results}
    ordered = []
    for result in results:
        if result.ranked_with in domains:
            continue  # given after the domain it is ranked in
        ordered += [result, *(other for other in results if other.ranked_with == result.domain)]
    return ordered


# The study README's answer block: written between these lines by every report of the study (make publish, make
# compare --out), from summary.json's answers, so that the README, summary.md and the page say the same
ANSWER_BEGIN = "<!-- the answer: written from summary.json by make publish / make compare; an edit here is replaced -->"
ANSWER_END = "<!-- end of the answer -->"


def answer_markers_problem(readme: str) -> str | None:
    """Why the answer block of `readme` cannot be rewritten in place, or None: its markers must be one ANSWER_BEGIN
    followed by one ANSWER_END, or neither. A duplicated or out-of-order marker would leave a stale block or an
    orphan marker beside the new one, and which text is the hand-written one is not for a report to guess."""
    marks = [
        (number, kind)
        for number, line in enumerate(readme.splitlines(), start=1)
        for kind, marker in (("begin", ANSWER_BEGIN), ("end", ANSWER_END))
        if marker in line
    ]
    if not marks or [kind for _, kind in marks] == ["begin", "end"]:
        return None
    listed = ", ".join(f"{kind} at line {number}" for number, kind in marks)
    what = "duplicated" if len(marks) > 2 else "out of order" if len(marks) == 2 else "unpaired"
    return (
        f"its answer markers are {what} ({listed}); leave one `{ANSWER_BEGIN}` before one `{ANSWER_END}` (or "
        "neither: the report then writes the block after the title)"
    )


def with_answer_block(readme: str, answers: list[str]) -> str:
    """`readme` with its answer block replaced by `answers` (one paragraph each); a README without one gets it
    after its title. The rest of the README, written by hand, is kept as it is."""
    block = "\n\n".join([ANSWER_BEGIN, "## The answer", *answers, ANSWER_END])
    if ANSWER_BEGIN in readme and ANSWER_END in readme.split(ANSWER_BEGIN, 1)[1]:
        before, rest = readme.split(ANSWER_BEGIN, 1)
        return before + block + rest.split(ANSWER_END, 1)[1]
    title, newline, body = readme.partition("\n") if readme.startswith("# ") else ("", "", readme)
    return f"{title}{newline}\n{block}\n\n{body.lstrip(chr(10))}" if title else f"{block}\n\n{body}"
