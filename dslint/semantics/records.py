"""Per-sample records: which per-sample lookup a value comes from.

A sample is often addressed through an entry of a table indexed by the sample
(``path, row = self.items[idx]``, ``rec = self.records[idx]``). Two per-sample
values that are different fields of one such entry describe the same sample
(a file and the position of the sample's record in it). This follows a value
back to its entry: constant subscripts, attributes and tuple positions are
fields; library calls and pure methods with one per-sample input pass it on
(``os.path.join(self.root, name)``, ``path.replace(a, b)``); a helper's
parameter is followed to the one call of the helper in this file.

API: ``record_origin(ctx, expr)``, ``same_record(ctx, a, b)``.
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from dslint.semantics import dataflow as df
from dslint.semantics.call_facts import PURE_METHODS, has_star
from dslint.semantics.calls import UNKNOWN as UNKNOWN_LITERAL
from dslint.semantics.walk import iter_subtree


def same_record(ctx, first, second) -> bool:
    """``first`` and ``second`` are different fields of one per-sample entry."""
    a, b = record_origin(ctx, first), record_origin(ctx, second)
    return a is not None and b is not None and a[0] == b[0] and a[1] != b[1]


def record_origin(ctx, expr) -> Optional[Tuple[int, tuple]]:
    """(id of the per-sample lookup ``expr`` comes from, the fields taken from it), or None."""
    return _origin(ctx, expr, 0)


def _index_of(subscript: cst.Subscript):
    element = subscript.slice[0] if subscript.slice else None
    return element.slice.value if element is not None and isinstance(element.slice, cst.Index) else None


def _origin(ctx, expr, depth: int):
    """A lookup is a subscript by a per-sample value of something that is not per
    sample (``self.items[idx]``)."""
    if depth > 6:
        return None
    if isinstance(expr, cst.Subscript):
        index = _index_of(expr)
        if index is None:
            return None
        if df.depends_on_sample(ctx, index):
            return None if df.depends_on_sample(ctx, expr.value) else (id(expr), ())
        inner = _origin(ctx, expr.value, depth + 1)
        key = ctx.literal(index)
        return None if inner is None or key is UNKNOWN_LITERAL else (inner[0], inner[1] + (repr(key),))
    if isinstance(expr, cst.Attribute):
        inner = _origin(ctx, expr.value, depth + 1)
        return None if inner is None else (inner[0], inner[1] + (expr.attr.value,))
    if isinstance(expr, cst.Call):
        return _call_origin(ctx, expr, depth)
    if isinstance(expr, cst.Name):
        return _name_origin(ctx, expr, depth)
    return None


def _call_origin(ctx, call: cst.Call, depth: int):
    inputs = [arg.value for arg in call.args]
    func = call.func
    qualified = ctx.call_name(call)
    if qualified is None:
        if not (isinstance(func, cst.Attribute) and func.attr.value in PURE_METHODS):
            return None
        inputs.append(func.value)
    elif ctx.memo(("records.project_function", qualified), lambda: ctx.view.function_facts(qualified) is not None):
        return None
    varying = [value for value in inputs if df.depends_on_sample(ctx, value)]
    return _origin(ctx, varying[0], depth + 1) if len(varying) == 1 else None


def _name_origin(ctx, name: cst.Name, depth: int):
    func = ctx.enclosing_function(name)
    values = df.bound_values(ctx, name)
    if func is None or values is None or len(values) != 1:
        return None
    if values[0] is not None:
        return _origin(ctx, values[0], depth + 1)
    param = next((p for p in _parameters(func) if p.name.value == name.value), None)
    if param is not None:
        arg = _only_call_argument(ctx, func, param)
        return None if arg is None else _origin(ctx, arg, depth + 1)
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, (cst.Tuple, cst.List)):
                for position, element in enumerate(target.elements):
                    if isinstance(element.value, cst.Name) and element.value.value == name.value:
                        inner = _origin(ctx, node.value, depth + 1)
                        return None if inner is None else (inner[0], inner[1] + (position,))
    return None


def _parameters(func: cst.FunctionDef):
    params = func.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def _only_call_argument(ctx, func: cst.FunctionDef, param: cst.Param):
    """The argument given for ``param`` at the one call of ``func`` in this file
    (``self.func(...)`` from the same class, or ``func(...)``), or None."""
    method_of = ctx.method_class(func)
    positional = [p.name.value for p in _parameters(func)]
    if method_of is not None and positional:
        positional = positional[1:]  # self
    sites = []
    for call in ctx.nodes(cst.Call):
        callee = call.func
        if method_of is not None:
            if not (isinstance(callee, cst.Attribute) and callee.attr.value == func.name.value):
                continue
            if not (isinstance(callee.value, cst.Name) and callee.value.value == "self"):
                continue
            caller = ctx.enclosing_function(call)
            if caller is None or ctx.method_class(caller) is not method_of:
                continue
        elif not (isinstance(callee, cst.Name) and callee.value == func.name.value):
            continue
        sites.append(call)
    if len(sites) != 1 or has_star(sites[0]):
        return None
    for index, arg in enumerate(sites[0].args):
        if arg.keyword is not None:
            if arg.keyword.value == param.name.value:
                return arg.value
        elif index < len(positional) and positional[index] == param.name.value:
            return arg.value
    return None
