"""What a loop over a DataLoader does with its batches.

* ``BatchViews`` follows which names hold the batch, or a view of it, through the
  loop body in execution order: names bound to it, its items and slices, methods
  called on it, unpacking and loops over it. A name rebound to anything else
  (``x = preprocess(x)``, ``x = torch.stack(x)``, ``x = x / 255``) holds a new
  object made in the main process. Subclasses look at each call (``on_call``).
* ``training_step``: the loop trains, i.e. calls ``.backward()`` or
  ``optimizer.step()`` on every iteration (in its body or a same-module helper).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.names import dotted_parts
from dslint.semantics.scopes import COMPREHENSIONS, names_used

_TRANSPARENT_CALLS = frozenset({"enumerate", "zip", "iter", "list", "tuple", "reversed", "sorted", "next"})


class BatchViews:
    """Follows which names hold the batch (or a view of it) through a loop body, in order.

    ``visit(loop.body)`` walks the body in execution order; each call met while
    ``found`` is None goes to ``on_call`` with the names that hold the batch there.
    """

    def __init__(self, ctx, index, tainted) -> None:
        self.ctx = ctx
        self.index = index
        self.tainted = tainted
        self.found: Optional[object] = None

    # what holds the batch
    def derived(self, expr, tainted=None) -> bool:
        tainted = self.tainted if tainted is None else tainted
        if isinstance(expr, cst.Name):
            return expr.value in tainted
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return self.derived(expr.value, tainted)
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute):
                return self.derived(expr.func.value, tainted)  # a method of the batch: .float(), .items()
            if isinstance(expr.func, cst.Name) and expr.func.value in _TRANSPARENT_CALLS:
                return any(self.derived(arg.value, tainted) for arg in expr.args)
            return False  # preprocess(x), torch.stack(x): a new tensor
        if isinstance(expr, (cst.Tuple, cst.List)):
            return any(self.derived(e.value, tainted) for e in expr.elements)
        if isinstance(expr, cst.IfExp):
            return self.derived(expr.body, tainted) and self.derived(expr.orelse, tainted)
        if isinstance(expr, COMPREHENSIONS):
            local = set(tainted)
            comp = expr.for_in
            while comp is not None:
                self._bind_iter(comp.target, comp.iter, local)
                comp = comp.inner_for_in
            elt = expr.value if isinstance(expr, cst.DictComp) else expr.elt
            return self.derived(elt, local)
        return False

    def _bind(self, target, value, tainted) -> None:
        if isinstance(target, cst.Name):
            if self.derived(value, tainted):
                tainted.add(target.value)
            else:
                tainted.discard(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if (
                isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == len(elements)
                and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements))
            ):
                for sub, val in zip(elements, [e.value for e in value.elements]):
                    self._bind(sub, val, tainted)
            else:
                keep = self.derived(value, tainted)
                for name in names_used(target):
                    (tainted.add if keep else tainted.discard)(name)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, value, tainted)

    def _bind_iter(self, target, iterable, tainted) -> None:
        keep = self.derived(iterable, tainted)
        for name in names_used(target):
            (tainted.add if keep else tainted.discard)(name)

    # execution order
    def visit(self, node, tainted=None, depth: int = 0) -> None:
        tainted = self.tainted if tainted is None else tainted
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) or depth > 150:
            return  # nested scopes are not the loop body; absurdly deep expressions are left alone
        if isinstance(node, cst.Assign):
            self.visit(node.value, tainted, depth + 1)
            for target in node.targets:
                self._bind(target.target, node.value, tainted)
            return
        if isinstance(node, (cst.AnnAssign, cst.NamedExpr)):
            if node.value is not None:
                self.visit(node.value, tainted, depth + 1)
                self._bind(node.target, node.value, tainted)
            return
        if isinstance(node, cst.AugAssign):
            self.visit(node.value, tainted, depth + 1)
            return
        if isinstance(node, cst.For):
            self.visit(node.iter, tainted, depth + 1)
            self._bind_iter(node.target, node.iter, tainted)
            self.visit(node.body, tainted, depth + 1)
            if node.orelse is not None:
                self.visit(node.orelse, tainted, depth + 1)
            return
        if isinstance(node, COMPREHENSIONS):
            local = set(tainted)
            comp = node.for_in
            while comp is not None:
                self.visit(comp.iter, local, depth + 1)
                self._bind_iter(comp.target, comp.iter, local)
                for cond in comp.ifs:
                    self.visit(cond, local, depth + 1)
                comp = comp.inner_for_in
            if isinstance(node, cst.DictComp):
                self.visit(node.key, local, depth + 1)
                self.visit(node.value, local, depth + 1)
            else:
                self.visit(node.elt, local, depth + 1)
            return
        for child in node.children:
            self.visit(child, tainted, depth + 1)
        if isinstance(node, cst.Call) and self.found is None:
            self.on_call(node, tainted)

    def on_call(self, call: cst.Call, tainted) -> None:
        """A call in the body (in execution order, after its arguments); sets ``found`` to stop looking."""


def training_step(ctx, index, loop) -> Optional[str]:
    """``.backward()`` or ``optimizer.step()`` in the loop body or a same-module helper it calls."""
    for call in index.loop_calls(loop, unconditional=True):
        func = call.func
        if not isinstance(func, cst.Attribute):
            continue
        if func.attr.value == "backward":
            return ".backward()"
        if func.attr.value == "step" and is_optimizer(ctx, index, func.value):
            return f"{ctx.code(func.value).strip()}.step()"
    return None


def is_optimizer(ctx, index, expr) -> bool:
    parts = dotted_parts(expr)
    if parts and ("optim" in parts[-1].lower() or parts[-1] in ("opt", "optimiser")):
        return True
    nodes = index.value_nodes(expr) or []
    return any(
        isinstance(n, cst.Call)
        and (ctx.call_name(n) or "").startswith("torch.optim.")
        and "lr_scheduler" not in (ctx.call_name(n) or "")
        for n in nodes
    )
