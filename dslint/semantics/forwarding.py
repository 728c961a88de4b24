"""What a function passes on that its callers choose, for the loader rules.

* ``switch``: a ``bool`` parameter forwarded unchanged (``def f(..., drop_last: bool =
  False)`` then ``DataLoader(..., drop_last=drop_last)``): both values are possible, the
  caller chooses;
* ``forwarded_option``: what a key is in the ``**`` dicts of a call when one of them is the
  enclosing function's own ``**kwargs`` (set or removed there, or left to the caller).

Both build on ``values.py`` (``possible``, ``expand_kwargs``) and, like it, never guess:
anything they cannot follow is NOTHING or "the caller may supply it".
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.calls import literal_value
from dslint.semantics.names import binding_kind
from dslint.semantics.walk import iter_subtree
from dslint.semantics.values import NOTHING, Possible, Value, expand_kwargs, possible


def switch(ctx, expr: Optional[cst.CSTNode]) -> Possible:
    """Both values for a ``bool`` parameter (annotated ``bool`` or with a ``True``/``False``
    default) read unchanged; NOTHING for anything else (a method's ``self``, a rebound name)."""
    if not isinstance(expr, cst.Name):
        return NOTHING
    scope = ctx.tree.scope_node(expr)
    param = _parameter(scope, expr.value)
    if param is None or not isinstance(scope, cst.FunctionDef) or _is_self(ctx, scope, param):
        return NOTHING
    annotation = param.annotation.annotation if param.annotation is not None else None
    annotated = isinstance(annotation, cst.Name) and annotation.value == "bool"
    defaulted = isinstance(param.default, cst.Name) and literal_value(param.default) in (True, False)
    if not (annotated or defaulted):
        return NOTHING
    assigned = scope_assignments(ctx.tree, scope, expr.value)
    if assigned is None or assigned:
        return NOTHING  # rebound in the function: not the caller's value as passed
    name = expr.value
    return Possible((Value(True, f"a caller passing `{name}=True`"), Value(False, f"a caller passing `{name}=False`")), False)


def forwarded_option(ctx, call: cst.Call, key: str) -> Tuple[Optional[Possible], bool]:
    """What ``key`` is in the ``**`` dicts of ``call`` when one of them is the enclosing
    function's own ``**kwargs`` parameter: (its values, or None when absent or removed; whether
    the caller may still supply it). ``kwargs["key"] = v`` and ``kwargs.update(key=v)`` set it
    (the caller's value no longer gets through), ``kwargs.pop("key")`` and ``del kwargs["key"]``
    remove it; any other ``**`` dict is read with ``expand_kwargs``."""
    func = ctx.enclosing_function(call)
    star = func.params.star_kwarg if func is not None else None
    star_name = star.name.value if isinstance(star, cst.Param) else None

    def is_star(arg) -> bool:
        return arg.star == "**" and isinstance(arg.value, cst.Name) and arg.value.value == star_name

    others = [a for a in call.args if a.star == "**" and not is_star(a)]
    entries, closed = expand_kwargs(ctx, call.with_changes(args=others)) if others else ({}, True)
    if key in entries:
        return entries[key], False
    if not any(is_star(a) for a in call.args):
        return None, not closed
    found: Optional[Possible] = None
    open_ = True
    for node in ctx.tree.scope_nodes(func, cst.Name):
        if node.value != star_name:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Subscript) and parent.value is node and _key(parent) == key:
            holder = ctx.parent(parent)
            if isinstance(holder, cst.AssignTarget):
                found, open_ = possible(ctx, ctx.parent(holder).value), False
            elif isinstance(holder, cst.Del):
                found, open_ = None, False
        elif isinstance(parent, cst.Attribute) and parent.value is node and isinstance(ctx.parent(parent), cst.Call):
            method, args = parent.attr.value, ctx.parent(parent).args
            if method == "pop" and args and literal_value(args[0].value) == key:
                found, open_ = None, False
            elif method == "update":
                for arg in args:
                    if arg.keyword is not None and arg.keyword.value == key:
                        found, open_ = possible(ctx, arg.value), False
    return found, open_ or not closed


def _parameter(scope, name: str) -> Optional[cst.Param]:
    if not isinstance(scope, (cst.FunctionDef, cst.Lambda)):
        return None
    params = scope.params
    return next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == name), None)


def _is_self(ctx, func: cst.FunctionDef, param: cst.Param) -> bool:
    positional = (*func.params.posonly_params, *func.params.params)
    static = binding_kind(func) == "staticmethod"
    return ctx.method_class(func) is not None and bool(positional) and positional[0] is param and not static


def _key(expr: cst.Subscript) -> Optional[str]:
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key = literal_value(expr.slice[0].slice.value)
    return key if isinstance(key, str) else None


# ----------------------------------------------------------------------- keys callers supply

_COPIES = frozenset({"copy.copy", "copy.deepcopy", "builtins.dict"})


def caller_key_reaches(ctx, call: cst.Call, key: str) -> bool:
    """``call`` passes the enclosing function's own ``**kwargs`` on, and an entry ``key`` the
    caller puts there gets through: the call does not name ``key`` itself and no statement
    that runs before it on its path sets or removes the entry (a removal inside a branch that
    ends in ``return``/``raise`` is on another path)."""
    func = ctx.enclosing_function(call)
    star = func.params.star_kwarg if func is not None else None
    if not isinstance(star, cst.Param):
        return False
    name = star.name.value
    if not any(a.star == "**" and isinstance(a.value, cst.Name) and a.value.value == name for a in call.args):
        return False
    if any(a.keyword is not None and a.keyword.value == key for a in call.args):
        return False
    child = call
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, cst.IndentedBlock):
            for statement in ancestor.body:
                if statement is child:
                    break
                if any(not _exits_between(ctx, node, statement) for node in _key_changes(ctx, statement, name, key)):
                    return False
                if _tests_key(ctx, statement, name, key):
                    return False  # the function looks for the entry first: it handles it
        if ancestor is func:
            break
        child = ancestor
    return True


def _tests_key(ctx, statement, name: str, key: str) -> bool:
    """A test in ``statement`` (``if``/``while``/``assert``) looks for entry ``key`` of ``name``."""
    tests = [n.test for n in iter_subtree(statement, into_scopes=False) if isinstance(n, (cst.If, cst.While, cst.Assert))]
    return any(isinstance(n, cst.Name) and n.value == name and _key_use(ctx, n, key) is not None
               for test in tests for n in iter_subtree(test, into_scopes=False))


def handled_before(ctx, shown: cst.CSTNode, call: cst.Call) -> bool:
    """``shown`` is in the function of ``call`` and before it: the code looks for the entry
    before the call (a guard), so the call is not evidence of a conflict."""
    func = ctx.enclosing_function(call)
    if ctx.enclosing_function(shown) is not func:
        return False
    child = call
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, (cst.If, cst.While, cst.IfExp)) and any(a is ancestor.test for a in ctx.ancestors(shown)):
            return True
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            for statement in ancestor.body:
                if statement is child:
                    break
                if any(a is statement for a in ctx.ancestors(shown)):
                    return True
        if ancestor is func:
            break
        child = ancestor
    return False


def key_shown(ctx, expr: Optional[cst.CSTNode], key: str) -> Optional[cst.CSTNode]:
    """Where the code treats ``key`` as an entry that may be in the dict ``expr`` (``self.kw``
    or a name), or in a copy of it (``copy.copy``, ``dict(...)``, ``.copy()``): a
    ``.pop("key")``, ``.get("key")``, a read ``d["key"]``, ``del d["key"]`` or ``"key" in d``.
    None when nothing shows it."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        func = ctx.enclosing_function(expr)
        owner = ctx.method_class(func) if func is not None else None
        if owner is None:
            return None
        attr = expr.attr.value
        holders = [n for n in ctx.nodes(cst.Attribute) if _is_self_attr(n, attr) and _inside(ctx, n, owner)]
    elif isinstance(expr, cst.Name):
        scope = ctx.tree.scope_node(expr)
        holders = [n for n in ctx.tree.scope_nodes(scope, cst.Name) if n.value == expr.value]
    else:
        return None
    # a removal from ``self.x`` itself empties it for every later use: only a copy's counts
    removals = not isinstance(expr, cst.Attribute)
    copies = [c for holder in holders for c in _copies_of(ctx, holder)]
    copied = {id(c) for c in copies}
    for holder in holders + copies:
        found = _key_use(ctx, holder, key, removals or id(holder) in copied)
        if found is not None:
            return found
    return None


def local_callee(ctx, call: cst.Call) -> Optional[cst.FunctionDef]:
    """The function of this file a call runs: ``self.m(...)`` in a method of the class that
    defines ``m``, or a module-level function called by its name."""
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        caller = ctx.enclosing_function(call)
        owner = ctx.method_class(caller) if caller is not None else None
        body = owner.body.body if owner is not None and isinstance(owner.body, cst.IndentedBlock) else ()
        found = [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value]
        return found[0] if len(found) == 1 else None
    if isinstance(func, cst.Name):
        found = [s for s in ctx.module.body if isinstance(s, cst.FunctionDef) and s.name.value == func.value]
        return found[0] if len(found) == 1 and ctx.call_name(call) == f"{ctx.names.modname}.{func.value}" else None
    return None


def _is_self_attr(node, attr: str) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == attr and isinstance(node.value, cst.Name) and node.value.value == "self"


def _inside(ctx, node, owner) -> bool:
    return any(a is owner for a in ctx.ancestors(node))


def _copies_of(ctx, holder) -> list:
    """The names bound to a copy of ``holder`` (``x = copy.copy(holder)``), at their uses."""
    parent = ctx.parent(holder)
    copy = None
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        if isinstance(call, cst.Call) and ctx.call_name(call) in _COPIES and len(call.args) == 1 and not parent.star:
            copy = call
    elif isinstance(parent, cst.Attribute) and parent.attr.value == "copy":
        call = ctx.parent(parent)
        copy = call if isinstance(call, cst.Call) and not call.args else None
    assign = ctx.parent(copy) if copy is not None else None
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return []
    name = assign.targets[0].target.value
    scope = ctx.tree.scope_node(assign)
    return [n for n in ctx.tree.scope_nodes(scope, cst.Name) if n.value == name]


def _key_use(ctx, holder, key: str, removals: bool = True) -> Optional[cst.CSTNode]:
    parent = ctx.parent(holder)
    methods = ("pop", "get") if removals else ("get",)
    if isinstance(parent, cst.Attribute) and parent.value is holder and parent.attr.value in methods:
        call = ctx.parent(parent)
        if isinstance(call, cst.Call) and call.args and literal_value(call.args[0].value) == key:
            return call
    if isinstance(parent, cst.Subscript) and parent.value is holder and _key(parent) == key:
        holder_of = ctx.parent(parent)
        if not isinstance(holder_of, cst.AssignTarget) and (removals or not isinstance(holder_of, cst.Del)):
            return parent
    if isinstance(parent, cst.ComparisonTarget) and parent.comparator is holder and isinstance(parent.operator, (cst.In, cst.NotIn)):
        comparison = ctx.parent(parent)
        if isinstance(comparison, cst.Comparison) and literal_value(comparison.left) == key:
            return comparison
    return None


def _key_changes(ctx, statement, name: str, key: str):
    """Nodes in ``statement`` that set or remove entry ``key`` of the dict ``name``."""
    for node in iter_subtree(statement, into_scopes=False):
        if not isinstance(node, cst.Name):
            continue
        if node.value != name:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Subscript) and parent.value is node and _key(parent) == key:
            if isinstance(ctx.parent(parent), (cst.AssignTarget, cst.Del)):
                yield parent
        elif isinstance(parent, cst.Attribute) and parent.value is node and isinstance(ctx.parent(parent), cst.Call):
            call = ctx.parent(parent)
            method = parent.attr.value
            if method in ("pop", "setdefault") and call.args and literal_value(call.args[0].value) == key:
                yield call
            elif method == "update" and any(a.keyword is not None and a.keyword.value == key or a.keyword is None for a in call.args):
                yield call


def _exits_between(ctx, node, statement) -> bool:
    """``node`` sits in a block (below ``statement``) that ends in ``return`` or ``raise``."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.IndentedBlock) and ancestor.body:
            last = ancestor.body[-1]
            if isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body):
                return True
        if ancestor is statement:
            break
    return False
