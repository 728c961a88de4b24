"""Constructor parameters a class keeps and re-iterates epoch after epoch (a summary fact).

A trainer class often takes its loader in ``__init__`` (``self.train_loader = train_loader``)
and iterates it once per epoch in a method: in a loop nested in another loop of that method
(``for epoch in ...: for batch in self.train_loader``), or in a method that another method of
the class calls inside a loop (``for epoch in ...: self.train_epoch()``). The file that builds
the loader only sees ``Trainer(model, loader)``. ``epoch_stored_params`` records, per class of
the file, the ``[position, name]`` of each ``__init__`` parameter (``self`` not counted) that
``__init__`` stores on ``self`` unchanged and that such a loop re-iterates; the project index
answers for a class by its qualified name (``view.epoch_stored_params``). ``epoch_iterated_params``
records the same of functions and methods that iterate a parameter inside an outer loop of their
own body (``fit(model, loader, epochs)``, ``runner.train(loader, epochs)``;
``view.epoch_iterated_params``, ``view.epoch_iterated_method_params``).

A loop over an entry (``self.loaders["train"]``, ``loaders["train"]`` with a string key) records
``[position, name, key]``: what is re-iterated is that entry of the dict handed in
(``loader_results.kept_for_epochs`` matches it against the caller's dict).

Loops under ``torch.no_grad()``/``torch.inference_mode()`` are evaluation and do not count;
anything else (a parameter transformed before it is stored, a loop over a copy) is not recorded.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.grad_modes import no_grad_block, no_grad_decorated
from dslint.semantics.names import ModuleNames, binding_kind
from dslint.semantics.walk import TreeIndex

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def epoch_stored_params(tree: TreeIndex, names: ModuleNames, qualname_of) -> Dict[str, List[list]]:
    out: Dict[str, List[list]] = {}
    for cls in tree.nodes(cst.ClassDef):
        if not isinstance(cls.body, cst.IndentedBlock):
            continue
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        init = methods.get("__init__")
        if init is None:
            continue
        stored = _stored_params(tree, init)
        if not stored:
            continue
        iterated = _epoch_iterated_attrs(tree, names, methods)
        found = sorted({(*p, key) if key is not None else tuple(p)
                        for attr, p in stored.items() for a, key in iterated if a == attr}, key=repr)
        if found:
            out[qualname_of(cls)] = [list(p) for p in found]
    return out


def epoch_iterated_params(tree: TreeIndex, names: ModuleNames, qualname_of) -> Dict[str, List[list]]:
    """{function: [[position, name]]} for module-level functions and methods (``Class.method``,
    positions after ``self``/``cls``) that iterate a parameter in a ``for`` nested in another loop
    of their body (``def fit(model, loader, epochs): for epoch in range(epochs): for batch in
    loader``), or hand it inside such a loop to a training helper of the module (or a method of
    the class) that iterates it (``for epoch in ...: train_one_epoch(model, loader)``), the parameter
    never rebound there: what a caller hands them is re-iterated epoch after epoch."""
    out: Dict[str, List[list]] = {}
    module_funcs = {f.name.value: f for f in tree.scope_nodes(None, cst.FunctionDef)}
    # (function, parameters to skip, the helpers its calls may run, its instance parameter)
    funcs = [(f, 0, module_funcs, None) for f in module_funcs.values()]
    for cls in tree.nodes(cst.ClassDef):
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        methods = {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}
        for method in methods.values():
            if binding_kind(method) == "staticmethod":
                funcs.append((method, 0, module_funcs, None))
            elif method.params.params:
                funcs.append((method, 1, methods, method.params.params[0].name.value))
    for func, skip, helpers, selfp in funcs:
        params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)][skip:]
        if not params or no_grad_decorated(names, func):
            continue
        rebound = {t.target.value for a in tree.scope_nodes(func, cst.Assign) for t in a.targets
                   if isinstance(t.target, cst.Name)}
        found = set()
        for loop in tree.scope_nodes(func, cst.For):
            for name, key in _iterated_names(loop):
                if name in params and name not in rebound and not _under_no_grad(tree, names, loop) \
                        and _outer_loop(tree, names, loop) is not None:
                    found.add((params.index(name), name) if key is None else (params.index(name), name, key))
        for name in _handed_to_training_helpers(tree, names, func, helpers, selfp):
            if name in params and name not in rebound:
                found.add((params.index(name), name))
        if found:
            out[qualname_of(func)] = [list(p) for p in sorted(found, key=repr)]
    return out


def _handed_to_training_helpers(tree: TreeIndex, names: ModuleNames, func: cst.FunctionDef, helpers: dict,
                                selfp: Optional[str]) -> Set[str]:
    """Names ``func`` hands, in a call inside an outer loop of its body (not under ``no_grad``), to a
    training helper that iterates that parameter: a function of the module (``for epoch in ...:
    train_one_epoch(model, loader)``), or for a method (``selfp`` its instance parameter) another
    method of its class (``self.run_epoch(loader)``). A helper trains when it calls ``.backward()``,
    ``.zero_grad()`` or ``.train()``: an evaluation pass's order does not matter."""
    out: Set[str] = set()
    for call in tree.scope_nodes(func, cst.Call):
        callee = call.func
        if selfp is None:
            helper = helpers.get(callee.value) if isinstance(callee, cst.Name) else None
        elif isinstance(callee, cst.Attribute) and isinstance(callee.value, cst.Name) and callee.value.value == selfp:
            helper = helpers.get(callee.attr.value)
        else:
            helper = None
        if helper is None or helper is func or _outer_loop(tree, names, call) is None or not _trains(tree, helper) \
                or no_grad_decorated(names, helper):
            continue
        skip = 1 if selfp is not None and binding_kind(helper) != "staticmethod" else 0
        slots = [p.name.value for p in (*helper.params.posonly_params, *helper.params.params)][skip:]
        iterated = {n for loop in tree.scope_nodes(helper, cst.For) if not _under_no_grad(tree, names, loop)
                    for n, key in _iterated_names(loop) if key is None}
        for i, arg in enumerate(call.args):
            if arg.star or not isinstance(arg.value, cst.Name):
                continue
            if arg.keyword is not None:
                slot = arg.keyword.value
            elif not any(a.star for a in call.args[:i]) and i < len(slots):
                slot = slots[i]
            else:
                continue
            if slot in iterated:
                out.add(arg.value.value)
    return out


def _trains(tree: TreeIndex, func: cst.FunctionDef) -> bool:
    return any(isinstance(c.func, cst.Attribute) and c.func.attr.value in ("backward", "zero_grad", "train") and not c.args
               for c in tree.scope_nodes(func, cst.Call))


def _iterated_names(loop: cst.For) -> List[Tuple[str, Optional[str]]]:
    """``for ... in p`` (or ``p`` as a positional argument of the iterable's call, two deep): ``(p,
    None)``; ``for ... in p["train"]``: ``(p, "train")`` (the entry of a dict handed in)."""
    out = []
    for expr in _iterated_exprs(loop):
        base, key = _keyed(expr)
        if isinstance(base, cst.Name):
            out.append((base.value, key))
    return list(dict.fromkeys(out))


def _iterated_exprs(loop: cst.For) -> list:
    exprs = [loop.iter]
    for _ in range(2):
        exprs += [a.value for e in exprs if isinstance(e, cst.Call) for a in e.args if not a.star and a.keyword is None]
    return exprs


def _keyed(expr) -> Tuple[cst.BaseExpression, Optional[str]]:
    """``x["k"]`` (a string literal key): ``(x, "k")``; anything else: ``(expr, None)``."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        key = expr.slice[0].slice.value
        if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
            return expr.value, key.evaluated_value
    return expr, None


def _stored_params(tree: TreeIndex, init: cst.FunctionDef) -> Dict[str, list]:
    """{attribute: [position, name]} for ``self.<attribute> = <parameter>`` in ``__init__``, where
    the parameter is never rebound there and the attribute is assigned once."""
    params = [*init.params.posonly_params, *init.params.params]
    if not params:
        return {}
    selfp = params[0].name.value
    positions = {p.name.value: i - 1 for i, p in enumerate(params) if i > 0}
    positions.update({p.name.value: -1 for p in init.params.kwonly_params})
    rebound: Set[str] = set()
    found: Dict[str, list] = {}
    counts: Dict[str, int] = {}
    for assign in tree.scope_nodes(init, cst.Assign):
        for target in assign.targets:
            node = target.target
            if isinstance(node, cst.Name):
                rebound.add(node.value)
            elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == selfp:
                counts[node.attr.value] = counts.get(node.attr.value, 0) + 1
                value = assign.value
                if isinstance(value, cst.Name) and value.value in positions:
                    found[node.attr.value] = [positions[value.value], value.value]
    return {a: p for a, p in found.items() if counts.get(a) == 1 and p[1] not in rebound}


def _epoch_iterated_attrs(tree: TreeIndex, names: ModuleNames, methods: Dict[str, cst.FunctionDef]) -> Set[tuple]:
    """``(a, key)`` of the attributes ``self.<a>`` (key None) or entries ``self.<a>["key"]`` a ``for``
    loop of a method iterates inside another loop of that method, or in a method the class calls
    (``self.m()``) inside a loop of another method."""
    looped_calls = set()
    for method in methods.values():
        for call in tree.scope_nodes(method, cst.Call):
            func = call.func
            if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
                    and _outer_loop(tree, names, call) is not None):
                looped_calls.add(func.attr.value)
    out: Set[str] = set()
    for name, method in methods.items():
        if no_grad_decorated(names, method):
            continue
        params = [*method.params.posonly_params, *method.params.params]
        selfp = params[0].name.value if params else None
        for loop in tree.scope_nodes(method, cst.For):
            attr = _iterated_self_attr(loop, selfp)
            if attr is None or _under_no_grad(tree, names, loop):
                continue
            if name in looped_calls or _outer_loop(tree, names, loop) is not None:
                out.add(attr)
    return out


def _iterated_self_attr(loop: cst.For, selfp: Optional[str]) -> Optional[tuple]:
    """``for ... in self.a`` (or ``self.a`` as a positional argument of the iterable's call,
    ``enumerate(self.a)``, ``tqdm(enumerate(self.a))``): ``(a, None)``; ``self.a["k"]``: ``(a, "k")``."""
    for expr in _iterated_exprs(loop):
        expr, key = _keyed(expr)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == selfp:
            return expr.attr.value, key
    return None


def _outer_loop(tree: TreeIndex, names: ModuleNames, node) -> Optional[cst.CSTNode]:
    """A loop of the same scope whose body holds ``node`` (not under ``no_grad``)."""
    previous = node
    for ancestor in tree.ancestors(node):
        if isinstance(ancestor, _SCOPES):
            return None
        if isinstance(ancestor, cst.With) and no_grad_block(names, ancestor):
            return None
        if isinstance(ancestor, (cst.For, cst.While)) and previous is ancestor.body:
            return ancestor
        previous = ancestor
    return None


def _under_no_grad(tree: TreeIndex, names: ModuleNames, node) -> bool:
    for ancestor in tree.ancestors(node):
        if isinstance(ancestor, _SCOPES):
            return False
        if isinstance(ancestor, cst.With) and no_grad_block(names, ancestor):
            return True
    return False
