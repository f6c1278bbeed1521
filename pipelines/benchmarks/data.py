"""The data benchmark: throughput of each stored domain's preparation and of its hot kernels, from a mirror folder.

Each domain is prepared by its own code into a temporary data root that is deleted afterwards, so every figure is
a cold preparation, as the first `make data-<domain>` on a machine would do. Amounts are in the domain's unit, its
DataModule's `amount_unit`: pieces (JSB, MAESTRO), bases (HRG), samples (Sleep-EDF).

What is timed, one row per (domain, stage):
  prepare   `make data-<domain>` (the datamodule's `prepare_data`) with $POSBENCH_MIRROR = the source and
            $POSBENCH_DATA = a fresh temporary folder: copy from the mirror, checksums, reading, tokenising, writing
            the store. The datamodule is built (config, MAESTRO's tokenizer) before the clock starts. The amount is
            what the store holds (the datamodule's `prepared_amount` of its meta.json): chorales (JSB),
            performances read (MAESTRO: the files present, tokenised or skipped), bases encoded (HRG), samples
            tokenised (Sleep-EDF: every sample of the trimmed nights).
  and the hot kernel alone, on the raw files that preparation left in the temporary folder, so a reader sees
  where the preparation's time goes:
  tokenise  JSB: `build_splits` (read and validate the npz, chorale -> tokens). MAESTRO: `tokenize_files` of every
            file present into an empty token cache, over the configured worker processes (files already read).
            HRG: every example window of the stored base codes as 6-mers (`ChromosomeWindows.all_examples`, what
            evaluation does on the fly; amount = windows x window bases).
  encode    HRG: the plain FASTA -> uint8 base codes (`write_chromosome_codes`, index already built).
  read      Sleep-EDF: reading EEG Fpz-Cz of each trimmed night and normalising it (`normalised`, pass 2's input).
  quantise  Sleep-EDF: normalised samples -> 256 tokens (`quantise`), the same nights.
Seconds are the median of `repeats` runs (each prepare run into its own fresh folder, each MAESTRO tokenise run
into its own empty cache), with the fastest and slowest run beside it. `workers` is the number of processes a
stage used; every other stage runs in one process (numpy, single-threaded for these operations).

An HRG mirror folder is prepared whole: every chromosome file it holds, named UCSC's way (`chr21.fa.gz`, checked
against its `md5sum.txt`) or as the shared sample (`GRCh38_chrM.fa`, no md5 table), all in the training split
(a throughput measurement needs no split). A domain whose folder is missing, or whose preparation fails (for
example the shared Sleep-EDF sample alone: one all-wake night, fewer than the 3 subjects a split needs), gives one
row with `skipped` saying why, and the other domains are still measured.
"""

from __future__ import annotations

import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from domains.fetch import FetchError, raw_dir
from domains.hrg.genome import fasta_index, write_chromosome_codes
from domains.maestro.archive import MaestroArchive, read_midi_files
from domains.maestro.tokenizer import TokenCache, tokenize_files
from domains.sleep_edf.quantiles import quantise
from domains.sleep_edf.recordings import Night
from pipelines.experiment.config import datamodule_class, stored_datamodule, stored_domain_names

COLUMNS = (
    "domain",
    "stage",
    "unit",
    "amount",
    "seconds",
    "seconds_min",
    "seconds_max",
    "per_second",
    "repeats",
    "workers",
    "detail",
    "source",
    "skipped",
)

DETAILS = {
    ("jsb", "prepare"): "copy from mirror, sha256, read npz, tokenise, write store",
    ("jsb", "tokenise"): "read and validate npz, chorales -> tokens",
    ("maestro", "prepare"): "copy from mirror, sha256, read, REMI tokenise, split, chunk, write store",
    ("maestro", "tokenise"): "REMI tokenise the MIDI bytes (empty cache)",
    ("hrg", "prepare"): "copy from mirror, md5/sha256, gunzip, .fai, encode bases, meta",
    ("hrg", "encode"): "plain FASTA -> uint8 base codes",
    ("hrg", "tokenise"): "6-mer tokens of every example window (evaluation geometry)",
    ("sleep_edf", "prepare"): "copy from mirror, sha256, scan hypnograms, 2 passes read+normalise, quantise, write",
    ("sleep_edf", "read"): "read EEG Fpz-Cz of each trimmed night, normalise, clip",
    ("sleep_edf", "quantise"): "normalised samples -> 256 quantile bins",
}
# errors a preparation reports about its input (as `make data-<domain>` does): the row says why it was skipped
INPUT_ERRORS = (FetchError, ValueError, FileNotFoundError)
# a chromosome file in an HRG mirror: <prefix><chromosome><.fa or .fa.gz>, e.g. chr21.fa.gz, GRCh38_chrM.fa
HRG_FILE = re.compile(r"(?P<prefix>.*?)(?P<chrom>chr(?:\d+|X|Y|M))(?P<suffix>\.fa(?:\.gz)?)")


class StageRun(NamedTuple):
    """One timed run of one stage: seconds on the clock, the amount it handled (unit of the domain), processes."""

    seconds: float
    amount: int
    workers: int = 1


# A kernel times one run (its argument: the repetition's number) of one or more stages: {stage: StageRun}.
Kernel = Callable[[int], dict[str, StageRun]]


def measure_preparation(
    domains: Sequence[str] | None = None,
    source: str | Path | None = None,
    *,
    repeats: int = 1,
    workers: int | None = None,
    kernels: bool = True,
    workdir: str | Path | None = None,
) -> list[dict[str, Any]]:
    """One row per (domain, stage) with the stage's throughput (COLUMNS; see the module docstring).

    source: mirror folder (default $POSBENCH_MIRROR); workers: MAESTRO's tokenising processes (default: every CPU
    available); kernels: also time the hot kernels, not only the whole preparation; workdir: where the temporary
    data roots go (default: the system's temporary folder; at paper scale they hold the whole prepared data).
    """
    if source is None:
        source = os.environ.get("POSBENCH_MIRROR")
        if not source:
            raise ValueError(
                "no source folder: pass one (laid out as $POSBENCH_MIRROR/<domain>/...) or set POSBENCH_MIRROR"
            )
    source = Path(source).resolve()
    stored = stored_domain_names()
    domains = stored if domains is None else domains
    unknown = [d for d in domains if d not in stored]
    if unknown:
        raise ValueError(f"unknown domains {unknown}; the stored domains are {', '.join(stored)}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    rows = []
    for domain in domains:
        with tempfile.TemporaryDirectory(prefix=f"posbench-prep-{domain}-", dir=workdir) as tmp:
            rows += measure_domain(domain, source, Path(tmp), repeats=repeats, workers=workers, kernels=kernels)
    return rows


def measure_domain(
    domain: str, source: Path, tmp: Path, *, repeats: int, workers: int | None, kernels: bool
) -> list[dict[str, Any]]:
    """The rows of one domain, prepared from `source`/<domain> into folders under `tmp`."""
    folder = source / domain
    if not folder.is_dir():
        return [skipped_row(domain, folder, f"{folder}: no such folder (expected the {domain} raw files there)")]
    try:
        overrides = config_overrides(domain, folder, workers)
        prepared = []  # the datamodule and meta.json of each prepare run

        def prepare(run: int) -> dict[str, StageRun]:
            with data_root(source, tmp / f"data{run}"):
                dm = stored_datamodule(domain, overrides)
                began = time.perf_counter()
                meta = dm.prepare_data()
                seconds = time.perf_counter() - began
            prepared.append((dm, meta))
            workers_used = dm.preparation_record().get("tokenisation", {}).get("workers", 1)  # MAESTRO's processes
            return {"prepare": StageRun(seconds, dm.prepared_amount(meta), workers_used)}

        rows = timed_rows(domain, folder, prepare, repeats)
        if kernels:
            dm, meta = prepared[-1]
            with data_root(source, tmp / f"data{repeats - 1}"):  # the raw files of the last prepare run
                rows += timed_rows(domain, folder, KERNELS[domain](dm, meta, tmp), repeats)
        return rows
    except INPUT_ERRORS as err:
        reason = str(err) if str(folder) in str(err) else f"{folder}: {err}"
        return [skipped_row(domain, folder, reason)]


def config_overrides(domain: str, folder: Path, workers: int | None) -> list[str]:
    """Config overrides that prepare what `folder` holds (HRG: its chromosomes) with `workers` (MAESTRO)."""
    if domain == "maestro" and workers is not None:
        return [f"domain.args.tokenize_workers={workers}"]
    if domain == "hrg":
        return hrg_overrides(folder)
    return []


def hrg_overrides(folder: Path) -> list[str]:
    """Every chromosome file of an HRG mirror folder, all in train; the file pattern with the most chromosomes
    (a tie goes to gzip, UCSC's layout); checked against md5sum.txt when the folder has one."""
    patterns: dict[tuple[str, str], list[str]] = {}
    for path in sorted(folder.iterdir()):
        if match := HRG_FILE.fullmatch(path.name):
            patterns.setdefault((match["prefix"], match["suffix"]), []).append(match["chrom"])
    if not patterns:
        raise FetchError(
            f"{folder}: no chromosome FASTA file (expected names like chr21.fa.gz as UCSC publishes them, with "
            "md5sum.txt, or GRCh38_chrM.fa)"
        )
    (prefix, suffix), chromosomes = max(patterns.items(), key=lambda item: (len(item[1]), item[0][1] == ".fa.gz"))
    checksums = "md5sum.txt" if (folder / "md5sum.txt").is_file() else "null"
    return [
        "domain.source=ucsc",
        f"domain.args.split={{train:[{','.join(chromosomes)}],val:[],test:[]}}",
        f"domain.args.file_pattern='{prefix}{{chrom}}{suffix}'",
        f"domain.args.checksums={checksums}",
    ]


def jsb_kernel(dm: Any, meta: dict[str, Any], tmp: Path) -> Kernel:
    raw = dm.fetch_raw()

    def run(repeat: int) -> dict[str, StageRun]:
        began = time.perf_counter()
        splits, _ = dm.build_splits(raw)
        return {"tokenise": StageRun(time.perf_counter() - began, sum(len(items) for items in splits.values()))}

    return run


def maestro_kernel(dm: Any, meta: dict[str, Any], tmp: Path) -> Kernel:
    archive = MaestroArchive(dm.fetch_raw())
    try:
        files, _ = read_midi_files(archive)
    finally:
        archive.close()

    def run(repeat: int) -> dict[str, StageRun]:
        began = time.perf_counter()
        result = tokenize_files(files, TokenCache(tmp / f"token_cache{repeat}"), dm.tokenize_workers)
        return {"tokenise": StageRun(time.perf_counter() - began, result.tokenised, result.workers)}

    return run


def hrg_kernel(dm: Any, meta: dict[str, Any], tmp: Path) -> Kernel:
    fastas = {c: raw_dir(dm.domain) / dm.source_of(c).removesuffix(".gz") for c in dm.chromosomes}  # as gunzipped
    indexes = {c: fasta_index(fasta) for c, fasta in fastas.items()}

    def run(repeat: int) -> dict[str, StageRun]:
        encode = bases = 0
        for chromosome, fasta in fastas.items():
            began = time.perf_counter()
            bases += write_chromosome_codes(fasta, chromosome, tmp / "codes.npy", indexes[chromosome])["length"]
            encode += time.perf_counter() - began
        windows = dm.split("train")
        began = time.perf_counter()
        windows.all_examples()
        tokenise = time.perf_counter() - began
        return {"encode": StageRun(encode, bases), "tokenise": StageRun(tokenise, len(windows) * windows.window)}

    return run


def sleep_kernel(dm: Any, meta: dict[str, Any], tmp: Path) -> Kernel:
    """read and quantise timed apart, night by night (one night in memory at a time, as the preparation does)."""
    boundaries = np.asarray(meta["boundaries"])
    nights = [Night(**entry) for split in meta["nights"].values() for entry in split]

    def run(repeat: int) -> dict[str, StageRun]:
        read = quantised = samples = 0
        for night in nights:
            began = time.perf_counter()
            normalised = dm.normalised(night, raw_dir(dm.domain))
            middle = time.perf_counter()
            quantise(normalised, boundaries)
            read, quantised = read + middle - began, quantised + time.perf_counter() - middle
            samples += len(normalised)
        return {"read": StageRun(read, samples), "quantise": StageRun(quantised, samples)}

    return run


# The hot kernels of each domain over the raw files of a prepared datamodule (see the module docstring).
KERNELS: dict[str, Callable[[Any, dict[str, Any], Path], Kernel]] = {
    "jsb": jsb_kernel,
    "maestro": maestro_kernel,
    "hrg": hrg_kernel,
    "sleep_edf": sleep_kernel,
}


def timed_rows(domain: str, folder: Path, kernel: Kernel, repeats: int) -> list[dict[str, Any]]:
    """Run `kernel` `repeats` times; one row per stage it times: the median seconds, fastest and slowest run."""
    runs = [kernel(repeat) for repeat in range(repeats)]
    rows = []
    for stage, last in runs[-1].items():
        seconds = [timings[stage].seconds for timings in runs]
        median = statistics.median(seconds)
        rows.append(
            {
                "domain": domain,
                "stage": stage,
                "unit": datamodule_class(domain).amount_unit,
                "amount": last.amount,
                "seconds": median,
                "seconds_min": min(seconds),
                "seconds_max": max(seconds),
                "per_second": last.amount / median if median > 0 else float("inf"),
                "repeats": repeats,
                "workers": last.workers,
                "detail": DETAILS[domain, stage],
                "source": str(folder),
                "skipped": "",
            }
        )
    return rows


def skipped_row(domain: str, folder: Path, reason: str) -> dict[str, Any]:
    row = dict.fromkeys(COLUMNS)
    row.update(
        domain=domain, stage="prepare", unit=datamodule_class(domain).amount_unit, source=str(folder), skipped=reason
    )
    return row


@contextmanager
def data_root(mirror: Path, data: Path) -> Iterator[None]:
    """$POSBENCH_MIRROR and $POSBENCH_DATA set for the domain code (domains.fetch reads them), restored after."""
    saved = {name: os.environ.get(name) for name in ("POSBENCH_MIRROR", "POSBENCH_DATA")}
    os.environ.update(POSBENCH_MIRROR=str(mirror), POSBENCH_DATA=str(data))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
