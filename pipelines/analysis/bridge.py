"""A study of one domain at other settings, bridged into that domain's ranking (`make compare BRIDGE=<study>`).

MAESTRO's layer patterns train at 4 layers and 900 steps, its other encodings at 2 layers and 600 (the pilot of
docs/presets.md chose each): two studies, each with its own runs of the reference. Neither can join the other as
runs (a comparison holds the model fixed), yet a cross-domain ranking wants every encoding in every domain. A bridge
ranks the bridged study's encodings inside the domain by their Δ to the bridged study's own reference runs, beside
the domain's encodings' Δ to theirs (pipelines.analysis.study.ranking_groups): it reads a Δ measured at other
settings as if it carried over, so the report names the settings wherever it shows a bridged result (its heading).

What a bridge refuses: another test set (the data hashes differ: the Δ would be over other examples), and no
difference at all (the runs would simply join as runs); the reference and metric are checked with the ranking.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from pipelines.analysis.loading import EvidenceError, LoadedRun
from pipelines.analysis.results import DomainResult
from pipelines.runs.settings import differences, fixed_properties


@dataclass(frozen=True)
class Bridge:
    """A bridged study as laid out for the analysis: its name (the result's, and its report folder's), the runs root
    it was laid out in, and the one domain it holds."""

    name: str
    root: Path
    domain: str


def _fixed(runs: list[LoadedRun]) -> dict:
    """What the domain's comparison holds fixed, from its first finished trained run (check_comparable has held the
    others to it)."""
    trained = next(run for run in runs if run.finished and not run.derived)
    return fixed_properties(trained.manifest)


def bridge_settings(bridge: Bridge, own: list[LoadedRun], domain_runs: list[LoadedRun]) -> dict[str, tuple]:
    """{setting: (the bridged study's, the domain's)} where the two differ; EvidenceError when they are scored on
    other test data, or differ in nothing."""
    mine, theirs = _fixed(own), _fixed(domain_runs)
    changed = differences(mine, theirs)
    data = [key for key in changed if key.startswith("data_hashes.")]
    if data:
        raise EvidenceError(
            f"{bridge.name}: cannot be bridged into {bridge.domain}'s ranking: its runs read other data "
            f"({', '.join(data)}): a Δ over other examples is another question"
        )
    if not changed:
        raise EvidenceError(
            f"{bridge.name}: trained at {bridge.domain}'s settings: join it as runs (--with), not as a bridge"
        )
    return {key: (mine.get(key, "(not set)"), theirs.get(key, "(not set)")) for key in changed}


def bridged(result: DomainResult, bridge: Bridge, own: list[LoadedRun], domain_runs: list[LoadedRun]) -> DomainResult:
    """The bridged study's result, named after the study and ranked with its domain."""
    settings = bridge_settings(bridge, own, domain_runs)
    return replace(result, domain=bridge.name, ranked_with=bridge.domain, bridge_settings=settings)


def relabelled(runs: list[LoadedRun], name: str) -> list[LoadedRun]:
    """The bridged study's runs under its name (the page's one-run view tells them from the domain's own runs of the
    same encoding and seed)."""
    return [replace(run, key=replace(run.key, domain=name)) for run in runs]
