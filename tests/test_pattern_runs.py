"""Roster 3 end to end (SPEC 1c): every pattern trains and is scored on every split through the train pipeline (the
path `make train ENCODINGS=<pattern>` takes), at the tiny synthetic preset deepened to 4 layers so that each
pattern has its odd layer, and its manifest lists the layers."""

from __future__ import annotations

import json
import math

import pytest

from pipelines.experiment.config import compose_config, roster
from pipelines.experiment.training import train_and_evaluate as run

# At L = 32 (the synthetic tiny preset) L/32 is one token: the windows, chunks and temperature floor are the scale
# rule's floor, 8 tokens (SPEC 1c).
PATTERN_AT_4_LAYERS = {
    "nope_every4": "3 x rope(base=10000), nope",
    "irope": "3 x rope(base=10000) chunked 8 +qk-norm, temperature(attn_scale=0.1, floor_scale=8)",
    "rnope_swa": "3 x rope(base=10000) sliding 8, nope",
    "local_global": "4 x rope(base=10000) sliding 8",
}


@pytest.mark.slow
@pytest.mark.parametrize("entry", [entry for entry in roster("patterns") if entry != "rope10k"])
def test_each_pattern_trains_and_scores_every_split(tmp_path, entry):
    folder = run(
        compose_config(
            [
                "debug=fast",
                f"runs_root={tmp_path}",
                "trainer.max_steps=2",
                "domain.args.task=reverse_string",
                f"pe={entry}",
                "model.n_layer=4",
            ]
        )  # fmt: skip
    )
    assert folder == tmp_path / "synthetic" / "reverse_string" / entry / "seed0" and (folder / "done.json").is_file()
    encoding = json.loads((folder / "manifest.json").read_text())["encoding"]
    if entry in PATTERN_AT_4_LAYERS:
        assert encoding["pattern"] == PATTERN_AT_4_LAYERS[entry] and len(encoding["layers"]) == 4
    splits = json.loads((folder / "metrics" / "summary.json").read_text())["splits"]
    assert {split: splits[split]["window_length"] for split in splits} == {"test": 32, "test_2x": 64, "test_8x": 256}
    assert all(math.isfinite(splits[split]["nll"]) for split in splits)
    assert not (folder.parent.parent / f"{entry}+yarn").exists()  # YaRN scales rope runs only
