"""How many items iterating an expression gives, when the code states it.

``known_size(ctx, expr)``: a display, a ``range`` whose bound the project shows
(literal, constant, parameter default), ``enumerate``/``sorted``/``zip`` of such, a
name or ``self.<attr>`` bound to one and never grown afterwards (``grown``).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.bindings import single_assignment
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.values import possible
from dslint.semantics.walk import iter_subtree


def known_size(ctx, expr: cst.CSTNode, depth: int = 0) -> Optional[int]:
    """How many items iterating ``expr`` gives, when the code states it: a display, a
    ``range`` of literals, ``enumerate``/``sorted``/``list``/``zip`` of such, or a name
    bound once to one."""
    if depth > 4:
        return None
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return None if any(isinstance(e, cst.StarredElement) for e in expr.elements) else len(expr.elements)
    if isinstance(expr, cst.Call) and not any(arg.star or arg.keyword for arg in expr.args):
        name = ctx.call_name(expr)
        if name == "builtins.range" and expr.args:
            if len(expr.args) == 1:  # range(n): n's every possible value (a default, a constant)
                return _largest(possible(ctx, expr.args[0].value).values, lambda n: max(n, 0), (int,))
            bounds = [ctx.literal(arg.value) for arg in expr.args]
            if all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
                return len(range(*bounds))
            return None
        if name in ("builtins.enumerate", "builtins.sorted", "builtins.list", "builtins.tuple", "builtins.reversed"):
            return known_size(ctx, expr.args[0].value, depth + 1) if expr.args else None
        if name == "builtins.zip" and expr.args:
            sizes = [known_size(ctx, arg.value, depth + 1) for arg in expr.args]
            return None if any(n is None for n in sizes) else min(sizes)
        return None
    if isinstance(expr, cst.Name):
        scope = ctx.enclosing_function(expr) or ctx.module
        if grown(scope, lambda target, _: isinstance(target, cst.Name) and target.value == expr.value):
            return None  # filled after it was bound
        value = single_assignment(ctx.tree, expr) or ctx.module_constant(expr)
        if value is not None:
            return known_size(ctx, value, depth + 1)
        return _largest(possible(ctx, expr).values, len, (list, tuple, str))
    if isinstance(expr, cst.Attribute):
        sizes = [known_size(ctx, value, depth + 1) for value in _self_values(ctx, expr)]
        return max(sizes) if sizes and None not in sizes else None
    return None


def _largest(values, measure, types) -> Optional[int]:
    """The largest ``measure`` of values that all have one of ``types``, or None."""
    ok = values and all(isinstance(v.value, types) and not isinstance(v.value, bool) for v in values)
    return max(measure(v.value) for v in values) if ok else None


def _self_values(ctx, expr: cst.Attribute) -> list:
    """Every value the class of the method around ``expr`` assigns to ``self.<attr>``
    (empty when something else may bind it: augmented or unpacking assignments)."""
    func = ctx.enclosing_function(expr)
    cls = ctx.method_class(func) if func is not None else None
    attr = self_attr(expr, self_name(func)) if cls is not None else None
    if attr is None:
        return []
    values = []
    for node in iter_subtree(cls.body, into_scopes=True):
        if isinstance(node, cst.FunctionDef):
            selfp = self_name(node)
            if grown(node.body, lambda target, _, p=selfp: self_attr(target, p) == attr):
                return []
            for stmt in iter_subtree(node.body, into_scopes=False):
                if isinstance(stmt, cst.Assign) and any(self_attr(t.target, selfp) == attr for t in stmt.targets):
                    if len(stmt.targets) != 1:
                        return []
                    values.append(stmt.value)
    return values


_GROW_METHODS = frozenset({"append", "extend", "insert"}) | {"add", "update", "setdefault", "__setitem__"}


def grown(root: cst.CSTNode, is_it) -> bool:
    """``is_it(target, node)`` is grown under ``root``: ``.append``/``.extend``/... on it,
    ``+=``, or an item stored into it."""
    for node in iter_subtree(root, into_scopes=False):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _GROW_METHODS:
            target = node.func.value
        elif isinstance(node, cst.AugAssign):
            target = node.target
        elif isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Subscript):
            target = node.target.value
        else:
            continue
        if is_it(target, node):
            return True
    return False


def counted_loop(ctx, node: cst.CSTNode) -> bool:
    """The innermost loop around ``node`` in its function runs ``range(n)`` over a count that
    no ``len()`` gives (``range(cfg["batch_size"])``, ``range(self.slots)`` of such a value): it
    repeats a set number of times, however much data there is."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        loop = ancestor if isinstance(ancestor, cst.For) else getattr(ancestor, "for_in", None)
        if loop is None:
            continue
        it = loop.iter
        if not (isinstance(it, cst.Call) and len(it.args) == 1 and not it.args[0].star
                and ctx.call_name(it) == "builtins.range"):
            return False
        bound = it.args[0].value
        values = [bound]
        if isinstance(bound, cst.Name):
            values += [v for v in [single_assignment(ctx.tree, bound)] if v is not None]
        elif isinstance(bound, cst.Attribute):
            values += _self_values(ctx, bound)
        return not any(isinstance(n, cst.Call) and ctx.call_name(n) == "builtins.len"
                       for value in values for n in iter_subtree(value))
    return False
