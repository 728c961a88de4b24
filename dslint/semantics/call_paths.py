"""Which arm of a conditional expression the file's own calls take.

``arms_taken(ctx, expr)``: for ``a if cond else b`` inside a function, where ``cond`` tests one
parameter of that function (``flag``, ``not flag``, ``flag is None``, ``flag is not None``,
``flag == "x"``, ``flag != "x"``), the arms that the calls of the function in this file choose:
each call passes a literal for the parameter, or leaves it to a literal default. None when that
cannot be told (no call here, a value that is not a literal, arguments hidden by ``*args``).

So ``prefetch_factor=4 if not test else None`` in a helper that ``train_dataloader`` calls with
``test=False`` is set on that path, whatever the test loader's call does.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import libcst as cst

from dslint.semantics.calls import UNKNOWN, literal_value
from dslint.semantics.call_sites import call_sites


def arms_taken(ctx, expr: cst.CSTNode) -> Optional[List[cst.BaseExpression]]:
    """The arms of the conditional ``expr`` that this file's calls take (see the module docstring)."""
    if not isinstance(expr, cst.IfExp):
        return None
    func = ctx.enclosing_function(expr)
    test = _parameter_test(expr.test)
    if func is None or test is None:
        return None
    name, holds = test
    params = (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params)
    param = next((p for p in params if p.name.value == name), None)
    if param is None:
        return None
    sites = call_sites(ctx, func, param)
    taken: List[cst.BaseExpression] = []
    for call, arg in sites:
        if arg is None and any(a.star for a in call.args):
            return None  # the value may be in the unpacked arguments
        value = literal_value(arg) if arg is not None else (
            literal_value(param.default) if param.default is not None else UNKNOWN)
        if value is UNKNOWN:
            return None
        arm = expr.body if holds(value) else expr.orelse
        if not any(arm is seen for seen in taken):
            taken.append(arm)
    return taken or None


def _parameter_test(test) -> Optional[Tuple[str, Callable[[object], bool]]]:
    """(parameter name, the test as a function of its value) for the forms listed above."""
    if isinstance(test, cst.Name):
        return test.value, bool
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and isinstance(test.expression, cst.Name):
        return test.expression.value, lambda value: not value
    if isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        other = literal_value(target.comparator)
        if other is UNKNOWN:
            return None
        operator = target.operator
        if isinstance(operator, (cst.Is, cst.Equal)):
            return test.left.value, lambda value: value == other
        if isinstance(operator, (cst.IsNot, cst.NotEqual)):
            return test.left.value, lambda value: value != other
    return None
