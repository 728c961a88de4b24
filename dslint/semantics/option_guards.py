"""Which code runs only when a dataset option is turned on?

A dataset often carries a debugging or visualisation option: ``__init__(self, ..., vis=False)``
keeps ``self.vis = vis``, and the per-sample code does extra work under ``if self.vis:`` (or
hands ``self.vis`` to a helper that tests its own ``vis`` parameter). When every construction
that reaches a DataLoader leaves the option out, that work never runs in the loader's workers.

The summaries record the pieces (this module, libcst only):

* ``test_guards(test, self_param, params)``: what an ``if`` test requires to be truthy:
  ``["self", X]`` for ``self.X`` (also ``self.X is not None``) and ``["param", p]`` for a
  parameter ``p`` of the function; ``a and b`` requires both;
* ``node_guards(node, parents, func, self_param)``: the requirements of every ``if`` whose
  body holds ``node`` inside ``func`` (and of every ``if not ...:`` whose ``else`` holds it);
* ``init_options(init, self_param)``: ``{X: [p, position]}`` for each attribute that
  ``__init__`` stores only as ``self.X = p``, from a parameter ``p`` whose default is
  ``None``, ``False`` or ``0`` and that ``__init__`` never rebinds;
* ``forwarded(call, self_param, params)``: the arguments of a call that are ``self.X`` or a
  parameter of the caller, so that a helper's ``if vis:`` can be traced to ``self.vis``.

``option_reach`` (index phase) decides which of these are off for a dataset class.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from dslint.semantics.names import target_names
from dslint.semantics.regions import self_name
from dslint.semantics.scopes import is_none
from dslint.semantics.walk import body_buckets, iter_subtree

_FALSY = ("None", "False")


def _not_none(test):
    """``x`` for ``x is not None``, else ``test``."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, cst.IsNot) and is_none(test.comparisons[0].comparator):
        return test.left
    return test


def test_guards(test, self_param: Optional[str], params=()) -> List[list]:
    """What ``test`` needs truthy to pass (see the module doc); [] when it is no such test."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return test_guards(test.left, self_param, params) + test_guards(test.right, self_param, params)
    test = _not_none(test)
    if type(test) is cst.Attribute and type(test.value) is cst.Name and self_param and test.value.value == self_param:
        return [["self", test.attr.value]]
    if type(test) is cst.Name and test.value in params:
        return [["param", test.value]]
    return []


def node_guards(node, parents, func, self_param: Optional[str], params=()) -> List[list]:
    """The requirements of the ``if`` statements around ``node`` inside ``func``."""
    found: List[list] = []
    previous, current = node, parents.get(id(node))
    while current is not None and current is not func and not isinstance(current, (cst.FunctionDef, cst.Lambda)):
        if isinstance(current, cst.If):
            if previous is current.body:
                found += test_guards(current.test, self_param, params)
            elif previous is current.orelse and isinstance(current.test, cst.UnaryOperation) \
                    and isinstance(current.test.operator, cst.Not):
                found += test_guards(current.test.expression, self_param, params)
        previous, current = current, parents.get(id(current))
    return found


def _falsy_default(param: cst.Param) -> bool:
    default = param.default
    return (type(default) is cst.Name and default.value in _FALSY) or (type(default) is cst.Integer and default.value == "0")


def unchanged_params(func: cst.FunctionDef, self_param: Optional[str], targets=None) -> Dict[str, Optional[int]]:
    """``{name: position}`` (position among the arguments a call passes positionally, so a
    method's ``self`` not counted; None for keyword-only) of the parameters with a ``None``,
    ``False`` or ``0`` default that ``func`` never rebinds (``targets``: the body's assignment
    targets, statements and ``for`` loops, when the caller has them)."""
    positional = [*func.params.posonly_params, *func.params.params][1 if self_param else 0:]
    found = {p.name.value: i for i, p in enumerate(positional) if _falsy_default(p)}
    found.update((p.name.value, None) for p in func.params.kwonly_params if _falsy_default(p))
    if found:
        for node in targets if targets is not None else iter_subtree(func.body, into_scopes=False):
            target = node.target if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For)) else None
            for name in target_names(target):
                found.pop(name, None)
    return found


def init_options(init: cst.FunctionDef, self_param: Optional[str], tree=None) -> Dict[str, list]:
    """``{X: [p, position]}`` (see the module doc)."""
    if not self_param or not any(_falsy_default(p) for p in (*init.params.params, *init.params.kwonly_params)):
        return {}
    buckets = body_buckets(init, tree)
    nodes = [n for kind in (cst.Assign, cst.AugAssign, cst.AnnAssign) for n in buckets.get(kind, ())]
    params = unchanged_params(init, self_param, [n for kind in (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For)
                                                 for n in buckets.get(kind, ())])
    values: Dict[str, set] = {}
    for node in nodes if params else ():
        value = node.value if isinstance(node, cst.Assign) else None
        for target in (t.target for t in node.targets) if isinstance(node, cst.Assign) else (node.target,):
            if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == self_param:
                values.setdefault(target.attr.value, set()).add(value.value if type(value) is cst.Name else None)
    return {attr: [param, params[param]] for attr, found in values.items()
            if len(found) == 1 and (param := next(iter(found))) in params}


def forwarded(call: cst.Call, self_param: Optional[str], params) -> Optional[list]:
    """``[[slot, ["self", X] | ["param", p]], ...]`` for the arguments of ``call`` that are
    ``self.X`` or a parameter (slot: the position among positional arguments, or the keyword);
    None when there is none or a ``*``/``**`` argument hides the slots."""
    found, position = [], 0
    for arg in call.args:
        if arg.star:
            return None
        guard = test_guards(arg.value, self_param, params) if type(arg.value) in (cst.Attribute, cst.Name) else []
        if guard:
            found.append([arg.keyword.value if arg.keyword is not None else position, guard[0]])
        if arg.keyword is None:
            position += 1
    return found or None


def guard_facts(func: cst.FunctionDef, self_param: Optional[str], calls: List[cst.Call], parents, buckets: dict) -> dict:
    """The summary's facts for ``func`` whose recorded ``calls`` are given in order:
    ``call_guards`` (``[[position, guards]]`` for each call some ``if`` guards), ``guard_params``
    (``unchanged_params``) and ``forwards`` (``[[position, forwarded]]``); only those not empty.
    ``buckets``: the body's nodes by type (``TreeIndex.scope_buckets``)."""
    has_ifs = bool(buckets.get(cst.If))
    targets = [n for kind in (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For) for n in buckets.get(kind, ())]
    params = unchanged_params(func, self_param, targets)
    guarded = [[i, g] for i, call in enumerate(calls) if (g := node_guards(call, parents, func, self_param, params))] if has_ifs else []
    forwards = [[i, f] for i, call in enumerate(calls) if (f := forwarded(call, self_param, params))]
    facts = {}
    if guarded:
        facts["call_guards"] = guarded
    if params and (has_ifs or forwards):
        facts["guard_params"] = params
    if forwards:
        facts["forwards"] = forwards
    return facts


def init_facts(cls: cst.ClassDef, tree=None) -> dict:
    """The summary's facts of the class's own ``__init__`` (none without one): ``options``
    (``init_options``) and ``init_params``, the names of the parameters a call may pass (None
    when ``*args``/``**kwargs`` take any: ``numpy_rng`` drops classes a construction cannot build)."""
    for stmt in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            params = stmt.params
            takes_any = isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None
            names = [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
            return {"options": init_options(stmt, self_name(stmt), tree), "init_params": None if takes_any else names[1:]}
    return {"options": {}}
