"""The HRG tokenizer benchmark: the Nucleotide Transformer tokenizer's bases/s on one core and the peak memory of
preparing and tokenising a big generated chromosome (not a test: it takes seconds to minutes).

    python -m pipelines.benchmarks.tokenizer [--mbases 50] [--chromosome-mbases 200] [--workdir DIR]

prints one figure per line (see `benchmark`).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from domains.hrg.bases import encode_bases
from domains.hrg.generated import generated_letters, write_generated_fasta
from domains.hrg.genome import fasta_index, write_chromosome_codes
from domains.hrg.tokenizer import tokenize, tokenize_windows
from domains.hrg.windows import chromosome_windows


def benchmark(mbases: int = 50, chromosome_mbases: int = 200, workdir: str | None = None) -> dict[str, float]:
    """Peak RSS while preparing and tokenising a big chromosome, then the tokenizer's bases/s on one core.

    1. Memory (first, so nothing else has raised the peak): a generated single-chromosome FASTA of
       `chromosome_mbases` Mbases (60-column lines, N runs, lowercase stretches) is written in chunks, indexed
       by pyfaidx, encoded by the HRG domain's chromosome writer (chunked) and tokenised window by window as
       evaluation does. The peak RSS (ru_maxrss) is reported against the baseline after the imports (torch
       and lightning come with `domains.hrg`) after each step; the growth stays far below the chromosome's
       size, and what the memory-mapped base codes add is file-backed (RssFile), not allocated.
    2. Throughput: a generated sequence of `mbases` Mbases with N runs, tokenised whole (`tokenize`) and as the
       6100-base windows every 6050 bases that evaluation uses (`tokenize_windows`, 1000 tokens each).
    """

    def peak_rss_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def tokenize_all_windows(bases: np.ndarray) -> int:
        windows_done = 0
        for windows in chromosome_windows(bases, window=6100, stride=6050):
            tokenize_windows(windows, 1000)
            windows_done += len(windows)
        return windows_done

    figures: dict[str, float] = {"peak_rss_mb_after_imports": peak_rss_mb()}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        fasta = Path(tmp) / "big.fa"
        write_generated_fasta(fasta, {"chrBig": chromosome_mbases * 1_000_000}, seed=1, n_runs=10, lowercase_runs=1000)
        figures["peak_rss_mb_after_writing_fasta"] = peak_rss_mb()
        began = time.perf_counter()
        index = fasta_index(fasta)
        figures["pyfaidx_index_s"] = time.perf_counter() - began
        began = time.perf_counter()
        record = write_chromosome_codes(fasta, "chrBig", Path(tmp) / "chrBig.npy", index)
        figures["encode_bases_per_s"] = record["length"] / (time.perf_counter() - began)
        figures["peak_rss_mb_after_encoding"] = peak_rss_mb()
        began = time.perf_counter()
        bases = np.load(Path(tmp) / "chrBig.npy", mmap_mode="r")
        n_windows = tokenize_all_windows(bases)
        figures["eval_tokenize_bases_per_s"] = n_windows * 6100 / (time.perf_counter() - began)
        # The memory map's pages count in RSS once read; they are file-backed and reclaimable, not allocations.
        status = Path("/proc/self/status")
        if status.exists():
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines())
            for key in ("RssAnon", "RssFile"):
                figures[f"{key.lower()}_mb_after_tokenizing"] = int(fields[key].split()[0]) / 1024
        del bases
        figures.update(
            {
                "chromosome_bases": record["length"],
                "chromosome_windows": n_windows,
                "fasta_mb": os.path.getsize(fasta) / 2**20,
                "peak_rss_mb_after_chromosome": peak_rss_mb(),
            }
        )

    rng = np.random.default_rng(0)
    codes = encode_bases(generated_letters(rng, mbases * 1_000_000, n_runs=mbases * 10, lowercase_runs=mbases * 100))
    began = time.perf_counter()
    tokens = tokenize(codes)
    figures["whole_bases_per_s"] = len(codes) / (time.perf_counter() - began)
    began = time.perf_counter()
    n_windows = tokenize_all_windows(codes)
    figures["windows_bases_per_s"] = n_windows * 6100 / (time.perf_counter() - began)
    figures.update({"bases": len(codes), "tokens": len(tokens)})
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mbases", type=int, default=50, help="size of the throughput sequence")
    parser.add_argument("--chromosome-mbases", type=int, default=200, help="size of the generated chromosome")
    parser.add_argument("--workdir", help="where the generated chromosome is written (default: the temp folder)")
    args = parser.parse_args(argv)
    for key, value in benchmark(args.mbases, args.chromosome_mbases, args.workdir).items():
        print(f"{key:32s} {value:,.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
