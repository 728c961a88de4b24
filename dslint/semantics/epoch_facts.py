"""Loop facts of a file's summary: which parameters a function's loops iterate, which
results of other modules' functions are re-iterated epoch by epoch, and which functions
of other modules receive a DataLoader this file builds (their files are summarised too).
"""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.grad_modes import NO_GRAD
from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex, iter_subtree

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def dataloader_calls(tree: TreeIndex, names: ModuleNames):
    tails = names.call_tails({"DataLoader"})
    for call in tree.nodes(cst.Call):
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        if tail in tails and names.qualname(func) == "torch.utils.data.DataLoader":
            yield call


def iterated_params(func: cst.FunctionDef, loops) -> List[list]:
    """[position, name] of the parameters a ``for`` loop of the body iterates: ``for b in p``, or
    ``p`` as a positional argument of the loop's call (``enumerate(p)``, ``zip(p, q)``, two deep)."""
    params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    found = set()
    for loop in loops:
        exprs = [loop.iter]
        for _ in range(2):
            calls = [e for e in exprs if isinstance(e, cst.Call)]
            exprs += [a.value for c in calls for a in c.args if not a.star and a.keyword is None]
        found.update(e.value for e in exprs if isinstance(e, cst.Name) and e.value in params)
    return [[params.index(n), n] for n in sorted(found)]


def drained_params(func: cst.FunctionDef, loops) -> List[list]:
    """``iterated_params`` of the loops that run in full (``in_full``): a one-shot iterator
    handed to one of these parameters is exhausted when the function returns."""
    return iterated_params(func, [loop for loop in loops if in_full(loop)])


def in_full(loop: cst.For) -> bool:
    """No ``break``, ``return`` or ``raise`` of the loop's own body stops it early (a ``break``
    of a loop nested in it stops only that one)."""
    def own(node) -> bool:
        if not isinstance(node, cst.Break):
            return True
        return not any(isinstance(n, (cst.For, cst.While)) and any(b is node for b in iter_subtree(n.body, into_scopes=False))
                       for n in iter_subtree(loop.body, into_scopes=False))
    return not any(isinstance(child, (cst.Break, cst.Return, cst.Raise)) and own(child)
                   for child in iter_subtree(loop.body, into_scopes=False))




def epoch_iterated_results(tree: TreeIndex, names: ModuleNames) -> List[list]:
    """``[f]`` for each function (or class) of another module whose result (``x = f(...)``, ``a, x =
    f(...)``, ``x = (A if c else B)(...)``: both) a ``for`` loop iterates inside another loop of the
    same scope, not under ``no_grad``: re-iterated, epoch by epoch; and ``[f, g, slot]`` when a loop of
    that scope (not under ``no_grad``) hands that result to a function ``g`` at ``slot`` (a position or
    a keyword: ``for epoch ...: train(model, x)``): re-iterated when ``g`` iterates that parameter (the
    index asks ``g``'s ``iterates``)."""
    out = set()
    for _, call in epoch_loop_results(tree, names):
        for func in callee_exprs(call):
            qualified = names.qualname(func)
            if qualified and not qualified.startswith(("builtins.", "torch.", names.modname + ".")):
                out.add((qualified,))
    return [list(entry) for entry in sorted(out | _handed_results(tree, names), key=str)]


def epoch_loop_results(tree: TreeIndex, names: ModuleNames) -> List[tuple]:
    """``(loop, call)`` for each ``for`` loop nested in another loop of its scope, not under
    ``no_grad``, that iterates a name (also as an argument of its iterable's call: ``enumerate(x)``)
    bound in that scope to the result of ``call``."""
    out = []
    for loop in tree.nodes(cst.For):
        nested = False
        for ancestor in tree.ancestors(loop):
            kind = type(ancestor)
            if kind in _SCOPES:
                break
            if kind is cst.With and _no_grad(names, ancestor):
                nested = False
                break
            if kind in (cst.For, cst.While) and loop is not getattr(ancestor, "iter", None):
                nested = True
        if not nested:
            continue
        exprs = [loop.iter]
        exprs += [a.value for a in loop.iter.args if not a.star] if isinstance(loop.iter, cst.Call) else []
        iterated = {e.value for e in exprs if isinstance(e, cst.Name)}
        if not iterated:
            continue
        for assign in tree.scope_nodes(tree.scope_node(loop), cst.Assign):
            if isinstance(assign.value, cst.Call) and set(_assigned_names(assign)) & iterated:
                out.append((loop, assign.value))
    return out


def callee_exprs(call: cst.Call) -> List[cst.BaseExpression]:
    """What ``call`` calls: its name or attribute, or each arm of ``(A if c else B)(...)``."""
    out, pending = [], [call.func]
    while pending:
        func = pending.pop(0)
        if isinstance(func, cst.IfExp):
            pending += [func.body, func.orelse]
        elif isinstance(func, (cst.Name, cst.Attribute)):
            out.append(func)
    return out


def _handed_results(tree: TreeIndex, names: ModuleNames) -> set:
    """(f, g, slot) for ``epoch_iterated_results``."""
    results: dict = {}  # (scope, name) -> the callees of the calls whose result the name is bound to
    for assign in tree.nodes(cst.Assign):
        value = assign.value
        if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
            continue
        names_bound = _assigned_names(assign)
        scope = id(tree.scope_node(assign)) if names_bound else None
        for name in names_bound:
            results.setdefault((scope, name), []).append(value.func)
    out = set()
    bound_names = {name for _, name in results}
    for call in tree.nodes(cst.Call) if results else ():
        if not any(type(a.value) is cst.Name and a.value.value in bound_names for a in call.args):
            continue
        named = [(i, a.value.value) for i, a in enumerate(a for a in call.args if a.keyword is None and not a.star)
                 if isinstance(a.value, cst.Name)] + [(a.keyword.value, a.value.value) for a in call.args
                                                      if a.keyword is not None and isinstance(a.value, cst.Name)]
        scope = id(tree.scope_node(call)) if named else None
        named = [(slot, name) for slot, name in named if (scope, name) in results]
        if not named or not isinstance(call.func, (cst.Name, cst.Attribute)) or not _in_loop(tree, names, call):
            continue
        callee = names.qualname(call.func)
        if not callee or callee.startswith(("builtins.", "torch.")):
            continue
        for slot, name in named:
            for func in results[(scope, name)]:
                qualified = names.qualname(func)
                if qualified and not qualified.startswith(("builtins.", "torch.", names.modname + ".")):
                    out.add((qualified, callee, slot))
    return out


def _assigned_names(assign: cst.Assign) -> List[str]:
    """The names ``x = ...`` or ``a, x = ...`` binds (one level of unpacking)."""
    found = []
    for target in assign.targets:
        elements = [e.value for e in target.target.elements] if isinstance(target.target, (cst.Tuple, cst.List)) else [target.target]
        found += [e.value for e in elements if isinstance(e, cst.Name)]
    return found


def _no_grad(names: ModuleNames, block: cst.With) -> bool:
    """``with torch.no_grad():`` (or ``inference_mode``...)."""
    return any(names.qualname(i.item.func if isinstance(i.item, cst.Call) else i.item) in NO_GRAD
               for i in block.items if isinstance(i.item, (cst.Call, cst.Name, cst.Attribute)))


def _in_loop(tree: TreeIndex, names: ModuleNames, node) -> bool:
    """``node`` runs in the body of a loop of its scope, not under ``no_grad``."""
    for ancestor in tree.ancestors(node):
        kind = type(ancestor)
        if kind in _SCOPES:
            return False
        if kind is cst.With and _no_grad(names, ancestor):
            return False
        if kind in (cst.For, cst.While):
            return True
    return False


def loader_receivers(tree: TreeIndex, names: ModuleNames, same_module: bool = False) -> List[str]:
    """Functions of other modules (and of this one, with ``same_module``) this file calls with
    a name it binds to a ``DataLoader(...)`` as an argument (``train_one_epoch(model, loader)``):
    their files are summarised too."""
    bound = set()
    for call in dataloader_calls(tree, names):
        parent = tree.parent_of(call)
        if isinstance(parent, cst.Assign):
            bound.update(t.target.value for t in parent.targets if isinstance(t.target, cst.Name))
    out = set()
    if not bound:
        return []
    for call in tree.nodes(cst.Call):
        if not any(isinstance(a.value, cst.Name) and a.value.value in bound for a in call.args):
            continue
        if isinstance(call.func, (cst.Name, cst.Attribute)):
            qualified = names.qualname(call.func)
            if qualified and not qualified.startswith(("builtins.", "torch.")) and (
                    same_module or not qualified.startswith(names.modname + ".")):
                out.add(qualified)
    return sorted(out)
