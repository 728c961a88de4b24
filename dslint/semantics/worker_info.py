"""Whether code consults ``torch.utils.data.get_worker_info()``, and what for.

``is_worker_info``/``mentions_worker_info`` find the function under any import alias;
``worker_info_shards`` tells a read that can split the data (``info.id`` in an index,
the object passed on) from one that only seeds a random generator, logs it or tests
it for None; ``shards_transitively`` follows project functions across files through
``ctx.view``. A function that cannot be seen is unknown (None), never a yes.
``main_process_only`` tells code that a test of it keeps out of the workers
(``if get_worker_info() is None:``).
"""

from __future__ import annotations

from typing import List, Optional, Set

import libcst as cst

from dslint.semantics.bindings import single_assignment
from dslint.semantics.names import dotted_parts
from dslint.semantics.summary import WORKER_INFO
from dslint.semantics.walk import iter_subtree

def is_worker_info(ctx, node) -> bool:
    """``node`` names ``torch.utils.data.get_worker_info`` (under any import alias)."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        parts = dotted_parts(node)
        tails = ctx.names.call_tails({"get_worker_info"})  # the name and its import aliases
        return bool(parts) and parts[-1] in tails and ctx.qualname(node) == WORKER_INFO
    return False


def mentions_worker_info(ctx, func: cst.FunctionDef) -> bool:
    """The function, nested functions included, names ``get_worker_info``."""
    return any(is_worker_info(ctx, node) for node in iter_subtree(func.body, into_scopes=True))


# Calls whose arguments only seed a random generator: a worker id read there varies the
# random draws per worker, it does not split the data.
SEEDING_CALLS = frozenset(
    {
        "numpy.random.seed", "numpy.random.mtrand.seed", "random.seed", "torch.manual_seed",
        "torch.random.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all",
        "numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator", "numpy.random.PCG64",
        "numpy.random.SeedSequence", "random.Random", "imgaug.seed", "imgaug.random.seed",
    }
)
_SEEDING_METHODS = frozenset({"seed", "manual_seed"})
_LOGGING_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})
# what a worker-info object read only for its ``seed`` (or a None test) cannot shard with
_SEED_ONLY_ATTRS = frozenset({"seed"})


def _seeding_or_logging_call(ctx, call: cst.Call) -> bool:
    name = ctx.call_name(call)
    if name in SEEDING_CALLS or name == "builtins.print":
        return True
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value in (_SEEDING_METHODS | _LOGGING_METHODS)


def _inside_seeding_args(ctx, node: cst.CSTNode, stop: cst.CSTNode) -> bool:
    """``node`` is (part of) an argument of a seeding or logging call."""
    child = node
    for ancestor in ctx.ancestors(node):
        if ancestor is stop:
            return False
        if isinstance(ancestor, cst.Call) and child is not ancestor.func and _seeding_or_logging_call(ctx, ancestor):
            return True
        child = ancestor
    return False


def _info_use_shards(ctx, use: cst.CSTNode, func: cst.CSTNode) -> bool:
    """Can this use of a worker-info value take part in splitting the data?"""
    parent = ctx.parent(use)
    if isinstance(parent, cst.Attribute) and parent.value is use:
        if parent.attr.value in _SEED_ONLY_ATTRS:
            return False
        return not _inside_seeding_args(ctx, parent, func)
    if isinstance(parent, cst.Comparison) and all(
        isinstance(c.comparator, cst.Name) and c.comparator.value == "None" for c in parent.comparisons
    ):
        return False  # info is None / is not None
    if isinstance(parent, (cst.If, cst.While, cst.IfExp)) and parent.test is use:
        return False
    if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
        return False
    if isinstance(parent, cst.BooleanOperation):
        grand = ctx.parent(parent)
        return not (isinstance(grand, (cst.If, cst.While)) and grand.test is parent)
    return not _inside_seeding_args(ctx, use, func)


def _local_uses(ctx, func: cst.FunctionDef, name: str) -> Optional[List[cst.Name]]:
    """Reads of local ``name`` in ``func`` (nested scopes included); None when it is rebound."""
    uses: List[cst.Name] = []
    for node in iter_subtree(func.body, into_scopes=True):
        if isinstance(node, cst.Name) and node.value == name:
            parent = ctx.parent(node)
            if isinstance(parent, (cst.AssignTarget, cst.AugAssign)) or (
                isinstance(parent, (cst.AnnAssign, cst.For, cst.CompFor, cst.AsName, cst.NamedExpr))
                and getattr(parent, "target", getattr(parent, "name", None)) is node
            ):
                continue
            uses.append(node)
    return uses


def worker_info_shards(ctx, func: cst.FunctionDef) -> bool:
    """Does what ``func`` reads from ``get_worker_info()`` take part in splitting the data?

    False only when every read is the ``seed``, a None test, or an argument of a seeding
    (``np.random.seed``, ``default_rng``, ``.seed()``...) or logging call, and the result
    is bound to one local name used only that way: the workers then draw different random
    numbers but each still replays the whole stream. Anything else (``info.id`` in an
    index, the object passed on or returned) counts as sharding."""
    for node in iter_subtree(func.body, into_scopes=True):
        if not is_worker_info(ctx, node):
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            continue  # the inner part of a dotted name: judged at the whole name
        call = parent
        if not (isinstance(call, cst.Call) and call.func is node and not call.args):
            return True  # the function itself passed on
        holder = ctx.parent(call)
        if isinstance(holder, cst.Attribute) and holder.value is call:
            if _info_use_shards(ctx, call, func):
                return True
            continue
        if not (isinstance(holder, cst.Assign) and len(holder.targets) == 1):
            if _inside_seeding_args(ctx, call, func):
                continue
            return True
        target = holder.targets[0].target
        if not isinstance(target, cst.Name):
            return True
        assignments = [
            n for n in iter_subtree(func.body, into_scopes=True)
            if isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Name) and n.target.value == target.value
        ]
        uses = _local_uses(ctx, func, target.value)
        if len(assignments) != 1 or uses is None or any(_info_use_shards(ctx, use, func) for use in uses):
            return True
    return False


def shards_transitively(ctx, qualified: str, depth: int = 0, seen: Optional[Set[str]] = None) -> Optional[bool]:
    """Does the project function ``qualified`` (or what it calls) consult worker info? None: unknown."""
    seen = seen if seen is not None else set()
    if qualified in seen or depth > 4:
        return False
    seen.add(qualified)
    facts = ctx.view.function_facts(qualified)
    if facts is None:
        return None
    if facts.get("worker_info"):
        return True
    for kind, target, _ in facts.get("calls", ()):
        if kind == "func" and not target.startswith(("builtins.", "torch.", "numpy.", "random.", "os.")):
            if shards_transitively(ctx, target, depth + 1, seen):
                return True
    return False


def iteration_shards(ctx, qualified: str) -> bool:
    """The ``__iter__`` of the project class ``qualified`` (a sampler, a reader of another
    file) consults worker info, itself or through the project functions it calls."""
    facts = ctx.view.method_facts(qualified, "__iter__")
    if facts is None:
        return False
    if facts.get("worker_info"):
        return True
    return any(kind == "func" and shards_transitively(ctx, target) for kind, target, _ in facts.get("calls", ()))


def main_process_only(ctx, node) -> bool:
    """``node`` runs only where ``get_worker_info()`` is None, in the main process: in the body of
    an ``if`` testing that (``info is None``, ``not info``, or a name bound once to such a test:
    ``use_gpu = get_worker_info() is None``), or in the ``else`` of a test that it is not."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.If):
            held = _worker_test(ctx, ancestor.test)
            if (held is False and child is ancestor.body) or (held is True and child is ancestor.orelse):
                return True
        child = ancestor
    return False


def _worker_test(ctx, test, depth: int = 0) -> Optional[bool]:
    """True when ``test`` holds in a worker only, False when in the main process only, else None."""
    if isinstance(test, cst.Name) and depth < 2:
        value = single_assignment(ctx.tree, test)
        if value is not None and not _worker_info_value(ctx, value):
            return _worker_test(ctx, value, depth + 1)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _worker_test(ctx, test.expression, depth)
        return None if inner is None else not inner
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.comparator, cst.Name) and target.comparator.value == "None" \
                and _worker_info_value(ctx, test.left):
            if isinstance(target.operator, cst.Is):
                return False
            if isinstance(target.operator, cst.IsNot):
                return True
        return None
    return True if _worker_info_value(ctx, test) else None


def _worker_info_value(ctx, expr) -> bool:
    """``get_worker_info()``, or a name bound once to it."""
    if isinstance(expr, cst.Name):
        expr = single_assignment(ctx.tree, expr)
    return isinstance(expr, cst.Call) and is_worker_info(ctx, expr.func)

