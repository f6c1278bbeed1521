"""Sleep-EDF: real hypnogram and PSG sample, generated EDF/EDF+ nights, trimming, normalisation, quantiles, split,
windows, bad input, mne's downloader path (offline, files in place) and a tiny training run."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path

import mne
import numpy as np
import pytest

from domains.fetch import FetchError
from domains.sleep_edf import SleepEDFDataModule
from domains.sleep_edf.datamodule import grid_windows
from domains.sleep_edf.quantiles import pooled_quantiles
from domains.sleep_edf.recordings import (
    CHANNEL,
    CLIP,
    SleepEDFError,
    read_hypnogram,
    robust_scale,
    scan_night,
    sleep_period,
    stage_string,
    trim_bounds,
)
from domains.sleep_edf.sources import AGE_TABLE, PHYSIONET_URL
from domains.sleep_edf.split import SPLIT_SEED, read_age_table, split_sizes, split_subjects
from tests.sample_fixtures import SAMPLES
from tests.sleep_edf_fixtures import NightSpec, copy_real_sample, short_night, write_night, write_small_mirror

REAL = SAMPLES / "sleep_edf"
REAL_HYPNOGRAM = REAL / "SC4001EC-Hypnogram.edf"
REAL_PSG = REAL / "SC4001E0-PSG_first300s.edf"
SLEEP = {"1", "2", "3", "4", "R"}
CODE = {"Sleep stage " + c: c for c in "W1234R?"} | {"Movement time": "M"}


MIRROR_NIGHTS = [
    short_night(2, 1, gain=0.7, offset_uv=-8.0),
    short_night(2, 2, wake_before=600, gain=1.3),
    short_night(13, 1, wake_before=150, offset_uv=12.0),  # subject 13 has no second night, as in the corpus
    short_night(22, 1, hypnogram=False),  # a PSG without its hypnogram: skipped
    short_night(22, 2, gain=1.5, offset_uv=5.0),
    short_night(36, 2, wake_after=510),  # subject 36 has no first night
    # long wake on both sides: trimmed to 30 minutes before the first and after the last sleep epoch
    NightSpec(44, 1, (("W", 2010), ("2", 120), ("R", 60), ("W", 1890), ("?", 600)), 4080, gain=0.9),
    # the hypnogram outlasts the signal in the middle of a stage-2 run: clipped to the recording
    NightSpec(44, 2, (("W", 1830), ("1", 60), ("2", 600), ("W", 600)), 2190, offset_uv=-4.0),
    short_night(61, 1, gain=1.1),
    short_night(61, 2, wake_before=420, gain=0.8),
]


def expected_span(spec: NightSpec) -> tuple[float, float] | None:
    """Trim bounds restated with a plain loop over the 30-s epochs of the spec's runs."""
    first = last_end = None
    onset = 0
    for code, seconds in spec.runs:
        for epoch in range(seconds // 30):
            start = onset + 30 * epoch
            if code in SLEEP and start < spec.recording_s:
                first = start if first is None else first
                last_end = min(start + 30, spec.recording_s)
        onset += seconds
    if first is None:
        return None
    return max(0, first - 1800), min(spec.recording_s, last_end + 1800)


def read_channel_uv(path: Path) -> np.ndarray:
    return mne.io.read_raw_edf(path, include=[CHANNEL], verbose="error").get_data(units="uV")[0]


def module(**kwargs) -> SleepEDFDataModule:
    kwargs.setdefault("context", 128)
    return SleepEDFDataModule(batch_size=4, eval_batch_size=16, seed=0, **kwargs)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A mirror of the generated nights plus the real SC4001 sample, prepared once."""
    root = tmp_path_factory.mktemp("sleep")
    folder = root / "mirror" / "sleep_edf"
    for spec in MIRROR_NIGHTS:
        write_night(folder, spec)
    assert copy_real_sample(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POSBENCH_MIRROR", str(root / "mirror"))
        patch.setenv("POSBENCH_DATA", str(root / "data"))
        dm = module()
        meta = dm.prepare_data()
        yield dm, meta, root


def listed(meta):
    return [night for split in ("train", "val", "test") for night in meta["nights"][split]]


# ---- the real samples ------------------------------------------------------------------------------------------
def test_real_hypnogram_labels_and_sleep_period_against_a_plain_loop():
    hypnogram = read_hypnogram(REAL_HYPNOGRAM)
    assert len(hypnogram.onset) == 154
    totals = {}
    for label, duration in zip(hypnogram.label, hypnogram.duration, strict=True):
        runs, seconds = totals.get(CODE[label], (0, 0))
        totals[CODE[label]] = (runs + 1, seconds + duration)
    assert totals == {  # tests/data/PROVENANCE.md
        "W": (12, 59910),
        "1": (24, 1740),
        "2": (40, 7500),
        "3": (48, 3030),
        "4": (23, 3570),
        "R": (6, 3750),
        "?": (1, 6900),
    }
    recording_s = 79500.0  # the full SC4001E0 is 2650 records of 30 s; the '?' run goes on to 86400 s
    first = last_end = None
    for onset, duration, label in zip(hypnogram.onset, hypnogram.duration, hypnogram.label, strict=True):
        for k in range(int(duration // 30)):
            if CODE[label] in SLEEP and onset + 30 * k < recording_s:
                first = onset + 30 * k if first is None else min(first, onset + 30 * k)
                last_end = max(last_end or 0, min(onset + 30 * k + 30, recording_s))
    assert sleep_period(hypnogram, recording_s) == (first, last_end) == (30630.0, 52260.0)  # edfio agrees
    assert trim_bounds(first, last_end, recording_s) == (28830.0, 54060.0)
    stages = stage_string(hypnogram, 28830.0, 54060.0)
    assert len(stages) == (54060 - 28830) // 30 and stages[:60] == "W" * 60 and stages[60:64] == "1111"
    assert stages[-60:] == "W" * 60 and set(stages) == {"W", "1", "2", "3", "4", "R"}


def test_real_hypnogram_is_the_file_in_mnes_table():
    with open(AGE_TABLE, newline="") as handle:
        sha1 = {row["fname"]: row["sha"] for row in csv.DictReader(handle)}
    assert hashlib.sha1(REAL_HYPNOGRAM.read_bytes()).hexdigest() == sha1["SC4001EC-Hypnogram.edf"]
    subject = read_age_table()[0]
    assert (subject.age, subject.sex, subject.nights) == (33, "female", (1, 2))  # the header says Female_33yr


def test_real_first_300_s_is_all_wake_so_the_night_is_skipped():
    reason = scan_night("SC4001", REAL_PSG, REAL_HYPNOGRAM, REAL)
    assert reason == "no epoch scored 1/2/3/4/R within the recording's 300 s"


# ---- pure rules -----------------------------------------------------------------------------------------------
def test_robust_scale_gives_median_zero_and_iqr_one():
    signal = np.random.default_rng(0).permutation(7.0 + 2.0 * np.arange(1001))
    scaled, median, iqr = robust_scale(signal)
    assert (median, iqr) == (1007.0, 1000.0)
    assert np.median(scaled) == 0.0 and np.subtract(*np.percentile(scaled, [75, 25])) == 1.0
    with pytest.raises(SleepEDFError, match="interquartile range 0.0: the signal is flat"):
        robust_scale(np.r_[np.zeros(10), 1.0])


def test_pooled_quantiles_equal_numpys_on_the_concatenated_samples():
    rng = np.random.default_rng(1)
    parts = [np.round(rng.normal(size=n) * 40) / 40 for n in (5000, 1, 333, 12000)]  # many ties, one singleton
    probabilities = np.arange(1, 256) / 256
    got = pooled_quantiles([np.unique(part, return_counts=True) for part in parts], probabilities)
    np.testing.assert_array_equal(got, np.quantile(np.concatenate(parts), probabilities))


@pytest.mark.parametrize("lengths, context", [([1000, 127, 128, 0, 385], 128), ([5, 9], 4)])
def test_grid_windows_are_every_full_non_overlapping_window(lengths, context):
    expected = [(n, s) for n, length in enumerate(lengths) for s in range(0, length - context + 1, context)]
    night, start = grid_windows(np.array(lengths), context)
    assert list(zip(night.tolist(), start.tolist(), strict=True)) == expected


def test_split_of_mnes_table_is_62_8_8_subjects_and_122_15_16_nights_stratified_by_age():
    table = read_age_table()
    ages = {s: info.age for s, info in table.items()}
    split = split_subjects(ages, SPLIT_SEED)
    assert split == split_subjects(ages, SPLIT_SEED)  # a function of the seed only
    assert split != split_subjects(ages, SPLIT_SEED + 1)
    assert [len(split[name]) for name in ("train", "val", "test")] == [62, 8, 8]
    assert sorted(split["train"] + split["val"] + split["test"]) == sorted(table)  # disjoint and complete
    nights = [sum(len(table[s].nights) for s in split[name]) for name in ("train", "val", "test")]
    assert nights == [122, 15, 16]
    by_age = sorted(table, key=lambda s: (table[s].age, s))
    edges = [0, 10, 20, 30, 40, 50, 60, 69, 78]  # eight consecutive age strata of 10 or 9 subjects
    for low, high in zip(edges, edges[1:], strict=False):
        stratum = set(by_age[low:high])
        assert len(stratum & set(split["val"])) == 1 and len(stratum & set(split["test"])) == 1


def test_split_sizes_scale_down_with_at_least_one_subject_per_split():
    assert [split_sizes(n) for n in (3, 6, 10, 15, 20, 78)] == [
        (1, 1, 1),
        (4, 1, 1),
        (8, 1, 1),
        (11, 2, 2),
        (16, 2, 2),
        (62, 8, 8),
    ]
    with pytest.raises(SleepEDFError, match="2 subject.*at least 3"):
        split_sizes(2)


# ---- the generated mirror, prepared -----------------------------------------------------------------------------
def test_trimming_boundaries_to_the_second(prepared):
    _, meta, _ = prepared
    by_id = {night["id"]: night for night in listed(meta)}
    for spec in MIRROR_NIGHTS:
        night_id = spec.psg_name[:6]
        if not spec.hypnogram:
            continue
        start, stop = expected_span(spec)
        assert (by_id[night_id]["trim_start_s"], by_id[night_id]["trim_stop_s"]) == (start, stop), night_id
        assert by_id[night_id]["samples"] == (stop - start) * 100
        epochs = "".join(code * (seconds // 30) for code, seconds in spec.runs)  # one code per 30 s from 0
        assert by_id[night_id]["stages"] == epochs[start // 30 : stop // 30]
    assert (by_id["SC4441"]["trim_start_s"], by_id["SC4441"]["trim_stop_s"]) == (210, 3990)
    assert by_id["SC4442"]["last_sleep_end_s"] == by_id["SC4442"]["trim_stop_s"] == 2190  # hypnogram clipped


def test_prepared_amount_is_every_sample_of_the_trimmed_nights(prepared):
    dm, meta, _ = prepared
    assert dm.amount_unit == "samples" and dm.prepared_amount(meta) == sum(n["samples"] for n in listed(meta))


def test_skipped_nights_are_recorded_with_their_reason(prepared):
    _, meta, _ = prepared
    assert meta["skipped"] == [
        {
            "night": "SC4001",
            "file": "SC4001E0-PSG_first300s.edf",
            "reason": "no epoch scored 1/2/3/4/R within the recording's 300 s",
        },
        {"night": "SC4221", "file": "SC4221E0-PSG.edf", "reason": "no hypnogram file for this night"},
    ]


def test_split_is_subject_disjoint_and_scaled_to_six_subjects(prepared):
    _, meta, _ = prepared
    subjects = meta["split"]["subjects"]
    assert sorted(subjects["train"] + subjects["val"] + subjects["test"]) == [2, 13, 22, 36, 44, 61]
    assert [len(subjects[name]) for name in ("train", "val", "test")] == [4, 1, 1]
    table = read_age_table()
    for name in ("train", "val", "test"):
        nights = meta["nights"][name]
        assert {n["subject"] for n in nights} == set(subjects[name])
        assert all(n["split"] == name and n["age"] == table[n["subject"]].age for n in nights)
        assert meta["splits"][name]["examples"] == len(nights) == meta["split"]["nights"][name]


def test_normalisation_quantiles_and_tokens_restated_on_the_raw_files(prepared):
    dm, meta, root = prepared
    raw = root / "data" / "raw" / "sleep_edf"
    probabilities = np.arange(1, 256) / 256
    boundaries = np.array(meta["boundaries"])
    normalised, medians = {}, []
    for name in ("train", "val", "test"):
        for i, night in enumerate(meta["nights"][name]):
            signal = read_channel_uv(raw / night["psg"])[
                round(night["trim_start_s"] * 100) : round(night["trim_stop_s"] * 100)
            ]
            median, (q25, q75) = np.median(signal), np.percentile(signal, [25, 75])
            assert (night["median_uV"], night["iqr_uV"]) == (median, q75 - q25)
            medians.append(median)
            values = np.clip((signal - median) / (q75 - q25), -CLIP, CLIP)
            normalised[name, i] = values
            tokens = np.digitize(values, boundaries)  # bins[i-1] <= x < bins[i]
            np.testing.assert_array_equal(dm.split(name).example(i), tokens)
    assert np.ptp(medians) > 10  # the generated nights' offsets: normalising per night matters
    pooled = np.concatenate([v for (name, _), v in normalised.items() if name == "train"])
    np.testing.assert_array_equal(boundaries, np.quantile(pooled, probabilities))
    counts = np.bincount(np.concatenate([dm.split("train").example(i) for i in range(len(dm.split("train")))]))
    assert counts.tolist() == meta["train_token_counts"] and len(counts) == 256
    assert counts.min() >= 0.97 * len(pooled) / 256 and counts.max() <= 1.03 * len(pooled) / 256


def test_test_windows_are_non_overlapping_full_windows_of_each_night(prepared):
    dm, meta, _ = prepared
    windows = dm.eval_windows("test")
    lengths = [night["samples"] for night in meta["nights"]["test"]]
    assert windows.n_examples == len(windows.tokens) == sum(n // 128 for n in lengths) == dm.example_count("test")
    assert windows.example.tolist() == list(range(windows.n_examples))
    assert not windows.scored[:, 0].any() and windows.scored[:, 1:].all()
    expected = [
        dm.split("test").example(n)[s : s + 128]
        for n, length in enumerate(lengths)
        for s in range(0, length - 127, 128)
    ]
    np.testing.assert_array_equal(windows.tokens, np.stack(expected))


def test_extrapolation_windows_are_non_overlapping_windows_of_f_times_the_context(prepared):
    dm, meta, _ = prepared
    long = module(extrapolation=[4])
    assert long.eval_split_names == ("test", "test_4x")
    windows = long.eval_windows("test_4x")
    lengths = [night["samples"] for night in meta["nights"]["test"]]
    expected = [
        dm.split("test").example(n)[s : s + 512]
        for n, n_tokens in enumerate(lengths)
        for s in range(0, n_tokens - 511, 512)
    ]
    assert windows.window_length == 512 and windows.n_examples == len(expected) == sum(n // 512 for n in lengths)
    np.testing.assert_array_equal(windows.tokens, np.stack(expected))
    assert not windows.scored[:, 0].any() and windows.scored[:, 1:].all()


def test_samples_command_prints_windows_and_plots_them(prepared, tmp_path, monkeypatch, capsys):
    from pipelines.samples import main

    _, _, root = prepared
    monkeypatch.setenv("POSBENCH_MIRROR", str(root / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(root / "data"))
    assert main(["--domain", "sleep_edf", "--n", "2", "--plot", str(tmp_path), "model.context=128"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("test[0]: night ") and "\n\ntest[1]: night " in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sleep_edf_test_0.png", "sleep_edf_test_1.png"]


def test_eval_examples_keeps_evenly_spaced_windows_and_render_follows_them(prepared):
    dm, _, _ = prepared
    full = dm.eval_windows("test")
    few = module(eval_examples=5)
    windows = few.eval_windows("test")
    keep = np.unique(np.linspace(0, full.n_examples - 1, 5).round().astype(int))
    assert windows.n_examples == len(keep) == 5 and windows.example.tolist() == list(range(5))
    np.testing.assert_array_equal(windows.tokens, full.tokens[keep])
    assert (
        few.render_example("test", 4, 3).split("\n")[1:] == dm.render_example("test", int(keep[4]), 3).split("\n")[1:]
    )


def test_training_windows_are_uniform_over_window_positions_and_drawn_from_the_rng(prepared):
    dm, _, _ = prepared
    train = dm.split("train")
    for seed in range(20):
        tokens, scored = dm.draw_train_window(np.random.default_rng([7, seed]))
        rng = np.random.default_rng([7, seed])
        positions = [len(train.example(n)) - 128 + 1 for n in range(len(train))]
        draw = int(rng.integers(sum(positions)))
        night = 0
        while draw >= positions[night]:
            draw -= positions[night]
            night += 1
        np.testing.assert_array_equal(tokens, train.example(night)[draw : draw + 128])
        assert tokens.dtype == np.int64 and scored.sum() == 127 and not scored[0]


def test_render_and_plot_name_the_night_time_and_stages(prepared, tmp_path):
    dm, meta, _ = prepared
    night = meta["nights"]["test"][0]
    index = 20  # window 20 of the first test night: 2560..2687 samples after its trim start
    text = dm.render_example("test", index, 8)
    begin = night["trim_start_s"] + 25.6
    stamp = f"{int(begin) // 3600:02d}:{int(begin) % 3600 // 60:02d}:{int(begin) % 60:02d}.60"
    assert text.startswith(f"test[{index}]: night {night['id']} (subject {night['subject']}, night {night['night']}")
    assert f"time {stamp} - " in text and f"age {night['age']}" in text
    assert f"epoch spanned: {night['stages'][0]} (" in text
    assert text.endswith(" ".join(str(t) for t in dm.split("test").example(0)[2560:2568]))
    png = dm.plot_example("test", index, tmp_path / "plots" / "w.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and [p.name for p in png.parent.iterdir()] == ["w.png"]
    with pytest.raises(IndexError, match="no window 100000"):
        dm.render_example("test", 100000, 8)


def test_an_unchanged_rerun_does_nothing(prepared, monkeypatch):
    dm, meta, root = prepared
    monkeypatch.setenv("POSBENCH_MIRROR", str(root / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(root / "data"))
    stamp = (root / "data" / "stores" / "sleep_edf" / "meta.json").stat().st_mtime_ns
    monkeypatch.setattr(SleepEDFDataModule, "build_splits", lambda *_: pytest.fail("rebuilt an unchanged store"))
    assert module().prepare_data() == meta
    assert (root / "data" / "stores" / "sleep_edf" / "meta.json").stat().st_mtime_ns == stamp


# ---- bad input -----------------------------------------------------------------------------------------------
@pytest.fixture
def small_mirror(tmp_path, monkeypatch):
    folder = tmp_path / "mirror" / "sleep_edf"
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    write_small_mirror(folder)
    return folder


def test_a_psg_without_fpz_cz_fails_naming_the_file_and_its_channels(small_mirror):
    write_night(small_mirror, short_night(44, 1, eeg_label="EEG Fpz-A1"))
    with pytest.raises(
        SleepEDFError,
        match=r"SC4441E0-PSG\.edf: no channel 'EEG Fpz-Cz'; the file has \['EEG Fpz-A1', "
        r"'EEG Pz-Oz', 'EOG horizontal', 'Resp oro-nasal', 'EMG submental', 'Temp rectal', ",
    ):
        module().prepare_data()


@pytest.mark.parametrize("name", ["SC4441E0-PSG.edf", "SC4021EC-Hypnogram.edf"])
def test_an_unreadable_edf_fails_naming_the_file(small_mirror, name):
    write_night(small_mirror, short_night(44, 1))
    (small_mirror / name).write_bytes(bytes(range(256)) * 4)
    with pytest.raises(SleepEDFError, match=rf"{name}: not a readable EDF file"):
        module().prepare_data()


def test_a_truncated_psg_fails_naming_the_file(small_mirror):
    write_night(small_mirror, short_night(44, 1))  # 990 s: 33 records of 30 s
    psg = small_mirror / "SC4441E0-PSG.edf"
    size = psg.stat().st_size
    psg.write_bytes(psg.read_bytes()[: size // 2])
    message = rf"SC4441E0-PSG\.edf: truncated, {size // 2} bytes where the header announces 33 data records \({size} "
    with pytest.raises(SleepEDFError, match=message):
        module().prepare_data()


def test_a_psg_truncated_in_the_mirror_after_a_good_prepare_leaves_raw_files_and_store_as_they_were(
    small_mirror, tmp_path
):
    meta = module().prepare_data()
    folders = tmp_path / "data" / "raw" / "sleep_edf", tmp_path / "data" / "stores" / "sleep_edf"

    def files() -> dict[Path, bytes]:
        return {path: path.read_bytes() for folder in folders for path in folder.rglob("*") if path.is_file()}

    before = files()
    psg = small_mirror / "SC4021E0-PSG.edf"
    size = psg.stat().st_size
    psg.write_bytes(psg.read_bytes()[: size // 2])
    with pytest.raises(SleepEDFError, match=rf"^{re.escape(str(psg))}: truncated, {size // 2} bytes where the header"):
        module().prepare_data()
    assert files() == before
    dm = module()
    assert dm.meta == meta and len(dm.split("train")) == meta["splits"]["train"]["examples"]


def test_a_plain_edf_in_place_of_a_hypnogram_fails_naming_the_file(small_mirror):
    (small_mirror / "SC4021EC-Hypnogram.edf").write_bytes((small_mirror / "SC4021E0-PSG.edf").read_bytes())
    with pytest.raises(SleepEDFError, match=r"SC4021EC-Hypnogram\.edf: not an EDF\+ file"):
        module().prepare_data()


def test_raw_files_are_the_mirror_listing_before_any_preparation(small_mirror, tmp_path):
    files = module().raw_files()
    names = ["SC4021E0-PSG.edf", "SC4021EC-Hypnogram.edf", "SC4131E0-PSG.edf", "SC4131EC-Hypnogram.edf"]
    names += ["SC4362E0-PSG.edf", "SC4362EC-Hypnogram.edf"]
    assert [f.relpath for f in files] == [f"physionet-sleep-data/{name}" for name in names]
    assert [f.url for f in files] == [PHYSIONET_URL + name for name in names]
    assert [f.relpath for f in module(subjects=[13]).raw_files()] == [f.relpath for f in files[2:4]]
    assert not (tmp_path / "data").exists()  # listing fetched and wrote nothing
    assert list(module().prepare_data()["raw_sha256"]) == [f.relpath for f in files]


def test_raw_files_are_the_records_of_mnes_table_before_any_download(tmp_path, monkeypatch):
    monkeypatch.delenv("POSBENCH_MIRROR", raising=False)
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    with open(AGE_TABLE, newline="") as handle:
        rows = list(csv.DictReader(handle))
    files = module(subjects=[13, 36]).raw_files()  # one night each in the corpus
    assert [f.relpath for f in files] == sorted(
        f"physionet-sleep-data/{row['fname']}" for row in rows if row["subject"] in ("13", "36")
    )
    assert len(files) == 4 and all(f.url == PHYSIONET_URL + f.relpath.split("/")[1] for f in files)
    assert len(module().raw_files()) == len(rows) == 2 * 153  # every night's PSG and hypnogram
    with pytest.raises(SleepEDFError, match=r"subjects \[39\] are not in the Sleep Cassette"):
        module(subjects=[39]).raw_files()
    assert not (tmp_path / "data").exists()


def test_an_empty_mirror_folder_names_what_it_expected(tmp_path, monkeypatch):
    (tmp_path / "sleep_edf").mkdir()
    (tmp_path / "sleep_edf" / "notes.txt").write_text("nothing here")
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    with pytest.raises(FetchError, match=r"sleep_edf: no Sleep Cassette files \(SC4ssNE0-PSG\.edf"):
        module().prepare_data()


# ---- mne's downloader path, offline (files already in place), and a tiny training run ----------------------------
@pytest.fixture(scope="module")
def downloaded(tmp_path_factory):
    """Subjects 0, 1 and 2 under PhysioNet's exact names where mne's fetch_data keeps them, so it finds them all
    and downloads nothing."""
    root = tmp_path_factory.mktemp("sleep_mne")
    folder = root / "data" / "raw" / "sleep_edf" / "physionet-sleep-data"
    with open(AGE_TABLE, newline="") as handle:
        names = [row["fname"] for row in csv.DictReader(handle) if row["subject"] in ("0", "1", "2")]
    for name in names:
        if "Hypnogram" in name:
            subject, night = int(name[3:5]), int(name[5])
            write_night(folder, short_night(subject, night, wake_before=30 * night, wake_after=60, scorer=name[7]))
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)
    return root


def test_mnes_fetch_data_path_finds_the_files_in_place(downloaded, monkeypatch):
    monkeypatch.delenv("POSBENCH_MIRROR", raising=False)
    monkeypatch.setenv("POSBENCH_DATA", str(downloaded / "data"))
    meta = module(subjects=[0, 1, 2]).prepare_data()
    assert len(meta["raw_sha256"]) == 12 and all(k.startswith("physionet-sleep-data/SC40") for k in meta["raw_sha256"])
    assert [meta["split"]["nights"][name] for name in ("train", "val", "test")] == [2, 2, 2]
    assert meta["settings"]["subjects"] == [0, 1, 2]
    with pytest.raises(SleepEDFError, match=r"subjects \[39\] are not in the Sleep Cassette"):
        module(subjects=[0, 39]).prepare_data()


@pytest.mark.slow
def test_tiny_preset_training_writes_per_example_test_nll(downloaded, monkeypatch, tmp_path):
    from pipelines.experiment.config import compose_config
    from pipelines.experiment.training import train_and_evaluate

    monkeypatch.delenv("POSBENCH_MIRROR", raising=False)
    monkeypatch.setenv("POSBENCH_DATA", str(downloaded / "data"))
    cfg = compose_config(
        [
            "domain=sleep_edf",
            "preset=tiny",
            "pe=rope10k",
            f"runs_root={tmp_path}",
            "domain.args.subjects=[0,1,2]",
            "trainer.max_steps=4",
            "trainer.batch_size=4",
            "trainer.val_every=2",
            "trainer.val_batches=1",
            "trainer.ckpt_every=2",
        ]
    )
    assert (cfg.model.n_layer, cfg.model.d_model, cfg.model.context, cfg.model.norm) == (2, 64, 128, "rmsnorm")
    folder = train_and_evaluate(cfg)
    assert folder == tmp_path / "sleep_edf" / "rope10k" / "seed0"
    meta = json.loads((downloaded / "data" / "stores" / "sleep_edf" / "meta.json").read_text())
    with open(folder / "metrics" / "test.per_example.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == sum(night["samples"] // 128 for night in meta["nights"]["test"])
    assert all(int(row["tokens"]) == 127 for row in rows)
    nll = np.array([float(row["nll"]) for row in rows])
    assert np.isfinite(nll).all() and 0 < nll.mean() < 2 * np.log(256)
    summary = json.loads((folder / "metrics" / "summary.json").read_text())["splits"]["test"]
    assert summary["examples"] == len(rows)
