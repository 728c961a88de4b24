"""Functions of a file that hand an open handle to their caller.

``def load(p): return np.load(p, mmap_mode="r")`` or ``def read(self, name): m =
np.memmap(...); return m, meta`` open a handle and return it unloaded: the caller
owns it, and what becomes of it is decided where the function is called. A call
to such a function is an opener for the handle rules, with the kind of the handle
it returns and, for a tuple, its position (``m, meta = self.read(name)``).

The checked file's own functions are followed here: a module-level function called
by name, and a method called on ``self`` (looked up along the class's bases in this
file). Other files' functions come from their summaries (``handle_exports``, asked
through ``ctx.view``): a function imported from another module, and a method called
on an object whose class is known (``held_classes``: ``self.reader.read(p)`` where
``__init__`` builds the reader, is handed one, or is annotated with its class).
A function qualifies when every ``return`` in it gives back a handle of the
same kind at the same position (both arms of a conditional count), that it opened
and did not close or load, itself or through another such function of the file
(a generator, a function that may return something else, or one with no
``return`` of a handle does not).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from dslint.semantics import lifetimes as lt
from dslint.semantics.classes import called_method
from dslint.semantics.held_classes import receiver_class
from dslint.semantics.regions import self_name
from dslint.semantics.scopes import ScopeBindings
from dslint.semantics.walk import iter_subtree, plain_returns

# What a function returns: (the kind of the handle, its index in a returned tuple or None, the
# qualified name of the call that opened it, or None when the returns differ or it is not known).
Returned = Tuple[str, Optional[int], Optional[str]]


def returned_handle(ctx, func: cst.FunctionDef) -> Optional[Returned]:
    """(kind, position, opener) when every ``return`` of ``func`` gives back a handle it opened."""
    memo = ctx.memo(("handle_returns.func",), dict)
    if id(func) not in memo:
        memo[id(func)] = None  # (a function that returns its own result opens nothing)
        memo[id(func)] = _returned_handle(ctx, func)
    return memo[id(func)]


def _returned_handle(ctx, func: cst.FunctionDef) -> Optional[Returned]:
    returns = plain_returns(func, ctx.tree)
    if returns is None:
        return None
    found: List[Returned] = []
    for node in returns:
        answer = _handle_in(ctx, node.value) if node.value is not None else None
        if answer is None:
            return None
        found.append(answer)
    if not found or any(answer[:2] != found[0][:2] for answer in found):
        return None
    openers = {answer[2] for answer in found}
    return found[0][0], found[0][1], openers.pop() if len(openers) == 1 else None


def _handle_in(ctx, value) -> Optional[Returned]:
    if isinstance(value, cst.Tuple):
        hits = [(i, _opened_here(ctx, e.value)) for i, e in enumerate(value.elements) if isinstance(e, cst.Element)]
        hits = [(i, found) for i, found in hits if found is not None]
        if len(hits) == 1 and len(value.elements) > 1:
            return hits[0][1][0], hits[0][0], hits[0][1][1]
        return None
    found = _opened_here(ctx, value)
    return (found[0], None, found[1]) if found is not None else None


def _opened_here(ctx, expr) -> Optional[Tuple[str, Optional[str]]]:
    """(kind, opener) of the handle ``expr`` is: an opener call returned as is, or a name bound
    once in the function to one whose fate is to be returned (not closed, not loaded),
    or a conditional whose two arms are handles of one kind (``gzip.open(p) if gz else open(p)``)."""
    if isinstance(expr, cst.IfExp):
        arms = [_opened_here(ctx, expr.body), _opened_here(ctx, expr.orelse)]
        if None in arms or arms[0][0] != arms[1][0]:
            return None
        return arms[0][0], arms[0][1] if arms[0][1] == arms[1][1] else None
    if isinstance(expr, cst.Name):
        value = ctx.single_assignment(expr)
        if value is None:
            return _unpacked_handle(ctx, expr)
        if not isinstance(value, cst.Call) or ctx.enclosing_function(value) is not ctx.enclosing_function(expr):
            return None
        expr = value
    if not isinstance(expr, cst.Call):
        return None
    kind, opener = lt.opener_kind(ctx, expr), None
    if kind is not None:
        opener = lt.opener_name(ctx, expr)
    else:
        # a call to another such function of the file, whose handle is passed on whole
        callee = _called_function(ctx, expr, None)
        answer = returned_handle(ctx, callee) if callee is not None else None
        kind, opener = (answer[0], answer[2]) if answer is not None and answer[1] is None else (None, None)
    if kind is None or lt.fate(ctx, expr).kind != lt.RETURNED:
        return None
    return kind, opener


def _unpacked_handle(ctx, name: cst.Name) -> Optional[Tuple[str, Optional[str]]]:
    """(kind, opener) of the handle a local holds that is bound only to ``None`` and to the element, at the
    handle's position, of a tuple a handle-returning function gives back (``env, keys = None,
    None`` then ``env, keys = _open_lmdb(root)``), and never closed in the function."""
    func = ctx.enclosing_function(name, through_lambdas=False)
    if func is None:
        return None
    bindings = ctx.memo(("handle_returns.scopes",), lambda: ScopeBindings(ctx)).bindings(func).get(name.value, ())
    kinds = set()
    for binding in bindings:
        if binding.kind != "value":
            return None  # a parameter, a loop or ``with`` target, ``+=``, ``del``...: not followed
        value, position = binding.value, binding.index
        if position is not None and isinstance(value, cst.Tuple):
            value = value.elements[position].value if position < len(value.elements) else None
            position = None
        if isinstance(value, cst.Name) and value.value == "None":
            continue
        answer = _call_returns(ctx, value) if isinstance(value, cst.Call) else None
        if answer is None or answer[1] != position:
            return None
        kinds.add((answer[0], answer[2]))
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "close" \
                and isinstance(node.func.value, cst.Name) and node.func.value.value == name.value:
            return None
    return kinds.pop() if len(kinds) == 1 else None


def _call_returns(ctx, call: cst.Call) -> Optional[Returned]:
    """What a call of a handle-returning function of the file, or of another file, returns."""
    callee = _called_function(ctx, call, None)
    if callee is not None:
        return returned_handle(ctx, callee) if not any(a is callee for a in ctx.ancestors(call)) else None
    func = call.func
    tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
    return _project_answer(ctx, call) if tail in ctx.view.handle_function_names() else None


def helper_calls(ctx) -> Dict[int, Tuple[cst.Call, str, Optional[int], str, Optional[str]]]:
    """id(call) -> (call, kind, position, the helper's name, the opener's qualified name or None)
    for every call in the file to a function of the project that returns a handle."""
    return ctx.memo(("handle_returns.calls",), lambda: _helper_calls(ctx))


def returning_functions(ctx) -> List[Tuple[cst.FunctionDef, Returned]]:
    """(function, (kind, position)) for the functions of the file that return a handle
    they opened (the candidates: a function with a ``return`` of a handle)."""

    def compute():
        out: List[Tuple[cst.FunctionDef, Returned]] = []
        for ret in ctx.nodes(cst.Return):
            func = ctx.enclosing_function(ret, through_lambdas=False)
            if func is None or ret.value is None or any(f is func for f, _ in out) or _handle_in(ctx, ret.value) is None:
                continue
            answer = returned_handle(ctx, func)
            if answer is not None:
                out.append((func, answer))
        return out

    return ctx.memo(("handle_returns.functions",), compute)


def _helper_calls(ctx):
    candidates: Dict[str, List[cst.FunctionDef]] = {}
    for func, _ in returning_functions(ctx):
        candidates.setdefault(func.name.value, []).append(func)
    # the names of the project's functions and methods that return a handle (other files)
    elsewhere = set(ctx.view.handle_function_names())
    found = {}
    if not candidates and not elsewhere:
        return found
    for call in ctx.nodes(cst.Call):
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        target = _called_function(ctx, call, candidates[tail]) if tail in candidates else None
        if target is None:
            if tail in elsewhere:
                answer = _project_answer(ctx, call)
                if answer is not None:
                    found[id(call)] = (call, answer[0], answer[1], tail, answer[2])
            continue
        if any(a is target for a in ctx.ancestors(call)):
            continue  # (a recursive call is not a new handle)
        answer = returned_handle(ctx, target)
        found[id(call)] = (call, answer[0], answer[1], target.name.value, answer[2])
    return found


def _project_answer(ctx, call: cst.Call) -> Optional[Returned]:
    """What a call of a project function or method returns, by the project's summaries:
    ``load(p)`` / ``io.load(p)`` imported from another module, or ``self.reader.read(p)``
    / ``reader.read(p)`` on an object whose class ``held_classes`` knows."""
    func = call.func
    qualified = ctx.call_name(call)
    if qualified is None and isinstance(func, cst.Attribute):
        owner = receiver_class(ctx, func.value)
        qualified = f"{owner}.{func.attr.value}" if owner is not None else None
    if qualified is None or qualified.startswith("builtins."):
        return None
    if isinstance(func, cst.Name) and qualified.startswith(f"{ctx.names.modname}."):
        return None  # (this file's own function: answered above)
    answer = ctx.view.returned_handle(qualified)
    return (answer[0], answer[1], answer[2] if len(answer) > 2 else None) if answer is not None else None


def _called_function(ctx, call: cst.Call, named) -> Optional[cst.FunctionDef]:
    """The function of ``named`` (this file's candidates with the call's name; None: any
    function of the file) that the call runs."""
    func = call.func
    if named is None:
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        named = _functions_named(ctx).get(tail, [])
    if isinstance(func, cst.Name):
        defs = [f for f in named if isinstance(ctx.parent(f), cst.Module)]
        if len(defs) != 1 or ctx.qualname(func) != f"{ctx.names.modname}.{func.value}":
            return None
        return defs[0]
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        method = ctx.enclosing_function(call)
        while method is not None and ctx.method_class(method) is None:
            method = ctx.enclosing_function(method)
        if method is None or func.value.value != self_name(method):
            return None
        found = called_method(ctx, ctx.method_class(method), call, self_name(method))
        return found if any(found is f for f in named) else None
    return None


def _functions_named(ctx) -> Dict[str, List[cst.FunctionDef]]:
    def compute():
        out: Dict[str, List[cst.FunctionDef]] = {}
        for func in ctx.nodes(cst.FunctionDef):
            out.setdefault(func.name.value, []).append(func)
        return out

    return ctx.memo(("handle_returns.named",), compute)
