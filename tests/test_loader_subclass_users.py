"""DSL506 on a module-level DataLoader subclass that hands its callers' ``**kwargs`` (the worker count) on
to ``super().__init__`` with a lambda ``collate_fn``: reported by default when a construction of the project
passes ``num_workers`` (this file or another: the summaries' ``worker_kwargs``); with none, its users choose
the workers (``worker_counts.workers_only_by_choice``), a preview form."""

from __future__ import annotations

from tests.conftest import check_tree, write_files

_LOADERS = """
import torch


class GraphLoader(torch.utils.data.DataLoader):
    def __init__(self, dataset, batch_size=1, shuffle=True, **kwargs):
        super().__init__(dataset, batch_size, shuffle, collate_fn=lambda items: list(items), **kwargs)
"""


def _rows(tmp_path, files, preview):
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=["DSL506"], preview=preview)
    assert not outcome.result.internal_errors
    return [(d.path, d.row) for d in outcome.diagnostics]


def test_a_subclass_no_construction_gives_workers_is_left_to_its_users(tmp_path):
    files = {"loaders.py": _LOADERS, "train.py": "from loaders import GraphLoader\n\ndef main(ds):\n    return GraphLoader(ds, 32)\n"}
    assert _rows(tmp_path / "a", files, preview=False) == []
    assert _rows(tmp_path / "b", files, preview=True) == [("loaders.py", 6)]


def test_a_construction_with_workers_in_any_file_reports_it_by_default(tmp_path):
    other = "from loaders import GraphLoader\n\ndef main(ds, args):\n    return GraphLoader(ds, 32, num_workers=args.workers)\n"
    assert _rows(tmp_path / "a", {"loaders.py": _LOADERS, "train.py": other}, preview=False) == [("loaders.py", 6)]
    same = _LOADERS + "\n\ndef build(ds):\n    return GraphLoader(ds, 8, num_workers=4)\n"
    assert _rows(tmp_path / "b", {"loaders.py": same}, preview=False) == [("loaders.py", 6)]

