"""Which functions return a closure: a function, lambda or class defined inside them.

Such a factory's result has no importable name (nor have the instances of a class it
returns), so pickle (a DataLoader worker under the
spawn start method) cannot send it: ``collate_fn=make_collate(...)`` fails like a nested
function written in place. A function counts only when every ``return`` of its own body
returns a local function, class or lambda and its body ends with such a ``return`` (no
fall-through ``None``); a generator never counts. The fact crosses files through the
summary (``closure_returns``) and ``View.returned_closure``.
"""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional

import libcst as cst

from dslint.semantics.walk import body_buckets, iter_subtree


def _own_nodes(func: cst.FunctionDef) -> Iterator[cst.CSTNode]:
    """The nodes of ``func``'s body outside nested scopes (the nested defs themselves included)."""
    return iter_subtree(func.body, into_scopes=False)


def returned_closure(func: cst.FunctionDef, qualname_of: Callable[[cst.CSTNode], str], tree=None) -> Optional[List[str]]:
    """[what, qualified name pickle reports] when every value ``func`` returns is a function,
    class or lambda defined directly in its body ("the local class `X`" for a class); None
    when any return may give something else."""
    if not isinstance(func.body, cst.IndentedBlock) or not func.body.body:
        return None
    last = func.body.body[-1]
    if not (isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in last.body)):
        return None
    buckets = body_buckets(func, tree)
    if any(buckets.get(kind) for kind in (cst.Yield, cst.Await, cst.Global, cst.Nonlocal)):
        return None
    local_defs = {}
    for node in [*buckets.get(cst.FunctionDef, ()), *buckets.get(cst.ClassDef, ())]:
        local_defs.setdefault(node.name.value, []).append(node)
    returns = buckets.get(cst.Return, ())
    found = None
    for ret in returns:
        value = ret.value
        if isinstance(value, cst.Lambda):
            found = found or ["a lambda", f"{qualname_of(func)}.<locals>.<lambda>"]
            continue
        if not isinstance(value, cst.Name):
            return None
        defs = local_defs.get(value.value)
        if not defs or _rebound(func, value.value):
            return None
        kind = "the local class" if isinstance(defs[0], cst.ClassDef) else "the nested function"
        found = found or [f"{kind} `{value.value}`", f"{qualname_of(defs[0])}"]
    return found


def _rebound(func: cst.FunctionDef, name: str) -> bool:
    """``name`` is also assigned (or imported, or a parameter) in ``func``: not surely the def."""
    if any(p.name.value == name for p in _params(func.params)):
        return True
    for node in _own_nodes(func):
        if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name) and node.target.value == name:
            return True
        if isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name) and node.target.value == name:
            return True
        if isinstance(node, (cst.For, cst.WithItem, cst.ImportAlias, cst.NamedExpr, cst.AsName)):
            target = getattr(node, "target", None) or getattr(node, "asname", None) or getattr(node, "name", None)
            if isinstance(target, cst.AsName):
                target = target.name
            if isinstance(target, cst.Name) and target.value == name:
                return True
    return False


def _params(params: cst.Parameters):
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            yield star


def closure_returns(tree, qualname_of: Callable[[cst.CSTNode], str]) -> dict:
    """{local qualified name: [what, pickle's name]} of the module's functions that return a closure
    (methods excluded: a bound factory is reached through an instance, not followed here)."""
    answer = {}
    for node in tree.nodes(cst.FunctionDef):
        parent = tree.parent_of(node)
        if type(parent) is cst.IndentedBlock and type(tree.parent_of(parent)) is cst.ClassDef:
            continue
        if type(parent) is not cst.Module or node.decorators:
            continue  # a decorator may wrap what the function returns
        found = returned_closure(node, qualname_of, tree)
        if found:
            answer[qualname_of(node)] = found
    return answer
