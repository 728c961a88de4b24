"""Calls on a parameter named ``self`` of a static method, and the loops they run.

A static method handed the instance explicitly (``mp.spawn(self._worker, args=(self, ...))``
then ``def _worker(rank, self, ...)``) names it ``self`` by convention: its ``self.m(...)``
calls run the class's method ``m``, as in an ordinary method. The loop index resolves
``self.m`` only through a method's first parameter; this module answers the static case:

* ``instance_method_target``: the method of this file's class that ``self.m(...)`` runs,
  where ``self`` is a parameter (never rebound) of a static method of that class;
* ``training_loops_over``: the loops of that method over the parameter an argument of the
  call may bind to a given object, when the loop trains (calls ``.backward()``).
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.classes import find_method
from dslint.semantics.regions import self_name
from dslint.semantics.walk import iter_subtree


def instance_method_target(ctx, index, call: cst.Call) -> Optional[cst.FunctionDef]:
    """The method ``self.m(...)`` runs, in a static method whose parameter ``self`` is the instance."""
    func = call.func
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name) or func.value.value != "self":
        return None
    method = ctx.enclosing_function(call, through_lambdas=False)
    if method is None or self_name(method) is not None:
        return None  # an ordinary method (or a function): the index resolves it
    cls = ctx.method_class(method)
    if cls is None or "self" not in _params(method):
        return None
    _, found = index.name_bindings("self", call)
    if not found or any(b.kind != "param" for b in found):
        return None
    return find_method(ctx, cls, func.attr.value)


def training_loops_over(ctx, index, call: cst.Call, target: cst.FunctionDef, obj: cst.CSTNode) -> List[cst.For]:
    """Loops of ``target`` (run by ``call``, which passes the instance implicitly) over a parameter
    an argument of ``call`` may bind to ``obj``, whose body calls ``.backward()``."""
    params = _params(target)[1:]
    bound = set()
    for i, arg in enumerate(call.args):
        if arg.star:
            break
        if not any(v.node is obj for v in index.values(arg.value)):
            continue
        if arg.keyword is not None:
            bound.add(arg.keyword.value)
        elif i < len(params):
            bound.add(params[i])
    loops = []
    for loop in iter_subtree(target.body, into_scopes=False):
        if not isinstance(loop, cst.For) or not _trains(loop):
            continue
        for part in index.iter_parts(loop.iter):
            if isinstance(part, cst.Name) and part.value in bound:
                _, found = index.name_bindings(part.value, part)
                if found and all(b.kind == "param" for b in found):
                    loops.append(loop)
                    break
    return loops


def _trains(loop: cst.For) -> bool:
    return any(
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward"
        for node in iter_subtree(loop.body, into_scopes=False)
    )


def _params(func: cst.FunctionDef) -> List[str]:
    return [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
