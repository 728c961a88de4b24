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

API: ``bound_collates(tree, names, qualname_of, loader_facts)``.
"""

from __future__ import annotations

from typing import Callable, List, Optional

import libcst as cst

from dslint.semantics.calls import DATALOADER, BoundCall
from dslint.semantics.epoch_facts import dataloader_calls
from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex


def bound_collates(tree: TreeIndex, names: ModuleNames, qualname_of: Callable, loader_facts: Callable) -> List[list]:
    found = []
    for call in dataloader_calls(tree, names):
        ref = _method_ref(tree, names, qualname_of, BoundCall(call, DATALOADER).expr("collate_fn"))
        if ref is not None:
            found.append([ref, loader_facts(call).get("num_workers")])
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
            if params and params[0].name.value == attr.value.value and not _is_static(func):
                return owner
            return None
        node = func


def _is_static(func: cst.FunctionDef) -> bool:
    return any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in func.decorators)


def _method_ref(tree: TreeIndex, names: ModuleNames, qualname_of: Callable, expr) -> Optional[str]:
    """``mod.Class.m`` for ``self.m`` in a method of ``Class``."""
    if not isinstance(expr, cst.Attribute):
        return None
    owner = _self_name(tree, expr)
    if owner is None:
        return None
    return f"{names.modname}.{qualname_of(owner)}.{expr.attr.value}"
