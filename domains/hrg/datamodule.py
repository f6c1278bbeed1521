"""HRGDataModule: GRCh38 chromosomes as Nucleotide Transformer 6-mers (SPEC section 2).

Preparation (`make data-hrg`, i.e. `prepare_data`):

1. fetch: every raw file named by `file_pattern` (default `{chrom}.fa.gz`: UCSC's per-chromosome hg38 files
   under `base_url`, https://hgdownload.soe.ucsc.edu/goldenPath/hg38/chromosomes/) and the md5 table UCSC
   publishes in the same folder (`md5sum.txt`), through `domains.fetch` (resumable; `$POSBENCH_MIRROR/hrg/`
   replaces the network). A pattern without `{chrom}` names one multi-record FASTA for every chromosome; `files`
   names each chromosome's file instead (slices of GRCh38 that hold several chromosomes, or one partly), with its
   `urls` and the `sha256` a file must have (a slice has no md5 table: its provenance's sha256 is the check, and
   meta.json records it under `verified_sha256`).
2. verify, decompress, index and encode each raw file (`domains.hrg.genome`) into `<store>/bases/<chrom>.npy`,
   then `<chrom>.json` (its source file's identity, sha256, md5, length, N/IUPAC/lowercase counts).
   GRCh38 lengths (`GRCH38_LENGTHS`, public constants) are compared with what was read and recorded in
   meta.json (`grch38`); a mismatch is logged, not fatal, so a mirror of generated chromosomes works too.
3. `meta.json`: per-chromosome facts, the raw files' sha256 (`raw_sha256`, the run manifest's data hashes), the
   split, the example counts for this geometry.

What makes the store current: a chromosome is rebuilt only when its source file's identity (size, mtime, a hash
of its first and last MiB), its md5 line or the code version changed, or its codes file is damaged (another size
than its record's, or another sha256: checked through the hash cache in `bases/`, so a file is read again only
when its size or mtime changed). An unchanged re-run reads a few MiB and writes nothing, and adding chromosomes to
the config builds only those; meta.json is written only when its content changes. A record written before the
codes' size and sha256 were kept is not current: that chromosome is encoded again.

A failed preparation leaves the store as it was: the chromosomes to rebuild are encoded into a staging folder
inside the store and moved into `bases/` (codes, then the record that makes them current) only once every one
of them is done. Raw files are checked before they replace a local copy (`fetch_raw`); a raw file that then fails
the gzip or md5 check of step 2 is removed, so a re-run fetches it again. A validation or test region that is
all N (no A, C, G or T) is refused by name before the move: its scores would measure nothing; a training one is
named in a warning. So is an evaluation split with no example at all (every window over the N limit).

Examples (SPEC, `domains.hrg.windows`): the split names regions (`domains.hrg.regions`: whole chromosomes, as the
protocol, or stretches of one by coordinates); windows of `window_bases` (6100) every `stride_bases` (6050) over
each region, N runs included; only full windows: 8399 for chr22's 50,818,468 bases, whose last 4468 bases are
left over. A window more than `max_n_fraction` N is no example (1.0, the protocol: every window is one). Each
example is its window tokenised on its own and truncated to `example_tokens` (1000) tokens.
Training draws an example uniformly over the training chromosomes and moves its start by a uniform
0..`max_jitter` (99) bases, both from the `rng` it is handed; the jittered window is clipped at its region's
end, which never shortens an example at SPEC settings (1000 tokens need at most 6000 bases). Evaluation windows
have no jitter and are tokenised when first asked for (tens of Mbases/s: seconds for chr22), so one store serves
every example geometry (the tiny preset scales it by 1/10) and switching presets never re-encodes the genome.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from domains.atomic import write_json
from domains.base import EmptySplitError, EvalWindows, Window, padded_window, windows_from_examples
from domains.fetch import FetchError, fetch
from domains.hash_cache import cached_sha256, remember_sha256
from domains.hrg.bases import BASES, N_CODE
from domains.hrg.genome import (
    CODE_VERSION,
    GRCH38_LENGTHS,
    PRIMARY_CHROMOSOMES,
    UCSC_HG38_CHROMOSOMES,
    check_md5,
    fasta_index,
    file_identity,
    read_md5_table,
    verify_and_decompress,
    write_chromosome_codes,
)
from domains.hrg.regions import parse_split
from domains.hrg.tokenizer import PAD_ID, VOCAB_SIZE, token_strings, tokenize
from domains.hrg.windows import ChromosomeWindows
from domains.store import FORMAT_VERSION, locked, read_meta
from domains.stored import RawFile, StoredDataModule

log = logging.getLogger("posbench.hrg")

# said where the protocol's md5 table cannot be had: the mirror may hold another source's files
SOURCES_HINT = (
    "This is the protocol's source (UCSC's per-chromosome files and their md5sum.txt); the CPU-scale study's GRCh38 "
    "slices are another source: `make data-hrg ARGS=preset=cpu` (or domain.source=grch38_slice at any preset)"
)
DEFAULT_SPLIT = {"train": [*PRIMARY_CHROMOSOMES[:20], "chrX", "chrY"], "val": ["chr21"], "test": ["chr22"]}


class HRGDataModule(StoredDataModule[ChromosomeWindows]):
    """GRCh38 chromosomes as 6-mer tokens; the split and the example geometry are settings (see the module doc)."""

    domain = "hrg"
    pad_id = PAD_ID
    amount_unit = "bases"

    def __init__(
        self,
        *,
        split: dict[str, list[str]] | None = None,
        base_url: str = UCSC_HG38_CHROMOSOMES,
        file_pattern: str = "{chrom}.fa.gz",
        checksums: str | None = "md5sum.txt",
        files: dict[str, str] | None = None,
        urls: dict[str, str] | None = None,
        sha256: dict[str, str] | None = None,
        window_bases: int = 6100,
        stride_bases: int = 6050,
        max_jitter: int = 99,
        example_tokens: int = 1000,
        max_n_fraction: float = 1.0,
        **kwargs: Any,
    ) -> None:
        """split: train, val and test, each a list of regions (`domains.hrg.regions`); files: chromosome -> raw
        file, instead of `file_pattern`; urls: raw file -> its URL (default base_url + file); sha256: raw file ->
        the sha256 it must have; max_n_fraction: a window with a larger share of N is no example."""
        super().__init__(**kwargs)
        self.split_spec = {
            name: [str(entry) for entry in entries] for name, entries in (split or DEFAULT_SPLIT).items()
        }
        if set(self.split_spec) != {"train", "val", "test"}:
            raise ValueError(f"hrg split must name train, val and test regions; got {sorted(self.split_spec)}")
        self.split_regions = parse_split(self.split_spec)
        if not 0 < max_n_fraction <= 1:
            raise ValueError(f"hrg examples: max_n_fraction must be in (0, 1], got {max_n_fraction}")
        if not 0 < stride_bases <= window_bases or max_jitter < 0 or example_tokens < 2:
            raise ValueError(
                f"hrg examples: need 0 < stride_bases <= window_bases, max_jitter >= 0, example_tokens >= 2; got "
                f"window {window_bases}, stride {stride_bases}, jitter {max_jitter}, tokens {example_tokens}"
            )
        self.chromosomes = list(
            dict.fromkeys(region.chromosome for regions in self.split_regions.values() for region in regions)
        )
        self.base_url, self.file_pattern, self.checksums = base_url.rstrip("/") + "/", file_pattern, checksums
        self.files, self.urls, self.sha256 = dict(files or {}), dict(urls or {}), dict(sha256 or {})
        unnamed = [c for c in self.chromosomes if self.files and c not in self.files]
        if unnamed:
            raise ValueError(f"hrg files: no raw file named for {', '.join(unnamed)} (files: {self.files})")
        self.window_bases, self.stride_bases = window_bases, stride_bases
        self.max_jitter, self.example_tokens = max_jitter, example_tokens
        self.max_n_fraction = float(max_n_fraction)

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    def prepared_amount(self, meta: dict[str, Any]) -> int:
        return sum(chromosome["length"] for chromosome in meta["chromosomes"].values())

    # ---- raw files -------------------------------------------------------------------------------------------
    def source_of(self, chromosome: str) -> str:
        """The raw file (relative path) that holds `chromosome`."""
        return self.files[chromosome] if self.files else self.file_pattern.format(chrom=chromosome)

    def raw_files(self) -> list[RawFile]:
        """The md5 table (when checked) and every FASTA file the split needs, with the sha256 the config gives."""
        files = [self.checksums] if self.checksums else []
        files += list(dict.fromkeys(self.source_of(c) for c in self.chromosomes))
        return [
            RawFile(relpath, self.urls.get(relpath, self.base_url + relpath), self.sha256.get(relpath))
            for relpath in files
        ]

    def preparation_settings(self) -> dict[str, Any]:
        settings = {
            "split": self.split_spec,
            "file_pattern": self.file_pattern,
            "window_bases": self.window_bases,
            "stride_bases": self.stride_bases,
            "example_tokens": self.example_tokens,
            "code_version": CODE_VERSION,
        }
        if self.files or self.sha256 or self.max_n_fraction < 1:  # the protocol's settings read as they always did
            settings |= {"files": self.files, "sha256": self.sha256, "max_n_fraction": self.max_n_fraction}
        return settings

    # ---- preparation -----------------------------------------------------------------------------------------
    def bases_path(self, chromosome: str) -> Path:
        return self.store / "bases" / f"{chromosome}.npy"

    def fetch_raw(self) -> dict[str, Path]:
        """The md5 table and every FASTA file of the split on disk, each checked before it replaces a local copy
        (`domains.fetch`'s rule: the md5 table must parse, a FASTA file must match its md5 line); a file that
        cannot be fetched is reported with the chromosomes it holds."""
        files = {file.relpath: file for file in self.raw_files()}
        raw, md5_table = {}, {}
        if self.checksums:
            try:
                table = files[self.checksums]
                raw[self.checksums] = fetch(self.domain, table.relpath, table.url, verify=read_md5_table)
            except FetchError as err:
                raise FetchError(f"{err}. {SOURCES_HINT}") from err
            md5_table = read_md5_table(raw[self.checksums])
        for relpath, chromosomes in self.chromosomes_by_source().items():
            what = f"{relpath} holding {', '.join(chromosomes)}"
            # a file without a line fails in build_store, naming the table
            verify = partial(check_md5, expected_md5=md5_table[relpath], what=what) if relpath in md5_table else None
            try:
                raw[relpath] = fetch(self.domain, relpath, files[relpath].url, files[relpath].sha256, verify=verify)
            except FetchError as err:
                raise FetchError(f"chromosome {', '.join(chromosomes)}: {err}") from err
        return raw

    def chromosomes_by_source(self) -> dict[str, list[str]]:
        """Raw file (relative path) -> the chromosomes of the split it holds."""
        sources: dict[str, list[str]] = {}
        for chromosome in self.chromosomes:
            sources.setdefault(self.source_of(chromosome), []).append(chromosome)
        return sources

    def build_store(self, raw: dict[str, Path]) -> dict[str, Any]:
        """Verify, decompress and encode the chromosomes whose source changed or whose codes are damaged, into a
        staging folder moved into `bases/` once all are done; write meta.json if its content changed (see the
        module doc for what makes a chromosome current)."""
        md5_table = read_md5_table(raw[self.checksums]) if self.checksums else None
        with locked(self.store):
            for leftover in self.store.glob(".building-*"):  # a killed build's: the lock says none is running
                shutil.rmtree(leftover, ignore_errors=True)
            self.store.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=".building-", dir=self.store) as staging:
                records, encoded = self._encode_stale(raw, md5_table, Path(staging))
                codes = {
                    c: Path(staging) / self.bases_path(c).name if c in encoded else self.bases_path(c) for c in records
                }
                splits = self._split_facts(records, codes)
                self._check_splits(records, splits)  # before anything moves: a refusal leaves the store as it was
                for chromosome in encoded:  # the codes first: the record is what makes them current
                    path = self.bases_path(chromosome)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(Path(staging) / path.name, path)
                    remember_sha256(path, records[chromosome]["sha256"])
                    write_json(path.with_suffix(".json"), records[chromosome])
            meta = json.loads(json.dumps(self._meta(records, splits)))  # as meta.json will read back
            if read_meta(self.store) != meta:
                if meta["not_grch38"] and self._unverified(meta):
                    log.warning(
                        "not GRCh38: %s (bases read vs GRCh38); fine for a generated mirror, wrong for the paper",
                        ", ".join(f"{c} {got} vs {want}" for c, (got, want) in list(meta["not_grch38"].items())[:4]),
                    )
                write_json(self.store / "meta.json", meta)
        if encoded:
            self._splits.clear()  # splits and windows opened before map the replaced codes
            self._windows.clear()
        return meta

    def _encode_stale(
        self, raw: dict[str, Path], md5_table: dict[str, str] | None, staging: Path
    ) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """Every chromosome's build record, and the chromosomes encoded anew into `staging` (the others are
        current in the store)."""
        records: dict[str, dict[str, Any]] = {}
        encoded = []
        for relpath, chromosomes in self.chromosomes_by_source().items():
            what = f"{relpath} holding {', '.join(chromosomes)}"
            expected_md5 = None
            if md5_table is not None:
                if relpath not in md5_table:
                    raise FetchError(
                        f"{raw[self.checksums]}: no line for {relpath} ({what}); expected the md5 "
                        "of every raw file (set domain.args.checksums=null to skip the check for a local mirror)"
                    )
                expected_md5 = md5_table[relpath]
            source = {"file": relpath, "identity": file_identity(raw[relpath]), "expected_md5": expected_md5}
            current = {c: self._current_record(c, source) for c in chromosomes}
            stale = [c for c, record in current.items() if record is None]
            if stale:
                fasta, digests = verify_and_decompress(raw[relpath], expected_md5, what)
                index = fasta_index(fasta)
                for chromosome in stale:
                    log.info("%s: encoding %s", fasta, chromosome)
                    dest = staging / self.bases_path(chromosome).name
                    counts = write_chromosome_codes(fasta, chromosome, dest, index)
                    current[chromosome] = {
                        "chromosome": chromosome,
                        "source": source,
                        "raw_sha256": digests["sha256"],
                        "raw_md5": digests["md5"],
                        "code_version": CODE_VERSION,
                        **counts,
                    }
                encoded += stale
            records.update(current)
        return records, encoded

    def _split_facts(self, records: dict[str, dict[str, Any]], codes: dict[str, Path]) -> dict[str, Any]:
        """Per split: its regions (each with its bases and non-N bases) and its examples, counted on the codes."""
        facts = {}
        for split, regions in self.split_regions.items():
            windows = ChromosomeWindows(
                regions,
                [codes[region.chromosome] for region in regions],
                self.window_bases,
                self.stride_bases,
                self.example_tokens,
                self.max_n_fraction,
            )
            stretches = []
            for region, bases, (start, end) in zip(regions, windows.bases, windows.bounds, strict=True):
                record = records[region.chromosome]
                whole = (start, end) == (0, record["length"])
                n = record["n"] if whole else int(np.count_nonzero(np.asarray(bases[start:end]) == N_CODE))
                stretches.append({"region": str(region), "bases": end - start, "non_n_bases": end - start - n})
            facts[split] = {
                "regions": stretches,
                "examples": len(windows),
                "windows_over_n_limit": windows.candidate_windows() - len(windows),
            }
        return facts

    def _check_splits(self, records: dict[str, dict[str, Any]], splits: dict[str, Any]) -> None:
        """A region that is all N (no A, C, G or T: every window of it holds N tokens only) is refused in an
        evaluation split, whose scores would measure nothing, and named in a warning in the training split; an
        evaluation split with no example at all (its regions shorter than a window, or every window over the N
        limit) is refused too."""
        for split, facts in splits.items():
            for region, stretch in zip(self.split_regions[split], facts["regions"], strict=True):
                if stretch["non_n_bases"] > 0:
                    continue
                message = (
                    f"hrg: {region} ({split} split, {records[region.chromosome]['source']['file']}) is all N: none "
                    f"of its {stretch['bases']:,} bases is A, C, G or T"
                )
                if split == "train":
                    log.warning("%s; its training windows teach only N after N", message)
                    continue
                raise ValueError(
                    f"{message}, so every {split} window would score N tokens only; check the file, or name other "
                    f"regions in domain.args.split.{split}"
                )
            if split != "train" and self.split_regions[split] and facts["examples"] == 0:
                regions = ", ".join(stretch["region"] for stretch in facts["regions"])
                raise ValueError(
                    f"hrg {split} split ({regions}): no scorable window: {facts['windows_over_n_limit']} full windows "
                    f"of {self.window_bases} bases, each more than {self.max_n_fraction:.0%} N; name regions with "
                    f"sequence in domain.args.split.{split}"
                )

    def _current_record(self, chromosome: str, source: dict[str, Any]) -> dict[str, Any] | None:
        """The chromosome's build record when its codes were built from exactly this source and are intact, else
        None (damaged codes are logged)."""
        path = self.bases_path(chromosome)
        record_path = path.with_suffix(".json")
        if not (path.exists() and record_path.exists()):
            return None
        try:
            record = json.loads(record_path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        if not isinstance(record, dict) or record.get("source") != source or record.get("code_version") != CODE_VERSION:
            return None
        if "sha256" not in record:  # written before the codes' digest was kept: nothing to check them against
            return None
        size = path.stat().st_size
        if size != record["bytes"]:
            log.warning("%s: %d bytes, its record says %d; encoding %s again", path, size, record["bytes"], chromosome)
            return None
        if cached_sha256([path])[path] != record["sha256"]:
            log.warning("%s: sha256 differs from its record's; encoding %s again", path, chromosome)
            return None
        return record

    def _meta(self, records: dict[str, dict[str, Any]], splits: dict[str, Any]) -> dict[str, Any]:
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
        meta = {
            "domain": self.domain,
            "format_version": FORMAT_VERSION,
            "vocab_size": self.vocab_size,
            "source": {"base_url": self.base_url, "file_pattern": self.file_pattern, "checksums": self.checksums},
            "raw_sha256": {records[c]["source"]["file"]: records[c]["raw_sha256"] for c in self.chromosomes},
            "chromosomes": chromosomes,
            "grch38": not differ,
            "not_grch38": differ,
            "splits": {name: self._split_meta(name, splits[name]) for name in self.split_regions},
            "settings": self.preparation_settings(),
        }
        if self.sha256:  # files checked against the sha256 their provenance gives (fetch refuses any other)
            meta["verified_sha256"] = {f: d for f, d in self.sha256.items() if f in meta["raw_sha256"]}
        return meta

    def _split_meta(self, name: str, facts: dict[str, Any]) -> dict[str, Any]:
        bases = sum(stretch["bases"] for stretch in facts["regions"])
        if self.max_n_fraction >= 1 and all(
            region.end is None and region.start == 0 for region in self.split_regions[name]
        ):
            # the protocol's split: whole chromosomes, every window an example (meta.json as it always read)
            return {"chromosomes": self.split_spec[name], "bases": bases, "examples": facts["examples"]}
        return {
            "regions": facts["regions"],
            "bases": bases,
            "non_n_bases": sum(stretch["non_n_bases"] for stretch in facts["regions"]),
            "examples": facts["examples"],
            "windows_over_n_limit": facts["windows_over_n_limit"],
        }

    def _unverified(self, meta: dict[str, Any]) -> bool:
        """Whether a chromosome whose length is not GRCh38's came from a file no configured sha256 vouches for (a
        slice verified by its sha256 is GRCh38 cut short, said in the log at info level)."""
        verified = meta.get("verified_sha256", {})
        files = {meta["chromosomes"][c]["file"] for c in meta["not_grch38"]}
        if files <= set(verified):
            log.info(
                "slices of GRCh38, verified by their files' sha256: %s",
                ", ".join(f"{c} {got:,} of {want or 0:,} bases" for c, (got, want) in meta["not_grch38"].items()),
            )
            return False
        return True

    # ---- examples --------------------------------------------------------------------------------------------
    def open_split(self, name: str) -> ChromosomeWindows:
        regions = self.split_regions[name]
        paths = [self.bases_path(region.chromosome) for region in regions]
        for region, path in zip(regions, paths, strict=True):
            if not path.exists():
                raise FileNotFoundError(
                    f"{path}: {region.chromosome} ({name} split) is not in the hrg store; run `make data-hrg` with "
                    "this split"
                )
        return ChromosomeWindows(
            regions, paths, self.window_bases, self.stride_bases, self.example_tokens, self.max_n_fraction
        )

    def draw_train_window(self, rng: np.random.Generator) -> Window:
        """A uniform training example, its start moved by uniform 0..max_jitter bases; a uniform crop if longer
        than the context."""
        train = self.split("train")
        if len(train) == 0:
            raise ValueError(
                f"hrg: no training example: train regions {self.split_spec['train']} have no window of "
                f"{self.window_bases} bases{self._n_limit_text()}"
            )
        index = int(rng.integers(len(train)))
        example = train.example(index, jitter=int(rng.integers(self.max_jitter + 1)))
        start = int(rng.integers(max(1, len(example) - self.context + 1)))
        return padded_window(example[start : start + self.context], self.context, self.pad_id)

    def build_split_windows(self, split: str) -> EvalWindows:
        windows = self.split(split)
        if len(windows) == 0:
            raise EmptySplitError(
                f"hrg {split}: regions {self.split_spec[split]} have no window of {self.window_bases} bases"
                f"{self._n_limit_text()}"
            )
        keep = self.eval_example_indices(len(windows))
        # every example: tokenised a chunk of windows at a time; a few (eval_examples): one by one
        examples = windows.all_examples() if len(keep) == len(windows) else [windows.example(int(i)) for i in keep]
        return windows_from_examples(examples, self.context, self.eval_stride, self.pad_id)

    def long_test_sequences(self, length: int) -> list[np.ndarray]:
        """Extrapolation material: the test regions in the example geometry scaled by f = length / context
        (f x 6100 bases every f x 6050, f x 1000 tokens at the paper preset; the same N limit); windows with fewer
        tokens are dropped."""
        factor = length // self.context
        test = self.split("test")
        scaled = ChromosomeWindows(
            test.regions,
            test.paths,
            factor * self.window_bases,
            factor * self.stride_bases,
            length,
            self.max_n_fraction,
        )
        return [example for example in scaled.all_examples() if len(example) == length]

    def _n_limit_text(self) -> str:
        return f" at most {self.max_n_fraction:.0%} N" if self.max_n_fraction < 1 else ""

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
            "split": self.split_spec,
            "window_bases": self.window_bases,
            "stride_bases": self.stride_bases,
            "max_jitter": self.max_jitter,
            "example_tokens": self.example_tokens,
            "max_n_fraction": self.max_n_fraction,
            "examples": {name: len(self.split(name)) for name in self.split_spec},
        }
