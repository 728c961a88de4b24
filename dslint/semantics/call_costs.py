"""Which calls of a function do more than index data in memory (``indexing``): the part
that reads syntax, kept apart so that the project index answers without the parser."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.indexing import METHODS, PANDAS_INDEXERS, cheap


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
    fails (``raise ValueError(f"bad task {t}")``), no work of one that loads."""
    if parents is not None:
        calls = [c for c in calls if not _raised(c, parents)]
    found = {tuple(entry) for entry in (costly_call(c, qualname(c.func), self_param) for c in calls) if entry}
    found.update(tuple(entry) for entry in map(costly_read, reads) if entry)
    return [list(entry) for entry in sorted(found)]


def _raised(node, parents) -> bool:
    while node is not None and not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        if isinstance(node, cst.Raise):
            return True
        node = parents.get(id(node))
    return False


__all__ = ["costly_call", "costly_calls", "costly_read"]
