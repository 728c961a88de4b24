"""Methods of project classes whose result a file re-iterates epoch after epoch (a summary fact).

A runner often gets its loaders from an object it holds (``loaders =
self.experiment.get_loaders(stage)``, with ``self.experiment: Experiment``, or a parameter
annotated with the class) and iterates them once per epoch, in the loop itself or in helper
methods of its own class or module that the epoch loop calls (``self._run_epoch(loaders)``
iterating ``loaders[name]``). ``epoch_iterated_methods`` records, per file, each
``[class, method, kind]`` where ``class`` is the qualified name of the annotated class and
``kind`` says what gets iterated: ``"result"`` (the value returned) or ``"element"`` (a value
of it: ``r[k]``, ``r.values()``, the value of ``r.items()``). The project index then answers for
the overrides of that method in subclasses (``view.epoch_iterated_method``).

Only annotations that name a class are followed; loops under ``torch.no_grad()`` /
``torch.inference_mode()`` are evaluation and do not count.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set

import libcst as cst

from dslint.semantics.grad_modes import no_grad_block
from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
MAX_HELPERS = 3


def epoch_iterated_methods(tree: TreeIndex, names: ModuleNames) -> List[list]:
    out = set()
    for assign in tree.nodes(cst.Assign):
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            continue
        call = assign.value
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            continue
        func = tree.scope_node(assign)
        if not isinstance(func, cst.FunctionDef):
            continue
        owner = _receiver_class(tree, names, func, call.func.value)
        if owner is None:
            continue
        kinds = _epoch_kinds(tree, names, func, assign, assign.targets[0].target.value)
        out.update((owner, call.func.attr.value, kind) for kind in kinds)
    return [list(entry) for entry in sorted(out)]


def _annotation_class(names: ModuleNames, annotation) -> Optional[str]:
    if not isinstance(annotation, (cst.Name, cst.Attribute)):
        return None
    qualified = names.qualname(annotation)
    if not qualified or qualified.startswith(("builtins.", "typing.", "torch.")):
        return None
    return qualified


def _made_class(names: ModuleNames, value) -> Optional[str]:
    """``C(...)``: the qualified name ``C`` (the project index keeps it only when it locates a class)."""
    return _annotation_class(names, value.func) if isinstance(value, cst.Call) else None


def _receiver_class(tree: TreeIndex, names: ModuleNames, func: cst.FunctionDef, receiver) -> Optional[str]:
    """The class ``receiver`` is annotated with or made by: a parameter of ``func`` (``p: C``), a
    name it binds once to ``C(...)``, or ``self.x`` annotated in the class of ``func`` (``self.x:
    C = ...`` in a method, or ``x: C`` in the class body) or set there to ``C(...)`` or to such a
    parameter; None when two of these disagree. Only names the project locates as classes count."""
    params = [*func.params.posonly_params, *func.params.params, *func.params.kwonly_params]
    if isinstance(receiver, cst.Name):
        for param in params:
            if param.name.value == receiver.value and param.annotation is not None:
                return _annotation_class(names, param.annotation.annotation)
        made = [a.value for a in tree.scope_nodes(func, cst.Assign) if any(
            isinstance(t.target, cst.Name) and t.target.value == receiver.value for t in a.targets)]
        return _made_class(names, made[0]) if len(made) == 1 else None
    if not (isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and params
            and receiver.value.value == params[0].name.value):
        return None
    cls = tree.parent_of(tree.parent_of(func))
    if not isinstance(cls, cst.ClassDef):
        return None
    attr = receiver.attr.value
    found = set()
    for node in tree.nodes(cst.Assign):  # ``self.x = p`` with ``p: C`` a parameter of that method
        method = tree.scope_node(node)
        target = node.targets[0].target if len(node.targets) == 1 else None
        if (isinstance(method, cst.FunctionDef) and tree.parent_of(tree.parent_of(method)) is cls
                and isinstance(target, cst.Attribute) and target.attr.value == attr
                and isinstance(target.value, cst.Name) and target.value.value == "self"):
            value = node.value
            found.add(_receiver_class(tree, names, method, value) if isinstance(value, cst.Name) else _made_class(names, value))
    for node in tree.nodes(cst.AnnAssign):
        target = node.target
        if not any(a is cls for a in tree.ancestors(node)):
            continue
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self" \
                and target.attr.value == attr:
            found.add(_annotation_class(names, node.annotation.annotation))
        elif isinstance(target, cst.Name) and target.value == attr and tree.parent_of(tree.parent_of(node)) is cls.body:
            found.add(_annotation_class(names, node.annotation.annotation))
    return found.pop() if len(found) == 1 else None


def _epoch_kinds(tree: TreeIndex, names: ModuleNames, func, assign, name: str) -> Set[str]:
    """What of the value bound to ``name`` is iterated inside a loop of ``func`` that does not
    bind it (so the same value is iterated on every pass)."""
    kinds: Set[str] = set()
    for use in tree.scope_nodes(func, cst.Name):
        if use.value != name or use is assign.targets[0].target:
            continue
        outer = _outer_loop(tree, names, use, assign)
        if outer is None:
            continue
        kinds |= _use_kinds(tree, names, use, outer, 0)
    return kinds


def _outer_loop(tree: TreeIndex, names: ModuleNames, node, assign) -> Optional[cst.CSTNode]:
    """The outermost loop around ``node`` in its scope that does not contain ``assign``; None
    under ``no_grad``."""
    found = None
    for ancestor in tree.ancestors(node):
        if isinstance(ancestor, _SCOPES):
            break
        if isinstance(ancestor, cst.With) and no_grad_block(names, ancestor):
            return None
        if isinstance(ancestor, (cst.For, cst.While)) and node is not getattr(ancestor, "iter", None):
            if any(a is ancestor for a in tree.ancestors(assign)):
                break
            found = ancestor
    return found


def _use_kinds(tree: TreeIndex, names: ModuleNames, use, outer, depth: int) -> Set[str]:
    """How the use ``use`` of a value gets iterated: a nested ``for`` over it, over an element of
    it (``r[k]``; the values of ``r.values()`` or ``r.items()`` iterated in turn) inside ``outer``,
    or a helper of the module it (or an element) is passed to that iterates it."""
    element, expr = _element_of(tree, use)
    kinds: Set[str] = set()
    loop = _loop_over(tree, expr)
    if loop is not None and (outer is None or any(a is outer for a in tree.ancestors(loop))):
        target = loop.target
        if element == "values" or _method_of(tree, expr) == "items":
            if element != "values":
                pair = target.elements if isinstance(target, cst.Tuple) and len(target.elements) == 2 else None
                target = pair[1].value if pair else None
            if isinstance(target, cst.Name):
                for inner in tree.scope_nodes(tree.scope_node(loop), cst.Name):
                    if inner.value == target.value and inner is not target and any(a is loop for a in tree.ancestors(inner)):
                        if "result" in _use_kinds(tree, names, inner, None, depth):
                            kinds.add("element")
        elif _method_of(tree, expr) is None:
            kinds.add(element or "result")
    if depth < MAX_HELPERS and element != "values":
        helper, param = _helper_param(tree, expr)
        if helper is not None:
            for inner in tree.scope_nodes(helper, cst.Name):
                if inner.value == param:
                    found = _use_kinds(tree, names, inner, None, depth + 1)
                    kinds |= found if element is None else ({"element"} if "result" in found else set())
    return kinds


def _element_of(tree: TreeIndex, use):
    """(``"element"``, ``"values"`` or None, the expression to follow): ``r[k]`` is an element,
    ``r.values()`` the values."""
    parent = tree.parent_of(use)
    if isinstance(parent, cst.Subscript) and parent.value is use:
        return "element", parent
    if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value == "values":
        call = tree.parent_of(parent)
        if isinstance(call, cst.Call):
            return "values", call
    return None, use


def _method_of(tree: TreeIndex, expr) -> Optional[str]:
    """``expr.m(...)``: the method name ``m``."""
    parent = tree.parent_of(expr)
    if isinstance(parent, cst.Attribute) and parent.value is expr and isinstance(tree.parent_of(parent), cst.Call):
        return parent.attr.value
    return None


def _loop_over(tree: TreeIndex, expr) -> Optional[cst.For]:
    """The ``for`` whose iterable is ``expr``, ``expr.items()``, or ``expr`` as a positional
    argument of the iterable's call (``enumerate(expr)``, two deep)."""
    node = expr
    parent = tree.parent_of(node)
    if isinstance(parent, cst.Attribute) and parent.attr.value == "items":
        node = tree.parent_of(parent)
        parent = tree.parent_of(node)
    for _ in range(3):
        if isinstance(parent, cst.For) and parent.iter is node:
            return parent
        if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
            node = tree.parent_of(parent)
            parent = tree.parent_of(node)
            continue
        return None
    return None


def _helper_param(tree: TreeIndex, expr):
    """(function, parameter name) when ``expr`` is a positional argument of a call of a function
    of this module (``h(x)``) or of a method of the enclosing class (``self.h(x)``)."""
    arg = tree.parent_of(expr)
    if not isinstance(arg, cst.Arg) or arg.keyword is not None or arg.star:
        return None, None
    call = tree.parent_of(arg)
    if not isinstance(call, cst.Call):
        return None, None
    index = next(i for i, a in enumerate(call.args) if a is arg)
    if any(a.star or a.keyword is not None for a in call.args[:index]):
        return None, None
    func = call.func
    defs: Dict[str, cst.FunctionDef] = {}
    offset = 0
    if isinstance(func, cst.Name):
        defs = {d.name.value: d for d in tree.scope_nodes(None, cst.FunctionDef) if tree.scope_node(d) is None}
        name = func.value
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        caller = next((a for a in tree.ancestors(call) if isinstance(a, cst.FunctionDef)), None)
        cls = tree.parent_of(tree.parent_of(caller)) if caller is not None else None
        if not isinstance(cls, cst.ClassDef):
            return None, None
        defs = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        name, offset = func.attr.value, 1
    else:
        return None, None
    helper = defs.get(name)
    if helper is None:
        return None, None
    params = [*helper.params.posonly_params, *helper.params.params]
    if index + offset >= len(params):
        return None, None
    return helper, params[index + offset].name.value
