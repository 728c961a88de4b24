"""Evidence, short of the value itself, that a dataset a function receives can be iterable.

A helper that builds a loader over a dataset its caller passes (``def make(ds, ...)``)
shows nothing about that dataset's class, and a user dataset that nothing shows to be
iterable is not assumed to be one. The one piece of evidence taken here is the
parameter's own annotation: ``ds: IterableDataset``, ``Optional[IterableDataset]``,
``Union[Dataset, IterableDataset]`` or ``Dataset | IterableDataset`` say the caller
may hand over an ``IterableDataset`` (an alternative nested in another type,
``Sequence[IterableDataset]``, does not: the value is then a sequence). A docstring
is no evidence, nor is ``Dataset`` (every dataset is one).

It holds only when the name read at the loader is bound by that parameter alone
(nothing in the function rebinds it) and the function does not itself name
``IterableDataset`` in its body (an ``isinstance`` test may choose the options).
"""

from __future__ import annotations

from typing import Iterator, Optional, Tuple

import libcst as cst

from dslint.semantics.walk import iter_subtree

ITERABLE_CLASSES = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})
UNIONS = frozenset({"typing.Union", "typing.Optional"})


def _alternatives(ctx, annotation: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The types an annotation allows at its top level (through ``Union``/``Optional``/``|``)."""
    if isinstance(annotation, cst.Subscript) and isinstance(annotation.value, (cst.Name, cst.Attribute)) \
            and ctx.qualname(annotation.value) in UNIONS:
        for element in annotation.slice:
            if isinstance(element.slice, cst.Index):
                yield from _alternatives(ctx, element.slice.value)
        return
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        yield from _alternatives(ctx, annotation.left)
        yield from _alternatives(ctx, annotation.right)
        return
    yield annotation


def _names_iterable(ctx, node: cst.CSTNode) -> bool:
    return isinstance(node, (cst.Name, cst.Attribute)) and ctx.qualname(node) in ITERABLE_CLASSES


def annotated_iterable(ctx, index, expr: Optional[cst.BaseExpression]) -> Optional[Tuple[str, str, bool]]:
    """(parameter name, its annotation's code, whether it can only be iterable) when ``expr`` is
    a parameter whose annotation allows an ``IterableDataset``; None otherwise."""
    if not isinstance(expr, cst.Name):
        return None
    scope, bindings = index.name_bindings(expr.value, expr)
    if not isinstance(scope, cst.FunctionDef) or not bindings or len(bindings) != 1 or bindings[0].kind != "param":
        return None
    param = bindings[0].node
    if not isinstance(param, cst.Param) or param.annotation is None:
        return None
    annotation = param.annotation.annotation
    options = list(_alternatives(ctx, annotation))
    iterable = [o for o in options if _names_iterable(ctx, o)]
    if not iterable:
        return None
    if any(_names_iterable(ctx, n) for n in iter_subtree(scope.body, into_scopes=False)):
        return None
    only = all(_names_iterable(ctx, o) or (isinstance(o, cst.Name) and o.value == "None") for o in options)
    return expr.value, ctx.module.code_for_node(annotation), only
