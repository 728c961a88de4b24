"""What a ``None`` test around a read says of the value read.

``none_test(ctx, expr)`` answers, for a name or a dotted attribute read at ``expr``
(``sampler``, ``self.sampler``), whether an enclosing test of the same function decides
if it is ``None`` there, the way a type checker narrows ``Optional``:

- in the body of ``if x is None`` (or of ``if a and x is None and b``): ``None``;
- in the body of ``if x is not None`` (or ``if x`` / ``if a and x``): not ``None``;
- in the ``else`` of a single test, the reverse (``if x is not None: ... else: read``);
- the same for both arms of a conditional expression.

A test stops counting when the branch binds the same target again before the read, or
when the test and the read lie in different functions. Values (``values.possible``) use
it: a read under ``if x is None`` is exactly ``None``, whatever ``x`` was bound to.
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

import libcst as cst

from dslint.semantics.walk import iter_subtree

IS_NONE = "is None"
NOT_NONE = "is not None"


def none_test(ctx, expr: cst.CSTNode) -> Optional[Tuple[str, cst.CSTNode]]:
    """(``IS_NONE`` or ``NOT_NONE``, the deciding test) for the read ``expr``; None when no test decides."""
    if not _is_target(expr):
        return None
    text = ctx.code(expr).strip()
    child = expr
    for parent in ctx.ancestors(expr):
        if isinstance(parent, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)):
            return None
        if isinstance(parent, (cst.If, cst.IfExp)):
            in_body = child is parent.body
            in_else = child is parent.orelse
            if in_body or in_else:
                found = _decided(ctx, parent.test, text, in_body)
                if found is not None and not (isinstance(parent, cst.If) and _rebinds(ctx, child, text, expr)):
                    return found, parent.test
        child = parent
    return None


def _is_target(expr) -> bool:
    if isinstance(expr, cst.Name):
        return True
    return isinstance(expr, cst.Attribute) and _is_target(expr.value)


def _decided(ctx, test: cst.BaseExpression, text: str, in_body: bool) -> Optional[str]:
    """What ``test`` being true (``in_body``) or false says of ``text`` being None."""
    conjuncts = list(_conjuncts(test))
    if in_body:
        for part in conjuncts:
            found = _single(ctx, part, text)
            if found is not None:
                return found
        return None
    if len(conjuncts) != 1:  # ``not (a and b)`` decides neither
        return None
    found = _single(ctx, conjuncts[0], text)
    if found is None:
        return None
    return NOT_NONE if found == IS_NONE else IS_NONE if _is_none_comparison(conjuncts[0]) else None


def _conjuncts(test) -> Iterator[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        yield from _conjuncts(test.left)
        yield from _conjuncts(test.right)
    else:
        yield test


def _single(ctx, test, text: str) -> Optional[str]:
    """``x is None`` → IS_NONE; ``x is not None`` or a bare ``x`` → NOT_NONE."""
    if _is_none_comparison(test):
        target = ctx.code(test.left).strip()
        if target != text:
            return None
        return IS_NONE if isinstance(test.comparisons[0].operator, cst.Is) else NOT_NONE
    if _is_target(test) and ctx.code(test).strip() == text:
        return NOT_NONE
    return None


def _is_none_comparison(test) -> bool:
    return (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, (cst.Is, cst.IsNot))
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    )


def _rebinds(ctx, branch: cst.CSTNode, text: str, read: cst.CSTNode) -> bool:
    """The branch binds ``text`` (assignment, augmented assignment, ``for``/``with`` target) before ``read``."""
    end = ctx.line(read)
    targets: List[cst.CSTNode] = []
    for node in iter_subtree(branch, into_scopes=False):
        if isinstance(node, cst.AssignTarget):
            targets.append(node.target)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For)):
            targets.append(node.target)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets.append(node.asname.name)
        elif isinstance(node, cst.NamedExpr):
            targets.append(node.target)
    for target in targets:
        if ctx.line(target) > end:
            continue
        for part in iter_subtree(target):
            if isinstance(part, (cst.Name, cst.Attribute)) and ctx.code(part).strip() == text:
                return True
    return False
