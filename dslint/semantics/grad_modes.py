"""Code that runs without gradients: under ``torch.no_grad()``/``inference_mode()``, or in a
function decorated with one. Loops there evaluate; they do not train (the one answer for
DSL505's epoch loops, DSL507's training loaders and DSL704's evaluations)."""

from __future__ import annotations

import libcst as cst

NO_GRAD = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
})


def _names_no_grad(names, expr) -> bool:
    expr = expr.func if isinstance(expr, cst.Call) else expr
    return isinstance(expr, (cst.Name, cst.Attribute)) and names.qualname(expr) in NO_GRAD


def no_grad_block(names, with_node: cst.With) -> bool:
    """``with torch.no_grad():`` (any item of the ``with``)."""
    return any(_names_no_grad(names, item.item) for item in with_node.items)


def no_grad_decorated(names, func: cst.FunctionDef) -> bool:
    """``@torch.no_grad()`` / ``@torch.inference_mode()``: the function evaluates."""
    return any(_names_no_grad(names, decorator.decorator) for decorator in func.decorators)
