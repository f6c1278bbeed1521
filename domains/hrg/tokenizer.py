"""The Nucleotide Transformer 6-mer tokenizer (SPEC section 2), vectorised with numpy.

Vocabulary (4107 ids, in this order): `<unk> <pad> <mask> <cls> <eos> <bos>`, the 4096 6-mers in
`itertools.product("ATCG", repeat=6)` order, `A T C G`, `N`. Rule: a sequence is split on N; each N-free
run is cut into non-overlapping 6-mers left to right, its leftover (< 6) bases become single-base tokens,
and each N is one token.

The tokenizer reads base codes (`domains.hrg.bases`: A=0 T=1 C=2 G=3 N=4). With codes in "ATCG" order a 6-mer's
id is `6 + sum(code_i * 4**(5-i))` and a single base's is `4102 + code`.

How it is vectorised: the separators (N, and BREAK, a code that ends a run but emits nothing, used to
tokenise many windows in one call) cut the sequence into runs. Per run, the number of 6-mers, leftovers and
the run's first output slot are cumulative sums over runs; every token's slot and source position follow
from them, so the work is a few passes over the runs and over the tokens, never a Python loop per base.
Its speed and memory are measured by `python -m pipelines.benchmarks.tokenizer`.
"""

from __future__ import annotations

import itertools

import numpy as np

from domains.hrg.bases import BASES, N_CODE

SPECIAL_TOKENS = ("<unk>", "<pad>", "<mask>", "<cls>", "<eos>", "<bos>")
K = 6
KMERS = tuple("".join(kmer) for kmer in itertools.product(BASES, repeat=K))
VOCAB = (*SPECIAL_TOKENS, *KMERS, *BASES, "N")
VOCAB_SIZE = len(VOCAB)  # 4107
PAD_ID = SPECIAL_TOKENS.index("<pad>")
KMER_OFFSET = len(SPECIAL_TOKENS)  # id of AAAAAA
SINGLE_OFFSET = KMER_OFFSET + 4**K  # id of the single base A
N_ID = VOCAB_SIZE - 1

BREAK_CODE = 5  # ends a run like N but emits no token: the boundary between independently tokenised windows
TOKEN_DTYPE = np.uint16

_KMER_WEIGHTS = 4 ** np.arange(K - 1, -1, -1)  # first base most significant, as itertools.product orders them


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
