"""Worker-only options left in a caller's options dict after the worker count is forced to 0.

``opts = opts.copy(); if no_workers: opts["num_workers"] = 0; opts["persistent_workers"] = False``
followed by ``DataLoader(ds, **opts)``: the branch shows that the author knows the caller's dict
may carry worker-only options (it resets one of them), yet another one (``prefetch_factor``) is
kept, and torch rejects it once there are no workers. ``forced_zero_leftovers`` answers this for
a loader call: only for a dict that comes from a parameter (its keys are the caller's), only when
the forcing branch handles at least one worker-only key, and only for keys the function never
names at all (a key named anywhere may be dealt with elsewhere: silence).
"""

from __future__ import annotations

from typing import List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.zero_arms import WORKER_ONLY


def _key(ctx, node: cst.BaseExpression, target: str) -> Optional[str]:
    """The string key of ``target[...]`` when ``node`` is such a subscript."""
    if not (isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == target):
        return None
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    key = ctx.literal(node.slice[0].slice.value)
    return key if isinstance(key, str) else None


def _strings(node: cst.CSTNode) -> Set[str]:
    found: Set[str] = set()

    class _Visit(cst.CSTVisitor):
        def visit_SimpleString(self, n: cst.SimpleString) -> None:
            found.add(n.evaluated_value if isinstance(n.evaluated_value, str) else "")

        def visit_Arg(self, n: cst.Arg) -> None:
            if n.keyword is not None:
                found.add(n.keyword.value)

    node.visit(_Visit())
    return found


def _from_parameter(ctx, func: cst.FunctionDef, name: str) -> bool:
    """``name`` is a parameter of ``func``, or a copy of one (``p.copy()``, ``dict(p)``, ``{**p}``)."""
    params = {p.name.value for p in (*func.params.params, *func.params.kwonly_params)}
    if name in params:
        return True
    value = None  # the last plain assignment of the body
    for stmt in func.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                continue
            target = small.targets[0].target
            if isinstance(target, cst.Name) and target.value == name:
                value = small.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "copy":
        base = value.func.value
        return isinstance(base, cst.Name) and base.value in params and not value.args
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        return len(value.args) == 1 and isinstance(value.args[0].value, cst.Name) and value.args[0].value.value in params
    if isinstance(value, cst.Dict) and len(value.elements) == 1 and isinstance(value.elements[0], cst.StarredDictElement):
        base = value.elements[0].value
        return isinstance(base, cst.Name) and base.value in params
    return False


def _forcing_branches(ctx, func: cst.FunctionDef, name: str) -> List[Tuple[cst.If, cst.Assign]]:
    """(if statement, ``name["num_workers"] = 0``) for each branch of ``func`` that forces the count to 0."""
    found = []
    for node in ctx.nodes(cst.Assign):
        if len(node.targets) != 1 or _key(ctx, node.targets[0].target, name) != "num_workers":
            continue
        value = ctx.literal(node.value)
        if isinstance(value, bool) or value != 0:
            continue
        if ctx.enclosing_function(node, through_lambdas=False) is not func:
            continue
        branch = next((a for a in ctx.ancestors(node) if isinstance(a, (cst.If, cst.FunctionDef))), None)
        if isinstance(branch, cst.If):
            found.append((branch, node))
    return found


def forced_zero_leftovers(ctx, bound) -> Optional[Tuple[str, List[str], List[str], cst.Assign]]:
    """(dict name, worker-only keys the forcing branch resets, keys it keeps, the forcing assignment)
    for a loader call spreading ``**name`` whose count the function forces to 0; None otherwise."""
    call = bound.call
    func = ctx.enclosing_function(call, through_lambdas=False)
    if func is None or bound.passed("num_workers"):
        return None
    for arg in call.args:
        if arg.star != "**" or not isinstance(arg.value, cst.Name):
            continue
        name = arg.value.value
        key = ("forced_zero", func, name)
        result = ctx.memo(key, lambda: _leftovers(ctx, func, name))
        if result is not None:
            return result
    return None


def _leftovers(ctx, func: cst.FunctionDef, name: str):
    if not _from_parameter(ctx, func, name):
        return None
    named = _strings(func)
    for branch, assign in _forcing_branches(ctx, func, name):
        handled = sorted(k for k in WORKER_ONLY if k in _strings(branch.body))
        kept = [k for k in WORKER_ONLY if k not in named]
        if handled and kept:
            return name, handled, kept, assign
    return None


def leftovers_message(left) -> str:
    name, handled, kept, _assign = left
    shown = " and ".join(f"`{k}`" for k in kept)
    reset = ", ".join(f"`{k}`" for k in handled)
    return (f"`num_workers` is forced to 0 in the caller's `{name}` and {reset} reset, but any {shown} the caller "
            f"passes is kept: the DataLoader then raises (e.g. `ValueError: prefetch_factor option could only be "
            f"specified in multiprocessing`)")
