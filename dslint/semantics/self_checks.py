"""A dataset module's own check: code that runs only when the module is run as a script.

A module that defines a dataset class other files of the project construct is the
project's library code. Its ``if __name__ == "__main__":`` block (and a module-level
function that only that block calls) tries the class out: it builds a loader, prints a
few batches, shows them in a window or drops into a debugger. Nothing trains there, so
what that code does is no training run's cost (test code, like ``tests/``).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst


def main_guard(ctx) -> Optional[cst.If]:
    """The module-level ``if __name__ == "__main__":`` statement, or None."""
    def compute():
        for stmt in ctx.module.body:
            if isinstance(stmt, cst.If) and _is_main_test(stmt.test):
                return stmt
        return None
    return ctx.memo(("self_checks.main_guard",), compute)


def _is_main_test(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    sides = (test.left, target.comparator)
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return len(names) == 1 and len(strings) == 1


def is_self_check(ctx, node: cst.CSTNode) -> bool:
    """``node`` runs only as the module's own check: inside its ``__main__`` block, or in a
    module-level function that only that block calls (no other file calls it), in a module
    whose dataset class some other file of the project constructs."""
    guard = main_guard(ctx)
    if guard is None or not _library_module(ctx):
        return False
    if _inside(ctx, node, guard):
        return True
    func = ctx.enclosing_function(node)
    while func is not None and ctx.enclosing_function(func) is not None:
        func = ctx.enclosing_function(func)
    if func is None or ctx.method_class(func) is not None:
        return False
    return ctx.memo(("self_checks.only_main", id(func)), lambda: _only_main_calls(ctx, func, guard))


def _only_main_calls(ctx, func: cst.FunctionDef, guard: cst.If) -> bool:
    """No other file calls ``func``, and every name of this file that refers to it is in ``guard``."""
    if ctx.view.called_elsewhere(ctx.qualname_of_def(func)):
        return False
    uses = [n for n in ctx.nodes(cst.Name) if n.value == func.name.value and n is not func.name]
    return bool(uses) and all(_inside(ctx, use, guard) for use in uses)


def _library_module(ctx) -> bool:
    """A dataset class of this module is constructed by another file of the project."""
    def compute():
        return any(ctx.view.called_elsewhere(ctx.qualname_of_def(cls), "classes") for cls in ctx.dataset_classes())
    return ctx.memo(("self_checks.library",), compute)


def _inside(ctx, node: cst.CSTNode, guard: cst.If) -> bool:
    return any(ancestor is guard.body for ancestor in ctx.ancestors(node))
