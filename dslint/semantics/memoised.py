"""Functions whose results a cache owns: ``functools.lru_cache``/``functools.cache``.

``@lru_cache def open_shard(p): return h5py.File(p)`` (or ``open_cached =
lru_cache()(open_shard)``) hands every caller of the same path one shared handle that
the cache keeps alive: the caller does not own it, must not close it (the next caller
would get a closed handle), and dropping it releases nothing. The handle rules treat a
call of such a function as no new handle (``handle_returns`` would otherwise see a
function that returns what it opened), and ``handle_exports`` does not export it.

Answered from the parse alone (a decorator or a module-level assignment), so phase 1's
``ParseFacts`` and the rule phase's ``FileContext`` ask the same questions.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

MEMOISERS = frozenset({"functools.lru_cache", "functools.cache"})


def _memoiser(names, expr) -> bool:
    """``lru_cache``, ``lru_cache(maxsize=8)`` or ``functools.cache`` as an expression."""
    if isinstance(expr, cst.Call):
        expr = expr.func
    return isinstance(expr, (cst.Name, cst.Attribute)) and names.qualname(expr) in MEMOISERS


def memoised_def(names, func: cst.FunctionDef) -> bool:
    """``func`` is decorated with ``lru_cache``/``cache`` (called or not)."""
    return any(_memoiser(names, d.decorator) for d in func.decorators)


def memoised_value(names, value: Optional[cst.BaseExpression]) -> bool:
    """``lru_cache(...)(f)`` or ``cache(f)``: a memoised wrapper of ``f``."""
    if not isinstance(value, cst.Call) or len(value.args) != 1:
        return False
    func = value.func
    if isinstance(func, cst.Call) and _memoiser(names, func):
        return True
    return isinstance(func, (cst.Name, cst.Attribute)) and names.qualname(func) in MEMOISERS


def memoised_call(ctx, call: cst.Call) -> bool:
    """``call`` runs a memoised function of this file: a module-level function (or a
    method called on ``self``) of that name whose every definition here is memoised, or
    a module-level name bound once to a memoised wrapper."""
    func = call.func
    if isinstance(func, cst.Name):
        name = func.value
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        name = func.attr.value
    else:
        return False
    defs = [f for f in ctx.nodes(cst.FunctionDef) if f.name.value == name and _top_or_method(ctx, f)]
    if defs:
        return all(memoised_def(ctx.names, f) for f in defs)
    if isinstance(func, cst.Name):
        values = ctx.names.assigns.get(name)
        return bool(values) and len(values) == 1 and memoised_value(ctx.names, values[0])
    return False


def _top_or_method(ctx, func: cst.FunctionDef) -> bool:
    parent = ctx.parent(func)
    if isinstance(parent, cst.Module):
        return True
    owner = ctx.parent(parent) if isinstance(parent, cst.IndentedBlock) else None
    return isinstance(owner, cst.ClassDef) and isinstance(ctx.parent(owner), cst.Module)
