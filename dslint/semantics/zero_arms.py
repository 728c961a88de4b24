"""Worker-only options chosen by the worker count itself.

``prefetch_factor=cfg.prefetch if num_workers > 0 else 2`` shows that the author expects
``num_workers`` to be 0, and picks for that case a value torch rejects without workers
(since torch 2.0 ``prefetch_factor`` must then be ``None``). ``zero_arm_options`` finds the
options of a loader call whose value is a conditional expression testing the call's own
worker count against 0, and whose arm for 0 workers still sets the option.
``workers_arm`` gives the arm such a conditional takes whenever there are workers
(``multiprocessing_context="fork" if num_workers > 0 else None`` is ``"fork"`` for every worker).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import libcst as cst

from dslint.semantics.calls import UNKNOWN

#: what "set" means for each worker-only option (torch rejects it without workers)
WORKER_ONLY: Dict[str, Callable[[object], bool]] = {
    "prefetch_factor": lambda v: v is not None,
    "persistent_workers": lambda v: v is True,
    "multiprocessing_context": lambda v: v is not None,
    "timeout": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
}

#: what torch raises for each of them when ``num_workers`` is 0
TORCH_ERRORS: Dict[str, str] = {
    "prefetch_factor": "`ValueError: prefetch_factor option could only be specified in multiprocessing`",
    "persistent_workers": "`ValueError: persistent_workers option needs num_workers > 0`",
    "multiprocessing_context": "`ValueError: multiprocessing_context can only be used with multi-process loading`",
    "timeout": "`AssertionError: _SingleProcessDataLoaderIter requires timeout == 0` at the first `iter()`",
}


def _zero_when(ctx, test: cst.BaseExpression, count: str) -> Optional[bool]:
    """The truth of ``test`` when the worker count (the code ``count``) is 0; None when the
    test is not a plain comparison of that count with 0 or 1."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _zero_when(ctx, test.expression, count)
        return None if inner is None else not inner
    if ctx.code(test).strip() == count:
        return False  # `x if workers else y`
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    left, target = test.left, test.comparisons[0]
    right, op = target.comparator, target.operator
    if ctx.code(left).strip() != count:
        return None
    bound = ctx.literal(right)
    if isinstance(bound, bool) or not isinstance(bound, int) or bound not in (0, 1):
        return None
    table = {
        cst.GreaterThan: 0 > bound, cst.GreaterThanEqual: 0 >= bound, cst.LessThan: 0 < bound,
        cst.LessThanEqual: 0 <= bound, cst.Equal: 0 == bound, cst.NotEqual: 0 != bound,
    }
    return table.get(type(op))


#: comparisons of the count with 0 or 1 that split 0 from every positive count: (operator, bound)
_SPLITS = frozenset({(cst.GreaterThan, 0), (cst.NotEqual, 0), (cst.Equal, 0), (cst.LessThanEqual, 0),
                     (cst.GreaterThanEqual, 1), (cst.LessThan, 1)})


def workers_arm(ctx, bound, expr) -> Optional[cst.BaseExpression]:
    """The arm the conditional ``expr`` (an argument of the loader call ``bound``) takes for every
    positive worker count, when its test compares the call's own count with 0 (or 1) and so splits
    0 from the rest (``> 0``, ``!= 0``, ``>= 1``, a bare count, their negations); None otherwise."""
    count_expr = bound.expr("num_workers")
    if not isinstance(expr, cst.IfExp) or count_expr is None:
        return None
    count = ctx.code(count_expr).strip()
    test = expr.test
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if isinstance(test, cst.Comparison):
        if len(test.comparisons) != 1:
            return None
        target = test.comparisons[0]
        if (type(target.operator), ctx.literal(target.comparator)) not in _SPLITS:
            return None
    zero = _zero_when(ctx, expr.test, count)
    if zero is None:
        return None
    return expr.orelse if zero else expr.body


def zero_arm_options(ctx, bound) -> List[Tuple[str, cst.IfExp, object, bool, str]]:
    """(option, conditional, value, the test's truth at 0 workers, the worker count's code) for each worker-only option of the loader call ``bound``
    whose arm for ``num_workers == 0`` (by its own test of the call's worker count) sets it."""
    count_expr = bound.expr("num_workers")
    if count_expr is None:
        return []
    count = ctx.code(count_expr).strip()
    found = []
    for name, is_set in WORKER_ONLY.items():
        expr = bound.expr(name)
        if not isinstance(expr, cst.IfExp):
            continue
        zero = _zero_when(ctx, expr.test, count)
        if zero is None:
            continue
        arm = expr.body if zero else expr.orelse
        value = ctx.literal(arm)
        if value is not UNKNOWN and value is not None and is_set(value):
            found.append((name, expr, value, zero, count))
    return found
