"""Generated genome-like sequences and FASTA files: the inputs of the tests, the offline mirror
(`python -m tests.hrg_fixtures OUT`) and the tokenizer benchmark, where real chromosomes are too big to ship.
"""

from __future__ import annotations

import numpy as np

from domains.atomic import atomic_path

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
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        for name, length in lengths.items():
            handle.write(f">{name} generated\n".encode())
            for start in range(0, length, chunk):
                size = min(chunk, length - start)
                handle.write(fasta_lines(generated_letters(rng, size, **letters_options), line_width))
