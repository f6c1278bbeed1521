"""Synthetic sequence tasks rendered as ASCII strings (SPEC section 2, "Synthetic tasks").

Every example is `PREFIX:input` + SEPARATOR + `answer`; only the answer span is scored. The 15 Chomsky tasks
follow google-deepmind/neural_networks_chomsky_hierarchy (Deletang et al. 2023) with the fixes of the SPEC;
the retrieval and positional probes follow tables 10 and 11 of paper 000 (appendix E). Where the paper's
example, its chance column and the Deletang semantics disagree, the task's solver states the decision taken
(order of authority: SPEC, then Deletang, then the table).

Each task is a solver `solve_<name>(input) -> answer` whose docstring gives the rendering, an example, the
semantics and the meaning of the size parameter n, an input generator `(rng, n) -> input`, and the longest
`len(input) + len(answer)` any example of size n can have, from which `Task.max_length` is derived.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

SEPARATOR = ">"
DIGITS = "0123456789"
BITS = "01"
MODULUS = 5
MODULAR_DIGITS = DIGITS[:MODULUS]
KEYS = "abcdefghijklmnopqrstuvwxyz"
STACK_EMPTY = "2"  # Deletang's termination token: answer for an empty final stack
MISSING_MASK = "_"  # the masked symbol of missing_duplicate_string
QUERY_MARK = "?"  # between the key/value pairs and the queried key of the recall probes
OFFSET_MARK = "#"  # between the digits and the offset of fixed_offset
OFFSET_WIDTH = 4  # fixed_offset renders k with this many zero-padded digits


@dataclass(frozen=True)
class Example:
    prompt: str  # f"{prefix}:{input}{SEPARATOR}"
    answer: str

    @property
    def text(self) -> str:
        return self.prompt + self.answer


@dataclass(frozen=True)
class Task:
    """One synthetic task; its size parameter n (>= 1) is documented in the docstring of its solver."""

    name: str
    prefix: str
    group: str  # "regular" | "dcf" | "cs" | "retrieval" | "positional"
    answer_kind: str  # "single" | "sequence"
    chance: float
    make_input: Callable[[np.random.Generator, int], str]
    solve: Callable[[str], str]
    longest_body: Callable[[int], int]  # max len(input) + len(answer) over all examples of size n
    # largest n the rendering allows (26 keys, four-digit offsets); None when only max_bytes bounds n
    size_limit: int | None = None

    def sample(self, rng: np.random.Generator, length: int) -> Example:
        """One example of size `length`; deterministic given the state of `rng`."""
        if length < 1 or (self.size_limit is not None and length > self.size_limit):
            limit = "" if self.size_limit is None else f" and <= {self.size_limit}"
            raise ValueError(f"task {self.name!r}: length must be >= 1{limit}, got {length}")
        task_input = self.make_input(rng, length)
        return Example(f"{self.prefix}:{task_input}{SEPARATOR}", self.solve(task_input))

    def longest_text(self, length: int) -> int:
        """Largest len(example.text) over all examples of size `length`."""
        return len(self.prefix) + len(":") + len(SEPARATOR) + self.longest_body(length)

    def max_length(self, max_bytes: int) -> int:
        """Largest n such that every example of size n renders to at most `max_bytes` bytes."""
        if self.longest_text(1) > max_bytes:
            raise ValueError(f"task {self.name!r}: even n=1 needs {self.longest_text(1)} bytes > max_bytes={max_bytes}")
        upper = self.size_limit if self.size_limit is not None else math.inf
        fitting, beyond = 1, 2
        while beyond <= upper and self.longest_text(beyond) <= max_bytes:
            fitting, beyond = beyond, 2 * beyond
        beyond = min(beyond, upper + 1)
        while beyond - fitting > 1:
            middle = (fitting + beyond) // 2
            if self.longest_text(middle) <= max_bytes:
                fitting = middle
            else:
                beyond = middle
        return fitting


# ---------------------------------------------------------------------------------------------------------
# Shared helpers


def _random_string(rng: np.random.Generator, alphabet: str, length: int) -> str:
    return "".join(alphabet[i] for i in rng.integers(len(alphabet), size=length))


def _uniform_string(alphabet: str) -> Callable[[np.random.Generator, int], str]:
    """Generator of n symbols drawn uniformly from `alphabet`."""

    def make_input(rng: np.random.Generator, length: int) -> str:
        return _random_string(rng, alphabet, length)

    return make_input


def _nonzero_bits(rng: np.random.Generator, width: int) -> str:
    """`width` bits, uniform over the non-zero patterns (as Deletang's randint(1, 2**width - 1))."""
    while True:
        bits = _random_string(rng, BITS, width)
        if "1" in bits:
            return bits


def _little_endian(bits: str) -> int:
    return int(bits[::-1], 2)


def _to_little_endian(value: int) -> str:
    return format(value, "b")[::-1]


def _evaluate_mod5(expression: str) -> int:
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


# ---------------------------------------------------------------------------------------------------------
# Regular tasks


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
    digits = _random_string(rng, MODULAR_DIGITS, operands)
    operators = _random_string(rng, "+-*", operands - 1)
    return digits[0] + "".join(operator + digit for operator, digit in zip(operators, digits[1:], strict=True))


def solve_modular_arithmetic(expression: str) -> str:
    """MA:2-3*0+4>1. Value mod 5 of a flat expression, * before + and -, - left-associative; n = operands."""
    return str(_evaluate_mod5(expression))


# ---------------------------------------------------------------------------------------------------------
# Deterministic context-free tasks


def solve_reverse_string(digits: str) -> str:
    """R:45790189>98109754. The input digits reversed; n = number of digits."""
    return digits[::-1]


def _stack_program(rng: np.random.Generator, length: int) -> str:
    """n symbols: an initial stack of k bits (bottom to top) then n - k actions from {2, 3, 4}, with k = 1
    for n = 1 and k uniform in [1, n - 1] otherwise (as Deletang)."""
    stack_size = 1 if length == 1 else int(rng.integers(1, length))
    return _random_string(rng, BITS, stack_size) + _random_string(rng, "234", length - stack_size)


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
    return str(_evaluate_mod5(expression))


def _linear_equation(rng: np.random.Generator, leaves: int) -> str:
    """A + - expression with n leaves, one digit replaced by x, followed by `=` and the original value."""
    expression = _bracketed_expression(rng, leaves, "+-")
    digit_positions = [i for i, symbol in enumerate(expression) if symbol.isdigit()]
    unknown_at = digit_positions[rng.integers(leaves)]
    lhs = expression[:unknown_at] + "x" + expression[unknown_at + 1 :]
    return f"{lhs}={_evaluate_mod5(expression)}"


def solve_solve_equation(equation: str) -> str:
    """EQ:(2+-x)=4>3. The x in {0..4} solving the equation mod 5; n = number of leaves, x being one of them.

    With only + and - (Deletang's default, mult=False) and x occurring once, the left side is c +- x, so the
    solution is unique; it is found by trying the five residues."""
    lhs, rhs = equation.split("=")
    solutions = [d for d in MODULAR_DIGITS if _evaluate_mod5(lhs.replace("x", d)) == int(rhs)]
    if len(solutions) != 1:
        raise ValueError(f"equation {equation!r} has solutions {solutions}, expected exactly one")
    return solutions[0]


# ---------------------------------------------------------------------------------------------------------
# Context-sensitive tasks


def solve_duplicate_string(digits: str) -> str:
    """D:4579>45794579. The input emitted twice (ss); n = number of input digits.

    Decision: the answer is ss as in Deletang and the table's description; the table's example, which shows
    s alone, is not reproduced."""
    return digits + digits


def _masked_duplicate(rng: np.random.Generator, half_length: int) -> str:
    """ss for n random digits s, with one uniformly chosen position replaced by the mask."""
    duplicated = 2 * _random_string(rng, DIGITS, half_length)
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


# ---------------------------------------------------------------------------------------------------------
# Retrieval probes


def solve_needle(digits: str) -> str:
    """N:45790189>00000001. For each position, 1 if its digit occurred earlier, else 0; n = digits."""
    seen: set[str] = set()
    flags = []
    for digit in digits:
        flags.append("1" if digit in seen else "0")
        seen.add(digit)
    return "".join(flags)


def solve_induction(digits: str) -> str:
    """I:55791289>05000001. For each position whose digit occurred earlier, the digit that followed its most
    recent earlier occurrence (AB..A -> B); n = number of digits.

    Decision: a new digit is answered 0, the table's marker, which reproduces its example (the marker can
    coincide with a repeated digit followed by 0; the answer is still determined by the input)."""
    answer = []
    for i, digit in enumerate(digits):
        previous = digits.rfind(digit, 0, i)
        answer.append(digits[previous + 1] if previous >= 0 else "0")
    return "".join(answer)


# ---------------------------------------------------------------------------------------------------------
# Positional probes


def _digits_and_offset(rng: np.random.Generator, length: int) -> str:
    """n random digits, `#`, and k uniform in [1, n] rendered with four zero-padded digits."""
    offset = int(rng.integers(1, length + 1))
    return f"{_random_string(rng, DIGITS, length)}{OFFSET_MARK}{offset:0{OFFSET_WIDTH}d}"


def solve_fixed_offset(digits_and_offset: str) -> str:
    """FO:3141592#0003>5. The digit k places from the end, s[-k]; n = number of digits (at most 9999, the
    largest k four digits can render)."""
    digits, offset = digits_and_offset.split(OFFSET_MARK)
    return digits[-int(offset)]


def _value_of_last_occurrence(pairs_and_query: str) -> str:
    pairs, query = pairs_and_query.split(QUERY_MARK)
    return pairs[pairs.rindex(query) + 1]


def _pairs_with_duplicated_query(rng: np.random.Generator, distinct_keys: int) -> str:
    """n distinct random keys in n + 1 pairs: the queried key twice, every other key once, random order."""
    keys = [KEYS[i] for i in rng.choice(len(KEYS), size=distinct_keys, replace=False)]
    query = keys[0]
    with_duplicate = keys + [query]
    slot_keys = [with_duplicate[i] for i in rng.permutation(distinct_keys + 1)]
    values = _random_string(rng, DIGITS, distinct_keys + 1)
    return "".join(key + value for key, value in zip(slot_keys, values, strict=True)) + QUERY_MARK + query


def solve_dup_key_recall(pairs_and_query: str) -> str:
    """DK:a3b7a9c1?a>9. The value of the later of the two pairs holding the queried key; n = number of
    distinct keys (n + 1 pairs, at most 26 by the alphabet); keys are letters, values digits."""
    return _value_of_last_occurrence(pairs_and_query)


def _pairs_with_unique_query(rng: np.random.Generator, distinct_keys: int) -> str:
    """n pairs with distinct random keys and digit values, then `?` and one of the keys, uniformly."""
    keys = [KEYS[i] for i in rng.choice(len(KEYS), size=distinct_keys, replace=False)]
    values = _random_string(rng, DIGITS, distinct_keys)
    query = keys[int(rng.integers(distinct_keys))]
    return "".join(key + value for key, value in zip(keys, values, strict=True)) + QUERY_MARK + query


def solve_assoc_recall(pairs_and_query: str) -> str:
    """AR:a3b7c1?b>7. The value of the only pair holding the queried key; n = number of pairs (all keys
    distinct, at most 26)."""
    return _value_of_last_occurrence(pairs_and_query)


# ---------------------------------------------------------------------------------------------------------
# Registry, in the order of SPEC section 2


def _registry(*tasks: Task) -> dict[str, Task]:
    return {task.name: task for task in tasks}


TASKS: dict[str, Task] = _registry(
    Task(
        name="even_pairs",
        prefix="EP",
        group="regular",
        answer_kind="single",
        chance=0.5,
        make_input=_uniform_string(BITS),
        solve=solve_even_pairs,
        longest_body=lambda n: n + 1,
    ),
    Task(
        name="parity",
        prefix="P",
        group="regular",
        answer_kind="single",
        chance=0.5,
        make_input=_uniform_string(BITS),
        solve=solve_parity,
        longest_body=lambda n: n + 1,
    ),
    Task(
        name="cycle_navigation",
        prefix="CY",
        group="regular",
        answer_kind="single",
        chance=0.2,
        make_input=_uniform_string("012"),
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
    Task(
        name="reverse_string",
        prefix="R",
        group="dcf",
        answer_kind="sequence",
        chance=0.1,
        make_input=_uniform_string(DIGITS),
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
    Task(
        name="duplicate_string",
        prefix="D",
        group="cs",
        answer_kind="sequence",
        chance=0.1,
        make_input=_uniform_string(DIGITS),
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
        make_input=_uniform_string(DIGITS),
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
        make_input=_uniform_string(DIGITS),
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
    Task(
        name="needle",
        prefix="N",
        group="retrieval",
        answer_kind="sequence",
        chance=0.06,
        make_input=_uniform_string(DIGITS),
        solve=solve_needle,
        longest_body=lambda n: 2 * n,
    ),
    Task(
        name="induction",
        prefix="I",
        group="retrieval",
        answer_kind="sequence",
        chance=0.02,
        make_input=_uniform_string(DIGITS),
        solve=solve_induction,
        longest_body=lambda n: 2 * n,
    ),
    Task(
        name="fixed_offset",
        prefix="FO",
        group="positional",
        answer_kind="single",
        chance=0.1,
        make_input=_digits_and_offset,
        solve=solve_fixed_offset,
        longest_body=lambda n: n + len(OFFSET_MARK) + OFFSET_WIDTH + 1,
        size_limit=10**OFFSET_WIDTH - 1,
    ),
    Task(
        name="dup_key_recall",
        prefix="DK",
        group="positional",
        answer_kind="single",
        chance=0.1,
        make_input=_pairs_with_duplicated_query,
        solve=solve_dup_key_recall,
        longest_body=lambda n: 2 * (n + 1) + len(QUERY_MARK) + 1 + 1,
        size_limit=len(KEYS),
    ),
    Task(
        name="assoc_recall",
        prefix="AR",
        group="positional",
        answer_kind="single",
        chance=0.1,
        make_input=_pairs_with_unique_query,
        solve=solve_assoc_recall,
        longest_body=lambda n: 2 * n + len(QUERY_MARK) + 1 + 1,
        size_limit=len(KEYS),
    ),
)


def get_task(name: str) -> Task:
    """The task called `name`; ValueError listing the valid names otherwise."""
    if name not in TASKS:
        raise ValueError(f"unknown synthetic task {name!r}; valid names: {', '.join(TASKS)}")
    return TASKS[name]


def sample_example(
    task: Task,
    rng: np.random.Generator,
    max_bytes: int,
    min_length: int = 1,
    max_length: int | None = None,
) -> Example:
    """An example whose size n is uniform in [min_length, max_length or task.max_length(max_bytes)]."""
    longest = task.max_length(max_bytes) if max_length is None else max_length
    if min_length < 1 or min_length > longest:
        raise ValueError(f"task {task.name!r}: empty length range [{min_length}, {longest}]")
    return task.sample(rng, int(rng.integers(min_length, longest + 1)))
