"""The HRG domain: the NT 6-mer tokenizer, preparation from FASTA (real chrM, generated chromosomes), examples."""

from __future__ import annotations

import csv
import gzip
import hashlib
import itertools
import json
import logging
import os
import pickle
import re
import shutil

import numpy as np
import pytest
import torch

from domains.base import windows_from_examples
from domains.fetch import FetchError
from domains.hrg import HRGDataModule
from domains.hrg.bases import encode_bases
from domains.hrg.generated import write_generated_fasta
from domains.hrg.genome import GRCH38_LENGTHS, GenomeFileError, fasta_index
from domains.hrg.tokenizer import N_ID, PAD_ID, VOCAB, VOCAB_SIZE, tokenize, tokenize_windows
from domains.hrg.windows import example_count
from domains.stored import ExampleSplit, TokenStoreDataModule
from pipelines.experiment.config import build_datamodule, compose_config
from pipelines.experiment.training import train_and_evaluate
from pipelines.samples import main as samples_main
from tests.hrg_fixtures import (
    SMALL_LENGTHS,
    SMALL_SPLIT,
    chromosome_letters,
    fasta_record,
    nt_rule,
    split_overrides,
    write_mirror,
)
from tests.sample_fixtures import SAMPLES

CHRM = SAMPLES / "hrg" / "GRCh38_chrM.fa"
TINY = dict(window_bases=610, stride_bases=605, max_jitter=9, example_tokens=100)


def letters_text(letters: np.ndarray) -> str:
    """Upper case, every letter outside ACGT as N: what the store keeps, as text."""
    text = bytes(letters).decode().upper()
    return "".join(c if c in "ACGT" else "N" for c in text)


def module(**kwargs) -> HRGDataModule:
    settings = dict(context=100, batch_size=4, eval_batch_size=8, seed=0, split=SMALL_SPLIT, **TINY)
    return HRGDataModule(**{**settings, **kwargs})


@pytest.fixture
def env(tmp_path, monkeypatch):
    """An empty data folder and a mirror folder, both in tmp_path."""
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    return tmp_path


@pytest.fixture
def mirror(env):
    """Generated chr1, chr2, chr21, chr22 as UCSC lays them out (.fa.gz + md5sum.txt); returns their letters."""
    return write_mirror(env / "mirror", SMALL_LENGTHS, seed=3)


# ---- tokenizer -------------------------------------------------------------------------------------------------
def test_vocabulary_has_spec_ids_in_order():
    assert VOCAB_SIZE == len(VOCAB) == 4107 and len(set(VOCAB)) == 4107
    assert VOCAB[:6] == ("<unk>", "<pad>", "<mask>", "<cls>", "<eos>", "<bos>") and PAD_ID == 1
    assert VOCAB[6:4102] == tuple("".join(p) for p in itertools.product("ATCG", repeat=6))
    assert (VOCAB[6], VOCAB[7], VOCAB[10], VOCAB[4101]) == ("AAAAAA", "AAAAAT", "AAAATA", "GGGGGG")
    assert VOCAB[4102:] == ("A", "T", "C", "G", "N") and N_ID == 4106


def test_bases_are_uppercased_and_other_letters_become_n():
    assert letters_text(np.frombuffer(b"acgtNnRYkmswbdhvACGT", np.uint8)) == "ACGTNNNNNNNNNNNNACGT"
    assert encode_bases("acgtNnRYACGT").tolist() == [0, 2, 3, 1, 4, 4, 4, 4, 0, 2, 3, 1]
    with pytest.raises(ValueError, match=r"b'-' at position 3 is not a base letter"):
        encode_bases("ACG-T")


def test_tokenizer_equals_the_plain_rule_on_random_sequences_with_ns():
    rng = np.random.default_rng(0)
    cases = ["", "N", "NNN", "A", "ACGTA", "ACGTAC", "ACGTACG", "NACGTACN", "AAAAAAAAAAAANNT"]
    for _ in range(400):
        length = int(rng.integers(0, 80))
        p_n = float(rng.choice([0.0, 0.05, 0.3, 0.9]))
        cases.append("".join(rng.choice(list("ATCGN"), length, p=[(1 - p_n) / 4] * 4 + [p_n])))
    for sequence in cases:
        assert [VOCAB[t] for t in tokenize(encode_bases(sequence))] == nt_rule(sequence), sequence


def test_windows_are_tokenised_each_on_its_own_and_truncated():
    rng = np.random.default_rng(1)
    for truncate in (None, 5, 30):
        windows = rng.choice(5, size=(40, 61), p=[0.24, 0.24, 0.24, 0.24, 0.04]).astype(np.uint8)
        windows[3] = 4  # a window of N only
        tokens, offsets = tokenize_windows(windows, truncate)
        assert len(offsets) == 41
        for i, window in enumerate(windows):
            want = nt_rule("".join("ATCGN"[c] for c in window))[:truncate]
            assert [VOCAB[t] for t in tokens[offsets[i] : offsets[i + 1]]] == want


# ---- examples --------------------------------------------------------------------------------------------------
def test_example_count_formula():
    assert example_count(50_818_468, 6100, 6050) == 8399  # chr22: SPEC's test N
    assert example_count(GRCH38_LENGTHS["chr22"], 6100, 6050) == 8399
    rng = np.random.default_rng(2)
    for length in [0, 6099, 6100, 6101, 12149, 12150, *rng.integers(0, 200_000, 50).tolist()]:
        starts = range(0, length - 6100 + 1, 6050)  # every start whose full window fits
        assert example_count(length, 6100, 6050) == len(starts)


def test_window_starts_overlap_and_eval_tokens(mirror):
    dm = module()
    dm.prepare_data()
    test = dm.split("test")
    length = SMALL_LENGTHS["chr22"]
    assert len(test) == example_count(length, 610, 605) == 10
    assert [test.locate(i) for i in range(len(test))] == [(0, 605 * i) for i in range(10)]
    codes = encode_bases(mirror["chr22"])
    windows = dm.eval_windows("test")
    for i in range(len(test)):
        start = 605 * i
        assert np.array_equal(test.window_codes(i), codes[start : start + 610])
        if i:  # 5 bases of overlap with the previous window
            assert np.array_equal(test.window_codes(i)[:5], test.window_codes(i - 1)[-5:])
        want = [VOCAB.index(t) for t in nt_rule(letters_text(mirror["chr22"][start : start + 610]))][:100]
        assert windows.tokens[i].tolist() == want  # evaluation: no jitter, first 100 tokens
        assert windows.scored[i].sum() == 99
    assert windows.n_examples == 10 and len(windows) == 10
    # train examples run over chr1 then chr2
    train = dm.split("train")
    assert len(train) == example_count(7_000, 610, 605) + example_count(5_333, 610, 605)
    assert train.locate(example_count(7_000, 610, 605)) == (1, 0)


def test_eval_examples_scores_evenly_spaced_windows(mirror):
    full = module()
    full.prepare_data()
    expected = [full.split("test").example(i) for i in (0, 4, 9)]  # 3 of chr22's 10, first to last
    windows = module(eval_examples=3).eval_windows("test")
    assert windows.digest() == windows_from_examples(expected, 100, 50, PAD_ID).digest()


def test_extrapolation_windows_scale_the_example_geometry(mirror):
    """test_2x: windows of 2 x 610 bases every 2 x 605 over chr22, each the NT rule's first 200 tokens."""
    dm = module(extrapolation=[2])
    dm.prepare_data()
    assert dm.eval_split_names == ("test", "test_2x")
    windows = dm.eval_windows("test_2x")
    assert windows.n_examples == example_count(SMALL_LENGTHS["chr22"], 1220, 1210) == 5
    for i in range(5):
        start = 1210 * i
        want = [VOCAB.index(t) for t in nt_rule(letters_text(mirror["chr22"][start : start + 1220]))][:200]
        assert windows.tokens[i].tolist() == want and windows.scored[i].sum() == 199


def test_jitter_only_in_training_and_identical_for_one_seed(mirror):
    dm, twin = module(), module()
    dm.prepare_data()
    train = dm.split("train")
    codes = [encode_bases(mirror[c]) for c in ("chr1", "chr2")]
    seen = set()
    for i in range(300):
        tokens, scored = dm.draw_train_window(np.random.default_rng([0, i]))
        again, _ = twin.draw_train_window(np.random.default_rng([0, i]))
        assert np.array_equal(tokens, again)
        rng = np.random.default_rng([0, i])  # the same draws, restated: example, then jitter 0..9
        index, jitter = int(rng.integers(len(train))), int(rng.integers(10))
        chromosome, start = train.locate(index)
        piece = codes[chromosome][start + jitter : start + jitter + 610]
        assert tokens.tolist() == tokenize(piece)[:100].tolist()
        assert scored.tolist() == [False] + [True] * 99
        seen.add(jitter)
    assert seen == set(range(10))


def test_a_split_pickles_without_its_arrays(mirror):
    dm = module()
    dm.prepare_data()
    train = dm.split("train")
    copy = pickle.loads(pickle.dumps(train))  # what a spawned loader worker receives
    assert len(pickle.dumps(train)) < 5_000 and copy._bases is None
    assert np.array_equal(copy.example(7, jitter=3), train.example(7, jitter=3))


def test_splits_are_example_splits_of_the_stored_base_class(mirror):
    dm = module()
    meta = dm.prepare_data()
    for name in ("train", "val", "test"):
        split = dm.split(name)
        assert isinstance(split, ExampleSplit) and len(split) == meta["splits"][name]["examples"]
        assert isinstance(split.example(len(split) - 1), np.ndarray)
    with pytest.raises(ValueError, match=r"unknown split 'dev'; valid: \('train', 'val', 'test'\)"):
        dm.split("dev")
    assert not isinstance(dm, TokenStoreDataModule) and not hasattr(dm, "build_splits")  # no token-array hook
    assert dm.amount_unit == "bases" and dm.prepared_amount(meta) == sum(SMALL_LENGTHS.values())


def test_every_encoding_sees_the_same_training_batches(mirror, env):
    batches = []
    for pe in ("rope10k", "nope"):
        dm = build_datamodule(compose_config(["domain=hrg", f"pe={pe}", *split_overrides()]))
        dm.prepare_data()
        loader = iter(dm.train_dataloader())
        batches.append([next(loader) for _ in range(2)])
    for a, b in zip(*batches, strict=True):
        assert torch.equal(a["tokens"], b["tokens"])
    assert not torch.equal(batches[0][0]["tokens"], batches[0][1]["tokens"])


def test_samples_command_prints_bases_and_6mers(mirror, capsys):
    assert samples_main(["--domain", "hrg", "--n", "2", "--max-tokens", "3", *split_overrides()]) == 0
    printed = capsys.readouterr().out
    text = letters_text(mirror["chr22"])
    assert f"test[1]: chr22:606-1215 (610 bases, {text[605:1215].count('N')} N; 100 tokens)" in printed
    assert f"bases:  {text[605:665]}..." in printed
    assert f"tokens: {' '.join(nt_rule(text[605:1215])[:3])} ..." in printed


# ---- preparation -------------------------------------------------------------------------------------------------
def test_real_chrm_sample(env, monkeypatch):
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    dm = module(
        split={"train": ["chrM"], "val": ["chrM"], "test": []}, file_pattern="GRCh38_{chrom}.fa", checksums=None
    )
    meta = dm.prepare_data()
    assert meta["chromosomes"]["chrM"] == {
        "file": "GRCh38_chrM.fa",
        "length": 16569,
        "n": 1,
        "iupac": 0,
        "lowercase": 418,
    }
    assert meta["grch38"] is True  # chrM's GRCh38 length
    assert meta["raw_sha256"] == {"GRCh38_chrM.fa": hashlib.sha256(CHRM.read_bytes()).hexdigest()}
    bases = np.load(env / "data" / "stores" / "hrg" / "bases" / "chrM.npy")
    assert np.flatnonzero(bases == 4).tolist() == [3106]  # the rCRS placeholder N at 3107
    text = "".join(np.array(list("ATCGN"))[bases])
    assert hashlib.md5(text.encode()).hexdigest() == "c68f52674c9fb33aef52dcf399755519"  # GRCh38 chrM's M5
    raw_fai = env / "data" / "raw" / "hrg" / "GRCh38_chrM.fa.fai"
    assert raw_fai.read_text() == (SAMPLES / "hrg" / "GRCh38_chrM.fa.fai").read_text()
    assert meta["splits"]["train"]["examples"] == example_count(16569, 610, 605) == 27
    tokens = dm.split("train").example(5)  # window 5 holds base 3107, the N
    assert VOCAB[N_ID] in [VOCAB[t] for t in tokens] and len(tokens) == 100
    rendered = dm.render_example("train", 0, 4)
    assert "chrM:1-610" in rendered and f"bases:  {text[:60]}..." in rendered
    assert f"tokens: {text[0:6]} {text[6:12]} {text[12:18]} {text[18:24]} ..." in rendered


def test_generated_chromosomes_are_stored_as_codes_with_counts(mirror, env):
    meta = module().prepare_data()
    store = env / "data" / "stores" / "hrg"
    for name, letters in mirror.items():
        codes = np.load(store / "bases" / f"{name}.npy", mmap_mode="r")
        assert np.array_equal(codes, encode_bases(letters)), name
        upper = np.char.upper(letters.view("S1"))
        assert meta["chromosomes"][name] == {
            "file": f"{name}.fa.gz",
            "length": len(letters),
            "n": int((~np.isin(upper, [b"A", b"C", b"G", b"T"])).sum()),
            "iupac": int((~np.isin(upper, [b"A", b"C", b"G", b"T", b"N"])).sum()),
            "lowercase": int(np.char.islower(letters.view("S1")).sum()),
        }
        facts = meta["chromosomes"][name]  # the generator put in all three
        assert facts["lowercase"] > 0 and facts["n"] >= 200 and facts["iupac"] > 0
    assert meta["splits"]["test"] == {"chromosomes": ["chr22"], "bases": 6160, "examples": 10}
    assert meta["grch38"] is False and meta["not_grch38"]["chr22"] == [6160, 50_818_468]
    raw = env / "mirror" / "hrg"
    assert meta["raw_sha256"] == {
        f"{c}.fa.gz": hashlib.sha256((raw / f"{c}.fa.gz").read_bytes()).hexdigest() for c in mirror
    }
    plain = (env / "data" / "raw" / "hrg" / "chr22.fa").read_bytes()
    assert plain == gzip.decompress((raw / "chr22.fa.gz").read_bytes())  # plain FASTA beside the download


def test_multi_record_plain_fasta_with_crlf_lines(env):
    letters = {name: chromosome_letters(5, name, length) for name, length in SMALL_LENGTHS.items()}
    records = [
        fasta_record(n, s, width, b"\r\n") for (n, s), width in zip(letters.items(), (61, 13, 70, 7), strict=True)
    ]
    (env / "mirror" / "hrg").mkdir(parents=True)
    (env / "mirror" / "hrg" / "genome.fa").write_bytes(b"".join(records))
    dm = module(file_pattern="genome.fa", checksums=None)
    meta = dm.prepare_data()
    assert list(meta["raw_sha256"]) == ["genome.fa"]
    for name, seq in letters.items():
        assert np.array_equal(np.load(dm.bases_path(name)), encode_bases(seq)), name


def test_preparation_is_idempotent_and_incremental(mirror, env):
    store = env / "data" / "stores" / "hrg"
    module(split={"train": ["chr1"], "val": ["chr21"], "test": ["chr22"]}).prepare_data()
    stamps = {p.name: p.stat().st_mtime_ns for p in [store / "meta.json", *(store / "bases").iterdir()]}
    assert "chr2.npy" not in stamps
    module(split={"train": ["chr1"], "val": ["chr21"], "test": ["chr22"]}).prepare_data()
    assert {p.name: p.stat().st_mtime_ns for p in [store / "meta.json", *(store / "bases").iterdir()]} == stamps

    module().prepare_data()  # chr2 joins: only it is encoded
    assert (store / "bases" / "chr2.npy").exists()
    for name in ("chr1.npy", "chr21.npy", "chr22.npy"):
        assert (store / "bases" / name).stat().st_mtime_ns == stamps[name]

    new = chromosome_letters(9, "chr22", 7_000)  # a changed mirror file: chr22 is rebuilt from it
    replace_in_mirror(env, "chr22.fa.gz", gzip.compress(fasta_record("chr22", new, 60)))
    meta = module().prepare_data()
    assert meta["chromosomes"]["chr22"]["length"] == 7_000
    assert np.array_equal(np.load(store / "bases" / "chr22.npy"), encode_bases(new))
    assert (store / "bases" / "chr1.npy").stat().st_mtime_ns == stamps["chr1.npy"]


def test_missing_or_stale_fai_is_rebuilt(tmp_path):
    fasta = tmp_path / "two.fa"
    first, second = chromosome_letters(1, "chrA", 1000), chromosome_letters(1, "chrB", 777)
    fasta.write_bytes(fasta_record("chrA", first, 60) + fasta_record("chrB", second, 61))
    fai = tmp_path / "two.fa.fai"
    records = fasta_index(fasta)  # missing: built
    good = fai.read_text()
    assert good.splitlines()[1].split("\t")[:2] == ["chrB", "777"]
    assert records["chrA"].length == 1000 and records["chrB"].line_bases == 61
    fai.write_text("chrA\t1000\t40\t70\t71\nchrB\t777\t1100\t61\t62\n")  # newer than the FASTA, wrong offsets
    assert fasta_index(fasta) == records and fai.read_text() == good
    fai.write_text("chrA\t1000\t35\t60\t61\n")  # right for chrA but chrB is missing
    assert fasta_index(fasta) == records and fai.read_text() == good
    old = fasta.stat().st_mtime_ns - 10**9
    os.utime(fai, ns=(old, old))  # older than the FASTA
    assert fasta_index(fasta) == records and fai.stat().st_mtime_ns > old


def test_stale_fai_in_the_raw_folder_is_rebuilt_before_encoding(env):
    letters = {name: chromosome_letters(2, name, length) for name, length in SMALL_LENGTHS.items()}
    (env / "mirror" / "hrg").mkdir(parents=True)
    for name, seq in letters.items():
        (env / "mirror" / "hrg" / f"{name}.fa").write_bytes(fasta_record(name, seq, 50))
    dm = module(file_pattern="{chrom}.fa", checksums=None)
    dm.prepare_data()
    shutil.rmtree(env / "data" / "stores")
    (env / "data" / "raw" / "hrg" / "chr22.fa.fai").write_text("chr22\t6160\t41\t60\t61\n")  # wrong geometry
    module(file_pattern="{chrom}.fa", checksums=None).prepare_data()
    assert np.array_equal(np.load(dm.bases_path("chr22")), encode_bases(letters["chr22"]))


# ---- bad input -----------------------------------------------------------------------------------------------------
def test_a_file_that_is_not_fasta_fails_naming_it(env):
    (env / "mirror" / "hrg").mkdir(parents=True)
    for name in SMALL_LENGTHS:
        (env / "mirror" / "hrg" / f"{name}.fa").write_text("<html>404 Not Found</html>\n")
    with pytest.raises(GenomeFileError, match=r"raw/hrg/chr1\.fa: not a FASTA file .*expected a '>' header"):
        module(file_pattern="{chrom}.fa", checksums=None).prepare_data()


def replace_in_mirror(env, name: str, data: bytes) -> None:
    """Put `data` in the mirror as `name` and give md5sum.txt its md5 (a file that passes the md5 check)."""
    (env / "mirror" / "hrg" / name).write_bytes(data)
    table = env / "mirror" / "hrg" / "md5sum.txt"
    lines = [ln for ln in table.read_text().splitlines() if not ln.endswith(f"  {name}")]
    table.write_text("".join(f"{ln}\n" for ln in [*lines, f"{hashlib.md5(data).hexdigest()}  {name}"]))


def test_html_instead_of_gzip_fails_naming_file_and_chromosome(mirror, env):
    replace_in_mirror(env, "chr21.fa.gz", b"<html>Service unavailable</html>")
    with pytest.raises(FetchError, match=r"chr21\.fa\.gz \(chr21\.fa\.gz holding chr21\): not gzip data"):
        module().prepare_data()


def test_md5_mismatch_fails_and_removes_the_file(mirror, env):
    (env / "mirror" / "hrg" / "chr21.fa.gz").write_bytes(gzip.compress(fasta_record("chr21", mirror["chr22"], 60)))
    with pytest.raises(FetchError, match=r"chr21\.fa\.gz holding chr21\): md5 [0-9a-f]{32}, md5sum\.txt expects"):
        module().prepare_data()
    assert not (env / "data" / "raw" / "hrg" / "chr21.fa.gz").exists()  # a re-run fetches it again


def test_absent_chromosome_fails_naming_file_chromosome_and_expectation(env, mirror):
    with pytest.raises(FetchError, match=r"chromosome chr5: .*mirror/hrg/chr5\.fa\.gz: not in the mirror"):
        module(split={"train": ["chr5"], "val": ["chr21"], "test": ["chr22"]}).prepare_data()
    genome = fasta_record("chr1", mirror["chr1"], 60) + fasta_record("chr2", mirror["chr2"], 60)
    (env / "mirror" / "hrg" / "genome.fa").write_bytes(genome)
    with pytest.raises(GenomeFileError, match=r"genome\.fa: no record named chr21 \(records: chr1, chr2\); expected"):
        module(file_pattern="genome.fa", checksums=None).prepare_data()


def test_truncated_gzip_fails_naming_file_and_chromosome_and_is_removed(mirror, env):
    gz = (env / "mirror" / "hrg" / "chr22.fa.gz").read_bytes()
    replace_in_mirror(env, "chr22.fa.gz", gz[: len(gz) // 2])  # even with a matching md5, gzip's framing tells
    with pytest.raises(
        FetchError, match=r"chr22\.fa\.gz \(chr22\.fa\.gz holding chr22\): gzip stream ends .* truncated"
    ):
        module().prepare_data()
    assert not (env / "data" / "raw" / "hrg" / "chr22.fa.gz").exists()  # a re-run fetches it again
    assert not (env / "data" / "raw" / "hrg" / "chr22.fa").exists()
    assert not (env / "data" / "stores" / "hrg" / "meta.json").exists()


def test_a_corrupt_mirror_file_fails_naming_it_and_keeps_the_good_local_copy(mirror, env):
    meta = module().prepare_data()
    raw = env / "data" / "raw" / "hrg"
    before = {path.name: path.read_bytes() for path in raw.glob("chr21.*")}
    source = env / "mirror" / "hrg" / "chr21.fa.gz"
    source.write_bytes(source.read_bytes()[:-100])  # truncated: md5sum.txt still has the whole file's md5
    with pytest.raises(FetchError, match=rf"chromosome chr21: {source} \(chr21\.fa\.gz holding chr21\): md5 "):
        module().prepare_data()
    assert {path.name: path.read_bytes() for path in raw.glob("chr21.*")} == before
    assert module().meta == meta


def test_a_failed_re_prepare_leaves_the_codes_and_meta_as_they_were(mirror, env):
    module().prepare_data()
    store = env / "data" / "stores" / "hrg"
    before = {path: path.read_bytes() for path in store.rglob("*") if path.is_file()}
    # chr1 changes (encoded first), then chr22's new file fails its gzip check: nothing of chr1's may land
    replace_in_mirror(env, "chr1.fa.gz", gzip.compress(fasta_record("chr1", chromosome_letters(8, "chr1", 6_500), 60)))
    gz = gzip.compress(fasta_record("chr22", chromosome_letters(8, "chr22", 6_500), 60))
    replace_in_mirror(env, "chr22.fa.gz", gz[: len(gz) // 2])
    with pytest.raises(FetchError, match=r"chr22\.fa\.gz \(chr22\.fa\.gz holding chr22\): gzip stream ends"):
        module().prepare_data()
    assert {path: path.read_bytes() for path in store.rglob("*") if path.is_file()} == before
    assert sorted(path.name for path in store.iterdir()) == ["bases", "meta.json"]  # no staging folder left


def test_damaged_codes_are_named_when_read_and_encoded_again_by_prepare(mirror, env, caplog):
    module().prepare_data()
    bases = env / "data" / "stores" / "hrg" / "bases"
    codes = bases / "chr22.npy"
    good, stamp = codes.read_bytes(), (bases / "chr1.npy").stat().st_mtime_ns
    codes.write_bytes(good[:-100])  # truncated
    with pytest.raises(ValueError, match=rf"^{re.escape(str(codes))}: unreadable base codes .*make data-hrg"):
        module().split("test")
    with caplog.at_level(logging.WARNING, logger="posbench.hrg"):
        module().prepare_data()
    assert f"{codes}: {len(good) - 100} bytes, its record says {len(good)}; encoding chr22 again" in caplog.text
    assert codes.read_bytes() == good and (bases / "chr1.npy").stat().st_mtime_ns == stamp
    codes.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # the same size: its sha256 tells
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="posbench.hrg"):
        module().prepare_data()
    assert f"{codes}: sha256 differs from its record's; encoding chr22 again" in caplog.text
    assert codes.read_bytes() == good


def test_an_md5_table_that_is_not_text_fails_naming_it_and_is_not_copied(mirror, env):
    module().prepare_data()
    local = env / "data" / "raw" / "hrg" / "md5sum.txt"
    good = local.read_bytes()
    table = env / "mirror" / "hrg" / "md5sum.txt"
    table.write_bytes(gzip.compress(good))  # a gzipped table where the text belongs
    with pytest.raises(GenomeFileError, match=rf"^{re.escape(str(table))}: not text .*expected an md5 table"):
        module().prepare_data()
    assert local.read_bytes() == good


def test_a_generated_fasta_that_fails_midway_leaves_no_file(tmp_path):
    path = tmp_path / "big.fa"
    with pytest.raises(TypeError):
        write_generated_fasta(path, {"chrA": 100, "chrB": 100}, seed=0, no_such_option=1)
    assert list(tmp_path.iterdir()) == []


def test_md5_table_without_the_file_fails(mirror, env):
    table = env / "mirror" / "hrg" / "md5sum.txt"
    table.write_text("".join(ln + "\n" for ln in table.read_text().splitlines() if "chr21" not in ln))
    with pytest.raises(FetchError, match=r"md5sum\.txt: no line for chr21\.fa\.gz \(chr21\.fa\.gz holding chr21\)"):
        module().prepare_data()


def test_a_byte_that_is_not_a_base_fails_naming_the_line(env):
    (env / "mirror" / "hrg").mkdir(parents=True)
    for name, length in SMALL_LENGTHS.items():
        record = bytearray(fasta_record(name, chromosome_letters(0, name, length), 60))
        if name == "chr2":
            record[len(f">{name} generated for posbench tests\n") + 61 * 3 + 7] = ord("*")
        (env / "mirror" / "hrg" / f"{name}.fa").write_bytes(bytes(record))
    with pytest.raises(GenomeFileError, match=r"chr2\.fa \(chr2\): byte b'\*' at base 188 \(line 4 of the record\)"):
        module(file_pattern="{chrom}.fa", checksums=None).prepare_data()


# ---- a tiny-preset run ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_tiny_preset_run_writes_per_example_test_nll(mirror, env):
    cfg = compose_config(
        [
            "domain=hrg",
            f"runs_root={env / 'runs'}",
            *split_overrides(),
            "trainer.max_steps=4",
            "trainer.val_every=2",
            "trainer.ckpt_every=2",
            "trainer.batch_size=4",
        ]
    )
    folder = train_and_evaluate(cfg)
    assert folder == env / "runs" / "hrg" / "rope10k" / "seed0"
    with open(folder / "metrics" / "test.per_example.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == example_count(SMALL_LENGTHS["chr22"], 610, 605) == 10
    assert all(int(r["tokens"]) == 99 and 0 < float(r["nll"]) < 20 for r in rows)
    manifest = json.loads((folder / "manifest.json").read_text())
    sha = hashlib.sha256((env / "mirror" / "hrg" / "chr22.fa.gz").read_bytes()).hexdigest()
    assert manifest["data_hashes"]["raw/chr22.fa.gz"] == sha and "eval/test" in manifest["data_hashes"]
    assert manifest["data"]["examples"] == {"train": 19, "val": 5, "test": 10}
