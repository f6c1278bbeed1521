"""The Nucleotide Transformer 6-mer tokenizer (SPEC section 2), vectorised with numpy.

Vocabulary (4107 ids, in this order): `<unk> <pad> <mask> <cls> <eos> <bos>`, the 4096 6-mers in
`itertools.product("ATCG", repeat=6)` order, `A T C G`, `N`. Rule: a sequence is split on N; each N-free
run is cut into non-overlapping 6-mers left to right, its leftover (< 6) bases become single-base tokens,
and each N is one token.

Bases travel as uint8 codes A=0 T=1 C=2 G=3 N=4 (`encode_bases`: uppercase, every other letter becomes N).
With codes in "ATCG" order a 6-mer's id is `6 + sum(code_i * 4**(5-i))` and a single base's is `4102 + code`.

How it is vectorised: the separators (N, and BREAK, a code that ends a run but emits nothing, used to
tokenise many windows in one call) cut the sequence into runs. Per run, the number of 6-mers, leftovers and
the run's first output slot are cumulative sums over runs; every token's slot and source position follow
from them, so the work is a few passes over the runs and over the tokens, never a Python loop per base.

    python -m domains.nt_tokenizer --benchmark [--mbases 50] [--chromosome-mbases 200]
prints the tokenizer's bases/s on one core and the peak RSS of preparing and tokenising a generated
chromosome (see `benchmark`).
"""

from __future__ import annotations

import itertools

import numpy as np

SPECIAL_TOKENS = ("<unk>", "<pad>", "<mask>", "<cls>", "<eos>", "<bos>")
BASES = "ATCG"
K = 6
KMERS = tuple("".join(kmer) for kmer in itertools.product(BASES, repeat=K))
VOCAB = (*SPECIAL_TOKENS, *KMERS, *BASES, "N")
VOCAB_SIZE = len(VOCAB)  # 4107
PAD_ID = SPECIAL_TOKENS.index("<pad>")
KMER_OFFSET = len(SPECIAL_TOKENS)  # id of AAAAAA
SINGLE_OFFSET = KMER_OFFSET + 4**K  # id of the single base A
N_ID = VOCAB_SIZE - 1

N_CODE = 4
BREAK_CODE = 5  # ends a run like N but emits no token: the boundary between independently tokenised windows
INVALID_CODE = 255  # a byte that is not a letter: not sequence
TOKEN_DTYPE = np.uint16

# byte -> base code: ACGT in either case, any other letter N (IUPAC codes, lowercase n), anything else invalid
CODE_OF_BYTE = np.full(256, INVALID_CODE, dtype=np.uint8)
for _letter in range(256):
    if chr(_letter).isascii() and chr(_letter).isalpha():
        CODE_OF_BYTE[_letter] = N_CODE
for _code, _base in enumerate(BASES):
    CODE_OF_BYTE[ord(_base)] = CODE_OF_BYTE[ord(_base.lower())] = _code
del _letter, _code, _base

_KMER_WEIGHTS = 4 ** np.arange(K - 1, -1, -1)  # first base most significant, as itertools.product orders them


def encode_bases(sequence: str | bytes | np.ndarray) -> np.ndarray:
    """Base codes (uint8) of a sequence of letters; raises ValueError at the first byte that is not a letter."""
    if isinstance(sequence, str):
        sequence = sequence.encode("ascii")
    raw = np.frombuffer(sequence, dtype=np.uint8) if isinstance(sequence, bytes) else np.asarray(sequence, np.uint8)
    codes = CODE_OF_BYTE[raw]
    bad = np.flatnonzero(codes == INVALID_CODE)
    if bad.size:
        raise ValueError(f"byte {bytes(raw[bad[:1]])!r} at position {bad[0]} is not a base letter")
    return codes


def _exclusive_cumsum(counts: np.ndarray) -> np.ndarray:
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return starts


def _segment_ranks(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For segments of `counts` items laid end to end: each item's segment and its rank inside the segment."""
    segment = np.repeat(np.arange(len(counts)), counts)
    rank = np.arange(len(segment)) - np.repeat(_exclusive_cumsum(counts), counts)
    return segment, rank


def tokenize_with_breaks(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of `codes` (uint8, may contain BREAK_CODE) and the output index where each BREAK falls.

    Returns (tokens uint16, break_slots int64): the tokens before the i-th BREAK are tokens[:break_slots[i]].
    """
    codes = np.asarray(codes, dtype=np.uint8)
    n = len(codes)
    separators = np.flatnonzero(codes >= N_CODE)
    run_starts = np.concatenate([[0], separators + 1])
    run_lengths = np.concatenate([separators, [n]]) - run_starts
    kmers, leftovers = np.divmod(run_lengths, K)
    separator_tokens = np.zeros(len(run_starts), dtype=np.int64)
    separator_tokens[:-1] = codes[separators] == N_CODE
    out_starts = _exclusive_cumsum(kmers + leftovers + separator_tokens)
    total = int(out_starts[-1] + kmers[-1] + leftovers[-1])
    tokens = np.empty(total, dtype=TOKEN_DTYPE)

    if len(run_starts) == 1:  # no separator: one run, cut by a reshape
        whole = codes[: int(kmers[0]) * K].reshape(-1, K)
        tokens[: len(whole)] = whole @ _KMER_WEIGHTS + KMER_OFFSET
        tokens[len(whole) :] = codes[len(whole) * K :].astype(TOKEN_DTYPE) + SINGLE_OFFSET
        return tokens, np.zeros(0, dtype=np.int64)

    run, rank = _segment_ranks(kmers)
    first = run_starts[run] + K * rank
    value = codes[first].astype(np.int32)
    for offset in range(1, K):
        value = value * 4 + codes[first + offset]
    tokens[out_starts[run] + rank] = value + KMER_OFFSET

    run, rank = _segment_ranks(leftovers)
    single = codes[run_starts[run] + K * kmers[run] + rank].astype(TOKEN_DTYPE) + SINGLE_OFFSET
    tokens[out_starts[run] + kmers[run] + rank] = single

    n_slots = out_starts[:-1] + kmers[:-1] + leftovers[:-1]  # slot right after each run: its separator's
    is_n = separator_tokens[:-1].astype(bool)
    tokens[n_slots[is_n]] = N_ID
    return tokens, n_slots[~is_n]


def tokenize(codes: np.ndarray) -> np.ndarray:
    """Token ids (uint16) of one sequence of base codes (A=0 T=1 C=2 G=3 N=4)."""
    codes = np.asarray(codes, dtype=np.uint8)
    if codes.size and codes.max() > N_CODE:
        raise ValueError(f"base codes must be 0..{N_CODE}; got {int(codes.max())}")
    return tokenize_with_breaks(codes)[0]


def tokenize_windows(windows: np.ndarray, max_tokens: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Tokenise each row of `windows` (W, bases) on its own and keep at most `max_tokens` tokens of each.

    Returns (tokens, offsets): window i is tokens[offsets[i]:offsets[i+1]].
    """
    count = len(windows)
    if count == 0:
        return np.zeros(0, dtype=TOKEN_DTYPE), np.zeros(1, dtype=np.int64)
    framed = np.empty((count, windows.shape[1] + 1), dtype=np.uint8)
    framed[:, :-1] = windows
    framed[:, -1] = BREAK_CODE
    tokens, breaks = tokenize_with_breaks(framed.ravel())
    starts = np.concatenate([[0], breaks[:-1]])
    lengths = breaks - starts
    if max_tokens is not None and lengths.max(initial=0) > max_tokens:
        lengths = np.minimum(lengths, max_tokens)
        window, rank = _segment_ranks(lengths)
        tokens = tokens[starts[window] + rank]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return tokens, offsets


def token_strings(tokens: np.ndarray) -> list[str]:
    return [VOCAB[int(t)] for t in tokens]


# ---- generated genomes: inputs of the benchmark and of the tests ---------------------------------------------
IUPAC_AMBIGUOUS = b"RYKMSWBDHV"


def generated_letters(
    rng: np.random.Generator,
    length: int,
    *,
    n_runs: int = 0,
    max_n_run: int = 3000,
    lowercase_runs: int = 0,
    iupac: int = 0,
    tandem_repeats: int = 0,
) -> np.ndarray:
    """A random genome-like sequence as ASCII letters (uint8): uniform ACGT, plus `tandem_repeats` stretches of
    a 2..12-base motif repeated over 60..2000 bases (something a model can learn), `n_runs` runs of 1..max_n_run
    N, `lowercase_runs` soft-masked stretches of 10..2000 bases and `iupac` single ambiguity letters. The loops
    run over stretches, never over bases."""
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, length)]
    for _ in range(tandem_repeats if length > 2000 else 0):
        motif = letters[rng.integers(0, length - 12) :][: rng.integers(2, 13)].copy()
        start, span = int(rng.integers(0, length - 2000)), int(rng.integers(60, 2001))
        letters[start : start + span] = np.resize(motif, span)
    for _ in range(n_runs):
        start = int(rng.integers(0, length))
        letters[start : start + int(rng.integers(1, max_n_run + 1))] = ord("N")
    for _ in range(lowercase_runs):
        start = int(rng.integers(0, length))
        letters[start : start + int(rng.integers(10, 2001))] |= 0x20
    letters[rng.integers(0, length, iupac)] = np.frombuffer(IUPAC_AMBIGUOUS, np.uint8)[rng.integers(0, 10, iupac)]
    return letters


def fasta_lines(letters: np.ndarray, line_width: int, newline: bytes = b"\n") -> bytes:
    """Sequence letters as FASTA lines of `line_width` (the last one shorter), each ending with `newline`."""
    full = len(letters) // line_width * line_width
    lines = np.empty((full // line_width, line_width + len(newline)), dtype=np.uint8)
    lines[:, :line_width] = letters[:full].reshape(-1, line_width)
    lines[:, line_width:] = np.frombuffer(newline, np.uint8)
    tail = letters[full:].tobytes() + newline if full < len(letters) else b""
    return lines.tobytes() + tail


def write_generated_fasta(
    path, lengths: dict[str, int], seed: int, line_width: int = 60, chunk_lines: int = 1 << 17, **letters_options
) -> None:
    """A FASTA file of generated records written `chunk_lines` lines at a time (bounded memory at any size)."""
    rng = np.random.default_rng(seed)
    chunk = chunk_lines * line_width
    with open(path, "wb") as handle:
        for name, length in lengths.items():
            handle.write(f">{name} generated\n".encode())
            for start in range(0, length, chunk):
                size = min(chunk, length - start)
                handle.write(fasta_lines(generated_letters(rng, size, **letters_options), line_width))


# ---- benchmark: throughput and bounded memory (not a test: it takes seconds to minutes) ----------------------
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
    import os
    import resource
    import tempfile
    import time
    from pathlib import Path

    from domains.hrg import chromosome_windows, fasta_index, write_chromosome_codes

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
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", action="store_true", help="measure bases/s and peak RSS")
    parser.add_argument("--mbases", type=int, default=50, help="size of the throughput sequence")
    parser.add_argument("--chromosome-mbases", type=int, default=200, help="size of the generated chromosome")
    parser.add_argument("--workdir", help="where the generated chromosome is written (default: the temp folder)")
    args = parser.parse_args(argv)
    if not args.benchmark:
        parser.print_help()
        return 0
    for key, value in benchmark(args.mbases, args.chromosome_mbases, args.workdir).items():
        print(f"{key:32s} {value:,.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
