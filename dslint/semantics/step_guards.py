"""Per-step code behind a guard that cannot change inside its loop, and loops that walk a loader.

``loops.step_loop`` finds the loop that runs a node on every iteration, and any ``if`` between
them blocks it (``if step % 100 == 0:`` runs the node on some steps only). Some guards do not
depend on the step at all: ``if condition_loader is not None:``, ``if self.use_aux:`` test
names (or attribute chains of names) that nothing inside the loop binds or assigns, so the
test has the same outcome on every iteration, and the guarded code runs on every step
whenever it runs at all.

* ``invariant_step_loop``: the loop that runs ``node`` on every iteration, allowing such
  invariant ``if`` guards between them in the loop's own function (``node`` may be in a helper
  without guards of its own, whose call the loop makes behind them); ``step_loop`` answers first;
* ``invariant_test``: the test of an ``if`` reads only names and attribute chains the loop
  leaves alone, combined with ``not``/``and``/``or`` and compared (``is``, ``==``...) with
  literals or with each other: no call, subscript or arithmetic, whose value could change;
* ``length_walk``: the loop's trip count comes from the loader's length (``range(len(loader))``,
  ``while i < len(loader.dataset)``, a name assigned from such an expression): the code means to
  walk the loader once;
* ``walked_loader`` (``paired_walk`` words it): a ``for`` loop over the batches of a known ``DataLoader`` of the file
  (through ``enumerate``/``tqdm``/``zip``), not the loader ``target`` is: the loop walks one
  loader batch by batch, and code that takes one batch of ``target`` per step pairs the two.

What cannot be told (an unknown name, a test with a call) keeps the guard blocking.
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from dslint.semantics.loops import LOOP_TYPES
from dslint.semantics.module_calls import MAX_CALLERS, positional_args
from dslint.semantics.names import dotted_parts
from dslint.semantics.scopes import COMPREHENSIONS, is_none
from dslint.semantics.walk import iter_subtree

_SCOPE_TYPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_COMPARISONS = (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual, cst.In, cst.NotIn)


def invariant_step_loop(ctx, index, node: cst.CSTNode, hops: int = 2) -> Optional[Tuple[cst.CSTNode, Tuple[cst.Call, ...]]]:
    """(loop, call stack) for the loop that runs ``node`` on every iteration where the guards between
    them (``if`` statements of the loop's function) cannot change from one iteration to the next;
    ``node`` may be in a helper (up to ``hops`` calls deep, without guards of its own) whose call
    the loop makes behind such guards."""
    found = index.step_loop(node)
    if found is not None:
        return found
    return _guarded_loop(ctx, index, node, hops, frozenset())


def _guarded_loop(ctx, index, node, hops: int, seen):
    guards = []
    previous = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, LOOP_TYPES):
            if previous is not ancestor.body:
                return None
            if all(invariant_test(ctx, index, guard.test, ancestor) for guard in guards):
                return ancestor, ()
            return None
        if isinstance(ancestor, cst.FunctionDef) and not guards and hops > 0:
            for call in index.callers(ancestor)[:MAX_CALLERS]:
                if id(call) not in seen:
                    found = _guarded_loop(ctx, index, call, hops - 1, seen | {id(call)})
                    if found is not None:
                        return found[0], (call, *found[1])
            return None
        if isinstance(ancestor, _SCOPE_TYPES) or isinstance(ancestor, COMPREHENSIONS):
            return None
        if isinstance(ancestor, cst.If):
            if previous is not ancestor.test:
                guards.append(ancestor)
        elif isinstance(ancestor, cst.Else):
            if not isinstance(ctx.parent(ancestor), cst.If):
                return None  # the else of a loop or a try
        elif isinstance(ancestor, (cst.IfExp, cst.ExceptHandler, cst.BooleanOperation)):
            if not (isinstance(ancestor, cst.IfExp) and previous is ancestor.test):
                return None
        previous = ancestor
    return None


def invariant_test(ctx, index, test: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    """The test reads only names and attribute chains that ``loop`` does not bind or assign."""
    if isinstance(test, cst.UnaryOperation):
        return isinstance(test.operator, cst.Not) and invariant_test(ctx, index, test.expression, loop)
    if isinstance(test, cst.BooleanOperation):
        return invariant_test(ctx, index, test.left, loop) and invariant_test(ctx, index, test.right, loop)
    if isinstance(test, cst.Comparison):
        if not all(isinstance(c.operator, _COMPARISONS) for c in test.comparisons):
            return False
        return all(_invariant_operand(ctx, index, e, loop) for e in (test.left, *(c.comparator for c in test.comparisons)))
    return _invariant_chain(ctx, index, test, loop)


def _invariant_operand(ctx, index, expr, loop) -> bool:
    if is_none(expr) or isinstance(expr, (cst.SimpleString, cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return True
    return _invariant_chain(ctx, index, expr, loop)


def _invariant_chain(ctx, index, expr, loop) -> bool:
    """``name`` or ``name.a.b`` where nothing in ``loop`` binds ``name`` nor assigns the chain."""
    parts = dotted_parts(expr)
    if not parts:
        return False
    _, found = index.name_bindings(parts[0], expr)
    if not found or any(index.inside(b.node, loop) for b in found):
        return False
    if len(parts) == 1:
        return True
    text = ".".join(parts)
    for sub in iter_subtree(loop.body):
        targets = []
        if isinstance(sub, cst.Assign):
            targets = [t.target for t in sub.targets]
        elif isinstance(sub, (cst.AnnAssign, cst.AugAssign)):
            targets = [sub.target]
        for target in targets:
            for part in iter_subtree(target):
                if isinstance(part, cst.Attribute) and ".".join(dotted_parts(part) or ()) == text:
                    return False
    return True


def walked_loader(ctx, index, loop: cst.CSTNode, target: cst.BaseExpression) -> Optional[str]:
    """The text of the loader ``loop`` walks batch by batch (a ``for`` over a known ``DataLoader``
    of the file, or over a parameter annotated ``DataLoader``, another one than ``target``), when
    every value ``target`` can take is a ``DataLoader`` of the file or ``None``, or nothing tells
    its values and it is a parameter annotated ``DataLoader``; None otherwise."""
    if not isinstance(loop, cst.For):
        return None
    loaders = [index.loader_of_call(n) for n in index.value_nodes(target) or () if not is_none(n)]
    if any(x is None for x in loaders) or not (loaders or declared_loader(ctx, index, target)):
        return None
    text = " ".join(ctx.code(target).split())
    for part in index.iter_parts(loop.iter):
        refs = index.resolve_loader(part, wrappers=True)
        words = " ".join(ctx.code(part).split())
        if refs and all(r.loader not in loaders for r in refs):
            return words
        if not refs and words != text and not index.value_nodes(part) and declared_loader(ctx, index, part):
            return words
    return None


def declared_loader(ctx, index, expr) -> bool:
    """``expr`` is a name bound only as a parameter annotated ``DataLoader`` (``Optional[...]``,
    ``DataLoader | None`` and a string annotation included)."""
    if not isinstance(expr, cst.Name):
        return False
    _, found = index.name_bindings(expr.value, expr)
    if not found or len(found) != 1 or found[0].kind != "param" or not isinstance(found[0].node, cst.Param):
        return False
    annotation = found[0].node.annotation
    return annotation is not None and _names_loader(ctx, annotation.annotation)


def _names_loader(ctx, node) -> bool:
    if isinstance(node, cst.SimpleString):
        return node.value.strip("\"'") in ("DataLoader", "torch.utils.data.DataLoader")
    if isinstance(node, cst.Subscript) and (ctx.qualname(node.value) or "").endswith("Optional"):
        return len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) and _names_loader(ctx, node.slice[0].slice.value)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        sides = [node.left, node.right]
        return any(is_none(x) for x in sides) and any(_names_loader(ctx, x) for x in sides)
    return isinstance(node, (cst.Name, cst.Attribute)) and ctx.qualname(node) in (
        "torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")


def paired_walk(ctx, index, loop, target) -> Optional[str]:
    """``walked_loader`` as the words "once per batch of `<loader>`"; None when it does not apply."""
    other = walked_loader(ctx, index, loop, target)
    return f"once per batch of `{other}`" if other else None


def length_walk(ctx, index, loop, target) -> Optional[str]:
    """How the loop's trip count depends on the length of ``target`` (``range(len(loader))``,
    ``while i < len(loader.dataset)``, a name assigned from such an expression), in words; None
    when it does not."""
    text = ctx.code(target).strip()
    lengths = (f"len({text})", f"len({text}.dataset)")
    if isinstance(loop, cst.For):
        head = loop.iter
        while isinstance(head, cst.Call) and index.wrapper_kind(head) == "single" and positional_args(head):
            head = positional_args(head)[0]
        if not (isinstance(head, cst.Call) and ctx.call_name(head) == "builtins.range"):
            return None
        exprs = list(positional_args(head))
    else:
        exprs = [loop.test]
    for expr in exprs:
        for node in [expr, *(n for n in index.value_nodes(expr) or () if isinstance(expr, cst.Name))]:
            for sub in iter_subtree(node):
                if isinstance(sub, cst.Call) and ctx.call_name(sub) == "builtins.len" and " ".join(ctx.code(sub).split()) in lengths:
                    if isinstance(loop, cst.For):
                        return f"`{' '.join(ctx.code(sub).split())}` times"
                    return f"while `{' '.join(ctx.code(loop.test).split())}`"
    return None
