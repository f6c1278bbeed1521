"""Generated genome mirrors for the HRG tests and for trying `make data-hrg` without the network.

    python -m tests.hrg_fixtures OUT        # writes OUT/hrg/chr{1..22,X,Y}.fa.gz and OUT/hrg/md5sum.txt
    POSBENCH_MIRROR=OUT make data-hrg

The layout is UCSC's hg38 `chromosomes/` folder: one gzipped FASTA per chromosome and an md5 table. The
sequences are generated (`domains.hrg.generated.generated_letters`): N runs at both ends and inside (as real
chromosomes have), soft-masked lowercase stretches, IUPAC letters, tandem repeats, and a different line
width per file (60, 61, 70, 50, 80, 79, 13 in turn). Lengths are small (tens of kbases), not GRCh38's.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
from pathlib import Path

import numpy as np

from domains.hrg.bases import N_CODE, encode_bases
from domains.hrg.generated import fasta_lines, generated_letters
from domains.hrg.genome import PRIMARY_CHROMOSOMES
from domains.hrg.windows import example_count

LINE_WIDTHS = (60, 61, 70, 50, 80, 79, 13)
# The small genome of most HRG tests: a few kbases per chromosome, split by chromosome as the real one is.
SMALL_SPLIT = {"train": ["chr1", "chr2"], "val": ["chr21"], "test": ["chr22"]}
SMALL_LENGTHS = {"chr1": 7_000, "chr2": 5_333, "chr21": 3_100, "chr22": 6_160}
# chr22 (test) and chr21 (val) sizes give whole numbers of tiny and paper windows plus a partial tail.
MIRROR_LENGTHS = {c: 30_000 + 1_500 * i for i, c in enumerate(PRIMARY_CHROMOSOMES)} | {"chr21": 43_000, "chr22": 61_000}


def chromosome_letters(seed: int, name: str, length: int) -> np.ndarray:
    """A generated chromosome: telomere-like N runs at both ends, and the features listed in the module doc."""
    rng = np.random.default_rng([seed, int.from_bytes(name.encode(), "little") % 2**32])
    letters = generated_letters(
        rng, length, n_runs=3, max_n_run=700, lowercase_runs=length // 2000, iupac=5, tandem_repeats=length // 1000
    )
    ends = int(rng.integers(100, 1000))
    letters[:ends] = letters[-ends:] = ord("N")
    return letters


def nt_rule(sequence: str) -> list[str]:
    """The Nucleotide Transformer rule, restated plainly: split on N, 6-mers left to right, leftovers as bases."""
    tokens = []
    for i, stretch in enumerate(sequence.split("N")):
        if i:
            tokens.append("N")
        whole = len(stretch) // 6 * 6
        tokens += [stretch[j : j + 6] for j in range(0, whole, 6)] + list(stretch[whole:])
    return tokens


def fasta_record(name: str, letters: np.ndarray, line_width: int, newline: bytes = b"\n") -> bytes:
    return f">{name} generated for posbench tests".encode() + newline + fasta_lines(letters, line_width, newline)


def write_mirror(folder: Path, lengths: dict[str, int] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Write `folder`/hrg/<chrom>.fa.gz and md5sum.txt; return the letters of every chromosome."""
    target = Path(folder) / "hrg"
    target.mkdir(parents=True, exist_ok=True)
    letters, md5_lines = {}, []
    for i, (name, length) in enumerate((lengths or MIRROR_LENGTHS).items()):
        letters[name] = chromosome_letters(seed, name, length)
        data = gzip.compress(fasta_record(name, letters[name], LINE_WIDTHS[i % len(LINE_WIDTHS)]), mtime=0)
        (target / f"{name}.fa.gz").write_bytes(data)
        md5_lines.append(f"{hashlib.md5(data).hexdigest()}  {name}.fa.gz\n")
    (target / "md5sum.txt").write_text("".join(md5_lines))
    return letters


def split_overrides() -> list[str]:
    """Config overrides that give the hrg domain SMALL_SPLIT of the protocol's layout (UCSC's files) at any preset."""
    split = ",".join(f"{name}:[{','.join(chroms)}]" for name, chroms in SMALL_SPLIT.items())
    return ["domain.source=ucsc", f"domain.args.split={{{split}}}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="mirror folder; the files go to OUT/hrg/")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    letters = write_mirror(args.out, seed=args.seed)
    print(f"{'chromosome':10s} {'bases':>7s} {'N':>5s} {'tiny ex.':>8s} {'paper ex.':>9s}")
    for name, seq in letters.items():
        tiny, paper = example_count(len(seq), 610, 605), example_count(len(seq), 6100, 6050)
        print(f"{name:10s} {len(seq):7d} {int((encode_bases(seq) == N_CODE).sum()):5d} {tiny:8d} {paper:9d}")
    print(f"wrote {args.out / 'hrg'}; now: POSBENCH_MIRROR={args.out} make data-hrg")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
