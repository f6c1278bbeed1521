"""Each domain's data for a run in a test: a function that sets $POSBENCH_MIRROR (and what else the data needs) under
a folder and returns the config overrides the data needs. A new domain adds its entry to DOMAIN_DATA (the tests
that run every domain fail for a domain without one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hrg_fixtures import MIRROR_LENGTHS, SMALL_LENGTHS, split_overrides, write_mirror
from tests.sample_fixtures import SAMPLES
from tests.sleep_edf_fixtures import write_small_mirror


def no_data(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.delenv("POSBENCH_MIRROR", raising=False)
    return []


def jsb_sample(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    return []


def maestro_sample(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    return ["domain.args.tokenize_workers=1"]


def generated_genome(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    # the small split's chromosomes at lengths that hold paper-geometry windows (the cpu preset takes them)
    write_mirror(root / "mirror", {name: MIRROR_LENGTHS[name] for name in SMALL_LENGTHS}, seed=3)
    monkeypatch.setenv("POSBENCH_MIRROR", str(root / "mirror"))
    return split_overrides()


def generated_nights(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    write_small_mirror(root / "mirror" / "sleep_edf")
    monkeypatch.setenv("POSBENCH_MIRROR", str(root / "mirror"))
    return []


DOMAIN_DATA: dict[str, Callable[[Path, pytest.MonkeyPatch], list[str]]] = {
    "synthetic": no_data,
    "jsb": jsb_sample,
    "maestro": maestro_sample,
    "hrg": generated_genome,
    "sleep_edf": generated_nights,
}
