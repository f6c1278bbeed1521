"""How closely two copies of one run must agree, by the conditions each was trained under.

A CPU run is deterministic: trained again under the conditions its manifest records (`machine`: threads, CPU model
and flags, torch build; `packages`) it gives the same bits. Another thread count reorders float sums; another CPU
(or another torch build) takes other kernels, and training amplifies their last-bit differences step by step.
The three conditions and their bounds (README, "make reproduce", has the measurements):

    the same threads, CPU, torch build and packages           0 nats (bit for bit)
    the same CPU, torch build and packages, other threads     the study's tolerance (study.json: 1e-5 nats)
    another CPU, torch build or packages, another revision    CROSS_MACHINE, 1e-3 nats
    of the encoding's computation, or a copy recorded without
    its machine (before manifests held it)

An encoding's revision (models.encodings.base, recorded in the manifest's `encoding`; 1 where a manifest predates
it) rises when a change reorders its float arithmetic: the same equation to rounding, the last bits another kernel's.
Revision 2 (issue 50): ALiBi, KERPLE, T5 and FIRE attend in query blocks where their bias is fixed (evaluation; ALiBi
in training too), and FIRE's training gradient sums by lag.

CROSS_MACHINE is five times the largest difference measured between two machines (2.04e-4 nats per example,
MAESTRO kerple/1 at the cpu preset, 300 steps; 6.65e-5 for rope10k/0; JSB cpu runs 0) and twenty times below the
smallest difference a verdict here decides (0.02 nats): a copy within it is the same training, and a run of another
seed is not (seeds 0 and 1 of one encoding differ by 0.10-0.33 nats at their largest example: JSB rope10k 0.110,
MAESTRO kerple 0.097, MAESTRO rope10k 0.330).
"""

from __future__ import annotations

from typing import Any

CROSS_MACHINE = 1e-3
MACHINE_KEYS = {"threads": "threads", "cpu": "CPU model", "cpu_flags": "CPU flags", "torch_build": "torch build"}
# what each entry of a machine record is (pipelines.runs.manifest.machine_state writes them)
MACHINE_TYPES = {
    "threads": (int, "a whole number"),
    "cpu": (str, "a CPU model's name"),
    "cpu_flags": (list, "a list of flags"),
    "torch_build": ((dict, str), "an object of build entries"),
}
# keys of a manifest that only code which records the machine has written (the machine since issue 49, these since
# issue 50): a manifest holding one but no machine lost its record after it was written, and is not one recorded
# "before manifests held it", whose copies the cross-machine bound covers
RECORDED_WITH_MACHINE = ("train_cpu_seconds_this_process", "train_cpu_seconds", "resumed_at_step")


def machine_problem(manifest: dict[str, Any], bound: bool = True) -> str | None:
    """Why a manifest's records of where it ran (`machine`, `packages`, the encoding's `revision`) cannot be read, or
    None: a record that is not one (`"machine": "x"`), an entry of another kind; and where the manifest sets the
    bound a copy of its run is held to (`bound`: a published record, a local copy of one), a machine removed from a
    manifest written when machines were recorded (it would loosen the bound from 0 to CROSS_MACHINE)."""
    machine = manifest.get("machine")
    if not machine:
        written = next((key for key in RECORDED_WITH_MACHINE if key in manifest), None)
        if written is None or not bound:
            return None
        return (
            f"no machine record, yet it holds {written}, which only code that records the machine writes: a record "
            "removed after the run would hold its copies to the cross-machine bound instead of bit for bit"
        )
    if not isinstance(machine, dict):
        return f"machine is {machine!r}, not a record of the machine (threads, CPU model and flags, torch build)"
    for key, (kind, what) in MACHINE_TYPES.items():
        value = machine.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            return f"machine.{key} is {value!r}, expected {what}"
    if not isinstance(manifest.get("packages") or {}, dict):
        return f"packages is {manifest['packages']!r}, expected an object of package versions"
    encoding = manifest.get("encoding") or {}
    revision = encoding.get("revision", 1) if isinstance(encoding, dict) else None
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        shown = encoding.get("revision") if isinstance(encoding, dict) else encoding
        return f"encoding.revision is {shown!r}, expected a whole number >= 1"
    return None


def machine_differences(recorded: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What two manifests' machines (`machine` and `packages`) differ in, each as `<what>: recorded <value>, here
    <value>`: the thread count, the CPU model and flags, the torch build (the entries of it that differ), the package
    versions."""
    mine, theirs = recorded.get("machine") or {}, other.get("machine") or {}
    lines = []
    for key, what in MACHINE_KEYS.items():
        first, second = mine.get(key), theirs.get(key)
        if isinstance(first, dict) and isinstance(second, dict):  # the torch build: name the entries that differ
            lines += [
                _difference(f"{what} {name}", first.get(name), second.get(name))
                for name in sorted(set(first) | set(second))
                if first.get(name) != second.get(name)
            ]
        elif first != second:
            lines.append(_difference(what, first, second))
    packages, other_packages = recorded.get("packages") or {}, other.get("packages") or {}
    lines += [
        f"package {name}: recorded {packages.get(name)}, here {other_packages.get(name)}"
        for name in sorted(set(packages) | set(other_packages))
        if packages.get(name) != other_packages.get(name)
    ]
    return lines


def revision_differences(recorded: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The encoding's revision, where the two manifests' differ (`the encoding's computation: revision 1 recorded, 2
    here`); a manifest without one (before revisions were recorded) is revision 1."""
    first, second = (int((manifest.get("encoding") or {}).get("revision", 1)) for manifest in (recorded, other))
    return [] if first == second else [f"the encoding's computation: revision {first} recorded, {second} here"]


def _difference(what: str, recorded: Any, here: Any) -> str:
    """`<what>: recorded <value>, here <value>`; two lists by the items only one of them has (`only recorded ...`)."""
    if isinstance(recorded, list) and isinstance(here, list):
        only = {"recorded": [i for i in recorded if i not in here], "here": [i for i in here if i not in recorded]}
        return f"{what}: " + ", ".join(
            f"only {side} {' '.join(map(str, items))}" for side, items in only.items() if items
        )
    return f"{what}: recorded {recorded!r}, here {here!r}"


def copy_tolerance(recorded: dict[str, Any], other: dict[str, Any], study_tolerance: float) -> tuple[float, str]:
    """(the nats per example a copy trained under `other` may differ from the run `recorded` by, the condition in
    words); both are manifests (or their `machine` and `packages`) that machine_problem has passed."""
    if not recorded.get("machine") or not other.get("machine"):
        return CROSS_MACHINE, (
            f"a copy recorded without its machine (before manifests held it): expect agreement within the "
            f"cross-machine bound {CROSS_MACHINE:g}"
        )
    differ = machine_differences(recorded, other) + revision_differences(recorded, other)
    if not differ:
        return 0.0, "trained as recorded (threads, CPU, torch build, packages): expect bit for bit, tolerance 0"
    only_threads = all(line.startswith("threads:") for line in differ)
    bound, name = (
        (study_tolerance, "the study's tolerance") if only_threads else (CROSS_MACHINE, "the cross-machine bound")
    )
    return bound, f"differs from the recorded run in {'; '.join(differ)}: expect agreement within {name} {bound:g}"
