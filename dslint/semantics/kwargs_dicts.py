"""The ``**`` dicts handed to a call: which keys they hold and the expressions given to them.

A dict is followed to its constructions in the same scope that reach the call (a display,
``dict(...)``, both arms of a conditional expression; one per arm when each arm of an ``if``
builds its own: ``reaching``) and
through the changes made to it there (``d["k"] = v``, ``d.update(k=v)``); ``values``
reads the values of those expressions, and ``entry_expressions`` the expressions themselves
(a rule asking what a ``collate_fn=`` or ``worker_init_fn=`` in such a dict is).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.calls import UNKNOWN, literal_value
from dslint.semantics.reaching import cannot_reach, rebound_between


class FileSource:
    """What this module asks of a file (``tree``, ``parent``, ``ancestors``, ``call_name``), from the
    tree and names alone: phase 1 (the summaries) asks with one, the rules with their ``FileContext``."""

    def __init__(self, tree, names) -> None:
        self.tree, self.names = tree, names

    def parent(self, node):
        return self.tree.parent_of(node)

    def ancestors(self, node):
        return self.tree.ancestors(node)

    def call_name(self, call: cst.Call) -> Optional[str]:
        return self.names.qualname(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None


def subscript_key(expr: cst.Subscript) -> Optional[str]:
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key = literal_value(expr.slice[0].slice.value)
    return key if isinstance(key, str) else None


def dict_changes(ctx, scope, name: str):
    """Key assignments and ``.update`` calls on the dict ``name`` in ``scope``: (key,
    value expression), (None, dict expression) for an update, or None for a change we
    cannot follow (the dict passed to a call, ``pop``, ``setdefault``, ...)."""
    for node in ctx.tree.scope_nodes(scope, cst.Name):
        if node.value != name:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Subscript) and parent.value is node:
            holder = ctx.parent(parent)
            if isinstance(holder, cst.AssignTarget) and holder.target is parent:
                key = subscript_key(parent)
                assign = ctx.parent(holder)
                yield (key, assign.value) if key is not None else None
            elif isinstance(holder, (cst.AugAssign, cst.Del)):
                yield None
            continue
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = ctx.parent(parent)
            method = parent.attr.value
            if method in ("get", "items", "keys", "values", "copy") or not isinstance(call, cst.Call):
                continue
            if method == "update":
                for arg in call.args:
                    if arg.keyword is not None:
                        yield arg.keyword.value, arg.value
                    elif arg.star == "**" or not arg.star:
                        yield None, arg.value
                continue
            yield None  # pop, setdefault, clear, ...: not followed
            continue
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            if isinstance(call, cst.Call) and parent.star != "**":
                yield None  # handed to a function that may change it


def entry_expressions(ctx, call: cst.Call, key: str) -> List[cst.BaseExpression]:
    """The expressions given to ``key`` in the ``**`` dicts of ``call`` (a dict display, a
    ``dict(...)`` call, or a name bound once to one and changed only by key writes and updates)."""
    return closed_entries(ctx, call, key)[0]


def closed_entries(ctx, call: cst.Call, key: str) -> Tuple[List[cst.BaseExpression], bool]:
    """``entry_expressions``, and whether those are all ``key`` can be: every ``**`` dict was
    followed to its construction and its every change is a key write or an update followed."""
    items, closed = closed_items(ctx, call)
    return [value for written, value in items if written == key], closed


def closed_items(ctx, call: cst.Call) -> Tuple[List[Tuple[str, cst.BaseExpression]], bool]:
    """(key, expression) for each entry the ``**`` dicts of ``call`` are given, and whether those
    are all the keys they can hold (``closed_entries``). ``ctx`` needs only ``tree``, ``parent``,
    ``ancestors`` and ``call_name``: the summaries ask it with the tree and names of phase 1."""
    found: List[Tuple[str, cst.BaseExpression]] = []
    closed = True
    for arg in call.args:
        if arg.star == "**":
            closed = _collect(ctx, arg.value, found, 0) and closed
        elif arg.star == "*":
            closed = False
    return found, closed


def _collect(ctx, expr, found: List[Tuple[str, cst.BaseExpression]], depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(expr, cst.Dict):
        closed = True
        for element in expr.elements:
            key = literal_value(element.key) if isinstance(element, cst.DictElement) else None
            if isinstance(element, cst.StarredDictElement):
                closed = _collect(ctx, element.value, found, depth + 1) and closed
            elif isinstance(key, str):
                found.append((key, element.value))
            elif key is UNKNOWN:
                closed = False  # a computed key may be any
        return closed
    if isinstance(expr, cst.Call) and ctx.call_name(expr) == "builtins.dict":
        closed = True
        for arg in expr.args:
            if arg.keyword is not None:
                found.append((arg.keyword.value, arg.value))
            else:
                closed = _collect(ctx, arg.value, found, depth + 1) and closed
        return closed
    if isinstance(expr, cst.IfExp):  # ``{"num_workers": n} if cuda else {}``: either arm
        body = _collect(ctx, expr.body, found, depth + 1)
        return _collect(ctx, expr.orelse, found, depth + 1) and body
    if not isinstance(expr, cst.Name):
        return False
    scope = ctx.tree.scope_node(expr)
    reaching = [value for value in scope_assignments(ctx.tree, scope, expr.value) or ()
                if not (cannot_reach(ctx, value, expr) or rebound_between(ctx, value, expr, expr.value))]
    if not reaching:
        return False
    closed = True
    for value in reaching:  # (the dict of each branch that may bind it: ``d = {...}`` in each arm of an ``if``)
        closed = _collect(ctx, value, found, depth + 1) and closed
    for change in dict_changes(ctx, scope, expr.value):
        if change is None:
            closed = False
            continue
        written, value = change
        if written is None:
            closed = _collect(ctx, value, found, depth + 1) and closed
        else:
            found.append((written, value))
    return closed


def unchanged_values(ctx, index, name: cst.Name) -> Optional[List[cst.CSTNode]]:
    """What the name of a ``**`` dict may hold where it is read (``ValueFlow.value_nodes``: the
    bindings that reach it); None when a value is unknown, or when the scope changes the dict
    after building it (a key write, an update, a call it is handed to: ``dict_changes``)."""
    if any(True for _ in dict_changes(ctx, ctx.tree.scope_node(name), name.value)):
        return None
    return index.value_nodes(name)


def transform_entries(ctx, index, expr) -> List[cst.BaseExpression]:
    """The values given to the keys that name a transform (``transform``, ``target_transform``...)
    of the ``**`` dict ``expr``: the dict display or ``dict(...)`` call it may hold where it is
    unpacked (``unchanged_values``: the binding that reaches that point). A dict that its scope
    changes after building it gives none."""
    values = (unchanged_values(ctx, index, expr) or []) if isinstance(expr, cst.Name) else [expr]
    found: List[cst.BaseExpression] = []
    for value in values:
        if isinstance(value, cst.Dict):
            for element in value.elements:
                key = literal_value(element.key) if isinstance(element, cst.DictElement) else None
                if isinstance(key, str) and "transform" in key.lower():
                    found.append(element.value)
        elif isinstance(value, cst.Call) and ctx.call_name(value) == "builtins.dict":
            found.extend(arg.value for arg in value.args if arg.keyword is not None and "transform" in arg.keyword.value.lower())
    return found


__all__ = ["FileSource", "closed_entries", "closed_items", "dict_changes", "entry_expressions", "subscript_key", "transform_entries", "unchanged_values"]
