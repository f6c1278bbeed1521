"""`python -m pipelines.samples`: the exact output format."""

from __future__ import annotations

import json

from domains.synthetic import SyntheticDataModule
from domains.synthetic.registry import get_task
from domains.synthetic.task import SEPARATOR
from pipelines.samples import main


def test_samples_prints_one_json_object_per_line_with_exact_strings(capsys):
    assert (
        main(["--domain", "synthetic", "--task", "reverse_string", "--n", "4", "--seed", "3", "--max-len", "40"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    for line in lines:
        row = json.loads(line)
        assert set(row) == {"task", "length", "prompt", "answer"}
        assert row["prompt"].startswith("R:") and row["prompt"].endswith(SEPARATOR)
        body = row["prompt"][2:-1]
        assert row["answer"] == body[::-1] == get_task("reverse_string").solve(body)
        assert row["length"] == len(row["prompt"]) + len(row["answer"]) <= 40


def test_samples_are_the_training_stream_examples(capsys):
    """With --max-len equal to the context, sample i is training sample i of the run with that seed."""
    main(["--task", "fixed_offset", "--n", "4", "--seed", "5", "--max-len", "32"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    dm = SyntheticDataModule(task="fixed_offset", context=32, batch_size=4, eval_batch_size=4, seed=5)
    batch = dm.train_stream().batch(0)
    for row, tokens, scored in zip(rows, batch["tokens"], batch["scored"], strict=True):
        assert bytes(tokens[tokens > 0].tolist()).decode() == row["prompt"] + row["answer"]
        assert bytes(tokens[scored].tolist()).decode() == row["answer"]


def test_unknown_task_exits_with_the_valid_names(capsys):
    assert main(["--task", "reverse"]) == 2
    assert "valid names: even_pairs, parity" in capsys.readouterr().err
