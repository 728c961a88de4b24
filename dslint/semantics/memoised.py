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

from typing import Dict, Optional, Tuple

import libcst as cst

from dslint.semantics import lifetimes as lt
from dslint.semantics.classes import called_method
from dslint.semantics.handle_returns import helper_calls
from dslint.semantics.regions import self_name
from dslint.semantics.walk import plain_returns

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


def maybe_handle_calls(ctx) -> Dict[int, Tuple[cst.Call, str]]:
    """id(call) -> (call, kind) for each call of a function of this file (by name, or a
    method on ``self``) that may return a new handle: every ``return`` gives back a new
    handle (an opener, a function returning one: ``handle_returns``) or a memoised call's
    shared one, and both occur (``if remote: return cached(p)`` / ``return opener(p)``),
    through any chain of such functions. The caller owns the handle on the paths that
    miss the cache; on the others it must not close it."""
    return ctx.memo(("memoised.maybe_calls",), lambda: _maybe_calls(ctx))


def _maybe_calls(ctx) -> Dict[int, Tuple[cst.Call, str]]:
    found: Dict[int, Tuple[cst.Call, str]] = {}
    helpers = helper_calls(ctx)
    if not any(memoised_value(ctx.names, v) for vs in ctx.names.assigns.values() for v in vs if v is not None):
        if not any(memoised_def(ctx.names, f) for f in ctx.nodes(cst.FunctionDef)):
            return found
    memo: Dict[int, Optional[Tuple[str, bool]]] = {}
    for call in ctx.nodes(cst.Call):
        if id(call) in helpers:
            continue
        answer = _call_answer(ctx, call, helpers, memo)
        if answer is not None and answer[1]:
            found[id(call)] = (call, answer[0])
    return found


def _target(ctx, call: cst.Call) -> Optional[cst.FunctionDef]:
    func = call.func
    if isinstance(func, cst.Name):
        defs = [f for f in ctx.nodes(cst.FunctionDef) if f.name.value == func.value and isinstance(ctx.parent(f), cst.Module)]
        return defs[0] if len(defs) == 1 else None
    method = ctx.enclosing_function(call)
    cls = ctx.method_class(method) if method is not None else None
    return called_method(ctx, cls, call, self_name(method)) if cls is not None else None


def _call_answer(ctx, call, helpers, memo) -> Optional[Tuple[str, bool]]:
    """(kind, whether a cache is on some path) for a call of a function that may return a new handle."""
    func = _target(ctx, call) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
    if func is None:
        return None
    if id(func) in memo:
        return memo[id(func)]
    memo[id(func)] = None  # (recursion)
    returns = plain_returns(func, ctx.tree)
    kinds, cached, fresh = set(), False, False
    for ret in returns or ():
        value = ret.value
        if not isinstance(value, cst.Call):
            kinds.add(None)
        elif memoised_call(ctx, value):
            cached = True
        elif id(value) in helpers and helpers[id(value)][2] is None:
            kinds.add(helpers[id(value)][1])
            fresh = True
        elif lt.opener_kind(ctx, value) is not None:
            kinds.add(lt.opener_kind(ctx, value))
            fresh = True
        else:
            inner = _call_answer(ctx, value, helpers, memo)
            kinds.add(inner[0] if inner else None)
            fresh, cached = fresh or inner is not None, cached or bool(inner and inner[1])
    answer = (kinds.pop(), cached) if returns and fresh and len(kinds) == 1 and None not in kinds else None
    memo[id(func)] = answer
    return answer
