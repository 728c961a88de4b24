"""Does construction code drop what a helper of ``__init__`` kept on ``self``?

``instance_state.dropped_in_init`` reads one function: after the store, it closes,
deletes or replaces ``self.<attr>``. Construction code is often split into helpers: a
``_connect()`` that opens a database and keeps it on ``self``, called by ``__init__`` (or by
another helper), which then calls ``_close()`` once it has read what it needed. The handle
never reaches the workers.

``dropped_by_construction(ctx, cls, func, self_param, attr, site, methods)``: after ``site`` in
``func``, construction code drops ``self.<attr>``:

- ``func`` itself does (``dropped_in_init``);
- ``func`` later calls a method of the class (``self.m()``, in its own block or an enclosing one)
  whose body, at its top level, closes or stores ``self.<attr>``
  (``if self.db is not None: self.db.close()`` then ``self.db = None``);
- ``func`` is a helper (not ``__init__``) and every call of it in the class's construction
  functions is followed by such a drop in the caller, at any depth (3 callers up).
"""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.classes import called_method, dataset_inits
from dslint.semantics.init_code import init_helpers
from dslint.semantics.instance_state import dropped_in_init, is_store
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree

__all__ = ["dropped_by_construction"]

MAX_CALLERS = 3  #: construction functions followed up from a helper


def dropped_by_construction(ctx, cls, func, self_param: str, attr: str, site, methods=("close",), _depth: int = 0) -> bool:
    """See the module docstring."""
    if dropped_in_init(ctx, func, self_param, attr, site, methods) or _drop_called_after(ctx, cls, func, self_param, attr, site, methods):
        return True
    if func.name.value == "__init__" or _depth >= MAX_CALLERS:
        return False
    sites = list(_calls_of(ctx, cls, func))
    return bool(sites) and all(
        dropped_by_construction(ctx, cls, caller, self_name(caller) or self_param, attr, call, methods, _depth + 1)
        for caller, call in sites
    )


def _construction_functions(ctx, cls) -> List[cst.FunctionDef]:
    for klass, init, _ in dataset_inits(ctx):
        if klass is cls:
            return [init, *init_helpers(ctx, cls, init)]
    return []


def _calls_of(ctx, cls, func):
    """(construction function, ``self.<func>(...)`` call in it) of the class."""
    for caller in _construction_functions(ctx, cls):
        selfp = self_name(caller)
        for node in iter_subtree(caller.body, into_scopes=False):
            if isinstance(node, cst.Call) and called_method(ctx, cls, node, selfp) is func:
                yield caller, node


def _drop_called_after(ctx, cls, func, self_param: str, attr: str, site, methods) -> bool:
    """A statement after ``site``'s statement, in its block or an enclosing block of ``func``,
    is a call ``self.m()`` of a method that drops the attribute at its top level."""
    child = site
    for ancestor in ctx.ancestors(site):
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            body = list(ancestor.body)
            index = next((i for i, s in enumerate(body) if s is child), None)
            for statement in body[index + 1:] if index is not None else ():
                if _calls_dropper(ctx, cls, statement, self_param, attr, methods):
                    return True
        if ancestor is func:
            return False
        child = ancestor
    return False


def _calls_dropper(ctx, cls, statement, self_param: str, attr: str, methods) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        call = small.value if isinstance(small, cst.Expr) else None
        method = called_method(ctx, cls, call, self_param) if isinstance(call, cst.Call) and not call.args else None
        if method is not None and _drops_at_top(ctx, method, attr, methods):
            return True
    return False


def _drops_at_top(ctx, method, attr: str, methods) -> bool:
    """The method's own statements (not under ``if``/loops/``try``) store ``self.<attr>`` or call a
    closing method on it."""
    selfp = self_name(method)
    if not selfp or not isinstance(method.body, cst.IndentedBlock):
        return False
    for statement in method.body.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for node in iter_subtree(statement, into_scopes=False):
            if self_attr(node, selfp) != attr:
                continue
            if is_store(ctx, node):
                return True
            parent = ctx.parent(node)
            if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in methods \
                    and isinstance(ctx.parent(parent), cst.Call):
                return True
    return False
