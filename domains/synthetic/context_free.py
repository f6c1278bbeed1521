"""Deterministic context-free tasks: reverse_string, stack_manipulation, modular_arithmetic_brackets,
solve_equation (Deletang et al. 2023)."""

from __future__ import annotations

import numpy as np

from domains.synthetic.inputs import BITS, DIGITS, MODULAR_DIGITS, MODULUS, evaluate_mod5, random_string, uniform_string
from domains.synthetic.task import Task

STACK_EMPTY = "2"  # Deletang's termination token: answer for an empty final stack


def _bracketed_expression(rng: np.random.Generator, leaves: int, operators: str) -> str:
    """Random expression with `leaves` digits in {0..4}: a leaf is d, -d, (d) or (-d) (uniformly), and every
    binary operation is bracketed, `(left op right)`, with the leaves split uniformly between the sides."""
    if leaves == 1:
        digit = MODULAR_DIGITS[rng.integers(MODULUS)]
        return (digit, f"-{digit}", f"({digit})", f"(-{digit})")[rng.integers(4)]
    left_leaves = int(rng.integers(1, leaves))
    operator = operators[rng.integers(len(operators))]
    left = _bracketed_expression(rng, left_leaves, operators)
    right = _bracketed_expression(rng, leaves - left_leaves, operators)
    return f"({left}{operator}{right})"


def _longest_bracketed_expression(leaves: int) -> int:
    """n leaves of at most 4 characters, (-d), and n - 1 operations adding `(`, the operator and `)`."""
    return 4 * leaves + 3 * (leaves - 1)


def solve_reverse_string(digits: str) -> str:
    """R:45790189>98109754. The input digits reversed; n = number of digits."""
    return digits[::-1]


def _stack_program(rng: np.random.Generator, length: int) -> str:
    """n symbols: an initial stack of k bits (bottom to top) then n - k actions from {2, 3, 4}, with k = 1
    for n = 1 and k uniform in [1, n - 1] otherwise (as Deletang)."""
    stack_size = 1 if length == 1 else int(rng.integers(1, length))
    return random_string(rng, BITS, stack_size) + random_string(rng, "234", length - stack_size)


def solve_stack_manipulation(program: str) -> str:
    """ST:11102442>1111. Initial stack given bottom to top (0/1), then actions 2 = pop, 3 = push 0,
    4 = push 1; the answer is the final stack top to bottom; n = total number of symbols.

    Decision: a pop on an empty stack is ignored and an empty final stack is answered "2" (Deletang's
    termination token), so answers use {0, 1, 2}, the table's 1/3 chance; the table example is reproduced."""
    actions_start = next((i for i, symbol in enumerate(program) if symbol in "234"), len(program))
    stack = list(program[:actions_start])
    for action in program[actions_start:]:
        if action == "2":
            if stack:
                stack.pop()
        else:
            stack.append("0" if action == "3" else "1")
    return "".join(reversed(stack)) or STACK_EMPTY


def _modular_brackets_expression(rng: np.random.Generator, leaves: int) -> str:
    return _bracketed_expression(rng, leaves, "+-*")


def solve_modular_arithmetic_brackets(expression: str) -> str:
    """MB:(-2+(3))>1. Value mod 5 of a fully bracketed expression over {0..4} with unary minus on digits;
    n = number of digits (leaves).

    Decision: binary + - * as in Deletang's experiments (mult=True), although the table example shows +."""
    return str(evaluate_mod5(expression))


def _linear_equation(rng: np.random.Generator, leaves: int) -> str:
    """A + - expression with n leaves, one digit replaced by x, followed by `=` and the original value."""
    expression = _bracketed_expression(rng, leaves, "+-")
    digit_positions = [i for i, symbol in enumerate(expression) if symbol.isdigit()]
    unknown_at = digit_positions[rng.integers(leaves)]
    lhs = expression[:unknown_at] + "x" + expression[unknown_at + 1 :]
    return f"{lhs}={evaluate_mod5(expression)}"


def solve_solve_equation(equation: str) -> str:
    """EQ:(2+-x)=4>3. The x in {0..4} solving the equation mod 5; n = number of leaves, x being one of them.

    With only + and - (Deletang's default, mult=False) and x occurring once, the left side is c +- x, so the
    solution is unique; it is found by trying the five residues."""
    lhs, rhs = equation.split("=")
    solutions = [d for d in MODULAR_DIGITS if evaluate_mod5(lhs.replace("x", d)) == int(rhs)]
    if len(solutions) != 1:
        raise ValueError(f"equation {equation!r} has solutions {solutions}, expected exactly one")
    return solutions[0]


CONTEXT_FREE_TASKS: tuple[Task, ...] = (
    Task(
        name="reverse_string",
        prefix="R",
        group="dcf",
        answer_kind="sequence",
        chance=0.1,
        make_input=uniform_string(DIGITS),
        solve=solve_reverse_string,
        longest_body=lambda n: 2 * n,
    ),
    Task(
        name="stack_manipulation",
        prefix="ST",
        group="dcf",
        answer_kind="sequence",
        chance=1 / 3,
        make_input=_stack_program,
        solve=solve_stack_manipulation,
        longest_body=lambda n: 2 * n,
    ),
    Task(
        name="modular_arithmetic_brackets",
        prefix="MB",
        group="dcf",
        answer_kind="single",
        chance=0.2,
        make_input=_modular_brackets_expression,
        solve=solve_modular_arithmetic_brackets,
        longest_body=lambda n: _longest_bracketed_expression(n) + 1,
    ),
    Task(
        name="solve_equation",
        prefix="EQ",
        group="dcf",
        answer_kind="single",
        chance=0.2,
        make_input=_linear_equation,
        solve=solve_solve_equation,
        longest_body=lambda n: _longest_bracketed_expression(n) + len("=0") + 1,
    ),
)
