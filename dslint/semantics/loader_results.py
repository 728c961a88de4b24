"""Loaders that leave their method as its result, and samplers written into a loader's ``**`` dict.

* ``method_result_iterated``: the loader is returned by a method of a class (itself: kind
  ``"result"``, or as a value of a returned dict or list, ``loaders[name] = DataLoader(...)``:
  kind ``"element"``), and some file of the project re-iterates that kind of what the method
  returns, epoch after epoch, through an object annotated with the class or a project base
  whose method it overrides (``epoch_methods.py``, ``view.epoch_iterated_method``);
* ``entry_samplers``: ``(loader, DistributedSampler call)`` where the loader takes its
  arguments from ``**params`` without a ``sampler`` keyword and its function (or module) writes
  ``params["sampler"] = DistributedSampler(...)`` before it.

* ``wrapper_iterated``: the loader is kept on ``self`` by a class whose ``__iter__`` iterates it,
  and some file re-iterates an instance of that class epoch after epoch.

All answer from the loop index's values (``loops.py``); anything else is unknown.
"""

from __future__ import annotations

from typing import Iterator, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.calls import literal_value
from dslint.semantics.classes import methods
from dslint.semantics.epoch_facts import callee_exprs, epoch_loop_results
from dslint.semantics.loops import DISTRIBUTED_SAMPLER
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree


def method_result_iterated(ctx, index, loader) -> bool:
    func = loader.function
    cls = ctx.method_class(func) if func is not None else None
    if cls is None:
        return False
    kind = _returned_kind(ctx, index, func, loader)
    return kind is not None and ctx.view.epoch_iterated_method(ctx.qualname_of_def(cls), func.name.value, kind)


def _returned_kind(ctx, index, func: cst.FunctionDef, loader) -> Optional[str]:
    returns = index.returns(func) or ()
    if any(v.node is loader.call for r in returns for v in index.values(r)):
        return "result"
    for r in returns:
        if isinstance(r, cst.Dict) and any(
                isinstance(e, cst.DictElement) and _is_loader(index, e.value, loader) for e in r.elements):
            return "element"
        if isinstance(r, (cst.List, cst.Tuple)) and any(
                isinstance(e, cst.Element) and _is_loader(index, e.value, loader) for e in r.elements):
            return "element"
    names = {r.value for r in returns if isinstance(r, cst.Name)}
    for node in ctx.tree.scope_nodes(func, cst.Name):
        if node.value not in names:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Subscript) and parent.value is node:
            holder = ctx.parent(parent)
            if isinstance(holder, cst.AssignTarget) and _is_loader(index, ctx.parent(holder).value, loader):
                return "element"
        elif isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == "append":
            call = ctx.parent(parent)
            if isinstance(call, cst.Call) and len(call.args) == 1 and _is_loader(index, call.args[0].value, loader):
                return "element"
    return None


def _is_loader(index, expr, loader) -> bool:
    return any(v.node is loader.call for v in index.values(expr))


def entry_samplers(ctx, index, reported: Set[int]) -> Iterator[Tuple[object, cst.Call]]:
    for loader in index.loaders:
        if loader.framework_driven or loader.bound.expr("sampler") is not None:
            continue
        stars = [a.value for a in loader.call.args if a.star == "**"]
        if len(stars) != 1 or not isinstance(stars[0], cst.Name):
            continue
        name = stars[0].value
        line = ctx.line(loader.call)
        found = []
        for node in ctx.tree.scope_nodes(loader.function, cst.Subscript):
            holder = ctx.parent(node)
            if not (isinstance(node.value, cst.Name) and node.value.value == name and isinstance(holder, cst.AssignTarget)):
                continue
            if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
                continue
            if literal_value(node.slice[0].slice.value) != "sampler" or ctx.line(node) >= line:
                continue
            for value in index.values(ctx.parent(holder).value):
                call = value.node
                if isinstance(call, cst.Call) and ctx.call_name(call) == DISTRIBUTED_SAMPLER and id(call) not in reported:
                    found.append(call)
        if len(found) == 1:
            yield loader, found[0]


def wrapper_iterated(ctx, index, loader) -> bool:
    """The loader is kept on ``self.<attr>`` by a method of a class whose ``__iter__`` iterates
    ``self.<attr>`` (a DataLoader wrapper: ``for batch in self.loader: yield move(batch)``), and an
    instance of that class (or of a subclass inheriting that ``__iter__``, in another file) is
    re-iterated epoch after epoch: a ``for`` loop inside another loop of its scope, not under
    ``no_grad``, over a name bound to its construction (``(A if c else B)(...)``: either arm),
    in this file or another (``view.epoch_iterated``)."""
    func = loader.function
    cls = ctx.method_class(func) if func is not None else None
    iterate = methods(cls).get("__iter__") if cls is not None else None
    if iterate is None or not self_name(func) or not self_name(iterate):
        return False
    kept = {self_attr(t.target, self_name(func)) for a in ctx.tree.scope_nodes(func, cst.Assign)
            if _is_loader(index, a.value, loader) for t in a.targets} - {None}
    if not kept & _iterated_attrs(iterate):
        return False
    qualified = ctx.qualname_of_def(cls)
    local = f"{ctx.names.modname}.{qualified}"
    for _, call in ctx.memo(("loader_results.epoch_loops",), lambda: epoch_loop_results(ctx.tree, ctx.names)):
        if any(ctx.names.qualname(func) == local for func in callee_exprs(call)):
            return True
    return ctx.view.epoch_iterated(qualified)


def _iterated_attrs(method: cst.FunctionDef) -> Set[str]:
    """The ``self.<attr>`` that ``method`` iterates: ``for x in self.a`` (also ``enumerate(self.a)``),
    ``iter(self.a)``, ``yield from self.a``."""
    me = self_name(method)
    found: Set[str] = set()
    for node in iter_subtree(method.body, into_scopes=False):
        exprs = []
        if isinstance(node, cst.For):
            exprs = [node.iter, *(a.value for a in node.iter.args)] if isinstance(node.iter, cst.Call) else [node.iter]
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "iter" and node.args:
            exprs = [node.args[0].value]
        elif isinstance(node, cst.From):
            exprs = [node.item]
        found.update(a for a in (self_attr(e, me) for e in exprs) if a)
    return found


def kept_for_epochs(ctx, index, loader) -> bool:
    """The loader is handed to the constructor of a project class (``Trainer(model, loader)``) that
    keeps that parameter on ``self`` and re-iterates it epoch after epoch in its methods, or to a
    project function that iterates it inside an outer loop of its own (``fit(model, loader,
    epochs)``) (``epoch_attrs``, through ``view.epoch_stored_params``/``epoch_iterated_params``).
    A parameter re-iterated as an entry (``self.loaders["train"]``) counts when the argument is a
    dict literal whose entry of that key may be the loader (``Trainer(loaders={"train": loader})``)."""
    for call in ctx.nodes(cst.Call):
        if not isinstance(call.func, (cst.Name, cst.Attribute)) or not _is_argument(ctx, index, call, loader):
            continue
        stored = _epoch_params(ctx, index, call)
        for i, arg in enumerate(call.args):
            if arg.star:
                continue
            for param in stored:
                if not _holds(ctx, index, arg.value, loader, param[2] if len(param) > 2 else None):
                    continue
                if arg.keyword is not None and arg.keyword.value == param[1]:
                    return True
                if arg.keyword is None and i == param[0] >= 0 and not any(a.star for a in call.args[:i]):
                    return True
    return False


def _is_argument(ctx, index, call: cst.Call, loader) -> bool:
    return any(not a.star and (_is_loader(index, a.value, loader) or _entry_keys(ctx, index, a.value, loader))
               for a in call.args)


def _holds(ctx, index, expr, loader, key: Optional[str]) -> bool:
    """``expr`` may be the loader (``key`` None), or a dict whose entry ``key`` may be it."""
    if key is None:
        return _is_loader(index, expr, loader)
    return key in _entry_keys(ctx, index, expr, loader)


def _entry_keys(ctx, index, expr, loader) -> Set[str]:
    """The string keys under which a dict ``expr`` may be holds the loader: entries of a dict literal
    (``{"train": loader}``), keywords of ``dict(train=loader)``, and, for a name bound to a dict,
    ``name["train"] = loader`` in the loader's function (or module)."""
    keys: Set[str] = set()
    for value in index.values(expr):
        node = value.node
        if isinstance(node, cst.Dict):
            for e in node.elements:
                if isinstance(e, cst.DictElement) and _is_loader(index, e.value, loader):
                    key = literal_value(e.key)
                    if isinstance(key, str):
                        keys.add(key)
        elif isinstance(node, cst.Call) and ctx.call_name(node) == "builtins.dict":
            keys.update(a.keyword.value for a in node.args if a.keyword is not None and _is_loader(index, a.value, loader))
        else:
            continue
        if isinstance(expr, cst.Name):
            keys.update(_written_keys(ctx, index, expr.value, loader))
    return keys


def _written_keys(ctx, index, name: str, loader) -> Set[str]:
    keys: Set[str] = set()
    for node in ctx.tree.scope_nodes(loader.function, cst.Subscript):
        holder = ctx.parent(node)
        if not (isinstance(node.value, cst.Name) and node.value.value == name and isinstance(holder, cst.AssignTarget)):
            continue
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = literal_value(node.slice[0].slice.value)
            if isinstance(key, str) and _is_loader(index, ctx.parent(holder).value, loader):
                keys.add(key)
    return keys


def _epoch_params(ctx, index, call: cst.Call) -> list:
    """[position, name] of the parameters the project code ``call`` runs keeps and re-iterates
    every epoch: a class's constructor, a function, or a method of an object one project class
    made (``runner = Runner(model)``; ``runner.train(loader, epochs)``)."""
    name = ctx.call_name(call)
    if name and not name.startswith(("builtins.", "torch.")):
        found = ctx.view.epoch_stored_params(name) + ctx.view.epoch_iterated_params(name)
        if found:
            return found
    if not isinstance(call.func, cst.Attribute):
        return []
    makers = {ctx.call_name(n) if isinstance(n, cst.Call) else None for n in index.value_nodes(call.func.value) or [None]}
    maker = makers.pop() if len(makers) == 1 else None
    if not maker or maker.startswith(("builtins.", "torch.")):
        return []
    return ctx.view.epoch_iterated_method_params(maker, call.func.attr.value)
