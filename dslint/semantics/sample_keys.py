"""Which values in ``__getitem__`` are distinct for every sample.

A cache keyed by such a value (``self.cache[key] = h5py.File(p)`` behind ``if key not in
self.cache``) gains one entry per sample, not one per file or per worker. A key is
distinct per sample when it is:

* the index parameter of ``__getitem__`` itself, never rebound there;
* the entry of a table on ``self`` read with that index (``self.paths[idx]``), directly
  or through a name bound once to it (``path = self.paths[idx]``), when the class's
  ``__len__`` returns ``len(self.paths)``: the dataset has one entry of that table per
  sample, so each sample reads its own. A tuple unpacked from the entry (``shard, row =
  self.index[idx]``) is not: a shard is shared by many rows.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.bindings import names_in_target
from dslint.semantics.classes import methods
from dslint.semantics.regions import self_attr
from dslint.semantics.walk import plain_returns


def distinct_per_sample(ctx, key) -> bool:
    """``key`` (an expression in a ``__getitem__``) takes a different value for every sample."""
    func = ctx.enclosing_function(key)
    if func is None or func.name.value != "__getitem__" or ctx.method_class(func) is None:
        return False
    params = func.params.params
    if len(params) < 2:
        return False
    selfp, index = params[0].name.value, params[1].name.value
    if _rebound(ctx, func, index):
        return False
    if isinstance(key, cst.Name) and key.value == index:
        return True
    if isinstance(key, cst.Name) and not _rebound(ctx, func, key.value, allowed=1):
        key = _only_value(ctx, func, key.value)
    table = _table_read(key, selfp, index)
    return table is not None and _length_table(ctx, ctx.method_class(func)) == table


def _rebound(ctx, func, name: str, allowed: int = 0) -> bool:
    """``name`` is bound more than ``allowed`` times in ``func`` (any target form)."""
    count = sum(
        1 for assign in ctx.nodes(cst.AssignTarget) if name in names_in_target(assign.target) and ctx.enclosing_function(assign) is func
    )
    count += sum(1 for node in ctx.nodes(cst.For) if name in names_in_target(node.target) and ctx.enclosing_function(node) is func)
    return count > allowed


def _only_value(ctx, func, name: str) -> Optional[cst.BaseExpression]:
    for assign in ctx.nodes(cst.Assign):
        if ctx.enclosing_function(assign) is not func or len(assign.targets) != 1:
            continue
        target = assign.targets[0].target
        if isinstance(target, cst.Name) and target.value == name:
            return assign.value
    return None


def _table_read(expr, selfp: str, index: str) -> Optional[str]:
    """``X`` for ``self.X[index]``."""
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key = expr.slice[0].slice.value
    if not isinstance(key, cst.Name) or key.value != index:
        return None
    return self_attr(expr.value, selfp)


def _length_table(ctx, cls: cst.ClassDef) -> Optional[str]:
    """``X`` when the class's ``__len__`` only returns ``len(self.X)``."""
    length = methods(cls).get("__len__")
    if length is None or not length.params.params:
        return None
    selfp = length.params.params[0].name.value
    found = set()
    for ret in plain_returns(length, ctx.tree) or ():
        value = ret.value
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "len" and len(value.args) == 1):
            return None
        found.add(self_attr(value.args[0].value, selfp))
    return found.pop() if len(found) == 1 else None
