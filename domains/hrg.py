"""Human reference genome (HRG): GRCh38 primary chromosomes as Nucleotide Transformer 6-mers (SPEC section 2).

Data flow (`make data-hrg`, i.e. `prepare_data`):

1. fetch: every raw file named by `file_pattern` (default `{chrom}.fa.gz`: UCSC's per-chromosome hg38 files
   under `base_url`, https://hgdownload.soe.ucsc.edu/goldenPath/hg38/chromosomes/) and the md5 table UCSC
   publishes in the same folder (`md5sum.txt`), through `domains.fetch` (resumable; `$POSBENCH_MIRROR/hrg/`
   replaces the network). A pattern without `{chrom}` names one multi-record FASTA for every chromosome.
2. verify, in one streaming pass per raw file: its md5 against its line in `md5sum.txt`, and for gzip the
   stream's own CRC32 and length (a truncated download fails here, naming the file and its chromosomes).
   The pass also records the file's sha256 (meta.json `raw_sha256`, the run manifest's data hashes).
   GRCh38 lengths (`GRCH38_LENGTHS`, public constants) are compared with what was read and recorded in
   meta.json (`grch38`); a mismatch is logged, not fatal, so a mirror of generated chromosomes works too.
3. decompress gzip to plain FASTA beside it (never bgzip: pyfaidx random access degrades on it), streaming,
   and index it with pyfaidx; an index that is missing, older than the FASTA or inconsistent with it is rebuilt.
4. encode each chromosome to uint8 base codes (A0 T1 C2 G3 N4: uppercase, any other letter N) in chunks of
   lines located through the .fai, into `<store>/bases/<chrom>.npy`, then `<chrom>.json` (its source file's
   identity, length, N/IUPAC/lowercase counts). Memory stays bounded by the chunk size (`CHUNK_BASES`).
5. `meta.json`: per-chromosome facts, the split, the example counts for this geometry.

Idempotence: a raw file is identified by size, mtime and a sha256 of its first and last MiB; a chromosome is
rebuilt only when its source file's identity, its md5 line or the code version changed, so an unchanged
re-run reads a few MiB and writes nothing, and adding chromosomes to the config builds only those.

Examples (SPEC): windows of `window_bases` (6100) every `stride_bases` (6050) over each chromosome, N runs
included; only full windows, so a chromosome of L bases has `example_count(L) = (L - 6100) // 6050 + 1`
examples (0 when L < 6100): 8399 for chr22's 50,818,468 bases, whose last 4468 bases are left over.
Each example is its window tokenised on its own (the 6-mer phase starts at the window's first base) and
truncated to `example_tokens` (1000) tokens. Training draws an example uniformly over the training
chromosomes and moves its start by a uniform 0..`max_jitter` (99) bases, both from the `rng` it is handed;
the jittered window is clipped at the chromosome's end, which never shortens an example at SPEC settings
(1000 tokens need at most 6000 bases). Evaluation windows have no jitter and are tokenised when first asked
for (tens of Mbases/s: seconds for chr22), so one store serves every example geometry (the tiny preset
scales it by 1/10) and switching presets never re-encodes the genome.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyfaidx
from numpy.lib.stride_tricks import sliding_window_view

from domains.atomic import atomic_path, write_json
from domains.base import EmptySplitError, EvalWindows, Window, padded_window, windows_from_examples
from domains.fetch import FetchError, fetch, raw_dir
from domains.nt_tokenizer import (
    BASES,
    CODE_OF_BYTE,
    INVALID_CODE,
    N_CODE,
    PAD_ID,
    VOCAB_SIZE,
    token_strings,
    tokenize,
    tokenize_windows,
)
from domains.store import FORMAT_VERSION, read_meta
from domains.stored import RawFile, StoredDataModule

log = logging.getLogger("posbench.hrg")

UCSC_HG38_CHROMOSOMES = "https://hgdownload.soe.ucsc.edu/goldenPath/hg38/chromosomes/"
PRIMARY_CHROMOSOMES = tuple(f"chr{i}" for i in range(1, 23)) + ("chrX", "chrY")
DEFAULT_SPLIT = {"train": [*PRIMARY_CHROMOSOMES[:20], "chrX", "chrY"], "val": ["chr21"], "test": ["chr22"]}
# GRCh38 (hg38) primary assembly sequence lengths, as in every hg38 .fai / chrom.sizes.
GRCH38_LENGTHS = {
    "chr1": 248_956_422,
    "chr2": 242_193_529,
    "chr3": 198_295_559,
    "chr4": 190_214_555,
    "chr5": 181_538_259,
    "chr6": 170_805_979,
    "chr7": 159_345_973,
    "chr8": 145_138_636,
    "chr9": 138_394_717,
    "chr10": 133_797_422,
    "chr11": 135_086_622,
    "chr12": 133_275_309,
    "chr13": 114_364_328,
    "chr14": 107_043_718,
    "chr15": 101_991_189,
    "chr16": 90_338_345,
    "chr17": 83_257_441,
    "chr18": 80_373_285,
    "chr19": 58_617_616,
    "chr20": 64_444_167,
    "chr21": 46_709_983,
    "chr22": 50_818_468,
    "chrX": 156_040_895,
    "chrY": 57_227_415,
    "chrM": 16_569,
}
CODE_VERSION = 1  # bump when the base coding changes: every chromosome is re-encoded
CHUNK_BASES = 1 << 23  # bases read, coded and written at a time (8 Mbases: about 50 MB of temporaries)
READ_BYTES = 1 << 20  # raw bytes hashed and decompressed at a time
PROBE_BYTES = 1 << 20  # head and tail of a raw file hashed for its identity
_LETTER_BYTES = np.array([chr(b).isascii() and chr(b).isalpha() for b in range(256)])
_NON_ACGTN = _LETTER_BYTES & ~np.isin(np.arange(256), [ord(c) for c in "ACGTNacgtn"])
_LOWERCASE = np.isin(np.arange(256), [ord(c) for c in "abcdefghijklmnopqrstuvwxyz"])


class GenomeFileError(ValueError):
    """A genome file that cannot be read as the config says; the message names the file and the chromosome."""


def example_count(length: int, window: int, stride: int) -> int:
    """Full windows of `window` bases every `stride` bases in a chromosome of `length` bases."""
    return 0 if length < window else (length - window) // stride + 1


def chromosome_windows(bases: np.ndarray, window: int, stride: int, chunk: int = 1024) -> Iterator[np.ndarray]:
    """The example windows of one chromosome's base codes, `chunk` windows (rows) at a time."""
    count = example_count(len(bases), window, stride)
    for first in range(0, count, chunk):
        last = min(count, first + chunk) - 1
        block = np.asarray(bases[first * stride : last * stride + window])
        yield sliding_window_view(block, window)[::stride]


# ---- raw files: identity, verification, decompression ----------------------------------------------------------
def file_identity(path: Path) -> dict[str, Any]:
    """Cheap identity of a raw file: size, mtime and a sha256 of its first and last MiB."""
    stat = path.stat()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        digest.update(handle.read(PROBE_BYTES))
        if stat.st_size > PROBE_BYTES:
            handle.seek(max(PROBE_BYTES, stat.st_size - PROBE_BYTES))
            digest.update(handle.read())
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "probe_sha256": digest.hexdigest()}


def read_md5_table(path: Path) -> dict[str, str]:
    """`md5sum` output (`<md5>  <name>` per line, as UCSC publishes it) as {name: md5}."""
    table = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 32:
            raise GenomeFileError(f"{path} line {number}: expected '<md5> <file name>', got {line!r}")
        table[parts[1].strip().lstrip("*")] = parts[0].lower()
    return table


def verify_and_decompress(raw: Path, expected_md5: str | None, what: str) -> tuple[Path, dict[str, str]]:
    """Hash `raw` (sha256, md5) and, when it is gzip, decompress it beside itself in the same streaming pass.

    Returns the plain FASTA's path and the digests. A gzip stream that ends early or fails its CRC, or an md5
    that differs from the table's, raises FetchError and removes `raw`, so a re-run fetches it again.
    """
    sha256, md5 = hashlib.sha256(), hashlib.md5()
    gz = raw.name.endswith(".gz")
    plain = raw.with_name(raw.name[: -len(".gz")]) if gz else raw
    try:
        if gz:
            with open(raw, "rb") as source:
                magic = source.read(2)
            if magic != b"\x1f\x8b":
                raise zlib.error(f"not gzip data (starts with {magic!r}); expected a gzip-compressed FASTA file")
            with open(raw, "rb") as source, atomic_path(plain) as tmp, open(tmp, "wb") as sink:
                _gunzip(source, sink, [sha256, md5])
                sink.flush()
                os.fsync(sink.fileno())
        else:
            with open(raw, "rb") as source:
                while block := source.read(READ_BYTES):
                    sha256.update(block)
                    md5.update(block)
        if expected_md5 is not None and md5.hexdigest() != expected_md5:
            raise FetchError(
                f"{raw} ({what}): md5 {md5.hexdigest()}, md5sum.txt expects {expected_md5}; the file is corrupt "
                "or not the one published"
            )
    except (FetchError, zlib.error, EOFError) as err:
        raw.unlink(missing_ok=True)
        plain.unlink(missing_ok=True)
        if isinstance(err, FetchError):
            raise FetchError(f"{err}; removed, a re-run fetches it again") from err
        raise FetchError(f"{raw} ({what}): {err}; removed, a re-run fetches it again") from err
    return plain, {"sha256": sha256.hexdigest(), "md5": md5.hexdigest()}


def _gunzip(source, sink, digests) -> None:
    """Decompress every gzip member of `source` into `sink` with bounded output per step; hash the input."""
    decompressor = zlib.decompressobj(wbits=31)
    read = 0
    while block := source.read(READ_BYTES):
        read += len(block)
        for digest in digests:
            digest.update(block)
        data = block
        while data:
            sink.write(decompressor.decompress(data, READ_BYTES * 4))
            if decompressor.eof:
                data = decompressor.unused_data
                if data:  # the next member (bgzip files are many members)
                    decompressor = zlib.decompressobj(wbits=31)
            else:
                data = decompressor.unconsumed_tail
    if not decompressor.eof:
        raise EOFError(
            f"gzip stream ends after {read} compressed bytes without its end marker: the file is truncated "
            "(an interrupted download); expected a complete gzip file"
        )


# ---- plain FASTA: index and base codes --------------------------------------------------------------------------
@dataclass(frozen=True)
class FaiRecord:
    name: str
    length: int
    offset: int  # byte of the first base
    line_bases: int
    line_bytes: int


def fasta_index(fasta: Path) -> dict[str, FaiRecord]:
    """The records of `fasta` from its .fai, which is (re)built with pyfaidx when missing or stale."""
    fai = fasta.with_name(fasta.name + ".fai")
    with open(fasta, "rb") as handle:
        head = handle.read(4096).lstrip()
    if not head.startswith(b">"):
        raise GenomeFileError(f"{fasta}: not a FASTA file (starts with {head[:40]!r}; expected a '>' header line)")
    records = _read_fai(fasta, fai) if fai.exists() and fai.stat().st_mtime_ns >= fasta.stat().st_mtime_ns else None
    if records is None or not _index_matches(fasta, records):
        log.info("%s: building its .fai index", fasta)
        with atomic_path(fai) as tmp:
            tmp.unlink()  # pyfaidx builds an index only where none exists
            try:
                pyfaidx.Faidx(str(fasta), indexname=str(tmp)).close()
            except (pyfaidx.FastaIndexingError, UnicodeDecodeError, ValueError) as err:
                raise GenomeFileError(f"{fasta}: not a valid FASTA file ({err})") from err
        records = _read_fai(fasta, fai)
        if records is None or not _index_matches(fasta, records):
            raise GenomeFileError(f"{fasta}: pyfaidx's index does not match the file; is it a FASTA file?")
    return records


def _read_fai(fasta: Path, fai: Path) -> dict[str, FaiRecord] | None:
    try:
        faidx = pyfaidx.Faidx(str(fasta), indexname=str(fai), rebuild=False, build_index=False)
    except (ValueError, pyfaidx.IndexNotFoundError):  # unparsable or duplicate names: rebuild, then judge
        return None
    faidx.close()
    return {name: FaiRecord(name, rec.rlen, rec.offset, rec.lenc, rec.lenb) for name, rec in faidx.index.items()}


def _index_matches(fasta: Path, records: dict[str, FaiRecord]) -> bool:
    """Whether each record's header precedes its offset, its last base ends a line and the last record ends the
    file: a cheap staleness check."""
    size = fasta.stat().st_size
    with open(fasta, "rb") as handle:
        if records:  # nothing but line breaks after the last record: no record is missing from the index
            last = max(records.values(), key=lambda r: r.offset)
            lines, rest = divmod(last.length, last.line_bases)
            handle.seek(last.offset + lines * last.line_bytes + rest)
            if handle.read(64).strip() or last.offset + lines * last.line_bytes + rest + 64 < size:
                return False
        for record in records.values():
            if record.length == 0:
                continue
            if record.line_bases < 1 or record.line_bytes - record.line_bases not in (1, 2) or record.offset < 2:
                return False
            start = max(0, record.offset - 4096)
            handle.seek(start)
            before = handle.read(record.offset - start)
            header = before[:-1].rsplit(b"\n", 1)[-1]  # the line that ends right before the first base
            if not before.endswith(b"\n") or header.split()[:1] != [b">" + record.name.encode()]:
                return False
            last = record.length - 1
            end = record.offset + (last // record.line_bases) * record.line_bytes + last % record.line_bases + 1
            if end > size:
                return False
            handle.seek(end)
            after = handle.read(1)
            if after not in (b"", b"\n", b"\r"):
                return False
    return True


def write_chromosome_codes(fasta: Path, chromosome: str, dest: Path, records=None) -> dict[str, Any]:
    """Encode one FASTA record to uint8 base codes in `dest` (.npy), `CHUNK_BASES` at a time; return its counts.

    Lines are located through the .fai geometry and their terminators checked, so a file whose lines do not
    match its index, or a byte that is not a letter, fails naming the file, the chromosome and the line.
    """
    records = records if records is not None else fasta_index(fasta)
    if chromosome not in records:
        names = ", ".join(list(records)[:30])
        raise GenomeFileError(
            f"{fasta}: no record named {chromosome} (records: {names}); expected a '>{chromosome}' FASTA record"
        )
    rec = records[chromosome]
    terminator = np.frombuffer(b"\r\n" if rec.line_bytes - rec.line_bases == 2 else b"\n", dtype=np.uint8)
    full_lines, rest = divmod(rec.length, rec.line_bases)
    lines_per_chunk = max(1, CHUNK_BASES // rec.line_bases)
    counts = np.zeros(256, dtype=np.int64)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)), "fortran_order": False, "shape": (rec.length,)}
    with open(fasta, "rb") as source, atomic_path(dest) as tmp, open(tmp, "wb") as sink:
        np.lib.format.write_array_header_1_0(sink, header)

        def emit(raw: np.ndarray, first_base: int) -> None:
            codes = CODE_OF_BYTE[raw]
            bad = np.flatnonzero(codes == INVALID_CODE)
            if bad.size:
                at = first_base + int(bad[0])
                raise GenomeFileError(
                    f"{fasta} ({chromosome}): byte {bytes(raw[bad[:1]])!r} at base {at + 1} (line "
                    f"{at // rec.line_bases + 1} of the record) is not a base letter; expected FASTA sequence"
                )
            counts[:] += np.bincount(raw, minlength=256)
            sink.write(codes.tobytes())

        for first in range(0, full_lines, lines_per_chunk):
            lines = min(full_lines, first + lines_per_chunk) - first
            source.seek(rec.offset + first * rec.line_bytes)
            data = source.read(lines * rec.line_bytes)
            if first + lines == full_lines and rest == 0 and len(data) == lines * rec.line_bytes - len(terminator):
                data += terminator.tobytes()  # the file's last line has no line break
            if len(data) != lines * rec.line_bytes:
                raise GenomeFileError(
                    f"{fasta} ({chromosome}): file ends inside the record (line {first + 1} + {len(data)} bytes); "
                    f"its index expects {rec.length} bases"
                )
            block = np.frombuffer(data, dtype=np.uint8).reshape(lines, rec.line_bytes)
            broken = np.flatnonzero((block[:, rec.line_bases :] != terminator).any(axis=1))
            if broken.size:
                raise GenomeFileError(
                    f"{fasta} ({chromosome}): line {first + int(broken[0]) + 1} of the record is not "
                    f"{rec.line_bases} bases long as its .fai says; delete the .fai to re-index"
                )
            emit(block[:, : rec.line_bases].ravel(), first * rec.line_bases)
        if rest:
            source.seek(rec.offset + full_lines * rec.line_bytes)
            data = source.read(rest)
            if len(data) != rest:
                raise GenomeFileError(f"{fasta} ({chromosome}): file ends inside the record's last line")
            emit(np.frombuffer(data, dtype=np.uint8), full_lines * rec.line_bases)
        sink.flush()
        os.fsync(sink.fileno())
    return {
        "length": rec.length,
        "n": int(counts[_LETTER_BYTES].sum() - counts[[ord(c) for c in "ACGTacgt"]].sum()),
        "iupac": int(counts[_NON_ACGTN].sum()),
        "lowercase": int(counts[_LOWERCASE].sum()),
    }


# ---- the examples of a split ------------------------------------------------------------------------------------
class ChromosomeWindows:
    """The examples of one split: fixed windows over its chromosomes' base codes (memory-mapped).

    Pickles without the arrays (a loader worker started by spawn or forkserver maps the files itself).
    """

    def __init__(self, chromosomes: list[str], paths: list[Path], window: int, stride: int, tokens: int):
        self.chromosomes, self.paths = chromosomes, paths
        self.window, self.stride, self.example_tokens = window, stride, tokens
        self._bases: list[np.ndarray] | None = None
        self.counts = np.array([example_count(len(b), window, stride) for b in self.bases], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(self.counts)])

    @property
    def bases(self) -> list[np.ndarray]:
        if self._bases is None:
            self._bases = [np.load(path, mmap_mode="r") for path in self.paths]
        return self._bases

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_bases": None}

    def __len__(self) -> int:
        return int(self.first[-1])

    def locate(self, index: int) -> tuple[int, int]:
        """(chromosome position in the split, first base) of example `index`."""
        if not 0 <= index < len(self):
            raise IndexError(f"example {index} of {len(self)}")
        chromosome = int(np.searchsorted(self.first, index, side="right") - 1)
        return chromosome, int(index - self.first[chromosome]) * self.stride

    def window_codes(self, index: int, jitter: int = 0) -> np.ndarray:
        """Base codes of example `index`, its start moved by `jitter` bases and clipped at the chromosome's end."""
        chromosome, start = self.locate(index)
        return np.asarray(self.bases[chromosome][start + jitter : start + jitter + self.window])

    def example(self, index: int, jitter: int = 0) -> np.ndarray:
        return tokenize(self.window_codes(index, jitter))[: self.example_tokens]

    def all_examples(self) -> list[np.ndarray]:
        """Every example, tokenised a chunk of windows at a time (memory: the chunk plus the tokens kept)."""
        examples = []
        for bases in self.bases:
            for windows in chromosome_windows(bases, self.window, self.stride):
                tokens, offsets = tokenize_windows(windows, self.example_tokens)
                examples.extend(np.split(tokens, offsets[1:-1]))
        return examples


class HRGDataModule(StoredDataModule):
    """GRCh38 chromosomes as 6-mer tokens; the split and the example geometry are settings (see the module doc)."""

    domain = "hrg"
    pad_id = PAD_ID

    def __init__(
        self,
        *,
        split: dict[str, list[str]] | None = None,
        base_url: str = UCSC_HG38_CHROMOSOMES,
        file_pattern: str = "{chrom}.fa.gz",
        checksums: str | None = "md5sum.txt",
        window_bases: int = 6100,
        stride_bases: int = 6050,
        max_jitter: int = 99,
        example_tokens: int = 1000,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.split_chromosomes = {name: list(chroms) for name, chroms in (split or DEFAULT_SPLIT).items()}
        if set(self.split_chromosomes) != {"train", "val", "test"}:
            raise ValueError(
                f"hrg split must name train, val and test chromosomes; got {sorted(self.split_chromosomes)}"
            )
        leaked = set(self.split_chromosomes["train"]) & set(self.split_chromosomes["test"])
        if leaked:
            raise ValueError(f"hrg split: {sorted(leaked)} in both train and test; the test NLL would be meaningless")
        if not 0 < stride_bases <= window_bases or max_jitter < 0 or example_tokens < 2:
            raise ValueError(
                f"hrg examples: need 0 < stride_bases <= window_bases, max_jitter >= 0, example_tokens >= 2; got "
                f"window {window_bases}, stride {stride_bases}, jitter {max_jitter}, tokens {example_tokens}"
            )
        self.chromosomes = list(dict.fromkeys(c for chroms in self.split_chromosomes.values() for c in chroms))
        self.base_url, self.file_pattern, self.checksums = base_url.rstrip("/") + "/", file_pattern, checksums
        self.window_bases, self.stride_bases = window_bases, stride_bases
        self.max_jitter, self.example_tokens = max_jitter, example_tokens

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    # ---- raw files -------------------------------------------------------------------------------------------
    def source_of(self, chromosome: str) -> str:
        """The raw file (relative path) that holds `chromosome`."""
        return self.file_pattern.format(chrom=chromosome)

    def raw_files(self) -> list[RawFile]:
        """The md5 table (when checked) and every FASTA file the split needs; no sha256 is known in advance."""
        files = [self.checksums] if self.checksums else []
        files += list(dict.fromkeys(self.source_of(c) for c in self.chromosomes))
        return [RawFile(relpath, self.base_url + relpath) for relpath in files]

    def build_splits(self, raw: dict[str, Path]):
        """Not used: the HRG store holds base codes per chromosome, not token arrays (see prepare_data)."""
        raise NotImplementedError("HRGDataModule.prepare_data builds base codes per chromosome")

    def preparation_settings(self) -> dict[str, Any]:
        return {
            "split": self.split_chromosomes,
            "file_pattern": self.file_pattern,
            "window_bases": self.window_bases,
            "stride_bases": self.stride_bases,
            "example_tokens": self.example_tokens,
            "code_version": CODE_VERSION,
        }

    # ---- preparation -----------------------------------------------------------------------------------------
    def bases_path(self, chromosome: str) -> Path:
        return self.store / "bases" / f"{chromosome}.npy"

    def prepare_data(self) -> dict[str, Any]:
        """Fetch, verify, decompress and encode what changed; write meta.json if its content changed."""
        urls = {f.relpath: f.url for f in self.raw_files()}
        md5_table = None
        if self.checksums:
            md5_table = read_md5_table(fetch(self.domain, self.checksums, urls[self.checksums]))
        sources: dict[str, list[str]] = {}
        for chromosome in self.chromosomes:
            sources.setdefault(self.source_of(chromosome), []).append(chromosome)
        records: dict[str, dict[str, Any]] = {}
        for relpath, chromosomes in sources.items():
            what = f"{relpath} holding {', '.join(chromosomes)}"
            try:
                raw = fetch(self.domain, relpath, urls[relpath])
            except FetchError as err:
                raise FetchError(f"chromosome {', '.join(chromosomes)}: {err}") from err
            expected_md5 = None
            if md5_table is not None:
                if relpath not in md5_table:
                    raise FetchError(
                        f"{raw_dir(self.domain) / self.checksums}: no line for {relpath} ({what}); expected the md5 "
                        "of every raw file (set domain.args.checksums=null to skip the check for a local mirror)"
                    )
                expected_md5 = md5_table[relpath]
            source = {"file": relpath, "identity": file_identity(raw), "expected_md5": expected_md5}
            current = {c: self._current_record(c, source) for c in chromosomes}
            stale = [c for c, record in current.items() if record is None]
            if stale:
                fasta, digests = verify_and_decompress(raw, expected_md5, what)
                index = fasta_index(fasta)
                for chromosome in stale:
                    log.info("%s: encoding %s", fasta, chromosome)
                    counts = write_chromosome_codes(fasta, chromosome, self.bases_path(chromosome), index)
                    current[chromosome] = {
                        "chromosome": chromosome,
                        "source": source,
                        "raw_sha256": digests["sha256"],
                        "raw_md5": digests["md5"],
                        "code_version": CODE_VERSION,
                        **counts,
                    }
                    write_json(self.bases_path(chromosome).with_suffix(".json"), current[chromosome])
            records.update(current)
        meta = json.loads(json.dumps(self._meta(records)))  # as meta.json will read back
        if read_meta(self.store) != meta:
            if meta["not_grch38"]:
                log.warning(
                    "not GRCh38: %s (bases read vs GRCh38); fine for a generated mirror, wrong for the paper",
                    ", ".join(f"{c} {got} vs {want}" for c, (got, want) in list(meta["not_grch38"].items())[:4]),
                )
            write_json(self.store / "meta.json", meta)
        return meta

    def _current_record(self, chromosome: str, source: dict[str, Any]) -> dict[str, Any] | None:
        """The chromosome's build record when its codes were built from exactly this source, else None."""
        path = self.bases_path(chromosome)
        record_path = path.with_suffix(".json")
        if not (path.exists() and record_path.exists()):
            return None
        try:
            record = json.loads(record_path.read_text())
        except json.JSONDecodeError:
            return None
        if record.get("source") != source or record.get("code_version") != CODE_VERSION:
            return None
        shape = np.load(path, mmap_mode="r").shape
        return record if shape == (record["length"],) else None

    def _meta(self, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
        chromosomes = {
            c: {
                "file": records[c]["source"]["file"],
                **{key: records[c][key] for key in ("length", "n", "iupac", "lowercase")},
            }
            for c in self.chromosomes
        }
        differ = {
            c: [facts["length"], GRCH38_LENGTHS.get(c)]
            for c, facts in chromosomes.items()
            if facts["length"] != GRCH38_LENGTHS.get(c)
        }
        splits = {}
        for name, chroms in self.split_chromosomes.items():
            lengths = [chromosomes[c]["length"] for c in chroms]
            splits[name] = {
                "chromosomes": chroms,
                "bases": sum(lengths),
                "examples": sum(example_count(n, self.window_bases, self.stride_bases) for n in lengths),
            }
        return {
            "domain": self.domain,
            "format_version": FORMAT_VERSION,
            "vocab_size": self.vocab_size,
            "source": {"base_url": self.base_url, "file_pattern": self.file_pattern, "checksums": self.checksums},
            "raw_sha256": {records[c]["source"]["file"]: records[c]["raw_sha256"] for c in self.chromosomes},
            "chromosomes": chromosomes,
            "grch38": not differ,
            "not_grch38": differ,
            "splits": splits,
            "settings": self.preparation_settings(),
        }

    # ---- examples --------------------------------------------------------------------------------------------
    def split(self, name: str) -> ChromosomeWindows:
        if name not in self.split_chromosomes:
            raise ValueError(f"unknown split {name!r}; valid: {tuple(self.split_chromosomes)}")
        if name not in self._splits:
            chroms = self.split_chromosomes[name]
            paths = [self.bases_path(chromosome) for chromosome in chroms]
            for chromosome, path in zip(chroms, paths, strict=True):
                if not path.exists():
                    raise FileNotFoundError(
                        f"{path}: {chromosome} ({name} split) is not in the hrg store; run `make data-hrg` with this "
                        "split"
                    )
            self._splits[name] = ChromosomeWindows(
                chroms, paths, self.window_bases, self.stride_bases, self.example_tokens
            )
        return self._splits[name]

    def draw_train_window(self, rng: np.random.Generator) -> Window:
        """A uniform training example, its start moved by uniform 0..max_jitter bases; a uniform crop if longer
        than the context."""
        train = self.split("train")
        if len(train) == 0:
            raise ValueError(
                f"hrg: no training example: train chromosomes {train.chromosomes} have no window of "
                f"{self.window_bases} bases"
            )
        index = int(rng.integers(len(train)))
        example = train.example(index, jitter=int(rng.integers(self.max_jitter + 1)))
        start = int(rng.integers(max(1, len(example) - self.context + 1)))
        return padded_window(example[start : start + self.context], self.context, self.pad_id)

    def build_split_windows(self, split: str) -> EvalWindows:
        windows = self.split(split)
        if len(windows) == 0:
            raise EmptySplitError(
                f"hrg {split}: chromosomes {windows.chromosomes} have no window of {self.window_bases} bases"
            )
        return windows_from_examples(windows.all_examples(), self.context, self.eval_stride, self.pad_id)

    def long_test_sequences(self, length: int) -> list[np.ndarray]:
        """Extrapolation material: the test chromosomes in the example geometry scaled by f = length / context
        (f x 6100 bases every f x 6050, f x 1000 tokens at the paper preset); windows with fewer tokens are dropped."""
        factor = length // self.context
        test = self.split("test")
        scaled = ChromosomeWindows(
            test.chromosomes, test.paths, factor * self.window_bases, factor * self.stride_bases, length
        )
        return [example for example in scaled.all_examples() if len(example) == length]

    def render_example(self, split: str, index: int, max_tokens: int) -> str:
        windows = self.split(split)
        chromosome, start = windows.locate(index)
        codes = windows.window_codes(index)
        tokens = tokenize(codes)[: self.example_tokens]
        letters = "".join(np.array(list(BASES + "N"))[codes[:60]])
        return "\n".join(
            [
                f"{split}[{index}]: {windows.chromosomes[chromosome]}:{start + 1}-{start + len(codes)} "
                f"({len(codes)} bases, {int((codes == N_CODE).sum())} N; {len(tokens)} tokens)",
                f"bases:  {letters}{'...' if len(codes) > 60 else ''}",
                f"tokens: {' '.join(token_strings(tokens[:max_tokens]))}{' ...' if len(tokens) > max_tokens else ''}",
            ]
        )

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "split": self.split_chromosomes,
            "window_bases": self.window_bases,
            "stride_bases": self.stride_bases,
            "max_jitter": self.max_jitter,
            "example_tokens": self.example_tokens,
            "examples": {name: len(self.split(name)) for name in self.split_chromosomes},
        }
