"""Preparing the whole MAESTRO set (issue 32, section 1), on the repository's sample: progress while tokenising,
resumption after an interruption (an error, Ctrl-C, kill -9) to the store an uninterrupted run builds, byte for
byte; the store checked against the CSV; the summary `make data-maestro` prints and the preparation record."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import domains.maestro.datamodule as maestro_datamodule
import domains.maestro.tokenizer as maestro_tokenizer
from domains.maestro import MaestroDataModule
from domains.maestro.archive import CSV_NAME, Performance, read_index_file
from domains.maestro.performances import MISSING_REASON, check_against_index
from domains.maestro.preparation import PREPARATION_FILE
from domains.maestro.progress import ProgressOutput, human
from domains.maestro.tokenizer import MidiFile, TokenCache, tokenize_files
from pipelines.prepare import main as prepare_main
from tests.maestro_fixtures import small_maestro_mirror
from tests.sample_fixtures import REPO, SAMPLES

SAMPLE_CSV = SAMPLES / "maestro" / CSV_NAME
PHASES = ["fetch", "hash", "check", "read", "tokenise", "split and chunk", "write"]


def module(**kwargs) -> MaestroDataModule:
    args = {"context": 256, "batch_size": 2, "eval_batch_size": 8, "seed": 0, "tokenize_workers": 1}
    return MaestroDataModule(**{**args, **kwargs})


def store_bytes(store: Path) -> dict[str, bytes]:
    """Every file of a store (meta.json included) but the record of how it was built."""
    return {path.name: path.read_bytes() for path in sorted(store.iterdir()) if path.name != PREPARATION_FILE}


def cache_entries(data: Path) -> list[Path]:
    (folder,) = (data / "raw" / "maestro" / "token_cache").iterdir()  # one tokenizer, one folder
    return sorted(folder.iterdir())


def midi_file(path: Path, name: str | None = None) -> MidiFile:
    data = path.read_bytes()
    return MidiFile(name or path.name, hashlib.sha256(data).hexdigest(), data)


class Interrupted(Exception):
    """Stands for anything that stops a preparation while it tokenises."""


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The sample's store prepared in one go with one process: (data root, meta)."""
    data = tmp_path_factory.mktemp("maestro_whole")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POSBENCH_MIRROR", str(SAMPLES))
        patch.setenv("POSBENCH_DATA", str(data))
        meta = module().prepare_data()
    return data, meta


@pytest.fixture
def sample_env(tmp_path, monkeypatch):
    """A new data root for the sample mirror."""
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


# ---- resumption ------------------------------------------------------------------------------------------------------
def test_an_interrupted_preparation_continued_builds_the_store_of_an_uninterrupted_one(
    whole, sample_env, tmp_path, monkeypatch
):
    """Two processes; an error after the 2nd file is cached stops the pool (the files not started are never
    tokenised), leaves those 2 entries whole and no store; the continuation tokenises the other 9 only, and its
    store is the one-process, uninterrupted store, byte for byte (meta.json included)."""
    started = tmp_path / "started.txt"  # a line per file a worker starts (forked workers see the patch)
    tokenize_or_reason = maestro_tokenizer.tokenize_or_reason

    def logged(data: bytes, tokenizer):
        with open(started, "a") as handle:
            handle.write("started\n")
        return tokenize_or_reason(data, tokenizer)

    cached, put = [], TokenCache.put

    def put_then_fail(self, sha256, result):
        put(self, sha256, result)
        cached.append(sha256)
        if len(cached) == 2:
            raise Interrupted

    monkeypatch.setattr(maestro_tokenizer, "tokenize_or_reason", logged)
    monkeypatch.setattr(TokenCache, "put", put_then_fail)
    with pytest.raises(Interrupted):
        module(tokenize_workers=2).prepare_data()
    # at most the files in flight finish: 2 done, 2 in the workers, 3 in the pool's queue (workers + 1)
    assert 2 <= len(started.read_text().splitlines()) <= 7
    assert [p.name for p in cache_entries(sample_env)] == sorted(f"{sha}.npy" for sha in cached)
    assert all(np.load(p).size for p in cache_entries(sample_env))
    assert not (sample_env / "stores" / "maestro").exists() and not list((sample_env / "stores").glob(".maestro.*-*"))

    monkeypatch.setattr(TokenCache, "put", put)
    dm = module(tokenize_workers=2)
    meta = dm.prepare_data()
    tokenisation = dm.preparation_record()["tokenisation"]
    assert (tokenisation["from_cache"], tokenisation["tokenised"], tokenisation["workers"]) == (2, 9, 2)
    assert meta == whole[1]
    assert store_bytes(dm.store) == store_bytes(whole[0] / "stores" / "maestro")


KILLED_RUN = """
import multiprocessing, os, signal, sys
from pathlib import Path
from domains.maestro.progress import TokenisingProgress
from pipelines.prepare import main

after, signal_name, workers_file = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
# Ctrl-C as a terminal delivers it, whatever this process inherited: a shell starts background jobs with SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler, so the signal below would do nothing
signal.signal(signal.SIGINT, signal.default_int_handler)
update = TokenisingProgress.update

def update_then_signal(self):  # called once a file is cached and counted
    update(self)
    if self.tally.tokenised == after:
        workers_file.write_text(" ".join(str(p.pid) for p in multiprocessing.active_children()))
        os.kill(os.getpid(), getattr(signal, signal_name))

TokenisingProgress.update = update_then_signal
sys.exit(main(["--domain", "maestro", "domain.args.tokenize_workers=2"]))
"""


def run_until_signal(data: Path, after: int, signal_name: str, workers_file: Path) -> tuple[int, str]:
    """`python -m pipelines.prepare --domain maestro` on the sample with two workers, sent `signal_name` by itself
    once it has cached `after` files: its exit status and stderr. The output goes to a file, not a pipe: workers
    that outlived their parent would hold a pipe open, and the run would not end."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "POSBENCH_MIRROR": str(SAMPLES), "POSBENCH_DATA": str(data)}
    env |= {"POSBENCH_PROGRESS": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", KILLED_RUN, str(after), signal_name, str(workers_file)]
    log = workers_file.with_name(f"{signal_name}.log")
    with open(log, "w") as output:
        status = subprocess.run(command, cwd=REPO, env=env, stdout=output, stderr=output, timeout=600).returncode
    return status, log.read_text()


def has_ended(pid: int) -> bool:
    """Whether process `pid` is gone or a zombie (ended, waiting to be reaped by whoever adopted it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the workers end with a killed parent on Linux (prctl)")
def test_ctrl_c_then_kill_9_then_a_continuation_give_the_uninterrupted_store(whole, tmp_path):
    """The command line, interrupted twice: Ctrl-C after 3 files (a clear message, exit 130, 3 entries cached),
    then kill -9 after 3 more (its workers end with it, 6 entries, the half-built store's folder left); the next
    run tokenises the 5 others, removes that folder and builds the uninterrupted store byte for byte."""
    data, workers_file = tmp_path / "data", tmp_path / "workers.txt"
    status, output = run_until_signal(data, 3, "SIGINT", workers_file)
    assert status == 130, output
    assert "interrupted: the store is as it was; run the same command again to continue" in output
    assert re.search(r"^maestro: tokenising: stopped, 3/11 performances;", output, re.MULTILINE)
    assert len(cache_entries(data)) == 3 and not (data / "stores" / "maestro").exists()

    status, output = run_until_signal(data, 3, "SIGKILL", workers_file)
    workers = [int(pid) for pid in workers_file.read_text().split()]
    try:
        assert status == -signal.SIGKILL and len(workers) == 2, output
        for _ in range(300):  # the kernel kills them as their parent dies; wait until they are gone
            if all(has_ended(pid) for pid in workers):
                break
            time.sleep(0.1)
        assert all(has_ended(pid) for pid in workers), "a tokenising worker outlived its killed parent"
    finally:
        for pid in workers:  # a worker that outlived it (the failure above) is not left running
            if not has_ended(pid):
                os.kill(pid, signal.SIGKILL)
    assert re.search(r"^maestro: tokenising 8 of 11 performances .*3 in the cache", output, re.MULTILINE)
    assert len(cache_entries(data)) == 6
    assert len(list((data / "stores").glob(".maestro.building-*"))) == 1 and not (data / "stores" / "maestro").exists()

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POSBENCH_MIRROR", str(SAMPLES))
        patch.setenv("POSBENCH_DATA", str(data))
        dm = module(tokenize_workers=2)
        dm.prepare_data()
    tokenisation = dm.preparation_record()["tokenisation"]
    assert (tokenisation["from_cache"], tokenisation["tokenised"]) == (6, 5)
    assert not list((data / "stores").glob(".maestro.building-*"))
    assert store_bytes(dm.store) == store_bytes(whole[0] / "stores" / "maestro")


# ---- progress --------------------------------------------------------------------------------------------------------
def progress_files() -> list[MidiFile]:
    """The sample's three smallest performances and a file that is not MIDI (15 bytes: the smallest)."""
    smallest = sorted((SAMPLES / "maestro").rglob("*.midi"), key=lambda p: p.stat().st_size)[:3]
    bad = b"not a MIDI file"
    return [midi_file(p) for p in smallest] + [MidiFile("bad.midi", hashlib.sha256(bad).hexdigest(), bad)]


STATUS = r"(?P<tokens>[\d.]+k?) tokens; [\d.]+ files/s, [\d.]+k? tokens/s; \d+:\d\d elapsed"


def test_progress_in_a_log_is_a_line_per_interval_with_counts_tokens_rates_and_eta(tmp_path):
    """In a log (not a terminal), with a line at every file (every=0): the start, one line per file with the
    time left while files remain, then the end; the largest file first, so the one that fails, 15 bytes, last."""
    files, out = progress_files(), io.StringIO()
    result = tokenize_files(files, TokenCache(tmp_path / "cache"), workers=1, progress=ProgressOutput(out, every=0))
    size = sum(len(f.data) for f in files)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"maestro: tokenising 4 of 4 performances ({human(size)}B of MIDI; 0 in the cache) with 1 worker"
    assert len(lines) == 6
    for done, line in enumerate(lines[1:4], start=1):
        assert re.fullmatch(rf"maestro: tokenising: {done}/4 performances; {STATUS}, ETA \d+:\d\d", line), line
    assert re.fullmatch(rf"maestro: tokenising: 4/4 performances \(1 skipped\); {STATUS}", lines[4]), lines[4]
    final = re.fullmatch(rf"maestro: tokenising: done, 4/4 performances \(1 skipped\); {STATUS}", lines[5])
    assert final and final["tokens"] == human(sum(len(t) for t in result.tokens.values()))
    assert result.skipped.keys() == {"bad.midi"} and result.new_tokens == sum(len(t) for t in result.tokens.values())

    again = io.StringIO()
    tokenize_files(files, TokenCache(tmp_path / "cache"), workers=1, progress=ProgressOutput(again, every=0))
    assert again.getvalue().splitlines() == [
        "maestro: tokenising 0 of 4 performances (0B of MIDI; 4 in the cache) with 1 worker",
        f"maestro: tokenising: done, 4/4 performances (4 from the cache, 1 skipped); {final['tokens']} tokens",
    ]
    hourly = io.StringIO()  # a line at most every hour: the start and the end only
    tokenize_files(files, TokenCache(tmp_path / "other"), workers=1, progress=ProgressOutput(hourly, every=3600))
    (start, end) = hourly.getvalue().splitlines()
    assert start == lines[0] and end.startswith("maestro: tokenising: done, 4/4 performances (1 skipped); ")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_a_bar_redrawn_in_place(tmp_path):
    out = Terminal()
    tokenize_files(progress_files(), TokenCache(tmp_path / "cache"), workers=1, progress=ProgressOutput(out))
    text = out.getvalue()
    assert "\x1b[2K" in text and "━" in text and "100%" in text  # a bar, redrawn in place (erase line)
    bar, status = text.rsplit("\x1b[2K", 1)[1].split("\n", 1)  # the last frame: a bar, then the status, wrapped
    assert bar.startswith("maestro: tokenising ") and "100%" in bar
    assert re.match(rf"4/4 performances \(1 skipped\); {STATUS}", " ".join(status.split()))
    assert "maestro: tokenising: done" not in text  # no plain lines


# ---- the store against the CSV --------------------------------------------------------------------------------------
def test_performances_csv_accounts_for_every_performance_of_the_csv_once_in_its_order(whole):
    data, meta = whole
    with open(data / "stores" / "maestro" / "performances.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    index = read_index_file(SAMPLE_CSV)
    assert [row["midi_filename"] for row in rows] == [p.midi_filename for p in index]  # 1276, in the CSV's order
    assert [row["csv_split"] for row in rows] == [p.csv_split for p in index]
    present = {p.relative_to(SAMPLES / "maestro").as_posix() for p in (SAMPLES / "maestro").rglob("*.midi")}
    for row in rows:
        if row["midi_filename"] in present:
            assert row["split"] in ("train", "val", "test") and int(row["chunks"]) >= 1
        else:
            assert (row["split"], row["skipped"], row["tokens"]) == ("missing", MISSING_REASON, "")
    assert sum(row["split"] == "missing" for row in rows) == meta["performances"]["missing"] == 1265
    check_against_index(rows, index, "random", str(SAMPLE_CSV))  # what the build checked before writing


INDEX = [Performance("2018/a.midi", "train"), Performance("2018/b.midi", "test"), Performance("2018/c.midi", "val")]


def rows_of(*splits: str, reason: str = "why") -> list[dict[str, str]]:
    return [
        {"midi_filename": p.midi_filename, "split": split, "skipped": reason if split in ("skipped", "missing") else ""}
        for p, split in zip(INDEX, splits, strict=True)
    ]


@pytest.mark.parametrize(
    "rows, mode, message",
    [
        (rows_of("train", "test", "val")[:2], "random", r"2018/c\.midi \(CSV split val\) is in no split of the store "
         r"and not recorded as skipped or missing: it would be dropped silently"),
        (rows_of("train", "test", "val") + rows_of("test", "test", "val")[:1], "random",
         r"2018/a\.midi \(CSV split train\) has 2 rows in the store \(train, test\)"),
        (rows_of("train", "test", "val") + [{"midi_filename": "2018/z.midi", "split": "train"}], "random",
         r"the store would have a row for 2018/z\.midi, which it does not list"),
        (rows_of("train", "skipped", "val", reason=""), "random", r"2018/b\.midi \(CSV split test\) is recorded as "
         "skipped without a reason"),
        (rows_of("train", "val", "val"), "official", r"2018/b\.midi \(CSV split test\) is in val; the official "
         "split puts it in test"),
        (rows_of("train", "train2", "val"), "random", r"2018/b\.midi \(CSV split test\) is in split 'train2'"),
    ],
)  # fmt: skip
def test_the_check_against_the_csv_names_the_performance_and_the_fault(rows, mode, message):
    check_against_index(rows_of("train", "test", "val"), INDEX, "official", "the.csv")  # the rows that pass
    check_against_index(rows_of("test", "missing", "skipped"), INDEX, "random", "the.csv")
    with pytest.raises(ValueError, match=rf"^the\.csv: {message}"):
        check_against_index(rows, INDEX, mode, "the.csv")


def test_a_performance_lost_before_the_split_fails_naming_it_and_keeps_the_store(whole, sample_env, monkeypatch):
    shutil.copytree(whole[0] / "raw" / "maestro" / "token_cache", sample_env / "raw" / "maestro" / "token_cache")
    dm = module()
    meta = dm.prepare_data()
    before = store_bytes(dm.store)
    lost = read_index_file(SAMPLE_CSV)[0]  # a train performance of the sample

    def tokenize_losing_one(*args, **kwargs):
        result = tokenize_files(*args, **kwargs)
        del result.tokens[lost.midi_filename]
        return result

    monkeypatch.setattr(maestro_datamodule, "tokenize_files", tokenize_losing_one)
    raw_csv = sample_env / "raw" / "maestro" / CSV_NAME
    with pytest.raises(ValueError, match=rf"^{re.escape(str(raw_csv))}: {re.escape(lost.midi_filename)} \(CSV split "
                                         r"train\) is in no split of the store .* dropped silently"):  # fmt: skip
        module(split_seed=1).prepare_data()
    assert store_bytes(dm.store) == before and module().meta == meta


# ---- the summary and the record ------------------------------------------------------------------------------------
VALIDATION = "2014/MIDI-UNPROCESSED_16-18_R1_2014_MID--AUDIO_16_R1_2014_wav--2.midi"  # the sample's one


@pytest.fixture
def five_files_env(tmp_path, monkeypatch):
    """A mirror of the sample's three smallest performances (test, train, train), its validation performance, and
    a fifth CSV path holding a file that is not MIDI: (the data root, the bad file's name)."""
    mirror = small_maestro_mirror(tmp_path / "mirror")
    (mirror / "maestro" / VALIDATION).parent.mkdir(exist_ok=True)
    shutil.copyfile(SAMPLES / "maestro" / VALIDATION, mirror / "maestro" / VALIDATION)
    present = {p.relative_to(mirror / "maestro").as_posix() for p in (mirror / "maestro").rglob("*.midi")}
    bad = next(p.midi_filename for p in read_index_file(SAMPLE_CSV) if p.midi_filename not in present)
    (mirror / "maestro" / bad).parent.mkdir(parents=True, exist_ok=True)
    (mirror / "maestro" / bad).write_bytes(b"not a MIDI file")
    monkeypatch.setenv("POSBENCH_MIRROR", str(mirror))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    return tmp_path / "data", bad


def test_prepare_prints_the_split_tokens_chunks_skipped_files_phases_and_memory(five_files_env, capsys):
    data, bad = five_files_env
    assert prepare_main(["--domain", "maestro", "domain.args.tokenize_workers=1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    meta = module().meta
    assert "performances: 1276 listed in the CSV, 5 present, 4 used, 1 skipped, 1271 missing" in lines
    assert (
        "split: random 90/5/5 over the performances that tokenised, split_seed 0 (the paper's protocol; "
        "domain.args.split=official takes the CSV's split column)"
    ) in lines
    columns = ["performances", "tokens", "chunks", "chunk", "tokens"]
    header = next(i for i, line in enumerate(lines) if line.split() == columns)
    for line, split in zip(lines[header + 1 : header + 4], ("train", "val", "test"), strict=True):
        name, *counts = line.split()
        performances, tokens = meta["performances"]["per_split"][split].values()
        stored = meta["splits"][split]
        assert name == split and [int(c.replace(",", "")) for c in counts] == [
            performances,
            tokens,
            stored["examples"],
            stored["tokens"],
        ]
        assert performances == {"train": 2, "val": 1, "test": 1}[split]  # at least one each for val and test
    skipped = lines.index("skipped: 1")
    assert re.fullmatch(rf"  {re.escape(bad)}: not a readable MIDI file \(.+\)", lines[skipped + 1])
    assert "missing: 1271 performances the CSV lists are not in the unpacked folder (performances.csv names them)" in (
        lines
    )
    # the trap of issue 68: a partial store said so in one line and exited 0; it says what it cannot be used for
    assert (
        "note: a partial store, 5 of the 1,276 performances: runs trained on it cannot join a study prepared from "
        "the whole set (every published MAESTRO study; `make train WITH=` refuses them); for the whole set, "
        "`POSBENCH_MIRROR=<the unpacked MAESTRO v3.0.0 set> make data-maestro`" in "\n".join(lines)
    )
    summary = "\n".join(lines)
    assert re.search(r"^tokenising: 5 tokenised, 0 from the cache, 1 workers: [\d.]+k? tokens/s", summary, re.M)
    phases = next(line for line in lines if line.startswith("phases: "))
    assert re.fullmatch(r"phases: " + ", ".join(rf"{p} [\d.]+ s" for p in PHASES) + r"; wall time [\d.]+ s", phases)
    assert re.search(r"^peak memory: [\d,]+ MiB \(the preparation's process\), [\d,]+ MiB", summary, re.M)

    record = module().preparation_record()
    assert list(record["phases_seconds"]) == PHASES and PREPARATION_FILE not in meta["files"]
    assert sum(record["phases_seconds"].values()) == pytest.approx(record["wall_seconds"], abs=0.05)
    stored_tokens = sum(split["tokens"] for split in meta["performances"]["per_split"].values())
    assert record["tokenisation"] | {"seconds": 0, "files_per_second": 0, "tokens_per_second": 0} == {
        "performances": 5,
        "tokenised": 5,
        "from_cache": 0,
        "skipped": 1,
        "workers": 1,
        "tokens": stored_tokens - 2 * 4,  # the store adds BOS and EOS to each performance
        "seconds": 0,
        "files_per_second": 0,
        "tokens_per_second": 0,
    }
    assert record["peak_memory_mib"]["process"] > 0

    assert prepare_main(["--domain", "maestro", "domain.args.tokenize_workers=1"]) == 0
    again = capsys.readouterr().out.splitlines()
    assert f"the store was current, nothing was rebuilt; its build, finished {record['finished']}:" in again
    assert next(line for line in again if line.startswith("phases: ")) == phases

    assert prepare_main(["--domain", "maestro", "domain.args.split=official"]) == 0
    official = capsys.readouterr().out.splitlines()
    counts = {s: v["performances"] for s, v in module(split="official").meta["performances"]["per_split"].items()}
    assert (
        "split: official (the CSV's split column): train 2 of the CSV's 962, val 1 of the CSV's 137, test 1 of the "
        "CSV's 177 (the others are skipped or missing: performances.csv says which)"
    ) in official
    assert counts == {"train": 2, "val": 1, "test": 1}
    assert any(line.startswith("tokenising: 0 tokenised, 5 from the cache") for line in official)
