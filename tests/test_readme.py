"""The README's commands work exactly as written.

- The pre-commit snippet goes, as written, into a temporary git repository's
  ``.pre-commit-config.yaml`` with ``repo:`` pointing at a committed copy of this
  working tree (pre-commit only sees committed files) and ``rev:`` at that copy's HEAD;
  real ``pre-commit run --all-files`` must fail on a bad file and pass on a clean one.
  ``pre-commit autoupdate``, as the README explains it, must move ``rev`` to HEAD.
- The ``rev`` the README names is a commit of this repository that has the hook.
- The install lines run in a fresh virtual environment (they need PyPI for the core
  dependencies, like ``.ci/run``).
- Every ``dslint check`` flag and output format the usage section names exists, and
  the configuration examples are valid configuration.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, run_cli

README = (REPO / "README.md").read_text(encoding="utf-8")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def section(heading: str) -> str:
    """The README text from ``heading`` (a whole line) to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    match = re.search(rf"^{re.escape(heading)}\n", README, re.M)
    assert match, f"no {heading!r} in README.md"
    rest = README[match.end():]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def blocks(text: str, lang: str) -> list:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def git(*args, cwd) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit_all(path: Path) -> None:
    git("add", "-A", cwd=path)
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "snapshot", cwd=path)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A committed copy of this working tree: tracked and untracked-but-not-ignored files."""
    dest = tmp_path_factory.mktemp("dslint-checkout") / "dslint"
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source = REPO / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)
    git("init", "-q", cwd=dest)
    commit_all(dest)
    return dest


# ------------------------------------------------------------------- pre-commit


def precommit_snippet() -> str:
    found = blocks(section("### pre-commit"), "yaml")
    assert len(found) == 1, "the pre-commit section must hold exactly one yaml block"
    return found[0]


def user_repo(root: Path, config: str) -> Path:
    root.mkdir()
    git("init", "-q", cwd=root)
    (root / ".pre-commit-config.yaml").write_text(config)
    (root / "bad.py").write_text(
        "from torch.utils.data import DataLoader, RandomSampler\n"
        "loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)\n"
    )
    (root / "good.py").write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=2)\n")
    git("add", "-A", cwd=root)
    return root


def pre_commit(*args, cwd: Path, home: Path):
    env = dict(os.environ, PRE_COMMIT_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=900)


def test_precommit_snippet_names_this_repository_and_a_commit():
    from dslint.docs import REPOSITORY_URL

    config = yaml.safe_load(precommit_snippet())
    (repo,) = config["repos"]
    assert repo["repo"] == REPOSITORY_URL
    assert SHA_RE.match(str(repo["rev"])), f"rev must be a full commit SHA, got {repo['rev']!r}"
    assert [hook["id"] for hook in repo["hooks"]] == ["dslint"]


def test_readme_rev_is_a_commit_of_this_repository_with_the_hook():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    if git("rev-parse", "--is-shallow-repository", cwd=REPO) == "true":
        pytest.skip("a shallow clone does not hold the history the README's rev points into")
    rev = yaml.safe_load(precommit_snippet())["repos"][0]["rev"]
    assert git("cat-file", "-t", rev, cwd=REPO) == "commit"
    hooks = yaml.safe_load(git("show", f"{rev}:.pre-commit-hooks.yaml", cwd=REPO))
    assert any(hook["id"] == "dslint" for hook in hooks)


@pytest.mark.slow
def test_precommit_snippet_runs_as_written(checkout, tmp_path):
    from dslint.docs import REPOSITORY_URL

    snippet = precommit_snippet()
    readme_rev = yaml.safe_load(snippet)["repos"][0]["rev"]
    head = git("rev-parse", "HEAD", cwd=checkout)
    config = snippet.replace(f"repo: {REPOSITORY_URL}", f"repo: {checkout}").replace(f"rev: {readme_rev}", f"rev: {head}")
    assert config != snippet and yaml.safe_load(config)["repos"][0] == {"repo": str(checkout), "rev": head, "hooks": [{"id": "dslint"}]}
    repo = user_repo(tmp_path / "user", config)
    home = tmp_path / "pre-commit-home"

    failed = pre_commit("run", "--all-files", cwd=repo, home=home)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "bad.py:2:10: DSL501" in failed.stdout and "Failed" in failed.stdout

    git("rm", "-q", "-f", "bad.py", cwd=repo)
    passed = pre_commit("run", "--all-files", cwd=repo, home=home)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout


@pytest.mark.slow
def test_precommit_autoupdate_moves_rev_to_the_newest_commit(checkout, tmp_path):
    """As the README says: with no tags, ``pre-commit autoupdate`` pins the branch head."""
    from dslint.docs import REPOSITORY_URL

    snippet = precommit_snippet()
    repo = user_repo(tmp_path / "user", snippet.replace(f"repo: {REPOSITORY_URL}", f"repo: {checkout}"))
    run = pre_commit("autoupdate", cwd=repo, home=tmp_path / "pre-commit-home")
    assert run.returncode == 0, run.stdout + run.stderr
    updated = yaml.safe_load((repo / ".pre-commit-config.yaml").read_text())["repos"][0]
    assert updated["rev"] == git("rev-parse", "HEAD", cwd=checkout)


# ------------------------------------------------------------------- install


def install_blocks() -> list:
    return blocks(section("## Install"), "bash")


def run_lines(block: str, *, cwd: Path, venv: Path, checkout: Path) -> None:
    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", VIRTUAL_ENV=str(venv))
    env.pop("PYTHONPATH", None)
    for line in block.strip().splitlines():
        command = line.replace("/path/to/dslint", str(checkout))
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


@pytest.mark.slow
def test_install_lines_work_as_written(checkout, tmp_path):
    from dslint import __version__

    install, wheel = install_blocks()
    assert "/path/to/dslint" in install and "torch-dslint" not in install.replace("torch_dslint", "")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    run_lines(install, cwd=tmp_path, venv=venv, checkout=checkout)
    dslint = venv / "bin" / "dslint"
    version = subprocess.run([str(dslint), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and __version__ in version.stdout
    (tmp_path / "bad.py").write_text(
        "from torch.utils.data import DataLoader, RandomSampler\n"
        "loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)\n"
    )
    check = subprocess.run([str(dslint), "check", "--no-cache", "bad.py"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 1 and "DSL501" in check.stdout
    torch_installed = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True)
    assert torch_installed.returncode != 0  # the core install never pulls torch

    run_lines(wheel, cwd=tmp_path, venv=venv, checkout=checkout)
    assert [p.name for p in (tmp_path / "dist").glob("*.whl")] == [f"torch_dslint-{__version__}-py3-none-any.whl"]


def test_the_runtime_extra_the_readme_names_exists():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert '"/path/to/dslint[runtime]"' in section("## Install") and "runtime" in extras
    # no install instruction names the unpublished release
    for heading in ("## Install", "## Usage", "## In CI", "### Your own datasets: `dslint probe` and `dslint bench`"):
        text = section(heading)
        if heading.startswith("### Your own"):
            text = text.split("#### TARGET")[0]
        assert not re.search(r"pip install ['\"]?torch-dslint", text), heading


# ------------------------------------------------------------------- usage


def test_every_flag_and_format_the_usage_section_names_exists():
    from dslint.formats import FORMATS

    usage = section("## Usage")
    help_text = run_cli("check", "--help").stdout
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", "\n".join(blocks(usage, "bash"))))
    assert flags and not [flag for flag in flags if flag not in help_text]
    table = re.findall(r"^\| `([a-z-]+)` \|", usage, re.M)
    assert table == list(FORMATS)
    listed = re.search(r"--output-format json\s+# (.*)", usage).group(1)
    assert [name.replace(" (default)", "") for name in listed.split(", ")] == list(FORMATS)


def test_configuration_examples_are_valid_configuration(tmp_path):
    examples = blocks(section("### Configuration"), "toml") + blocks(section("## Usage"), "toml")
    assert len(examples) == 2
    for i, example in enumerate(examples):
        project = tmp_path / str(i)
        project.mkdir()
        (project / "pyproject.toml").write_text(example)
        run = run_cli("check", "--show-settings", ".", cwd=project)
        assert run.returncode == 0, run.stderr
        for key, value in tomllib.loads(example)["tool"]["dslint"].items():
            if key == "cache-dir":  # shown resolved against the configuration's folder
                value = str(project / value)
            if isinstance(value, bool):
                assert f"{key} = {str(value).lower()}" in run.stdout
            elif isinstance(value, str):
                assert f'{key} = "{value}"' in run.stdout


# ------------------------------------------------------------------- evidence


def cited_pitfalls() -> set:
    """Every pitfall id a rule cites, as ``PITFALLS.md` IT-2, W4`` or ``evidence.md#it-2``."""
    ids = set()
    for path in (REPO / "dslint" / "rules").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for listed in re.findall(r"PITFALLS\.md`\s+([A-Z0-9, -]+?)(?:\s*\(|\s*$)", text, re.M):
            ids.update(part.strip() for part in listed.split(",") if part.strip())
        ids.update(anchor.upper() for anchor in re.findall(r"evidence\.md#([a-z0-9-]+)", text))
    return ids


def test_evidence_page_has_a_stable_section_for_every_cited_pitfall():
    page = (REPO / "docs" / "evidence.md").read_text(encoding="utf-8")
    # the ids the rules cite today, and any a rule cites later (by either spelling)
    for pitfall in sorted(cited_pitfalls() | {"IT-1", "IT-2", "W4", "A26", "PERF-1", "MP-1"}):
        assert f'<a id="{pitfall.lower()}"></a>' in page, pitfall
        assert re.search(rf"^## {re.escape(pitfall)}$", page, re.M), pitfall
    # every relative link on the page leads to a file of this repository
    for target in re.findall(r"\]\((?!https?:|#)([^)#]+)", page):
        assert (REPO / "docs" / target).resolve().exists(), target


def test_contributing_and_docs_link_nothing_outside_the_repository():
    for path in [REPO / "CONTRIBUTING.md", *(REPO / "docs").glob("*.md")]:
        text = path.read_text(encoding="utf-8")
        assert "../shared/" not in text and "PITFALLS.md" not in text, path
