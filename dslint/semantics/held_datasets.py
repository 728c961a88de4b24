"""Which datasets does a wrapper dataset hold?

A DataLoader pickles its dataset for each spawned worker, and with it every dataset that a
wrapper keeps: ``ConcatDataset(parts)`` and ``ChainDataset(parts)`` keep each part (given as a
display, or as a list bound to a name by a display that the scope then fills with ``append``,
``insert`` or ``extend``: ``containers.list_fills``; a list the scope extends with ``+=`` is not
followed); ``Subset(ds, idx)`` and each part of ``random_split(ds, ...)``
keep ``ds``. ``wrapped_datasets`` lists the expressions whose objects a dataset expression
holds through such wrappers, following names to the values they may hold
(``ValueFlow.value_nodes``); a part that is itself a wrapper is followed in turn.
"""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.containers import list_fills

#: wrappers that keep a sequence of datasets (their first argument), and those that keep one
_OF_PARTS = frozenset({"torch.utils.data.ConcatDataset", "torch.utils.data.ChainDataset"})
_OF_ONE = frozenset({"torch.utils.data.Subset", "torch.utils.data.random_split"})
_MAX_DEPTH = 6


def wrapped_datasets(ctx, index, expr) -> List[cst.CSTNode]:
    """The dataset expressions that the wrappers ``expr`` may evaluate to keep (not ``expr``)."""
    out: List[cst.CSTNode] = []
    _wrapped(ctx, index, expr, out, 0)
    return out


def _wrapped(ctx, index, expr, out: List[cst.CSTNode], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    for node in _values(ctx, index, expr):
        if isinstance(node, cst.Subscript):  # ``random_split(ds, [0.9, 0.1])[0]``
            node = node.value
        if not isinstance(node, cst.Call) or not node.args or node.args[0].star:
            continue
        name = ctx.call_name(node)
        first = node.args[0].value
        if name in _OF_ONE:
            parts = [first]
        elif name in _OF_PARTS:
            parts = [item for value in _values(ctx, index, first) for item in _items(ctx, value)]
        else:
            continue
        for part in parts:
            if not any(part is seen for seen in out):
                out.append(part)
                _wrapped(ctx, index, part, out, depth + 1)


def _values(ctx, index, expr) -> List[cst.CSTNode]:
    """What ``expr`` may evaluate to: a name's values (each one a path), else ``expr`` itself; a
    name unpacked from a call (``train, val = random_split(ds, ...)``): that call."""
    if not isinstance(expr, cst.Name):
        return [expr]
    nodes = index.value_nodes(expr)
    if nodes is not None:
        return list(nodes)
    found = []
    for assign in ctx.tree.scope_nodes(ctx.tree.scope_node(expr), cst.Assign):
        for target in assign.targets:
            held = target.target
            if isinstance(held, (cst.Tuple, cst.List)) and isinstance(assign.value, cst.Call) and any(
                    isinstance(element.value, cst.Name) and element.value.value == expr.value for element in held.elements):
                found.append(assign.value)
    return found


def _items(ctx, value) -> List[cst.CSTNode]:
    """The datasets a sequence holds: a display's elements and, for a list bound to a name, what
    the scope adds to it (``parts.append(ds)``)."""
    if isinstance(value, (cst.List, cst.Tuple)):
        items = [element.value for element in value.elements if not isinstance(element, cst.StarredElement)]
        holder = ctx.parent(value)
        if isinstance(value, cst.List) and isinstance(holder, cst.Assign) and len(holder.targets) == 1 \
                and isinstance(holder.targets[0].target, cst.Name):
            items += list_fills(ctx, holder.targets[0].target)
        return items
    return []


__all__ = ["wrapped_datasets"]
