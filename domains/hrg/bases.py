"""Base codes: the uint8 alphabet the genome store is written in and the tokenizer reads.

A=0 T=1 C=2 G=3 (the order of the Nucleotide Transformer's "ATCG"), N=4. Uppercase and lowercase ACGT keep their
code; every other letter (IUPAC ambiguity codes, n) becomes N; a byte that is not a letter is not sequence.
"""

from __future__ import annotations

import numpy as np

BASES = "ATCG"
N_CODE = 4
INVALID_CODE = 255  # a byte that is not a letter: not sequence

# byte -> base code: ACGT in either case, any other letter N (IUPAC codes, lowercase n), anything else invalid
CODE_OF_BYTE = np.full(256, INVALID_CODE, dtype=np.uint8)
for _letter in range(256):
    if chr(_letter).isascii() and chr(_letter).isalpha():
        CODE_OF_BYTE[_letter] = N_CODE
for _code, _base in enumerate(BASES):
    CODE_OF_BYTE[ord(_base)] = CODE_OF_BYTE[ord(_base.lower())] = _code
del _letter, _code, _base


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
