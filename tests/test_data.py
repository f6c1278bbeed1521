"""The data spine: seeded stream order, evaluation windows, the token store, fetching, what each domain declares."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import http.server
import json
import logging
import re
import threading

import numpy as np
import pytest
import torch

from domains.base import EmptySplitError, Metric, TrainStream, sliding_windows, windows_from_examples
from domains.fetch import FetchError, fetch
from domains.hrg import HRGDataModule
from domains.jsb import JSBDataModule
from domains.maestro import MaestroDataModule
from domains.sleep_edf import SleepEDFDataModule
from domains.store import locked, read_split
from domains.stored import RawFile, TokenStoreDataModule
from domains.synthetic import SyntheticDataModule
from domains.synthetic.registry import TASKS
from pipelines.experiment.config import build_datamodule, compose_config


def first_batches(datamodule, n=3):
    loader = iter(datamodule.train_dataloader())
    return [next(loader) for _ in range(n)]


def test_token_order_is_identical_across_encodings_and_differs_across_seeds():
    batches = {}
    for pe in ("rope10k", "nope", "ape_learned"):
        for seed in (0, 1):
            cfg = compose_config(["debug=fast", f"pe={pe}", f"seed={seed}", "domain.args.task=reverse_string"])
            batches[pe, seed] = first_batches(build_datamodule(cfg))
    for pe in ("nope", "ape_learned"):
        for seed in (0, 1):
            for a, b in zip(batches["rope10k", seed], batches[pe, seed], strict=True):
                assert torch.equal(a["tokens"], b["tokens"]) and torch.equal(a["scored"], b["scored"])
    assert not torch.equal(batches["rope10k", 0][0]["tokens"], batches["rope10k", 1][0]["tokens"])


def test_synthetic_windows_score_exactly_the_answer():
    dm = SyntheticDataModule(task="reverse_string", context=32, batch_size=2, eval_batch_size=2, seed=0)
    tokens, scored = dm.draw_train_window(np.random.default_rng([0, 0]))
    text = bytes(tokens[tokens > 0].astype(np.uint8)).decode()
    prompt, answer = text.split(">")
    assert answer == prompt.split(":")[1][::-1]
    assert bytes(tokens[scored].astype(np.uint8)).decode() == answer


def test_synthetic_eval_sets_are_fixed_and_in_their_length_ranges():
    a = SyntheticDataModule(task="odds_first", context=32, batch_size=2, eval_batch_size=2, seed=0, eval_examples=20)
    b = SyntheticDataModule(task="odds_first", context=32, batch_size=2, eval_batch_size=2, seed=7, eval_examples=20)
    assert a.eval_windows("test").digest() == b.eval_windows("test").digest()  # independent of the run's seed
    assert a.eval_windows("val").digest() != a.eval_windows("test").digest()
    n1, n2, n4, n8 = (a.task.max_length(b) for b in (32, 64, 128, 256))
    for split, (low, high) in {"test": (1, n1), "test_2x": (n1 + 1, n2), "test_8x": (n4 + 1, n8)}.items():
        sizes = [len(e.prompt) - len("OF:>") for e in a.examples(split)]
        assert low <= min(sizes) and max(sizes) <= high, split
        assert a.eval_windows(split).window_length == {"test": 32, "test_2x": 64, "test_8x": 256}[split]


def test_a_task_bounded_by_its_alphabet_reports_an_empty_split():
    dm = SyntheticDataModule(task="assoc_recall", context=64, batch_size=2, eval_batch_size=2, seed=0)
    with pytest.raises(ValueError, match="assoc_recall has no size"):
        dm.eval_windows("test_2x")


def test_context_too_short_for_a_task_fails_naming_it():
    with pytest.raises(ValueError, match="fixed_offset"):
        SyntheticDataModule(task="fixed_offset", context=8, batch_size=2, eval_batch_size=2, seed=0)


@pytest.mark.parametrize("length, context, stride", [(5, 8, 4), (8, 8, 4), (9, 8, 4), (30, 8, 3), (100, 16, 15)])
def test_sliding_windows_score_every_token_once_with_history(length, context, stride):
    example = np.arange(length)
    windows = windows_from_examples([example], context, stride, pad_id=-1)
    scored_tokens = np.concatenate([w[s] for w, s in zip(windows.tokens, windows.scored, strict=True)])
    assert sorted(scored_tokens.tolist()) == list(range(1, length))  # token 0 has no context
    for (start, first), window_scored in zip(sliding_windows(length, context, stride), windows.scored, strict=True):
        if start > 0:
            assert first - start >= context - stride  # every scored token sees at least this much history
        assert window_scored.sum() == min(length, start + context) - first


def test_sliding_windows_refuse_a_stride_that_leaves_tokens_without_history():
    with pytest.raises(ValueError, match="stride in 1..15"):
        sliding_windows(100, 16, 16)
    assert sliding_windows(16, 16, 16) == [(0, 1)]  # one window: any stride will do


# ---- what each domain declares once, for the pipelines to read ------------------------------------------------
def test_the_nll_domains_declare_test_nll_and_one_model_per_domain():
    nll = Metric("test NLL", "NLL", "nats", higher_is_better=False, digits=4)
    units = {
        JSBDataModule: "pieces",
        MaestroDataModule: "pieces",
        HRGDataModule: "bases",
        SleepEDFDataModule: "samples",
    }
    for datamodule, unit in units.items():
        assert (datamodule.metric, datamodule.tasks, datamodule.amount_unit) == (nll, (), unit), datamodule.domain


def nll_equivalence() -> float:
    return Metric("test NLL", "NLL", "nats", higher_is_better=False, digits=4).equivalence


def test_the_synthetic_domain_declares_normalised_accuracy_and_one_model_per_task():
    metric = SyntheticDataModule.metric
    assert metric == Metric(
        "chance-normalised test accuracy, mean over tasks",
        "norm. acc.",
        "chance = 0, perfect = 1",
        higher_is_better=True,
        digits=3,
        equivalence=0.01,  # SPEC 3: the region of practical equivalence, +-0.01 normalised accuracy
    )
    assert nll_equivalence() == 0.005  # and +-0.005 nats for the NLL domains
    assert SyntheticDataModule.tasks == tuple(TASKS) and len(SyntheticDataModule.tasks) == 20
    assert SyntheticDataModule.tasks[:2] == ("even_pairs", "parity") and SyntheticDataModule.tasks[-1] == "assoc_recall"
    with pytest.raises(AttributeError):
        metric.digits = 2  # frozen: declared once


# ---- a stored domain, defined here on the real base class: a text file cut into lines ---------------------
class LinesDataModule(TokenStoreDataModule):
    """Bytes of each line of lines.txt; lines 0..5 train, 6..7 val, 8.. test."""

    domain = "lines_test"
    pad_id = 0

    @property
    def vocab_size(self) -> int:
        return 128

    def raw_files(self):
        return [RawFile("lines.txt", "http://127.0.0.1:9/lines.txt", getattr(self, "expected_sha", None))]

    def build_splits(self, raw):
        self.builds = getattr(self, "builds", 0) + 1
        lines = raw["lines.txt"].read_bytes().splitlines()
        arrays = [np.frombuffer(line, dtype=np.uint8) for line in lines]
        return {"train": arrays[:6], "val": arrays[6:8], "test": arrays[8:]}, {"lines": len(lines)}


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "lines_test").mkdir(parents=True)
    text = "\n".join(f"line number {i} " + "x" * (i * 7) for i in range(11)) + "\n"
    (mirror / "lines_test" / "lines.txt").write_text(text)
    monkeypatch.setenv("POSBENCH_MIRROR", str(mirror))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    return mirror


def lines_module(**kwargs):
    return LinesDataModule(context=16, batch_size=2, eval_batch_size=4, seed=0, **kwargs)


def test_store_meta_counts_and_contents(mirror, tmp_path):
    meta = lines_module().prepare_data()
    lengths = [len(f"line number {i} ") + i * 7 for i in range(11)]
    assert meta["domain"] == "lines_test" and meta["vocab_size"] == 128 and meta["format_version"] == 2
    assert meta["splits"] == {
        "train": {"examples": 6, "tokens": sum(lengths[:6])},
        "val": {"examples": 2, "tokens": sum(lengths[6:8])},
        "test": {"examples": 3, "tokens": sum(lengths[8:])},
    }
    raw = (mirror / "lines_test" / "lines.txt").read_bytes()
    assert meta["raw_sha256"] == {"lines.txt": hashlib.sha256(raw).hexdigest()}
    assert meta["lines"] == 11
    store = tmp_path / "data" / "stores" / "lines_test"
    assert json.loads((store / "meta.json").read_text()) == meta
    assert meta["files"] == {
        path.name: {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        for path in store.glob("*.npy")
    }
    test = read_split(store, "test")
    assert bytes(test.example(1)).decode() == raw.decode().splitlines()[9]
    assert isinstance(test.tokens, np.memmap) and test.tokens.dtype == np.uint8


def test_preparation_is_idempotent_and_rebuilds_on_new_raw_bytes(mirror, tmp_path):
    dm = lines_module()
    dm.prepare_data()
    meta_path = tmp_path / "data" / "stores" / "lines_test" / "meta.json"
    stamp = meta_path.stat().st_mtime_ns
    dm.prepare_data()
    assert dm.builds == 1 and meta_path.stat().st_mtime_ns == stamp
    (mirror / "lines_test" / "lines.txt").write_text("changed\n" * 12)
    dm.prepare_data()
    assert dm.builds == 2 and json.loads(meta_path.read_text())["splits"]["train"]["tokens"] == 6 * 7


def test_stored_eval_windows_cover_each_test_example(mirror):
    dm = lines_module()
    dm.prepare_data()
    windows = dm.eval_windows("test")
    assert windows.n_examples == 3
    for i in range(3):
        example = np.asarray(dm.split("test").example(i))
        assert windows.scored[windows.example == i].sum() == len(example) - 1


def test_extrapolation_splits_cut_test_material_into_whole_windows_of_f_times_context(mirror):
    """test_2x: every test line long enough gives consecutive pieces of 2 x 16 tokens, each scored from position
    1 to 31; a factor no test line reaches is an empty split (recorded, not a crash)."""
    dm = lines_module(extrapolation=[2, 8])
    dm.prepare_data()
    assert dm.eval_split_names == ("test", "test_2x", "test_8x")
    lines = [np.asarray(dm.split("test").example(i)) for i in range(len(dm.split("test")))]
    expected = [line[s : s + 32] for line in lines for s in range(0, len(line) - 31, 32)]
    windows = dm.eval_windows("test_2x")
    assert windows.window_length == 32 and windows.n_examples == len(expected) > 0
    assert [w.tolist() for w in windows.tokens] == [e.tolist() for e in expected]
    assert windows.scored[:, 0].sum() == 0 and windows.scored[:, 1:].all()
    assert max(len(line) for line in lines) < 128
    with pytest.raises(EmptySplitError, match="lines_test test_8x: no test material of 128 tokens"):
        dm.eval_windows("test_8x")
    assert dm.data_hashes()["eval/test_8x"].startswith("empty: ")
    for factors in ([1], [2.5]):
        with pytest.raises(ValueError, match=r"extrapolation factors must be integers >= 2, got \["):
            lines_module(extrapolation=factors)


def test_mirror_missing_file_names_the_path(mirror):
    (mirror / "lines_test" / "lines.txt").unlink()
    with pytest.raises(FetchError, match=r"mirror.*lines_test/lines\.txt.*not in the mirror"):
        lines_module().prepare_data()


def test_wrong_checksum_names_file_and_expected_hash(mirror, tmp_path):
    dm = lines_module()
    dm.expected_sha = "0" * 64
    with pytest.raises(FetchError, match=r"lines\.txt: sha256 [0-9a-f]{64}, expected 0{64}"):
        dm.prepare_data()
    assert not (tmp_path / "data" / "raw" / "lines_test" / "lines.txt").exists()


def store_files(store) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(store.iterdir())}


def test_eval_examples_scores_evenly_spaced_examples_of_every_evaluation_split(mirror):
    dm = lines_module(eval_examples=2, extrapolation=[2])
    dm.prepare_data()
    test = [np.asarray(dm.split("test").example(i)) for i in range(3)]
    windows = dm.eval_windows("test")
    assert windows.n_examples == 2
    assert windows.digest() == windows_from_examples([test[0], test[2]], 16, 8, 0).digest()
    pieces = [line[s : s + 32] for line in test for s in range(0, len(line) - 31, 32)]
    assert len(pieces) > 2 and dm.eval_windows("test_2x").tokens.tolist() == [pieces[0].tolist(), pieces[-1].tolist()]
    assert lines_module(eval_examples=5).eval_windows("test").n_examples == 3  # more than there are: all
    with pytest.raises(ValueError, match=r"^lines_test: eval_examples must be an integer >= 1, got 0$"):
        lines_module(eval_examples=0)


def test_a_failed_rebuild_leaves_the_previous_store_as_it_was(mirror, tmp_path):
    dm = lines_module()
    dm.prepare_data()
    store = tmp_path / "data" / "stores" / "lines_test"
    before = store_files(store)
    lines = (mirror / "lines_test" / "lines.txt").read_bytes().splitlines(keepends=True)
    # new raw bytes: train and val build, then a test line with a byte outside the vocabulary stops the build
    (mirror / "lines_test" / "lines.txt").write_bytes(b"changed\n" * 8 + lines[8] + "\u00e9t\u00e9\n".encode())
    with pytest.raises(ValueError, match=r"lines_test/test example 1: token ids .* outside the vocabulary 0\.\.127"):
        dm.prepare_data()
    assert store_files(store) == before
    assert sorted(path.name for path in store.parent.iterdir()) == [".lines_test.lock", "lines_test"]
    assert bytes(lines_module().split("test").example(0)) == lines[8].rstrip(b"\n")


def test_a_damaged_store_is_named_when_read_and_rebuilt_by_prepare(mirror, tmp_path, caplog):
    lines_module().prepare_data()
    store = tmp_path / "data" / "stores" / "lines_test"
    tokens = store / "test.tokens.npy"
    good = tokens.read_bytes()
    tokens.write_bytes(good[:-10])  # truncated
    message = rf"^{re.escape(str(tokens))}: {len(good) - 10} bytes, meta.json records {len(good)}; the lines_test store"
    with pytest.raises(ValueError, match=message):
        read_split(store, "test")
    with pytest.raises(ValueError, match=message):
        lines_module().eval_windows("test")
    dm = lines_module()
    with caplog.at_level(logging.WARNING, logger="posbench.store"):
        dm.prepare_data()
    assert dm.builds == 1 and tokens.read_bytes() == good
    assert f"the lines_test store is damaged ({tokens} has {len(good) - 10} bytes, meta.json records" in caplog.text
    tokens.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # the same size: only its sha256 tells, at preparation
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="posbench.store"):
        dm.prepare_data()
    assert dm.builds == 2 and tokens.read_bytes() == good
    assert f"({tokens}: its sha256 is not the one meta.json records); rebuilding it" in caplog.text


def test_a_store_written_before_its_files_were_recorded_is_rebuilt(mirror, tmp_path):
    dm = lines_module()
    dm.prepare_data()
    store = tmp_path / "data" / "stores" / "lines_test"
    meta = json.loads((store / "meta.json").read_text())
    del meta["files"]
    (store / "meta.json").write_text(json.dumps({**meta, "format_version": 1}))
    assert len(read_split(store, "test")) == 3  # still read (without size checks) until it is prepared again
    assert dm.prepare_data()["format_version"] == 2 and dm.builds == 2


def test_a_meta_json_that_is_not_json_is_named_when_read_and_rebuilt_by_prepare(mirror, tmp_path, caplog):
    dm = lines_module()
    dm.prepare_data()
    meta_path = tmp_path / "data" / "stores" / "lines_test" / "meta.json"
    meta_path.write_text('{"domain": "lines_')  # cut short
    with pytest.raises(ValueError, match=rf"^{re.escape(str(meta_path))}: not valid JSON"):
        lines_module().split("test")
    with caplog.at_level(logging.WARNING, logger="posbench.store"):
        assert dm.prepare_data()["domain"] == "lines_test" and dm.builds == 2
    assert f"{meta_path}: not valid JSON" in caplog.text and "rebuilding the lines_test store" in caplog.text


def test_a_preparation_waits_for_the_one_that_holds_the_store(mirror, tmp_path):
    store = tmp_path / "data" / "stores" / "lines_test"
    dm = lines_module()
    with locked(store):
        worker = threading.Thread(target=dm.prepare_data)
        worker.start()
        worker.join(timeout=1)
        assert worker.is_alive() and not store.exists()
    worker.join(timeout=60)
    assert not worker.is_alive() and dm.builds == 1


def test_where_no_lock_can_be_had_preparation_runs_unlocked(mirror, monkeypatch):
    def no_locks(*args):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    dm = lines_module()
    meta = dm.prepare_data()
    assert dm.prepare_data() == meta and dm.builds == 1


def test_a_corrupt_mirror_file_fails_naming_it_and_keeps_the_good_local_copy(mirror, tmp_path):
    source = mirror / "lines_test" / "lines.txt"
    good = source.read_bytes()
    dm = lines_module()
    dm.expected_sha = hashlib.sha256(good).hexdigest()
    dm.prepare_data()
    local = tmp_path / "data" / "raw" / "lines_test" / "lines.txt"
    store = tmp_path / "data" / "stores" / "lines_test"
    before = store_files(store)
    source.write_bytes(good[:-20])  # truncated in the mirror
    with pytest.raises(
        FetchError, match=rf"^{re.escape(str(source))}: sha256 [0-9a-f]{{64}}, expected {dm.expected_sha}"
    ):
        dm.prepare_data()
    assert local.read_bytes() == good and store_files(store) == before
    assert sorted(path.name for path in local.parent.iterdir()) == [".sha256-cache.json", "lines.txt"]


def test_a_changed_mirror_file_is_checked_before_it_replaces_the_local_copy(mirror, tmp_path):
    source, local = mirror / "lines_test" / "lines.txt", tmp_path / "data" / "raw" / "lines_test" / "lines.txt"

    def whole_lines(path):
        if not path.read_bytes().endswith(b"\n"):
            raise ValueError(f"{path}: the last line has no line break")

    url = "http://127.0.0.1:9/lines.txt"
    assert fetch("lines_test", "lines.txt", url, verify=whole_lines) == local
    good = local.read_bytes()
    source.write_bytes(good + b"cut off")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(source))}: the last line has no line break$"):
        fetch("lines_test", "lines.txt", url, verify=whole_lines)
    assert local.read_bytes() == good
    source.write_bytes(good + b"one more line\n")
    assert fetch("lines_test", "lines.txt", url, verify=whole_lines).read_bytes() == good + b"one more line\n"
    copied = local.stat().st_ino
    assert fetch("lines_test", "lines.txt", url, verify=whole_lines).stat().st_ino == copied  # unchanged: not copied
    source.unlink()  # the mirror lacks it now: the local copy is used
    assert fetch("lines_test", "lines.txt", url, verify=whole_lines).stat().st_ino == copied


class RangeHandler(http.server.BaseHTTPRequestHandler):
    payload = bytes(range(256)) * 1000

    def do_GET(self):
        start = int(self.headers.get("Range", "bytes=0-")[6:].rstrip("-"))
        body = self.payload[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_download_resumes_a_partial_file_and_checks_its_hash(tmp_path, monkeypatch):
    monkeypatch.delenv("POSBENCH_MIRROR", raising=False)
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path))
    server = http.server.HTTPServer(("127.0.0.1", 0), RangeHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/blob.bin"
        part = tmp_path / "raw" / "dl" / "blob.bin.part"
        part.parent.mkdir(parents=True)
        part.write_bytes(RangeHandler.payload[:1000])  # what a killed download left behind
        path = fetch("dl", "blob.bin", url, hashlib.sha256(RangeHandler.payload).hexdigest())
        assert path.read_bytes() == RangeHandler.payload and not part.exists()
    finally:
        server.shutdown()


def test_unreachable_url_explains_the_mirror(tmp_path, monkeypatch):
    monkeypatch.delenv("POSBENCH_MIRROR", raising=False)
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path))
    with pytest.raises(FetchError, match="download failed.*POSBENCH_MIRROR"):
        fetch("dl", "x.bin", "http://127.0.0.1:9/x.bin")


def test_ranks_split_the_global_batch_of_a_single_process():
    """Under DDP each rank's batch s is its share of the single-process batch s of size world_size * B."""
    draw = SyntheticDataModule(task="parity", context=32, batch_size=1, eval_batch_size=1, seed=0).draw_train_window
    single = TrainStream(draw, seed=4, batch_size=6)
    shards = [TrainStream(draw, seed=4, batch_size=3, rank=r, world_size=2) for r in (0, 1)]
    for step in (0, 5):
        joined = torch.cat([shard.batch(step)["tokens"] for shard in shards])
        assert torch.equal(joined, single.batch(step)["tokens"])


def test_stream_starts_at_the_restored_step():
    draw = SyntheticDataModule(task="parity", context=32, batch_size=1, eval_batch_size=1, seed=0).draw_train_window
    fresh, resumed = iter(TrainStream(draw, seed=1, batch_size=2)), iter(TrainStream(draw, 1, 2, start_step=3))
    batches = [next(fresh) for _ in range(5)]
    assert all(torch.equal(next(resumed)["tokens"], b["tokens"]) for b in batches[3:])
