"""JSB Chorales on the real Jsb16thSeparated.npz (tests/data/mirror/jsb through $POSBENCH_MIRROR): counts, token
mapping, windows, scoring whole chorales, bad files, rendering, MIDI round trip, generation and a tiny run."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pretty_midi
import pytest
import torch
from omegaconf import OmegaConf

from domains.fetch import FetchError
from domains.jsb import (
    PAD_ID,
    RAW_NAME,
    RAW_SHA256,
    STEP_SECONDS,
    JSBDataModule,
    JSBFormatError,
    read_chorales,
    render_timestep,
)
from domains.synthetic import SyntheticDataModule
from models.gpt import GPT, GPTConfig
from models.sampling import sample_continuation
from pipelines.experiment.config import build_datamodule, compose_config, model_config
from pipelines.experiment.generation import midi_writer
from pipelines.experiment.training import train_and_evaluate
from pipelines.generate import main as generate_main
from pipelines.prepare import main as prepare_main
from pipelines.samples import main as samples_main
from tests.sample_fixtures import SAMPLES

NPZ = SAMPLES / "jsb" / RAW_NAME
NPZ_KEYS = {"train": "train", "val": "valid", "test": "test"}
# Measured on the real file (and recomputed below with a plain loop): chorales and tokens (4 per timestep).
COUNTS = {
    "train": {"examples": 229, "tokens": 220912},
    "val": {"examples": 76, "tokens": 73632},
    "test": {"examples": 77, "tokens": 75600},
}


def jsb(context: int = 256, **kwargs) -> JSBDataModule:
    return JSBDataModule(context=context, batch_size=4, eval_batch_size=16, seed=0, **kwargs)


def npz_chorales() -> dict[str, list[list[list[float]]]]:
    with np.load(NPZ, allow_pickle=True, encoding="latin1") as archive:
        return {split: [c.tolist() for c in archive[key]] for split, key in NPZ_KEYS.items()}


def plain_tokens(steps: list[list[float]]) -> list[int]:
    """SPEC's rule, one value at a time: pitch - 21, silence (NaN) 88; timestep by timestep, S,A,T,B."""
    tokens = []
    for step in steps:
        for pitch in step:
            tokens.append(88 if math.isnan(pitch) else int(pitch) - 21)
    return tokens


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The real file copied from the mirror into a fresh $POSBENCH_DATA and prepared once for this module."""
    patch = pytest.MonkeyPatch()
    patch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    patch.setenv("POSBENCH_DATA", str(tmp_path_factory.mktemp("jsb_data")))
    yield jsb().prepare_data()
    patch.undo()


def test_store_counts_and_every_token_match_the_npz(prepared):
    chorales = npz_chorales()
    assert prepared["splits"] == COUNTS
    assert prepared["vocab_size"] == 90 and prepared["raw_sha256"] == {RAW_NAME: RAW_SHA256}
    dm = jsb()
    for split, items in chorales.items():
        expected = [plain_tokens(steps) for steps in items]
        assert len(expected) == COUNTS[split]["examples"]
        assert sum(len(e) for e in expected) == COUNTS[split]["tokens"]
        assert prepared["timesteps"][split] == sum(len(steps) for steps in items)
        stored = dm.split(split)
        assert len(stored) == len(expected)
        for i, tokens in enumerate(expected):
            assert stored.example(i).tolist() == tokens, (split, i)


def test_prepared_amount_is_the_382_chorales_of_the_real_file(prepared):
    dm = jsb()
    assert dm.amount_unit == "pieces" and dm.prepared_amount(prepared) == 229 + 76 + 77 == 382


def test_token_ids_of_known_chorales(prepared):
    dm = jsb()
    train0 = dm.split("train").example(0)
    # npz train[0]: steps 0-3 are (74, 70, 65, 58), step 4 is (75, 70, 58, 55)
    assert train0[:8].tolist() == [53, 49, 44, 37, 53, 49, 44, 37]
    assert train0[16:20].tolist() == [54, 49, 37, 34]
    # npz test[70] step 4 is (67, NaN, 59, 52): the alto is silent
    assert dm.split("test").example(70)[16:20].tolist() == [46, 88, 38, 31]
    # npz train[34] step 48 is silent in all four voices
    assert dm.split("train").example(34)[192:196].tolist() == [88, 88, 88, 88]


def test_vocabulary_is_90_with_padding_never_stored(prepared):
    dm = jsb()
    assert dm.vocab_size == 90 and dm.pad_id == 89
    seen = np.unique(np.concatenate([np.asarray(dm.split(s).tokens) for s in COUNTS]))
    assert seen.min() == 36 - 21 and seen[-2] == 81 - 21  # the file's pitches are MIDI 36..81
    assert seen[-1] == 88 and 89 not in seen


def test_training_windows_start_on_a_timestep_of_one_chorale(prepared):
    dm = jsb(context=64)
    train = dm.split("train")
    flat = np.asarray(train.tokens)
    offsets = np.asarray(train.offsets)
    every_window = np.lib.stride_tricks.sliding_window_view(flat, 64)
    starts = []
    for i in range(40):
        tokens, scored = dm.draw_train_window(np.random.default_rng([0, i]))
        again, _ = dm.draw_train_window(np.random.default_rng([0, i]))
        assert np.array_equal(tokens, again)  # a function of the rng only
        assert scored.tolist() == [False] + [True] * 63  # every chorale is longer than 64 tokens
        matches = np.flatnonzero((every_window == tokens).all(axis=1))
        assert len(matches), i
        for p in matches:
            chorale = np.searchsorted(offsets, p, side="right") - 1
            start = p - offsets[chorale]
            assert start % 4 == 0 and p + 64 <= offsets[chorale + 1], (i, p)
            starts.append(start)
    assert len(set(starts)) > 10  # windows are placed all over the chorales, not only at their beginning


def test_short_chorales_are_padded_and_padding_is_not_scored(prepared):
    dm = jsb(context=2048)
    lengths = {len(dm.split("train").example(i)) for i in range(len(dm.split("train")))}
    for i in range(20):
        tokens, scored = dm.draw_train_window(np.random.default_rng([1, i]))
        length = int((tokens != 89).sum())
        assert length in lengths or length == 2048
        assert (tokens[length:] == 89).all() and scored.sum() == length - 1 and not scored[length:].any()


@pytest.mark.parametrize("context", [2048, 256])
def test_every_test_chorale_is_one_example_scored_whole(prepared, context):
    dm = jsb(context=context)
    windows = dm.eval_windows("test")
    lengths = [len(dm.split("test").example(i)) for i in range(77)]
    assert windows.n_examples == 77 and set(windows.example.tolist()) == set(range(77))
    assert (windows.start % 4 == 0).all()
    for i, length in enumerate(lengths):
        mine = windows.example == i
        positions = [
            start + j
            for start, score in zip(windows.start[mine], windows.scored[mine], strict=True)
            for j in np.flatnonzero(score)
        ]
        assert sorted(positions) == list(range(1, length)), i  # each token but the first, exactly once
    if context == 2048:  # test[30] (640 steps) and test[40] (580 steps) are longer than the paper's context
        assert [i for i, n in enumerate(lengths) if n > 2048] == [30, 40]
        assert [int((windows.example == i).sum()) for i in (30, 40)] == [2, 2]


@pytest.mark.parametrize("context", [1024, 2048])
def test_extrapolation_split_scores_each_chorale_longer_than_the_context_from_its_start(prepared, context):
    """test_2x: the test chorales longer than L, each one window of up to 2L tokens (25 chorales at the cpu
    preset's L = 1024, counted from the npz by a plain loop; at the paper's 2048 only test[30] and test[40])."""
    dm = jsb(context=context, extrapolation=[2])
    assert dm.eval_split_names == ("test", "test_2x")
    chorales = [plain_tokens(steps) for steps in npz_chorales()["test"]]
    longer = [c for c in chorales if len(c) > context]
    assert len(longer) == {1024: 25, 2048: 2}[context]
    windows = dm.eval_windows("test_2x")
    assert windows.n_examples == len(longer) and windows.window_length == 2 * context
    assert windows.example.tolist() == list(range(len(longer))) and (windows.start == 0).all()
    for tokens, scored, chorale in zip(windows.tokens, windows.scored, longer, strict=True):
        kept = chorale[: 2 * context]
        assert tokens[: len(kept)].tolist() == kept and (tokens[len(kept) :] == PAD_ID).all()
        assert scored.sum() == len(kept) - 1 and not scored[0] and not scored[len(kept) :].any()
    assert sum(len(c) > 2 * context for c in longer) == {1024: 2, 2048: 0}[context]


def test_paper_preset_is_appendix_c1(prepared):
    cfg = compose_config(["domain=jsb", "preset=paper"])
    assert OmegaConf.to_container(cfg.model) == {
        "n_layer": 8,
        "n_head": 6,
        "d_model": 192,
        "context": 2048,
        "dropout": 0.3,
        "bias": False,
        "norm": "layernorm",
        "tie_embeddings": True,
        "mlp_ratio": 4,
    }
    trainer = cfg.trainer
    assert (trainer.max_steps, trainer.batch_size) == (3000, 4)
    assert OmegaConf.to_container(trainer.optim) == {
        "lr": 6e-4,
        "min_lr": 6e-5,
        "warmup_steps": 50,
        "weight_decay": 0.1,
        "beta1": 0.9,
        "beta2": 0.99,
        "grad_clip": 1.0,
    }
    assert GPT(GPTConfig(**model_config(cfg, 90))).num_parameters() == 3_559_488  # paper: 3.57M
    dm = build_datamodule(cfg)
    assert isinstance(dm, JSBDataModule) and (dm.context, dm.eval_stride, dm.batch_size) == (2048, 1024, 4)
    assert len(dm.eval_windows("val")) <= trainer.eval_batch_size * trainer.val_batches  # validation sees it all


def test_prepare_cli_reports_the_counts(prepared, capsys):
    assert prepare_main(["--domain", "jsb"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[: out.rindex("}") + 1])["splits"] == COUNTS


def test_context_off_the_timestep_grid_is_refused():
    with pytest.raises(ValueError, match="context=254 is not a multiple of 4"):
        jsb(context=254)
    with pytest.raises(ValueError, match="eval_stride=130 is not a multiple of 4"):
        jsb(context=256, eval_stride=130)


def test_wrong_sha256_fails_with_the_path_and_the_expected_hash(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "jsb").mkdir(parents=True)
    (mirror / "jsb" / RAW_NAME).write_bytes(NPZ.read_bytes() + b"\0")
    monkeypatch.setenv("POSBENCH_MIRROR", str(mirror))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    source = re.escape(str(mirror / "jsb" / RAW_NAME))
    with pytest.raises(FetchError, match=rf"{source}: sha256 [0-9a-f]{{64}}, expected {RAW_SHA256}"):
        jsb().prepare_data()
    assert not (tmp_path / "data" / "raw" / "jsb" / RAW_NAME).exists()
    assert not (tmp_path / "data" / "stores" / "jsb" / "meta.json").exists()


def chorale_file(path: Path, train: list, valid: list | None = None, test: list | None = None) -> Path:
    def objects(chorales):
        array = np.empty(len(chorales), dtype=object)
        for i, chorale in enumerate(chorales):
            array[i] = np.asarray(chorale, dtype=np.float16)
        return array

    arrays = {"train": objects(train), "valid": objects(valid or train)}
    if test is not None:
        arrays["test"] = objects(test)
    np.savez(path, **arrays)
    return path


GOOD = [[60, 55, 52, 48], [62, 55, float("nan"), 47]]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.write_bytes(NPZ.read_bytes()[:5000]) and p, "not a readable npz archive"),
        (lambda p: p.write_text("just text") and p, "not a readable npz archive"),
        (lambda p: chorale_file(p, [GOOD]), r"no array test; expected train, valid and test"),
        (lambda p: chorale_file(p, [GOOD], test=[]), r"test holds no list of chorales \(shape \(0,\)\)"),
        (lambda p: chorale_file(p, [GOOD, [[60, 55, 52]] * 5], test=[GOOD]), r"train\[1\] has shape \(5, 3\)"),
        (lambda p: chorale_file(p, [GOOD], test=[[[60, 55, 52, 12]]]), r"test\[0\] holds 1 values .*e\.g\. \[12\.0\]"),
        (lambda p: chorale_file(p, [GOOD], test=[[[60.5, 55, 52, 48]]]), r"not whole MIDI pitches.*\[60\.5\]"),
    ],
)
def test_a_corrupt_or_wrong_npz_fails_naming_the_file(tmp_path, make, message):
    path = make(tmp_path / "broken.npz")
    with pytest.raises(JSBFormatError, match=rf"^{re.escape(str(path))}: .*{message}"):
        read_chorales(path)


def test_a_chorale_missing_from_the_mirror_fails_naming_the_path(tmp_path, monkeypatch):
    (tmp_path / "mirror" / "jsb").mkdir(parents=True)
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    with pytest.raises(FetchError, match=rf"mirror/jsb/{RAW_NAME}: not in the mirror .*expected jsb/{RAW_NAME}"):
        jsb().prepare_data()


def test_a_valid_small_file_reads_back(tmp_path):
    chorales = read_chorales(chorale_file(tmp_path / "ok.npz", [GOOD], test=[GOOD]))
    assert set(chorales) == {"train", "val", "test"}
    assert np.array_equal(chorales["test"][0], np.array(GOOD), equal_nan=True)


def test_render_example_of_a_known_chorale(prepared):
    # npz test[70], steps 0-7: (69,65,62,50) x2, (69,65,60,50) x2, (67,NaN,59,52) x2, (67,64,59,52), (67,64,59,50)
    assert jsb().render_example("test", 70, 33).splitlines() == [
        "test[70]: 468 timesteps of a 16th note (1872 tokens), first 8 shown; '-' = silent voice",
        "t=0    S:A4  A:F4  T:D4  B:D3",
        "t=1    S:A4  A:F4  T:D4  B:D3",
        "t=2    S:A4  A:F4  T:C4  B:D3",
        "t=3    S:A4  A:F4  T:C4  B:D3",
        "t=4    S:G4  A:-   T:B3  B:E3",
        "t=5    S:G4  A:-   T:B3  B:E3",
        "t=6    S:G4  A:E4  T:B3  B:E3",
        "t=7    S:G4  A:E4  T:B3  B:D3",
    ]
    assert render_timestep(12, np.array([87, 0, 39, 88])) == "t=12   S:C8  A:A0  T:C4  B:-"


def test_samples_cli_prints_the_chorale_table(prepared, capsys):
    assert samples_main(["--domain", "jsb", "--split", "train", "--n", "2", "--max-tokens", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "train[0]: 192 timesteps of a 16th note (768 tokens), first 2 shown; '-' = silent voice",
        "t=0    S:D5  A:A#4 T:F4  B:A#3",
        "t=1    S:D5  A:A#4 T:F4  B:A#3",
    ]
    assert out[4].startswith("train[1]: 228 timesteps")


def plain_notes(steps: list[list[float]], voice: int) -> list[tuple[int, int, int]]:
    """(pitch, first step, end step) of each run of one pitch in a voice, one step at a time."""
    notes, current = [], None
    for t, step in enumerate(steps + [[float("nan")] * 4]):
        pitch = None if math.isnan(step[voice]) else int(step[voice])
        if current is not None and pitch != current[0]:
            notes.append((current[0], current[1], t))
            current = None
        if pitch is not None and current is None:
            current = (pitch, t)
    return notes


def midi_notes(path: Path) -> dict[str, list[tuple[int, int, int]]]:
    midi = pretty_midi.PrettyMIDI(str(path))
    return {
        i.name: [(n.pitch, round(n.start / STEP_SECONDS), round(n.end / STEP_SECONDS)) for n in i.notes]
        for i in midi.instruments
    }


def test_midi_round_trip_keeps_every_note_on_the_grid(prepared, tmp_path):
    steps = npz_chorales()["test"][6]  # 372 steps with a full rest at steps 44-46
    tokens = np.concatenate([jsb().split("test").example(6), [60, 61, 62]])  # a partial last step is dropped
    out = tmp_path / "test6.mid"
    out.write_bytes(b"an older file")
    assert jsb().write_midi(tokens, out) == out
    notes = midi_notes(out)
    assert list(notes) == ["Soprano", "Alto", "Tenor", "Bass"]
    for voice, name in enumerate(notes):
        assert notes[name] == plain_notes(steps, voice), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test6.mid"]  # replaced in place, no temporary left
    midi = pretty_midi.PrettyMIDI(str(out))
    assert midi.get_tempo_changes()[1].tolist() == [120.0]


def test_padding_sounds_nothing_and_splits_a_held_note(tmp_path):
    steps = [60, 60, 60, 88], [60, 89, 60, 88], [60, 60, 60, 88]  # alto: padding in the middle
    jsb().write_midi(np.array(steps).reshape(-1), tmp_path / "p.mid")
    assert midi_notes(tmp_path / "p.mid") == {  # the silent bass track has no notes, so pretty_midi reads none
        "Soprano": [(81, 0, 3)],
        "Alto": [(81, 0, 1), (81, 2, 3)],
        "Tenor": [(81, 0, 3)],
    }
    with pytest.raises(ValueError, match="token ids 0..89"):
        jsb().write_midi(np.array([90, 1, 2, 3]), tmp_path / "bad.mid")


class Recorder(GPT):
    """A GPT with a learned table of 8 positions (a longer input is an error), recording what it is shown."""

    def __init__(self) -> None:
        super().__init__(GPTConfig(vocab_size=90, context=8, n_layer=1, n_head=1, d_model=8, pe="ape_learned"))
        self.seen: list[torch.Tensor] = []
        self.modes: list[bool] = []

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        self.seen.append(tokens[0].clone())
        self.modes.append(self.training)
        return super().forward(tokens, pos)


def test_sampling_keeps_the_prompt_and_slides_a_timestep_aligned_context():
    torch.manual_seed(0)
    model, prompt = Recorder(), torch.tensor([5, 6, 7, 8, 9, 10])
    generator = torch.Generator().manual_seed(1)
    sequence = sample_continuation(model, prompt, 20, generator=generator, alignment=4, temperature=0.7)
    assert len(sequence) == 26 and sequence[:6].tolist() == prompt.tolist()
    assert len(model.seen) == 20
    for k, window in enumerate(model.seen):
        length = 6 + k  # tokens known when token `length` is sampled
        start = length - len(window)
        if length <= 8:
            assert start == 0, k
        else:  # the latest timestep start that leaves at most 8 tokens
            assert start % 4 == 0 and 8 - 4 < len(window) <= 8, k
        assert window.tolist() == sequence[start:length].tolist(), k
    same = sample_continuation(
        model, prompt, 20, generator=torch.Generator().manual_seed(1), alignment=4, temperature=0.7
    )
    other = sample_continuation(
        model, prompt, 20, generator=torch.Generator().manual_seed(2), alignment=4, temperature=0.7
    )
    assert torch.equal(same, sequence) and not torch.equal(other, sequence)
    assert not any(model.modes) and model.training  # sampled in eval mode (no dropout), then put back as it was


def test_a_domain_without_midi_is_refused():
    dm = SyntheticDataModule(task="parity", context=32, batch_size=2, eval_batch_size=2, seed=0)
    with pytest.raises(ValueError, match="domain synthetic cannot be written as MIDI"):
        midi_writer(dm)


@pytest.fixture(scope="module")
def tiny_run(prepared, tmp_path_factory):
    """The tiny preset, cut to 16 steps (a short warmup so that it learns something in them); test windows
    overlap by 16 tokens instead of 128 to keep the evaluation short."""
    cfg = compose_config(
        [
            "domain=jsb",
            "preset=tiny",
            f"runs_root={tmp_path_factory.mktemp('jsb_runs')}",
            "trainer.max_steps=16",
            "trainer.optim.warmup_steps=4",
            "trainer.val_every=8",
            "trainer.ckpt_every=8",
            "trainer.val_batches=1",
            "domain.args.eval_stride=240",
        ]
    )
    return train_and_evaluate(cfg)


@pytest.mark.slow
def test_tiny_training_run_writes_test_nll_of_all_77_chorales(tiny_run):
    with open(tiny_run / "metrics" / "test.per_example.csv") as handle:
        rows = list(csv.DictReader(handle))
    test = jsb().split("test")
    assert [int(r["example"]) for r in rows] == list(range(77))
    assert [int(r["tokens"]) for r in rows] == [len(test.example(i)) - 1 for i in range(77)]
    nll = np.array([float(r["nll"]) for r in rows])
    assert np.isfinite(nll).all() and nll.mean() < math.log(90)  # it learned something in 16 steps
    summary = json.loads((tiny_run / "metrics" / "summary.json").read_text())["splits"]["test"]
    assert summary["examples"] == 77 and summary["tokens"] == COUNTS["test"]["tokens"] - 77
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    assert manifest["run"]["domain"] == "jsb" and manifest["data"]["vocab_size"] == 90
    assert manifest["data_hashes"][f"raw/{RAW_NAME}"] == RAW_SHA256


@pytest.mark.slow
def test_generate_writes_a_midi_continuing_the_first_test_chorale(tiny_run, tmp_path, capsys):
    out = tmp_path / "continuation.mid"
    args = [str(tiny_run), "--prompt-tokens", "16", "--new-tokens", "16", "--seed", "3", "--device", "cpu"]
    assert generate_main([*args, "--out", str(out)]) == 0
    assert "16 prompt + 16 sampled tokens" in capsys.readouterr().out
    notes = midi_notes(out)
    assert list(notes) == ["Soprano", "Alto", "Tenor", "Bass"]
    first_step = npz_chorales()["test"][0][0]  # the prompt: test[0] steps 0-3 are (65, 60, 57, 53)
    for voice, name in enumerate(notes):
        assert notes[name][0][:2] == (int(first_step[voice]), 0), name
        assert all(0 <= first < end <= 32 // 4 for _, first, end in notes[name])
    assert generate_main([*args, "--out", str(tmp_path / "c.mid"), "--prompt-tokens", "5000"]) == 2
    assert "--prompt-tokens must be in 1..912" in capsys.readouterr().err
