"""The gate never passes silently: what the CLI checks, skips and says, through real
git repositories and real subprocess exit codes."""

from __future__ import annotations

import subprocess

from tests.conftest import run_cli

BAD = (
    "from torch.utils.data import DataLoader, RandomSampler\n"
    "loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)\n"
)


def _repo(tmp_path, files, ignore="generated/\n"):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text(ignore)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run(["git", "add", "-f", *files, ".gitignore"], cwd=tmp_path, check=True)
    return tmp_path


def test_named_file_matched_by_gitignore_is_checked_with_and_without_force_exclude(tmp_path):
    repo = _repo(tmp_path, {"generated/loader.py": BAD})
    for flags in ((), ("--force-exclude",)):
        run = run_cli("check", "--no-cache", "--output-format", "concise", *flags, "generated/loader.py", cwd=repo)
        assert run.returncode == 1, (flags, run.stdout, run.stderr)
        assert "generated/loader.py:2:10: DSL501" in run.stdout


def test_force_exclude_names_the_pattern_that_excluded_each_path(tmp_path):
    repo = _repo(tmp_path, {"vendor/a.py": BAD, "vendor/sub/b.py": BAD},
                 ignore="")
    (repo / "pyproject.toml").write_text('[tool.dslint]\nextend-exclude = ["vendor/"]\n')
    run = run_cli("check", "--no-cache", "--force-exclude", "vendor/a.py", "vendor/sub/b.py", cwd=repo)
    assert run.returncode == 0
    assert "vendor/a.py is excluded by `vendor/` in `extend-exclude`" in run.stderr
    assert "vendor/sub/b.py is excluded by `vendor/` in `extend-exclude`" in run.stderr
    assert "every path given is excluded" in run.stderr
    assert "All checks passed" not in run.stderr


def test_without_force_exclude_a_named_file_beats_the_excludes(tmp_path):
    repo = _repo(tmp_path, {"vendor/a.py": BAD}, ignore="")
    (repo / "pyproject.toml").write_text('[tool.dslint]\nextend-exclude = ["vendor/"]\n')
    run = run_cli("check", "--no-cache", "vendor/a.py", cwd=repo)
    assert run.returncode == 1 and "DSL501" in run.stdout


def test_a_syntax_error_in_a_named_file_is_reported_even_without_data_loading_words(tmp_path):
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    run = run_cli("check", "--no-cache", "--output-format", "concise", "broken.py", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith("broken.py:1:7: DSL000 syntax error")
    piped = run_cli("check", "--no-cache", "--output-format", "concise", "--stdin-filename", "x.py", "-",
                    cwd=tmp_path, input=b"x = (\n")
    assert piped.returncode == 1 and "x.py:1:5: DSL000" in piped.stdout


MULTILINE = """\
from torch.utils.data import DataLoader, RandomSampler

a = DataLoader(  # noqa: DSL501
    ds,
    sampler=RandomSampler(ds),
    shuffle=True,
)
b = DataLoader(
    ds,
    sampler=RandomSampler(ds),
    shuffle=True,  # noqa: DSL501
)
c = dict(  # noqa: DSL501
    loader=DataLoader(ds, sampler=RandomSampler(ds), shuffle=True),
)
d = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)
"""


def test_noqa_on_the_statement_or_the_argument_line_suppresses_a_multiline_call(tmp_path):
    (tmp_path / "loaders.py").write_text(MULTILINE)
    run = run_cli("check", "--no-cache", "--output-format", "concise", "--extend-select", "DSL001", "loaders.py",
                  cwd=tmp_path)
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        "loaders.py:16:5: DSL501 [*] `sampler` and `shuffle=True` are mutually exclusive: the DataLoader raises "
        "`ValueError: sampler option is mutually exclusive with shuffle`"
    ]
    fixed = run_cli("check", "--no-cache", "--fix", "--extend-select", "DSL001", "loaders.py", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    text = (tmp_path / "loaders.py").read_text()
    assert text.count("# noqa: DSL501") == 3  # DSL001 never removes a noqa that suppresses something
    assert "d = DataLoader(ds, sampler=RandomSampler(ds))" in text
