"""Regular tasks: even_pairs, parity, cycle_navigation, modular_arithmetic (Deletang et al. 2023)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from domains.synthetic.inputs import BITS, MODULAR_DIGITS, MODULUS, evaluate_mod5, random_string, uniform_string
from domains.synthetic.task import Task


def solve_even_pairs(bits: str) -> str:
    """EP:01110011>1. Parity of the number of adjacent differing pairs (01 or 10); n = number of bits.

    Decision: the answer is Deletang's class, 1 when the count is odd (here 3), which reproduces the table's
    example although the table's description reads "is the count even?"."""
    return str(sum(left != right for left, right in pairwise(bits)) % 2)


def solve_parity(bits: str) -> str:
    """P:01110011>1. Number of 1s mod 2; n = number of bits."""
    return str(bits.count("1") % 2)


def solve_cycle_navigation(moves: str) -> str:
    """CY:11220022>2. Final position on a 5-cycle starting at 0, moves 0/1/2 = left/stay/right; n = moves."""
    return str(sum(int(move) - 1 for move in moves) % MODULUS)


def _flat_expression(rng: np.random.Generator, operands: int) -> str:
    """n digits in {0..4} joined by n - 1 operators drawn uniformly from + - *."""
    digits = random_string(rng, MODULAR_DIGITS, operands)
    operators = random_string(rng, "+-*", operands - 1)
    return digits[0] + "".join(operator + digit for operator, digit in zip(operators, digits[1:], strict=True))


def solve_modular_arithmetic(expression: str) -> str:
    """MA:2-3*0+4>1. Value mod 5 of a flat expression, * before + and -, - left-associative; n = operands."""
    return str(evaluate_mod5(expression))


REGULAR_TASKS: tuple[Task, ...] = (
    Task(
        name="even_pairs",
        prefix="EP",
        group="regular",
        answer_kind="single",
        chance=0.5,
        make_input=uniform_string(BITS),
        solve=solve_even_pairs,
        longest_body=lambda n: n + 1,
    ),
    Task(
        name="parity",
        prefix="P",
        group="regular",
        answer_kind="single",
        chance=0.5,
        make_input=uniform_string(BITS),
        solve=solve_parity,
        longest_body=lambda n: n + 1,
    ),
    Task(
        name="cycle_navigation",
        prefix="CY",
        group="regular",
        answer_kind="single",
        chance=0.2,
        make_input=uniform_string("012"),
        solve=solve_cycle_navigation,
        longest_body=lambda n: n + 1,
    ),
    Task(
        name="modular_arithmetic",
        prefix="MA",
        group="regular",
        answer_kind="single",
        chance=0.2,
        make_input=_flat_expression,
        solve=solve_modular_arithmetic,
        longest_body=lambda n: 2 * n,
    ),
)
