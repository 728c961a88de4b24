"""DSL204 and the project's start method: CUDA in worker code fails only in forked workers.

A project whose every ``set_start_method`` picks ``spawn``/``forkserver`` (in any file) does
not fork its workers; one that sets ``fork``, an unreadable method, or a mix still does.
A project none of whose loaders can start workers (no file names a worker count but as
``num_workers=0``) runs its dataset code in the main process only; a project that builds no
loader at all (a library) may be used by loaders with workers. Real CLI runs, with the cache
on, so that a change to the file that sets the method (or the loader) re-checks the dataset's file.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli, write_files

DATASET = """
import torch
from torch.utils.data import DataLoader, Dataset

class Frames(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, idx):
        return torch.zeros(3).cuda()

loader = DataLoader(Frames(), batch_size=2, num_workers=4)
"""


ROW = 9  # `return torch.zeros(3).cuda()` (write_files drops the leading newline)


def launcher(*methods: str) -> str:
    lines = ["import multiprocessing", "import torch.multiprocessing as mp", "", "def main(method):"]
    for i, method in enumerate(methods):
        setter = "mp" if i % 2 else "multiprocessing"
        lines.append(f"    {setter}.set_start_method({method}, force=True)")
    return "\n".join(lines) + "\n"


def dsl204_rows(root) -> list:
    run = run_cli("check", "--select", "DSL204", "--output-format", "json", ".", cwd=root)
    assert "Traceback" not in run.stderr, run.stderr
    return sorted(f["location"]["row"] for f in json.loads(run.stdout or "[]") if f["code"] == "DSL204")


@pytest.mark.parametrize(
    "methods, reported",
    [
        ((), True),  # nothing set: fork, the Linux default
        (('"spawn"',), False),
        (('"forkserver"', '"spawn"'), False),
        (('"fork"',), True),
        (('"spawn"', '"fork"'), True),  # a mix: some run forks
        (("method",), True),  # unreadable: may be fork
    ],
    ids=["none", "spawn", "forkserver+spawn", "fork", "mixed", "unknown"],
)
def test_dsl204_follows_the_project_start_method(tmp_path, methods, reported):
    files = {"data.py": DATASET}
    if methods:
        files["launch.py"] = launcher(*methods)
    write_files(tmp_path, files)
    assert dsl204_rows(tmp_path) == ([ROW] if reported else [])


def test_setting_spawn_in_another_file_rechecks_the_cached_dataset_file(tmp_path):
    write_files(tmp_path, {"data.py": DATASET, "launch.py": launcher('"fork"')})
    assert dsl204_rows(tmp_path) == [ROW]
    write_files(tmp_path, {"launch.py": launcher('"spawn"')})
    assert dsl204_rows(tmp_path) == []
    write_files(tmp_path, {"launch.py": launcher('"fork"')})
    assert dsl204_rows(tmp_path) == [ROW]


DATASET_ONLY = DATASET.replace("\nloader = DataLoader(Frames(), batch_size=2, num_workers=4)\n", "\n")


@pytest.mark.parametrize(
    "loader, reported",
    [
        (None, True),  # no loader in the project: a library's users may start workers
        ("loader = DataLoader(chosen, batch_size=2)\n", False),
        ("loader = DataLoader(chosen, batch_size=2, num_workers=0)\n", False),
        ("loader = DataLoader(chosen, batch_size=2, num_workers=cfg['workers'])\n", True),
        ("opts = {'num_workers': 2}\nloader = DataLoader(chosen, batch_size=2)\n", True),  # named somewhere
        ("loader = DataLoader(chosen, **opts)\n", True),
        # an option for workers the loaders do not use yet (pinned to 0 while the dataset uses CUDA)
        ("parser.add_argument('--num-workers', type=int, default=8)\nloader = DataLoader(chosen, num_workers=0)\n", True),
    ],
    ids=["library", "no-workers", "zero", "unknown", "named-in-a-dict", "spread", "option"],
)
def test_dsl204_is_silent_when_no_loader_of_the_project_starts_workers(tmp_path, loader, reported):
    files = {"data.py": DATASET_ONLY}
    if loader is not None:
        # the dataset class is picked by name at run time: no loader is known to be over `Frames`
        files["train.py"] = "import data\nfrom torch.utils.data import DataLoader\n\nchosen = getattr(data, cfg['dataset'])()\n" + loader
    write_files(tmp_path, files)
    assert dsl204_rows(tmp_path) == ([ROW] if reported else [])


def test_a_loader_gaining_workers_in_another_file_rechecks_the_cached_dataset_file(tmp_path):
    head = "import data\nfrom torch.utils.data import DataLoader\n\nchosen = getattr(data, cfg['dataset'])()\n"
    write_files(tmp_path, {"data.py": DATASET_ONLY, "train.py": head + "loader = DataLoader(chosen)\n"})
    assert dsl204_rows(tmp_path) == []
    write_files(tmp_path, {"train.py": head + "loader = DataLoader(chosen, num_workers=4)\n"})
    assert dsl204_rows(tmp_path) == [ROW]
