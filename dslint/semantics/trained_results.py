"""Which loaders a loader factory returns are trained on by a DDP script of another file (DSL702).

A training script that runs once per rank (``init_process_group``, a
``DistributedDataParallel`` wrapper...) often gets its loader from a factory of another
file (``train_loader = build_loader(cfg)``, ``train, val = make_loaders(cfg)``). Whether
that loader has a ``DistributedSampler`` is decided in the factory, whose file shows no DDP.

Phase 1 (``trained_facts``, a summary fact): in a file with a process-group marker
(``PROCESS_GROUP_CALLS`` or a read of the launcher's rank variables; an ``Accelerator``/
``Fabric`` does not count: they shard what they prepare), each ``for`` loop that trains (its
body calls ``.backward()``) over a name assigned once in its function from a project
function's result: ``[callee, position]`` (position -1: the whole result; ``i``: element
``i`` of a tuple unpacking). A loop under an ``if`` naming the rank is left out, and so is a call
passing the rank or the world size (the factory may cut the data per rank itself).

Phase 2 (``trained_positions``): for one function of the project, [module, marker, position]
of those loops (any file). ``returned_position`` says where a loader call of the factory's
file lands in what its function returns.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.bindings import call_binding
from dslint.semantics.distributed import mentions_rank, method_name
from dslint.semantics.loader_roles import unconditional
from dslint.semantics.test_paths import is_test_module
from dslint.semantics.rank_entries import markers, names_context
from dslint.semantics.walk import iter_subtree

_LIBRARIES = ("builtins.", "torch.", "numpy.", "os.", "sys.", "tqdm.", "itertools.")


def _iterated_name(expr: cst.BaseExpression) -> Optional[str]:
    """``loader`` in ``for b in loader``, ``enumerate(loader)``, ``tqdm(enumerate(loader))``."""
    for _ in range(3):
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None and not expr.args[0].star:
            expr = expr.args[0].value
            continue
        return None
    return None


def _rank_guarded(tree, ctx, node) -> bool:
    previous = node
    for ancestor in tree.ancestors(node):
        if isinstance(ancestor, cst.If) and previous is not ancestor.test and mentions_rank(ctx, ancestor.test):
            return True
        previous = ancestor
    return False


def trained_facts(tree, names) -> dict:
    if is_test_module(names.modname):
        return {}
    marker = markers(tree, names)[1]
    if marker is None:
        return {}
    ctx = names_context(names)
    loops = []
    for loop in tree.nodes(cst.For):
        name = _iterated_name(loop.iter)
        func = next((a for a in tree.ancestors(loop) if isinstance(a, cst.FunctionDef)), None)
        if name is None or func is None or _rank_guarded(tree, ctx, loop):
            continue
        if not any(isinstance(n, cst.Call) and method_name(n) == "backward" for n in iter_subtree(loop.body, into_scopes=False)):
            continue
        bound = call_binding(func, name)
        if bound is None or not isinstance(bound[0].func, (cst.Name, cst.Attribute)):
            continue
        if any(mentions_rank(ctx, arg.value, shards=True) for arg in bound[0].args):
            continue  # the factory is told the rank or the world: it may cut the data itself
        callee = names.qualname(bound[0].func)
        if callee and not callee.startswith(_LIBRARIES) and [callee, bound[1]] not in loops:
            loops.append([callee, bound[1]])
    return {"marker": marker, "loops": loops} if loops else {}


# ----------------------------------------------------------------------- phase 2


def trained_positions(index, key) -> List[list]:
    """[module, marker, position] of each training loop of a DDP file (any file) over the result
    (or an element of it) of the project function ``key``."""
    table = getattr(index, "trained_result_table", None)
    if table is None:
        table = {}
        for path, summary in index.summaries.items():
            facts = summary.get("trained_results") or {}
            for callee, position in facts.get("loops", ()):
                located = index.locate(callee, path, table="functions")
                if located is not None:
                    table.setdefault(located, []).append([summary["module"], facts["marker"], position])
        index.trained_result_table = table
    return table.get(key, [])


def returned_position(ctx, call: cst.Call) -> Optional[int]:
    """Where the loader ``call`` lands in what its function returns: -1 when returned itself (or
    through a name assigned once), ``i`` when element ``i`` of a returned tuple; None otherwise.
    The call must run every time the function runs (no branch, loop or ``try`` around it)."""
    func = ctx.enclosing_function(call, through_lambdas=False)
    if func is None or not unconditional(ctx, call, func):
        return None
    parent = ctx.parent(call)
    held = None
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        held = parent.targets[0].target.value
        if call_binding(func, held) is None:
            return None
    returns = [r for r in iter_subtree(func.body, into_scopes=False) if isinstance(r, cst.Return)]
    if len(returns) != 1 or returns[0].value is None:
        return None
    value = returns[0].value

    def same(expr) -> bool:
        return expr is call or (held is not None and isinstance(expr, cst.Name) and expr.value == held)

    if same(value):
        return -1
    if isinstance(value, cst.Tuple):
        for i, element in enumerate(value.elements):
            if isinstance(element, cst.Element) and same(element.value):
                return i
    return None
