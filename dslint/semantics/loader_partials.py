"""Calls of a ``functools.partial`` of ``DataLoader``.

``make = partial(DataLoader, collate_fn=pad, worker_init_fn=seed)`` then ``make(train_set,
batch_size=8, num_workers=4)`` builds a DataLoader whose arguments are the partial's keywords
and the call's (the call's win, as ``partial`` merges them). ``partial_loader_calls(ctx)``
finds each such call in the file: the partial is bound to a name (a local or a module-level
one, bound to nothing else in its scope) or to an attribute of ``self`` in a method (every
store of it in the class is that partial), and is called by that name. A partial given a
positional argument besides ``DataLoader`` itself, or ``*``/``**`` arguments, is not
followed (its arguments cannot all be placed).

API: ``partial_loader_calls(ctx) -> List[Tuple[cst.Call, cst.Call]]`` (the call, its partial).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import single_assignment
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.self_stores import attribute_stores

_PARTIAL = "functools.partial"
_DATALOADER = "torch.utils.data.DataLoader"


def partial_loader_calls(ctx) -> List[Tuple[cst.Call, cst.Call]]:
    return ctx.memo(("loader_partials.calls",), lambda: _find(ctx))


def _find(ctx) -> List[Tuple[cst.Call, cst.Call]]:
    partials = [call for call in ctx.calls_to(_PARTIAL) if _is_loader_partial(ctx, call)]
    if not partials:
        return []
    found = []
    for call in ctx.nodes(cst.Call):
        partial = _partial_of(ctx, call.func)
        if partial is not None and any(partial is p for p in partials):
            found.append((call, partial))
    return found


def _is_loader_partial(ctx, call: cst.Call) -> bool:
    args = call.args
    if not args or args[0].keyword is not None or args[0].star or ctx.qualname(args[0].value) != _DATALOADER:
        return False
    return all(a.keyword is not None and not a.star for a in args[1:])


def _partial_of(ctx, func: cst.BaseExpression) -> Optional[cst.Call]:
    """The partial ``func`` (a name or ``self.x``) is bound to, or None."""
    if isinstance(func, cst.Name):
        value = single_assignment(ctx.tree, func)  # (bound once in its scope)
        return value if isinstance(value, cst.Call) and ctx.call_name(value) == _PARTIAL else None
    if isinstance(func, cst.Attribute):
        method = ctx.enclosing_function(func)
        owner = ctx.method_class(method) if method is not None else None
        attr = self_attr(func, self_name(method)) if owner is not None else None
        if attr is None:
            return None
        stored = [node.value for node in attribute_stores(ctx, owner, attr)]
        if len(stored) == 1 and isinstance(stored[0], cst.Call) and ctx.call_name(stored[0]) == _PARTIAL:
            return stored[0]
    return None
