"""Project functions that return an object holding a random generator they create.

A factory such as ``build_augmentation(cfg)`` may create ``np.random.RandomState(seed)`` and hand
it to the object it builds (``Flip(random_state=rng)``, ``cls(**params)`` after
``params["random_state"] = rng``); whoever keeps what it returns keeps that generator. A dataset
whose ``__init__`` keeps such an object (``self.t = build_augmentation(cfg)``) and uses it per
sample gives every forked worker a copy of the same generator state (DSL402).

Phase 1 (``holder_facts``, one summary entry per function or method of a file) records, for the
values its ``return`` statements hand back:

* ``fresh``: a return value is a generator object created here (``return RandomState(s)``), or a
  class construction that receives one: as an argument, through a local bound to one, or through
  ``**d`` where ``d`` is a local dict given one (``d[k] = RandomState(s)``, ``{k: RandomState(s)}``).
  The construction is a class when its callee is a capitalised name (``Flip(...)``), or a local
  bound to ``getattr(...)`` here or to a call of a function that returns ``getattr(...)``
  (``picks``: a class picked from a module by name); a plain function that receives a generator
  may use it up and return data, and is not followed, nor are torch's loaders and samplers
  (``MAIN_PROCESS_USERS``: they draw in the main process);
* ``via``: calls whose result the returned value is or wraps (``return self.make(c)``,
  ``return Compose([self.make(c) for c in cfg])``): ``["self", method]`` or ``["func", qualified]``;
* ``returns``: the qualified callees of returned calls (``return Transformer(cfg)``), so that a
  method called on what a function returns can be found;
* ``getattr``: every return value is ``getattr(...)`` (the function picks a class by name).

``rng_holder_index.holder_returned`` answers across files whether calling a project callable
(by qualified name, or a method of what a held object is) returns such a holder.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from dslint.semantics.held_classes import receiver_class
from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex, body_buckets, plain_returns

GENERATORS = frozenset({
    "numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator",
    "numpy.random.mtrand.RandomState", "random.Random", "torch.Generator",
})
#: classes given a generator that they use in the main process, not in the workers
MAIN_PROCESS_USERS = ("torch.utils.data.",)


def _is_generator(names: ModuleNames, node) -> bool:
    return isinstance(node, cst.Call) and names.qualname(node.func) in GENERATORS


def _locals(func: cst.FunctionDef, tree: Optional[TreeIndex] = None) -> Dict[str, List[cst.CSTNode]]:
    """Local name -> the values assigned to it (plain ``x = value`` only), and for ``d[k] = v``
    the value under ``"<item>" + d``."""
    found: Dict[str, List[cst.CSTNode]] = {}
    for node in body_buckets(func, tree).get(cst.Assign, ()):
        for target in node.targets:
            target = target.target
            if isinstance(target, cst.Name):
                found.setdefault(target.value, []).append(node.value)
            elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
                found.setdefault("<item>" + target.value.value, []).append(node.value)
    return found


def _single(local: Dict[str, List[cst.CSTNode]], node) -> Optional[cst.CSTNode]:
    if isinstance(node, cst.Name):
        values = local.get(node.value, ())
        return values[0] if len(values) == 1 else None
    return None


def _carries(names, local, arg: cst.Arg) -> bool:
    """The argument hands over a generator created in this function."""
    value = arg.value
    if arg.star == "**":
        if not isinstance(value, cst.Name):
            return False
        items = list(local.get("<item>" + value.value, ()))
        for bound in local.get(value.value, ()):
            if isinstance(bound, cst.Dict):
                items.extend(e.value for e in bound.elements if isinstance(e, cst.DictElement))
        return any(_is_generator(names, item) or _is_generator(names, _single(local, item)) for item in items)
    if arg.star:
        return False
    return _is_generator(names, value) or _is_generator(names, _single(local, value))


def _target(names, func: cst.FunctionDef, call: cst.Call) -> Optional[list]:
    callee = call.func
    params = func.params.params
    selfp = params[0].name.value if params else None
    if isinstance(callee, cst.Attribute) and isinstance(callee.value, cst.Name) and callee.value.value == selfp:
        return ["self", callee.attr.value]
    qualified = names.qualname(callee) if isinstance(callee, (cst.Name, cst.Attribute)) else None
    return ["func", qualified] if qualified and not qualified.startswith("builtins.") else None


def _class_callee(names, func, local, call: cst.Call):
    """True: the callee is a class; a list: a class if that call target returns ``getattr(...)``;
    None: not known to be a class."""
    callee = call.func
    if isinstance(callee, (cst.Name, cst.Attribute)) and (names.qualname(callee) or "").startswith(MAIN_PROCESS_USERS):
        return None  # a loader or sampler draws in the main process (DSL402 is about the workers' copies)
    if isinstance(callee, (cst.Name, cst.Attribute)):
        last = callee.attr.value if isinstance(callee, cst.Attribute) else callee.value
        if last[:1].isupper() and (not isinstance(callee, cst.Name) or callee.value not in local):
            return True
    bound = _single(local, callee)
    if isinstance(bound, cst.Call):
        if names.qualname(bound.func) == "builtins.getattr":
            return True
        return _target(names, func, bound)
    return None


def _function_facts(names: ModuleNames, func: cst.FunctionDef, tree: Optional[TreeIndex] = None) -> Optional[dict]:
    statements = plain_returns(func, tree)
    if not statements:
        return None
    local = _locals(func, tree)
    each, returns, getattrs = [], [], []
    for node in statements:
        value = node.value
        value = _single(local, value) or value
        fresh, via, picks = False, [], []
        each.append({"fresh": fresh, "via": via, "picks": picks})
        if not isinstance(value, cst.Call):
            getattrs.append(False)
            continue
        getattrs.append(names.qualname(value.func) == "builtins.getattr")
        if _is_generator(names, value):
            each[-1]["fresh"] = True
            continue
        target = _target(names, func, value)
        if target is not None:
            via.append(target)
            if target[0] == "func":
                returns.append(target[1])
        callee = _class_callee(names, func, local, value)
        if callee is None:
            continue
        if any(_carries(names, local, arg) for arg in value.args):
            if callee is True:
                each[-1]["fresh"] = True
            else:
                picks.append(callee)
        for arg in value.args:  # a wrapper of what other calls return: Compose([self.make(c) for c in cfg])
            inner = arg.value
            if isinstance(inner, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
                inner = [inner.elt]
            elif isinstance(inner, (cst.List, cst.Tuple, cst.Set)):
                inner = [e.value for e in inner.elements]
            else:
                inner = [inner]
            via.extend(t for t in (_target(names, func, e) for e in inner if isinstance(e, cst.Call)) if t)
    isgetattr = bool(getattrs) and all(getattrs)
    if not (isgetattr or any(e["fresh"] or e["via"] or e["picks"] for e in each)):
        return None
    return {"each": each, "returns": returns, "getattr": isgetattr}


def holder_facts(tree: TreeIndex, names: ModuleNames, qualname) -> Dict[str, dict]:
    """Phase 1: qualname -> facts (above) for the functions and methods of a file with any."""
    found = {}
    for func in tree.nodes(cst.FunctionDef):
        facts = _function_facts(names, func, tree)
        if facts is not None:
            found[qualname(func, tree)] = facts
    return found


# ---------------------------------------------------------------- a call in a file


def returns_holder(ctx, call: cst.Call) -> bool:
    """The call runs a project function or method (of a held object whose class is known,
    ``held_classes``) that returns an object holding a generator it created (``holder_returned``)."""
    qualified = ctx.call_name(call)
    if qualified and not qualified.startswith("builtins.") and ctx.view.rng_holder(qualified, None):
        return True
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    owner = receiver_class(ctx, func.value)
    return bool(owner) and ctx.view.rng_holder(owner, func.attr.value)
