"""Shared test helpers: the real CLI in a subprocess, and in-process checks of snippets."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Union

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"

#: A dataset with one finding of the default set, for the tests of the CLI's mechanics
#: (selection, config, cache, formats, suppressions): a library handle opened per sample
#: and never closed, DSL102 with its `with` fix, at line 7, column 16. (A Python file
#: object used and dropped at once, `json.load(open(p))`, is only the opt-in DSL104's.)
PER_SAMPLE_HANDLE = """
import tables
from torch.utils.data import Dataset


class Rasters(Dataset):
    def __getitem__(self, i):
        return tables.open_file(self.files[i]).read()
"""


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, cwd: Optional[Path] = None, input: Optional[bytes] = None, env: Optional[dict] = None, timeout: int = 300) -> Run:
    """``python -m dslint ARGS`` exactly as a user runs it."""
    full_env = dict(os.environ)
    full_env.pop("DSLINT_CACHE_DIR", None)
    full_env.pop("DSLINT_OUTPUT_FORMAT", None)
    full_env["NO_COLOR"] = "1"
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-m", "dslint", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        env=full_env,
        timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def run_with_terminal_stderr(args: List[str], cwd: Path, timeout: int = 120):
    """Run ``python -m dslint *args`` with stderr on a pseudo-terminal (so progress is drawn
    as on a user's terminal): (returncode, what the terminal showed, stdout)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dslint", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=slave, env=dict(os.environ, NO_COLOR="1"))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=timeout)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace"), out.decode()


def write_files(root: Path, files: Union[str, Dict[str, str]]) -> List[Path]:
    if isinstance(files, str):
        files = {"example.py": files}
    written = []
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content).lstrip("\n"))
        written.append(path)
    return written


def check_tree(root: Path, *, select: Optional[List[str]] = None, preview: bool = True, prefilter: bool = True, jobs: int = 1):
    """Findings for every file under ``root``, in-process (no cache)."""
    from dslint import api
    from dslint.config import build_settings

    overrides = {"preview": preview}
    if select:
        overrides["select"] = select
    settings = build_settings([str(root)], isolated=True, overrides=overrides, cwd=root)
    options = api.CheckOptions(use_cache=False, use_prefilter=prefilter, jobs=jobs)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        outcome = api.check(["."], settings, options)
    finally:
        os.chdir(cwd)
    return outcome


def expected_markers(root: Path) -> set:
    """{(relative path, row, code)} from ``# expect: CODE[, CODE]`` comments."""
    import re

    found = set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for row, line in enumerate(path.read_text().splitlines(), 1):
            m = re.search(r"#\s*expect:\s*([A-Z0-9, ]+)", line)
            if m:
                for code in re.findall(r"DSL\d{3}", m.group(1)):
                    found.add((rel, row, code))
    return found


@pytest.fixture
def cli():
    return run_cli
