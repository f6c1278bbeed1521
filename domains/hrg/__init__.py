"""Human reference genome (HRG): GRCh38 primary chromosomes as Nucleotide Transformer 6-mers (SPEC section 2).

bases.py       the uint8 base codes (A T C G N) the store is written in and the tokenizer reads
genome.py      UCSC's raw files: identity, md5 and gzip checks, FASTA + .fai index, base codes per chromosome
tokenizer.py   the Nucleotide Transformer 6-mer tokenizer
windows.py     the examples: fixed windows over a split's chromosomes, tokenised when read
datamodule.py  HRGDataModule: preparation (what makes the store current), training and evaluation windows
generated.py   generated genome-like sequences and FASTA files (tests, offline mirror, benchmark)
"""

from domains.hrg.datamodule import HRGDataModule

__all__ = ["HRGDataModule"]
