"""Tests of the synthetic task generators: hand-checked examples, independent re-statements of each
answer, length bounds, determinism and the rendering contract."""

import math

import numpy as np
import pytest

from domains.synthetic.inputs import MODULAR_DIGITS
from domains.synthetic.registry import TASKS, get_task, sample_example
from domains.synthetic.task import SEPARATOR, Task

SPEC_ORDER = [
    "even_pairs",
    "parity",
    "cycle_navigation",
    "modular_arithmetic",
    "reverse_string",
    "stack_manipulation",
    "modular_arithmetic_brackets",
    "solve_equation",
    "duplicate_string",
    "missing_duplicate_string",
    "odds_first",
    "binary_addition",
    "bucket_sort",
    "binary_multiplication",
    "compute_sqrt",
    "needle",
    "induction",
    "fixed_offset",
    "dup_key_recall",
    "assoc_recall",
]

# Tables 9-11 of paper 000 (appendix E): prefix, group, answer kind and chance (percent -> fraction).
TABLE = {
    "even_pairs": ("EP", "regular", "single", 0.5),
    "parity": ("P", "regular", "single", 0.5),
    "cycle_navigation": ("CY", "regular", "single", 0.2),
    "modular_arithmetic": ("MA", "regular", "single", 0.2),
    "reverse_string": ("R", "dcf", "sequence", 0.1),
    "stack_manipulation": ("ST", "dcf", "sequence", 1 / 3),
    "modular_arithmetic_brackets": ("MB", "dcf", "single", 0.2),
    "solve_equation": ("EQ", "dcf", "single", 0.2),
    "duplicate_string": ("D", "cs", "sequence", 0.1),
    "missing_duplicate_string": ("MD", "cs", "single", 0.1),
    "odds_first": ("OF", "cs", "sequence", 0.1),
    "binary_addition": ("BA", "cs", "sequence", 1 / 3),
    "bucket_sort": ("S", "cs", "sequence", 0.1),
    "binary_multiplication": ("BM", "cs", "sequence", 0.5),
    "compute_sqrt": ("SQ", "cs", "sequence", 0.5),
    "needle": ("N", "retrieval", "sequence", 0.06),
    "induction": ("I", "retrieval", "sequence", 0.02),
    "fixed_offset": ("FO", "positional", "single", 0.1),
    "dup_key_recall": ("DK", "positional", "single", 0.1),
    "assoc_recall": ("AR", "positional", "single", 0.1),
}

# (task, input, answer): the tables' examples where they agree with the decision in the task's docstring,
# plus hand-worked ones (Deletang's docstring examples, edge cases, and replacements for the table's
# examples of duplicate_string and missing_duplicate_string).
HAND_CHECKED = [
    ("even_pairs", "01110011", "1"),  # table: 3 differing pairs, odd
    ("even_pairs", "001110", "0"),  # Deletang: one 01 and one 10
    ("even_pairs", "1", "0"),
    ("parity", "01110011", "1"),  # table
    ("parity", "01111", "0"),
    ("cycle_navigation", "11220022", "2"),  # table: +1 +1 -1 -1 +1 +1
    ("cycle_navigation", "0", "4"),  # one step left from 0
    ("modular_arithmetic", "2-3*0+4", "1"),  # table
    ("modular_arithmetic", "1+2*3", "2"),  # * first: 7
    ("modular_arithmetic", "1-1-1", "4"),  # left-associative: -1
    ("modular_arithmetic", "0*1+4*3-2", "0"),  # 10
    ("reverse_string", "45790189", "98109754"),  # table
    ("stack_manipulation", "11102442", "1111"),  # table: 1110, pop, push 1, push 1, pop
    ("stack_manipulation", "0110422", "110"),  # Deletang: 0110, push 1, pop, pop
    ("stack_manipulation", "11222", "2"),  # third pop ignored, empty stack answered "2"
    ("stack_manipulation", "0", "0"),
    ("modular_arithmetic_brackets", "(-2+(3))", "1"),  # table
    ("modular_arithmetic_brackets", "((2*3)-4)", "2"),
    ("modular_arithmetic_brackets", "(-3*(-4))", "2"),  # 12
    ("solve_equation", "(2+-x)=4", "3"),  # table: 2 - 3 = -1 = 4
    ("solve_equation", "((x-3)-(-1))=0", "2"),
    ("duplicate_string", "45790189", "4579018945790189"),  # ss, not the table's s
    ("missing_duplicate_string", "45794_79", "5"),  # s = 4579
    ("missing_duplicate_string", "_1110111", "0"),  # the table's binary example with _ as mask
    ("missing_duplicate_string", "3_", "3"),
    ("odds_first", "45790189", "59194708"),  # table
    ("odds_first", "0123456", "1350246"),  # 0-based: odd indices 1, 3, 5 first
    ("binary_addition", "111+0111", "10101"),  # table: 7 + 14 = 21
    ("binary_addition", "001+01101", "01011"),  # Deletang: 4 + 22 = 26
    ("bucket_sort", "45790189", "01457899"),  # table
    ("binary_multiplication", "111*0111", "0100011"),  # table: 7 * 14 = 98
    ("binary_multiplication", "001*01101", "0001101"),  # Deletang: 4 * 22 = 88
    ("compute_sqrt", "11110011", "1111"),  # table: isqrt(243) = 15
    ("compute_sqrt", "100101", "110"),  # Deletang: isqrt(37) = 6
    ("compute_sqrt", "00001", "001"),  # zero-padded to ceil(5 / 2) bits
    ("needle", "45790189", "00000001"),  # table
    ("induction", "55791289", "05000001"),  # table
    ("induction", "121314", "002030"),  # most recent earlier occurrence of 1 was followed by 3
    ("fixed_offset", "3141592#0003", "5"),  # table
    ("fixed_offset", "3141592#0007", "3"),
    ("dup_key_recall", "a3b7a9c1?a", "9"),  # table
    ("assoc_recall", "a3b7c1?b", "7"),  # table
]

MAX_BYTES = [32, 64, 256, 512, 2048]


def body_of(task: Task, prompt: str) -> str:
    """The task input inside a rendered prompt."""
    assert prompt.startswith(f"{task.prefix}:")
    assert prompt.endswith(SEPARATOR)
    return prompt[len(task.prefix) + 1 : -len(SEPARATOR)]


def random_examples(task: Task, seed: int, count: int, max_bytes: int = 128):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        example = sample_example(task, rng, max_bytes)
        yield body_of(task, example.prompt), example.answer


def test_registry_names_order_and_table_metadata():
    assert list(TASKS) == SPEC_ORDER
    for name, (prefix, group, answer_kind, chance) in TABLE.items():
        task = TASKS[name]
        assert (task.name, task.prefix, task.group, task.answer_kind) == (name, prefix, group, answer_kind)
        assert task.chance == pytest.approx(chance)
    assert len({task.prefix for task in TASKS.values()}) == len(TASKS)


def test_every_task_has_a_hand_checked_example():
    assert {name for name, _, _ in HAND_CHECKED} == set(TASKS)


@pytest.mark.parametrize(("name", "task_input", "answer"), HAND_CHECKED)
def test_hand_checked_example(name, task_input, answer):
    assert TASKS[name].solve(task_input) == answer


@pytest.mark.parametrize("name", SPEC_ORDER)
def test_samples_are_self_consistent_ascii_and_separator_free(name):
    task = TASKS[name]
    for task_input, answer in random_examples(task, seed=1, count=200):
        assert SEPARATOR not in task_input
        assert answer and answer.isascii() and task_input.isascii()
        assert task.solve(task_input) == answer
        if task.answer_kind == "single":
            assert len(answer) == 1


def test_regular_tasks_against_independent_statements():
    for bits, answer in random_examples(TASKS["even_pairs"], seed=2, count=200):
        assert answer == str(int(bits[0] != bits[-1]))  # an odd number of changes flips the end symbol
    for bits, answer in random_examples(TASKS["parity"], seed=2, count=200):
        assert answer == str(sum(map(int, bits)) % 2)
    for moves, answer in random_examples(TASKS["cycle_navigation"], seed=2, count=200):
        assert answer == str((moves.count("2") - moves.count("0")) % 5)
    for expression, answer in random_examples(TASKS["modular_arithmetic"], seed=2, count=200):
        assert set(expression[::2]) <= set(MODULAR_DIGITS) and set(expression[1::2]) <= set("+-*")
        assert answer == str(eval(expression) % 5)  # Python: * before + and -, - left-associative


def test_bracket_tasks_against_python_eval():
    for expression, answer in random_examples(TASKS["modular_arithmetic_brackets"], seed=3, count=200):
        assert answer == str(eval(expression) % 5)
    for equation, answer in random_examples(TASKS["solve_equation"], seed=3, count=200):
        lhs, rhs = equation.split("=")
        assert lhs.count("x") == 1 and "*" not in lhs
        solutions = [d for d in MODULAR_DIGITS if eval(lhs.replace("x", d)) % 5 == int(rhs)]
        assert solutions == [answer]


def test_stack_manipulation_against_a_list_of_ints():
    for program, answer in random_examples(TASKS["stack_manipulation"], seed=4, count=300):
        stack: list[int] = []
        for position, symbol in enumerate(map(int, program)):
            if symbol < 2:
                assert all(int(s) < 2 for s in program[:position])  # the stack precedes the actions
                stack.append(symbol)
            elif symbol == 2:
                stack = stack[:-1]
            else:
                stack.append(symbol - 3)
        assert answer == ("".join(map(str, stack[::-1])) if stack else "2")


def test_string_tasks_against_independent_statements():
    for digits, answer in random_examples(TASKS["reverse_string"], seed=5, count=100):
        assert answer == "".join(reversed(digits))
    for digits, answer in random_examples(TASKS["duplicate_string"], seed=5, count=100):
        assert answer == digits * 2
    for digits, answer in random_examples(TASKS["odds_first"], seed=5, count=100):
        assert answer == "".join(digits[i] for i in range(len(digits)) if i % 2) + "".join(
            digits[i] for i in range(len(digits)) if i % 2 == 0
        )
    for digits, answer in random_examples(TASKS["bucket_sort"], seed=5, count=100):
        assert answer == "".join(sorted(digits)) and digits.isdigit()
    for masked, answer in random_examples(TASKS["missing_duplicate_string"], seed=5, count=100):
        assert masked.count("_") == 1 and len(masked) % 2 == 0
        restored = masked.replace("_", answer)
        assert restored[: len(restored) // 2] == restored[len(restored) // 2 :]


def test_binary_tasks_against_int_arithmetic():
    def value(little_endian: str) -> int:
        return sum(int(bit) << i for i, bit in enumerate(little_endian))

    for expression, answer in random_examples(TASKS["binary_addition"], seed=6, count=200):
        left, right = expression.split("+")
        assert value(left) > 0 and value(right) > 0
        assert value(answer) == value(left) + value(right) and answer.endswith("1")
    for expression, answer in random_examples(TASKS["binary_multiplication"], seed=6, count=200):
        left, right = expression.split("*")
        assert value(answer) == value(left) * value(right) and answer.endswith("1")
    for bits, answer in random_examples(TASKS["compute_sqrt"], seed=6, count=200):
        assert int(answer, 2) == math.isqrt(int(bits, 2)) and len(answer) == math.ceil(len(bits) / 2)


def test_retrieval_probes_against_independent_statements():
    for digits, answer in random_examples(TASKS["needle"], seed=7, count=100):
        assert answer == "".join(str(int(digits.index(d) < i)) for i, d in enumerate(digits))
    for digits, answer in random_examples(TASKS["induction"], seed=7, count=100):
        for i, digit in enumerate(digits):
            earlier = [j for j in range(i) if digits[j] == digit]
            assert answer[i] == (digits[earlier[-1] + 1] if earlier else "0")


def test_positional_probes_against_independent_statements():
    for task_input, answer in random_examples(TASKS["fixed_offset"], seed=8, count=100):
        digits, offset = task_input.split("#")
        assert len(offset) == 4 and 1 <= int(offset) <= len(digits)
        assert answer == digits[len(digits) - int(offset)]
    for name, query_count in [("dup_key_recall", 2), ("assoc_recall", 1)]:
        for task_input, answer in random_examples(TASKS[name], seed=8, count=100):
            pairs, query = task_input.split("?")
            keys, values = pairs[::2], pairs[1::2]
            assert keys.isalpha() and keys.islower() and values.isdigit() and len(query) == 1
            assert keys.count(query) == query_count
            assert all(keys.count(key) == 1 for key in set(keys) - {query})
            assert answer == values[keys.rindex(query)]


@pytest.mark.parametrize("name", SPEC_ORDER)
def test_longest_text_is_attained_for_small_sizes(name):
    task = TASKS[name]
    rng = np.random.default_rng(9)
    for length in (1, 2, 3):
        longest = max(len(task.sample(rng, length).text) for _ in range(400))
        assert longest == task.longest_text(length)


@pytest.mark.parametrize("name", SPEC_ORDER)
@pytest.mark.parametrize("max_bytes", MAX_BYTES)
def test_max_length_fits_and_is_largest(name, max_bytes):
    task = TASKS[name]
    length = task.max_length(max_bytes)
    rng = np.random.default_rng(max_bytes)
    for _ in range(20):
        assert len(task.sample(rng, length).text) <= max_bytes
    if length == task.size_limit:  # recall probes: 26 letters; fixed_offset: four-digit offsets
        with pytest.raises(ValueError):
            task.sample(rng, length + 1)
    else:
        assert task.longest_text(length + 1) > max_bytes


def test_size_limits():
    assert TASKS["dup_key_recall"].max_length(10_000) == 26
    assert TASKS["assoc_recall"].max_length(10_000) == 26
    assert TASKS["fixed_offset"].max_length(100_000) == 9999


def test_max_length_rejects_budgets_too_small_for_one_symbol():
    for task in TASKS.values():
        with pytest.raises(ValueError, match=task.name):
            task.max_length(task.longest_text(1) - 1)


def test_sample_example_respects_the_length_range():
    rng = np.random.default_rng(10)
    task = TASKS["reverse_string"]
    lengths = {len(body_of(task, sample_example(task, rng, 64, 3, 5).prompt)) for _ in range(200)}
    assert lengths == {3, 4, 5}
    with pytest.raises(ValueError):
        sample_example(task, rng, 64, min_length=6, max_length=5)
    with pytest.raises(ValueError):
        sample_example(task, rng, 64, min_length=task.max_length(64) + 1)


def test_same_seed_same_examples_different_seed_different_examples():
    def draw(seed: int) -> list[str]:
        rng = np.random.default_rng(seed)
        return [sample_example(task, rng, 256).text for task in TASKS.values() for _ in range(5)]

    assert draw(11) == draw(11)
    assert draw(11) != draw(12)


def test_unknown_task_name_lists_the_valid_names():
    assert get_task("parity") is TASKS["parity"]
    with pytest.raises(ValueError, match="assoc_recall") as error:
        get_task("parity_check")
    assert all(name in str(error.value) for name in TASKS)
