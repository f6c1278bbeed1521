"""Paper 000's Figure 3 and Figure 4 claims, held against what a compared study decides at its own scale.

Each claim is data (CLAIMS): the paper's words, which encodings, which domains, and what would reproduce it. Its
outcome in a domain is read from the study's summary.json, never recomputed:

- a pair against the study's reference is the design's verdict (`encodings[e].verdict`, its decision interval);
- any other pair is the every-pair table's (`pairs`: a fixed-sample paired test, Holm over the table);
- "first" / "last" among a set: decided only when every pair of the claimed encoding with the set's others is
  decided its way (`reproduces`), contradicted as soon as one is decided the other way or equivalent (any other
  word, `inconclusive`, `stopped` or `open`, leaves the pair open);
- a mean rank across domains: decided only where the Nemenyi test separates the encodings (`friedman`).

An outcome is `reproduces` (decided as the paper says), `contradicts` (decided otherwise, an `equivalent` verdict
against a claimed difference included), `undecided` (nothing decided either way yet) or `no study` (the study holds
no such domain or encoding). Rendered into the README by pipelines.report.readme_tables
(`<!-- table: paper-claims docs/results/<study> -->`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.report.page_tables import interval_text, number_text

PAPER_ROSTER = ("rope10k", "rope500k", "nope", "hope", "pope", "darope")  # Figure 3's encodings (roster `paper`)
NLL_DOMAINS = ("jsb", "maestro", "hrg", "sleep_edf")  # Figure 3's four, in its order
FLIPPED = {"better": "worse", "worse": "better"}
READERS_NAMES = {"jsb": "JSB", "maestro": "MAESTRO", "hrg": "GRCh38", "sleep_edf": "Sleep-EDF"}


@dataclass(frozen=True)
class Claim:
    """One claim of the paper: `kind` says what would reproduce it (see the module doc):
    "better" (a better than b), "not_better" (a not better than b), "first" / "last" (a among `among`),
    "group" (every encoding of `a_group` better than every one of `b_group`), "mean_rank_first" (a among `among`)."""

    figure: str
    words: str
    kind: str
    domains: tuple[str, ...]
    a: str = ""
    b: str = ""
    among: tuple[str, ...] = PAPER_ROSTER
    a_group: tuple[str, ...] = ()
    b_group: tuple[str, ...] = ()


CLAIMS = (
    Claim("Figure 3", "DaRoPE improves over HoPE on all four datasets", "better", NLL_DOMAINS, "darope", "hope"),
    Claim("Figure 3", "DaRoPE systematically beats RoPE-10k", "better", NLL_DOMAINS, "darope", "rope10k"),
    Claim("Figure 3", "NoPE last on every domain (off-axis)", "last", NLL_DOMAINS, "nope"),
    Claim(
        "Figure 3", "HoPE does not beat RoPE on MAESTRO and HRG", "not_better", ("maestro", "hrg"), "hope", "rope10k"
    ),
    Claim("Figure 3", "PoPE reaches the lowest HRG NLL", "first", ("hrg",), "pope"),
    Claim("Figure 3", "DaRoPE leads JSB, MAESTRO and Sleep-EDF", "first", ("jsb", "maestro", "sleep_edf"), "darope"),
    Claim("Figure 3", "DaRoPE has the best mean rank across the datasets", "mean_rank_first", ("all",), "darope"),
    Claim(
        "Figure 4",
        "CoPE, HoPE, DaRoPE and RoPE strongest on the synthetic tasks; PoPE and NoPE trail",
        "group",
        ("synthetic",),
        a_group=("cope", "hope", "darope", "rope10k"),
        b_group=("pope", "nope"),
    ),
)


@dataclass(frozen=True)
class Finding:
    outcome: str  # reproduces, contradicts, undecided, no study
    evidence: str  # the figures it rests on, as the study wrote them


# ------------------------------------------------------------------------------------------- pair lookups


def pair_verdict(entry: dict, a: str, b: str) -> tuple[str, str] | None:
    """(a's verdict against b, its figures) in one domain, from the design where a or b is the reference, else from
    the every-pair table; None where the study holds no such pair."""
    ref, encodings = entry["reference"], entry["encodings"]
    for x, y, sign in ((a, b, 1), (b, a, -1)):
        if y == ref and x in encodings and x != ref:
            record = encodings[x]
            level = record.get("decision_level")
            look = record.get("verdict_look")
            word = record["verdict"] if sign == 1 else FLIPPED.get(record["verdict"], record["verdict"])
            text = delta_text(entry, a, b, sign, record["delta"], record.get("decision_lo"), record.get("decision_hi"))
            text += f" ({100 * level:.3g}%)" if isinstance(level, float) else ""
            return word, f"{text}, {word}" + (f" (look {look})" if isinstance(look, int) and look else "")
    for pair in entry.get("pairs", []):
        if {pair["a"], pair["b"]} == {a, b}:
            sign = 1 if pair["a"] == a else -1
            word = pair["verdict"] if sign == 1 else FLIPPED.get(pair["verdict"], pair["verdict"])
            text = delta_text(entry, a, b, sign, pair["delta"], *pair["ci"])
            return word, f"{text} (95%), {word} (every-pair table, p Holm {pair['p_holm']:.3g})"
    return None


def delta_text(entry: dict, a: str, b: str, sign: int, delta: float, lo: float | None, hi: float | None) -> str:
    """'a − b +0.0123 [+0.0010, +0.0236]': a stored difference (and interval) of the other order turned round."""
    digits = 4 if entry["lower_is_better"] else 3
    if sign == -1:
        lo, hi = (None if hi is None else -hi), (None if lo is None else -lo)
    return f"{a} − {b} {number_text(sign * delta, digits, signed=True)} {interval_text(lo, hi, digits, signed=True)}"


# ------------------------------------------------------------------------------------------- outcomes


def finding(claim: Claim, summary: dict, domain: str) -> Finding:
    if claim.kind == "mean_rank_first":
        return mean_rank_finding(claim, summary)
    entry = summary["domains"].get(domain)
    if entry is None or entry.get("ranked_with"):
        return Finding("no study", f"no {domain} study in this comparison")
    if claim.kind in ("better", "not_better"):
        found = pair_verdict(entry, claim.a, claim.b)
        if found is None:
            return Finding("no study", f"{claim.a} or {claim.b} not trained here")
        word, text = found
        if claim.kind == "better":
            outcome = "reproduces" if word == "better" else "contradicts" if word in ("worse", "equivalent") else ""
        else:
            outcome = "reproduces" if word in ("worse", "equivalent") else "contradicts" if word == "better" else ""
        return Finding(outcome or "undecided", text)
    if claim.kind in ("first", "last"):
        return extreme_finding(claim, entry)
    return group_finding(claim, entry)


def extreme_finding(claim: Claim, entry: dict) -> Finding:
    """`a` first (or last) among the claim's encodings present in the domain, by its pairs with each of them."""
    present = [name for name in claim.among if name in entry["encodings"]]
    if claim.a not in present:
        return Finding("no study", f"{claim.a} not trained here")
    want = "better" if claim.kind == "first" else "worse"
    words = {}
    for other in (name for name in present if name != claim.a):
        found = pair_verdict(entry, claim.a, other)
        words[other] = found[0] if found else "untested"
    by_score = sorted(present, key=lambda name: entry["encodings"][name]["score"], reverse=not entry["lower_is_better"])
    place = by_score.index(claim.a) + 1
    ordinal = f"{place} of {len(present)} by score"
    against = [other for other, word in words.items() if word in (FLIPPED[want], "equivalent")]
    held = [other for other, word in words.items() if word == want]
    if against:
        return Finding("contradicts", f"{ordinal}; {', '.join(f'{o}: {words[o]}' for o in against)}")
    if len(held) == len(words):
        return Finding("reproduces", f"{ordinal}; {want} than each of the other {len(words)}")
    return Finding("undecided", f"{ordinal}; {want} than {len(held)} of the other {len(words)}, the rest open")


def group_finding(claim: Claim, entry: dict) -> Finding:
    """Every encoding of the leading group better than every one of the trailing group."""
    pairs = [(a, b) for a in claim.a_group for b in claim.b_group]
    words = {pair: pair_verdict(entry, *pair) for pair in pairs}
    if any(found is None for found in words.values()):
        return Finding("no study", "an encoding of the claim not trained here")
    against = [f"{a} vs {b}: {found[0]}" for (a, b), found in words.items() if found[0] in ("worse", "equivalent")]
    held = sum(found[0] == "better" for found in words.values())
    if against:
        return Finding("contradicts", f"{held} of {len(pairs)} pairs decided as claimed; {', '.join(against)}")
    outcome = "reproduces" if held == len(pairs) else "undecided"
    return Finding(outcome, f"{held} of {len(pairs)} pairs decided as claimed, the rest open")


def mean_rank_finding(claim: Claim, summary: dict) -> Finding:
    """`a`'s mean rank across the study's domains against the claim's others, decided only by Nemenyi."""
    friedman = summary.get("friedman", {}).get("domains", {})
    ranks = friedman.get("mean_ranks") or {}
    present = [name for name in claim.among if name in ranks]
    if claim.a not in present or len(present) < 2:
        return Finding("no study", "not ranked across domains here")
    by_rank = sorted(present, key=lambda name: ranks[name])
    place = by_rank.index(claim.a) + 1
    together = [set(group) for group in friedman.get("not_separated", [])]

    def separated(x: str, y: str) -> bool:
        return not any(x in group and y in group for group in together)

    others = [name for name in present if name != claim.a]
    blocks = ", ".join(READERS_NAMES.get(block, block) for block in friedman["blocks"])
    text = f"{place} of {len(present)} (mean rank {ranks[claim.a]:.2f} over {blocks}; Nemenyi CD {friedman['cd']:.1f})"
    ahead = [name for name in by_rank[: place - 1] if separated(name, claim.a)]
    if ahead:
        return Finding("contradicts", f"{text}; {', '.join(ahead)} separated ahead")
    if place == 1 and all(separated(claim.a, name) for name in others):
        return Finding("reproduces", text)
    return Finding("undecided", f"{text}; Nemenyi separates it from {sum(separated(claim.a, o) for o in others)} "
                   f"of the other {len(others)}")  # fmt: skip


def claims_rows(summary: dict) -> list[list[str]]:
    """A row per (claim, domain): the figure, the claim, the domain, the outcome (bold where decided), its figures."""
    rows = []
    for claim in CLAIMS:
        for domain in claim.domains:
            found = finding(claim, summary, domain)
            outcome = f"**{found.outcome}**" if found.outcome in ("reproduces", "contradicts") else found.outcome
            where = "across domains" if domain == "all" else READERS_NAMES.get(domain, domain)
            rows.append([claim.figure, claim.words, where, outcome, found.evidence])
    return rows
