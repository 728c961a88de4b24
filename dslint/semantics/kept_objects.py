"""Other modules' classes and callables whose definitions this file's facts depend on, so that
the engine summarises their files too (``references`` of the summary); and
``keeping_construction``: the construction of a project class that keeps an argument on ``self``."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.bindings import single_assignment
from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex

_HOLDERS = (cst.List, cst.Tuple, cst.Element, cst.Arg)


def kept_objects(tree: TreeIndex, names: ModuleNames) -> List[str]:
    """Classes of other modules whose instances a class keeps (``self.reader = Reader(root)``, also in
    a container of its own: ``self.readers[k] = Reader(f)``):
    their methods may hand back what the handle rules follow (``handle_exports``); and what a
    lambda is handed to (``Pipeline([lambda x: x])``, also in a list): whether that object keeps
    it on ``self`` decides if a dataset holding the object can be pickled (``unpicklable``), as does
    whether an object given as a transform (``transform=TrainAug(...)``, or a name bound once to
    that) keeps one itself; and the class (or the factory, or the class of ``Cls.load(...)``) of an
    object that ``obj.cuda()`` moves: its own ``cuda`` may move only part of it."""
    out = []  # (the callees to resolve)
    for assign in tree.nodes(cst.Assign):
        value = assign.value
        if type(value) is not cst.Call or not any(_on_self(t.target) for t in assign.targets):
            continue
        out.append(value.func)
    for arg in tree.nodes(cst.Arg):  # ``transform=TrainAug(...)``: whether it keeps a lambda (``kept_lambdas``)
        if arg.keyword is not None and "transform" in arg.keyword.value.lower():
            value = single_assignment(tree, arg.value) if type(arg.value) is cst.Name else arg.value
            if type(value) is cst.Call:
                out.append(value.func)
    for node in tree.nodes(cst.Expr):  # ``model.cuda()`` on an object: its class's ``cuda`` decides what moves (``cuda``)
        call = node.value
        if type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "cuda" and type(call.func.value) is cst.Name:
            name = call.func.value.value
            for assign in tree.scope_nodes(tree.scope_node(node), cst.Assign):
                if type(assign.value) is cst.Call and any(type(t.target) is cst.Name and t.target.value == name for t in assign.targets):
                    func = assign.value.func
                    out.append(func.value if type(func) is cst.Attribute else func)  # ``Cls.load(p)``: the class
    for func in tree.nodes(cst.FunctionDef):  # ``def __init__(self, buffer: Buffer): self.buffer = buffer``: its methods (``held_classes``)
        if func.name.value == "__init__":
            out.extend(_stored_annotations(tree, func))
    for node in tree.nodes(cst.Lambda):
        holder = tree.parent.get(id(node))
        while type(holder) in _HOLDERS:
            holder = tree.parent.get(id(holder))
        if type(holder) is cst.Call:
            out.append(holder.func)
    found = []
    for func in out:
        qualified = names.qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if qualified and not qualified.startswith(("builtins.", f"{names.modname}.")):
            found.append(qualified)
    return found


def _stored_annotations(tree: TreeIndex, init: cst.FunctionDef) -> List[cst.BaseExpression]:
    """The annotations (a plain name or dotted name) of the parameters of ``init`` that it stores
    on ``self`` as they are (``self.buffer = buffer``)."""
    annotated = {p.name.value: p.annotation.annotation for p in init.params.params
                 if p.annotation is not None and type(p.annotation.annotation) in (cst.Name, cst.Attribute)}
    if not annotated:
        return []
    stored = {assign.value.value for assign in tree.scope_nodes(init, cst.Assign)
              if type(assign.value) is cst.Name and any(_on_self(t.target) for t in assign.targets)}
    return [annotation for name, annotation in annotated.items() if name in stored]


def _on_self(target) -> bool:
    """``self.x`` or an entry of it (``self.x[k]``: a container the instance keeps)."""
    if type(target) is cst.Subscript:
        target = target.value
    return type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self"


def kept_arguments(ctx, call: cst.Call, qualified: str) -> List[cst.Arg]:
    """The arguments of ``call``, a construction of the project class ``qualified``, that the
    object keeps on ``self`` (``view.kept_attribute``), up to the first ``*``/``**`` argument."""
    kept = []
    for position, arg in enumerate(call.args):
        if arg.star:
            break
        slot = arg.keyword.value if arg.keyword is not None else position
        if ctx.view.kept_attribute(qualified, slot) is not None:
            kept.append(arg)
    return kept


def keeping_construction(ctx, node: cst.CSTNode) -> Optional[cst.Call]:
    """The construction ``node`` is an argument of, when it builds an object of a project class
    that keeps that argument on ``self`` (``Slicer(handle)``, ``kept_arguments``): the object
    then holds what ``node`` is. None otherwise."""
    arg = ctx.parent(node)
    if not isinstance(arg, cst.Arg) or arg.value is not node:
        return None
    call = ctx.parent(arg)
    if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
        return None
    qualified = ctx.call_name(call)
    if not qualified or qualified.startswith("builtins."):
        return None
    return call if any(kept is arg for kept in kept_arguments(ctx, call, qualified)) else None


__all__ = ["kept_arguments", "keeping_construction", "kept_objects"]
