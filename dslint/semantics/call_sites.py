"""The calls of a function in its own file, and what each passes for one of its parameters.

``call_sites(ctx, func, param)``: every call of ``func`` in the file, by its name where that
name means this function (a module-level function, or one nested in the scope of the call),
or ``self.name(...)``/``cls.name(...)`` inside its class; with the expression each passes for
``param`` (by keyword or position), None where that is not known (after a ``*`` argument).

``other_file_literals(ctx, func, param)``: the literals the calls of the project's other files pass
for ``param`` of a module-level function (the summaries' ``call_args``, a ``**`` dict the caller builds
included: ``call_facts.passed_arguments``).

``called_function(ctx, call)``: the other way round, the module-level function of this file a
call runs by its name (its one definition, the name meaning it as ``call_sites`` requires).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst


def call_sites(ctx, func: cst.FunctionDef, param: cst.Param):
    """(call, the expression passed for ``param`` or None) for every call of ``func`` in
    this file: by its name where that name means this function, or ``self.name(...)``
    inside its class."""
    return ctx.memo(("values.call_sites", id(func), param.name.value), lambda: list(_find_call_sites(ctx, func, param)))


def called_function(ctx, call: cst.Call) -> Optional[cst.FunctionDef]:
    """The module-level function of this file that ``call`` names, when it has one definition."""
    if not isinstance(call.func, cst.Name):
        return None

    def compute():
        by_name = {}
        for func in ctx.nodes(cst.FunctionDef):
            if isinstance(ctx.parent(func), cst.Module):
                by_name.setdefault(func.name.value, []).append(func)
        return by_name
    defs = ctx.memo(("call_sites.module_functions",), compute).get(call.func.value, [])
    if len(defs) != 1 or ctx.call_name(call) != f"{ctx.names.modname}.{call.func.value}":
        return None
    return defs[0]


def other_file_literals(ctx, func: cst.FunctionDef, param: cst.Param) -> List[Tuple[str, object]]:
    """(`caller` in `path`, literal) for each call of the module-level function ``func`` in another file
    of the project that passes a literal for ``param`` (by keyword or position; not a call leaving it out)."""
    if ctx.method_class(func) is not None or ctx.tree.scope_node(func) is not None:
        return []
    params = func.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    slot = positional.index(param.name.value) if param.name.value in positional else None
    found = []
    for path, caller, args, keywords in ctx.view.caller_arguments(func.name.value):
        if path == ctx.view.path:
            continue  # (this file's calls: ``call_sites``, with their expressions)
        value = keywords.get(param.name.value)
        if value is None and args is not None and slot is not None and slot < len(args):
            value = args[slot]
        if isinstance(value, list):
            found.append((f"`{caller}` in `{path}`", value[0]))
    return found


def _find_call_sites(ctx, func: cst.FunctionDef, param: cst.Param):
    name = func.name.value
    owner = ctx.method_class(func)
    params = func.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    if owner is not None and positional:
        positional = positional[1:]  # self / cls
    qualified = f"{ctx.names.modname}.{name}" if owner is None and ctx.tree.scope_node(func) is None else None
    for call in ctx.nodes(cst.Call):
        target = call.func
        if owner is not None:
            if not (isinstance(target, cst.Attribute) and target.attr.value == name and isinstance(target.value, cst.Name)
                    and target.value.value in ("self", "cls")):
                continue
            if ctx.dataset_class_of(call) is not owner and _enclosing_class(ctx, call) is not owner:
                continue
        elif qualified is not None:
            if not (isinstance(target, cst.Name) and target.value == name and ctx.call_name(call) == qualified):
                continue
        else:
            if not (isinstance(target, cst.Name) and target.value == name
                    and ctx.tree.scope_node(call) is not None and _encloses(ctx, ctx.tree.scope_node(func), call)):
                continue
        yield call, _passed(call, positional, param.name.value)


def _passed(call: cst.Call, positional: List[str], name: str) -> Optional[cst.CSTNode]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    index = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if index < len(positional) and positional[index] == name:
                return arg.value
            index += 1
    return None


def _enclosing_class(ctx, node) -> Optional[cst.ClassDef]:
    func = ctx.enclosing_function(node)
    return ctx.method_class(func) if func is not None else None


def _encloses(ctx, scope, node) -> bool:
    return scope is None or any(a is scope for a in ctx.ancestors(node))


__all__ = ["call_sites", "called_function", "other_file_literals"]
