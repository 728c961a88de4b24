"""Index dependence: does an expression change from one sample to the next?

Per-sample code that does the *same* work on every call (re-listing a fixed
directory, re-parsing a fixed annotation file, re-building a fixed model) is a
cost defect; per-sample code whose inputs depend on the sample (``self.files[idx]``,
the item of the loop that yields in ``__iter__``) is the dataset doing its job.
This module answers that question once, for every rule:

* **sources** (values that vary per sample): every parameter of a per-sample
  function except ``self`` (the index of ``__getitem__``/``__getitems__``; for a
  helper reached per sample its arguments are unknown, and unknown is not wrong),
  the targets of the loops that yield in a generator (``__iter__`` and generator
  helpers), lambda parameters, ``AugAssign`` targets and loop-carried
  self-references (``i = i + 1`` in a loop), values from RNG/clock calls
  (``random.*``, ``np.random.*``, ``torch.rand*``, ``time.*``, ``next()``), and
  ``self`` attributes that per-sample code of this file (re)assigns or mutates
  (counters, "current item" fields, caches);
* **propagation**: a flow-insensitive fixed point over ``Assign``/``AugAssign``/
  ``AnnAssign``, ``for`` and comprehension targets, ``with ... as``, walrus,
  ``self.x = <dependent>``, ``obj[k] = <dependent>``/``obj.attr = <dependent>`` and
  mutating calls (``names.append(<dependent>)``);
* **calls**: a call to a library function (resolved qualified name, not a project
  function) with index-invariant arguments is index-invariant; a call of a project
  function or method (``self.load()``, ``helper()``), of an unresolved callable, or
  of a method not known to be pure (``f.readline()``, ``rng.integers()``) is treated
  as dependent, because its result may vary.

Over-approximating dependence only makes rules quieter: a false "invariant" is a
false positive, a false "dependent" is at worst a miss.

API: ``depends_on_sample(ctx, expr)``, ``inputs_depend(ctx, call)`` (receiver or
any argument dependent), ``bound_values(ctx, name)`` (what a local name is bound
to), ``plain_bindings(ctx, name)`` (the same, when every binding is a plain value),
``per_item(ctx, node)``. Answers are cached per function.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set

import libcst as cst

from dslint.semantics.bindings import names_in_target
from dslint.semantics.call_facts import MUTATORS, PURE_METHODS, varies_per_call
from dslint.semantics.classes import find_method
from dslint.semantics.lifetimes import once_guarded
from dslint.semantics.once import every_few_calls
from dslint.semantics.regions import LOOP, self_attr
from dslint.semantics.walk import iter_subtree

__all__ = [
    "depends_on_sample", "inputs_depend", "bound_values", "plain_bindings", "per_item", "varies_per_call", "FunctionFlow", "flow_of",
]

_LOOPS = (cst.For, cst.While)


def flow_of(ctx, func: cst.FunctionDef) -> "FunctionFlow":
    return ctx.memo(("dataflow.flow", id(func)), lambda: FunctionFlow(ctx, func))


def depends_on_sample(ctx, expr: cst.CSTNode) -> bool:
    """Does ``expr`` (possibly) change from one sample to the next?

    Outside any function there is no sample: False.
    """
    func = ctx.enclosing_function(expr)
    if func is None:
        return False
    return flow_of(ctx, func).depends(expr)


def inputs_depend(ctx, call: cst.Call) -> bool:
    """Does the receiver (for a method call) or any argument of ``call`` depend on the sample?"""
    func = ctx.enclosing_function(call)
    if func is None:
        return False
    flow = flow_of(ctx, func)
    if isinstance(call.func, cst.Attribute) and flow.depends(call.func.value):
        return True
    return any(flow.depends(arg.value) for arg in call.args)


def bound_values(ctx, name: cst.Name) -> Optional[List[Optional[cst.BaseExpression]]]:
    """Every value the local ``name`` is bound to in its function (None entries: bound by a
    parameter, loop, augmented assignment or unpacking). None when the name is not local."""
    func = ctx.enclosing_function(name)
    if func is None:
        return None
    return flow_of(ctx, func).bindings.get(name.value)


def plain_bindings(ctx, expr) -> Optional[List[cst.BaseExpression]]:
    """What a local name is bound to, when every binding is a plain value (None otherwise,
    and for anything that is not a Name)."""
    if not isinstance(expr, cst.Name):
        return None
    values = bound_values(ctx, expr)
    if not values or any(v is None for v in values):
        return None
    return values


def per_item(ctx, node: cst.CSTNode) -> bool:
    """``ctx.is_per_sample(node)``, refined for nested loops in generators.

    In ``while True: data = load(); for x in data: yield x`` both loops contain the
    yield, but the code of the outer loop that is outside the inner one runs once
    per pass over ``data``, not once per item. A node runs per item when the
    innermost yielding loop around it yields directly (not only through a nested
    loop). Code behind a once-only guard on ``self`` (``if self.loaded: return``
    ... ``self.loaded = True``) runs once per worker, not per item, and code behind a counter
    the method resets (``once.every_few_calls``) once every few items. Nor does the
    handler of an ``except`` (it runs when loading the item failed: a missing file's
    error message), nor the ``__getitem__`` of a dataset whose ``__len__`` returns
    ``1`` (a demo of one sample reads it once, as ``__init__`` would).
    """
    if not ctx.is_per_sample(node) or once_guarded(ctx, node) or every_few_calls(ctx, node):
        return False
    func = ctx.enclosing_function(node)
    if func is not None and (_in_handler(ctx, node, func) or _single_sample(ctx, func)):
        return False
    if func is None or ctx.per_sample_mode(func) != LOOP:
        return True
    loops = {id(loop) for loop in ctx.regions.get(func).loops}
    for ancestor in ctx.ancestors(node):
        if ancestor is func:
            return True
        if id(ancestor) in loops:
            return _yields_directly(ancestor)
    return True


def _in_handler(ctx, node: cst.CSTNode, func: cst.FunctionDef) -> bool:
    """``node`` is in the body of an ``except`` handler of ``func`` (not in a nested function)."""
    for ancestor in ctx.ancestors(node):
        if ancestor is func or isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            return False
        if isinstance(ancestor, (cst.ExceptHandler, cst.ExceptStarHandler)):
            return True
    return False


def _single_sample(ctx, func: cst.FunctionDef) -> bool:
    """``func`` is the ``__getitem__`` of a class whose ``__len__`` (this file) returns ``0``/``1``."""
    cls = ctx.method_class(func) if func.name.value == "__getitem__" else None
    length = find_method(ctx, cls, "__len__") if cls is not None else None
    body = [statement for statement in length.body.body if not _docstring(statement)] \
        if length is not None and isinstance(length.body, cst.IndentedBlock) else ()
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine):
        return False
    statement = body[0].body[0]
    return isinstance(statement, cst.Return) and isinstance(statement.value, cst.Integer) \
        and statement.value.value in ("0", "1")


def _docstring(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 \
        and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.SimpleString)


def _yields_directly(loop: cst.CSTNode) -> bool:
    stack = [loop.body]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.Yield)):
            return True
        if current is not loop.body and isinstance(current, (cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        stack.extend(current.children)
    return False


# ---------------------------------------------------------------------------- the analysis


def _params(params: cst.Parameters):
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        yield param.name.value
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            yield star.name.value


def _root_name(node: cst.CSTNode) -> Optional[cst.Name]:
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node if isinstance(node, cst.Name) else None


class FunctionFlow:
    """Which local names and ``self`` attributes of one function depend on the sample."""

    def __init__(self, ctx, func: cst.FunctionDef) -> None:
        self.ctx = ctx
        self.func = func
        regions = ctx.regions.get(func)
        # only a method has a ``self``; the first parameter of a function is an input
        self.self_param = regions.self_param if ctx.method_class(func) is not None else None
        self.names: Set[str] = set()
        self.attrs: Set[str] = set(_varied_attrs(ctx))
        self.bindings: Dict[str, List[Optional[cst.BaseExpression]]] = {}
        self._edges: List[tuple] = []  # (target node, [value exprs])
        self._memo: Dict[int, bool] = {}

        for name in _params(func.params):
            if name != self.self_param:
                self.names.add(name)
                self.bindings.setdefault(name, []).append(None)
        yielding = set()
        if ctx.per_sample_mode(func) == LOOP:
            yielding = {id(loop) for loop in regions.loops}
        for node in iter_subtree(func.body, into_scopes=False):
            self._collect(node, yielding)
        self._solve()

    # -- collection
    def _collect(self, node: cst.CSTNode, yielding: Set[int]) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self._edge(target.target, [node.value])
                self._bind(target.target, node.value)
            self._loop_carried(node, [t.target for t in node.targets], node.value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self._edge(node.target, [node.value])
                self._bind(node.target, node.value)
                self._loop_carried(node, [node.target], node.value)
        elif isinstance(node, cst.AugAssign):
            self._source(node.target)
            self._bind(node.target, None)
        elif isinstance(node, cst.For):
            if id(node) in yielding:
                self._source(node.target)
            else:
                self._edge(node.target, [node.iter])
            self._bind(node.target, None)
        elif isinstance(node, cst.CompFor):
            self._edge(node.target, [node.iter])
            self._bind(node.target, None)
        elif isinstance(node, cst.WithItem):
            if node.asname is not None:
                self._edge(node.asname.name, [node.item])
                self._bind(node.asname.name, node.item)
        elif isinstance(node, cst.NamedExpr):
            self._edge(node.target, [node.value])
            self._bind(node.target, node.value)
        elif isinstance(node, cst.Lambda):
            for name in _params(node.params):
                self.names.add(name)
        elif isinstance(node, (cst.ExceptHandler, cst.ExceptStarHandler)):
            if node.name is not None:
                self._source(node.name.name)
        elif isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in MUTATORS:
                self._edge(func.value, [arg.value for arg in node.args])

    def _bind(self, target: cst.CSTNode, value) -> None:
        if isinstance(target, cst.Name):
            self.bindings.setdefault(target.value, []).append(value)
        else:
            for name in names_in_target(target):
                self.bindings.setdefault(name, []).append(None)

    def _edge(self, target: cst.CSTNode, values: list) -> None:
        self._edges.append((target, values))

    def _source(self, target: cst.CSTNode) -> None:
        self._mark(target)

    def _loop_carried(self, node, targets, value) -> None:
        """``x = f(x)`` inside a loop: x changes on every iteration."""
        names = {n for t in targets for n in names_in_target(t)}
        if not names:
            return
        inside_loop = False
        for ancestor in self.ctx.ancestors(node):
            if ancestor is self.func:
                break
            if isinstance(ancestor, _LOOPS):
                inside_loop = True
                break
        if not inside_loop:
            return
        for sub in iter_subtree(value, into_scopes=False):
            if isinstance(sub, cst.Name) and sub.value in names:
                for target in targets:
                    self._mark(target)
                return

    def _mark(self, target: cst.CSTNode) -> bool:
        """Mark a binding target dependent; True when something new was marked."""
        changed = False
        if isinstance(target, cst.Name):
            if target.value not in self.names:
                self.names.add(target.value)
                changed = True
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                changed |= self._mark(element.value)
        elif isinstance(target, cst.StarredElement):
            changed |= self._mark(target.value)
        elif isinstance(target, (cst.Attribute, cst.Subscript)):
            node = target
            while isinstance(node, (cst.Attribute, cst.Subscript)):
                attr = self_attr(node, self.self_param)
                if attr is not None:
                    if attr not in self.attrs:
                        self.attrs.add(attr)
                        changed = True
                    return changed
                node = node.value
            if isinstance(node, cst.Name) and node.value != self.self_param and node.value not in self.names:
                self.names.add(node.value)
                changed = True
        return changed

    def _solve(self) -> None:
        changed = True
        while changed:
            changed = False
            for target, values in self._edges:
                if any(self._dep(v) for v in values if v is not None):
                    changed |= self._mark(target)

    # -- queries
    def depends(self, expr: cst.CSTNode) -> bool:
        key = id(expr)
        cached = self._memo.get(key)
        if cached is None:
            cached = self._dep(expr)
            self._memo[key] = cached
        return cached

    def _dep(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Name):
            return node.value in self.names
        if isinstance(node, cst.Attribute):
            attr = self_attr(node, self.self_param)
            if attr is not None:
                return attr in self.attrs
            return self._dep(node.value)
        if isinstance(node, cst.Call):
            return self._call_dep(node)
        if isinstance(node, cst.Arg):
            return self._dep(node.value)
        if isinstance(node, cst.Lambda):
            # the function value is invariant unless it captures a dependent name
            own = set(_params(node.params))
            for sub in iter_subtree(node.body):
                if isinstance(sub, cst.Name) and sub.value in self.names and sub.value not in own:
                    parent = self.ctx.parent(sub)
                    if isinstance(parent, cst.Attribute) and parent.attr is sub:
                        continue
                    if isinstance(parent, cst.Arg) and parent.keyword is sub:
                        continue
                    return True
            return False
        if isinstance(node, (cst.Yield, cst.Await)):
            return True
        if isinstance(node, (cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary)):
            return False
        if isinstance(node, cst.CompFor):
            return self._dep(node.iter) or any(self._dep(i.test) for i in node.ifs) or (
                node.inner_for_in is not None and self._dep(node.inner_for_in)
            )
        for child in node.children:
            if self._dep(child):
                return True
        return False

    def _call_dep(self, call: cst.Call) -> bool:
        func = call.func
        args_dep = any(self._dep(arg.value) for arg in call.args)
        if isinstance(func, cst.Attribute):
            value = func.value
            if self.self_param and isinstance(value, cst.Name) and value.value == self.self_param:
                return True  # a method of the class: its result is unknown
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "super":
                return True
        qualified = self.ctx.qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if qualified:
            if varies_per_call(qualified) or self._is_project_function(qualified):
                return True
            return args_dep
        if isinstance(func, cst.Attribute) and func.attr.value in PURE_METHODS:
            return args_dep or self._dep(func.value)
        return True

    def _is_project_function(self, qualified: str) -> bool:
        if qualified.startswith("builtins."):
            return False
        ctx = self.ctx
        return ctx.memo(("dataflow.project_function", qualified), lambda: ctx.view.function_facts(qualified) is not None)


def _varied_attrs(ctx) -> Set[str]:
    """``self`` attributes that per-sample code of this file assigns or mutates."""
    return ctx.memo(("dataflow.varied_attrs",), lambda: _find_varied_attrs(ctx))


def _find_varied_attrs(ctx) -> Set[str]:
    found: Set[str] = set()
    for func in ctx.nodes(cst.FunctionDef):
        if ctx.method_class(func) is None or ctx.per_sample_mode(func) is None:
            continue
        self_param = ctx.regions.get(func).self_param
        if not self_param:
            continue
        for node in iter_subtree(func.body, into_scopes=False):
            targets = ()
            if isinstance(node, cst.Assign):
                targets = [t.target for t in node.targets]
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                targets = [node.target]
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in MUTATORS:
                targets = [node.func.value]
            for target in targets:
                for element in _flat_targets(target):
                    attr = _outer_self_attr(element, self_param)
                    if attr is not None and attr not in found and ctx.is_per_sample(node):
                        found.add(attr)
    return found


def _flat_targets(target: cst.CSTNode):
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _flat_targets(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _flat_targets(target.value)
    else:
        yield target


def _outer_self_attr(node: cst.CSTNode, self_param: str) -> Optional[str]:
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        attr = self_attr(node, self_param)
        if attr is not None:
            return attr
        node = node.value
    return None
