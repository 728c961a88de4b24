"""What the callers of a loader builder pass it, in this file and in the project's other files.

A function that builds a DataLoader from its own parameters

    def create_loader(ds, batch_size, sampler=None, shuffle=True):
        return DataLoader(ds, batch_size=batch_size, sampler=sampler, shuffle=shuffle)

gets its options from its callers: ``create_loader(ds, 8, DistributedSampler(ds))`` in a
training script builds a loader with a sampler *and* the default ``shuffle=True``. The values
at the loader call are only "possible" there; at each call site they are what that one call
gives, so options that must agree (``sampler`` and ``shuffle``) are judged call by call, not
as the union of every caller's values.

The calls in other files come from the project index (``caller_index``, through
``ctx.view.caller_arguments``). ``builder_calls(ctx, bound, names)``: when each option ``names`` of the loader
call ``bound`` is a parameter of the enclosing function that the function never rebinds,
one ``(where, {option: value})`` per call of that function: calls in this file (by its name,
or ``self.m(...)`` in its class: ``call_sites``), then calls in other files (a module-level
function only). A value is the literal passed, the parameter's literal default when the call
leaves it out, or ``PASSED`` for any other expression the call passes (same file: unless
every value it can take is ``None``). Calls that hide where an argument is (``*args``, a
``**`` dict) are left out.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.call_sites import call_sites
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.values import possible

PASSED = "<passed>"  # an expression the call passes that is not a literal (it may be None)

__all__ = ["PASSED", "builder_calls"]


# ----------------------------------------------------------------------- file phase


def builder_calls(ctx, bound, names) -> List[Tuple[str, Dict[str, object]]]:
    """``(where, {option: value})`` per call of the builder (see the module docstring);
    empty when some option is not a parameter the builder passes on unchanged."""
    func = ctx.enclosing_function(bound.call, through_lambdas=False)
    if func is None:
        return []
    method = ctx.method_class(func) is not None
    positional = [p for p in (*func.params.posonly_params, *func.params.params)][1 if method else 0:]
    params = {}
    for name in names:
        expr = bound.expr(name)
        param = _own_parameter(ctx, func, expr)
        if param is None:
            return []
        slot = next((i for i, p in enumerate(positional) if p is param), None)
        params[name] = (param, slot)
    out = list(_same_file(ctx, func, params))
    if not method and ctx.tree.scope_node(func) is None:
        qual = func.name.value
        for path, caller, args, keywords in ctx.view.caller_arguments(qual):
            if path == ctx.view.path:
                continue  # (this file's calls are read above, with their expressions)
            values = _recorded(params, args, keywords)
            if values is not None:
                out.append((f"`{caller}` in `{path}`", values))
    return out


def _own_parameter(ctx, func, expr) -> Optional[cst.Param]:
    if not isinstance(expr, cst.Name) or scope_assignments(ctx.tree, func, expr.value) != []:
        return None
    params = func.params
    return next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == expr.value), None)


def _same_file(ctx, func, params):
    names = list(params)
    sites = {name: {id(call): passed for call, passed in call_sites(ctx, func, params[name][0])} for name in names}
    for call, _ in call_sites(ctx, func, params[names[0]][0]):
        if any(arg.star for arg in call.args):
            continue
        values = {}
        for name in names:
            passed = sites[name].get(id(call))
            if passed is None:
                values[name] = _default(params[name][0])
            elif ctx.literal(passed) is not UNKNOWN:
                values[name] = ctx.literal(passed)
            else:
                found = possible(ctx, passed)
                none = found.complete and found.values and all(v.value is None for v in found.values)
                values[name] = None if none else PASSED
        if all(v is not UNKNOWN for v in values.values()):
            yield f"the call on line {ctx.line(call)}", values


def _recorded(params, positional, keywords) -> Optional[Dict[str, object]]:
    if positional is None or "**" in keywords:
        return None
    values = {}
    for name, (param, slot) in params.items():
        if param.name.value in keywords:
            value = keywords[param.name.value]
        elif slot is not None and slot < len(positional):
            value = positional[slot]
        else:
            value = [_default(param)]
        if value == "?":
            value = [PASSED]
        if value[0] is UNKNOWN:
            return None
        values[name] = value[0]
    return values


def _default(param: cst.Param):
    """The literal default of ``param``; UNKNOWN without one (the call must pass it) or for
    any other expression."""
    default = param.default
    if isinstance(default, cst.Name) and default.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[default.value]
    if isinstance(default, (cst.Integer, cst.SimpleString)):
        return default.evaluated_value
    return UNKNOWN
