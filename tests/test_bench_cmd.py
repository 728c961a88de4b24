"""`dslint bench TARGET` on small datasets written here.

A dataset with a fixed sleep per item is bound by that sleep, not by the CPUs, so N
workers must give about N times the samples/s of one (with a tolerance for a shared
machine) and the recommendation must not be num_workers=0. Also: the default sweep
(num_workers, then prefetch_factor x persistent_workers at the best count), the data
wait share with --model-step, JSON and --plot, the errors that exit 2 (no CUDA, no
matplotlib, a bad --grid, a setting that hangs), and the progress bar on a terminal.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli, run_with_terminal_stderr

torch = pytest.importorskip("torch")
psutil = pytest.importorskip("psutil")
from click.testing import CliRunner  # noqa: E402

from dslint.cli import main  # noqa: E402

pytestmark = pytest.mark.slow

DATASETS = '''
import time

import torch
from torch.utils.data import Dataset, get_worker_info


class Sleepy(Dataset):
    """A fixed sleep per item: I/O-bound, the way remote or disk reads are."""

    def __init__(self, seconds=0.004, n=4000):
        self.seconds, self.n = seconds, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.seconds)
        return torch.tensor([i, i])


class HangsInWorkers(Sleepy):
    def __getitem__(self, i):
        if get_worker_info() is not None:
            time.sleep(3600)
        return torch.tensor(i)


def train_step(batch):
    time.sleep(0.012)


def make_step():
    model = torch.nn.Linear(2, 1)

    def step(batch):
        model(batch.float()).sum().backward()
        time.sleep(0.012)

    return step
'''


@pytest.fixture(scope="module")
def user_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("user") / "benchdata.py"
    path.write_text(textwrap.dedent(DATASETS).lstrip())
    return path


def bench(*args: str):
    return CliRunner().invoke(main, ["bench", *args], catch_exceptions=False)


def rows_by_workers(report: dict) -> dict:
    return {r["settings"]["num_workers"]: r for r in report["rows"]}


def test_more_workers_give_proportionally_more_samples_per_second(user_file, tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "sweep.png"
    result = bench(f"{user_file}:Sleepy", "--grid", "num_workers=0,1,2,4", "--grid", "persistent_workers=true",
                   "--batch-size", "8", "--batches", "12", "--epochs", "3", "--warmup", "4",
                   "--output-format", "json", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = rows_by_workers(report)
    assert sorted(rows) == [0, 1, 2, 4]
    rate = {w: r["samples_per_s"] for w, r in rows.items()}
    # 8 items x 4 ms: ~32 ms per batch in one process, ~250 samples/s
    assert 30 <= rows[0]["ms_median"] <= 60, rows[0]
    assert 0.6 <= rate[1] / rate[0] <= 1.4, rate
    for w in (2, 4):  # proportional, with a tolerance for a shared machine
        assert rate[w] >= 0.6 * w * rate[1], rate
    assert rate[4] > rate[2] > rate[1], rate
    assert rows[4]["ms_median"] < 0.5 * rows[0]["ms_median"], rows[4]
    best = report["best"]
    assert best["config"]["num_workers"] != 0 and best["speedup"] >= 2.0, best
    assert best["speedup"] == pytest.approx(best["samples_per_s"] / rate[0], rel=1e-3)
    assert report["recommendation"].startswith(f"best: {best['label']}: ")
    for w, row in rows.items():
        assert row["samples"] == 3 * 12 * 8 and row["batches"] == 3 * 12
        assert row["first_batch_ms"] > 0 and row["ms_p90"] >= row["ms_median"]
        assert (row["workers_mib"] is None) == (w == 0)
        if w:
            assert row["workers_mib"] > 1 and row["settings"]["persistent_workers"] is True
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 5000
    assert f"wrote {plot}" in result.stderr


def test_default_sweep_then_prefetch_and_persistence_at_the_best_count(user_file):
    result = bench(f"{user_file}:Sleepy", "--kwargs", '{"seconds": 0.002}', "--batch-size", "4", "--batches", "6",
                   "--epochs", "2", "--warmup", "2")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith(f"dslint bench {user_file}:Sleepy\n")
    assert "target: Sleepy(seconds=0.002) \u2192 Sleepy, a map-style Dataset of 4,000 samples" in out
    assert ("| num_workers | prefetch_factor | persistent_workers | pin_memory | ms/batch median | ms/batch p90 | "
            "samples/s | first batch ms | workers' peak MiB |") in out
    table = [line.split(" | ") for line in out.splitlines() if line.startswith("| ") and not line.startswith("| num_workers")]
    settings = [(cells[0].strip("| "), cells[1], cells[2]) for cells in table]
    cpus = len(os.sched_getaffinity(0))
    counts = [0, 1] + [n for n in (2, 4, 8, 16, 32, 64) if n <= cpus] + ([cpus] if cpus > 2 and cpus & (cpus - 1) else [])
    assert [s[0] for s in settings[:len(counts)]] == [str(c) for c in counts]
    assert settings[0][1:] == ("-", "-")
    stage2 = settings[len(counts):]
    assert len(stage2) == 3 and len({s[0] for s in stage2}) == 1 and stage2[0][0] != "0"
    assert {(s[1], s[2]) for s in stage2} == {("2", "True"), ("4", "False"), ("4", "True")}
    last = out.rstrip().splitlines()[-1]
    # with epochs this short, starting workers can cost more than they save: either verdict is valid
    assert last.startswith("best: num_workers=") and " samples/s" in last
    assert "x num_workers=0 (" in last or last.endswith("(no setting with workers was faster than num_workers=0 here)")


def test_model_step_reports_the_share_of_time_waiting_for_data(user_file):
    result = bench(f"{user_file}:Sleepy", "--grid", "num_workers=0,2", "--grid", "persistent_workers=true",
                   "--batch-size", "4", "--batches", "10", "--epochs", "2", "--warmup", "2",
                   "--model-step", f"{user_file}:make_step", "--output-format", "json")
    assert result.exit_code == 0, result.output
    rows = rows_by_workers(json.loads(result.stdout))
    # 4 x 4 ms of loading against a 12 ms step: about half the time waits in one process,
    # little with 2 workers preparing the next batches during the step
    assert 0.35 <= rows[0]["wait_fraction"] <= 0.8, rows[0]
    assert rows[2]["wait_fraction"] < rows[0]["wait_fraction"] - 0.15, rows
    assert rows[0]["step_ms"] >= 12


def test_a_setting_that_hangs_is_killed_and_exits_2(user_file):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    start = time.monotonic()
    result = bench(f"{user_file}:HangsInWorkers", "--grid", "num_workers=0,2", "--batches", "4", "--epochs", "1",
                   "--timeout", "3")
    assert time.monotonic() - start < 40
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith(f"dslint: error: bench {user_file}:HangsInWorkers: num_workers=2: timed out after 3 s"), line
    assert "Traceback" not in result.output
    time.sleep(0.3)
    assert not {p.pid for p in psutil.Process().children(recursive=True)} - before


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error is for CPU-only machines")
def test_device_cuda_without_a_gpu_is_a_clear_error(user_file):
    result = bench(f"{user_file}:Sleepy", "--device", "cuda")
    assert result.exit_code == 2
    assert "--device cuda: no CUDA device here" in result.stderr and "Traceback" not in result.output


def test_plot_without_matplotlib_names_the_extra(user_file, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    result = bench(f"{user_file}:Sleepy", "--plot", "out.png")
    assert result.exit_code == 2
    assert result.stderr.strip() == "dslint: error: --plot needs matplotlib: pip install 'torch-dslint[plot]'"


@pytest.mark.parametrize("grid, message", [
    ("workers=1", "unknown setting 'workers'"),
    ("num_workers=two", "'two' is not an integer"),
    ("persistent_workers=maybe", "'maybe' is not true or false"),
])
def test_bad_grid_exits_2(user_file, grid, message):
    result = bench(f"{user_file}:Sleepy", "--grid", grid)
    assert result.exit_code == 2 and message in result.stderr


def test_progress_bar_on_a_terminal_and_the_table_on_stdout(user_file):
    """The real command, stderr on a pseudo-terminal: the bar is drawn there, never on stdout."""
    code, bar, text = run_with_terminal_stderr(
        ["bench", f"{user_file}:Sleepy", "--grid", "num_workers=0,2", "--batch-size", "4", "--batches", "8",
         "--epochs", "1", "--warmup", "1"], REPO)
    assert code == 0, bar + text
    assert "[" in bar and "%" in bar and "2/2 num_workers=2" in bar and "#" in bar, bar
    assert "\r" not in text and "%]" not in text
    assert "target: Sleepy() \u2192 Sleepy" in text and text.rstrip().splitlines()[-1].startswith("best: ")


# ------------------------------------------------------------------ the gate never lies


def test_fewer_batches_than_the_warm_up_warns_and_names_no_best(user_file):
    """8 samples in batches of 4: 2 batches an epoch against a 5-batch warm-up. Every row is
    measured and shown, but no "best" is claimed from epochs that are all start-up; the
    workers' memory is read while they live (a number, never 0)."""
    run = run_cli("bench", f"{user_file}:Sleepy", "--kwargs", '{"n": 8, "seconds": 0}', "--batch-size", "4",
                  "--grid", "num_workers=0,2", "--epochs", "2", "--output-format", "json", cwd=REPO, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["best"] is None and report["recommendation"].startswith("best: none named: an epoch gives only 2 "
                                                                          "batches, fewer than the 5-batch warm-up"), report
    assert [r["warmup_batches"] for r in report["rows"]] == [2, 2]
    assert report["warnings"] and run.stderr.startswith("dslint: warning: an epoch gives only 2 batches"), run.stderr
    workers = rows_by_workers(report)
    assert workers[0]["workers_mib"] is None
    assert workers[2]["workers_mib"] > 1 and workers[2]["worker_peak_mib"] > 1, workers[2]
    text = run_cli("bench", f"{user_file}:Sleepy", "--kwargs", '{"n": 8, "seconds": 0}', "--batch-size", "4",
                   "--grid", "num_workers=0,2", "--epochs", "1", cwd=REPO, timeout=300)
    assert text.returncode == 0, text.stderr
    last = text.stdout.rstrip().splitlines()[-1]
    assert last.startswith("best: none named: ") and "num_workers=" not in last, text.stdout
    assert "then 1 epoch of at most" in text.stdout
    row = next(line for line in text.stdout.splitlines() if line.startswith("| 2 |"))
    assert row.split("|")[-2].strip() not in ("0", "-"), row  # measured, or n/a: never 0


def test_enough_batches_name_the_best_without_a_warning(user_file):
    run = run_cli("bench", f"{user_file}:Sleepy", "--kwargs", '{"n": 64, "seconds": 0}', "--batch-size", "4",
                  "--grid", "num_workers=0,2", "--epochs", "1", "--warmup", "2", "--output-format", "json",
                  cwd=REPO, timeout=300)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    report = json.loads(run.stdout)
    assert report["warnings"] == [] and report["best"]["label"].startswith("num_workers=")
