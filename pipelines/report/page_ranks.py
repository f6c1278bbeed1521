"""What the study page says of its ranks (pipelines.report.html), from summary.json alone: where a domain's rank column
holds encodings bridged in from a study at other settings, why its ranks differ from the domain's own study page, how
the mean rank ranks each domain again over the encodings every domain scores, and what P(rank 1) rests on where a
bridged Δ enters it and the Nemenyi test separates no pair (issue 64: study-cpu's MAESTRO ranks differed from
maestro-confirm's own page, xpos 3 against 1, and P(rank 1) 0.78 for local_global rested in part on a bridged Δ, with
nothing said).

Every rank here is derived from the ranks summary.json records: a domain's rank column ranks its own encodings and the
bridged ones in one ranking (pipelines.analysis.study.group_ranks), so ranking a subset of them again by those ranks
gives the ranks the subset's own scores would (ties stay ties).
"""

from __future__ import annotations

import scipy.stats as sps

from pipelines.analysis.results import bridged_settings_text

SHOWN_MOVES = 3  # an own encoding's rank moved by the bridged ones: the first few named, best first


def _ranked(records: dict[str, dict]) -> dict[str, float]:
    return {name: record["rank"] for name, record in records.items() if isinstance(record.get("rank"), int | float)}


def reranked(ranks: dict[str, float], among: set[str]) -> dict[str, float]:
    """The ranks of the encodings of `among` ranked among themselves, from their ranks in a larger ranking (ties
    averaged, as the ranking's own)."""
    names = sorted(name for name in ranks if name in among)
    again = sps.rankdata([ranks[name] for name in names], method="average")
    return {name: float(rank) for name, rank in zip(names, again, strict=True)}


def bridges_of(summary: dict) -> dict[str, list[str]]:
    """Each domain whose ranking a study bridges into -> the bridged studies' names (summary.json's `ranked_with`)."""
    bridges: dict[str, list[str]] = {}
    for name, domain in summary["domains"].items():
        if domain.get("ranked_with"):
            bridges.setdefault(domain["ranked_with"], []).append(name)
    return bridges


def bridged_encodings(summary: dict) -> dict[str, dict[str, str]]:
    """encoding -> {domain: the bridged study it is ranked by there}: the encodings a domain holds no runs of, ranked
    in it by their Δ to a bridged study's own reference runs."""
    found: dict[str, dict[str, str]] = {}
    for domain, names in bridges_of(summary).items():
        own = set(summary["domains"][domain]["encodings"])
        for name in names:
            for encoding in summary["domains"][name]["encodings"]:
                if encoding not in own:
                    found.setdefault(encoding, {})[domain] = name
    return found


def _fmt(rank: float) -> str:
    return f"{rank:g}"


def leaderboard_rank_notes(summary: dict) -> list[str]:
    """Per domain that a study is bridged into: what its rank column ranks, and which of its own encodings' ranks
    that moves from the ranks among its own encodings (those of the domain's own study page), best first. Text with
    `code` spans."""
    notes = []
    by_encoding = bridged_encodings(summary)
    for domain, names in bridges_of(summary).items():
        records = summary["domains"][domain]["encodings"]
        ranks = _ranked(records)
        own = reranked(ranks, set(records))
        bridged = {encoding: where[domain] for encoding, where in by_encoding.items() if domain in where}
        moved = sorted((name for name in own if own[name] != ranks[name]), key=lambda name: (ranks[name], name))
        studies = " and ".join(names)
        listed = ", ".join(f"`{e}`" for e in sorted(bridged))
        settings = "; ".join(
            f"{name}: {bridged_settings_text(summary['domains'][name]['bridge_settings'])}" for name in names
        )
        text = (
            f"{domain}'s rank column ranks its {len(records)} encodings together with the {len(bridged)} that "
            f"{studies} bridges into it ({listed}), {len(records) + len(bridged)} "
            f"in all: each bridged encoding by its Δ to {studies}' own `{summary['domains'][names[0]]['reference']}` "
            f"runs, at other settings ({settings}), as if a Δ carried over; the rows of {studies} carry those ranks, "
            f"its reference's row at the reference's rank. So {domain}'s own encodings rank here below the bridged "
            f"ones ahead of them, not as on the page of {domain}'s own study, which ranks its {len(records)} alone"
        )
        if moved:
            shown = ", ".join(f"`{name}` {_fmt(ranks[name])} ({_fmt(own[name])})" for name in moved[:SHOWN_MOVES])
            more = f", and {len(moved) - SHOWN_MOVES} more" if len(moved) > SHOWN_MOVES else ""
            text += f"; here (among {domain}'s own {len(records)}): {shown}{more}"
        notes.append(text + ".")
    return notes


def domain_rankings(summary: dict) -> dict[str, dict[str, float]]:
    """Each ranked domain's ranking as the rank columns have it: its own encodings' ranks and those of the encodings
    bridged into it (a bridged study's rows carry its domain's ranks); none of a domain the study does not rank
    (`domains_not_ranked`: below its design's first look, absent from studies published before it)."""
    unranked = summary.get("domains_not_ranked") or {}
    rankings = {}
    for name, domain in summary["domains"].items():
        if domain.get("ranked_with") or name in unranked:
            continue
        rankings[name] = _ranked(domain["encodings"])
    for encoding, where in bridged_encodings(summary).items():
        for domain, study in where.items():
            if domain in rankings and study not in unranked:
                rankings[domain][encoding] = summary["domains"][study]["encodings"][encoding]["rank"]
    return rankings


def mean_rank_notes(summary: dict) -> list[str]:
    """What the mean rank and P(rank 1) rest on, for a study of several ranked domains: each domain ranked again over
    the encodings every one scores (the best's ranks spelt out), and where the encodings P(rank 1) favours are
    ranked in a domain by a bridged Δ, that, with what the Nemenyi test separates. Text with `code` spans."""
    means = summary.get("mean_rank") or {}
    rankings = domain_rankings(summary)
    if len(rankings) < 2 or not means:
        return []
    common = set(means)
    again = {domain: reranked(ranks, common) for domain, ranks in rankings.items()}
    best = min(means, key=lambda name: (means[name]["mean"], name))
    parts = ", ".join(f"{domain} {_fmt(again[domain][best])}" for domain in again)
    notes = [
        f"The mean rank ranks each domain again over the {len(common)} encodings scored in every domain, so its "
        f"ranks are not the leaderboard's rank columns (those rank every encoding a domain holds): `{best}`'s "
        f"{means[best]['mean']:.2f} is the mean of {parts}."
    ]
    bridged = bridged_encodings(summary)
    favoured = sorted(
        (name for name, record in means.items() if _positive(record.get("p_rank_1"))),
        key=lambda name: (-means[name]["p_rank_1"], name),
    )
    resting = [name for name in favoured if name in bridged]
    if resting:
        which = ", ".join(
            f"`{name}` ({means[name]['p_rank_1']:.2f}; bridged in "
            + ", ".join(f"{domain} from {study}" for domain, study in bridged[name].items())
            + ")"
            for name in resting
        )
        text = (
            f"P(rank 1) rests in part on a bridged Δ for {which}: in that domain each is ranked by its Δ to the "
            "bridged study's own reference runs at other settings, read as if it carried over (a bridge: a study of "
            "one domain at other settings, ranked in that domain; see the note above the table)"
        )
        notes.append(text + nemenyi_clause(summary, favoured[0]) + ".")
    return notes


def nemenyi_clause(summary: dict, name: str) -> str:
    """What the Nemenyi test over the domains says of `name`, the encoding P(rank 1) favours most: that it separates
    no pair (or `name` from none, or from only some, of the others), with the critical difference against the widest
    gap in mean rank; nothing where the test did not run."""
    outcome = (summary.get("friedman") or {}).get("domains") or {}
    if "not_run" in outcome or not outcome.get("mean_ranks"):
        return ""
    ranks = outcome["mean_ranks"]
    gap = max(ranks.values()) - min(ranks.values())
    groups = outcome["not_separated"]
    figures = f"its critical difference {outcome['cd']:.2f}, the widest gap in mean rank {gap:.2f}"
    if len(groups) == 1 and set(groups[0]) == set(ranks):
        what = f"separates no pair of the {len(ranks)}"
    else:
        kept = {other for group in groups if name in group for other in group} - {name}
        what = (
            f"separates `{name}` from {len(ranks) - 1 - len(kept)} of the {len(ranks) - 1} others only"
            if len(kept) < len(ranks) - 1
            else f"separates `{name}` from none of the {len(ranks) - 1} others"
        )
    return (
        f"; and the Nemenyi test over the {len(outcome['blocks'])} domains {what} ({figures}): P(rank 1) is the "
        "share of resamples of the training seeds where it ranks first, a descriptive figure, not a test that it is "
        "best"
    )


def _positive(value) -> bool:
    return isinstance(value, int | float) and value > 0
