"""Shared test settings. `make test` runs the tests in pytest-xdist workers, one per core (TEST_WORKERS), each test
file whole on one worker (--dist loadfile: a module's fixtures are built once); each worker's torch gets an equal
share of the cores, so the workers do not fight over them."""

from __future__ import annotations

import contextlib
import io
import os

import pytest
import torch

FIGURES = "figures"  # what a test of statistics simulated, reported at the end of the run


@pytest.fixture
def shown_figures(record_property, capsys):
    """A block whose printed lines are the test's figures (simulated rates): shown as they are printed when the
    tests run in one process, and in every run in the summary at the end (`figures the tests simulated`), which
    pytest-xdist's workers, whose output is otherwise not shown, send back with their reports."""

    @contextlib.contextmanager
    def shown():
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            yield
        text = buffer.getvalue().strip()
        with capsys.disabled():
            print("\n" + text)
        record_property(FIGURES, text)

    return shown


def pytest_terminal_summary(terminalreporter):
    reports = [*terminalreporter.stats.get("passed", []), *terminalreporter.stats.get("failed", [])]
    lines = [
        f"{report.nodeid}: {value}" for report in reports for name, value in report.user_properties if name == FIGURES
    ]
    if lines:
        terminalreporter.section("figures the tests simulated")
        for line in lines:
            terminalreporter.write_line(line)


workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(max(1, min(2, (os.cpu_count() or 1) // workers)))
os.environ.setdefault("POSBENCH_PROGRESS", "0")
