"""Is a ``np.load(path)`` an ``.npz`` archive, told by how its result is read?

``np.load`` returns an array for ``.npy`` files and an ``NpzFile`` for ``.npz`` archives;
the archive keeps its zip file open until it is closed. When the path does not show the
suffix, the reads do: only an ``NpzFile`` is indexed by a field name. This module follows
an archive kept in a list on ``self`` (``self.data = [np.load(p) for p in paths]``) to the
class's reads of its elements by a string key (``d["image"] for d in self.data``,
``self.data[i]["image"]``).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree


def _kept_list_attribute(ctx, call: cst.Call) -> Optional[tuple]:
    """(method, attribute) when ``call`` is the element of a list comprehension assigned to
    ``self.<attribute>`` in a method."""
    comp = ctx.parent(call)
    if not (isinstance(comp, cst.ListComp) and comp.elt is call):
        return None
    assign = ctx.parent(comp)
    if not (isinstance(assign, cst.Assign) and assign.value is comp and len(assign.targets) == 1):
        return None
    method = next((a for a in ctx.ancestors(assign) if isinstance(a, cst.FunctionDef)), None)
    attr = self_attr(assign.targets[0].target, self_name(method)) if method is not None else None
    return (method, attr) if attr else None


def _field_key(node: cst.Subscript) -> bool:
    elements = node.slice
    return (
        len(elements) == 1
        and isinstance(elements[0].slice, cst.Index)
        and isinstance(elements[0].slice.value, cst.SimpleString)
    )


def read_by_field(ctx, call: cst.Call) -> bool:
    """The archives ``call`` loads into a list on ``self`` are read by field name in the class."""
    kept = _kept_list_attribute(ctx, call)
    if kept is None:
        return False
    method, attr = kept
    cls = next((a for a in ctx.ancestors(method) if isinstance(a, cst.ClassDef)), None)
    if cls is None:
        return False
    elements = set()  # names that iterate ``self.<attr>``
    for node in iter_subtree(cls.body, into_scopes=True):
        if isinstance(node, (cst.For, cst.CompFor)) and isinstance(node.target, cst.Name):
            owner = next((a for a in ctx.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
            if owner is not None and self_attr(node.iter, self_name(owner)) == attr:
                elements.add(node.target.value)
    for node in iter_subtree(cls.body, into_scopes=True):
        if not (isinstance(node, cst.Subscript) and _field_key(node)):
            continue
        value = node.value
        if isinstance(value, cst.Name) and value.value in elements:
            return True
        if isinstance(value, cst.Subscript):
            owner = next((a for a in ctx.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
            if owner is not None and self_attr(value.value, self_name(owner)) == attr:
                return True
    return False


__all__ = ["read_by_field"]
