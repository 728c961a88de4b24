"""Crash isolation: a bug in one rule (or in the parse/summary of one file) is one
``internal error in ... on PATH`` line and exit 2, and every other file and rule
still reports.

The failure is injected without editing the package: the real CLI runs in a
subprocess through ``python -c``, which first wraps one rule's ``check`` (or the
summariser) to fail for one file name. Shard processes are forked from that
process, so the patch holds in the parallel path too (``PARALLEL_MIN_BYTES = 0``
makes the engine use it for these small files; ``-v`` proves it did).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Run, write_files

# Both files have a DSL102 (a library handle opened per sample, never closed) and a DSL501
# (sampler + shuffle).
SOURCE = """
import tables
from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    def __getitem__(self, i):
        return tables.open_file(self.files[i]).read()


loader = DataLoader(Records(), sampler=s, shuffle=True)
"""

EVERYTHING = {
    ("boom.py", "DSL102"),
    ("boom.py", "DSL501"),
    ("fine.py", "DSL102"),
    ("fine.py", "DSL501"),
}

PRELUDE = """
import os, sys
import dslint.engine
import dslint.cli
from dslint.rules.base import all_rules
if os.environ.get("FORCE_SHARDS"):
    dslint.engine.PARALLEL_MIN_BYTES = 0
"""

RAISING_RULE = PRELUDE + """
rule = all_rules()["DSL501"]
original = rule.check
def check(self, ctx):
    if os.path.basename(ctx.path) == "boom.py":
        raise RuntimeError("injected failure")
    return original(self, ctx)
rule.check = check
dslint.cli.main(sys.argv[1:])
"""

# A rule that yields a finding, then fails half-way through the file.
RAISING_MIDWAY = PRELUDE + """
rule = all_rules()["DSL102"]
original = rule.check
def check(self, ctx):
    for report in original(self, ctx):
        yield report
        if os.path.basename(ctx.path) == "boom.py":
            raise KeyError("midway")
rule.check = check
dslint.cli.main(sys.argv[1:])
"""

# A rule that reports a node from another tree (a rule bug positions cannot place).
FOREIGN_NODE = PRELUDE + """
import libcst as cst
rule = all_rules()["DSL501"]
original = rule.check
def check(self, ctx):
    if os.path.basename(ctx.path) == "boom.py":
        yield self.report(cst.Name("elsewhere"), "a node that is not in this file")
        return
    yield from original(self, ctx)
rule.check = check
dslint.cli.main(sys.argv[1:])
"""

# The per-file summary (phase 1, shared by every rule) fails for one file.
BROKEN_SUMMARY = PRELUDE + """
import dslint.check_file
current = []
original_parse, original_summarize = dslint.check_file.parse_file, dslint.check_file.summarize
def parse_file(path, *args):
    current[:] = [os.path.basename(path)]
    return original_parse(path, *args)
def summarize(*args):
    if current == ["boom.py"]:
        raise TypeError("injected summary failure")
    return original_summarize(*args)
dslint.check_file.parse_file, dslint.check_file.summarize = parse_file, summarize
dslint.cli.main(sys.argv[1:])
"""


def run_patched(script: str, *args: str, cwd: Path, shards: bool = False) -> Run:
    env = dict(os.environ)
    env.pop("DSLINT_CACHE_DIR", None)
    env.pop("DSLINT_OUTPUT_FORMAT", None)
    env["NO_COLOR"] = "1"
    if shards:
        env["FORCE_SHARDS"] = "1"
    else:
        env.pop("FORCE_SHARDS", None)
    proc = subprocess.run(
        [sys.executable, "-c", script, "check", *args],
        cwd=cwd,
        capture_output=True,
        env=env,
        timeout=120,
    )
    return Run(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def findings(run: Run) -> set:
    return {
        (m.group(1), m.group(2))
        for m in re.finditer(r"^(\S+?):\d+:\d+: (DSL\d{3}) ", run.stdout, re.MULTILINE)
    }


def internal_errors(run: Run) -> list:
    return [line for line in run.stderr.splitlines() if "internal error" in line]


@pytest.fixture
def project(tmp_path):
    write_files(tmp_path, {"boom.py": SOURCE, "fine.py": SOURCE})
    return tmp_path


def _assert_isolated(run: Run, code: str, expect: set, detail: str) -> None:
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    errors = internal_errors(run)
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"dslint: error: internal error in {code} on boom.py: "), errors
    assert detail in errors[0], errors
    assert findings(run) == expect, (run.stdout, run.stderr)


@pytest.mark.parametrize("shards", [False, True], ids=["in-process", "worker-processes"])
def test_a_raising_rule_is_one_internal_error_and_everything_else_reports(project, shards):
    run = run_patched(RAISING_RULE, "--no-cache", "-v", "--output-format", "concise", ".", cwd=project, shards=shards)
    # boom.py loses only DSL501 (the broken rule); its DSL102 and fine.py's findings remain
    _assert_isolated(run, "DSL501", EVERYTHING - {("boom.py", "DSL501")}, "RuntimeError: injected failure")
    assert ("2 processes" in run.stderr) == shards, run.stderr
    # --exit-zero never hides an internal error
    run = run_patched(RAISING_RULE, "--no-cache", "--exit-zero", ".", cwd=project, shards=shards)
    assert run.returncode == 2 and len(internal_errors(run)) == 1


def test_findings_before_the_failure_are_kept(project):
    run = run_patched(RAISING_MIDWAY, "--no-cache", "--output-format", "concise", ".", cwd=project)
    _assert_isolated(run, "DSL102", EVERYTHING, "KeyError: 'midway'")


def test_the_failure_is_not_cached_as_a_clean_result(project):
    for _ in range(2):  # cold, then warm: the second run must not replay "no DSL501 in boom.py"
        run = run_patched(RAISING_RULE, "--output-format", "concise", ".", cwd=project)
        _assert_isolated(run, "DSL501", EVERYTHING - {("boom.py", "DSL501")}, "injected failure")
    assert (project / ".dslint_cache").is_dir()


def test_a_report_on_a_foreign_node_is_an_internal_error_of_that_rule(project):
    run = run_patched(FOREIGN_NODE, "--no-cache", "--output-format", "concise", ".", cwd=project)
    _assert_isolated(run, "DSL501", EVERYTHING - {("boom.py", "DSL501")}, "not in this file's tree")


@pytest.mark.parametrize("shards", [False, True], ids=["in-process", "worker-processes"])
def test_a_failing_summary_loses_one_file_only(project, shards):
    run = run_patched(BROKEN_SUMMARY, "--no-cache", "-v", "--output-format", "concise", ".", cwd=project, shards=shards)
    _assert_isolated(
        run, "the file summary", {("fine.py", "DSL102"), ("fine.py", "DSL501")}, "TypeError: injected summary failure"
    )
    assert ("2 processes" in run.stderr) == shards, run.stderr


# A worker process that dies outright (a segfault in native code, the OOM killer):
# simulated with os._exit in the shard process while it handles boom.py.
DYING_IN_RULE = PRELUDE + """
rule = all_rules()["DSL501"]
original = rule.check
def check(self, ctx):
    if os.path.basename(ctx.path) == "boom.py":
        os._exit(139)
    return original(self, ctx)
rule.check = check
dslint.cli.main(sys.argv[1:])
"""

DYING_IN_PARSE = PRELUDE + """
import dslint.check_file
original = dslint.check_file.parse_file
def parse_file(path, *args):
    if os.path.basename(path) == "boom.py":
        os._exit(139)
    return original(path, *args)
dslint.check_file.parse_file = parse_file
dslint.cli.main(sys.argv[1:])
"""


@pytest.mark.parametrize("script", [DYING_IN_PARSE, DYING_IN_RULE], ids=["while-parsing", "while-checking"])
def test_a_dead_worker_process_loses_one_file_only(tmp_path, script):
    write_files(tmp_path, {"boom.py": SOURCE, "fine.py": SOURCE, "more.py": SOURCE})
    run = run_patched(script, "--no-cache", "-v", "--output-format", "concise", ".", cwd=tmp_path, shards=True)
    assert "2 processes" in run.stderr, run.stderr
    expect = {(name, code) for name in ("fine.py", "more.py") for code in ("DSL102", "DSL501")}
    _assert_isolated(run, "a worker process", expect, "the process died while checking this file")
