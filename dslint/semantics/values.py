"""What values an expression can take: known, possible, or unknown.

``possible(ctx, expr)`` follows the facts real code passes values through, inside
the checked file:

- literals and module constants;
- names assigned in their scope (every assignment is a possible value), or only the
  assignment that reaches the read: the last one before it in the read's own block with no
  other binding between (``bindings.block_assignment``: ``sampler = None`` just before the
  call, even for a parameter of that name);
- both arms of a conditional expression, ``a or b`` / ``a and b``, and ``not a``;
- function parameters: their default and the arguments of the calls to the
  function that this file makes (``train(num_workers=0)``), ``self.m(...)`` too, and the
  literals the project's other files pass to a module-level one (``call_sites.other_file_literals``);
- argparse options read back through ``args.x`` (``semantics/options.py``), where
  ``args`` is bound to ``parse_args()`` here (also through what a function of this file
  returns: ``args = parse_args()``, ``main(args)``) or is a parameter of a function here;
- dataclass and plain class defaults (``cfg = Config()`` then ``cfg.workers``),
  keyword arguments of that construction overriding them;
- ``self.cfg.x``: what the class's methods assign to it (``self_stores.py``), and the
  argparse option ``x`` when ``self.cfg`` is bound to a parameter (``self.cfg = args``);
- dicts: ``d["k"]``, ``d.get("k", default)`` over a dict literal or ``dict(...)`` (over any other
  object, a configuration: its ``default``, not complete) and the key assignments and ``.update`` calls made on it; a name bound to dicts more than
  once: the ones that reach the read, each a path, when all but one are empty
  (``kw = {"num_workers": n} if cuda else {}``);
- ``int(x)``, ``bool(x)`` and ``str(x)`` of such a value;
- ``args.x`` also as every ``args.x = v`` of the file sets it (unknown when ``v`` is not followed).

A ``Possible`` lists the values found, each with where it came from (for messages),
and says whether the list is *complete* (every path was seen). A command-line
option's default is possible but never complete: the user may pass another value.

``expand_kwargs(ctx, call)`` resolves ``**kw`` arguments the same way: a dict
built as a literal, with ``dict(...)``, key assignments and ``.update``.

Rules state their policy for "possible" and "unknown" in their pages; nothing here
guesses: a value that cannot be followed makes the answer incomplete.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import block_assignment, local_class_path, scope_assignments
from dslint.semantics.call_sites import call_sites, called_function, other_file_literals
from dslint.semantics.calls import UNKNOWN, literal_value
from dslint.semantics.kwargs_dicts import dict_changes, subscript_key, unchanged_values
from dslint.semantics.loops import loader_loops
from dslint.semantics.narrowing import narrow
from dslint.semantics.options import option_values
from dslint.semantics.possible import NOTHING, Possible, Value, either_dict, exactly, holds
from dslint.semantics.reaching import cannot_reach
from dslint.semantics.self_stores import nested_self_stores
from dslint.semantics.walk import plain_returns

MAX_DEPTH = 8
PARSE_ARGS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args"})
CONVERSIONS = frozenset({"builtins.int", "builtins.bool", "builtins.str", "builtins.float"})


# ----------------------------------------------------------------------- entry points


def possible(ctx, expr: Optional[cst.CSTNode]) -> Possible:
    """Every value ``expr`` can take (see the module docstring)."""
    if expr is None:
        return NOTHING
    return _Resolver(ctx).of(expr, 0)


def possible_arg(ctx, bound, name: str) -> Possible:
    """What argument ``name`` of a bound call can be: the argument passed, an entry of a
    ``**kwargs`` dict this file builds, or the signature's default when nothing is
    hidden (no ``*args``, and every ``**kwargs`` dict fully known)."""
    arg = bound.arg(name)
    if arg is not None:
        return possible(ctx, arg.value)
    if bound.has_star_args:
        return NOTHING
    expanded = expand_kwargs(ctx, bound.call) if bound.has_star_kwargs else ({}, True)
    entries, closed = expanded
    if name in entries:
        return entries[name]
    if not closed:
        return NOTHING
    if name in bound.signature.defaults:
        return exactly(bound.signature.defaults[name], "the default")
    return NOTHING


def expand_kwargs(ctx, call: cst.Call) -> Tuple[Dict[str, Possible], bool]:
    """The ``**kw`` arguments of ``call`` as {key: Possible}, and whether no other key
    can be in them (every ``**`` dict was followed to its construction and changes)."""
    entries: Dict[str, Possible] = {}
    closed = True
    resolver = _Resolver(ctx)
    for arg in call.args:
        if arg.star != "**":
            continue
        found = resolver.dict_entries(arg.value, 0)
        if found is None:
            closed = False
            continue
        keys, is_closed = found
        closed = closed and is_closed
        for key, value in keys.items():
            entries[key] = entries[key] | value if key in entries else value
    return entries, closed


# ----------------------------------------------------------------------- the resolver


class _Resolver:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.active: set = set()

    def of(self, expr: cst.CSTNode, depth: int) -> Possible:
        if depth > MAX_DEPTH or id(expr) in self.active:
            return NOTHING
        self.active.add(id(expr))
        try:
            return self._of(expr, depth)
        finally:
            self.active.discard(id(expr))

    def _of(self, expr: cst.CSTNode, depth: int) -> Possible:
        literal = literal_value(expr)
        if literal is not UNKNOWN:
            return exactly(literal, "the literal")
        if isinstance(expr, cst.IfExp):
            return self.of(expr.body, depth + 1) | self.of(expr.orelse, depth + 1)
        if isinstance(expr, cst.BooleanOperation):
            return self._boolean(expr, depth)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            inner = self.of(expr.expression, depth + 1)
            return Possible(tuple(Value(not holds(bool, v.value), f"`not` of {v.origin}") for v in inner.values),
                            inner.complete)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self._read(expr, depth)
        if isinstance(expr, cst.Subscript):
            key = subscript_key(expr)
            if key is not None:
                return self._dict_value(expr.value, key, None, depth)
            return NOTHING
        if isinstance(expr, cst.Call):
            return self._call(expr, depth)
        return NOTHING

    # -- operators
    def _boolean(self, expr: cst.BooleanOperation, depth: int) -> Possible:
        left = self.of(expr.left, depth + 1)
        right = self.of(expr.right, depth + 1)
        is_or = isinstance(expr.operator, cst.Or)
        kept = tuple(v for v in left.values if holds(bool, v.value) == is_or)
        passes_on = any(holds(bool, v.value) != is_or for v in left.values) or not left.complete
        values = Possible(kept, left.complete)
        return (values | right) if passes_on else values

    def _read(self, expr, depth: int) -> Possible:
        """A name or attribute, narrowed by the tests passed before the read (``narrowing.py``)."""
        read = self._name if isinstance(expr, cst.Name) else self._attribute
        return narrow(self.ctx, expr, lambda: read(expr, depth))

    # -- names
    def _name(self, name: cst.Name, depth: int) -> Possible:
        ctx = self.ctx
        constant = ctx.module_constant(name)
        if constant is not None:
            return self.of(constant, depth + 1)
        reaching = block_assignment(ctx.tree, name)  # ``x = None`` just before, in the read's own block
        if reaching is not None:
            return self.of(reaching, depth + 1)
        scope = ctx.tree.scope_node(name)
        param = _parameter(scope, name.value)
        if param is not None:
            return self._parameter(scope, param, depth)
        assigned = scope_assignments(ctx.tree, scope, name.value)
        if assigned:  # (when none can reach the read, keep them all)
            assigned = [v for v in assigned if not cannot_reach(ctx, v, name)] or assigned
        if assigned is None or not assigned:
            if scope is not None and assigned is not None:
                # not bound in this function: a closure or module-level name
                outer = ctx.tree.scope_node(scope)
                while outer is not None and isinstance(outer, cst.ClassDef):
                    outer = ctx.tree.scope_node(outer)
                values = scope_assignments(ctx.tree, outer, name.value)
                if values:
                    return self._union(values, depth)
            return NOTHING
        return self._union(assigned, depth)

    def _union(self, exprs: List[cst.BaseExpression], depth: int) -> Possible:
        out: Optional[Possible] = None
        for value in exprs:
            found = self.of(value, depth + 1)
            out = found if out is None else out | found
        return out or NOTHING

    def _parameter(self, func, param: cst.Param, depth: int) -> Possible:
        """The default and what the project's calls pass (never complete: other modules may call)."""
        ctx = self.ctx
        out = Possible((), False)
        if param.default is not None:
            default = self.of(param.default, depth + 1)
            out = Possible(tuple(Value(v.value, f"the default of parameter `{param.name.value}`")
                                 for v in default.values), False)
        if not isinstance(func, cst.FunctionDef):
            return out
        for call, arg in call_sites(ctx, func, param):
            if arg is None:
                continue
            passed = self.of(arg, depth + 1)
            out = out | Possible(tuple(Value(v.value, f"a call passes {_show(v.value)}") for v in passed.values), False)
        for where, value in other_file_literals(ctx, func, param):  # (the project's other files: the summaries)
            out = out | Possible((Value(value, f"{where} passes {_show(value)}"),), False)
        return out

    # -- attributes
    def _attribute(self, expr: cst.Attribute, depth: int) -> Possible:
        found = self._attribute_source(expr, depth)
        stores = nested_self_stores(self.ctx, expr)  # ``self.cfg.workers = 0`` in a method of the class
        found = Possible((found | self._union(stores, depth)).values, False) if stores else found
        extra = []  # ``args.workers = min(16, os.cpu_count())``: each such store of the file, unknown when not followed
        for value in _name_attribute_stores(self.ctx, expr):
            if cannot_reach(self.ctx, value, expr):
                continue
            extra.extend(self.of(value, depth + 1).values or (Value(UNKNOWN, f"`{self.ctx.code(value)}`"),))
        return Possible((*found.values, *extra), False) if extra else found

    def _attribute_source(self, expr: cst.Attribute, depth: int) -> Possible:
        ctx = self.ctx
        attr = expr.attr.value
        for source in self.sources(expr.value, depth + 1):
            if isinstance(source, cst.Call):
                func = source.func
                if isinstance(func, cst.Attribute) and func.attr.value in PARSE_ARGS:
                    return option_values(ctx, attr)
                if isinstance(func, cst.Subscript):
                    continue
                cls = _local_class(ctx, source)
                if cls is not None:
                    return self._instance_attribute(cls, source, attr, depth)
            elif isinstance(source, cst.Subscript) and isinstance(source.value, cst.Call):
                inner = source.value.func
                if isinstance(inner, cst.Attribute) and inner.attr.value in PARSE_ARGS:
                    return option_values(ctx, attr)
            elif isinstance(source, cst.Attribute) and isinstance(source.value, cst.Name):  # ``self.cfg.x``
                bindings = loader_loops(ctx).self_attr_at(source, source.value.value, source.attr.value) or ()
                if any(isinstance(b.value, cst.Name) and _is_unresolved_parameter(ctx, b.value) for _, b in bindings):
                    return option_values(ctx, attr)  # ``self.cfg = args``, ``args`` a parameter: as ``args.x``
        if isinstance(expr.value, cst.Name) and _is_unresolved_parameter(ctx, expr.value):
            # a namespace handed to this function (``def main(args)``): this file's
            # argparse options are what it most likely holds
            return option_values(ctx, attr)
        if isinstance(expr.value, cst.Name):
            return self._self_attribute(expr, depth)
        return NOTHING

    def _self_attribute(self, expr: cst.Attribute, depth: int) -> Possible:
        """``self.attr`` in a method: every ``self.attr = v`` of the class family (and a class-level
        ``attr = v``), each a possible value; never complete, as code elsewhere may set it."""
        bindings = loader_loops(self.ctx).self_attr_at(expr, expr.value.value, expr.attr.value)
        if not bindings:
            return NOTHING
        found = self._union([binding.value for _, binding in bindings if binding.value is not None], depth)
        return Possible(found.values, False)

    def _instance_attribute(self, cls: cst.ClassDef, call: cst.Call, attr: str, depth: int) -> Possible:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == attr:
                return self.of(arg.value, depth + 1)
        if any(arg.star for arg in call.args):
            return NOTHING
        for stmt in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
            for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == attr:
                    if small.value is not None:
                        found = self.of(small.value, depth + 1)
                        return Possible(tuple(Value(v.value, f"the default of `{cls.name.value}.{attr}`")
                                              for v in found.values), found.complete)
                if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == attr
                                                         for t in small.targets):
                    found = self.of(small.value, depth + 1)
                    return Possible(tuple(Value(v.value, f"the default of `{cls.name.value}.{attr}`")
                                          for v in found.values), found.complete)
        return NOTHING

    def sources(self, expr: cst.CSTNode, depth: int) -> List[cst.CSTNode]:
        """The expressions a name (or parameter, through this file's calls) was bound to."""
        if depth > MAX_DEPTH:
            return []
        ctx = self.ctx
        if not isinstance(expr, cst.Name):
            returned = _returned_values(ctx, expr)  # ``args = parse_args()``: what the file's function returns
            return [s for value in returned for s in self.sources(value, depth + 1)] if returned else [expr]
        scope = ctx.tree.scope_node(expr)
        param = _parameter(scope, expr.value)
        if param is not None:
            out: List[cst.CSTNode] = []
            if isinstance(scope, cst.FunctionDef):
                for _, arg in call_sites(ctx, scope, param):
                    if arg is not None:
                        out.extend(self.sources(arg, depth + 1))
            return out
        assigned = scope_assignments(ctx.tree, scope, expr.value)
        if not assigned and scope is not None:
            assigned = scope_assignments(ctx.tree, None, expr.value)
        out = []
        for value in assigned or ():
            out.extend(self.sources(value, depth + 1))
        return out

    # -- calls
    def _call(self, call: cst.Call, depth: int) -> Possible:
        ctx = self.ctx
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "get" and call.args and call.args[0].keyword is None:
            key = literal_value(call.args[0].value)
            if isinstance(key, str):
                default = call.args[1].value if len(call.args) > 1 else None
                return self._dict_value(func.value, key, default, depth)
        if ctx.call_name(call) in CONVERSIONS and len(call.args) == 1 and not call.args[0].star:
            inner = self.of(call.args[0].value, depth + 1)
            kind = {"builtins.int": int, "builtins.bool": bool, "builtins.str": str, "builtins.float": float}[ctx.call_name(call)]
            converted = []
            for value in inner.values:
                try:
                    converted.append(Value(kind(value.value), value.origin))
                except (TypeError, ValueError):
                    return NOTHING
            return Possible(tuple(converted), inner.complete)
        return NOTHING

    # -- dicts
    def _dict_value(self, container: cst.CSTNode, key: str, default: Optional[cst.CSTNode], depth: int) -> Possible:
        found = self.dict_entries(container, depth + 1)
        fallback = self.of(default, depth + 1) if default is not None else exactly(None, "the `.get` default")
        if found is None:  # a configuration not built here: its default, or whatever the user sets
            shown = f"`.get({key!r}, ...)` when the configuration leaves it out"
            return Possible(tuple(Value(v.value, shown) for v in fallback.values), False) if default is not None else NOTHING
        entries, closed = found
        if key in entries:
            return entries[key]
        return fallback if closed else Possible(fallback.values, False)

    def dict_entries(self, expr: cst.CSTNode, depth: int) -> Optional[Tuple[Dict[str, Possible], bool]]:
        """{key: Possible} of a dict a name is bound to, and whether it has no other keys."""
        if depth > MAX_DEPTH:
            return None
        ctx = self.ctx
        if isinstance(expr, cst.Dict):
            return self._dict_display(expr, depth)
        if isinstance(expr, cst.IfExp):  # ``{"num_workers": n} if cuda else {}``: each arm a path
            arms = [self.dict_entries(expr.body, depth + 1), self.dict_entries(expr.orelse, depth + 1)]
            return None if None in arms else either_dict(arms)  # (only one arm with entries)
        if isinstance(expr, cst.Call) and ctx.call_name(expr) == "builtins.dict":
            entries: Dict[str, Possible] = {}
            closed = True
            for arg in expr.args:
                if arg.keyword is not None:
                    entries[arg.keyword.value] = self.of(arg.value, depth + 1)
                elif arg.star == "**":
                    closed = self._merge_into(entries, arg.value, depth) and closed
                else:
                    inner = self.dict_entries(arg.value, depth + 1)
                    if inner is None:
                        return None
                    entries.update(inner[0])
                    closed = closed and inner[1]
            return entries, closed
        if not isinstance(expr, cst.Name):
            return None
        scope = ctx.tree.scope_node(expr)
        assigned = scope_assignments(ctx.tree, scope, expr.value)
        if assigned and len(assigned) > 1:
            return self._reaching_dicts(expr, depth)
        if not assigned:
            return None
        base = self.dict_entries(assigned[0], depth + 1)
        if base is None:
            return None
        entries, closed = dict(base[0]), base[1]
        for change in dict_changes(ctx, scope, expr.value):
            if change is None:
                closed = False
                continue
            key, value_expr = change
            if key is None:  # .update(...) with a dict we could follow
                inner = self.dict_entries(value_expr, depth + 1)
                if inner is None:
                    closed = False
                    continue
                for k, v in inner[0].items():
                    entries[k] = entries[k] | v if k in entries else v
                closed = closed and inner[1]
                continue
            value = self.of(value_expr, depth + 1)
            entries[key] = entries[key] | value if key in entries else value
        return entries, closed

    def _reaching_dicts(self, expr: cst.Name, depth: int) -> Optional[Tuple[Dict[str, Possible], bool]]:
        """A name bound to a dict more than once (``kw = {"num_workers": n} if cuda else {}``): the
        dicts that reach ``expr`` (``ValueFlow.value_nodes``), each a path, all but one empty
        (``possible.either_dict``); None when one is not a dict we follow, or the scope changes the
        dict after building it (``kwargs_dicts.unchanged_values``)."""
        alternatives = []
        for node in unchanged_values(self.ctx, loader_loops(self.ctx), expr) or [None]:
            found = self.dict_entries(node, depth + 1) if isinstance(node, (cst.Dict, cst.Call)) else None
            if found is None:
                return None
            alternatives.append(found)
        return either_dict(alternatives)

    def _dict_display(self, expr: cst.Dict, depth: int) -> Optional[Tuple[Dict[str, Possible], bool]]:
        entries: Dict[str, Possible] = {}
        closed = True
        for element in expr.elements:
            if isinstance(element, cst.DictElement):
                key = literal_value(element.key)
                if not isinstance(key, str):
                    closed = False
                    continue
                entries[key] = self.of(element.value, depth + 1)
            else:  # **other
                closed = self._merge_into(entries, element.value, depth) and closed
        return entries, closed

    def _merge_into(self, entries: Dict[str, Possible], other: cst.CSTNode, depth: int) -> bool:
        """Add the entries of the dict ``other`` (a ``**other``); whether it has no other keys."""
        inner = self.dict_entries(other, depth + 1)
        if inner is None:
            return False
        entries.update(inner[0])
        return inner[1]


# ----------------------------------------------------------------------- helpers


def _show(value) -> str:
    text = repr(value)
    return f"`{text}`" if len(text) <= 30 else "a value"


def _parameter(scope, name: str) -> Optional[cst.Param]:
    params = scope.params if isinstance(scope, (cst.FunctionDef, cst.Lambda)) else None
    return next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == name), None) if params else None


def _is_unresolved_parameter(ctx, name: cst.Name) -> bool:
    scope = ctx.tree.scope_node(name)
    param = _parameter(scope, name.value)
    if param is None or not isinstance(scope, cst.FunctionDef):
        return False
    if _is_instance_parameter(ctx, scope, name.value):
        return False  # a method's ``self``/``cls`` is the instance, not a namespace of options
    return not any(arg is not None for _, arg in call_sites(ctx, scope, param))


def _is_instance_parameter(ctx, scope, name: str) -> bool:
    """``name`` is the first parameter of a method (its ``self``/``cls``)."""
    first = (*scope.params.posonly_params, *scope.params.params)[:1] if isinstance(scope, cst.FunctionDef) else ()
    return bool(first) and first[0].name.value == name and ctx.method_class(scope) is not None


def _name_attribute_stores(ctx, expr: cst.Attribute) -> List[cst.CSTNode]:
    """The values this file assigns to ``<name>.<attr>`` (any function) for ``expr`` of that form."""
    if not isinstance(expr.value, cst.Name) or _is_instance_parameter(ctx, ctx.tree.scope_node(expr), expr.value.value):
        return []  # (``self.x``: the class family's stores, ``_self_attribute``)

    def compute():
        stores = {}
        for node in ctx.nodes(cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Attribute) and isinstance(target.target.value, cst.Name):
                    stores.setdefault((target.target.value.value, target.target.attr.value), []).append(node.value)
        return stores
    return ctx.memo(("values.name_attribute_stores",), compute).get((expr.value.value, expr.attr.value), [])


def _returned_values(ctx, call) -> List[cst.CSTNode]:
    """The values the ``return`` statements of the module-level function of this file that
    ``call`` calls by name give back (``call_sites.called_function``; not a generator's)."""
    func = called_function(ctx, call) if isinstance(call, cst.Call) else None
    returns = plain_returns(func, ctx.tree) if func is not None else None
    return [r.value for r in returns or () if r.value is not None]


def _local_class(ctx, call: cst.Call) -> Optional[cst.ClassDef]:
    return local_class_path(ctx.tree, call.func.value) if isinstance(call.func, cst.Name) else None
