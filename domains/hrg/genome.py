"""The genome's raw files and their base codes: UCSC's hg38 FASTA files, checked and encoded per chromosome.

1. identity: a raw file is identified by size, mtime and a sha256 of its first and last MiB (`file_identity`), so
   an unchanged file is recognised without reading it.
2. verify, in one streaming pass per raw file: its md5 against its line in UCSC's `md5sum.txt`, and for gzip the
   stream's own CRC32 and length (a truncated download fails here, naming the file and its chromosomes). The
   pass also computes the file's sha256.
3. decompress gzip to plain FASTA beside it (never bgzip: pyfaidx random access degrades on it), streaming,
   and index it with pyfaidx; an index that is missing, older than the FASTA or inconsistent with it is rebuilt.
4. encode each chromosome to uint8 base codes (`domains.hrg.bases`: uppercase, any other letter N) in chunks of
   lines located through the .fai, into a .npy file, counting N/IUPAC/lowercase letters. Memory stays bounded
   by the chunk size (`CHUNK_BASES`).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyfaidx

from domains.atomic import atomic_path
from domains.fetch import FetchError
from domains.hrg.bases import CODE_OF_BYTE, INVALID_CODE

log = logging.getLogger("posbench.hrg")

UCSC_HG38_CHROMOSOMES = "https://hgdownload.soe.ucsc.edu/goldenPath/hg38/chromosomes/"
PRIMARY_CHROMOSOMES = tuple(f"chr{i}" for i in range(1, 23)) + ("chrX", "chrY")
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
    try:
        text = path.read_text()
    except UnicodeDecodeError as err:
        raise GenomeFileError(f"{path}: not text ({err}); expected an md5 table, '<md5>  <file name>' lines") from err
    table = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 32:
            raise GenomeFileError(f"{path} line {number}: expected '<md5> <file name>', got {line!r}")
        table[parts[1].strip().lstrip("*")] = parts[0].lower()
    return table


def check_md5(path: Path, expected_md5: str, what: str) -> None:
    """Raise FetchError naming `path` (`what` it holds) when its md5 is not its md5sum.txt line's."""
    md5 = hashlib.md5()
    with open(path, "rb") as handle:
        while block := handle.read(READ_BYTES):
            md5.update(block)
    if md5.hexdigest() != expected_md5:
        raise md5_mismatch(path, what, md5.hexdigest(), expected_md5)


def md5_mismatch(path: Path, what: str, got: str, expected: str) -> FetchError:
    return FetchError(
        f"{path} ({what}): md5 {got}, md5sum.txt expects {expected}; the file is corrupt or not the one published"
    )


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
            raise md5_mismatch(raw, what, md5.hexdigest(), expected_md5)
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
    """Encode one FASTA record to uint8 base codes in `dest` (.npy), `CHUNK_BASES` at a time; return its counts
    and the written file's size and sha256.

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
    digest = hashlib.sha256()  # of the .npy file as written: the store records it
    with open(fasta, "rb") as source, atomic_path(dest) as tmp, open(tmp, "wb") as sink:
        head = io.BytesIO()
        np.lib.format.write_array_header_1_0(head, header)
        digest.update(head.getvalue())
        sink.write(head.getvalue())

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
            data = codes.tobytes()
            digest.update(data)
            sink.write(data)

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
        size = sink.tell()
    return {
        "length": rec.length,
        "bytes": size,
        "sha256": digest.hexdigest(),
        "n": int(counts[_LETTER_BYTES].sum() - counts[[ord(c) for c in "ACGTacgt"]].sum()),
        "iupac": int(counts[_NON_ACGTN].sum()),
        "lowercase": int(counts[_LOWERCASE].sum()),
    }
