"""Worker-only options a loader builder turns on by its own default.

A builder function (``def build_loader(ds, workers, persistent_workers=True)``) whose
worker count is a parameter the caller must supply (no default: any count, 0
included, is the caller's choice) and whose ``persistent_workers`` reaches the
DataLoader only as the default of one of its own parameters forces persistent
workers on every caller that does not ask otherwise, so a caller that passes 0
workers gets torch's ``ValueError``. The option is followed into the loader call
directly, or through the builder's ``**kwargs`` dict filled by a subscript
assignment (``kwargs["persistent_workers"] = persistent_workers``), also under a
branch (a torch version check) since that branch is what runs on current torch.

Silent when the worker count has a default (the defaults agree with each other), is
computed by a call, or the option's value can be anything but ``True``.

API: ``defaulted_option(ctx, bound, name)``.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics import dataflow as df
from dslint.semantics.values import possible
from dslint.semantics.walk import iter_subtree


def defaulted_option(ctx, bound, name: str) -> Optional[str]:
    """The builder parameter whose default ``True`` sets option ``name`` of the loader call
    ``bound`` while its worker count is a parameter without a default; None otherwise."""
    func = ctx.enclosing_function(bound.call)
    if func is None:
        return None
    expr = bound.expr(name) if bound.passed(name) else stored_kwarg(ctx, func, bound.call, name)
    if expr is None or not _required_count(ctx, func, bound.expr("num_workers")):
        return None
    found = possible(ctx, expr)
    param = _param(func, expr)
    if param is None or param.default is None or not found.values:
        return None
    if not all(v.value is True and v.origin.startswith("the default of parameter") for v in found.values):
        return None
    return param.name.value


def stored_kwarg(ctx, func: cst.FunctionDef, call: cst.Call, key: str) -> Optional[cst.BaseExpression]:
    """The value the function stores under ``key`` in a dict it passes as ``**name`` to
    ``call`` (``name["key"] = value``), when it stores it once."""
    stored: List[cst.BaseExpression] = []
    for arg in call.args:
        if arg.star != "**" or not isinstance(arg.value, cst.Name):
            continue
        for node in iter_subtree(func.body, into_scopes=False):
            if not isinstance(node, cst.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0].target
            if (
                isinstance(target, cst.Subscript)
                and isinstance(target.value, cst.Name)
                and target.value.value == arg.value.value
                and len(target.slice) == 1
                and isinstance(target.slice[0].slice, cst.Index)
                and isinstance(target.slice[0].slice.value, cst.SimpleString)
                and target.slice[0].slice.value.evaluated_value == key
            ):
                stored.append(node.value)
    return stored[0] if len(stored) == 1 else None


def _param(func: cst.FunctionDef, expr) -> Optional[cst.Param]:
    if not isinstance(expr, cst.Name):
        return None
    params = func.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == expr.value:
            return param
    return None


def _required_count(ctx, func: cst.FunctionDef, expr, depth: int = 0) -> bool:
    """``expr`` is, on every binding, a parameter of ``func`` without a default or arithmetic
    over such a parameter and plain numbers or other parameters (no call: a computed count)."""
    if expr is None or depth > 3:
        return False
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        sides = (expr.left, expr.right)
        return any(_required_count(ctx, func, side, depth + 1) for side in sides) and all(
            isinstance(side, (cst.Name, cst.Integer)) for side in sides
        )
    if not isinstance(expr, cst.Name):
        return False
    param = _param(func, expr)
    values = df.bound_values(ctx, expr)
    if param is not None:
        return param.default is None and values is not None and all(v is None for v in values)
    if not values or any(v is None for v in values):
        return False
    return all(_required_count(ctx, func, value, depth + 1) for value in values)
