"""MAESTRO v3 piano performances as REMI tokens (SPEC section 2, paper 000 appendix C.1).

archive.py     the raw data: the official zip or an unpacked folder, its CSV index, the bytes of each performance
tokenizer.py   miditok's REMI tokenizer as SPEC configures it, and the parallel, cached tokenisation of MIDI files
progress.py    what the tokenising has done so far: a bar on a terminal, plain lines in a log
split.py       the split over performances: seeded 90/5/5 or the CSV's own
chunks.py      the examples: chunks of whole bars overlapping by two bars
performances.py  performances.csv, a row per performance the CSV lists, and its check against the CSV
preparation.py   how a store was built (preparation.json: phases, tokenising, wall time, peak memory), the summary
datamodule.py  MaestroDataModule: preparation, transposed training windows, rendering, MIDI output
"""

from domains.maestro.datamodule import MaestroDataModule

__all__ = ["MaestroDataModule"]
