"""The genome split by region (the CPU-scale study's layout), on the real GRCh38 prefix the repository carries.

`tests/data/mirror/hrg/grch38.chr20_and_21_prefix.fa.gz` holds GRCh38 chr20:1-200,000 and chr21:1-5,300,000 under
their own names, so a region names the same bases here as in the whole slice. Counts are recomputed from the
FASTA text with plain Python, not with the suite's window code.
"""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest

from domains.fetch import FetchError
from domains.hrg import HRGDataModule
from domains.hrg.bases import encode_bases
from domains.hrg.regions import Region, parse_split
from domains.hrg.tokenizer import tokenize
from pipelines.experiment.config import compose_config, stored_datamodule
from pipelines.prepare import main as prepare_main
from tests.hrg_fixtures import nt_rule
from tests.sample_fixtures import SAMPLES

PREFIX = SAMPLES / "hrg" / "grch38.chr20_and_21_prefix.fa.gz"
TINY = dict(window_bases=610, stride_bases=605, max_jitter=9, example_tokens=100)
SAMPLE_SPLIT = {"train": ["chr20"], "val": ["chr21:5,010,001-5,150,000"], "test": ["chr21:5,150,001-5,300,000"]}


def fasta_text() -> dict[str, str]:
    """Each record's sequence, upper case, read plainly."""
    records, name = {}, None
    for line in gzip.decompress(PREFIX.read_bytes()).decode().splitlines():
        if line.startswith(">"):
            name = line[1:].split()[0]
            records[name] = []
        else:
            records[name].append(line.strip().upper())
    return {name: "".join(lines) for name, lines in records.items()}


def plain_windows(
    sequence: str, first: int, last: int, window: int, stride: int, max_n: float, tokens: int = 100
) -> list[int]:
    """1-based first bases of the windows of sequence[first..last] (1-based, inclusive) whose example, the window's
    first `tokens` tokens by the plain NT rule, is at most max_n N tokens."""
    starts = []
    start = first
    while start + window - 1 <= last:
        example = nt_rule(sequence[start - 1 : start - 1 + window])[:tokens]
        if example.count("N") <= max_n * len(example):
            starts.append(start)
        start += stride
    return starts


@pytest.fixture
def sample(tmp_path, monkeypatch):
    """The repository's mirror, an empty data folder, and the sample's datamodule at the tiny geometry."""
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    return module()


def module(**kwargs) -> HRGDataModule:
    cfg = compose_config(["domain=hrg", "domain.source=grch38_sample"])
    args = {key: cfg.domain.args[key] for key in ("files", "sha256", "checksums", "max_n_fraction")}
    settings = dict(context=100, batch_size=4, eval_batch_size=8, seed=0, split=SAMPLE_SPLIT, **TINY, **args)
    return HRGDataModule(**{**settings, **kwargs})


# ---- regions ---------------------------------------------------------------------------------------------------
def test_a_region_reads_as_ucsc_writes_it_and_back():
    region = Region.parse("chr21:5,010,001-7,500,000")
    assert (region.chromosome, region.start, region.end) == ("chr21", 5_010_000, 7_500_000)
    assert str(region) == "chr21:5,010,001-7,500,000" and Region.parse(str(region)) == region
    assert Region.parse("chr21:1-10") == Region("chr21", 0, 10) and Region.parse("chr20") == Region("chr20")
    assert region.bounds(10_000_000) == (5_010_000, 7_500_000)
    for bad in ("chr21:0-10", "chr21:10-9", "chr21:5-", "chr 21", ""):
        with pytest.raises(ValueError, match="not a region|1 <= first <= last"):
            Region.parse(bad)
    with pytest.raises(ValueError, match=r"chr21:1-20 runs past the end of chr21, which has 10 bases"):
        Region.parse("chr21:1-20").bounds(10)


def test_a_test_region_that_shares_a_base_with_training_is_refused_by_name():
    parse_split({"train": ["chr21:1-100"], "val": [], "test": ["chr21:101-200"]})  # adjacent: no shared base
    for train, test in (("chr21:1-101", "chr21:101-200"), ("chr21", "chr21:150-160"), ("chr21:150-160", "chr21")):
        with pytest.raises(ValueError, match=rf"train region {train}.*test region {test} share bases"):
            parse_split({"train": [train], "val": [], "test": [test]})


# ---- preparation of the real prefix ----------------------------------------------------------------------------
def test_the_sample_splits_by_region_with_exact_counts(sample):
    meta = sample.prepare_data()
    text = fasta_text()
    assert {name: len(seq) for name, seq in text.items()} == {"chr20": 200_000, "chr21": 5_300_000}
    expected = {}
    for split, (entry,) in SAMPLE_SPLIT.items():
        chromosome, _, span = entry.partition(":")
        first, last = (int(x.replace(",", "")) for x in span.split("-")) if span else (1, len(text[chromosome]))
        stretch = text[chromosome][first - 1 : last]
        kept = plain_windows(text[chromosome], first, last, 610, 605, 0.5)
        every = plain_windows(text[chromosome], first, last, 610, 605, 1.0)
        expected[split] = {
            "regions": [{"region": entry, "bases": len(stretch), "non_n_bases": len(stretch) - stretch.count("N")}],
            "bases": len(stretch),
            "non_n_bases": len(stretch) - stretch.count("N"),
            "examples": len(kept),
            "windows_over_n_limit": len(every) - len(kept),
        }
    assert meta["splits"] == expected
    # the figures themselves, so that a change in the rule shows here: chr20 starts with 60,000 N, the test region
    # holds the 50 kb gap at chr21:5,166,247-5,216,246
    assert [expected[s]["examples"] for s in ("train", "val", "test")] == [229, 231, 164]
    assert [expected[s]["windows_over_n_limit"] for s in ("train", "val", "test")] == [101, 0, 83]
    assert meta["verified_sha256"] == {PREFIX.name: "f52000879ad6ccadfe690168ec9edd5d0a7deb1381b5c88fd38166639bcb50cf"}
    assert meta["not_grch38"] == {"chr20": [200_000, 64_444_167], "chr21": [5_300_000, 46_709_983]}


def test_every_example_is_its_coordinates_bases_tokenised(sample):
    sample.prepare_data()
    text = fasta_text()
    for split, (entry,) in SAMPLE_SPLIT.items():
        region = Region.parse(entry)
        chromosome = region.chromosome
        start, last = region.bounds(len(text[chromosome]))
        first = start + 1
        starts = plain_windows(text[chromosome], first, last, 610, 605, 0.5)
        windows = sample.split(split)
        assert len(windows) == len(starts)
        for index in (0, len(starts) // 2, len(starts) - 1):
            assert windows.locate(index) == (0, starts[index] - 1)
            letters = text[chromosome][starts[index] - 1 : starts[index] - 1 + 610]
            want = tokenize(encode_bases(np.frombuffer(letters.encode(), dtype=np.uint8)))[:100]
            assert np.array_equal(windows.example(index), want), (split, index)
            rendered = sample.render_example(split, index, 2)
            assert f"{split}[{index}]: {chromosome}:{starts[index]}-{starts[index] + 609} " in rendered
        tokens = np.concatenate(windows.all_examples())
        assert np.array_equal(tokens, np.concatenate([windows.example(i) for i in range(len(windows))]))


def test_a_training_window_is_clipped_at_its_regions_end(sample):
    sample.prepare_data()
    inner = module(split={"train": ["chr21:5,100,001-5,101,300"], "val": [], "test": ["chr21:5,200,001-5,300,000"]})
    inner.prepare_data()
    train = inner.split("train")
    assert len(train) == 2 and train.locate(1) == (0, 5_100_605)
    codes = train.window_codes(1, jitter=9)  # would reach base 5,101,224 of 5,101,300: inside
    assert len(codes) == 610
    region_end = train.bounds[0][1]
    assert region_end == 5_101_300 and train.locate(1)[1] + 9 + 610 <= region_end
    tight = module(split={"train": ["chr21:5,100,001-5,101,220"], "val": [], "test": ["chr21:5,200,001-5,300,000"]})
    tight.prepare_data()
    assert len(tight.split("train")) == 2
    assert len(tight.split("train").window_codes(1, jitter=9)) == 5_101_220 - 5_100_605 - 9  # stops at the region


def test_extrapolation_windows_keep_the_regions_and_the_n_limit(sample):
    sample.prepare_data()
    text = fasta_text()
    long = sample.long_test_sequences(200)  # factor 2: 1,220 bases every 1,210
    starts = plain_windows(text["chr21"], 5_150_001, 5_300_000, 1220, 1210, 0.5, tokens=200)
    letters = [text["chr21"][s - 1 : s - 1 + 1220] for s in starts]
    tokens = [tokenize(encode_bases(np.frombuffer(x.encode(), dtype=np.uint8)))[:200] for x in letters]
    want = [t for t in tokens if len(t) == 200]
    assert len(long) == len(want) > 0 and all(np.array_equal(a, b) for a, b in zip(long, want, strict=True))


def test_a_test_region_without_a_scorable_window_is_refused_and_the_store_kept(sample):
    sample.prepare_data()
    store = sample.store
    before = (store / "meta.json").read_bytes()
    gap = {"train": ["chr20"], "val": [], "test": ["chr21:5,166,247-5,216,246"]}  # inside the 50 kb gap
    with pytest.raises(ValueError, match=r"chr21:5,166,247-5,216,246 \(test split, .*\) is all N: none of its 50,000"):
        module(split=gap).prepare_data()
    edge = {"train": ["chr20"], "val": [], "test": ["chr21:5,009,001-5,010,300"]}  # 1,000 N then 300 bases
    with pytest.raises(ValueError, match=r"test split \(chr21:5,009,001-5,010,300\): no scorable window: 2 full "):
        module(split=edge).prepare_data()
    assert (store / "meta.json").read_bytes() == before


def test_a_file_that_is_not_the_one_its_sha256_names_is_refused_and_the_copy_kept(sample, tmp_path, monkeypatch):
    sample.prepare_data()
    local = tmp_path / "data" / "raw" / "hrg" / PREFIX.name
    good = local.read_bytes()
    mirror = tmp_path / "mirror" / "hrg"
    mirror.mkdir(parents=True)
    changed = bytearray(PREFIX.read_bytes())
    changed[-20] ^= 1
    (mirror / PREFIX.name).write_bytes(bytes(changed))
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    with pytest.raises(FetchError, match=rf"{PREFIX.name}: sha256 [0-9a-f]{{64}}, expected f52000879ad6"):
        module().prepare_data()
    assert local.read_bytes() == good


def test_the_cpu_preset_takes_the_slice_and_the_command_prints_its_counts(sample, capsys, tmp_path):
    cpu = compose_config(["domain=hrg", "preset=cpu"])
    assert cpu.domain.source == "grch38_slice" and cpu.domain.args.max_n_fraction == 0.5
    assert list(cpu.domain.args.split.test) == ["chr21:7,500,001-10,000,000"]
    assert compose_config(["domain=hrg", "preset=paper"]).domain.args.split.test == ["chr22"]
    assert stored_datamodule("hrg", ["preset=cpu"]).raw_files()[0].sha256 == (
        "80acabb9ad2c4cddb7b976101894c7b66d29536a7f8a5889f152acf2511b5657"
    )
    assert prepare_main(["--domain", "hrg", "domain.source=grch38_sample"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads(printed[: printed.index("\n}") + 2])
    assert [summary["splits"][s]["examples"] for s in ("train", "val", "test")] == [229, 231, 164]
    shutil.rmtree(tmp_path / "data")


def test_the_protocols_command_on_a_mirror_of_slices_says_which_source_to_name(sample, capsys):
    assert prepare_main(["--domain", "hrg"]) == 2  # tiny: the protocol's source, whose md5sum.txt is not here
    error = capsys.readouterr().err
    assert "hrg/md5sum.txt: not in the mirror" in error and "`make data-hrg ARGS=preset=cpu`" in error
