"""Evidence, short of the value itself, that a dataset a function receives can be iterable.

A helper that builds a loader over a dataset its caller passes (``def make(ds, ...)``)
shows nothing about that dataset's class, and a user dataset that nothing shows to be
iterable is not assumed to be one. Two pieces of evidence are taken here. The first is
the parameter's own annotation: ``ds: IterableDataset``, ``Optional[IterableDataset]``,
``Union[Dataset, IterableDataset]`` or ``Dataset | IterableDataset`` say the caller
may hand over an ``IterableDataset`` (an alternative nested in another type,
``Sequence[IterableDataset]``, does not: the value is then a sequence). A docstring
is no evidence, nor is ``Dataset`` (every dataset is one).

It holds only when the name read at the loader is bound by that parameter alone
(nothing in the function rebinds it) and the function does not itself name
``IterableDataset`` in its body (an ``isinstance`` test may choose the options).

The second is the code's own ``if isinstance(x, IterableDataset):`` on the same value
(``tested_iterable``): in the same function, or on the same ``self.x`` in another method
of the class. A loader built over ``x`` with options it cannot take, on a path that test
does not narrow, raises when the case the code expects happens.
"""

from __future__ import annotations

from typing import Iterator, Optional, Tuple

import libcst as cst

from dslint.semantics.libraries import ITERABLE_CLASSES as LIBRARY_CLASSES, hf_iterable, library_iterable
from dslint.semantics.walk import iter_subtree, last_statement

ITERABLE_CLASSES = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})
#: library classes a project class may derive from (``libraries.ITERABLE_CLASSES`` less DataPipes)
LIBRARY_ITERABLES = frozenset(c for c in LIBRARY_CLASSES if not c.startswith("torchdata."))
UNIONS = frozenset({"typing.Union", "typing.Optional"})


def _alternatives(ctx, annotation: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The types an annotation allows at its top level (through ``Union``/``Optional``/``|``)."""
    if isinstance(annotation, cst.Subscript) and isinstance(annotation.value, (cst.Name, cst.Attribute)) \
            and ctx.qualname(annotation.value) in UNIONS:
        for element in annotation.slice:
            if isinstance(element.slice, cst.Index):
                yield from _alternatives(ctx, element.slice.value)
        return
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        yield from _alternatives(ctx, annotation.left)
        yield from _alternatives(ctx, annotation.right)
        return
    yield annotation


def _names_iterable(ctx, node: cst.CSTNode) -> bool:
    return isinstance(node, (cst.Name, cst.Attribute)) and ctx.qualname(node) in ITERABLE_CLASSES


def sole_parameter(index, expr) -> Tuple[Optional[cst.CSTNode], Optional[cst.Param]]:
    """(function, parameter) when the name ``expr`` has one binding, a parameter of its
    function (the value is whatever the caller passes); (None, None) otherwise."""
    if not isinstance(expr, cst.Name):
        return None, None
    scope, bindings = index.name_bindings(expr.value, expr)
    if not isinstance(scope, cst.FunctionDef) or not bindings or len(bindings) != 1 or bindings[0].kind != "param":
        return None, None
    param = bindings[0].node
    return (scope, param) if isinstance(param, cst.Param) else (None, None)


def annotated_iterable(ctx, index, expr: Optional[cst.BaseExpression]) -> Optional[Tuple[str, str, bool]]:
    """(parameter name, its annotation's code, whether it can only be iterable) when ``expr`` is
    a parameter whose annotation allows an ``IterableDataset``; None otherwise."""
    scope, param = sole_parameter(index, expr)
    if param is None or param.annotation is None:
        return None
    annotation = param.annotation.annotation
    options = list(_alternatives(ctx, annotation))
    iterable = [o for o in options if _names_iterable(ctx, o)]
    if not iterable:
        return None
    if any(_names_iterable(ctx, n) for n in iter_subtree(scope.body, into_scopes=False)):
        return None
    only = all(_names_iterable(ctx, o) or (isinstance(o, cst.Name) and o.value == "None") for o in options)
    return expr.value, ctx.module.code_for_node(annotation), only


# ---------------------------------------------------------------------- isinstance tests

def _isinstance_iterable(ctx, node) -> Optional[cst.BaseExpression]:
    """The tested expression of ``isinstance(x, IterableDataset)`` (a tuple of classes too)."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute))
            and ctx.qualname(node.func) == "builtins.isinstance" and len(node.args) == 2
            and all(a.keyword is None and not a.star for a in node.args)):
        return None
    classes = node.args[1].value
    elements = [e.value for e in classes.elements] if isinstance(classes, cst.Tuple) else [classes]
    return node.args[0].value if any(_names_iterable(ctx, e) for e in elements) else None


def _key(ctx, expr) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return ctx.code(expr)
    return None


def _terminates(block) -> bool:
    return isinstance(last_statement(block), (cst.Return, cst.Raise, cst.Continue, cst.Break))


def _assigns(ctx, block, key: str) -> bool:
    for node in iter_subtree(block, into_scopes=False):
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            targets = [node.target]
        if any(_key(ctx, n) == key for t in targets for n in iter_subtree(t)):
            return True
    return False


def _within(ctx, node, root) -> bool:
    return node is root or any(a is root for a in ctx.ancestors(node))


def tested_iterable(ctx, index, call: cst.CSTNode, expr: Optional[cst.BaseExpression]) -> Optional[Tuple[str, int]]:
    """(the value's code, the line of the test) when the code itself tests the dataset ``expr``
    read at the loader ``call`` with ``isinstance(x, IterableDataset)`` — the same local name in
    the same function, or the same ``self.x`` in any method of the class — and the loader is
    built on a path where the value may still be iterable.

    Each test must be the whole test of an ``if`` (``if isinstance(x, IterableDataset):``): a
    result kept in a flag or combined with other conditions may choose the path, and then it
    stays silent. Silent too when the loader is inside such an ``if`` (but for its positive
    branch, where the value is iterable), when a test of the same function before the loader
    ends a branch with ``return``/``raise``/``continue``/``break`` (the paths part there), when a
    positive branch rebinds the value or raises (the code rejects or converts it), and when the
    name is bound more than once in its function."""
    key = _key(ctx, expr)
    derived = False
    if key is None and isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None \
            and not expr.args[0].star and _key(ctx, expr.args[0].value) is not None:
        # a value made from the tested one (``self.prepare(self.train_set, ...)``): judged by the
        # positive branch of its test only, where the value it is made from is iterable
        expr, derived = expr.args[0].value, True
        key = _key(ctx, expr)
    func = ctx.enclosing_function(call, through_lambdas=False)
    if key is None or func is None:
        return None
    if isinstance(expr, cst.Name):
        scope, bindings = index.name_bindings(expr.value, expr)
        if scope is not func or not bindings or len(bindings) != 1:
            return None
        scopes = [func]
    else:
        cls = ctx.method_class(func)
        if cls is None or not isinstance(cls.body, cst.IndentedBlock):
            return None
        scopes = [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]
    tests = []
    for scope in scopes:
        for node in iter_subtree(scope.body, into_scopes=False):
            tested = _isinstance_iterable(ctx, node)
            if tested is None or _key(ctx, tested) != key:
                continue
            statement, conjunct = _whole_test(ctx, node)
            if statement is None:
                return None  # a flag, an `or`, a `not`, an assert: it may choose the path
            if isinstance(last_statement(statement.body), cst.Raise) or _assigns(ctx, statement.body, key):
                return None
            if conjunct:  # `if isinstance(x, IterableDataset) and ...:` tells only its positive branch
                if _within(ctx, call, statement.body):
                    return ctx.code(expr), ctx.line(node)
                return None
            tests.append((scope, statement, node))
    if not tests:
        return None
    for scope, statement, node in tests:
        if _within(ctx, call, statement.body):
            return ctx.code(expr), ctx.line(node)  # the positive branch: the value is iterable
    if derived:
        return None
    for scope, statement, node in tests:
        if _within(ctx, call, statement):
            return None  # the other branch: narrowed
        if scope is func and ctx.line(statement) < ctx.line(call) \
                and (_terminates(statement.body) or _terminates_at(statement.orelse)):
            return None
    return ctx.code(expr), ctx.line(tests[0][2])


def _whole_test(ctx, node):
    """(the ``if`` whose test ``node`` is, whether it is one term of an ``and`` chain there), or
    (None, False) when the test result may be kept or combined otherwise."""
    parent, conjunct = ctx.parent(node), False
    while isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And):
        node, parent, conjunct = parent, ctx.parent(parent), True
    if isinstance(parent, cst.If) and parent.test is node:
        return parent, conjunct
    return None, False


def _terminates_at(orelse) -> bool:
    """An ``elif``/``else`` chain with a branch that ends the path."""
    while orelse is not None:
        if isinstance(orelse, cst.If):
            if _terminates(orelse.body):
                return True
            orelse = orelse.orelse
        else:
            return _terminates(orelse.body)
    return False


#: torch applies ``shuffle`` to the graph of an ``IterDataPipe`` (``apply_shuffle_settings``)
#: instead of raising; a sampler still raises
DATAPIPE_BASES = frozenset({
    "torch.utils.data.IterDataPipe", "torch.utils.data.datapipes.datapipe.IterDataPipe",
    "torch.utils.data.datapipes.iter.IterDataPipe", "torchdata.datapipes.iter.IterDataPipe",
})


def datapipe_dataset(ctx, index, bound) -> bool:
    """Some value that reaches the loader's dataset is a DataPipe (a torchdata pipe, or a
    class deriving from ``IterDataPipe``): ``shuffle=True`` is then valid."""
    expr = bound.expr("dataset")
    if expr is None:
        return False
    for node in index.value_nodes(expr) or [expr]:
        if not isinstance(node, cst.Call) or not isinstance(node.func, (cst.Name, cst.Attribute)):
            continue
        library = library_iterable(ctx, node) or ""
        if library.startswith(("torchdata.", "torch.utils.data.datapipes")):
            return True
        qualified = ctx.call_name(node)
        bases = ctx.view.external_bases(qualified) if qualified else None
        if qualified in DATAPIPE_BASES or bases and DATAPIPE_BASES & set(bases):
            return True
    return False


def caller_tested_iterable(ctx, index, call: cst.CSTNode, expr) -> Optional[Tuple[str, int, int]]:
    """(the argument's code, the line of its test, the line of the call) when ``expr`` is a
    parameter of the function that builds the loader, bound by nothing else, and a caller in
    this file passes it a value that caller tests with ``if isinstance(x, IterableDataset):``
    on a path to the call (``tested_iterable`` at the call site)."""
    if not isinstance(expr, cst.Name):
        return None
    scope, bindings = index.name_bindings(expr.value, expr)
    if not isinstance(scope, cst.FunctionDef) or not bindings or len(bindings) != 1 or bindings[0].kind != "param":
        return None
    if scope is not ctx.enclosing_function(call, through_lambdas=False) or ctx.method_class(scope) is not None:
        return None
    params = list(scope.params.posonly_params) + list(scope.params.params)
    position = next((i for i, p in enumerate(params) if p.name.value == expr.value), None)
    for site in ctx.nodes(cst.Call):
        if not isinstance(site.func, cst.Name) or site.func.value != scope.name.value:
            continue
        where, found = index.name_bindings(site.func.value, site)
        if not found or len(found) != 1 or found[0].node is not scope:
            continue
        arg = _argument(site, expr.value, position)
        answer = tested_iterable(ctx, index, site, arg) if arg is not None else None
        if answer is not None:
            return answer[0], answer[1], ctx.line(site)
    return None


def _argument(call: cst.Call, name: str, position: Optional[int]):
    for i, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == name:
                return arg.value
        elif i == position:
            return arg.value
    return None


def other_iterable(ctx, index, expr) -> Optional[str]:
    """What makes a loader's dataset iterable when ``iterable_dataset`` cannot tell: a Hugging
    Face iterable dataset as ``hf_iterable`` follows it (``from_generator``, through
    assignments), or an instance of a project class deriving from a library's iterable dataset
    (``class Shards(wds.DataPipeline)``) — every value that reaches the loader."""
    if expr is None:
        return None
    if hf_iterable(ctx, expr):
        return "a `datasets.IterableDataset`"
    nodes = index.value_nodes(expr)
    found = None
    for node in nodes or ():
        qualified = ctx.call_name(node) if isinstance(node, cst.Call) else None
        bases = set(ctx.view.external_bases(qualified) or ()) if qualified else set()
        if not bases & LIBRARY_ITERABLES:
            return None
        found = f"a `{qualified.rsplit('.', 1)[-1]}` derived from `{sorted(bases & LIBRARY_ITERABLES)[0]}`"
    return found
