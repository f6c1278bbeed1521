"""summary.json's object: a study's results as data, which the page renders and nothing computes again (HELM's
rule: a study is data first). Every domain: its metric, seeds, reference, the answer in words, each
encoding's record, a task domain's accuracy by task and split, the make-settle design, looks and pairs; across
domains: the mean rank, the Friedman tests, the extrapolation tests, the cost and the missing runs."""

from __future__ import annotations

import math

from pipelines.analysis.results import DomainResult
from pipelines.analysis.stats import mean_rank
from pipelines.analysis.study import BlockTest, Study
from pipelines.report.answer import answer_text
from pipelines.report.cost import cost_json
from pipelines.report.study_about import domain_scale, domain_status
from pipelines.runs.settings import fixed_properties


def _friedman_json(outcome: BlockTest | str) -> dict:
    if isinstance(outcome, str):
        return {"not_run": outcome}
    result = outcome.result
    return {
        "blocks": outcome.blocks,
        "encodings": outcome.encodings,
        "mean_ranks": dict(zip(outcome.encodings, result.mean_ranks.tolist(), strict=True)),
        "chi2": result.chi2,
        "p": result.p,
        "iman_davenport_f": result.f,
        "p_f": result.p_f,
        "alpha": result.alpha,
        "cd": result.cd,
        "not_separated": outcome.not_separated(),
        "left_out": outcome.left_out,
        "at_chance": outcome.at_chance,
    }


def _verdicts_json(result: DomainResult) -> dict:
    """The domain's seed-aware statistics beyond its table: the design and its looks, every pair, the variance
    components."""
    verdicts = result.verdicts
    if verdicts is None:
        return {}
    family = verdicts.family
    return {
        "verdict_design": None
        if family is None
        else (
            family.design.to_json()
            if family.design.sequential
            else {"fixed_sample": True, "alpha": family.design.alpha}
        ),
        "looks": [] if family is None else [look.to_json() for look in family.looks],
        "next_runs": [f"{name}/seed{seed}" for name, seed in verdicts.next_runs],
        "joined_looks": [look.to_json() for look in verdicts.joined.looks] if verdicts.joined else [],
        "pairs": [
            {
                "a": pair.a,
                "b": pair.b,
                "seeds_a": list(pair.seeds_a),
                "seeds_b": list(pair.seeds_b),
                "paired": pair.paired,
                "delta": pair.delta,
                "ci": [pair.ci_lo, pair.ci_hi],
                "p_a_better": pair.poi,
                "p": pair.p,
                "p_holm": pair.p_holm,
                "p_tost": pair.p_tost,
                "verdict": pair.verdict,
            }
            for pair in verdicts.pairs
        ],
        "variance_components": verdicts.variance,
    }


def _tasks_json(result: DomainResult) -> dict | None:
    """A domain with tasks: each task's chance level, and per split each encoding's cell of every task (token
    accuracy, chance-normalised, NLL, seeds, status and why not scored) and its mean rank by accuracy over the tasks
    (± its standard error across tasks): the tables of the domain's summary.md, as data."""
    if result.tasks is None:
        return None
    table = result.tasks
    splits = {}
    for split, cells in table.cells.items():
        rank = mean_rank(table.accuracy(split), lower_is_better=False)
        encodings = list(next(iter(cells.values()))) if cells else []
        splits[split] = {
            encoding: {
                "tasks": {
                    task: {
                        "accuracy": row[encoding].accuracy,
                        "chance_normalised": row[encoding].chance_normalised,
                        "nll": row[encoding].nll,
                        "seeds": row[encoding].seeds,
                        "status": row[encoding].status,
                        "note": row[encoding].note,
                    }
                    for task, row in cells.items()
                },
                "mean_rank": rank[encoding][0],
                "mean_rank_se": rank[encoding][1],
            }
            for encoding in encodings
        }
    return {"chance": dict(table.chance), "splits": splits}


def held_settings(study: Study, domain: str) -> dict:
    """What every finished trained run of `domain` (a bridged study's name too) was trained with: the settings its
    comparison holds fixed (pipelines.runs.settings.fixed_properties: the model, budget, optimiser, data hashes), those
    its tasks share in a domain with tasks. summary.json records them, so that a study read later (a replication,
    pipelines.report.replication) says at what settings its verdicts were reached, not only the preset's name."""
    held = [
        fixed_properties(run.manifest)
        for run in study.runs
        if run.domain == domain and run.finished and not run.derived
    ]
    if not held:
        return {}
    return {
        key: value for key, value in sorted(held[0].items()) if all(other.get(key, _UNSET) == value for other in held)
    }


_UNSET = object()


def study_json(study: Study, records: list[dict], extrapolation: list[dict], about: dict | None = None) -> dict:
    """`about`: what the study is (pipelines.report.study_about.study_about: its name, its README, the studies it
    joins or supersedes), recorded as it is."""
    return {
        "study": about or {},
        "runs": str(study.runs_root),
        "reference": study.ref,
        "domains": {
            result.domain: {
                "metric": result.metric.name,
                "lower_is_better": not result.metric.higher_is_better,
                "equivalence_region": result.metric.equivalence,
                "preset": result.preset,
                "settings": held_settings(study, result.domain),
                "scale": domain_scale(study, result.domain),
                "status": domain_status(result),
                "interval": result.interval,
                "seeds": {"used": result.seeds.used, "expected": result.seeds.expected},
                "reference": result.ref,
                "reference_rule": result.verdicts.ref_note if result.verdicts else "",
                "ranked_with": result.ranked_with,
                "bridge_settings": {key: list(pair) for key, pair in result.bridge_settings.items()},
                "incomplete": result.incomplete,
                "answer": answer_text(result),
                "tasks": _tasks_json(result),
                "encodings": {r["encoding"]: r for r in records if r["domain"] == result.domain},
                **_verdicts_json(result),
            }
            for result in study.results
        },
        "mean_rank": {
            encoding: {
                "mean": mean,
                "se": se,
                "domains": len(study.ranked_domains),
                "ci_over_seeds": list(study.rank_interval.get(encoding, (math.nan, math.nan, math.nan))[:2]),
                "p_rank_1": study.rank_interval.get(encoding, (math.nan,) * 3)[2],
            }
            for encoding, (mean, se) in study.mean_rank.items()
        },
        "not_ranked": {encoding: {"rank_in": ranks} for encoding, ranks in study.partial_ranks.items()},
        "mean_rank_nll_domains": None
        if study.per_example_mean_rank is None
        else {encoding: {"mean": mean, "se": se} for encoding, (mean, se) in study.per_example_mean_rank.items()},
        "friedman": {name: _friedman_json(outcome) for name, outcome in study.friedman.items()},
        "extrapolation": extrapolation,
        "attention_by_distance": {
            "far_mass": study.recency.far_mass(),
            "not_inspected": study.recency.not_inspected,
        },
        "cost": cost_json(study.results),
        "missing_runs": study.missing,
        "domains_without_finished_runs": list(study.unfinished_domains),
        "domains_not_ranked": study.unranked,
    }
