"""Whether the code handles a worker count of 0 before it builds a loader.

``branches_on(ctx, index, call, expr)``: before ``call`` in its function the code tests the value
of ``expr`` (``if workers == 0:``, ``while``, ``assert``), or the call sits in a branch of such a
test. ``handles_count(..., option)`` asks more: such a test that asserts, exits, rebinds the count,
or rebinds what the call passes for ``option``; a branch that only does something else
(``if workers > 0: context = "fork"``) handles only what it rebinds. ``option_handled(ctx, index,
bound, option)`` asks it for a bound loader call (its ``num_workers``, or the ``**kwargs`` entry).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.narrowing import excludes
from dslint.semantics.user_values import kwargs_expr
from dslint.semantics.walk import iter_subtree


def branches_on(ctx, index, call, expr) -> bool:
    """Before ``call`` in its function the code branches on the value of ``expr``
    (``if workers == 0:``, ``while``, ``assert``), or the call sits in a branch of such a
    test (``DataLoader(...) if workers else None``): the author handles its values there."""
    inside, tests = _branches(ctx, index, call, expr)
    return inside or bool(tests)


def handles_count(ctx, index, bound, expr, option: Optional[str] = None) -> bool:
    """The code handles a count of 0 before ``call`` (for every option, or for ``option``): the call
    sits in a branch on the count, or a branch on it before the call asserts, exits (``return``,
    ``raise``, ``continue``, ``break``), rebinds the count, or, for ``option``, rebinds what the call
    passes for it (``prefetch_factor = None``, ``kwargs["prefetch_factor"] = ...``, ``.pop``/``.update``
    naming it). A branch that does something else (``if workers > 0: context = "fork"``) handles
    only what it rebinds. A test ``narrowing`` reads before the call that rules 0 out counts too (a
    statement dividing by the count: ``n / (batch * workers)`` raises first)."""
    inside, tests = _branches(ctx, index, bound.call, expr)
    if inside or excludes(ctx, expr, 0):  # (also a division by the count before the call: ``narrowing``)
        return True
    counts = {ctx.code(expr).strip()}
    arg = bound.arg(option) if option else None
    feeds = {ctx.code(n).strip() for n in iter_subtree(arg.value) if isinstance(n, (cst.Name, cst.Attribute))} if arg else set()
    for test in tests:
        if isinstance(test, cst.Assert):
            return True
        for node in iter_subtree(test.body if isinstance(test, cst.While) else test):
            if isinstance(node, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
                return True
            if isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
                target = ctx.code(node.target).strip()
                if target in counts or target in feeds or (option and _names_key(node.target, option)):
                    return True
            if option and isinstance(node, cst.Call) and _names_option(node, option):
                return True
    return False


def _names_option(call: cst.Call, key: str) -> bool:
    """``d.pop("key")``, ``d.setdefault("key", ...)``, ``d.update(key=...)``, ``d.update({"key": ...})``."""
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value not in ("pop", "update", "setdefault"):
        return False
    for arg in call.args:
        values = [e.key for e in arg.value.elements if isinstance(e, cst.DictElement)] if isinstance(arg.value, cst.Dict) else [arg.value]
        if (arg.keyword is not None and arg.keyword.value == key) or any(
                isinstance(v, cst.SimpleString) and v.evaluated_value == key for v in values):
            return True
    return False


def _names_key(target, key: str) -> bool:
    slices = target.slice if isinstance(target, cst.Subscript) else ()
    return any(isinstance(s.slice, cst.Index) and isinstance(s.slice.value, cst.SimpleString)
               and s.slice.value.evaluated_value == key for s in slices)


def _branches(ctx, index, call, expr):
    """(whether ``call`` sits in a branch of a test reading ``expr``, the ``if``/``while``/``assert``
    statements before it in its function whose test reads ``expr``)."""
    keys = index.value_keys(expr) if expr is not None else []
    if not keys:
        return False, []

    def reads(test) -> bool:
        return any(index.reads_key(n, k) for n in iter_subtree(test) if isinstance(n, (cst.Name, cst.Attribute)) for k in keys)

    func = ctx.enclosing_function(call)
    child, found = call, []
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, (cst.If, cst.While, cst.IfExp)) and child is not ancestor.test and reads(ancestor.test):
            return True, found
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            for statement in ancestor.body:
                if statement is child:
                    break
                for node in iter_subtree(statement):
                    if isinstance(node, (cst.If, cst.While, cst.Assert)) and reads(node.test):
                        found.append(node)
        if ancestor is func:
            break
        child = ancestor
    return False, found


def option_handled(ctx, index, bound, option: str) -> bool:
    """A branch on the loader's worker count before it handles ``option`` (``handles_count``)."""
    expr = bound.expr("num_workers")
    if expr is None and not bound.passed("num_workers") and bound.has_star_kwargs:
        expr = kwargs_expr(ctx, bound.call, "num_workers")
    return expr is not None and handles_count(ctx, index, bound, expr, option)
