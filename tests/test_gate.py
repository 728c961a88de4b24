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


# A package whose findings need facts from other files: a dataset base class, a
# DataLoader built elsewhere over a dataset (its num_workers and worker_init_fn), a
# worker_init_fn defined in one file and passed to a DataLoader in another, and a
# script directory (no __init__.py) whose modules import each other by plain name.
CROSS_FILE_PROJECT = {
    "pkg/__init__.py": "",
    "pkg/base.py": (
        "from torch.utils.data import Dataset\n\n\n"
        "class Base(Dataset):\n"
        "    def __init__(self, root):\n        self.root = root\n\n"
        "    def __len__(self):\n        return 10\n\n\n"
        "class Reader:\n"
        "    def __init__(self, files):\n        self.files = files\n\n"
        "    def __iter__(self):\n"
        "        for name in self.files:\n"
        "            with open(name) as f:\n"
        "                yield from f\n"
    ),
    "pkg/data.py": (
        "from torch.utils.data import IterableDataset\n\n"
        "from pkg.base import Base, Reader\n\n\n"
        "class Items(Base):\n"
        "    def __getitem__(self, index):\n        return index\n\n\n"
        "class Stream(IterableDataset):\n"
        "    def __init__(self, files):\n        self.files = files\n\n"
        "    def __iter__(self):\n"
        "        for name in self.files:\n"
        "            with open(name) as f:\n"
        "                for line in f:\n"
        "                    yield line\n\n\n"
        "class Lines(Reader, IterableDataset):\n    pass\n"
    ),
    "pkg/sub/__init__.py": "",
    "pkg/sub/seeding.py": "import numpy as np\n\n\ndef worker_init(worker_id):\n    np.random.seed(0)\n",
    "pkg/train.py": (
        "from torch.utils.data import DataLoader\n\n"
        "from pkg.data import Items, Lines, Stream\n"
        "from pkg.sub.seeding import worker_init\n\n"
        "stream = DataLoader(Stream(['a.txt']), num_workers=4, worker_init_fn=worker_init)\n"
        "lines = DataLoader(Lines(['a.txt']), num_workers=2)\n"
        "items = DataLoader(Items('root'), batch_size=4, num_workers=2, worker_init_fn=worker_init)\n"
        "once = Stream(name for name in ['a.txt', 'b.txt'])\n"
    ),
    "scripts/shard.py": (
        "import torch\n\n\n"
        "def shard(worker_id):\n"
        "    info = torch.utils.data.get_worker_info()\n"
        "    info.dataset.files = info.dataset.files[worker_id::info.num_workers]\n"
    ),
    "scripts/files.py": (
        "from torch.utils.data import IterableDataset\n\n\n"
        "class Files(IterableDataset):\n"
        "    def __init__(self, files):\n        self.files = files\n\n"
        "    def __iter__(self):\n"
        "        for f in self.files:\n"
        "            yield f\n"
    ),
    "scripts/run.py": (
        "from torch.utils.data import DataLoader\n\n"
        "from files import Files\nfrom shard import shard\n\n"
        "loader = DataLoader(Files(['a', 'b']), num_workers=4, worker_init_fn=shard)\n"
    ),
}


def _findings(run):
    import json

    assert run.returncode in (0, 1), run.stderr
    return sorted(
        (d["filename"], d["location"]["row"], d["location"]["column"], d["code"], d["severity"], d["message"])
        for d in json.loads(run.stdout)
    )


def test_findings_do_not_depend_on_which_files_of_the_project_are_named(tmp_path):
    """Every file's findings are the same whether it is checked alone or with its whole
    project: the rest of its package is read for cross-file facts (never reported)."""
    repo = _repo(tmp_path, CROSS_FILE_PROJECT, ignore="")
    flags = ("check", "--no-cache", "--output-format", "json", "--preview", "--select", "ALL")
    whole = _findings(run_cli(*flags, "pkg", "scripts", cwd=repo))
    codes = {f[3] for f in whole}
    # the project exercises cross-file facts of several families
    assert {"DSL302", "DSL303", "DSL403"} <= codes, whole
    assert any(f[3] == "DSL303" and f[0].endswith("pkg/base.py") for f in whole), "an inherited __iter__"
    for name in CROSS_FILE_PROJECT:
        alone = _findings(run_cli(*flags, name, cwd=repo))
        assert alone == [f for f in whole if f[0].endswith(name)], name
    # source read from stdin for a file of the package (an editor) sees the package too
    seeding = "pkg/sub/seeding.py"
    piped = _findings(run_cli(*flags, "--stdin-filename", seeding, "-", cwd=repo, input=(repo / seeding).read_bytes()))
    assert [f[1:] for f in piped] == [f[1:] for f in whole if f[0].endswith(seeding)] != []
    # a sub-package named alone sees the rest of its top-level package too
    assert _findings(run_cli(*flags, "pkg/sub", cwd=repo)) == [f for f in whole if "/pkg/sub/" in f[0]]


def test_a_named_file_is_rechecked_when_another_file_of_its_package_changes(tmp_path):
    """The cache (and the record of a whole run) covers the files read for context."""
    repo = _repo(tmp_path, CROSS_FILE_PROJECT, ignore="")
    flags = ("check", "--output-format", "json", "--select", "DSL403")
    first = _findings(run_cli(*flags, "pkg/sub/seeding.py", cwd=repo))
    assert [f[3] for f in first] == ["DSL403"]
    assert _findings(run_cli(*flags, "pkg/sub/seeding.py", cwd=repo)) == first
    train = repo / "pkg/train.py"
    train.write_text(train.read_text().replace("worker_init_fn=worker_init", "worker_init_fn=None"))
    assert _findings(run_cli(*flags, "pkg/sub/seeding.py", cwd=repo)) == []


def test_excluded_files_of_the_package_are_not_read_for_context(tmp_path):
    repo = _repo(tmp_path, CROSS_FILE_PROJECT, ignore="")
    (repo / "pyproject.toml").write_text('[tool.dslint]\nextend-exclude = ["pkg/train.py"]\n')
    run = run_cli("check", "--no-cache", "--output-format", "json", "--select", "DSL403", "pkg/sub/seeding.py", cwd=repo)
    assert _findings(run) == []
