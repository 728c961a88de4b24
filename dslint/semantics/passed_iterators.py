"""Is a parameter of ``__init__`` a one-shot iterator its callers pass in?

``self.rows = rows`` keeps what the constructions of the class hand over; when some
construction in the project (any file, through the summaries' ``passed_iterators`` and
``View.one_shot_arguments``) passes a generator expression, ``iter()``/``map()``/...,
or a call of a generator function at that parameter, the attribute holds a one-shot
iterator made once per dataset.
"""

from __future__ import annotations

from typing import Optional, Set, Tuple

import libcst as cst

from dslint.semantics.walk import iter_subtree

PASSED = "passed"  # a one-shot iterator the callers of __init__ pass in


def passed_one_shot(ctx, cls, init: cst.FunctionDef, value) -> Optional[Tuple[cst.CSTNode, str]]:
    """``self.x = param``, a parameter of ``__init__`` never rebound there, where some
    construction of the class in the project passes a one-shot iterator: (value, PASSED)."""
    if not isinstance(value, cst.Name) or ctx.enclosing_function(value) is not init:
        return None
    positional = [*init.params.posonly_params, *init.params.params]
    params = positional + list(init.params.kwonly_params)
    if not any(p.name.value == value.value for p in params) or ctx.method_class(init) is not cls:
        return None
    if any(
        isinstance(node, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr))
        and value.value in _bound_names(node.target)
        for node in iter_subtree(init.body, into_scopes=False)
    ):
        return None  # rebound before or after: not simply what the caller passed
    names = [p.name.value for p in positional][1:]  # without self
    position = names.index(value.value) if value.value in names else None
    callers = ctx.view.one_shot_arguments(ctx.qualname_of_def(cls), position, value.value)
    return (value, PASSED) if callers else None


def _bound_names(target) -> Set[str]:
    """Plain names a target binds (``x``, ``a, *b``), not attributes or subscripts."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _bound_names(e.value)}
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return set()
