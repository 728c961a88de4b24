"""Values a loop drains again on every pass.

A one-shot iterator (a generator, ``iter(loader)``, a DataLoader wrapper whose ``__iter__``
returns ``self``) bound before a loop and iterated in full inside it is drained by the first
pass; every later pass's ``for`` gets the exhausted iterator and runs zero times, with no error:

    eval_batches = make_batches(eval_set)        # a generator
    for step in range(steps):
        ...
        if step % 100 == 0:
            evaluate(model, eval_batches)        # drains it: later evaluations see nothing

The iteration is a ``for`` over the name (also through ``enumerate``/``zip``/``tqdm``), or a
call in the loop that hands the name to a function of this file (by its name, or
``self.m(...)`` in its class) whose own ``for`` iterates that parameter. "In full": that
``for`` has no ``break``, ``return`` or ``raise`` of its own (a loop that stops early takes a
few items per pass and goes on with the stream on purpose). The outer loop is a ``for`` or
``while`` of the same scope that contains no binding of the name (a loop that rebinds it
makes a new iterator each pass).

API: ``drained_again(ctx, value)``: for a value bound by an assignment to a plain name,
``(outer loop, inner for, the call handing it on or None)`` of the first re-iteration found,
or None; ``drained_one_shots(ctx)``: the one-shot iterators (``streams.one_shot``) bound that
way and drained again; ``reiterated_classes(ctx)``: this file's classes whose constructions are
bound that way and drained again (DataLoader wrappers, for DSL301/DSL302).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from dslint.semantics.call_sites import called_function
from dslint.semantics.classes import called_method
from dslint.semantics.epoch_facts import in_full
from dslint.semantics.regions import self_name
from dslint.semantics.streams import one_shot
from dslint.semantics.walk import iter_subtree

__all__ = ["bound_name", "drained_again", "drained_one_shots", "reiterated_classes"]

_LOOPS = (cst.For, cst.While)
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
#: calls that pass their first argument's items through, one by one (``for i, b in enumerate(x)``)
_PASS_THROUGH = frozenset({"builtins.enumerate", "builtins.zip", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.std.tqdm"})


def bound_name(ctx, value: cst.CSTNode) -> Optional[cst.Name]:
    """The plain name ``value`` is assigned to (``x = value``), if it is."""
    parent = ctx.parent(value)
    if isinstance(parent, cst.Assign) and parent.value is value and len(parent.targets) == 1:
        target = parent.targets[0].target
        return target if isinstance(target, cst.Name) else None
    return None


def drained_again(ctx, value: cst.CSTNode) -> Optional[Tuple[cst.CSTNode, cst.For, Optional[cst.Call]]]:
    """See the module docstring."""
    target = bound_name(ctx, value)
    if target is None:
        return None
    name = target.value
    scope = ctx.tree.scope_node(value)
    names = _names(ctx, scope).get(name, ())
    bindings = [n for n in names if _binds(ctx, n)]
    for use in names:
        if use is target or _binds(ctx, use) or _not_a_read(ctx, use):
            continue
        inner, handed = _iteration(ctx, use)
        if inner is None:
            continue
        loop = _outer_loop(ctx, use, inner if handed is None else None)
        if loop is None or any(_inside(ctx, b, loop) for b in bindings):
            continue
        return loop, inner, handed
    return None


def drained_one_shots(ctx) -> List[tuple]:
    """``(value, flavour, (loop, inner for, handing call))`` for each one-shot iterator of the file
    bound to a name and drained again by a loop."""
    found = []
    for value in _bound_values(ctx):
        again = drained_again(ctx, value)
        flavour = one_shot(ctx, value) if again is not None else None
        if flavour is not None:
            found.append((value, flavour, again))
    return found


def reiterated_classes(ctx) -> List[tuple]:
    """``(class, construction, (loop, inner for, handing call))`` for each construction of a class
    of this file bound to a name and drained again by a loop (the first one per class). Computed
    once per file (DSL301 and DSL302 both ask)."""
    return ctx.memo(("reiteration.classes",), lambda: _reiterated_classes(ctx))


def _reiterated_classes(ctx) -> List[tuple]:
    classes = {f"{ctx.names.modname}.{ctx.qualname_of_def(c)}": c for c in ctx.nodes(cst.ClassDef)}
    found, seen = [], set()
    for value in _bound_values(ctx):
        cls = classes.get(ctx.call_name(value)) if isinstance(value, cst.Call) else None
        if cls is None or id(cls) in seen:
            continue
        again = drained_again(ctx, value)
        if again is not None:
            seen.add(id(cls))
            found.append((cls, value, again))
    return found


def _bound_values(ctx):
    for assign in ctx.nodes(cst.Assign):
        if isinstance(assign.value, (cst.Call, cst.GeneratorExp)) and len(assign.targets) == 1 \
                and isinstance(assign.targets[0].target, cst.Name):
            yield assign.value


def _names(ctx, scope) -> dict:
    def compute():
        found: dict = {}
        for node in ctx.tree.scope_nodes(scope, cst.Name):
            found.setdefault(node.value, []).append(node)
        return found
    return ctx.memo(("reiteration.names", id(scope)), compute)


def _binds(ctx, name: cst.Name) -> bool:
    parent = ctx.parent(name)
    if isinstance(parent, cst.AssignTarget) or isinstance(parent, (cst.For, cst.CompFor)) and parent.target is name:
        return True
    if isinstance(parent, cst.AnnAssign) and parent.target is name:
        return True
    if isinstance(parent, cst.AugAssign) and parent.target is name:
        return True
    if isinstance(parent, (cst.Element, cst.StarredElement)):  # unpacked: ``a, it = ...``, ``for p, it in pairs``
        for ancestor in ctx.ancestors(name):
            if isinstance(ancestor, cst.AssignTarget):
                return True
            if isinstance(ancestor, (cst.For, cst.CompFor)):
                return any(n is name for n in iter_subtree(ancestor.target))
        return False
    return isinstance(parent, (cst.AsName, cst.Param, cst.NamedExpr)) and getattr(parent, "name", getattr(parent, "target", None)) is name


def _not_a_read(ctx, name: cst.Name) -> bool:
    parent = ctx.parent(name)
    return (isinstance(parent, cst.Attribute) and parent.attr is name) or (isinstance(parent, cst.Arg) and parent.keyword is name)


def _iterated_by(ctx, expr: cst.CSTNode) -> Optional[cst.For]:
    """The ``for`` whose iterable is ``expr`` (or passes it through: ``enumerate(expr)``)."""
    node = expr
    for _ in range(3):
        parent = ctx.parent(node)
        if isinstance(parent, cst.For) and parent.iter is node:
            return parent
        if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
            call = ctx.parent(parent)
            if isinstance(call, cst.Call) and ctx.call_name(call) in _PASS_THROUGH:
                node = call
                continue
        return None
    return None


def _iteration(ctx, use: cst.Name) -> Tuple[Optional[cst.For], Optional[cst.Call]]:
    loop = _iterated_by(ctx, use)
    if loop is not None:
        return (loop, None) if in_full(loop) else (None, None)
    arg = ctx.parent(use)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) and not arg.star else None
    if not isinstance(call, cst.Call):
        return None, None
    func = _callee(ctx, call)
    if func is None:
        return _drained_elsewhere(ctx, call, arg), call
    param = _parameter(ctx, func, call, arg)
    if param is None:
        return None, None
    for node in ctx.tree.scope_nodes(func, cst.Name):
        if node.value == param and not _binds(ctx, node) and not _not_a_read(ctx, node):
            inner = _iterated_by(ctx, node)
            if inner is not None and in_full(inner):
                return inner, call
    return None, None


def _drained_elsewhere(ctx, call: cst.Call, arg: cst.Arg) -> Optional[cst.CSTNode]:
    """A function of another project file, called by its name, whose own ``for`` iterates
    the parameter ``arg`` binds in full (its summary's ``drains``): the call itself stands
    for that loop."""
    name = ctx.call_name(call) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
    facts = ctx.view.function_facts(name) if name and not name.startswith(ctx.names.modname + ".") else None
    if not facts:
        return None
    slots = {slot for pair in facts.get("drains") or () for slot in pair}
    at = next(i for i, other in enumerate(call.args) if other is arg)
    position = sum(1 for other in call.args[:at] if other.keyword is None)
    if any(other.star for other in call.args[:at + 1]):
        return None
    return call if (arg.keyword.value if arg.keyword is not None else position) in slots else None


def _callee(ctx, call: cst.Call) -> Optional[cst.FunctionDef]:
    func = called_function(ctx, call)
    if func is not None:
        return func
    method = ctx.enclosing_function(call, through_lambdas=False)
    cls = ctx.method_class(method) if method is not None else None
    return called_method(ctx, cls, call, self_name(method)) if cls is not None else None


def _parameter(ctx, func: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> Optional[str]:
    params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    if ctx.method_class(func) is not None and isinstance(call.func, cst.Attribute):
        params = params[1:]
    if arg.keyword is not None:
        return arg.keyword.value
    position = 0
    for other in call.args:
        if other.star:
            return None
        if other is arg:
            return params[position] if position < len(params) else None
        if other.keyword is None:
            position += 1
    return None


def _outer_loop(ctx, use: cst.Name, inner: Optional[cst.For]) -> Optional[cst.CSTNode]:
    """The nearest ``for``/``while`` of the scope around ``use`` (around ``inner``, when the use is
    that ``for``'s own iterable), not the ``for`` itself."""
    start = inner if inner is not None else use
    for ancestor in ctx.ancestors(start):
        if isinstance(ancestor, _SCOPES):
            return None
        if isinstance(ancestor, _LOOPS) and ancestor is not inner:
            if isinstance(ancestor, cst.For) and _is_iterable_of(ancestor, start, ctx):
                continue
            return ancestor
    return None


def _is_iterable_of(loop: cst.For, node: cst.CSTNode, ctx) -> bool:
    return any(a is loop.iter for a in [node, *ctx.ancestors(node)])


def _inside(ctx, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    return any(a is container for a in ctx.ancestors(node))
