"""Helpers the DataLoader rules share: literal tests on argument values, and the
loader calls a rule checks (less those the code expects to fail)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.calls import UNKNOWN
from dslint.semantics.names import dotted_parts
from dslint.semantics.project import ITERABLE
from dslint.semantics.walk import iter_subtree


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def literal_zero(value) -> bool:
    return is_int(value) and value == 0


def short(name: Optional[str]) -> str:
    return (name or "").rsplit(".", 1)[-1]


def not_none(ctx, bound, name) -> bool:
    """Passed, and not the literal ``None``."""
    arg = bound.arg(name)
    return arg is not None and ctx.literal(arg.value) is not None


def truthy(value) -> bool:
    return value is not UNKNOWN and bool(value)


def over_iterable(ctx, bound) -> bool:
    """The loader's dataset is an ``IterableDataset``."""
    return ctx.dataset_kind(bound.expr("dataset")) == ITERABLE


_RAISES_CONTEXTS = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "raises"})
_CAUGHT = frozenset({"ValueError", "TypeError", "AssertionError"})  # what torch raises; not a catch-all


def expects_error(ctx, node) -> bool:
    """The code expects the call to raise: inside ``with self.assertRaises(...)``/``pytest.raises(...)``
    or in the body of a ``try`` with a handler for the exception type torch raises (a bare
    ``except:`` or ``except Exception`` is a catch-all, not an expectation)."""
    previous = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.With) and previous is ancestor.body:
            for item in ancestor.items:
                expr = item.item
                if isinstance(expr, cst.Call):
                    parts = dotted_parts(expr.func)
                    if parts and parts[-1] in _RAISES_CONTEXTS:
                        return True
        if isinstance(ancestor, cst.Try) and previous is ancestor.body:
            for handler in ancestor.handlers:
                if handler.type is None:
                    continue
                names = [dotted_parts(n) for n in iter_subtree(handler.type) if isinstance(n, (cst.Name, cst.Attribute))]
                if any(parts and parts[-1] in _CAUGHT for parts in names):
                    return True
        previous = ancestor
    return False


def loader_calls(ctx):
    """The module's DataLoader calls, less those the code expects to fail (a test of the error)."""
    return [bound for bound in ctx.dataloader_calls() if not expects_error(ctx, bound.call)]
