"""Context-sensitive tasks: duplicate_string, missing_duplicate_string, odds_first, binary_addition, bucket_sort,
binary_multiplication, compute_sqrt (Deletang et al. 2023)."""

from __future__ import annotations

import math

import numpy as np

from domains.synthetic.inputs import BITS, DIGITS, random_string, uniform_string
from domains.synthetic.task import Task

MISSING_MASK = "_"  # the masked symbol of missing_duplicate_string


def _nonzero_bits(rng: np.random.Generator, width: int) -> str:
    """`width` bits, uniform over the non-zero patterns (as Deletang's randint(1, 2**width - 1))."""
    while True:
        bits = random_string(rng, BITS, width)
        if "1" in bits:
            return bits


def _little_endian(bits: str) -> int:
    return int(bits[::-1], 2)


def _to_little_endian(value: int) -> str:
    return format(value, "b")[::-1]


def solve_duplicate_string(digits: str) -> str:
    """D:4579>45794579. The input emitted twice (ss); n = number of input digits.

    Decision: the answer is ss as in Deletang and the table's description; the table's example, which shows
    s alone, is not reproduced."""
    return digits + digits


def _masked_duplicate(rng: np.random.Generator, half_length: int) -> str:
    """ss for n random digits s, with one uniformly chosen position replaced by the mask."""
    duplicated = 2 * random_string(rng, DIGITS, half_length)
    masked_at = int(rng.integers(2 * half_length))
    return duplicated[:masked_at] + MISSING_MASK + duplicated[masked_at + 1 :]


def solve_missing_duplicate_string(masked: str) -> str:
    """MD:45794_79>5. The digit hidden by `_` in ss; n = len(s), so the input has 2n symbols.

    Decision: digits 0-9 with `_` as the mask (SPEC: digits for the string tasks, chance 10%), so the table's
    binary example with `2` as mask is not reproduced; its digit analogue `_1110111` gives 0."""
    half = len(masked) // 2
    masked_at = masked.index(MISSING_MASK)
    return masked[(masked_at + half) % len(masked)]


def solve_odds_first(digits: str) -> str:
    """OF:45790189>59194708. Symbols at 0-based odd indices, then those at even indices; n = digits."""
    return digits[1::2] + digits[::2]


def _binary_operands(rng: np.random.Generator, width: int, operator: str) -> str:
    """Two non-zero little-endian operands, one of n bits and one of 1..n bits (in random order)."""
    widths = [width, int(rng.integers(1, width + 1))]
    if rng.integers(2):
        widths.reverse()
    return _nonzero_bits(rng, widths[0]) + operator + _nonzero_bits(rng, widths[1])


def _binary_addition_input(rng: np.random.Generator, width: int) -> str:
    return _binary_operands(rng, width, "+")


def solve_binary_addition(expression: str) -> str:
    """BA:111+0111>10101. Sum of two little-endian binary numbers (7 + 14 = 21), little-endian without
    trailing zeros; n = bits of the longer operand (operands may carry high zero bits but are never 0).

    Decision: no termination token or padding (the table example has none); chance stays the table's 1/3."""
    left, right = expression.split("+")
    return _to_little_endian(_little_endian(left) + _little_endian(right))


def solve_bucket_sort(digits: str) -> str:
    """S:45790189>01457899. The input digits in ascending order; n = number of digits."""
    return "".join(sorted(digits))


def _binary_multiplication_input(rng: np.random.Generator, width: int) -> str:
    return _binary_operands(rng, width, "*")


def solve_binary_multiplication(expression: str) -> str:
    """BM:111*0111>0100011. Product of two little-endian binary numbers (7 * 14 = 98), little-endian without
    trailing zeros; n = bits of the longer operand (operands never 0). Chance is the table's ~50%."""
    left, right = expression.split("*")
    return _to_little_endian(_little_endian(left) * _little_endian(right))


def solve_compute_sqrt(bits: str) -> str:
    """SQ:11110011>1111. floor(sqrt(x)) of a big-endian binary x (isqrt(243) = 15), big-endian, zero-padded
    to ceil(n / 2) bits as in Deletang; n = input bits, x uniform in [1, 2**n - 1]."""
    return format(math.isqrt(int(bits, 2)), "b").zfill((len(bits) + 1) // 2)


CONTEXT_SENSITIVE_TASKS: tuple[Task, ...] = (
    Task(
        name="duplicate_string",
        prefix="D",
        group="cs",
        answer_kind="sequence",
        chance=0.1,
        make_input=uniform_string(DIGITS),
        solve=solve_duplicate_string,
        longest_body=lambda n: 3 * n,
    ),
    Task(
        name="missing_duplicate_string",
        prefix="MD",
        group="cs",
        answer_kind="single",
        chance=0.1,
        make_input=_masked_duplicate,
        solve=solve_missing_duplicate_string,
        longest_body=lambda n: 2 * n + 1,
    ),
    Task(
        name="odds_first",
        prefix="OF",
        group="cs",
        answer_kind="sequence",
        chance=0.1,
        make_input=uniform_string(DIGITS),
        solve=solve_odds_first,
        longest_body=lambda n: 2 * n,
    ),
    Task(
        name="binary_addition",
        prefix="BA",
        group="cs",
        answer_kind="sequence",
        chance=1 / 3,
        make_input=_binary_addition_input,
        solve=solve_binary_addition,
        longest_body=lambda n: (2 * n + 1) + (n + 1),
    ),
    Task(
        name="bucket_sort",
        prefix="S",
        group="cs",
        answer_kind="sequence",
        chance=0.1,
        make_input=uniform_string(DIGITS),
        solve=solve_bucket_sort,
        longest_body=lambda n: 2 * n,
    ),
    Task(
        name="binary_multiplication",
        prefix="BM",
        group="cs",
        answer_kind="sequence",
        chance=0.5,
        make_input=_binary_multiplication_input,
        solve=solve_binary_multiplication,
        longest_body=lambda n: (2 * n + 1) + (2 * n if n > 1 else 1),
    ),
    Task(
        name="compute_sqrt",
        prefix="SQ",
        group="cs",
        answer_kind="sequence",
        chance=0.5,
        make_input=_nonzero_bits,
        solve=solve_compute_sqrt,
        longest_body=lambda n: n + (n + 1) // 2,
    ),
)
