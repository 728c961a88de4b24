"""DSL401 and a class that decides its own pickling (``__getstate__``/``__setstate__``): its state serves spawned
workers only (``pre_fork.decides_pickling``; a store in ``__setstate__`` is no reopen for forked ones, see
``tests/test_fork_rules.py``), and a handle no per-sample code reads, dropped from that state, stops none."""

from __future__ import annotations

from tests.conftest import check_tree, write_files


_UNREAD = """
import h5py
import numpy as np
from torch.utils.data import Dataset


class Tokens(Dataset):
    def __init__(self, path):
        self.path = path
        self.data = h5py.File(path, "r")
        self.tokens = np.array(self.data["tokens"])
{hooks}
    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, i):
        return self.tokens[i]
"""

_HOOKS = """
    def __getstate__(self):
        state = dict(self.__dict__)
        state["data"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.data = h5py.File(self.path, "r")
"""


def test_dsl401_a_handle_no_sample_reads_is_left_alone_by_a_class_with_its_own_pickling(tmp_path):
    # (DSL401's preview form: the handle would stop spawn-started workers, unless the class drops it from its state)
    write_files(tmp_path / "a", {"data.py": _UNREAD.replace("{hooks}", "")})
    assert [d.row for d in check_tree(tmp_path / "a", select=["DSL401"]).diagnostics] == [9]
    write_files(tmp_path / "b", {"data.py": _UNREAD.replace("{hooks}", _HOOKS)})
    assert check_tree(tmp_path / "b", select=["DSL401"]).diagnostics == []
