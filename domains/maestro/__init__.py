"""MAESTRO v3 piano performances as REMI tokens (SPEC section 2, paper 000 appendix C.1).

archive.py     the raw data: the official zip or an unpacked folder, its CSV index, the bytes of each performance
tokenizer.py   miditok's REMI tokenizer as SPEC configures it, and the parallel, cached tokenisation of MIDI files
split.py       the split over performances: seeded 90/5/5 or the CSV's own
chunks.py      the examples: chunks of whole bars overlapping by two bars
datamodule.py  MaestroDataModule: preparation, transposed training windows, rendering, MIDI output
"""

from domains.maestro.datamodule import MaestroDataModule

__all__ = ["MaestroDataModule"]
