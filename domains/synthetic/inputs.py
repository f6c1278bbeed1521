"""Alphabets, random input strings and mod-5 arithmetic shared by several task families."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

DIGITS = "0123456789"
BITS = "01"
MODULUS = 5
MODULAR_DIGITS = DIGITS[:MODULUS]


def random_string(rng: np.random.Generator, alphabet: str, length: int) -> str:
    return "".join(alphabet[i] for i in rng.integers(len(alphabet), size=length))


def uniform_string(alphabet: str) -> Callable[[np.random.Generator, int], str]:
    """Generator of n symbols drawn uniformly from `alphabet`."""

    def make_input(rng: np.random.Generator, length: int) -> str:
        return random_string(rng, alphabet, length)

    return make_input


def evaluate_mod5(expression: str) -> int:
    """Value mod 5 of an infix expression over digits, + - *, unary minus and brackets.

    `*` binds tighter than + and -, binary operators are left-associative (so 1-1-1 = -1), and unary minus
    binds tightest (its placement never changes the value, since negation commutes with products). An
    explicit operator stack (shunting-yard) keeps deep nesting off the Python call stack.
    """
    precedence = {"+": 1, "-": 1, "*": 2, "neg": 3}
    values: list[int] = []
    operators: list[str] = []

    def apply_top_operator() -> None:
        operator = operators.pop()
        if operator == "neg":
            values.append(-values.pop() % MODULUS)
            return
        right, left = values.pop(), values.pop()
        result = {"+": left + right, "-": left - right, "*": left * right}[operator]
        values.append(result % MODULUS)

    expecting_operand = True
    for symbol in expression:
        if symbol.isdigit():
            values.append(int(symbol))
            expecting_operand = False
        elif symbol == "(":
            operators.append(symbol)
        elif symbol == ")":
            while operators[-1] != "(":
                apply_top_operator()
            operators.pop()
            expecting_operand = False
        elif symbol == "-" and expecting_operand:
            operators.append("neg")
        else:
            while operators and operators[-1] != "(" and precedence[operators[-1]] >= precedence[symbol]:
                apply_top_operator()
            operators.append(symbol)
            expecting_operand = True
    while operators:
        apply_top_operator()
    return values[0] % MODULUS
