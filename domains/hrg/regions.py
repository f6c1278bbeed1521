"""The genome's split, named by coordinates: each split is a list of regions, a whole chromosome or a stretch of one.

A region is written as UCSC writes it, 1-based and inclusive: `chr21` (the whole chromosome) or
`chr21:5,010,001-7,500,000` (commas optional). The protocol splits by whole chromosomes (train chr1-20, X, Y; val
chr21; test chr22); a CPU-scale study with only slices of a few chromosomes at hand splits by region, so that its
test material is still sequence the model never trained on. The test split must share no base with the training
split: a test base that was also a training base would make the test NLL measure memory. (Validation may overlap
training: it only watches the run, and a one-chromosome sample has nothing else to validate on.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product

_REGION = re.compile(r"^(?P<chromosome>[^\s:]+)(?::(?P<first>[\d,]+)-(?P<last>[\d,]+))?$")


@dataclass(frozen=True)
class Region:
    """Bases [start, end) of one chromosome (0-based, end exclusive); end None: to the chromosome's end."""

    chromosome: str
    start: int = 0
    end: int | None = None

    @classmethod
    def parse(cls, text: str) -> Region:
        match = _REGION.match(str(text).strip())
        if not match:
            raise ValueError(f"hrg split: {text!r} is not a region; expected 'chr21' or 'chr21:5,010,001-7,500,000'")
        if match["first"] is None:
            return cls(match["chromosome"])
        first, last = int(match["first"].replace(",", "")), int(match["last"].replace(",", ""))
        if not 1 <= first <= last:
            raise ValueError(f"hrg split: {text!r} needs 1 <= first <= last (1-based, inclusive, as UCSC writes them)")
        return cls(match["chromosome"], first - 1, last)

    def __str__(self) -> str:
        if self.start == 0 and self.end is None:
            return self.chromosome
        end = "end" if self.end is None else f"{self.end:,}"
        return f"{self.chromosome}:{self.start + 1:,}-{end}"

    def bounds(self, length: int) -> tuple[int, int]:
        """[start, end) inside a chromosome of `length` bases; a region that runs past it is refused by name."""
        end = length if self.end is None else self.end
        if end > length:
            raise ValueError(
                f"hrg split: region {self} runs past the end of {self.chromosome}, which has {length:,} bases here"
            )
        return self.start, end

    def overlaps(self, other: Region) -> bool:
        if self.chromosome != other.chromosome:
            return False
        self_end = float("inf") if self.end is None else self.end
        other_end = float("inf") if other.end is None else other.end
        return self.start < other_end and other.start < self_end


def parse_split(split: dict[str, list[str]]) -> dict[str, list[Region]]:
    """Each split's regions; refused by name when a test region shares a base with a training one (module doc)."""
    regions = {name: [Region.parse(entry) for entry in entries] for name, entries in split.items()}
    for train, test in product(regions.get("train", []), regions.get("test", [])):
        if train.overlaps(test):
            raise ValueError(
                f"hrg split: train region {train} and test region {test} share bases; the test NLL would measure "
                "memorised sequence"
            )
    return regions
