"""Is a ``np.load(path)`` an ``.npz`` archive, told by how its result is read?

``np.load`` returns an array for ``.npy`` files and an ``NpzFile`` for ``.npz`` archives;
the archive keeps its zip file open until it is closed. When the path does not show the
suffix, the reads do: only an ``NpzFile`` is indexed by a field name, lists its ``files`` or
has ``keys()``. This module follows an archive kept on ``self`` (``self.data = np.load(p)``:
``self.data["arr_" + str(i)]``, ``self.data.keys()`` in any method of the class), in a local
name (read the same way in its function), or in a list on ``self`` (``self.data = [np.load(p)
for p in paths]``) to the class's reads of its elements by a string key (``d["image"] for d in
self.data``, ``self.data[i]["image"]``).
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


def _string_key(node: cst.Subscript) -> bool:
    """``x["image"]``, ``x[f"arr_{i}"]``, ``x["arr_" + str(i)]``, ``x["arr_%d" % i]``: a key that is a string."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return False
    key = node.slice[0].slice.value
    strings = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
    if isinstance(key, cst.BinaryOperation) and isinstance(key.operator, (cst.Add, cst.Modulo)):
        return isinstance(key.left, strings) or (isinstance(key.operator, cst.Add) and isinstance(key.right, strings))
    return isinstance(key, strings)


def _archive_read(ctx, node: cst.CSTNode) -> bool:
    """``node`` (the archive) is read as only an ``NpzFile`` is: a string key, ``.files``, ``.keys()``."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.Subscript) and parent.value is node:
        return _string_key(parent)
    if isinstance(parent, cst.Attribute) and parent.value is node:
        return parent.attr.value == "files" or (parent.attr.value == "keys" and isinstance(ctx.parent(parent), cst.Call))
    return False


def _kept_directly(ctx, call: cst.Call) -> bool:
    """``self.x = call`` read as an archive in a method of the class, or ``x = call`` in its function."""
    assign = ctx.parent(call)
    if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1):
        return False
    target = assign.targets[0].target
    method = next((a for a in ctx.ancestors(assign) if isinstance(a, cst.FunctionDef)), None)
    if isinstance(target, cst.Name):
        scope = method.body if method is not None else ctx.module
        return any(isinstance(node, cst.Name) and node.value == target.value and node is not target
                   and _archive_read(ctx, node) for node in iter_subtree(scope, into_scopes=False))
    attr = self_attr(target, self_name(method)) if method is not None else None
    cls = next((a for a in ctx.ancestors(method) if isinstance(a, cst.ClassDef)), None) if attr else None
    if cls is None:
        return False
    for node in iter_subtree(cls.body, into_scopes=True):
        if isinstance(node, cst.Attribute) and node.attr.value == attr and _archive_read(ctx, node):
            owner = next((a for a in ctx.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
            if owner is not None and self_attr(node, self_name(owner)) == attr:
                return True
    return False


def read_by_field(ctx, call: cst.Call) -> bool:
    """The archives ``call`` loads are read as archives: kept directly on ``self`` or in a local
    name, or in a list on ``self`` whose elements the class reads by field name."""
    if _kept_directly(ctx, call):
        return True
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
