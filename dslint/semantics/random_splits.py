"""Unseeded ``random_split`` calls, and pairs of them that draw the same split twice (DSL701)."""

from __future__ import annotations

from typing import List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.calls import BoundCall, Signature
from dslint.semantics.distributed import SEED_CALLS, call_order
from dslint.semantics.walk import iter_subtree

RANDOM_SPLIT = "torch.utils.data.random_split"

SPLIT_SIGNATURE = Signature(("dataset", "lengths", "generator"))
#: constructor keywords that do not change which samples a dataset holds
NOT_DATA_KEYWORDS = frozenset({"transform", "target_transform", "transforms", "download", "pre_transform"})
_PART = {0: "first", 1: "second", 2: "third"}


def random_splits(ctx) -> List[cst.Call]:
    """``random_split`` calls without ``generator=`` (and nothing hidden in ``*args``/``**kwargs``)."""
    out = []
    for call in ctx.calls_to(RANDOM_SPLIT):
        bound = BoundCall(call, SPLIT_SIGNATURE)
        if not bound.is_open and not bound.passed("generator") and bound.passed("lengths"):
            out.append(call)
    return out


def seeded_before(ctx, call: cst.Call) -> bool:
    """A seed call of torch's global RNG earlier in the same function (or module body)."""
    func = ctx.enclosing_function(call)
    order = call_order(ctx)
    mine = order.get(id(call), 0)
    for node in iter_subtree(func.body if func is not None else ctx.module, into_scopes=False):
        if isinstance(node, cst.Call) and order.get(id(node), mine) < mine and ctx.call_name(node) in SEED_CALLS:
            return True
    return False


def kept_parts(ctx, call: cst.Call) -> Optional[Set[int]]:
    """Which parts of a split the code keeps: ``a, _ = random_split(...)`` -> {0}; ``random_split(...)[1]`` -> {1}."""
    parent = ctx.parent(call)
    if isinstance(parent, cst.Subscript) and parent.value is call and len(parent.slice) == 1:
        element = parent.slice[0].slice
        index = ctx.literal(element.value) if isinstance(element, cst.Index) else None
        return {index} if isinstance(index, int) and not isinstance(index, bool) else None
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, (cst.Tuple, cst.List)) and all(isinstance(e, cst.Element) for e in target.elements):
            kept = set()
            for i, element in enumerate(target.elements):
                if not (isinstance(element.value, cst.Name) and element.value.value.startswith("_")):
                    kept.add(i)
            return kept
    return None


def _source_key(ctx, index, expr) -> Optional[tuple]:
    """What identifies the data a dataset expression holds: its one value node, or for a
    constructor call its callee and arguments (transforms and ``download`` aside)."""
    nodes = index.value_nodes(expr)
    if nodes is None or len(nodes) != 1:
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            return ("self", expr.attr.value)
        return None
    node = nodes[0]
    if not isinstance(node, cst.Call):
        return ("node", id(node))
    name = ctx.call_name(node)
    if name is None and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name):
        if node.func.value.value == "self":
            name = "self." + node.func.attr.value  # ``self.DATASET(...)``: the same class attribute in both
    if name is None:
        return ("node", id(node))
    args = tuple(
        (arg.keyword.value if arg.keyword else "", "".join(ctx.code(arg.value).split()))
        for arg in node.args if not (arg.keyword and arg.keyword.value in NOT_DATA_KEYWORDS)
    )
    return ("call", name, args)


def split_pairs(ctx, index, calls: List[cst.Call]) -> List[Tuple[cst.Call, cst.Call, Tuple[str, str]]]:
    """Pairs of unseeded splits of the same data with the same lengths that keep different parts
    (the training part in one place, the validation part in another)."""
    facts = []
    for call in calls:
        bound = BoundCall(call, SPLIT_SIGNATURE)
        kept = kept_parts(ctx, call)
        key = _source_key(ctx, index, bound.expr("dataset")) if kept else None
        if key is not None and not seeded_before(ctx, call):
            facts.append((call, key, "".join(ctx.code(bound.expr("lengths")).split()), kept))
    out, used = [], set()
    for i, (first, key, lengths, kept) in enumerate(facts):
        for second, key2, lengths2, kept2 in facts[i + 1:]:
            if id(first) in used or id(second) in used or key != key2 or lengths != lengths2 or kept & kept2:
                continue
            used.update((id(first), id(second)))
            out.append((first, second, (_PART.get(min(kept), "kept"), _PART.get(min(kept2), "kept"))))
    return out
