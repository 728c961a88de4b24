"""Which calls of a function do more than index data in memory (``indexing``): the part
that reads syntax, kept apart so that the project index answers without the parser."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.indexing import METHODS, PANDAS_INDEXERS, cheap
from dslint.semantics.option_guards import test_guards


def costly_call(call: cst.Call, qualified: Optional[str], self_param: Optional[str]) -> Optional[List[str]]:
    """None for a cheap call; else ``[kind, name]``: ``self``/``super`` for a method of the same
    object and ``func`` for a function, both to follow in the project, ``other`` for the rest."""
    func = call.func
    if type(func) is cst.Attribute:
        value = func.value
        if self_param and type(value) is cst.Name and value.value == self_param:
            return ["self", func.attr.value]
        if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == "super":
            return ["super", func.attr.value]
        if qualified is None:
            return None if func.attr.value in METHODS else ["other", func.attr.value]
    if cheap(qualified):
        return None
    return ["func", qualified] if qualified else ["other", ""]


def costly_read(node: cst.CSTNode) -> Optional[List[str]]:
    """A read that is work without a call: a pandas label or position lookup (``df.loc[k, "c"]``,
    ``.iloc``, ``.at``, ``.iat``: tens of microseconds each), or a subscript by a comparison (``df[df["id"]
    == k]``: a scan of a whole column per sample)."""
    if type(node) is cst.Attribute and node.attr.value in PANDAS_INDEXERS:
        return ["other", node.attr.value]
    if type(node) is cst.Subscript and any(
        isinstance(sub, cst.Comparison) for element in node.slice for sub in _slice_values(element)
    ):
        return ["other", "mask"]
    return None


def _slice_values(element: cst.SubscriptElement):
    return [element.slice.value] if isinstance(element.slice, cst.Index) else []


def costly_calls(calls, qualname, self_param: Optional[str], reads=(), parents=None) -> List[List[str]]:
    """The distinct costly calls among ``calls`` (``qualname`` names a call's function), and
    the costly ``reads`` among the attributes and subscripts given. With ``parents`` (node id ->
    parent), a call in a ``raise`` statement is left out: it builds the error of a sample that
    fails (``raise ValueError(f"bad task {t}")``), no work of one that loads; and each entry ends
    with the attribute of ``self`` whose ``if`` guards it (``_guard``), or "", so that an instance
    built without that part can be told apart (``indexing.indexes_only``'s ``unset``)."""
    if parents is not None:
        calls = [c for c in calls if not _raised(c, parents)]
    found = set()
    for node, entry in [(c, costly_call(c, qualname(c.func), self_param)) for c in calls] + [(r, costly_read(r)) for r in reads]:
        if entry:
            found.add((*entry, _guard(node, parents, self_param) if parents is not None else ""))
    return [list(entry) for entry in sorted(found)]


def _guard(node, parents, self_param: Optional[str]) -> str:
    """``X`` when ``node`` runs only under ``if self.X:`` (or ``if self.X is not None:``, also one
    term of an ``and``), the nearest ``if`` around it in its function: an optional part (a
    transform) the instance may not have; "" otherwise (``option_guards.test_guards``)."""
    previous, node = node, parents.get(id(node))
    while node is not None and not isinstance(node, (cst.FunctionDef, cst.Lambda)):
        if isinstance(node, cst.If):
            if previous is not node.body:
                return ""
            return next((name for kind, name in test_guards(node.test, self_param) if kind == "self"), "")
        previous, node = node, parents.get(id(node))
    return ""


def _raised(node, parents) -> bool:
    while node is not None and not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        if isinstance(node, cst.Raise):
            return True
        node = parents.get(id(node))
    return False


__all__ = ["costly_call", "costly_calls", "costly_read"]
