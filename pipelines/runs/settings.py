"""What a run was trained and evaluated with, as dotted keys, and which of those a comparison holds fixed.

Every comparison of runs (a domain's runs in `make compare`, a local run joining a published study) holds fixed
everything that can change a run's numbers apart from its encoding and seed: the domain and its arguments, the data
hashes, the preset, the model, the trainer and optimiser settings, the effective batch. What cannot change them
(where runs live, the logger, checkpoint and validation cadence, loader workers, the device count once the
effective batch is equal) may differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Keys of a run's config that cannot change its trained weights or its test metrics.
RESULT_NEUTRAL = (
    "runs_root",  # where the runs live (the folder is found through it)
    "logger",  # what records the metrics
    "domain.order",  # the domain's column in the study's tables
    "domain.args.base_url",  # where the raw files are fetched from: the data hashes check what they hold
    "domain.args.tokenize_workers",  # processes tokenising while the store is prepared
    "trainer.keep_checkpoint",  # whether checkpoints/ stays after done.json
    "trainer.num_workers",  # who builds the batches: the stream's own for any workers (domains.loading)
    "trainer.worker_method",
    "trainer.val_every",  # when validation runs: it is logged, never trained on
    "trainer.val_batches",
    "trainer.ckpt_every",  # when checkpoints are written
    "trainer.eval_batch_size",  # the batching of validation and evaluation (padding is never scored)
)
# ... and, between runs of one comparison, what names the run (its encoding and seed) and where it ran (the device
# count enters through the effective batch)
COMPARISON_FREE = (*RESULT_NEUTRAL, "pe", "seed", "trainer.accelerator", "trainer.devices", "trainer.strategy")


def flat_settings(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as {dotted key: value} (lists stay whole)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(flat_settings(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def without(flat: Mapping[str, Any], prefixes: tuple[str, ...]) -> dict[str, Any]:
    """The keys of `flat` that are none of `prefixes` nor below one of them."""
    return {k: v for k, v in flat.items() if not any(k == p or k.startswith(f"{p}.") for p in prefixes)}


def effective_batch(trainer: Mapping[str, Any]) -> int:
    """Sequences per optimiser step: batch per device x accumulated micro-batches x devices."""
    devices = trainer.get("devices", 1)
    return int(trainer["batch_size"]) * int(trainer.get("accumulate", 1)) * (devices if isinstance(devices, int) else 1)


def fixed_properties(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What a comparison holds fixed of the run whose manifest this is: its config less COMPARISON_FREE, its data
    hashes, and its effective batch."""
    config = manifest["config"]
    return {
        **without(flat_settings(config), COMPARISON_FREE),
        **{f"data_hashes.{name}": digest for name, digest in sorted(manifest.get("data_hashes", {}).items())},
        "effective batch": effective_batch(config["trainer"]),
    }


def differences(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """The keys where two sets of properties differ, sorted."""
    return sorted(k for k in set(mine) | set(theirs) if mine.get(k, "(not set)") != theirs.get(k, "(not set)"))
