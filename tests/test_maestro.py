"""MAESTRO: REMI tokens from the real sample (11 performances and the real CSV) and from generated MIDI files."""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from symusic import Note, Score, Tempo, TimeSignature, Track

from domains.fetch import FetchError
from domains.maestro import MaestroDataModule
from domains.maestro.archive import CSV_NAME, ZIP_NAME, ZIP_ROOT
from domains.maestro.chunks import chunk_bounds
from domains.maestro.tokenizer import MidiFile, TokenCache, tokenize_files, tokenize_midi
from domains.store import read_split
from domains.stored import StoredDataModule
from pipelines.experiment.config import compose_config
from pipelines.experiment.training import train_and_evaluate
from tests.sample_fixtures import SAMPLES

SAMPLE_CSV = SAMPLES / "maestro" / CSV_NAME
VELOCITY_BINS = [3 + 4 * i for i in range(32)]  # miditok's 32 bins: linspace(0, 127, 33)[1:] as ints
N_GENERATED = 40


def module(**kwargs) -> MaestroDataModule:
    args = {"context": 256, "batch_size": 2, "eval_batch_size": 8, "seed": 0, "tokenize_workers": 1}
    return MaestroDataModule(**{**args, **kwargs})


def csv_rows() -> list[dict[str, str]]:
    with open(SAMPLE_CSV, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def sample_names() -> list[str]:
    """The performances the sample holds, in CSV order."""
    return [row["midi_filename"] for row in csv_rows() if (SAMPLES / "maestro" / row["midi_filename"]).exists()]


USED_OR_SKIPPED = ("train", "val", "test", "skipped")


def performances(store: Path, splits: tuple[str, ...] = USED_OR_SKIPPED) -> dict[str, dict[str, str]]:
    """performances.csv's rows in `splits` (by default all but the performances missing from the mirror)."""
    with open(store / "performances.csv", newline="") as handle:
        return {row["midi_filename"]: row for row in csv.DictReader(handle) if row["split"] in splits}


def chunks_of(dm: MaestroDataModule, row: dict[str, str]) -> list[np.ndarray]:
    first = int(row["first_chunk"])
    return [np.asarray(dm.split(row["split"]).example(i)) for i in range(first, first + int(row["chunks"]))]


def write_piece(path: Path, notes: list[tuple[float, float, int, int]], tpq: int = 384) -> Path:
    """A one-track MIDI file at 120 bpm in 4/4; notes are (onset beats, duration beats, pitch, velocity)."""
    score = Score(tpq)
    track = Track(name="piano", program=0, is_drum=False)
    for onset, duration, pitch, velocity in notes:
        track.notes.append(Note(round(onset * tpq), round(duration * tpq), pitch, velocity))
    score.tracks.append(track)
    score.tempos.append(Tempo(time=0, qpm=120.0))
    score.time_signatures.append(TimeSignature(time=0, numerator=4, denominator=4))
    path.parent.mkdir(parents=True, exist_ok=True)
    score.dump_midi(str(path))
    return path


def off_grid_notes(rng: np.random.Generator, n: int = 80):
    """Notes jittered by less than 0.3 of a grid step, and what REMI must keep of them.

    Expected: onset to the nearest 1/8 beat; duration to the nearest of 1/8..4 beats in eighths and 4..12 beats in
    quarters, longer ones clipped to 12 beats; velocity on miditok's bins; pitches outside 21..108 dropped.
    Returned in units of 1/8 beat (the decoded file's ticks).
    """
    notes, kept, sounding = [], [], {}  # pitch -> (onset, end) of its notes: a MIDI file cannot overlap them
    for _ in range(n):
        onset, pitch = int(rng.integers(1, 8 * 4 * 6)), int(rng.integers(19, 111))
        kind = rng.integers(3)
        steps = [int(rng.integers(1, 33)), 2 * int(rng.integers(17, 49)), 150][kind]  # short, long, too long
        if any(onset < end + 1 and start < onset + steps + 1 for start, end in sounding.get(pitch, [])):
            continue
        sounding.setdefault(pitch, []).append((onset, onset + steps))
        velocity = VELOCITY_BINS[int(rng.integers(32))]
        jitter_onset, jitter_duration = rng.uniform(-0.3, 0.3, 2) / 8
        notes.append((onset / 8 + jitter_onset, steps / 8 + jitter_duration, pitch, velocity))
        if 21 <= pitch <= 108:
            kept.append((onset, min(steps, 96), pitch, velocity))
    return notes, sorted(kept)


# ---- fixtures: the real sample, and a mirror of generated performances -------------------------------------
@pytest.fixture(scope="module")
def sample_data(tmp_path_factory):
    data = tmp_path_factory.mktemp("maestro_sample")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POSBENCH_MIRROR", str(SAMPLES))
        patch.setenv("POSBENCH_DATA", str(data))
        meta = module().prepare_data()
    return data, meta


@pytest.fixture
def sample(sample_data, monkeypatch):
    data, meta = sample_data
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    monkeypatch.setenv("POSBENCH_DATA", str(data))
    return data, meta


@pytest.fixture(scope="module")
def direct_ids():
    """Each sample performance tokenised by a plain miditok call (no track merging, no cache, no store)."""
    tokenizer = module().tokenizer
    return {name: np.array(tokenizer.encode(Score(str(SAMPLES / "maestro" / name)))[0].ids) for name in sample_names()}


@pytest.fixture(scope="module")
def generated_data(tmp_path_factory):
    """40 generated performances and 3 bad files at the first 43 paths of the real CSV."""
    root = tmp_path_factory.mktemp("maestro_generated")
    folder = root / "mirror" / "maestro"
    folder.mkdir(parents=True)
    shutil.copyfile(SAMPLE_CSV, folder / CSV_NAME)
    names = [row["midi_filename"] for row in csv_rows()[: N_GENERATED + 3]]
    good, bad = names[:N_GENERATED], names[N_GENERATED:]
    rng = np.random.default_rng(7)
    notes, kept = off_grid_notes(rng)
    write_piece(folder / good[0], notes)
    for name in good[1:]:
        write_piece(
            folder / name, [(i / 2, 0.5, int(rng.integers(30, 100)), 64) for i in range(int(rng.integers(8, 60)))]
        )
    whole = (folder / good[1]).read_bytes()
    (folder / bad[0]).write_bytes(whole[: len(whole) // 2])  # truncated
    (folder / bad[1]).write_text("not a MIDI file at all\n")
    write_piece(folder / bad[2], [(0, 1, 10, 64), (1, 1, 120, 64)])  # no pitch in 21..108
    data = root / "data"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POSBENCH_MIRROR", str(root / "mirror"))
        patch.setenv("POSBENCH_DATA", str(data))
        meta = module().prepare_data()
    return {"root": root, "data": data, "good": good, "bad": bad, "kept": kept, "meta": meta}


@pytest.fixture
def generated(generated_data, monkeypatch):
    monkeypatch.setenv("POSBENCH_MIRROR", str(generated_data["root"] / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(generated_data["data"]))
    return generated_data


# ---- the tokenizer -------------------------------------------------------------------------------------------
def test_vocabulary_is_spec_remi_with_328_tokens():
    dm = module()
    names = [dm.tokenizer[i] for i in range(len(dm.tokenizer))]
    assert dm.vocab_size == len(names) == 328
    assert names[:6] == ["PAD_None", "BOS_None", "EOS_None", "MASK_None", "Bar_None", "Pitch_21"]
    known = {"Pitch_108": 92, "Velocity_3": 93, "Velocity_127": 124, "Duration_0.1.8": 125, "Duration_12.0.4": 188}
    known |= {"Position_0": 189, "Position_31": 220, "Chord_min": 282, "Tempo_40.0": 296, "Tempo_121.29": 308}
    assert {name: dm.tokenizer.vocab[name] for name in known} == known
    kinds = {}
    for name in names:
        kinds[name.split("_")[0]] = kinds.get(name.split("_")[0], 0) + 1
    assert kinds == {
        **{"PAD": 1, "BOS": 1, "EOS": 1, "MASK": 1, "Bar": 1, "Pitch": 88, "Velocity": 32, "Duration": 64},
        **{"Position": 32, "PitchDrum": 61, "Chord": 14, "Tempo": 32},
    }
    assert "TimeSig" not in kinds and names[-1] == "Tempo_250.0"


def test_a_real_performance_starts_with_known_tokens():
    path = SAMPLES / "maestro/2009" / "MIDI-Unprocessed_10_R2_2009_01_ORIG_MID--AUDIO_10_R2_2009_10_R2_2009_04_WAV.midi"
    dm = module()
    ids = tokenize_midi(path.read_bytes(), dm.tokenizer)
    assert ids[:7].tolist() == [4, 189, 308, 205, 51, 114, 160]
    assert dm.token_names(ids[:7]) == [
        "Bar",
        "Position_0",
        "Tempo_121.29",
        "Position_16",
        "Pitch_67",
        "Velocity_87",
        "Duration_5.0.4",
    ]


def test_round_trip_keeps_notes_on_the_grid(generated, tmp_path):
    dm = module()
    dm.prepare_data()
    row = performances(dm.store)[generated["good"][0]]
    (chunk,) = chunks_of(dm, row)  # one chunk: the whole performance, BOS to EOS
    assert chunk[0] == dm.bos_id and chunk[-1] == dm.eos_id
    path = dm.write_midi(chunk, tmp_path / "out" / "round_trip.mid")
    assert [p.name for p in path.parent.iterdir()] == ["round_trip.mid"]  # written under a temporary name
    score = Score(str(path))
    assert score.ticks_per_quarter == 8 and len(score.tracks) == 1
    got = sorted((n.time, n.duration, n.pitch, n.velocity) for n in score.tracks[0].notes)
    assert got == generated["kept"] and len(got) > 50


# ---- preparation -----------------------------------------------------------------------------------------------
def test_sample_store_counts_and_contents(sample, direct_ids):
    data, meta = sample
    assert module().amount_unit == "pieces" and module().prepared_amount(meta) == 11
    assert meta["vocab_size"] == 328 and meta["source"] == "folder"
    assert meta["performances"] | {"per_split": None} == {
        "listed": 1276,
        "present": 11,
        "missing": 1265,
        "skipped": 0,
        "used": 11,
        "per_split": None,
        "csv_per_split": {"train": 962, "val": 137, "test": 177},  # the real CSV's split column
    }
    # 90/5/5 of 11: round(0.55) = 1 each for val and test, from the permutation drawn with split_seed 0
    names = sample_names()
    order = np.random.default_rng(0).permutation(11)
    want = {"test": {names[order[0]]}, "val": {names[order[1]]}, "train": {names[i] for i in order[2:]}}
    rows = performances(data / "stores" / "maestro")
    for split, members in want.items():
        assert {n for n, r in rows.items() if r["split"] == split} == members
    # each performance is BOS + its REMI tokens + EOS: its first chunk starts it, its last ends it
    dm = module()
    tokens = {split: 0 for split in want}
    for name, row in rows.items():
        ids = direct_ids[name]
        assert int(row["tokens"]) == len(ids) + 2
        tokens[row["split"]] += len(ids) + 2
        first, last = chunks_of(dm, row)[0], chunks_of(dm, row)[-1]
        assert first[0] == dm.bos_id and np.array_equal(first[1:], ids[: len(first) - 1])
        assert last[-1] == dm.eos_id and np.array_equal(last[:-1], ids[len(ids) - len(last) + 1 :])
    assert {s: v["tokens"] for s, v in meta["performances"]["per_split"].items()} == tokens
    assert {s: v["performances"] for s, v in meta["performances"]["per_split"].items()} == {
        "train": 9,
        "val": 1,
        "test": 1,
    }
    for split in want:
        split_data = read_split(data / "stores" / "maestro", split)
        assert meta["splits"][split] == {"examples": len(split_data), "tokens": len(split_data.tokens)}
        assert sum(int(r["chunks"]) for r in rows.values() if r["split"] == split) == len(split_data)
    assert json.loads((data / "stores" / "maestro" / "tokenizer.json").read_text())["tokenization"] == "REMI"


def test_chunks_overlap_by_exactly_two_bars(sample, direct_ids):
    data, _ = sample
    dm = module(chunk_length=1024, store=data / "stores" / "maestro_1024")
    meta = dm.prepare_data()
    tokenisation = dm.preparation_record()["tokenisation"]
    assert tokenisation["tokenised"] == 0 and tokenisation["from_cache"] == 11
    # the sample's bars hold 66 tokens (median) to 369: at 1024 tokens two bars of overlap always fit
    assert meta["chunks"] == {"length": 1024, "overlap_bars": 2, "reduced_overlap": 0, "cut_inside_bar": 0}
    for name, row in performances(dm.store).items():
        sequence = np.concatenate([[dm.bos_id], direct_ids[name], [dm.eos_id]])
        chunks = chunks_of(dm, row)
        assert len(chunks) >= 9 and all(len(c) <= 1024 for c in chunks)
        rebuilt = chunks[0]
        for previous, chunk in zip(chunks, chunks[1:], strict=False):
            bars = np.flatnonzero(previous == dm.bar_id)
            overlap = previous[bars[-2] :]  # from the previous chunk's second-to-last Bar token to its end
            assert np.array_equal(chunk[: len(overlap)], overlap)
            assert np.count_nonzero(overlap == dm.bar_id) == 2
            assert chunk[len(overlap)] == dm.bar_id  # the previous chunk ended just before a Bar token
            rebuilt = np.concatenate([rebuilt, chunk[len(overlap) :]])
        assert np.array_equal(rebuilt, sequence)


def test_extrapolation_windows_are_consecutive_pieces_of_whole_test_performances(sample, direct_ids):
    """test_4x at context 256: pieces of 1024 tokens of the whole test performance (BOS ... EOS), not of its
    chunks, each scored from its second token to its last."""
    data, _ = sample
    dm = module(extrapolation=[2, 4])
    dm.prepare_data()
    assert dm.eval_split_names == ("test", "test_2x", "test_4x")
    (name,) = [n for n, row in performances(dm.store).items() if row["split"] == "test"]
    sequence = np.concatenate([[dm.bos_id], direct_ids[name], [dm.eos_id]])
    windows = dm.eval_windows("test_4x")
    assert windows.window_length == 1024 and windows.n_examples == len(sequence) // 1024
    for i, window in enumerate(windows.tokens):
        assert np.array_equal(window, sequence[i * 1024 : (i + 1) * 1024])
    assert windows.scored[:, 1:].all() and not windows.scored[:, 0].any()


def test_second_prepare_with_unchanged_inputs_does_nothing(sample, monkeypatch):
    data, meta = sample
    meta_path = data / "stores" / "maestro" / "meta.json"
    stamp = meta_path.stat().st_mtime_ns
    monkeypatch.setattr(MaestroDataModule, "build_splits", lambda *args: pytest.fail("the store was rebuilt"))
    assert module().prepare_data() == meta
    assert meta_path.stat().st_mtime_ns == stamp


def test_official_split_on_the_sample_and_tokens_from_the_cache(sample):
    data, _ = sample
    dm = module(split="official", store=data / "stores" / "maestro_official")
    meta = dm.prepare_data()
    tokenisation = dm.preparation_record()["tokenisation"]
    assert tokenisation["tokenised"] == 0 and tokenisation["from_cache"] == 11
    counts = {s: v["performances"] for s, v in meta["performances"]["per_split"].items()}
    assert counts == {"train": 9, "val": 1, "test": 1}
    official = {row["midi_filename"]: row["split"] for row in csv_rows()}
    for name, row in performances(dm.store).items():
        assert {"train": "train", "val": "validation", "test": "test"}[row["split"]] == official[name]
    by_split = {r["split"]: n for n, r in performances(dm.store).items() if r["split"] != "train"}
    assert by_split == {  # as PROVENANCE.md lists them
        "test": "2009/MIDI-Unprocessed_02_R1_2009_03-06_ORIG_MID--AUDIO_02_R1_2009_02_R1_2009_03_WAV.midi",
        "val": "2014/MIDI-UNPROCESSED_16-18_R1_2014_MID--AUDIO_16_R1_2014_wav--2.midi",
    }


def test_render_groups_remi_names_by_bar(sample):
    dm = module()
    dm.prepare_data()
    text = dm.render_example("test", 0, 120)
    header, *lines = text.splitlines()
    row = next(r for r in performances(dm.store).values() if r["split"] == "test")
    assert header.startswith(f"test[0]: {row['midi_filename']}, chunk 1 of {row['chunks']} (first 120 of ")
    assert lines[0] == "BOS" and all(line.startswith("Bar ") for line in lines[1:])
    assert " ".join(lines).split() == dm.token_names(dm.split("test").example(0)[:120])
    assert "Pitch_" in lines[1] and "Velocity_" in lines[1] and "Duration_" in lines[1]


# ---- training windows: transposition ------------------------------------------------------------------------------
def test_training_transposes_every_pitch_by_one_offset_inside_the_piano(sample):
    dm = module()
    dm.prepare_data()
    first, last = dm.pitch_ids
    offsets = set()
    for i in range(300):
        original, scored = StoredDataModule.draw_train_window(dm, np.random.default_rng([0, i]))
        tokens, scored_t = dm.draw_train_window(np.random.default_rng([0, i]))
        assert np.array_equal(scored, scored_t)
        is_pitch = (original >= first) & (original <= last)
        assert np.array_equal(tokens[~is_pitch], original[~is_pitch])
        shift = np.unique(tokens[is_pitch] - original[is_pitch])
        assert len(shift) == 1 and -3 <= shift[0] <= 3
        assert tokens[is_pitch].min() >= first and tokens[is_pitch].max() <= last  # Pitch_21 .. Pitch_108
        offsets.add(int(shift[0]))
    assert offsets == set(range(-3, 4))


def test_transposition_draws_among_the_offsets_that_stay_in_range():
    dm = module()
    vocab = dm.tokenizer.vocab
    for low, high in [(21, 108), (23, 100), (60, 107), (25, 26)]:
        window = np.array([vocab["Bar_None"], vocab[f"Pitch_{low}"], vocab["Velocity_63"], vocab[f"Pitch_{high}"], 0])
        valid = {o for o in range(-3, 4) if low + o >= 21 and high + o <= 108}
        seen = set()
        for i in range(200):
            out = dm.transpose(window, np.random.default_rng(i))
            seen.add(int(out[1] - window[1]))
            assert out[3] - window[3] == out[1] - window[1] and np.array_equal(out[[0, 2, 4]], window[[0, 2, 4]])
        assert seen == valid, (low, high)
    assert np.array_equal(module(transpose=0).transpose(window, np.random.default_rng(0)), window)


def test_validation_and_test_are_never_transposed(sample):
    dm = module(context=2048)
    dm.prepare_data()
    for split in ("val", "test"):
        windows = dm.eval_windows(split)
        data = dm.split(split)
        assert windows.n_examples == len(data) and len(windows) == len(data)  # one window per chunk at 2048
        for i in range(len(data)):
            example = np.asarray(data.example(i))
            assert np.array_equal(windows.tokens[i, : len(example)], example)
            assert not windows.tokens[i, len(example) :].any()  # PAD


# ---- chunking rule on hand-made sequences -------------------------------------------------------------------------
def bar_sequence(bar_lengths: list[int], bar_id: int = 4) -> np.ndarray:
    """BOS, then bars of the given lengths (a Bar token and filler)."""
    return np.concatenate([[1]] + [[bar_id] + [7] * (n - 1) for n in bar_lengths])


def test_chunk_bounds_on_regular_bars():
    chunks = chunk_bounds(bar_sequence([10] * 12), bar_id=4, length=50)  # Bar tokens at 1, 11, ..., 111
    assert chunks.bounds == [(0, 41), (21, 71), (51, 101), (81, 121)]
    assert chunks.reduced_overlap == chunks.cut_inside_bar == 0


def test_a_bar_longer_than_a_chunk_is_cut_and_continued_without_overlap():
    # Bar tokens at 1, 11, 91, 101; the bar at 11 holds 80 tokens
    chunks = chunk_bounds(bar_sequence([10, 80, 10, 10]), bar_id=4, length=50)
    assert chunks.bounds == [(0, 11), (11, 61), (61, 111)]
    assert chunks.reduced_overlap == 1  # after (0, 11): stepping back would not reach past 11
    assert chunks.cut_inside_bar == 1


@pytest.mark.parametrize("seed", range(6))
def test_chunk_bounds_cover_everything_and_overlap_two_bars_unless_counted(seed):
    rng = np.random.default_rng(seed)
    tokens = bar_sequence(rng.integers(1, 40, 60).tolist())
    bars = set(np.flatnonzero(tokens == 4).tolist())
    chunks = chunk_bounds(tokens, bar_id=4, length=64)
    bounds = chunks.bounds
    assert bounds[0][0] == 0 and bounds[-1][1] == len(tokens)
    reduced = cut = 0
    for (start, end), (next_start, next_end) in zip(bounds, bounds[1:], strict=False):
        assert end - start <= 64 and start < next_start <= end < next_end
        if end in bars:  # ends just before a Bar token; the next chunk starts at a Bar token
            assert next_start in bars
            reduced += sum(start <= b < end for b in bars if b >= next_start) < 2
        else:
            assert end == start + 64 and next_start == end
            cut += 1
    assert (reduced, cut) == (chunks.reduced_overlap, chunks.cut_inside_bar)


# ---- bad input ---------------------------------------------------------------------------------------------------
def test_corrupt_midi_files_are_skipped_named_and_counted(generated):
    meta = generated["meta"]
    bad = generated["bad"]
    assert meta["performances"] | {"per_split": None} == {
        "listed": 1276,
        "present": N_GENERATED + 3,
        "missing": 1276 - N_GENERATED - 3,
        "skipped": 3,
        "used": N_GENERATED,
        "per_split": None,
        "csv_per_split": {"train": 962, "val": 137, "test": 177},
    }
    assert set(meta["skipped"]) == set(bad)
    assert meta["skipped"][bad[0]].startswith("not a readable MIDI file")
    assert meta["skipped"][bad[1]].startswith("not a readable MIDI file")
    assert meta["skipped"][bad[2]] == "no notes with pitch in 21..108"
    rows = performances(generated["data"] / "stores" / "maestro")
    assert {n for n, r in rows.items() if r["split"] == "skipped"} == set(bad)
    # a rebuild with other settings finds the failures in the cache too: nothing is tokenised again
    rebuilt = module(chunk_length=100, store=generated["data"] / "stores" / "maestro_100")
    again = rebuilt.prepare_data()
    tokenisation = rebuilt.preparation_record()["tokenisation"]
    assert tokenisation == tokenisation | {"tokenised": 0, "from_cache": N_GENERATED + 3, "skipped": 3}
    assert again["skipped"] == meta["skipped"]


def test_random_split_counts_follow_90_5_5_with_the_seed(generated):
    good = generated["good"]
    for seed in (0, 1):
        dm = module(split_seed=seed, store=generated["data"] / "stores" / f"maestro_seed{seed}")
        meta = dm.prepare_data()
        counts = {s: v["performances"] for s, v in meta["performances"]["per_split"].items()}
        assert counts == {"train": 36, "val": 2, "test": 2}  # round(0.05 * 40) = 2
        order = np.random.default_rng(seed).permutation(N_GENERATED)
        rows = performances(dm.store)
        assert {n for n, r in rows.items() if r["split"] == "test"} == {good[i] for i in order[:2]}
        assert {n for n, r in rows.items() if r["split"] == "val"} == {good[i] for i in order[2:4]}


def test_parallel_workers_give_the_same_tokens(generated, tmp_path):
    folder = generated["root"] / "mirror" / "maestro"
    files = []
    for name in generated["good"][:6] + generated["bad"]:
        data = (folder / name).read_bytes()
        files.append(MidiFile(name, hashlib.sha256(data).hexdigest(), data))
    one = tokenize_files(files, TokenCache(tmp_path / "one"), workers=1)
    two = tokenize_files(files, TokenCache(tmp_path / "two"), workers=2)
    assert one.skipped == two.skipped and len(one.skipped) == 3
    assert one.tokens.keys() == two.tokens.keys() and len(one.tokens) == 6
    assert all(np.array_equal(one.tokens[n], two.tokens[n]) for n in one.tokens)
    assert two.tokenised == 9 and tokenize_files(files, TokenCache(tmp_path / "two"), workers=2).tokenised == 0


def test_mirror_folder_without_the_csv_fails_naming_it(tmp_path, monkeypatch):
    folder = tmp_path / "mirror" / "maestro"
    write_piece(folder / "2018" / "x.midi", [(0, 1, 60, 64)])
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    with pytest.raises(FetchError, match=rf"{folder}: this MAESTRO mirror folder holds neither .*zip nor .*\.csv"):
        module().prepare_data()
    shutil.copyfile(SAMPLE_CSV, folder / CSV_NAME)  # the CSV, but none of its performances
    with pytest.raises(FetchError, match=r"none of the 1276 performances listed in maestro-v3.0.0.csv is present"):
        module().prepare_data()


def test_a_mirror_csv_that_is_not_text_fails_naming_it(tmp_path, monkeypatch):
    folder = tmp_path / "mirror" / "maestro"
    write_piece(folder / "2018" / "x.midi", [(0, 1, 60, 64)])
    (folder / CSV_NAME).write_bytes(b"\x89\xff\x00 not text")
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(folder / CSV_NAME))}: not a MAESTRO index, not UTF-8"):
        module().prepare_data()
    assert not (tmp_path / "data" / "raw" / "maestro" / CSV_NAME).exists()


# ---- the official zip --------------------------------------------------------------------------------------------
def sample_zip(path: Path, csv_text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(ZIP_ROOT + CSV_NAME, csv_text)
        for name in sample_names():
            archive.write(SAMPLES / "maestro" / name, ZIP_ROOT + name)
    return path


def zip_mirror_of_the_sample(sample_data, tmp_path, monkeypatch):
    """(the zip, the data root): a mirror holding the sample's performances as the official zip, and a data root
    with the sample's token cache, both in the environment."""
    lines = SAMPLE_CSV.read_text(encoding="utf-8").splitlines(keepends=True)
    names = sample_names()  # once: it reads the CSV and looks for each of its 1,276 files
    kept = [lines[0]] + [line for line in lines[1:] if any(name in line for name in names)]
    archive = sample_zip(tmp_path / "mirror" / "maestro" / ZIP_NAME, "".join(kept))
    data = tmp_path / "data"
    shutil.copytree(sample_data / "raw" / "maestro" / "token_cache", data / "raw" / "maestro" / "token_cache")
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(data))
    return archive, data


def test_zip_of_the_sample_builds_the_same_store(sample, tmp_path, monkeypatch):
    sample_data, sample_meta = sample
    archive, data = zip_mirror_of_the_sample(sample_data, tmp_path, monkeypatch)
    dm = module()
    meta = dm.prepare_data()
    assert meta["source"] == "zip"
    assert meta["raw_sha256"] == {ZIP_NAME: hashlib.sha256(archive.read_bytes()).hexdigest()}
    tokenisation = dm.preparation_record()["tokenisation"]
    assert tokenisation["from_cache"] == 11 and tokenisation["tokenised"] == 0  # same bytes
    assert meta["performances"]["listed"] == meta["performances"]["used"] == 11
    assert meta["splits"] == sample_meta["splits"]
    for split in ("train", "val", "test"):
        a, b = read_split(data / "stores" / "maestro", split), read_split(sample_data / "stores" / "maestro", split)
        assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.offsets, b.offsets)


def damage_member(archive: Path) -> None:
    """Flip a byte inside the compressed data of the zip's last member (its CRC no longer matches)."""
    with zipfile.ZipFile(archive) as handle:
        member = handle.infolist()[-1]
    data = bytearray(archive.read_bytes())
    start = member.header_offset + 30 + len(member.filename.encode()) + len(member.extra)
    data[start + member.compress_size // 2] ^= 0xFF
    archive.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda path: path.write_bytes(path.read_bytes()[:50_000]), "not a valid zip archive"),
        (damage_member, "member maestro-v3.0.0/.*\\.midi is damaged"),
    ],
)
def test_a_corrupt_zip_in_the_mirror_fails_naming_it_and_keeps_the_good_local_zip(
    sample, tmp_path, monkeypatch, damage, reason
):
    archive, data = zip_mirror_of_the_sample(sample[0], tmp_path, monkeypatch)
    meta = module().prepare_data()
    local = data / "raw" / "maestro" / ZIP_NAME
    good = local.read_bytes()
    damage(archive)
    with pytest.raises(FetchError, match=rf"^{re.escape(str(archive))}: {reason}"):
        module().prepare_data()
    assert local.read_bytes() == good and module().meta == meta


def test_a_damaged_token_cache_entry_is_tokenised_again(generated, tmp_path, caplog):
    path = generated["root"] / "mirror" / "maestro" / generated["good"][1]
    file = MidiFile(path.name, hashlib.sha256(path.read_bytes()).hexdigest(), path.read_bytes())
    cache = TokenCache(tmp_path / "cache")
    first = tokenize_files([file], cache, workers=1).tokens[path.name]
    entry = tmp_path / "cache" / f"{file.sha256}.npy"
    entry.write_bytes(entry.read_bytes()[:-7])  # truncated on disk
    with caplog.at_level(logging.WARNING, logger="posbench.maestro"):
        again = tokenize_files([file], cache, workers=1)
    assert again.tokenised == 1 and np.array_equal(again.tokens[path.name], first)
    assert f"{tmp_path / 'cache' / file.sha256}.*: damaged token cache entry" in caplog.text
    assert np.array_equal(np.load(entry), first)  # rewritten


def test_damaged_store_files_of_the_domain_are_named_when_read(sample, tmp_path):
    sample_data, _ = sample
    store = tmp_path / "maestro"
    shutil.copytree(sample_data / "stores" / "maestro", store)
    whole = store / "test_performances.tokens.npy"
    whole.write_bytes(whole.read_bytes()[:-2])
    with pytest.raises(ValueError, match=rf"^{re.escape(str(whole))}: \d+ bytes, meta.json records \d+; the maestro"):
        module(store=store, extrapolation=[2]).eval_windows("test_2x")
    (store / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(store / 'tokenizer.json'))}: 2 bytes, meta.json records"):
        module(store=store).write_midi([1, 2, 3], tmp_path / "x.mid")


def test_zip_missing_performances_fails_naming_them(tmp_path, monkeypatch):
    sample_zip(tmp_path / "mirror" / "maestro" / ZIP_NAME, SAMPLE_CSV.read_text(encoding="utf-8"))
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    missing = csv_rows()[1]["midi_filename"]  # the first CSV row is in the sample, the second is not
    with pytest.raises(FetchError, match=rf"1265 of the 1276 performances its CSV lists are missing.*{missing}"):
        module().prepare_data()
    assert not (tmp_path / "data" / "stores" / "maestro" / "meta.json").exists()


def test_a_file_that_is_not_a_zip_fails_clearly(tmp_path, monkeypatch):
    (tmp_path / "mirror" / "maestro").mkdir(parents=True)
    (tmp_path / "mirror" / "maestro" / ZIP_NAME).write_text("<html>rate limited</html>")
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    with pytest.raises(FetchError, match=rf"{ZIP_NAME}: not a valid zip archive"):
        module().prepare_data()


# ---- a tiny training run --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_tiny_preset_training_writes_per_example_test_nll(sample, tmp_path):
    _, meta = sample
    cfg = compose_config(
        [
            "domain=maestro",
            f"runs_root={tmp_path}",
            "trainer.max_steps=6",
            "trainer.val_every=3",
            "trainer.ckpt_every=3",
            "trainer.batch_size=4",
            "trainer.val_batches=1",
            "domain.args.tokenize_workers=1",
        ]
    )
    assert cfg.model.context == 256 and cfg.model.n_layer == 2  # the tiny preset
    folder = train_and_evaluate(cfg)
    with open(folder / "metrics" / "test.per_example.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == meta["splits"]["test"]["examples"]
    assert all(np.isfinite(float(r["nll"])) and float(r["nll"]) > 0 for r in rows)
    assert sum(int(r["tokens"]) for r in rows) == meta["splits"]["test"]["tokens"] - len(rows)  # first token unscored
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["data"]["chunk_length"] == 2048 and manifest["run"]["domain"] == "maestro"


def test_a_mirror_that_is_itself_the_unpacked_set_is_read_as_its_maestro_folder(tmp_path, monkeypatch):
    """POSBENCH_MIRROR may name the unpacked MAESTRO set itself (maestro-v3.0.0.csv at its top, as the whole set is
    shipped), not only a folder holding it as maestro/: the same files are taken, byte for byte."""
    from domains.maestro.archive import fetch_archive

    taken = {}
    for mirror in (SAMPLES, SAMPLES / "maestro"):
        monkeypatch.setenv("POSBENCH_MIRROR", str(mirror))
        monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / mirror.name))
        files = fetch_archive()
        taken[mirror.name] = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()}
    assert taken["maestro"] == taken[SAMPLES.name] and CSV_NAME in taken["maestro"] and len(taken["maestro"]) == 12


def test_a_partial_store_is_refused_before_training_for_a_study_of_the_whole_set(sample, tmp_path, monkeypatch, capsys):
    """The MAESTRO mirror trap: `POSBENCH_MIRROR=<a folder whose maestro/ is the 11 samples> make data-maestro`
    builds a store of 11 of the 1,276 performances and exits 0; `make train WITH=<a study prepared from all of them>`
    then trained a full run on it, which the join refused afterwards with four data hashes. The sweep refuses it
    before anything trains, naming both counts and the command that prepares the whole set; a store of the study's
    own raw data trains."""
    import numpy as np

    from domains.maestro.archive import WHOLE_SET
    from pipelines import sweep as sweep_module
    from pipelines.runs.published_export import export_study
    from tests.run_fixtures import lm_domain, with_composed_configs

    data, meta = sample
    assert (meta["performances"]["present"], meta["performances"]["listed"]) == (11, 1276)
    trained = []
    monkeypatch.setattr(sweep_module, "run_local", lambda jobs, workers: trained.extend(j.label for j in jobs) or [])

    def study(name, raw):
        runs = tmp_path / f"{name}-runs"
        hashes = {f"raw/{file}": digest for file, digest in raw.items()} | {"eval/test": "e" * 64}
        lm_domain(runs, "maestro", {"rope10k": np.array([2.5, 2.6]), "nope": np.array([2.9, 3.0])}, data_hashes=hashes)
        with_composed_configs(runs, domain="maestro", preset="cpu")
        export_study(runs, ["maestro"], tmp_path / name)
        return tmp_path / name

    args = ["--domain", "maestro", "--encodings", "nope", "--seeds", "5", "--preset", "cpu", "--runs"]
    args += [str(tmp_path / "local"), "--with"]
    whole = study("whole", WHOLE_SET)
    assert sweep_module.main([*args, str(whole)]) == 1 and trained == []
    err = capsys.readouterr().err
    assert (
        f"error: refusing to train maestro/nope/seed5 for {whole}: the local MAESTRO store ({data}/stores/maestro) "
        "holds 11 of the 1,276 performances its CSV lists (prepared from a mirror holding only those), the study's "
        "runs were prepared from all 1,276: prepare the whole set first, `POSBENCH_MIRROR=<the unpacked MAESTRO "
        "v3.0.0 set> make data-maestro`" in err
    )
    assert sweep_module.main([*args, str(study("same", meta["raw_sha256"]))]) == 0
    assert trained == ["maestro/nope/seed5"]
