"""Every safe fix keeps what the code does on every path the value analysis sees.

For each rule and each of its invalid cases, the safe fixes are applied (as
``dslint check --fix`` would) and every DataLoader construction of the file is
compared before and after:

* a positional argument never moves to another parameter (removing ``shuffle``
  from ``DataLoader(ds, 8, True, sampler)`` would pass the sampler as
  ``shuffle``);
* an argument is removed only when its removal changes nothing on any path:
  its value is the default on every path, or torch ignores or refuses it on
  every path (``shuffle`` next to a sampler that is set on every path; a
  sampler that can be ``None`` makes ``shuffle`` matter on that path);
* an argument whose values are known before and after keeps the same values,
  unless torch ignores or refuses it on every path.
"""

from __future__ import annotations

import os
import textwrap

import pytest

from dslint.check_file import file_contexts
from dslint.rules.base import all_rules, as_invalid
from dslint.semantics.calls import UNKNOWN, dataloader_constructions
from dslint.semantics.loops import loader_loops
from dslint.semantics.scopes import is_none
from dslint.semantics.values import possible
from tests.conftest import write_files

#: argument -> (other argument, what it must be on every path for torch to ignore or refuse the first)
MASKED_BY = {
    "shuffle": (("sampler", "set"), ("batch_sampler", "set")),
    "batch_size": (("batch_sampler", "set"),),
    "drop_last": (("batch_sampler", "set"),),
}

CASES = []
for _code, _rule in all_rules().items():
    for _i, _case in enumerate(_rule.invalid):
        _case = as_invalid(_case)
        if _case.expected_replacement is not None:
            CASES.append(pytest.param(_code, _case.code, id=f"{_code}-invalid-{_i}"))


def _files(case) -> dict:
    files = {"example.py": case} if isinstance(case, str) else case
    return {name: textwrap.dedent(text).lstrip("\n") for name, text in files.items()}


def _safe_fix(tmp_path, code, case) -> dict:
    from dslint import api
    from dslint.config import build_settings

    write_files(tmp_path, case)
    settings = build_settings([str(tmp_path)], isolated=True, overrides={"preview": True, "select": [code]}, cwd=tmp_path)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        state = api.fix(["."], settings, api.CheckOptions(use_cache=False), unsafe=False)
    finally:
        os.chdir(cwd)
    assert not state.errors
    return {os.path.relpath(path, ".").replace("\\", "/"): text for path, text in state.results.items()}


def _constructions(name: str, text: str):
    ctx = file_contexts({name: text})[name]
    return ctx, loader_loops(ctx), dataloader_constructions(ctx)


def _always(ctx, index, bound, name, what) -> bool:
    expr = bound.expr(name)
    if what == "set":
        nodes = index.value_nodes(expr) if expr is not None else None
        return bool(nodes) and not any(is_none(n) for n in nodes)
    return False


def _known(ctx, expr):
    found = possible(ctx, expr)
    return {repr(v.value) for v in found.values} if found.complete and found.values else None


def unsafe_changes(name: str, before: str, after: str):
    """What the fix changed that may change behaviour (an empty list for a safe fix)."""
    problems = []
    ctx_a, index_a, calls_a = _constructions(name, before)
    ctx_b, _, calls_b = _constructions(name, after)
    if len(calls_a) != len(calls_b):
        return [f"{len(calls_a)} DataLoader constructions became {len(calls_b)}"]
    for old, new in zip(calls_a, calls_b):
        old_code = {param: ctx_a.code(arg.value).strip() for param, arg in old.args.items()}
        new_code = {param: ctx_b.code(arg.value).strip() for param, arg in new.args.items()}
        for param, code in old_code.items():
            if old.args[param].keyword is not None:
                continue  # a keyword argument cannot move
            moved = [p for p, c in new_code.items() if c == code and p != param and param not in new_code]
            if moved:
                problems.append(f"`{code}` moved from `{param}` to `{moved[0]}`")
        for param in old_code.keys() - new_code.keys():
            default = old.signature.defaults.get(param, UNKNOWN)
            values = _known(ctx_a, old.expr(param))
            if values is not None and values == {repr(default)}:
                continue  # the default on every path: removing it changes nothing
            masks = MASKED_BY.get(param, ())
            if not any(_always(ctx_a, index_a, old, other, what) for other, what in masks):
                problems.append(f"`{param}` removed, but it matters on a path where {', '.join(m[0] for m in masks) or 'nothing'} does not mask it")
        for param in old_code.keys() & new_code.keys():
            if old_code[param] == new_code[param]:
                continue
            if any(_always(ctx_a, index_a, old, other, what) for other, what in MASKED_BY.get(param, ())):
                continue  # ignored or refused on every path whatever it says
            before_values, after_values = _known(ctx_a, old.expr(param)), _known(ctx_b, new.expr(param))
            if before_values is not None and after_values is not None:
                same = {eval(v) for v in before_values} == {eval(v) for v in after_values}  # noqa: S307 (reprs of literals)
                if not same:
                    problems.append(f"`{param}` changed from {sorted(before_values)} to {sorted(after_values)}")
    return problems


@pytest.mark.parametrize("code,case", CASES)
def test_safe_fixes_keep_every_path(tmp_path, code, case):
    files = _files(case)
    fixed = _safe_fix(tmp_path, code, files)
    for name, after in fixed.items():
        assert unsafe_changes(name, files[name], after) == [], (code, name)


def test_the_check_catches_what_the_old_fixes_did():
    """The two fixes DSL501 used to offer, as the checker sees them."""
    shifted = unsafe_changes(
        "a.py",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, 8, True, sampler)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, 8, sampler)\n",
    )
    assert any("moved from `sampler` to `shuffle`" in p for p in shifted)
    lost = unsafe_changes(
        "a.py",
        "from torch.utils.data import DataLoader, DistributedSampler\n"
        "sampler = DistributedSampler(ds) if distributed else None\n"
        "loader = DataLoader(ds, sampler=sampler, shuffle=True)\n",
        "from torch.utils.data import DataLoader, DistributedSampler\n"
        "sampler = DistributedSampler(ds) if distributed else None\n"
        "loader = DataLoader(ds, sampler=sampler)\n",
    )
    assert any("`shuffle` removed" in p for p in lost)
    kept = unsafe_changes(
        "a.py",
        "from torch.utils.data import DataLoader, RandomSampler\nloader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)\n",
        "from torch.utils.data import DataLoader, RandomSampler\nloader = DataLoader(ds, sampler=RandomSampler(ds))\n",
    )
    assert kept == []
