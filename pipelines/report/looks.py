"""What each family of a domain's verdicts controls, and how a make-settle design's looks went, as every report
says them."""

from __future__ import annotations

from pipelines.analysis.results import DomainResult
from pipelines.analysis.sequential import FamilyResult
from pipelines.analysis.verdict import STOPPED_BY
from pipelines.report.markdown import counted


def families_text(result: DomainResult) -> str:
    """What each family of the domain's verdicts controls, as every report states it."""
    verdicts = result.verdicts
    if verdicts is None or verdicts.family is None:
        return "no paired tests"
    design = verdicts.family.design
    ref = f"`{verdicts.ref}`"
    if not design.sequential:
        return (
            f"seed-level tests against {ref}, Holm over the {len(verdicts.family.verdicts)} baselines: family-wise "
            f"error at most {design.alpha:g} (the verdict)"
        )
    looks = len(design.looks)
    parts = [
        f"seed-level tests against {ref} under make settle's design: its {len(verdicts.family.verdicts)} baselines "
        f"one family, family-wise error at most {design.alpha:g} over its {looks} look{'s' * (looks > 1)} "
        f"({design.level:.4g} a look, Holm within a look)"
    ]
    if verdicts.joined is not None and verdicts.joined.verdicts:
        parts.append(
            f"the {len(verdicts.joined.verdicts)} encodings that joined after the design was fixed a family of their "
            f"own over the same looks, family-wise error at most {design.alpha:g} among them"
        )
    if verdicts.provisional:
        parts.append(
            f"{len(verdicts.provisional)} below the design's first look: Δ on the seeds shared with {ref}, no verdict "
            "word until they hold the first look's seeds"
        )
    return "; ".join(parts) + " (the verdict)"


def runs_needed(count: int, result: DomainResult) -> str:
    """`count` (encoding, seed) pairs of `result`'s domain as training runs: one per task in a domain with tasks."""
    tasks = len(result.tasks.chance) if result.tasks else 1
    return counted(count, "run") if tasks <= 1 else f"{count * tasks} runs ({count} encoding-seeds x {tasks} tasks)"


def design_status(family: FamilyResult, result: DomainResult) -> str:
    """Where a family of a design of `result`'s domain stands: open (the runs its next look needs), capped, or
    settled."""
    pending = sorted({name for name, _ in family.next_runs})
    still_open = [name for name, pair in family.verdicts.items() if pair.verdict == "inconclusive"]
    if family.next_runs:
        runs = runs_needed(len(family.next_runs), result)
        return f"open: the next look needs {runs} ({', '.join(f'`{n}`' for n in pending)})"
    if still_open:
        count = len(still_open)
        return f"the design's last look is reached; {count} pair{'s stay' if count > 1 else ' stays'} inconclusive"
    return "settled: every pair is decided, equivalent or stopped"


def looks_section(result: DomainResult) -> list[str]:
    verdicts = result.verdicts
    if verdicts is None or verdicts.family is None or not verdicts.family.design.sequential:
        return []
    family = verdicts.family
    last = len(family.design.looks)
    lines = ["## Looks (make settle)", "", f"Reference `{family.ref}`: {verdicts.ref_note}.", ""]
    for look in family.looks:
        here = {name: pair for name, pair in look.pairs.items() if pair.look == look.number}
        words = {
            "better": "better",
            "worse": "worse",
            "equivalent": "equivalent",
            "stopped": STOPPED_BY[family.design.futility],
        }
        decided = {label: [n for n, p in here.items() if p.verdict == w] for w, label in words.items()}
        text = "; ".join(f"{w}: {', '.join(f'`{n}`' for n in names)}" for w, names in decided.items() if names)
        if look.number < last:
            open_text = f"calls for more seeds: {', '.join(f'`{n}`' for n in look.calls_for) or 'none'}"
        else:
            still = [n for n, p in here.items() if p.verdict == "inconclusive"]
            open_text = f"inconclusive at the cap: {', '.join(f'`{n}`' for n in still) or 'none'}"
        lines.append(
            f"- look {look.number} at {len(look.seeds)} seeds (alpha {look.alpha:.4g}, Holm over {len(look.pairs)} "
            f"pairs): {text or 'nothing decided'}; {open_text}."
        )
    joined = verdicts.joined
    if joined is not None:
        lines += [
            "",
            "Encodings that joined the study after its design was fixed: their own family (alpha "
            f"{family.design.alpha:g} spent over the same looks), which leaves the study's verdicts as they were.",
        ]
        for look in joined.looks:
            words = ", ".join(f"`{n}` {p.verdict}" for n, p in look.pairs.items() if p.look == look.number)
            lines.append(f"- joined, look {look.number} at {len(look.seeds)} seeds: {words or 'nothing decided'}.")
        for name, pair in verdicts.provisional.items():
            lines.append(f"- joined `{name}`: {pair.scope}; a fixed-sample comparison until it holds them.")
    status = design_status(family, result)
    if joined is not None:
        status += f"; the joined encodings: {design_status(joined, result)}"
    return [*lines, "", f"Status: {status}.", ""]
