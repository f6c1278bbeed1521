"""Attention by distance across a study: the recency profiles `python -m pipelines.inspect` left in the finished run
folders (inspect/<split>.json, read when the runs are loaded: pipelines.analysis.loading), seeds pooled per
encoding, one panel per group (a domain, or a task of a domain with tasks) and split. Nothing is computed from a
model here, so a comparison stays as cheap as before: it takes what the inspector wrote and lists the runs that have
no inspection (pipelines.inspection.recency says what a profile holds)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pipelines.analysis.loading import LoadedRun
from pipelines.inspection.recency import RecencyProfile


@dataclass
class RecencyPanel:
    """One group and split: each inspected encoding's profile, its seeds pooled (sums added)."""

    group: str  # "synthetic/needle", "jsb"
    split: str
    profiles: dict[str, RecencyProfile]  # encoding -> pooled profile
    seeds: dict[str, list[int]]  # encoding -> the seeds pooled

    @property
    def layer(self) -> int:
        """The layer the overlay compares: the last (every run of a domain has as many layers)."""
        return len(next(iter(self.profiles.values())).layers) - 1

    @property
    def reference(self) -> float:
        """The distance every encoding of the panel is measured at: the base-10k RoPE's fast-band wavelength."""
        return next(iter(self.profiles.values())).reference


@dataclass
class StudyRecency:
    panels: list[RecencyPanel]
    not_inspected: list[str]  # finished runs (labels) without any inspection

    def far_mass(self) -> list[dict]:
        """One row per (panel, encoding): the share of attention beyond the distances at the compared layer."""
        rows = []
        for index, panel in enumerate(self.panels):
            for encoding, profile in panel.profiles.items():
                layer = profile.layers[panel.layer]
                rows.append(
                    {
                        "panel": index,
                        "group": panel.group,
                        "split": panel.split,
                        "layer": panel.layer,
                        "encoding": encoding,
                        "seeds": panel.seeds[encoding],
                        "reference_wavelength": profile.reference,
                        "far_mass_reference": layer.far_mass(profile.reference),
                        "uniform_reference": layer.far_mass(profile.reference, uniform=True),
                        "wavelength": profile.wavelength,
                        "far_mass": layer.far_mass(profile.wavelength),
                    }
                )
        return rows


def study_recency(runs: list[LoadedRun]) -> StudyRecency:
    """The panels of the finished trained runs (YaRN entries have no model to inspect) that were inspected."""
    pooled: dict[tuple[str, str], dict[str, RecencyProfile]] = defaultdict(dict)
    seeds: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    not_inspected = []
    for run in [run for run in runs if run.finished and not run.derived]:
        profiles = run.inspections
        if not profiles:
            not_inspected.append(run.label)
        for split, profile in profiles.items():
            key = (run.key.group_label, split)
            earlier = pooled[key].get(run.encoding)
            pooled[key][run.encoding] = profile if earlier is None else earlier.pooled(profile)
            seeds[key][run.encoding].append(run.seed)
    groups = list(dict.fromkeys(group for group, _ in pooled))  # in the runs' order: domains as configured
    order = sorted(pooled, key=lambda key: (groups.index(key[0]), next(iter(pooled[key].values())).window, key[1]))
    panels = [RecencyPanel(group, split, dict(sorted(pooled[group, split].items())), dict(seeds[group, split]))
              for group, split in order]  # fmt: skip
    return StudyRecency(panels, not_inspected)
