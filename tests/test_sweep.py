"""Sweeps: the run plan, resuming a killed sweep, DDP equivalence, and the SLURM submission."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import submitit
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from pipelines.analysis.loading import FINISHED, LoadedRun
from pipelines.experiment.config import CONFIG_DIR, compose_config
from pipelines.launch.costs import longest_first
from pipelines.launch.jobs import plan
from pipelines.launch.slurm import slurm_command
from pipelines.runs.layout import TRAIN_METRICS, RunKey
from tests.log_fixtures import train_losses

REPO = Path(__file__).resolve().parents[1]


def test_plan_has_seeds_outermost_and_deterministic_folders(tmp_path):
    jobs = plan("synthetic", ["nope", "rope10k"], [0, 1], "tiny", tmp_path, tasks=["needle", "parity"])
    assert [job.label for job in jobs] == [
        f"synthetic/{task}/{pe}/seed{seed}"
        for seed in (0, 1)
        for task in ("needle", "parity")
        for pe in ("nope", "rope10k")
    ]
    assert all(job.folder == tmp_path / job.label for job in jobs)
    assert jobs[0].tokens_per_step == 32 * 32 and jobs[0].max_steps == 500  # batch x context of the tiny preset


def test_a_sweep_starts_the_longest_runs_of_each_seed_first_and_never_run_encodings_before_them(tmp_path):
    """Finished runs on seed 0: alibi took 100 s and 120 s on needle (median 110), cope 300 s on needle, nope
    200 s on parity; fire never ran. Within each seed of the next sweep (seeds 1, 2: seeds stay outermost) the
    order is: the (task, encoding) never run first, in the plan's order (fire; nope on needle; alibi and cope on
    parity), then the longest by the same encoding's time on the same task."""
    times = {("needle", "alibi", 0): 100.0, ("needle", "alibi", 3): 120.0, ("needle", "cope", 0): 300.0,
             ("parity", "nope", 0): 200.0}  # fmt: skip
    runs = [
        LoadedRun(RunKey("synthetic", task, pe, seed), tmp_path, FINISHED, manifest={"train_seconds_this_process": t})
        for (task, pe, seed), t in times.items()
    ]
    jobs = plan("synthetic", ["alibi", "cope", "fire", "nope"], [1, 2], "tiny", tmp_path, tasks=["needle", "parity"])
    ordered = longest_first(jobs, runs, block=lambda job: [1, 2].index(job.key.seed))
    expected = [
        f"synthetic/{task}/{pe}/seed{seed}"
        for seed in (1, 2)
        for task, pe in [("needle", "fire"), ("needle", "nope"), ("parity", "alibi"), ("parity", "cope"),
                         ("parity", "fire"), ("needle", "cope"), ("parity", "nope"), ("needle", "alibi")]
    ]  # fmt: skip
    assert [job.label for job in ordered] == expected
    assert longest_first(jobs, []) == jobs  # nothing measured: the plan's order


def test_a_sweep_of_the_synthetic_domain_trains_the_preset_s_own_tasks_and_every_task_at_the_paper_preset(tmp_path):
    def tasks(preset):
        return sorted({job.label.split("/")[1] for job in plan("synthetic", ["nope"], [0], preset, tmp_path)})

    assert tasks("tiny") == ["needle", "reverse_string"]
    # the cpu study's blocks: one task per level of the Chomsky hierarchy and per probe kind
    assert tasks("cpu") == ["duplicate_string", "fixed_offset", "modular_arithmetic", "needle", "reverse_string"]
    assert len(tasks("paper")) == 20
    cpu = plan("synthetic", ["nope"], [0], "cpu", tmp_path)[0]
    assert cpu.tokens_per_step == 32 * 32 and cpu.max_steps == 600


def test_a_sweep_refuses_an_encoding_name_with_no_config_before_anything_trains(tmp_path, capsys):
    from pipelines.sweep import main as sweep_main

    with pytest.raises(SystemExit) as exit_:
        sweep_main(["--domain", "jsb", "--runs", str(tmp_path), "--encodings", "nope", "trainer.max_steps=900"])
    assert exit_.value.code == 2
    assert "'trainer.max_steps=900' is not an encoding (configs/pe/)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


AWKWARD = ["résumé/runs", 'it\'s "quoted" [1], a=b/runs', "x${y}\\/runs"]  # outside ASCII; quotes, brackets, =, ${


@pytest.mark.parametrize("name", AWKWARD)
def test_a_runs_folder_of_any_name_is_passed_to_hydra_as_one_string(tmp_path, name):
    """sweep, settle and reproduce plan their runs here (Hydra's override grammar would refuse the bare path)."""
    (job,) = plan("jsb", ["rope10k"], [0], "tiny", tmp_path / name)
    assert job.folder == tmp_path / name / "jsb" / "rope10k" / "seed0"
    assert compose_config(job.overrides).runs_root == str(tmp_path / name)


def test_the_live_view_reads_the_step_from_the_step_column_of_the_runs_metrics_file(tmp_path):
    job = plan("synthetic", ["nope"], [0], "tiny", tmp_path, tasks=["parity"])[0]
    assert job.step == 0  # nothing logged yet
    path = job.folder / TRAIN_METRICS
    path.parent.mkdir(parents=True)
    training = "".join(f",0.001,{step},2.5,,\r\n" for step in range(120))  # more than the tail the view reads
    path.write_text("epoch,lr,step,train/loss,train/tokens_per_s,val/loss\r\n" + training + "0,,119,,,2.25\r\n")
    assert job.step == 120  # the last row is validation's, logged at the index of the step before it
    with open(path, "a") as handle:
        handle.write(",0.001,12")  # a row still being written
    assert job.step == 120


def test_slurm_command_is_one_multirun_over_the_varying_overrides(tmp_path):
    jobs = plan("synthetic", ["nope", "rope10k"], [0, 1], "tiny", tmp_path, tasks=["needle"])
    command = slurm_command(jobs, ["hydra.launcher.partition=long"])
    assert command[1:5] == ["-m", "pipelines.train", "-m", "hydra/launcher=slurm"]
    assert {"domain=synthetic", "pe=nope,rope10k", "seed=0,1", "domain.args.task=needle"} <= set(command)
    assert command[-1] == "hydra.launcher.partition=long"


class Submitted(Exception):
    pass


def test_slurm_launcher_submits_an_array_with_the_configured_resources(tmp_path, monkeypatch):
    """Hydra's submitit launcher, configured by configs/hydra/launcher/slurm.yaml, writes this sbatch file
    (captured instead of calling sbatch)."""
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=[
                "hydra/launcher=slurm",
                "hydra.launcher.partition=debugq",
                "hydra.launcher.array_parallelism=2",
                f"runs_root={tmp_path}",
            ],
            return_hydra_config=True,
        )
    params = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    del params["_target_"]
    assert params["max_num_timeout"] == 3 and params["array_parallelism"] == 2

    def capture(executor, command):
        raise Submitted(executor._make_submission_file_text(command, "uid"))

    monkeypatch.setattr(submitit.slurm.slurm.SlurmExecutor, "_submit_command", capture)
    fake_bin = tmp_path / "bin"  # submitit refuses to build a SLURM executor where `srun` is not on PATH
    fake_bin.mkdir()
    (fake_bin / "srun").write_text("#!/bin/sh\nexit 1\n")
    (fake_bin / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    launcher = SlurmLauncher(**params)
    launcher.config = cfg
    with pytest.raises(Submitted) as submitted:
        launcher.launch([["pe=nope", "seed=0"], ["pe=rope10k", "seed=0"], ["pe=nope", "seed=1"]], initial_job_idx=0)
    sbatch = str(submitted.value)
    for line in (
        "#SBATCH --partition=debugq",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=64GB",
        "#SBATCH --time=720",
        "#SBATCH --array=0-2%2",  # three runs, two at a time
    ):
        assert line in sbatch, line


def _sweep(tmp_path, *extra):
    command = [sys.executable, "-m", "pipelines.sweep", "--domain", "synthetic", "--encodings", "nope", "alibi"]
    command += ["--seeds", "0", "1", "--tasks", "reverse_string", "--runs", str(tmp_path), "--jobs", "1"]
    command += ["debug=fast", "trainer.max_steps=4", *extra]
    return command


@pytest.mark.slow
def test_a_killed_sweep_rerun_completes_only_what_was_missing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = tmp_path / "synthetic/reverse_string/nope/seed0"
    process = subprocess.Popen(
        _sweep(tmp_path),
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 240
    while not (first / "done.json").exists() and time.time() < deadline:
        time.sleep(0.2)
    assert (first / "done.json").exists(), process.communicate(timeout=5)[0] if process.poll() is not None else ""
    os.killpg(process.pid, signal.SIGKILL)  # the sweep and its running child
    process.wait()
    finished_before = json.loads((first / "done.json").read_text())
    done = sorted(str(p.parent.relative_to(tmp_path)) for p in tmp_path.glob("synthetic/*/*/*/done.json"))
    assert len(done) < 4

    rerun = subprocess.run(_sweep(tmp_path), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert json.loads((first / "done.json").read_text()) == finished_before  # not trained again
    assert len(list(tmp_path.glob("synthetic/*/*/*/done.json"))) == 4
    ran = [line for line in rerun.stdout.splitlines() if ": done" in line]
    assert len(ran) == 4 - len(done), rerun.stdout  # only the missing runs were trained


@pytest.mark.slow
@pytest.mark.parametrize("name", AWKWARD[:2])
def test_a_sweep_trains_into_a_runs_folder_outside_ascii_or_with_quotes(tmp_path, name):
    runs = tmp_path / name
    command = [sys.executable, "-m", "pipelines.sweep", "--domain", "synthetic", "--encodings", "nope", "--seeds", "0"]
    command += ["--tasks", "reverse_string", "--runs", str(runs), "--jobs", "1", "debug=fast", "trainer.max_steps=4"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((runs / "synthetic/reverse_string/nope/seed0/manifest.json").read_text())
    assert manifest["config"]["runs_root"] == str(runs)


@pytest.mark.slow
def test_ddp_and_accumulation_equal_one_process_on_the_global_batch(tmp_path):
    """The effective batch is batch x accumulate x devices: two gloo ranks of batch 4, one process accumulating
    two batches of 4, and two ranks each accumulating two batches of 2 take the same steps as one process of batch
    8. The stream gives loader batch i of rank r the samples (i W + r) B .., an optimiser step takes A loader
    batches, and the loss is normalised by the step's global scored-token count (reverse_string's examples score
    different numbers of tokens, so a per-micro-batch normalisation would not match)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "POSBENCH_PROGRESS": "0"}
    common = ["debug=fast", "trainer.max_steps=4", "trainer.accelerator=cpu", "domain.args.task=reverse_string"]
    logs = {}
    for name, extra in (
        ("two", ["trainer.devices=2", "trainer.strategy=ddp", "trainer.batch_size=4"]),
        ("accumulating", ["trainer.batch_size=4", "trainer.accumulate=2"]),
        (
            "two accumulating",
            ["trainer.devices=2", "trainer.strategy=ddp", "trainer.batch_size=2", "trainer.accumulate=2"],
        ),
        ("one", ["trainer.batch_size=8"]),
    ):
        command = [
            sys.executable,
            "-m",
            "pipelines.train",
            f"runs_root={tmp_path / name.replace(' ', '_')}",
            *common,
            *extra,
        ]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        folder = tmp_path / name.replace(" ", "_") / "synthetic/reverse_string/rope10k/seed0"
        logs[name] = [loss for _, loss in train_losses(folder)]
    assert all(len(log) == 4 for log in logs.values())
    for name in ("two", "accumulating", "two accumulating"):
        assert logs[name] == pytest.approx(logs["one"], abs=1e-5), name
    assert logs["one"][-1] < logs["one"][0]  # it trained


def test_a_sweep_with_a_published_study_trains_only_what_it_lacks_and_refuses_what_would_not_join(
    tmp_path, monkeypatch, capsys
):
    """make train WITH=<study>: the runs the study holds are not trained again (a study grown in another session,
    whose run folders are gone); a run that would be trained with another budget than the study holds fixed is
    refused by name before anything trains."""
    import numpy as np

    from pipelines import sweep as sweep_module
    from pipelines.runs.published_export import export_study
    from tests.run_fixtures import lm_domain, with_composed_configs

    x = np.array([0.2, 1.4, 0.6, 2.5, 1.0, 0.8])
    lm_domain(tmp_path / "published_runs", "jsb", {"darope": x, "nope": x + 0.3})  # seeds 0-2
    with_composed_configs(tmp_path / "published_runs")
    export_study(tmp_path / "published_runs", ["jsb"], tmp_path / "study")
    trained = []
    monkeypatch.setattr(sweep_module, "run_local", lambda jobs, workers: trained.extend(j.label for j in jobs) or [])
    args = ["--domain", "jsb", "--encodings", "darope", "nope", "--seeds", "0", "1", "2", "3"]
    args += ["--runs", str(tmp_path / "local"), "--with", str(tmp_path / "study")]
    assert sweep_module.main(args) == 0
    assert trained == ["jsb/darope/seed3", "jsb/nope/seed3"]
    assert (
        "jsb: 2 runs (darope nope x seeds 0 1 2 3); 6 published already, not trained again" in capsys.readouterr().out
    )
    assert sweep_module.main(["trainer.max_steps=7", *args]) == 1
    assert trained == ["jsb/darope/seed3", "jsb/nope/seed3"]  # nothing more
    assert "refusing to train for" in capsys.readouterr().err


def test_each_finished_run_says_about_how_long_the_sweep_has_left(tmp_path, capsys):
    """The sweep's plain lines (a log, not a terminal): the time of day, and as each run finishes the runs left at the
    median wall seconds of the finished ones, `workers` at a time; nothing to estimate from before the first."""
    from pipelines.launch.jobs import Job
    from pipelines.launch.progress import ProgressView, time_left

    def job(seed, status, seconds=None):
        key = RunKey("jsb", None, "rope10k", seed)
        return Job([], key, tmp_path / f"seed{seed}", 300, 4096, status=status, seconds=seconds)

    jobs = [job(0, "done", 400.0), job(1, "done", 800.0), job(2, "done", 420.0), job(3, "running"), job(4, "queued")]
    jobs += [job(5, "skipped"), job(6, "queued")]
    # 3 left (running or queued) x the median 420 s / 2 at a time = 630 s
    assert time_left(jobs, 2) == "; about 10 min left (3 runs at a median 420 s, 2 at a time)"
    assert time_left(jobs, 1) == "; about 21 min left (3 runs at a median 420 s, 1 at a time)"
    assert time_left([job(0, "running"), job(1, "queued")], 2) == ""  # none finished yet
    assert time_left([job(0, "done", 400.0)], 2) == ""  # nothing left
    many = [job(0, "done", 3600.0)] + [job(seed, "queued") for seed in range(1, 5)]
    assert time_left(many, 1) == "; about 4.0 h left (4 runs at a median 3600 s, 1 at a time)"
    view = ProgressView(jobs, live=False, workers=2)
    view.update()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5  # every job but the queued ones, once; 4 of 7 are over (done or skipped)
    assert re.fullmatch(r"\[  4/7\] \d\d:\d\d:\d\d jsb/rope10k/seed1: done, 800 s; about 10 min left .*", lines[1])
    assert re.fullmatch(r"\[  4/7\] \d\d:\d\d:\d\d jsb/rope10k/seed3: running", lines[3])
    assert re.fullmatch(r"\[  4/7\] \d\d:\d\d:\d\d jsb/rope10k/seed5: skipped", lines[4])
    view.update()
    assert capsys.readouterr().out == ""  # no change, no line


def test_without_a_terminal_each_running_run_gets_a_progress_line_every_few_seconds(tmp_path, capsys):
    """`make train > log` printed "running" and then nothing for the 10 minutes a run trained and the minutes it
    scored: every POSBENCH_PROGRESS_EVERY seconds (default 60) each running run gets a line with its
    step, tokens/s and training time left, or how long it has been scoring once its steps are done (every 1 us here:
    at each update)."""
    from pipelines.launch.jobs import Job
    from pipelines.launch.progress import ProgressView

    def job(seed, logged_steps):
        key = RunKey("maestro", None, "rope10k", seed)
        running = Job([], key, tmp_path / f"seed{seed}", 600, 4096, status="running", began=time.time() - 60)
        running.first_seen = (time.time() - 60, 0)
        if logged_steps:
            (running.folder / TRAIN_METRICS).parent.mkdir(parents=True)
            rows = "".join(f",0.002,{step},2.5,\n" for step in range(logged_steps))
            (running.folder / TRAIN_METRICS).write_text("epoch,lr,step,train/loss,val/loss\n" + rows)
        return running

    view = ProgressView([job(10, 0), job(11, 120), job(12, 600)], live=False, workers=2, every=1e-6)
    capsys.readouterr()
    view.update()
    lines = [line.strip() for line in capsys.readouterr().out.splitlines() if line.startswith("        ")]
    clock = r"\d\d:\d\d:\d\d maestro/rope10k/seed"
    assert re.fullmatch(rf"{clock}10: starting \(the data, the model, the first step\) for \d\d s", lines[0])
    # 120 steps of 4,096 tokens in 60 s: 8,192 tokens/s, 480 steps left: 4 min
    assert re.fullmatch(rf"{clock}11: step 120/600 \(20%\), 8,19\d tokens/s, about 4 min of training left", lines[1])
    assert re.fullmatch(rf"{clock}12: trained \(600/600 steps\), scoring its test splits for 0 s", lines[2])
    view.ticker.every = 3600  # the next line an hour on
    view.update()
    assert capsys.readouterr().out == ""
