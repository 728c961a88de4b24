"""What the calls of the project's other files pass to a module-level function's parameter is a
possible value of it (``call_sites.other_file_literals``), a ``**`` dict the caller builds included
(``call_facts.passed_arguments`` with the summaries' ``FileSource``)."""

from __future__ import annotations

from tests.conftest import check_tree, write_files

_BUILDER = """
from torch.utils.data import DataLoader


def build(dataset, per_gpu, gpus=1, dist=True, persistent_workers=True, **kwargs):
    if dist:
        workers = per_gpu
    else:
        workers = gpus * per_gpu
    kwargs["persistent_workers"] = persistent_workers
    return DataLoader(dataset, batch_size=4, num_workers=workers, **kwargs)
"""

_CALLER = """
from pkg.builder import build


def train(dataset, cfg):
    loader = build(dataset, per_gpu=cfg.workers)
    if cfg.precise_bn:
{setting}
        return loader, build(dataset, **setting)
    return loader
"""


def _found(tmp_path, setting, select=("DSL503",)):
    files = {"pkg/__init__.py": "", "pkg/builder.py": _BUILDER, "pkg/train.py": _CALLER.format(setting=setting)}
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=list(select), preview=False)  # (with --preview a user's count counts)
    assert not outcome.result.internal_errors
    return [(d.path, d.row, d.message) for d in outcome.diagnostics]


def test_a_zero_another_file_passes_through_a_dict_reaches_the_builders_loader(tmp_path):
    found = _found(tmp_path / "a", "        setting = dict(per_gpu=0, gpus=1, dist=False)")
    assert [(p, r) for p, r, _ in found] == [("pkg/builder.py", 10)]
    assert "`train` in `pkg/train.py` passes `0`" in found[0][2]
    # a dict literal, and a key written after building it
    found = _found(tmp_path / "b", "        setting = {'gpus': 1}\n        setting['per_gpu'] = 0")
    assert [(p, r) for p, r, _ in found] == [("pkg/builder.py", 10)]


def test_workers_or_a_dict_that_may_hold_other_keys_stay_silent(tmp_path):
    assert _found(tmp_path / "a", "        setting = dict(per_gpu=2, dist=False)") == []
    # the dict is handed to another function first: it may change there
    assert _found(tmp_path / "b", "        setting = dict(per_gpu=0)\n        cfg.tweak(setting)") == []
    # entries that disagree: unknown
    assert _found(tmp_path / "c", "        setting = dict(per_gpu=0) if cfg.debug else dict(per_gpu=2)") == []
    # the caller turns the option off with the zero
    assert _found(tmp_path / "d", "        setting = dict(per_gpu=0, persistent_workers=False)") == []
