"""Devices handed to a class's constructor in other files, down to the attribute that keeps them.

A dataset usually takes its device as a constructor parameter and keeps it
(``self.device = device``), often in a base class of another file reached through
``super().__init__(..., device=device)``, while the training script that builds it
passes ``torch.device("cuda" if torch.cuda.is_available() else "cpu")``. Phase 1
records, per file (``device_facts``):

- ``stores``: ``[class, attr, param, shown, kind]``: an ``__init__`` keeps its parameter
  ``param`` (or ``torch.device(param)``) in ``self.attr``; ``param`` is ``""`` and
  ``shown`` the value when it keeps a value that can be CUDA by itself (``kind``: "device"
  for a device, "placed" for an object put on one: ``build().cuda()``, ``net.to("cuda")``);
- ``forwards``: ``[class, callee param (name or position), own param]``: the
  ``__init__`` hands its own parameter on to ``super().__init__``;
- ``inits``: ``{class: [positional parameters of its __init__, self left out]}``, so that
  a positional argument binds a name (a device used by ``__init__`` itself counts too:
  ``self.net = Net().to(device)``);
- ``cuda_args``: ``[callee, keyword or position, shown, kind]``: a call passes a value that
  can be a CUDA device (``"cuda"``, ``"cuda:0"``, ``torch.device(...)`` of one, either arm of
  a conditional, a name of the function or module bound to one, ``args.<dest>`` of an
  argparse option of the file whose default or a choice is one,
  ``torch.cuda.current_device()``) or an object put on one (a model);
- ``partials``: ``[function, keyword or position, shown]``: ``functools.partial(f,
  device=cuda)`` binds the parameter in every call of the partial (a collate handed over
  with its device), and so does a collate lambda that only calls ``f`` (``lambda b: f(b, cuda)``).

The project index follows each such argument from the construction of a class
(``C(...)``, whichever class of its MRO defines ``__init__``) along the forwards, per
constructed class, to the attributes it reaches (``attribute_origin``). A device a
call does not show stays unknown (never reported).

API: ``device_facts(tree, names, qualname_of)``, ``device_table(index)`` (once per index),
``attribute_origin(index, table, key, attr, kind)``, ``partial_origin(index, table, key, param)``,
``kept_attribute(index, table, key, slot)``, ``init_param_origin(index, table, key, param)``,
``placed_on_cuda(tree, names, expr)``.
"""

from __future__ import annotations

from typing import Callable, List, Optional

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.bound_collates import collate_lambda_calls
from dslint.semantics.device_index import DEVICE, PLACED
from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex

MAX_DEPTH = 3
_EMPTY = cst.Module([])


def cuda_text(tree: TreeIndex, names: ModuleNames, expr, depth: int = 0, options: bool = True) -> bool:
    """``expr`` can be a CUDA device by what this file shows (no parameter, no call result;
    ``options``: an argparse option's default counts)."""
    if expr is None or depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.SimpleString):
        text = expr.evaluated_value
        return isinstance(text, str) and (text == "cuda" or text.startswith("cuda:"))
    if isinstance(expr, cst.FormattedString):
        first = expr.parts[0] if expr.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda:")
    if isinstance(expr, cst.IfExp):
        return cuda_text(tree, names, expr.body, depth + 1, options) or cuda_text(tree, names, expr.orelse, depth + 1, options)
    if isinstance(expr, cst.Call):
        qualified = names.qualname(expr.func)
        if qualified == "torch.cuda.current_device":
            return True
        return qualified == "torch.device" and bool(expr.args) and cuda_text(tree, names, expr.args[0].value, depth + 1, options)
    if options and isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value not in ("self", "cls"):
        return expr.attr.value in tree.memo(("device_flow.options",), lambda: _cuda_options(tree))
    if isinstance(expr, cst.Name):
        scope = tree.scope_node(expr)
        while True:
            if isinstance(scope, (cst.FunctionDef, cst.Lambda)) and _is_param(scope, expr.value):
                return False
            if isinstance(scope, cst.ClassDef):  # a class body's names are not seen from its methods
                scope = tree.scope_node(scope)
                continue
            values = scope_assignments(tree, scope, expr.value)
            if values is None:
                return False
            if values:
                return any(cuda_text(tree, names, value, depth + 1, options) for value in values)
            if scope is None:
                return False
            scope = tree.scope_node(scope)
    return False


def _self_pairs(node: cst.Assign, self_name: str) -> List[tuple]:
    """(attr, value) for each ``self.<attr>`` the assignment binds: ``self.x = v`` and the
    elements of ``self.x, self.y = a, b``."""
    found = []
    for target in node.targets:
        pairs = [(target.target, node.value)]
        if isinstance(target.target, cst.Tuple) and isinstance(node.value, cst.Tuple):
            left, right = target.target.elements, node.value.elements
            if len(left) == len(right) and not any(isinstance(e, cst.StarredElement) for e in (*left, *right)):
                pairs = [(a.value, b.value) for a, b in zip(left, right)]
        for attr, value in pairs:
            if isinstance(attr, cst.Attribute) and isinstance(attr.value, cst.Name) and attr.value.value == self_name:
                found.append((attr.attr.value, value))
    return found


def _moved_in_place(tree: TreeIndex, names: ModuleNames, scope, options: bool = True) -> frozenset:
    """Names of ``scope`` whose object a statement moves to CUDA (``net.cuda()``, ``net.to(device)``
    for a device that can be CUDA, the result unused): an ``nn.Module`` moves itself."""
    found = set()
    for call in tree.scope_nodes(scope, cst.Call):
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)) or func.attr.value not in ("cuda", "to"):
            continue
        if not isinstance(tree.parent_of(call), cst.Expr):
            continue
        if func.attr.value == "cuda" or (call.args and cuda_text(tree, names, call.args[0].value, 0, options)):
            found.add(func.value.value)
    return frozenset(found)


def _cuda_options(tree: TreeIndex) -> frozenset:
    """The argparse destinations of this file a CUDA device is possible for: the default of
    ``add_argument``, one of its ``choices``, or a ``set_defaults`` value is ``"cuda..."``."""
    found = set()
    for call in tree.nodes(cst.Call):
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("add_argument", "set_defaults"):
            continue
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        if func.attr.value == "set_defaults":
            found.update(k for k, v in keywords.items() if _cuda_string(v))
            continue
        values = [keywords.get("default")]
        choices = keywords.get("choices")
        if isinstance(choices, (cst.List, cst.Tuple, cst.Set)):
            values += [e.value for e in choices.elements]
        if not any(_cuda_string(v) for v in values):
            continue
        flags = [a.value.evaluated_value for a in call.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
        flags = [f for f in flags if isinstance(f, str)]
        longs = [f for f in flags if f.startswith("--")]
        dest = keywords.get("dest")
        if isinstance(dest, cst.SimpleString) and isinstance(dest.evaluated_value, str):
            found.add(dest.evaluated_value)
        elif longs or flags:
            found.add((longs or flags)[0].lstrip("-").replace("-", "_"))
    return frozenset(found)


def _cuda_string(expr) -> bool:
    if not isinstance(expr, cst.SimpleString):
        return False
    text = expr.evaluated_value
    return isinstance(text, str) and (text == "cuda" or text.startswith("cuda:"))


def _is_param(func, name: str) -> bool:
    params = func.params
    return any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params))


def device_facts(tree: TreeIndex, names: ModuleNames, qualname_of: Callable) -> dict:
    stores, forwards, inits = [], [], {}
    for cls in tree.nodes(cst.ClassDef):
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None or not init.params.params:
            continue
        qual = qualname_of(cls)
        self_name = init.params.params[0].name.value
        params = [p.name.value for p in (*init.params.posonly_params, *init.params.params)][1:]
        own = set(params) | {p.name.value for p in init.params.kwonly_params}
        for node in tree.scope_nodes(init, cst.Assign):
            for attr, original in _self_pairs(node, self_name):
                value = original
                if isinstance(value, cst.Call) and names.qualname(value.func) == "torch.device" and len(value.args) == 1:
                    value = value.args[0].value
                if isinstance(value, cst.Name) and value.value in own:
                    stores.append([qual, attr, value.value, "", ""])
                    continue
                kind = _kind(tree, names, original) if mentions_cuda(tree) else None
                if kind is not None:
                    stores.append([qual, attr, "", _short(original), kind])
        for call in tree.scope_nodes(init, cst.Call):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call)
                    and isinstance(func.value.func, cst.Name) and func.value.func.value == "super"):
                continue
            for position, arg in enumerate(call.args):
                if arg.star or not (isinstance(arg.value, cst.Name) and arg.value.value in own):
                    continue
                slot = arg.keyword.value if arg.keyword is not None else position
                forwards.append([qual, slot, arg.value.value])
        inits[qual] = params
    cuda_args, partials = [], []
    if not mentions_cuda(tree):  # no argument of this file can be a CUDA device or on one
        return {"stores": stores, "forwards": forwards, "inits": inits, "cuda_args": cuda_args, "partials": partials}
    lambdas = {id(body) for body, _ in collate_lambda_calls(tree, names)}
    for call in tree.nodes(cst.Call):
        func = call.func
        if not isinstance(func, (cst.Name, cst.Attribute)) or not call.args:
            continue
        found = [(i, arg) for i, arg in enumerate(call.args) if not arg.star and _cheap(arg.value)]
        found = [(i, arg, _kind(tree, names, arg.value)) for i, arg in found]
        found = [item for item in found if item[2] is not None]
        qualified = names.qualname(func) if found else None
        if qualified == "functools.partial":
            target = names.qualname(call.args[0].value) if found[0][0] != 0 else None
            for position, arg, kind in found:
                if target and kind == DEVICE:
                    slot = arg.keyword.value if arg.keyword is not None else position - 1
                    partials.append([target, slot, f"`partial({_short(call.args[0].value)}, ..., {_short(arg)})`"])
            continue
        if id(call) in lambdas and qualified:  # ``collate_fn=lambda b: pad(b, device)``: a partial in disguise
            for position, arg, kind in found:
                if kind == DEVICE:
                    slot = arg.keyword.value if arg.keyword is not None else position
                    partials.append([qualified, slot, f"`lambda ...: {_short(func)}(..., {_short(arg)})`"])
            continue
        if not qualified or qualified.split(".")[0] in ("torch", "builtins", "numpy"):
            continue
        for position, arg, kind in found:
            slot = arg.keyword.value if arg.keyword is not None else position
            cuda_args.append([qualified, slot, f"`{_short(func)}(..., {_short(arg)})`", kind])
    return {"stores": stores, "forwards": forwards, "inits": inits, "cuda_args": cuda_args, "partials": partials}


_MOVES = frozenset({"eval", "half", "float", "requires_grad_", "train"})


def mentions_cuda(tree: TreeIndex) -> bool:
    """Some name, attribute or string of the file says ``cuda``: without one, nothing here is a
    CUDA device or on one (every way ``_kind`` answers goes through such a name or string)."""
    def compute():
        return any("cuda" in n.value for kind in (cst.Name, cst.SimpleString, cst.FormattedStringText)
                   for n in tree.nodes(kind))
    return tree.memo(("device_flow.mentions_cuda",), compute)


def _kind(tree: TreeIndex, names: ModuleNames, expr) -> Optional[str]:
    """"device" when ``expr`` can be a CUDA device, "placed" when it is an object put on one
    (``X.cuda()``, ``X.to(cuda)``, a name bound to one), else None."""
    if cuda_text(tree, names, expr):
        return DEVICE
    return PLACED if placed_on_cuda(tree, names, expr) else None


def placed_on_cuda(tree: TreeIndex, names: ModuleNames, expr, depth: int = 0, options: bool = True) -> bool:
    """``expr`` is an object put on CUDA (``options``: by a device an argparse default may make CUDA)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name):
        scope = tree.scope_node(expr)
        if expr.value in tree.memo(("device_flow.moved", id(scope), options), lambda: _moved_in_place(tree, names, scope, options)):
            return True  # ``model.cuda()`` as a statement: a module moves itself
        if isinstance(scope, (cst.FunctionDef, cst.Lambda)) and _is_param(scope, expr.value):
            return False
        values = scope_assignments(tree, scope, expr.value)
        return bool(values) and any(placed_on_cuda(tree, names, v, depth + 1, options) for v in values)
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    method = expr.func.attr.value
    if method == "cuda":
        return not (names.qualname(expr.func) or "").startswith("torch.")
    if method == "to" and expr.args:
        return cuda_text(tree, names, expr.args[0].value, 0, options)
    return method in _MOVES and placed_on_cuda(tree, names, expr.func.value, depth + 1, options)


def _cheap(expr) -> bool:
    return isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.Name, cst.Attribute, cst.IfExp, cst.Call))


def _short(node) -> str:
    text = " ".join(_EMPTY.code_for_node(node).split())
    return text if len(text) <= 50 else text[:47] + "..."
