"""The `.pre-commit-hooks.yaml` hook, through the real `pre-commit try-repo`.

pre-commit builds its own virtualenv for the hook and pip-installs dslint into it
(core dependencies only: this also proves the hook never pulls torch).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """A committed copy of this working tree (try-repo only sees committed files)."""
    dest = tmp_path_factory.mktemp("dslint-hook-repo")
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source = REPO / rel
        if not source.is_file():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    _git("init", "-q", cwd=dest)
    _git("add", "-A", cwd=dest)
    _git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "snapshot", cwd=dest)
    return dest


@pytest.fixture
def user_repo(tmp_path) -> Path:
    _git("init", "-q", cwd=tmp_path)
    (tmp_path / "bad.py").write_text(
        "from torch.utils.data import DataLoader, RandomSampler\n"
        "loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)\n"
    )
    (tmp_path / "good.py").write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=2)\n")
    (tmp_path / "README.md").write_text("not python\n")
    _git("add", "-A", cwd=tmp_path)
    return tmp_path


def try_repo(hook_repo: Path, user_repo: Path, *files: str):
    env = dict(os.environ, PRE_COMMIT_HOME=str(hook_repo.parent / "pre-commit-home"))  # shared: one hook env
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), "dslint", "--verbose", "--files", *files],
        cwd=user_repo,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def test_bad_file_fails_the_hook(hook_repo, user_repo):
    run = try_repo(hook_repo, user_repo, "bad.py")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "bad.py:2:10: DSL501" in run.stdout
    assert "Failed" in run.stdout


def test_clean_file_passes_the_hook(hook_repo, user_repo):
    run = try_repo(hook_repo, user_repo, "good.py")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout


def test_no_python_files_skips_the_hook(hook_repo, user_repo):
    run = try_repo(hook_repo, user_repo, "README.md")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Skipped" in run.stdout


def test_hook_manifest_matches_the_convention():
    import yaml

    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "dslint")
    assert hook["entry"] == "dslint check --force-exclude"
    assert hook["language"] == "python"
    assert hook["types_or"] == ["python", "pyi", "jupyter"]
    assert hook["require_serial"] is True


def test_a_tracked_file_that_gitignore_matches_is_still_checked(hook_repo, tmp_path):
    """pre-commit passes tracked files; ``--force-exclude`` applies configured excludes to
    them, never ``.gitignore`` (which only keeps untracked files out)."""
    _git("init", "-q", cwd=tmp_path)
    (tmp_path / ".gitignore").write_text("generated/\n")
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "loader.py").write_text(
        "from torch.utils.data import DataLoader, RandomSampler\n"
        "loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)\n"
    )
    _git("add", "-f", ".gitignore", "generated/loader.py", cwd=tmp_path)
    run = try_repo(hook_repo, tmp_path, "generated/loader.py")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "generated/loader.py:2:10: DSL501" in run.stdout


def test_a_notebook_fails_the_hook_at_its_cell(hook_repo, user_repo):
    """``types_or`` includes ``jupyter``: pre-commit passes notebooks, and the finding
    points at the cell."""
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook()
    nb.cells = [
        new_markdown_cell("# Loading"),
        new_code_cell("%matplotlib inline\nfrom torch.utils.data import DataLoader, RandomSampler"),
        new_code_cell("loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)"),
    ]
    nbformat.write(nb, str(user_repo / "train.ipynb"))
    _git("add", "train.ipynb", cwd=user_repo)
    run = try_repo(hook_repo, user_repo, "train.ipynb")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "train.ipynb:cell 3:1:10: DSL501" in run.stdout
