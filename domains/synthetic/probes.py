"""The retrieval probes (needle, induction) and positional probes (fixed_offset, dup_key_recall, assoc_recall) of
paper 000, tables 10 and 11 (appendix E)."""

from __future__ import annotations

import numpy as np

from domains.synthetic.inputs import DIGITS, random_string, uniform_string
from domains.synthetic.task import Task

KEYS = "abcdefghijklmnopqrstuvwxyz"
QUERY_MARK = "?"  # between the key/value pairs and the queried key of the recall probes
OFFSET_MARK = "#"  # between the digits and the offset of fixed_offset
OFFSET_WIDTH = 4  # fixed_offset renders k with this many zero-padded digits


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


def _digits_and_offset(rng: np.random.Generator, length: int) -> str:
    """n random digits, `#`, and k uniform in [1, n] rendered with four zero-padded digits."""
    offset = int(rng.integers(1, length + 1))
    return f"{random_string(rng, DIGITS, length)}{OFFSET_MARK}{offset:0{OFFSET_WIDTH}d}"


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
    values = random_string(rng, DIGITS, distinct_keys + 1)
    return "".join(key + value for key, value in zip(slot_keys, values, strict=True)) + QUERY_MARK + query


def solve_dup_key_recall(pairs_and_query: str) -> str:
    """DK:a3b7a9c1?a>9. The value of the later of the two pairs holding the queried key; n = number of
    distinct keys (n + 1 pairs, at most 26 by the alphabet); keys are letters, values digits."""
    return _value_of_last_occurrence(pairs_and_query)


def _pairs_with_unique_query(rng: np.random.Generator, distinct_keys: int) -> str:
    """n pairs with distinct random keys and digit values, then `?` and one of the keys, uniformly."""
    keys = [KEYS[i] for i in rng.choice(len(KEYS), size=distinct_keys, replace=False)]
    values = random_string(rng, DIGITS, distinct_keys)
    query = keys[int(rng.integers(distinct_keys))]
    return "".join(key + value for key, value in zip(keys, values, strict=True)) + QUERY_MARK + query


def solve_assoc_recall(pairs_and_query: str) -> str:
    """AR:a3b7c1?b>7. The value of the only pair holding the queried key; n = number of pairs (all keys
    distinct, at most 26)."""
    return _value_of_last_occurrence(pairs_and_query)


RETRIEVAL_PROBES: tuple[Task, ...] = (
    Task(
        name="needle",
        prefix="N",
        group="retrieval",
        answer_kind="sequence",
        chance=0.06,
        make_input=uniform_string(DIGITS),
        solve=solve_needle,
        longest_body=lambda n: 2 * n,
    ),
    Task(
        name="induction",
        prefix="I",
        group="retrieval",
        answer_kind="sequence",
        chance=0.02,
        make_input=uniform_string(DIGITS),
        solve=solve_induction,
        longest_body=lambda n: 2 * n,
    ),
)


POSITIONAL_PROBES: tuple[Task, ...] = (
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
