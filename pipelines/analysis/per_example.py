"""A domain compared per test example (SPEC 3, paper 000 appendix C.2): each example's test NLL averaged over
the seeds, a 95% t-interval over the examples, paired two-sided t-tests of every baseline against the reference
on d_i = NLL_i(b) - NLL_i(ref), Holm-corrected over the baselines of the domain."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from pipelines.analysis.curves import PositionNLL, load_extrapolation, pooled_split_positions
from pipelines.analysis.evidence import finished_by, missing_runs, preset_of
from pipelines.analysis.results import DEFAULT_REF, TEST_SPLIT, DomainResult, Entry
from pipelines.analysis.stats import mean_ci, paired_tests, ranks, seed_average
from pipelines.experiment.config import datamodule_class
from pipelines.runs.layout import RunFolder
from pipelines.runs.metrics import read_per_example


@dataclass(frozen=True)
class EncodingNLL:
    """Test-split NLL of one encoding, over its finished seeds."""

    encoding: str
    seeds: list[int]
    example_ids: np.ndarray  # ascending
    nll: np.ndarray  # per example, averaged over seeds (aligned on example_ids)
    seed_means: np.ndarray  # mean NLL over the examples, one per seed (in `seeds` order)
    by_position: PositionNLL  # summed over seeds

    @property
    def mean(self) -> float:
        return float(self.nll.mean())


def load_encoding_nll(encoding: str, runs: list[RunFolder]) -> EncodingNLL:
    """Read the per-example and per-position test metrics of the finished seeds of one encoding."""
    per_seed, ids = {}, {}
    for run in runs:
        examples = read_per_example(run, TEST_SPLIT)
        per_seed[run.seed] = examples["nll"]
        ids[run.seed] = examples["example"].astype(int)
    return EncodingNLL(
        encoding=encoding,
        seeds=[run.seed for run in runs],
        example_ids=np.sort(ids[runs[0].seed]),
        nll=seed_average(per_seed, ids),
        seed_means=np.array([values.mean() for values in per_seed.values()]),
        by_position=pooled_split_positions(runs, TEST_SPLIT),
    )


def _check_same_examples(results: dict[str, EncodingNLL]) -> None:
    """Paired tests need every encoding scored on the same test examples."""
    first = next(iter(results.values()))
    for result in results.values():
        if not np.array_equal(result.example_ids, first.example_ids):
            raise ValueError(
                f"{result.encoding!r} and {first.encoding!r} were scored on different test examples "
                f"({result.example_ids.size} and {first.example_ids.size})"
            )


def choose_ref(ref: str | None, encodings: Iterable[str]) -> tuple[str | None, str | None]:
    """(the reference of the paired tests or None, why there are no tests or None)."""
    encodings = list(encodings)
    name = ref or DEFAULT_REF
    if name not in encodings:
        why = "given" if ref else "the default reference"
        return None, f"No paired tests: `{name}` ({why}) has no finished run here; choose one with `--ref`."
    if len(encodings) < 2:
        return None, "No paired tests: only one encoding has finished runs."
    return name, None


def analyse_per_example(domain: str, runs: list[RunFolder], ref: str | None) -> DomainResult:
    by_encoding = finished_by([run for run in runs if not run.derived], "encoding")
    if not by_encoding:
        raise FileNotFoundError(f"{domain}: no finished trained run (only evaluation-time variants)")
    results = {enc: load_encoding_nll(enc, enc_runs) for (enc,), enc_runs in sorted(by_encoding.items())}
    _check_same_examples(results)
    ref, no_tests_reason = choose_ref(ref, results)
    tests = {}
    if ref is not None:
        tests = {t.baseline: t for t in paired_tests({k: v.nll for k, v in results.items()}, ref)}
    rank = ranks({name: result.mean for name, result in results.items()})
    entries = {}
    for name in sorted(results, key=lambda name: (rank[name], name)):
        result = results[name]
        mean, lo, hi = mean_ci(result.nll)
        seed_scores = dict(zip(result.seeds, map(float, result.seed_means), strict=True))
        entries[name] = Entry(name, mean, lo, hi, result.nll.size, seed_scores, tests.get(name))
    return DomainResult(
        domain=domain,
        metric=datamodule_class(domain).metric,
        preset=preset_of(runs),
        ref=ref,
        no_tests_reason=no_tests_reason,
        entries=entries,
        incomplete={},
        seen={run.encoding for run in runs if not run.derived},
        missing=missing_runs(runs),
        extrapolation=load_extrapolation(domain, runs),
        position_curves={name: result.by_position for name, result in results.items()},
    )
