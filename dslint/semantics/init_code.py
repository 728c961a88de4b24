"""What runs while a dataset is constructed, before any worker is forked.

``__init__`` and the methods of its class family (this file) that it reaches
through ``self.m(...)`` calls, at any depth (``init_helpers``): code there runs once
in the parent, like ``__init__`` itself. A helper that per-sample code also reaches
is left out (it may re-create its objects in each worker).

``held_in_container`` answers which ``self`` containers keep an object created in
such code: ``self.items.append(obj)``, ``self.items[k] = obj`` (also through locals bound
to the object or to derivations of it such as ``obj.get("key")`` or ``f[name]``, a loop over
a local list of such objects, and a tuple holding it: ``self.index.append((x, i))``).
``fills`` lists what construction code puts into ``self.<attr>`` (``.append(x)``,
``self.<attr>[k] = x``, ``+= [x]``).
"""

from __future__ import annotations

from typing import Iterator, List, Optional

import libcst as cst

from dslint.semantics.classes import called_method, class_family, methods
from dslint.semantics.instance_state import Held, assign_targets
from dslint.semantics.kept_objects import keeping_construction
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree

FILL_METHODS = frozenset({"append", "extend", "insert", "add"})


def init_helpers(ctx, cls: cst.ClassDef, init: cst.FunctionDef) -> List[cst.FunctionDef]:
    """The methods ``init`` reaches through ``self.m(...)`` that run only while the object is
    constructed: no per-sample code, no other method of the class and no other object's
    ``obj.m(...)`` call runs them (those may re-create what they make in each worker)."""

    def compute():
        called_elsewhere = ctx.memo(("init_code.called_elsewhere",), lambda: _called_on_others(ctx))
        helpers = _called_methods(ctx, cls, init)
        others = [
            m for klass in class_family(ctx, cls) for m in methods(klass).values()
            if m.name.value != "__init__" and not any(m is h for h in helpers)
        ]
        rerun = {id(m) for other in others for m in _called_methods(ctx, cls, other)}
        return [
            func
            for func in helpers
            if ctx.per_sample_mode(func) is None
            and not func.name.value.startswith("__")
            and func.name.value not in called_elsewhere
            and id(func) not in rerun
        ]

    return ctx.memo(("init_code.helpers", id(cls), id(init)), compute)


def _called_methods(ctx, cls: cst.ClassDef, start: cst.FunctionDef) -> List[cst.FunctionDef]:
    """The methods of this file's classes that ``start`` calls as ``self.m(...)``, at any depth
    (a method only referenced, ``self.fn = self.m``, may run anywhere later)."""
    out: List[cst.FunctionDef] = []
    work = [start]
    while work:
        func = work.pop()
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, cst.Call):
                method = called_method(ctx, cls, node, self_name(func))
                if method is not None and method is not start and not any(method is seen for seen in out):
                    out.append(method)
                    work.append(method)
    return out


def _called_on_others(ctx) -> set:
    """Names of methods called as ``obj.m(...)`` on an object other than ``self``
    (not a module function): such a method also runs outside construction."""
    names = set()
    for node in ctx.nodes(cst.Attribute):
        if node.attr.value in names or not isinstance(ctx.parent(node), cst.Call):
            continue
        func = ctx.enclosing_function(node)
        owner = node.value
        if isinstance(owner, cst.Name) and func is not None and owner.value == self_name(func):
            continue
        if ctx.parent(node).func is node and ctx.qualname(node) is None:
            names.add(node.attr.value)
    return names


def family_construction(ctx, cls: cst.ClassDef) -> List[cst.FunctionDef]:
    """Every ``__init__`` of the class family and the helpers each one reaches."""
    found: List[cst.FunctionDef] = []
    for klass in class_family(ctx, cls):
        init = methods(klass).get("__init__")
        if init is None or not self_name(init):
            continue
        for func in (init, *init_helpers(ctx, klass, init)):
            if not any(func is seen for seen in found):
                found.append(func)
    return found


def fills_under(root: cst.CSTNode, selfp: Optional[str], attr: str) -> Iterator[tuple]:
    """(node, item) for what grows ``self.<attr>`` under ``root``: ``.append(item)``/
    ``.insert``/``.add``/``.extend(item)`` on it or on one of its entries
    (``self.<attr>[key].append(item)``), ``self.<attr>[key] = item``, and
    ``self.<attr> += [item, ...]`` (or ``+= items``, like ``.extend(items)``)."""
    for node in iter_subtree(root, into_scopes=False):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.args:
            owner = node.func.value  # self.<attr>, or one of its entries: self.<attr>[key]
            if isinstance(owner, cst.Subscript):
                owner = owner.value
            if node.func.attr.value in FILL_METHODS and self_attr(owner, selfp) == attr:
                yield node, node.args[-1].value
        elif isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Subscript) and self_attr(target.value, selfp) == attr:
                yield node, node.value
        elif isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign):
            value = node.value
            if self_attr(node.target, selfp) != attr:
                continue
            if isinstance(value, (cst.List, cst.Tuple)):
                if value.elements:
                    yield node, value.elements[0].value
            else:  # ``self.<attr> += json.load(f)``: the list grows by what it is given, like ``.extend``
                yield node, value


def fills(ctx, funcs: List[cst.FunctionDef], attr: str) -> Iterator[tuple]:
    """``fills_under`` the bodies of ``funcs`` (construction code)."""
    for func in funcs:
        yield from fills_under(func.body, self_name(func), attr)


def _derives(expr: cst.CSTNode, derive_methods, derive_subscript: bool) -> Optional[cst.CSTNode]:
    """The object ``expr`` is one derivation of (``obj["key"]``, ``obj.get(...)``), or None."""
    if derive_subscript and isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        index = expr.slice[0].slice  # a string key, or a name key directly on the object
        if isinstance(index, cst.Index) and (
            isinstance(index.value, cst.SimpleString)
            or (isinstance(index.value, (cst.Name, cst.Attribute)) and not isinstance(expr.value, cst.Subscript))
        ):
            return expr.value
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in derive_methods:
        return expr.func.value
    return None


def _outermost(ctx, node: cst.CSTNode, derive_methods, derive_subscript: bool) -> cst.CSTNode:
    """The outermost derivation of ``node``: ``node.get("x")["y"]``."""
    while True:
        parent = ctx.parent(node)
        if _derives(parent, derive_methods, derive_subscript) is node:
            node = parent
            continue
        grand = ctx.parent(parent) if isinstance(parent, cst.Attribute) and parent.value is node else None
        if grand is not None and _derives(grand, derive_methods, derive_subscript) is node:
            node = grand
            continue
        return node


def _container_of(ctx, node: cst.CSTNode, selfp: str) -> Optional[tuple]:
    """(attr, statement) when ``node`` (or a tuple or list holding it) is put into a ``self`` container."""
    parent = ctx.parent(node)
    while isinstance(parent, cst.Element) and isinstance(ctx.parent(parent), (cst.Tuple, cst.List)):
        node = ctx.parent(parent)
        parent = ctx.parent(node)
    if isinstance(parent, (cst.ListComp, cst.DictComp)) and node is getattr(parent, "elt", getattr(parent, "value", None)):
        for target in assign_targets(grand) if isinstance(grand := ctx.parent(parent), cst.Assign) else ():
            attr = self_attr(target, selfp)  # ``self.txns = [envs[i].begin() for i in ...]``
            if attr is not None and grand.value is parent:
                return attr, grand
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in FILL_METHODS:
            attr = self_attr(call.func.value, selfp)
            if attr is not None and call.func.attr.value != "extend":
                return attr, call
    if isinstance(parent, cst.Assign) and parent.value is node:
        for target in assign_targets(parent):
            if isinstance(target, cst.Subscript):
                attr = self_attr(target.value, selfp)
                if attr is not None:
                    return attr, parent
    return None


def held_in_container(
    ctx, func: cst.FunctionDef, call: cst.Call, derive_methods=(), derive_subscript=False
) -> Optional[Held]:
    """The ``self`` containers of ``func`` that keep what ``call`` creates (None: none, or
    the object is closed or handed to a ``with`` block in ``func``). Followed through the
    locals of ``func`` that hold it or a derivation of it (``group = f[name]``, ``x =
    group["x"]``), through a local list of such objects (``files = [h5py.File(p) for p in
    paths]``), the target of a loop over it and its entries (``files[i]``), into a comprehension
    of them kept on ``self`` (``self.txns = [envs[i].begin() for i in ...]``), and into a tuple or list put in the container
    (``self.index.append((x, i))``), and into an object of a project class that keeps it
    (``self.slicers[k] = Slicer(f)``, ``kept_objects.keeping_construction``)."""
    selfp = self_name(func)
    if not selfp:
        return None
    held = Held(call)
    node = _outermost(ctx, call, derive_methods, derive_subscript)
    direct = _container_of(ctx, node, selfp)
    if direct is not None:
        held.attrs[direct[0]] = direct[1]
    locals_, lists = _bound_names(ctx, node), _listed_in(ctx, node)
    body = list(iter_subtree(func.body, into_scopes=False))
    for loop in body:  # `for f in files:` over a local list of the objects: `f` holds one
        if isinstance(loop, cst.For) and isinstance(loop.iter, cst.Name) and loop.iter.value in lists:
            locals_ += [t.value for t in [loop.target] if isinstance(t, cst.Name)]
    locals_ += lists  # (their entries: ``envs[i]``)
    seen = set()
    while locals_:
        local = locals_.pop()
        if local in seen:
            continue
        seen.add(local)
        for sub in body:
            if _closes(sub, local):
                return None
            if isinstance(sub, cst.Name) and sub.value == local and not _is_target(ctx, sub):
                element = ctx.parent(sub)  # ``envs[i]``: one object of a local list of them
                element = element if local in lists and isinstance(element, cst.Subscript) and element.value is sub else sub
                outer = _outermost(ctx, element, derive_methods, derive_subscript)
                outer = keeping_construction(ctx, outer) or outer  # `Slicer(f)`: an object holding it
                kept = _container_of(ctx, outer, selfp)
                if kept is not None:
                    held.attrs.setdefault(kept[0], kept[1])
                elif outer is not element:
                    locals_ += _bound_names(ctx, outer)  # `group = f[name]`: a view of the object
    return held if held.attrs else None


def _bound_names(ctx, node: cst.CSTNode) -> List[str]:
    parent = ctx.parent(node)
    if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
        return [t.value for t in assign_targets(parent) if isinstance(t, cst.Name)]
    return []


def _listed_in(ctx, node: cst.CSTNode) -> List[str]:
    """The local names bound to a list comprehension whose every element is ``node``."""
    parent = ctx.parent(node)
    return _bound_names(ctx, parent) if isinstance(parent, cst.ListComp) and parent.elt is node else []


def _is_target(ctx, name: cst.Name) -> bool:
    parent = ctx.parent(name)
    return isinstance(parent, (cst.AssignTarget, cst.For)) and getattr(parent, "target", None) is name


def add_aliases(ctx, func: cst.FunctionDef, held: Held) -> Held:
    """Add the ``self.b = self.a`` aliases ``func`` makes of a held attribute ``a``."""
    selfp = self_name(func)
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, cst.Assign) and self_attr(node.value, selfp) in held.attrs:
            for target in assign_targets(node):
                attr = self_attr(target, selfp)
                if attr is not None:
                    held.attrs.setdefault(attr, node)
    return held


def _closes(sub: cst.CSTNode, local: str) -> bool:
    if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute) and sub.func.attr.value == "close":
        return isinstance(sub.func.value, cst.Name) and sub.func.value.value == local
    return isinstance(sub, cst.WithItem) and isinstance(sub.item, cst.Name) and sub.item.value == local
