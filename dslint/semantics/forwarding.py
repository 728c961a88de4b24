"""What a function passes on that its callers choose, for the loader rules.

* ``switch``: a ``bool`` parameter forwarded unchanged (``def f(..., drop_last: bool =
  False)`` then ``DataLoader(..., drop_last=drop_last)``): both values are possible, the
  caller chooses;
* ``forwarded_option``: what a key is in the ``**`` dicts of a call when one of them is the
  enclosing function's own ``**kwargs`` (set or removed there, or left to the caller).

Both build on ``values.py`` (``possible``, ``expand_kwargs``) and, like it, never guess:
anything they cannot follow is NOTHING or "the caller may supply it".
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.calls import literal_value
from dslint.semantics.values import NOTHING, Possible, Value, expand_kwargs, possible


def switch(ctx, expr: Optional[cst.CSTNode]) -> Possible:
    """Both values for a ``bool`` parameter (annotated ``bool`` or with a ``True``/``False``
    default) read unchanged; NOTHING for anything else (a method's ``self``, a rebound name)."""
    if not isinstance(expr, cst.Name):
        return NOTHING
    scope = ctx.tree.scope_node(expr)
    param = _parameter(scope, expr.value)
    if param is None or not isinstance(scope, cst.FunctionDef) or _is_self(ctx, scope, param):
        return NOTHING
    annotation = param.annotation.annotation if param.annotation is not None else None
    annotated = isinstance(annotation, cst.Name) and annotation.value == "bool"
    defaulted = isinstance(param.default, cst.Name) and literal_value(param.default) in (True, False)
    if not (annotated or defaulted):
        return NOTHING
    assigned = scope_assignments(ctx.tree, scope, expr.value)
    if assigned is None or assigned:
        return NOTHING  # rebound in the function: not the caller's value as passed
    name = expr.value
    return Possible((Value(True, f"a caller passing `{name}=True`"), Value(False, f"a caller passing `{name}=False`")), False)


def forwarded_option(ctx, call: cst.Call, key: str) -> Tuple[Optional[Possible], bool]:
    """What ``key`` is in the ``**`` dicts of ``call`` when one of them is the enclosing
    function's own ``**kwargs`` parameter: (its values, or None when absent or removed; whether
    the caller may still supply it). ``kwargs["key"] = v`` and ``kwargs.update(key=v)`` set it
    (the caller's value no longer gets through), ``kwargs.pop("key")`` and ``del kwargs["key"]``
    remove it; any other ``**`` dict is read with ``expand_kwargs``."""
    func = ctx.enclosing_function(call)
    star = func.params.star_kwarg if func is not None else None
    star_name = star.name.value if isinstance(star, cst.Param) else None

    def is_star(arg) -> bool:
        return arg.star == "**" and isinstance(arg.value, cst.Name) and arg.value.value == star_name

    others = [a for a in call.args if a.star == "**" and not is_star(a)]
    entries, closed = expand_kwargs(ctx, call.with_changes(args=others)) if others else ({}, True)
    if key in entries:
        return entries[key], False
    if not any(is_star(a) for a in call.args):
        return None, not closed
    found: Optional[Possible] = None
    open_ = True
    for node in ctx.tree.scope_nodes(func, cst.Name):
        if node.value != star_name:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Subscript) and parent.value is node and _key(parent) == key:
            holder = ctx.parent(parent)
            if isinstance(holder, cst.AssignTarget):
                found, open_ = possible(ctx, ctx.parent(holder).value), False
            elif isinstance(holder, cst.Del):
                found, open_ = None, False
        elif isinstance(parent, cst.Attribute) and parent.value is node and isinstance(ctx.parent(parent), cst.Call):
            method, args = parent.attr.value, ctx.parent(parent).args
            if method == "pop" and args and literal_value(args[0].value) == key:
                found, open_ = None, False
            elif method == "update":
                for arg in args:
                    if arg.keyword is not None and arg.keyword.value == key:
                        found, open_ = possible(ctx, arg.value), False
    return found, open_ or not closed


def _parameter(scope, name: str) -> Optional[cst.Param]:
    if not isinstance(scope, (cst.FunctionDef, cst.Lambda)):
        return None
    params = scope.params
    return next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == name), None)


def _is_self(ctx, func: cst.FunctionDef, param: cst.Param) -> bool:
    positional = (*func.params.posonly_params, *func.params.params)
    static = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in func.decorators)
    return ctx.method_class(func) is not None and bool(positional) and positional[0] is param and not static


def _key(expr: cst.Subscript) -> Optional[str]:
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key = literal_value(expr.slice[0].slice.value)
    return key if isinstance(key, str) else None
