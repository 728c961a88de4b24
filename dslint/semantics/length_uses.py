"""Where code takes the length of a value: every ``len(x)`` and truth test (``bool()`` of an
object with ``__len__`` calls it), whether a guard covers it (``try: ... except TypeError``, a
``hasattr(x, "__len__")``/``Sized`` test), and which of them ``length_probes`` judges: a use
before the function's own probe of the value, a use of an attribute its class probes."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.classes import find_method
from dslint.semantics.iterable_evidence import ITERABLE_CLASSES
from dslint.semantics.length_probes import early_uses, outside_uses, vacuous_tests
from dslint.semantics.loops import loader_loops
from dslint.semantics.names import dotted_parts
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree


def len_guarded(ctx, call: cst.Call) -> bool:
    """Inside ``try: ... except TypeError`` or a ``hasattr(x, "__len__")``/``Sized`` test."""
    child = call
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, cst.Try) and ctx.memo(("length_uses.catches", id(ancestor)), lambda: _catches_type_error(ancestor)):
            return True
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)) and _names_length(ctx, ancestor.test):
            return True
        if isinstance(ancestor, cst.BooleanOperation) and _names_length(ctx, ancestor.left):
            return True
        if isinstance(ancestor, _COMPREHENSIONS) and _filtered(ctx, ancestor, child):
            return True  # ``[len(x) for x in xs if hasattr(x, "__len__")]``: the filter runs first
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            break
        child = ancestor
    return False


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def _filtered(ctx, comp, child) -> bool:
    """A condition of ``comp`` tests ``__len__``/``Sized`` and ``child`` (the comprehension's
    part that holds the ``len()``) is what it produces."""
    if not any(child is p for p in ((comp.key, comp.value) if isinstance(comp, cst.DictComp) else (comp.elt,))):
        return False
    clause = comp.for_in
    while clause is not None:
        if any(_names_length(ctx, condition.test) for condition in clause.ifs):
            return True
        clause = clause.inner_for_in
    return False


def _catches_type_error(node: cst.Try) -> bool:
    for handler in node.handlers:
        if handler.type is None:
            return True
        names = {".".join(p) for p in [dotted_parts(n) for n in iter_subtree(handler.type)] if p}
        if names & {"TypeError", "Exception", "BaseException", "builtins.TypeError"}:
            return True
    return False


def _names_length(ctx, test) -> bool:
    """A name, attribute or string of ``test`` mentions ``__len__`` or ``Sized`` (once per test:
    the uses under one ``if`` share it)."""
    return ctx.memo(("length_uses.names_length", id(test)), lambda: any(
        isinstance(n, (cst.Name, cst.SimpleString)) and ("__len__" in n.value or "Sized" in n.value)
        for n in iter_subtree(test)
    ))


def truth_tested(ctx):
    """Expressions Python tests for truth (``if x``, ``not x``, ``x or y``, ``bool(x)``,
    comprehension conditions): ``bool()`` of an object with ``__len__`` calls it."""
    for kind in (cst.If, cst.While, cst.IfExp, cst.CompIf, cst.Assert):
        for node in ctx.nodes(kind):
            yield node.test
    for node in ctx.nodes(cst.UnaryOperation):
        if isinstance(node.operator, cst.Not):
            yield node.expression
    for node in ctx.nodes(cst.BooleanOperation):
        yield node.left
    for call in ctx.calls_to("builtins.bool"):
        if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
            yield call.args[0].value


def method_loader(ctx, expr) -> Optional[cst.BaseExpression]:
    """For ``self.m()`` with no arguments, the one DataLoader construction that method of
    the enclosing class returns (every ``return`` of it), else None."""
    if not (isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute)):
        return None
    func = ctx.enclosing_function(expr)
    cls = ctx.method_class(func) if func is not None else None
    if cls is None or self_attr(expr.func, self_name(func)) is None:
        return None
    method = find_method(ctx, cls, expr.func.attr.value)
    if method is None or method is func:
        return None
    values = [n.value for n in iter_subtree(method.body, into_scopes=False) if isinstance(n, cst.Return)]
    if len(values) != 1 or values[0] is None:
        return None
    value = values[0]
    if isinstance(value, cst.Name) and ctx.enclosing_function(value) is method:
        value = ctx.single_assignment(value)
    return value if isinstance(value, cst.Call) and ctx.is_dataloader_call(value) else None


def length_uses(ctx):
    """{function: [(use, the expression whose length it takes, a truth test)]}: every ``len(x)``
    and truth test of the file. Whether a ``try``/``hasattr`` guards one (``len_guarded``) is
    asked only of what the finders below keep: most uses never get that far."""
    def compute():
        by_function = {}
        for call in ctx.calls_to("builtins.len"):
            if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
                by_function.setdefault(ctx.enclosing_function(call, through_lambdas=False), []).append(
                    (call, call.args[0].value, False))
        for tested in truth_tested(ctx):
            by_function.setdefault(ctx.enclosing_function(tested, through_lambdas=False), []).append(
                (tested, tested, True))
        by_function.pop(None, None)
        return by_function
    return ctx.memo("length_uses", compute)


def _unguarded(ctx, found):
    for item in found:
        if not len_guarded(ctx, item[0]):
            yield item


def probed_length_uses(ctx):
    """(use, probe, loader) for each unguarded ``len(x)`` or truth test of ``x`` that runs before
    the same function probes ``x`` for a length (``semantics/length_probes.py``)."""
    for func, uses in length_uses(ctx).items():
        yield from _unguarded(ctx, early_uses(ctx, func, uses))


def class_probed_uses(ctx):
    """(use, [class, loader]) for each unguarded ``len(obj.x)`` or truth test of it where ``obj``
    is annotated with a project class whose own code probes ``self.x`` for a length."""
    index = loader_loops(ctx)
    for func, uses in length_uses(ctx).items():
        yield from _unguarded(ctx, outside_uses(ctx, index, func, uses))


def vacuous_uses(ctx):
    """(use, test) for each unguarded ``len(loader)`` or truth test in the false branch of
    ``if isinstance(loader, IterableDataset):`` where ``loader`` is a DataLoader."""
    tails = ctx.names.call_tails({qualified.rsplit(".", 1)[1] for qualified in ITERABLE_CLASSES})
    if not any(name.value in tails for name in ctx.nodes(cst.Name)):
        return  # no name of the file can be the class such a test names
    index = loader_loops(ctx)
    for func, uses in length_uses(ctx).items():
        yield from _unguarded(ctx, vacuous_tests(ctx, index, func, uses))
