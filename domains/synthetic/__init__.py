"""The synthetic domain: Chomsky-hierarchy tasks and probes (SPEC section 2; paper 000, appendix E).

task.py               a task and its examples: `PREFIX:input>answer`, sizes, the longest rendering
inputs.py             alphabets, random input strings and mod-5 arithmetic the families share
regular.py            regular tasks (even_pairs, parity, cycle_navigation, modular_arithmetic)
context_free.py       deterministic context-free tasks (reverse_string ... solve_equation)
context_sensitive.py  context-sensitive tasks (duplicate_string ... compute_sqrt)
probes.py             retrieval probes (needle, induction) and positional probes (fixed_offset, dup_key_recall,
                      assoc_recall)
registry.py           every task by name in SPEC order (TASKS, get_task) and drawing an example of a random size
datamodule.py         SyntheticDataModule: byte tokens, training stream, fixed evaluation sets by length
"""

from domains.synthetic.datamodule import SyntheticDataModule

__all__ = ["SyntheticDataModule"]
