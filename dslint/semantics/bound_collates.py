"""Collate functions handed over as bound methods or set on an existing loader.

A DataLoader runs its ``collate_fn`` in the worker processes. Besides a function
passed by name (``summary.loader_facts``), real code hands a method of the object
that builds the loader (``DataLoader(ds, collate_fn=self.collate)``) or installs the
collate on a loader it was given (``loader.collate_fn = self.smart_collate``, with a
worker count the caller chose). Both are recorded here as
``[qualified function, num_workers literal or None]`` for ``ProjectIndex.collate_loaders``.

``self.m`` is the method ``m`` of the class whose method contains the expression
(followed along the class's bases by the project index). An assignment to
``<x>.collate_fn`` counts only on a receiver that is not ``self`` (a class storing
its own ``collate_fn`` attribute hands nothing to a loader by doing so).

A lambda whose body calls one named function (``collate_fn=lambda b: pad(b, device)``)
hands that function over too (``collate_lambda_calls``). A method of another object
counts when its class is known: ``collate_fn=ds.collate``
where ``ds`` is a parameter annotated with a class (``ds: Base``, ``Optional[Base]``)
or a name bound once to a construction (``ds = Pairs(...)``); through one local
name (``collate_fn = ds.collate`` ... ``collate_fn=collate_fn``) and
``functools.partial``. Loaders include the base-class initialisation in the
``__init__`` of a class deriving from torch's DataLoader (``super().__init__(ds,
collate_fn=...)``), a loader whose arguments the subclass chooses. Which methods
then run as the collate (the overrides in subclasses, the methods it calls on
``self``) is the project index's answer (``collate_reach``).

A method of a parameter that nothing annotates (``def __init__(self, data, workers):
... DataLoader(data, collate_fn=data.collate, ...)``, a library-style iterator) is
recorded against the parameter (``param_collates``: ``roots``), with the constructions
the file passes to classes (``passes``: ``Iterator(Lines(...))``); the index matches
them, and those ``dataset_uses.class_args`` records for functions, to know the class.

API: ``bound_collates(tree, names, qualname_of, loader_facts)``,
``param_collates(tree, names, qualname_of, loader_facts)``.
"""

from __future__ import annotations

from typing import Callable, List, Optional

import libcst as cst

from dslint.semantics.bindings import single_assignment
from dslint.semantics.calls import DATALOADER, BoundCall
from dslint.semantics.dataset_uses import constructed
from dslint.semantics.epoch_facts import dataloader_calls
from dslint.semantics.names import ModuleNames, binding_kind
from dslint.semantics.walk import TreeIndex


def bound_collates(tree: TreeIndex, names: ModuleNames, qualname_of: Callable, loader_facts: Callable) -> List[list]:
    found = []
    for body, call in collate_lambda_calls(tree, names):
        callee = names.qualname(body.func)
        if callee and not callee.startswith(("builtins.", "torch.")):
            found.append([callee, loader_facts(call).get("num_workers")])  # the lambda runs it in the workers
    for call in [*dataloader_calls(tree, names), *_subclass_inits(tree, names)]:
        expr = _through_name(tree, names, BoundCall(call, DATALOADER).expr("collate_fn"))
        ref = _method_ref(tree, names, qualname_of, expr)
        refs = [ref] if ref is not None else _object_method_refs(tree, names, qualname_of, expr)
        if refs:
            workers = loader_facts(call).get("num_workers")
            found.extend([ref, workers] for ref in refs)
    for node in tree.nodes(cst.Assign):
        for target in node.targets:
            receiver = target.target
            if not (isinstance(receiver, cst.Attribute) and receiver.attr.value == "collate_fn"):
                continue
            if _self_name(tree, receiver) is not None:
                continue  # the object's own attribute, not a loader's
            ref = _method_ref(tree, names, qualname_of, node.value) or _function_ref(names, node.value)
            if ref is not None:
                found.append([ref, None])  # a loader built elsewhere: its worker count is unknown
    return found


def _function_ref(names: ModuleNames, expr) -> Optional[str]:
    if isinstance(expr, (cst.Name, cst.Attribute)):
        qualified = names.qualname(expr)
        if qualified and not qualified.startswith("builtins."):
            return qualified
    return None


def _enclosing_method(tree: TreeIndex, node):
    current = tree.parent_of(node)
    while current is not None and not isinstance(current, cst.FunctionDef):
        current = tree.parent_of(current)
    if current is None:
        return None, None
    block = tree.parent_of(current)
    owner = tree.parent_of(block) if type(block) is cst.IndentedBlock else None
    return current, owner if isinstance(owner, cst.ClassDef) else None


def _self_name(tree: TreeIndex, attr: cst.Attribute) -> Optional[cst.ClassDef]:
    """The class when ``attr`` is ``<self>.x`` in one of its methods (nested functions included)."""
    if not isinstance(attr.value, cst.Name):
        return None
    node = attr
    while True:
        func, owner = _enclosing_method(tree, node)
        if func is None:
            return None
        if owner is not None:
            params = func.params.params
            if params and params[0].name.value == attr.value.value and binding_kind(func) != "staticmethod":
                return owner
            return None
        node = func


def _method_ref(tree: TreeIndex, names: ModuleNames, qualname_of: Callable, expr) -> Optional[str]:
    """``mod.Class.m`` for ``self.m`` in a method of ``Class``."""
    if not isinstance(expr, cst.Attribute):
        return None
    owner = _self_name(tree, expr)
    if owner is None:
        return None
    return f"{names.modname}.{qualname_of(owner)}.{expr.attr.value}"


DATALOADER_NAME = "torch.utils.data.DataLoader"


def collate_lambda_calls(tree: TreeIndex, names: ModuleNames) -> List[tuple]:
    """(call, loader) for each ``collate_fn=lambda batch: f(batch, ...)`` whose body is one call of
    a named function (``f`` runs in the workers, with the arguments the lambda passes)."""
    found = []
    for call in dataloader_calls(tree, names):
        expr = BoundCall(call, DATALOADER).expr("collate_fn")
        if isinstance(expr, cst.Lambda) and isinstance(expr.body, cst.Call) \
                and isinstance(expr.body.func, (cst.Name, cst.Attribute)):
            found.append((expr.body, call))
    return found
_OPTIONAL = frozenset({"typing.Optional", "typing.Union"})


def _subclass_inits(tree: TreeIndex, names: ModuleNames) -> List[cst.Call]:
    """``super().__init__(...)`` in the ``__init__`` of a class whose first base is torch's DataLoader."""
    found = []
    for cls in tree.nodes(cst.ClassDef):
        bases = [b.value for b in cls.bases if b.keyword is None]
        if not bases or names.qualname(bases[0]) != DATALOADER_NAME:
            continue
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        for call in tree.scope_nodes(init, cst.Call) if init is not None else ():
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call) \
                    and isinstance(func.value.func, cst.Name) and func.value.func.value == "super":
                found.append(call)
    return found


def _through_name(tree: TreeIndex, names: ModuleNames, expr):
    """The value of a local name assigned once, and the function of a ``functools.partial``."""
    if isinstance(expr, cst.Name):
        value = single_assignment(tree, expr)
        expr = value if value is not None else expr
    if isinstance(expr, cst.Call) and expr.args and names.qualname(expr.func) == "functools.partial":
        expr = expr.args[0].value
    return expr


def _object_method_refs(tree: TreeIndex, names: ModuleNames, qualname_of: Callable, expr) -> List[str]:
    """``mod.Class.m`` for ``obj.m`` (``obj``: a name or ``self.<attr>``) for each class ``obj``
    may be: its parameter's annotation, or what its assignments construct (``dataset_uses``)."""
    if not isinstance(expr, cst.Attribute):
        return []
    obj = expr.value
    if isinstance(obj, cst.Name):
        annotated = _parameter_class(tree, names, obj)
        if annotated is not None:
            return [f"{annotated}.{expr.attr.value}"] if annotated else []
    elif not (isinstance(obj, cst.Attribute) and isinstance(obj.value, cst.Name) and _self_name(tree, obj) is not None):
        return []
    classes = sorted(c for c in constructed(tree, names, [obj], qualname_of) if _class_name(c))
    return [f"{cls}.{expr.attr.value}" for cls in classes]


def _parameter_class(tree: TreeIndex, names: ModuleNames, name: cst.Name) -> Optional[str]:
    """The class a parameter's annotation names ("" when ``name`` is a parameter without one; None
    when it is not a parameter)."""
    func, _ = _enclosing_method(tree, name)
    while func is not None:
        params = func.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name.value:
                annotation = param.annotation.annotation if param.annotation is not None else None
                return _annotated_class(names, annotation) or ""
        func, _ = _enclosing_method(tree, func)
    return None


def _annotated_class(names: ModuleNames, annotation) -> Optional[str]:
    """The one class an annotation names (``C``, ``"C"`` is not followed, ``Optional[C]``, ``C | None``)."""
    if isinstance(annotation, cst.Subscript) and names.qualname(annotation.value) in _OPTIONAL:
        options = [e.slice.value for e in annotation.slice if isinstance(e.slice, cst.Index)]
        options = [o for o in options if not (isinstance(o, cst.Name) and o.value == "None")]
        return _annotated_class(names, options[0]) if len(options) == 1 else None
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [s for s in (annotation.left, annotation.right) if not (isinstance(s, cst.Name) and s.value == "None")]
        return _annotated_class(names, sides[0]) if len(sides) == 1 else None
    if isinstance(annotation, (cst.Name, cst.Attribute)):
        return _class_name(names.qualname(annotation))
    return None


def _class_name(qualified: Optional[str]) -> Optional[str]:
    """A qualified name that can be a project class (not a builtin, typing or torch name)."""
    if not qualified or qualified.split(".")[0] in ("builtins", "typing", "torch", "collections"):
        return None
    return qualified if qualified.rsplit(".", 1)[-1][:1].isupper() else None


def param_collates(tree: TreeIndex, names: ModuleNames, qualname_of: Callable, loader_facts: Callable) -> dict:
    """``roots``: [function, position, parameter, method, num_workers] for ``collate_fn=p.m`` where
    ``p`` is an unannotated parameter of the function building the loader (position without
    ``self`` for a method); ``passes``: [callee, position or keyword, class] for constructions
    passed to a call of a capitalised callee (a class: ``Iterator(Lines(...))``)."""
    roots = []
    for call in [*dataloader_calls(tree, names), *_subclass_inits(tree, names)]:
        expr = _through_name(tree, names, BoundCall(call, DATALOADER).expr("collate_fn"))
        if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name)):
            continue
        func, owner = _enclosing_method(tree, expr)
        if func is None or _parameter_class(tree, names, expr.value) != "":
            continue
        positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        if owner is not None and binding_kind(func) != "staticmethod":
            positional = positional[1:]
        name = expr.value.value
        if name not in positional and name not in [p.name.value for p in func.params.kwonly_params]:
            continue  # a parameter of an outer function
        position = positional.index(name) if name in positional else None
        roots.append([f"{names.modname}.{qualname_of(func)}", position, name, expr.attr.value,
                      loader_facts(call).get("num_workers")])
    passes = []
    for call in tree.nodes(cst.Call):
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else "")
        if not tail[:1].isupper():
            continue
        for position, arg in enumerate(call.args):
            if arg.star or not isinstance(arg.value, (cst.Name, cst.Call)):
                continue
            classes = [c for c in constructed(tree, names, [arg.value], qualname_of) if _class_name(c)]
            callee = names.qualname(func) if classes else None
            if callee and not callee.split(".")[0] in ("torch", "builtins"):
                where = arg.keyword.value if arg.keyword is not None else position
                passes.extend([callee, where, c] for c in sorted(classes))
    return {"roots": roots, "passes": passes}
