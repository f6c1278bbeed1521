"""A domain compared per test example (SPEC 3, paper 000 appendix C.2): each example's test NLL averaged over
the seeds every encoding finished, 95% within-example intervals (and the between-example t-interval beside them),
paired two-sided t-tests of every baseline against the reference on d_i = NLL_i(b) - NLL_i(ref), Holm-corrected
over the baselines of the domain. A seed scoring other examples than the others, or a non-finite NLL, stops the
comparison with an error naming the run and the file."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from pipelines.analysis.curves import PositionNLL, load_extrapolation, pooled_split_positions
from pipelines.analysis.evidence import finished_by, missing_runs, preset_of, select_seeds, with_seeds
from pipelines.analysis.results import DEFAULT_REF, TEST_SPLIT, DomainResult, entries_with_intervals
from pipelines.analysis.stats import FriedmanResult, friedman, paired_tests, ranks, seed_average
from pipelines.experiment.config import datamodule_class
from pipelines.runs.layout import RunFolder
from pipelines.runs.metrics import per_example_path, read_per_example, run_file_error


@dataclass(frozen=True)
class EncodingNLL:
    """Test-split NLL of one encoding, over its finished seeds."""

    encoding: str
    seeds: list[int]
    example_ids: np.ndarray  # ascending
    nll: np.ndarray  # per example, averaged over seeds (aligned on example_ids)
    seed_means: np.ndarray  # mean NLL over the examples, one per seed (in `seeds` order)
    by_position: PositionNLL  # summed over seeds
    first_run: RunFolder  # where the example ids were read (for error messages)

    @property
    def mean(self) -> float:
        return float(self.nll.mean())


def load_encoding_nll(encoding: str, runs: list[RunFolder]) -> EncodingNLL:
    """Read the per-example and per-position test metrics of the finished seeds of one encoding. Every seed must
    score the same examples (RunFileError naming the seed's file otherwise); non-finite NLLs are refused when read."""
    per_seed, ids, seed_means, first = {}, {}, [], None
    for run in runs:
        examples = read_per_example(run, TEST_SPLIT)
        seed_means.append(examples["nll"].mean())  # in the file's order, as every earlier report summed it
        order = np.argsort(examples["example"], kind="stable")
        seed_ids = examples["example"][order].astype(int)
        if np.any(np.diff(seed_ids) == 0):
            raise run_file_error(run, per_example_path(run.path, TEST_SPLIT), "an example id appears twice")
        if first is not None and not np.array_equal(seed_ids, ids[first.seed]):
            raise run_file_error(
                run,
                per_example_path(run.path, TEST_SPLIT),
                f"scores {seed_ids.size} examples, not the {ids[first.seed].size} of seed {first.seed} "
                f"({per_example_path(first.path, TEST_SPLIT)}): every seed must score the same test examples",
            )
        first = first or run
        per_seed[run.seed], ids[run.seed] = examples["nll"][order], seed_ids
    return EncodingNLL(
        encoding=encoding,
        seeds=[run.seed for run in runs],
        example_ids=ids[runs[0].seed],
        nll=seed_average(per_seed),
        seed_means=np.array(seed_means),
        by_position=pooled_split_positions(runs, TEST_SPLIT),
        first_run=runs[0],
    )


def _check_same_examples(results: dict[str, EncodingNLL]) -> None:
    """Paired tests need every encoding scored on the same test examples."""
    first = next(iter(results.values()))
    for result in results.values():
        if not np.array_equal(result.example_ids, first.example_ids):
            raise run_file_error(
                result.first_run,
                per_example_path(result.first_run.path, TEST_SPLIT),
                f"{result.encoding!r} scores {result.example_ids.size} test examples, {first.encoding!r} "
                f"{first.example_ids.size} ({per_example_path(first.first_run.path, TEST_SPLIT)}): paired tests need "
                "the same examples",
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
    trained = finished_by([run for run in runs if not run.derived], "encoding")
    if not trained:
        raise FileNotFoundError(f"{domain}: no finished trained run (only evaluation-time variants)")
    seeds = select_seeds(runs, trained.values())
    used = with_seeds(runs, seeds)
    by_encoding = finished_by([run for run in used if not run.derived], "encoding")
    results = {enc: load_encoding_nll(enc, enc_runs) for (enc,), enc_runs in sorted(by_encoding.items())}
    _check_same_examples(results)
    ref, no_tests_reason = choose_ref(ref, results)
    tests = {}
    if ref is not None:
        tests = {t.baseline: t for t in paired_tests({k: v.nll for k, v in results.items()}, ref)}
    rank = ranks({name: result.mean for name, result in results.items()})
    order = sorted(results, key=lambda name: (rank[name], name))
    entries = entries_with_intervals(
        {name: results[name].nll for name in order},
        {name: dict(zip(results[name].seeds, map(float, results[name].seed_means), strict=True)) for name in order},
        tests,
    )
    return DomainResult(
        domain=domain,
        metric=datamodule_class(domain).metric,
        preset=preset_of(runs),
        seeds=seeds,
        ref=ref,
        no_tests_reason=no_tests_reason,
        entries=entries,
        incomplete={},
        seen={run.encoding for run in runs if not run.derived},
        missing=missing_runs(runs),
        extrapolation=load_extrapolation(domain, used),
        position_curves={name: result.by_position for name, result in results.items()},
        example_friedman=example_friedman([results[name].nll for name in order]),
    )


def example_friedman(nll_by_encoding: list[np.ndarray]) -> FriedmanResult | None:
    """Friedman test with the test examples as blocks (seed-averaged NLL, lower is better): which encodings a
    Nemenyi critical difference over the examples separates. None for fewer than 2 examples or encodings."""
    if len(nll_by_encoding) < 2 or nll_by_encoding[0].size < 2:
        return None
    return friedman(np.column_stack(nll_by_encoding), lower_is_better=True)
