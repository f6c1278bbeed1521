"""Every published study's figures recomputed from its evidence alone, written out here with numpy and scipy (none of
the suite's statistics), against its summary.json (SPEC 3): the design's looks (each pair's Δ, its moderated or own
variance and df, p, Holm p, TOST p, word, decision interval, the futility stops and the runs each look calls for),
the joined family's, every pair of encodings (Holm over the study's own pairs and apart over the joined ones), the
matched Δ that ranks, P(better), paper 000's per-example column and the tests past the training length.

A study published before the rules it is recomputed under fails here until it is published again (`make publish
... WITH=<study>`; study-cpu by its README's compare command): run this after republishing.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from scipy import optimize, special
from scipy import stats as sps

from tests.sample_fixtures import REPO

STUDIES = {
    "jsb-cpu": "jsb",
    "jsb-confirm": "jsb",
    "maestro-cpu": "maestro",
    "maestro-confirm": "maestro",
    "maestro-patterns": "maestro",
    "synthetic-cpu": "synthetic",
}
REGION = {"jsb": 0.005, "maestro": 0.005, "synthetic": 0.01}  # SPEC 3's regions of practical equivalence
PAST_REGION = 0.005  # NLL past L, in every domain
ALPHA = 0.05
CLOSE = {"rel": 1e-7, "abs": 1e-10}


# ------------------------------------------------------------------------------------------ the evidence


def read_csv_gz(path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(gzip.decompress(path.read_bytes()).decode())))


@dataclass
class Evidence:
    """Seed scores (encoding -> seed -> score), the higher-is-better flag, per-example scores of the test split
    (encoding -> seed -> example -> value) and each evaluated run's NLL past L per split (group, split ->
    encoding -> seed -> value)."""

    scores: dict[str, dict[int, float]]
    higher_is_better: bool
    examples: dict[str, dict[int, dict[str, float]]]
    past: dict[tuple[str, str], dict[str, dict[int, float]]] = field(default_factory=dict)


def label_parts(label: str) -> tuple[str, str, int]:
    """(group, encoding, seed) of a run label: `jsb/alibi/seed3`, `synthetic/parity/alibi/seed0`."""
    parts = label.split("/")
    return "/".join(parts[1:-2]) or parts[0], parts[-2], int(parts[-1].removeprefix("seed"))


def read_evidence(folder, domain: str) -> Evidence:
    records = json.loads(gzip.decompress((folder / "runs.json.gz").read_bytes()))
    examples_rows = [row for path in sorted((folder / "per_example").glob("*.csv.gz")) for row in read_csv_gz(path)]
    chance = {label_parts(label)[0]: record["manifest"].get("chance") for label, record in records.items()}
    examples: dict[str, dict[int, dict[str, float]]] = {}
    for row in examples_rows:
        group, encoding, seed = label_parts(row["run"])
        if row["split"] != "test" or "+" in encoding:
            continue
        if domain == "synthetic":  # each instance's chance-normalised token accuracy
            value = (int(row["correct"]) / int(row["tokens"]) - chance[group]) / (1 - chance[group])
            key = f"{group}:{row['example']}"
        else:
            value, key = float(row["nll"]), row["example"]
        examples.setdefault(encoding, {}).setdefault(seed, {})[key] = value
    if domain == "synthetic":  # a seed's score: the mean over the tasks of the chance-normalised test accuracy
        tasks = sorted({label_parts(label)[0] for label in records})
        by_run: dict[tuple[str, int], dict[str, float]] = {}
        for label, record in records.items():
            group, encoding, seed = label_parts(label)
            test = record["summary"]["splits"].get("test", {})
            if "+" not in encoding and "accuracy" in test:
                normalised = (test["accuracy"] - chance[group]) / (1 - chance[group])
                by_run.setdefault((encoding, seed), {})[group] = normalised
        scores: dict[str, dict[int, float]] = {}
        for (encoding, seed), row in by_run.items():
            if len(row) == len(tasks):
                scores.setdefault(encoding, {})[seed] = float(np.mean([row[task] for task in tasks]))
        examples = {e: {s: v for s, v in seeds.items() if s in scores.get(e, {})} for e, seeds in examples.items()}
    else:
        scores = {e: {s: float(np.mean(list(v.values()))) for s, v in seeds.items()} for e, seeds in examples.items()}
    return Evidence(scores, domain == "synthetic", examples, read_past(folder, records))


def read_past(folder, records) -> dict:
    """Each evaluated run's token-weighted NLL at positions >= L on every split scored at a longer window."""
    sums: dict[tuple[str, str, str, int], list[float]] = {}
    for path in sorted((folder / "per_position").glob("*.csv.gz")):
        for row in read_csv_gz(path):
            label, split = row["run"], row["split"]
            record = records[label]
            context = record["manifest"]["config"]["model"]["context"]
            entry = record["summary"]["splits"].get(split, {})
            if entry.get("window_length", context) <= context or int(row["position"]) < context:
                continue
            group, encoding, seed = label_parts(label)
            total = sums.setdefault((group, split, encoding, seed), [0.0, 0.0])
            total[0] += float(row["nll_sum"])
            total[1] += float(row["tokens"])
    past: dict = {}
    for (group, split, encoding, seed), (nll, tokens) in sums.items():
        if tokens > 0:
            past.setdefault((group, split), {}).setdefault(encoding, {})[seed] = nll / tokens
    return past


# ------------------------------------------------------------------------------------------ the statistics


@dataclass
class Pair:
    """a against b: Δ, se, df and the SD the planning rules read (nan where there is no test)."""

    a: str
    b: str
    seeds: list[int]
    delta: float
    se: float
    df: float
    sd: float
    wins: float = math.nan
    region: float = 0.005
    p_holm: float = math.nan
    word: str = "open"
    level: float = math.nan
    look: int | None = None

    @property
    def p(self) -> float:
        if not math.isfinite(self.df):
            return math.nan
        if self.se == 0:
            return 1.0 if self.delta == 0 else 0.0
        return float(2 * sps.t.sf(abs(self.delta / self.se), self.df))

    @property
    def p_tost(self) -> float:
        if not math.isfinite(self.df):
            return math.nan
        if self.se == 0:
            return 0.0 if abs(self.delta) < self.region else 1.0
        lower = sps.t.cdf(-(self.delta + self.region) / self.se, self.df)
        upper = sps.t.cdf((self.delta - self.region) / self.se, self.df)
        return float(max(lower, upper))

    def interval(self, level: float) -> tuple[float, float]:
        if not math.isfinite(self.df):
            return math.nan, math.nan
        half = sps.t.ppf((1 + level) / 2, self.df) * self.se
        return self.delta - half, self.delta + half


def smyth(variances: np.ndarray, nu: float) -> tuple[float, float]:
    """Smyth (2004)'s prior by the method of moments on log variances, solved by root finding."""
    e = np.log(variances) - special.digamma(nu / 2) + math.log(nu / 2)
    excess = e.var(ddof=1) - special.polygamma(1, nu / 2)
    if excess <= 0:
        return math.inf, float(np.exp(e.mean()))
    half = optimize.brentq(lambda x: special.polygamma(1, x) - excess, 1e-8, 1e8, xtol=1e-14, rtol=1e-14)
    return 2 * half, float(np.exp(e.mean() + special.digamma(half) - math.log(half)))


def prior(ev: Evidence, seeds: list[int], ref: str, pool: list[str]):
    """(d0, s0^2, E) of the blocked analysis at `seeds` over the pool encodings holding them, None where its rules
    keep the per-pair test (SPEC 3: 5 seeds, 6 encodings, d0 >= 8, the reference inside its 95% F bound)."""
    names = sorted(name for name in pool if set(seeds) <= set(ev.scores.get(name, {})))
    n, count = len(seeds), len(names)
    if n < 5 or count < 6:
        return None
    table = np.array([[ev.scores[name][s] for s in seeds] for name in names])
    centred = table - table.mean(axis=0)
    variances = ((centred - centred.mean(axis=1, keepdims=True)) ** 2).sum(axis=1) / (n - 1) * count / (count - 1)
    if np.any(variances <= 0):
        return None
    d0, s0 = smyth(variances, n - 1.0)
    if d0 < 8:
        return None
    if ref in names:
        bound = sps.chi2.ppf(0.95, n - 1) / (n - 1) if math.isinf(d0) else sps.f.ppf(0.95, n - 1, d0)
        if variances[names.index(ref)] / s0 > bound:
            return None
    return d0, s0, count


def pair(ev: Evidence, a: str, b: str, region: float, within=None, pool=None) -> Pair:
    """a against b on the seeds both finished (those in `within`): paired from 2 shared seeds, one shared seed a Δ
    without a test, none Welch's se on min(n_a, n_b) - 1 df; `pool`: moderated toward the family's prior."""
    sa = sorted(s for s in ev.scores.get(a, {}) if within is None or s in within)
    sb = sorted(s for s in ev.scores.get(b, {}) if within is None or s in within)
    common = [s for s in sa if s in sb]
    sign = -1 if ev.higher_is_better else 1
    if common:
        d = np.array([ev.scores[a][s] - ev.scores[b][s] for s in common])
        wins = float(np.mean((sign * d < 0) + 0.5 * (d == 0)))
        if len(common) < 2:
            return Pair(a, b, common, float(d.mean()), math.nan, math.nan, math.nan, wins, region)
        sd, nu, n = float(d.std(ddof=1)), len(common) - 1, len(common)
        fitted = prior(ev, common, b, pool) if pool is not None else None
        if fitted is None:
            return Pair(a, b, common, float(d.mean()), sd / math.sqrt(n), nu, sd, wins, region)
        d0, s0, count = fitted
        variance = 2 * s0 if math.isinf(d0) else (d0 * 2 * s0 + nu * sd**2) / (d0 + nu)
        df = min(d0 + nu, (count - 1) * (n - 1))
        return Pair(a, b, common, float(d.mean()), math.sqrt(variance / n), df, math.sqrt(variance), wins, region)
    xa, xb = np.array([ev.scores[a][s] for s in sa]), np.array([ev.scores[b][s] for s in sb])
    if len(xa) < 2 or len(xb) < 2:
        return Pair(a, b, [], float(xa.mean() - xb.mean()), math.nan, math.nan, math.nan, math.nan, region)
    se = math.sqrt(xa.var(ddof=1) / len(xa) + xb.var(ddof=1) / len(xb))
    return Pair(a, b, [], float(xa.mean() - xb.mean()), se, min(len(xa), len(xb)) - 1.0, math.nan, math.nan, region)


def holm(pairs: list[Pair], alpha: float, higher_is_better: bool, look: int | None = None) -> list[Pair]:
    """Holm over the pairs with a test, written out: the words, Holm p and the decision level of SPEC 3."""
    tested = sorted((p for p in pairs if math.isfinite(p.p)), key=lambda p: p.p)
    m, running, stop = len(tested), 0.0, None
    for j, p in enumerate(tested, start=1):
        running = max(running, min(1.0, (m - j + 1) * p.p))
        p.p_holm = running
        if stop is None and not running < alpha:
            stop = j
    for j, p in enumerate(tested, start=1):
        better = p.delta > 0 if higher_is_better else p.delta < 0
        if p.p_tost < alpha:
            p.word, p.level = "equivalent", 1 - 2 * alpha
        elif p.p_holm < alpha and p.delta != 0:
            p.word, p.level = ("better" if better else "worse"), 1 - alpha / (m - j + 1)
        else:
            p.word = "inconclusive"
            p.level = 1 - alpha / (m - stop + 1) if stop is not None else 1 - alpha
        p.look = look
    return pairs


def futile(p: Pair, rule: str, cap: int, level: float) -> bool:
    if rule == "small_delta":
        return abs(p.delta) < p.region
    lo, hi = p.interval(0.95)
    far = hi if abs(hi) >= abs(lo) else lo
    n = len(p.seeds)
    if not (math.isfinite(p.sd) and p.sd > 0 and cap > n):
        return False
    c = sps.norm.ppf(1 - level / 2)
    spread, edge, final = p.sd * math.sqrt(cap - n), c * p.sd * math.sqrt(cap), n * p.delta + (cap - n) * far
    return sps.norm.cdf((final - edge) / spread) + sps.norm.cdf((-final - edge) / spread) < 0.1


def looks(ev: Evidence, design: dict, ref: str, baselines: list[str], region: float):
    """The design's looks over `baselines` (SPEC 3's group-sequential design), as dicts of Pair per look, with
    the encodings each look calls for; and the final Pair of each baseline."""
    seeds, counts, level = design["seeds"], design["looks"], design["alpha"] / len(design["looks"])
    rule = design.get("futility", "small_delta")
    final: dict[str, Pair] = {}
    out, active = [], list(baselines)
    for k, count in enumerate(counts):
        look_seeds = seeds[:count]
        if any(s not in ev.scores.get(name, {}) for name in [ref, *active] for s in look_seeds):
            break
        family = [b for b in baselines if b not in final or final[b].word not in ("better", "worse")]
        tested = holm(
            [pair(ev, b, ref, region, look_seeds, [ref, *baselines]) for b in family], level, ev.higher_is_better, k + 1
        )
        last = k == len(counts) - 1
        for p in tested:
            before = final.get(p.a)
            if before is not None and before.word in ("equivalent", "stopped") and p.word not in ("better", "worse"):
                kept = Pair(**{**before.__dict__, "p_holm": p.p_holm})
                kept.level = p.level if before.word == "stopped" else before.level
                final[p.a] = kept
                continue
            if not last and p.word == "inconclusive" and futile(p, rule, counts[-1], level / len(tested)):
                p.word = "stopped"
            final[p.a] = p
        calls = [] if last else [b for b in family if final[b].word == "inconclusive"]
        out.append(({b: final[b] for b in family}, calls))
        active = calls
        if not active:
            break
    return out, final


# ------------------------------------------------------------------------------------------ the comparison


def close(value, expected) -> bool:
    if value is None or expected is None or (isinstance(expected, float) and math.isnan(expected)):
        return (value is None or (isinstance(value, float) and math.isnan(value))) and (
            expected is None or (isinstance(expected, float) and math.isnan(expected))
        )
    return value == pytest.approx(expected, **CLOSE)


def paired_examples(ev: Evidence, a: str, b: str) -> tuple[float, float]:
    """Paper 000 C.2: (mean difference, p) of the paired t-test on the examples averaged over the seeds both
    finished (each one's own seeds where they share none)."""
    common = sorted(set(ev.examples[a]) & set(ev.examples[b]))
    seeds_a, seeds_b = common or sorted(ev.examples[a]), common or sorted(ev.examples[b])
    keys = sorted(ev.examples[a][seeds_a[0]])
    mean_a = np.mean([[ev.examples[a][s][key] for key in keys] for s in seeds_a], axis=0)
    mean_b = np.mean([[ev.examples[b][s][key] for key in keys] for s in seeds_b], axis=0)
    d = mean_a - mean_b
    return float(d.mean()), float(sps.ttest_rel(mean_a, mean_b).pvalue) if d.std() > 0 else 1.0


def holm_values(p: list[float]) -> list[float]:
    order = np.argsort(p, kind="stable")
    out, running = np.empty(len(p)), 0.0
    for j, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - j) * p[i]))
        out[i] = running
    return out.tolist()


@pytest.mark.slow
@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_figure_of_a_published_study_recomputes_from_its_evidence(study):
    folder, domain = REPO / "docs" / "results" / study, STUDIES[study]
    summary = json.loads((folder / "summary.json").read_text())
    entry = summary["domains"][domain]
    design = json.loads((folder / "settle" / f"{domain}.json").read_text())["design"]
    ev = read_evidence(folder, domain)
    ref, region = design["ref"], REGION[domain]
    names = sorted(ev.scores)
    members = [name for name in names if name in design["encodings"]]
    first = set(design["seeds"][: design["looks"][0]])
    joined = [name for name in names if name != ref and name not in members and first <= set(ev.scores[name])]
    below = [name for name in names if name != ref and name not in members and name not in joined]
    wrong: list[str] = []

    def check(what: str, value, expected) -> None:
        if not close(value, expected):
            wrong.append(f"{what}: published {value}, recomputed {expected}")

    own_looks, own_final = looks(ev, design, ref, members, region)
    joined_looks, joined_final = looks(ev, design, ref, joined, region) if joined else ([], {})
    for published, recomputed in ((entry["looks"], own_looks), (entry["joined_looks"], joined_looks)):
        assert len(published) == len(recomputed), study
        for record, (pairs, calls) in zip(published, recomputed, strict=True):
            assert sorted(record["pairs"]) == sorted(pairs) and record["calls_for"] == calls, (study, record["look"])
            for name, p in pairs.items():
                shown = record["pairs"][name]
                where = f"look {record['look']} {name}"
                check(f"{where} Δ", shown["delta"], p.delta)
                check(f"{where} df", shown["df"], p.df)
                check(f"{where} p", shown["p"], p.p)
                check(f"{where} Holm p", shown["p_holm"], p.p_holm)
                check(f"{where} TOST p", shown["p_tost"], p.p_tost)
                check(f"{where} decision", shown["decision"], [p.level, *p.interval(p.level)])
                if shown["verdict"] != p.word:
                    wrong.append(f"{where} word: published {shown['verdict']}, recomputed {p.word}")
    for name in [*members, *joined, *below]:
        record = entry["encodings"][name]
        p = {**own_final, **joined_final}.get(name) or pair(ev, name, ref, region)
        word = p.word if name not in below else "open"
        if record["verdict"] != word:
            wrong.append(f"{name} word: published {record['verdict']}, recomputed {word}")
        check(f"{name} Δ", record["delta"], p.delta)
        check(f"{name} 95% interval", [record["delta_lo"], record["delta_hi"]], list(p.interval(0.95)))
        check(f"{name} p", record["seed_p"], p.p)
        check(f"{name} Holm p", record["seed_p_holm"], p.p_holm if name not in below else math.nan)
        check(f"{name} TOST p", record["p_tost"], p.p_tost)
        check(f"{name} P(better)", record["p_better"], p.wins)
        check(f"{name} matched Δ", record["matched"], pair(ev, name, ref, region).delta)
        if name not in below and math.isfinite(p.level):
            check(f"{name} decision", [record["decision_level"], record["decision_lo"], record["decision_hi"]],
                  [p.level, *p.interval(p.level)])  # fmt: skip
    # paper 000's column: Holm over the study's own baselines, and apart over the joined ones
    baselines = [name for name in names if name != ref]
    for family in ([n for n in baselines if n in members], [n for n in baselines if n not in members]):
        tests = [paired_examples(ev, name, ref) for name in family]
        adjusted = holm_values([p for _, p in tests]) if tests else []
        for name, (diff, p), p_holm in zip(family, tests, adjusted, strict=True):
            check(f"{name} paper Δ", entry["encodings"][name]["paper_mean_diff"], diff)
            check(f"{name} paper p", entry["encodings"][name]["paper_p"], p)
            check(f"{name} paper Holm p", entry["encodings"][name]["paper_p_holm"], p_holm)
    # every pair: Holm over the study's own pairs, and apart over those with a joined encoding
    own = {ref, *members}
    every = [pair(ev, a, b, region) for i, a in enumerate(names) for b in names[i + 1 :]]
    holm([p for p in every if p.a in own and p.b in own], ALPHA, ev.higher_is_better)
    holm([p for p in every if not (p.a in own and p.b in own)], ALPHA, ev.higher_is_better)
    published_pairs = {(p["a"], p["b"]): p for p in entry["pairs"]}
    assert sorted(published_pairs) == sorted((p.a, p.b) for p in every), study
    for p in every:
        shown = published_pairs[p.a, p.b]
        check(f"{p.a}-{p.b} Δ", shown["delta"], p.delta)
        check(f"{p.a}-{p.b} p", shown["p"], p.p)
        check(f"{p.a}-{p.b} Holm p", shown["p_holm"], p.p_holm)
        check(f"{p.a}-{p.b} TOST p", shown["p_tost"], p.p_tost)
        if shown["verdict"] != p.word:
            wrong.append(f"{p.a}-{p.b} word: published {shown['verdict']}, recomputed {p.word}")
    # past L: per split, Holm over the study's own encodings (a YaRN row with its rope run), apart the joined ones
    rows = {(r["group"], r["split"], r["encoding"]): r for r in summary["extrapolation"] if r["domain"] == domain}
    for (group, split), curves in ev.past.items():
        if ref not in curves:
            continue
        past_ev = Evidence(curves, False, {})
        pairs = [pair(past_ev, name, ref, PAST_REGION) for name in sorted(curves) if name != ref]
        holm([p for p in pairs if p.a.split("+")[0] in own], ALPHA, False)
        holm([p for p in pairs if p.a.split("+")[0] not in own], ALPHA, False)
        for p in pairs:
            shown = rows[group, split, p.a]
            where = f"{group} {split} {p.a}"
            check(f"{where} Δ past L", shown["past_delta"], p.delta)
            check(f"{where} Holm p past L", shown["past_p_holm"], p.p_holm)
            if shown["past_verdict"] != p.word:
                wrong.append(f"{where} word past L: published {shown['past_verdict']}, recomputed {p.word}")
    assert not wrong, f"{study}: {len(wrong)} figures differ:\n" + "\n".join(wrong[:40])
