"""Which datasets a function returns to a DataLoader of another file (DSL506).

A dataset factory (``get_cifar10(root)`` in ``datasets.py``) often builds the datasets that
a training script of another file hands to its loaders (``train_set, test_set =
get_cifar10(root)``, then ``DataLoader(train_set, num_workers=args.workers)``). What the
datasets keep (a lambda as their ``target_transform``) is decided in the factory, whose file
shows no loader, and that is where the fix goes.

Phase 1 (``loader_results``, summary fact ``loader_results``): for each DataLoader
construction whose ``num_workers`` is passed (also in a ``**`` dict the file builds, in either
arm of ``{"num_workers": n} if cuda else {}``) and is not a literal 0 (or None/False), its
dataset argument when it is a call (``DataLoader(make_set(cfg), ...)``) or a name its
function (or the module) assigns from calls only, each assignment a path (``ds =
make_set(cfg)``; ``a, b = make_sets(cfg)``; ``pair = make_sets(cfg)`` then ``a, b = pair``;
``size, ds = 32, make()``): ``[callee, position]`` (position -1: the whole result, ``i``:
element ``i`` of it). A function of
the same file that returns, at that position, a name it assigns the same way (``def
pick(name): tr, te = get_cifar10(); return tr, te``) stands for those calls (one step).

Phase 2 (``loader_positions``): for one function of the project, ``[module, position]`` of
those loaders in other files.

``returned_datasets(ctx)``: ``(function, expression, module)`` for each dataset a module-level
function of this file returns to such a loader: a ``return``'s value, or element
``position`` of a returned tuple.
"""

from __future__ import annotations

from typing import Iterator, List, Tuple

import libcst as cst

from dslint.semantics.bindings import value_bindings
from dslint.semantics.calls import DATALOADER, UNKNOWN, BoundCall, literal_value
from dslint.semantics.epoch_facts import dataloader_calls
from dslint.semantics.kwargs_dicts import FileSource, closed_items
from dslint.semantics.walk import plain_returns


def _sources(scope, name: str, depth: int = 0) -> List[Tuple[cst.Call, int]]:
    """(a call ``name`` may hold the result of, or an element of, position) for each assignment of
    ``name`` in ``scope`` (each a path), when every one is such a call; else none."""
    out = []
    for value, position in value_bindings(scope, name) or ():
        if position >= 0 and isinstance(value, (cst.Tuple, cst.List)) and all(isinstance(e, cst.Element) for e in value.elements[:position + 1]) and position < len(value.elements):
            value, position = value.elements[position].value, -1  # ``size, ds = 32, make()``
        if isinstance(value, cst.Call):
            out.append((value, position))
            continue
        whole = _sources(scope, value.value, 1) if isinstance(value, cst.Name) and position >= 0 and depth == 0 else []
        if not whole or any(p != -1 for _, p in whole):  # ``a, b = pair``, ``pair = make()``
            return []
        out.extend((call, position) for call, _ in whole)
    return out


def _returned_sources(func: cst.FunctionDef, position: int) -> List[Tuple[cst.Call, int]]:
    """What this file's function returns at ``position``, when every ``return`` gives there a name
    assigned from calls (``tr, te = load(); return tr, te``): those calls and where in them."""
    out = []
    for node in plain_returns(func) or ():
        value = _returned_at(node, position)
        found = _sources(func, value.value) if isinstance(value, cst.Name) else []
        if not found:
            return []
        out.extend(found)
    return out


def _returned_at(node: cst.Return, position: int):
    """What ``node`` returns at ``position``: the whole value (-1), or element ``position`` of a
    returned tuple display (None when it returns anything else there)."""
    value = node.value
    if position < 0:
        return value
    return value.elements[position].value if isinstance(value, cst.Tuple) and position < len(value.elements) else None


def _may_start_workers(tree, names, bound) -> bool:
    """``num_workers`` is passed, or given by a ``**`` dict the file builds (``closed_items``), and
    one value it is given is not a literal 0 (or None/False)."""
    given = [bound.expr("num_workers")] if bound.passed("num_workers") else [
        value for key, value in closed_items(FileSource(tree, names), bound.call)[0] if key == "num_workers"]
    return any(literal_value(value) is UNKNOWN or literal_value(value) not in (0, None, False) for value in given)


def loader_results(tree, names) -> List[list]:
    """Phase 1: see the module docstring."""
    defs = {node.name.value: node for node in tree.nodes(cst.FunctionDef) if isinstance(tree.parent_of(node), cst.Module)}
    out: List[list] = []
    for call in dataloader_calls(tree, names):
        bound = BoundCall(call, DATALOADER)
        if not _may_start_workers(tree, names, bound):
            continue  # no workers: nothing is pickled
        dataset = bound.expr("dataset")
        ancestors = list(tree.ancestors(call))
        scope = next((a for a in ancestors if isinstance(a, cst.FunctionDef)), ancestors[-1] if ancestors else None)
        if not isinstance(scope, (cst.FunctionDef, cst.Module)):
            continue
        sources = [(dataset, -1)] if isinstance(dataset, cst.Call) else _sources(scope, dataset.value) if isinstance(dataset, cst.Name) else []
        for call, position in sources:
            if isinstance(call.func, cst.Name) and call.func.value in defs:  # a helper of this file handing it on
                found = _returned_sources(defs[call.func.value], position)
            else:
                found = [(call, position)]
            for source, where in found:
                callee = names.qualname(source.func) if isinstance(source.func, (cst.Name, cst.Attribute)) else None
                if callee and not callee.startswith(("builtins.", "torch.", names.modname + ".")):
                    fact = [callee, where]
                    if fact not in out:
                        out.append(fact)
    return out


# ----------------------------------------------------------------------- phase 2


def loader_positions(index, key) -> List[list]:
    """[module, position] of each loader of another file over the result (or an element of it) of
    the project function ``key``."""
    table = getattr(index, "loader_result_table", None)
    if table is None:
        table = {}
        for path, summary in index.summaries.items():
            for callee, position in summary.get("loader_results", ()):
                located = index.locate(callee, path, table="functions")
                if located is not None and located[0] != path:
                    table.setdefault(located, []).append([summary["module"], position])
        index.loader_result_table = table
    return table.get(key, [])


def returned_datasets(ctx) -> Iterator[Tuple[cst.FunctionDef, cst.BaseExpression, str]]:
    """See the module docstring."""
    for func in ctx.nodes(cst.FunctionDef):
        if not isinstance(ctx.parent(func), cst.Module):
            continue
        modules = {}  # position -> the first module whose loader takes it (each position judged once)
        for module, position in ctx.view.returned_to_loaders(ctx.qualname_of_def(func)):
            modules.setdefault(position, module)
        for position, module in modules.items():
            for node in plain_returns(func, ctx.tree) or ():
                value = _returned_at(node, position)
                if value is not None:
                    yield func, value, module
