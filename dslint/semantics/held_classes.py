"""Which class an object that a method calls into is an instance of.

``self.reader.read(p)`` runs ``read`` of the class ``self.reader`` holds (``self.read(p)``:
of the method's own class, along its bases in any file). That class is known when every (non-None) value the class gives ``self.reader`` names the same class:

* ``self.reader = Reader(root)`` (a class called by its qualified name, any module);
* ``self.reader = reader`` where ``reader`` is a parameter annotated with a class
  (``reader: Reader``), or, for a parameter of ``__init__`` without one, what every
  construction of the class in this file passes there (``Dataset(self.reader)``,
  ``Dataset(Reader(root))``, ``r = Reader(root); Dataset(r)``), followed one class
  further for an attribute of the constructing class;
* a local name bound once to such a construction (``r = Reader(root); r.read(p)``).

``attribute_constructions`` gives every construction ``self.x`` may hold instead, when the class
stores several (``self.dataset = Cropped(...)`` in one arm, ``Resized(...)`` in the other).

Only the qualified name comes back: whether the class (of this project) has the
method, and what the method does, is the caller's question (``ctx.view``). Anything
else (two different classes, a value of unknown origin, no construction in the file)
is None.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.classes import class_family
from dslint.semantics.instance_state import absent_or_none, method_of, self_attr_uses, store_value
from dslint.semantics.regions import self_name

_DEPTH = 3
_HIDDEN = object()


def receiver_class(ctx, receiver: cst.CSTNode) -> Optional[str]:
    """Qualified name of the class ``receiver`` (``self.x`` in a method, or a local name)
    is an instance of, when the file says so unambiguously."""
    return _expr_class(ctx, receiver, 0)


def _expr_class(ctx, expr, depth: int) -> Optional[str]:
    if depth > _DEPTH or expr is None:
        return None
    if isinstance(expr, cst.Call):
        qualified = ctx.call_name(expr)
        return qualified if qualified and not qualified.startswith("builtins.") else None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        method = method_of(ctx, expr, None)
        if method is None or expr.value.value != self_name(method):
            return None
        return _attr_class(ctx, ctx.method_class(method), expr.attr.value, depth + 1)
    if isinstance(expr, cst.Name):
        method = ctx.enclosing_function(expr)
        owner = ctx.method_class(method) if method is not None else None
        if depth == 0 and owner is not None and expr.value == self_name(method) and _is_class_body(ctx, owner):
            return f"{ctx.names.modname}.{ctx.qualname_of_def(owner)}"  # (the class itself)
        param = _parameter(ctx, expr)
        if param is not None:
            return _param_class(ctx, param, depth + 1)
        value = ctx.single_assignment(expr)
        return _expr_class(ctx, value, depth + 1) if isinstance(value, cst.Call) else None
    return None


def attribute_constructions(ctx, expr) -> List[cst.Call]:
    """The constructions of project classes that ``self.x`` (``expr``, in a method) may hold, when every
    (non-None) value the class family stores there is one (``self.dataset = Cropped(...)`` in one arm,
    ``= Resized(...)`` in the other); empty when any store is something else or is not followed."""
    method = method_of(ctx, expr, None) if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) else None
    cls = ctx.method_class(method) if method is not None and expr.value.value == self_name(method) else None
    values = _stored_values(ctx, cls, expr.attr.value) if cls is not None else None
    if not values or any(not isinstance(v, cst.Call) or _expr_class(ctx, v, 0) is None for v in values):
        return []
    return values


def _is_class_body(ctx, cls: cst.ClassDef) -> bool:
    """A class defined at module level or in another class (not inside a function)."""
    return all(not isinstance(a, (cst.FunctionDef, cst.Lambda)) for a in ctx.ancestors(cls))


def _attr_class(ctx, cls: Optional[cst.ClassDef], attr: str, depth: int) -> Optional[str]:
    values = _stored_values(ctx, cls, attr) if cls is not None else None
    found = {_expr_class(ctx, value, depth) for value in values} if values is not None else set()
    return found.pop() if len(found) == 1 else None


def _stored_values(ctx, cls: cst.ClassDef, attr: str) -> Optional[List[cst.CSTNode]]:
    """The values other than None that the class family (a base or subclass of the file may store another)
    assigns to ``self.<attr>``; None when a store is not followed (a tuple unpacked, ``+=``, ``del``, a
    ``for``/``with`` target)."""
    values = []
    for use in self_attr_uses(ctx, class_family(ctx, cls), attr):
        node = use.node
        parent = ctx.parent(node)
        if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AnnAssign) and parent.target is node):
            value = store_value(ctx, node)
            if value is None and not (isinstance(parent, cst.AnnAssign) and parent.value is None):
                return None  # (a value not followed: a tuple unpacked, ...)
            if not absent_or_none(value):
                values.append(value)
        elif isinstance(parent, (cst.AugAssign, cst.Del)) or _bound_elsewhere(ctx, node):
            return None
    return values


def _bound_elsewhere(ctx, node) -> bool:
    """``self.x`` as a target of a ``for``, ``with ... as`` or a tuple assignment."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.WithItem, cst.AsName)):
            target = getattr(ancestor, "target", None) or getattr(ancestor, "asname", None)
            if target is not None and any(a is target for a in [node, *ctx.ancestors(node)]):
                return True
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            break
    return False


def _parameter(ctx, name: cst.Name) -> Optional[cst.Param]:
    func = ctx.enclosing_function(name)
    if func is None:
        return None
    for param in [*func.params.posonly_params, *func.params.params, *func.params.kwonly_params]:
        if param.name.value == name.value:
            # the parameter itself, when the function never rebinds it
            return param if ctx.single_assignment(name) is None and not _rebound(ctx, func, name.value) else None
    return None


def _rebound(ctx, func, name: str) -> bool:
    for target in ctx.nodes(cst.AssignTarget):
        if isinstance(target.target, cst.Name) and target.target.value == name and ctx.enclosing_function(target) is func:
            return True
    return False


def _param_class(ctx, param: cst.Param, depth: int) -> Optional[str]:
    if param.annotation is not None:
        annotation = param.annotation.annotation
        qualified = ctx.qualname(annotation) if isinstance(annotation, (cst.Name, cst.Attribute)) else None
        return qualified if qualified and not qualified.startswith("builtins.") else None
    func = ctx.enclosing_function(param)
    cls = ctx.method_class(func) if func is not None else None
    if cls is None or func.name.value != "__init__":
        return None
    params = [*func.params.posonly_params, *func.params.params]
    position = next((i for i, p in enumerate(params) if p is param), None)
    found = set()
    for call in _constructions(ctx, cls):
        arg = _argument(call, param.name.value, None if position is None else position - 1)
        if arg is _HIDDEN:
            return None
        if arg is None:
            continue  # (the parameter's default)
        found.add(_expr_class(ctx, arg, depth))
    if len(found) != 1:
        return None
    return found.pop()


def _constructions(ctx, cls: cst.ClassDef):
    qualified = f"{ctx.names.modname}.{ctx.qualname_of_def(cls)}"
    for call in ctx.nodes(cst.Call):
        if isinstance(call.func, cst.Name) and call.func.value == cls.name.value and ctx.qualname(call.func) == qualified:
            yield call


def _argument(call: cst.Call, keyword: str, position: Optional[int]):
    index = 0
    for arg in call.args:
        if arg.star:
            return _HIDDEN  # (*args / **kwargs may fill it: unknown)
        if arg.keyword is not None:
            if arg.keyword.value == keyword:
                return arg.value
            continue
        if position is not None and index == position:
            return arg.value
        index += 1
    return None
