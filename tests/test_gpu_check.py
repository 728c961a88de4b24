"""bench/gpu_check.sh: the prepared GPU run. Here (no CUDA) its dry run must exercise
every step on the CPU, and a real run must refuse with a clear message."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "bench" / "gpu_check.sh"


def _run(*args, tmp_path):
    env = dict(os.environ, PYTHON=sys.executable)
    return subprocess.run(["bash", str(SCRIPT), *args, "--out", str(tmp_path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_dry_run_exercises_every_step_and_writes_the_results(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine runs the real thing")
    done = _run("--dry-run", tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["dry_run"] is True and results["ok"] is True
    assert all(status["rc"] == 0 for status in results["steps"].values()), results["steps"]
    assert set(results["rules"]) == {"DSL204", "DSL505", "DSL508", "DSL705"}
    assert results["rules"]["DSL204"]["verdict"] == "skipped: needs GPU"
    assert results["rules"]["DSL505"]["verdict"] == "confirmed"
    rows = results["bench"]["bench_dsl508_bad"]["rows"]
    assert {(r["num_workers"], r["pin_memory"]) for r in rows} == {(0, False), (0, True), (2, False), (2, True)}
    assert all(r["samples_per_s"] > 0 for r in rows)
    assert set(results["bench"]["bench_dsl508_bad"]["pinned_over_pageable"]) == {"0", "2"}
    summary = (tmp_path / "summary.txt").read_text()
    assert "dry run" in summary and "| DSL505 | confirmed |" in summary and "overall: ok" in summary


def test_without_cuda_it_refuses_and_measures_nothing(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = _run(tmp_path=tmp_path)
    assert done.returncode == 3
    assert "gpu_check: no CUDA device" in done.stderr
    assert not (tmp_path / "results.json").exists()
