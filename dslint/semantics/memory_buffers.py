"""Which expressions are in-memory buffers (``io.BytesIO``/``StringIO``), holding no descriptor.

``Image.open(buf)`` of a buffer opens no file: nothing is left to close or to warn
about. A buffer is a ``BytesIO(...)`` call, a name bound only to such calls in its
function (``memory_source`` in the handle rules), or an element of a container the
instance keeps on ``self`` when every value the class ever puts in it is one
(``self.blobs.append(io.BytesIO(f.read()))`` in ``__init__``, ``Image.open(
self.blobs[i])`` in ``__getitem__``: a cache of compressed bytes).
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.classes import local_mro, methods
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree

BUFFERS = ("BytesIO", "StringIO")
_ADDERS = frozenset({"append", "insert", "appendleft"})


def buffer_call(ctx, expr) -> bool:
    if not isinstance(expr, cst.Call):
        return False
    name = ctx.call_name(expr) or ctx.code(expr.func)
    return name.rsplit(".", 1)[-1] in BUFFERS


def self_buffer_element(ctx, expr) -> bool:
    """``self.attr[k]`` where every value the class stores in ``self.attr`` is a buffer."""
    if not isinstance(expr, cst.Subscript):
        return False
    func = ctx.enclosing_function(expr)
    cls = ctx.method_class(func) if func is not None else None
    attr = self_attr(expr.value, self_name(func)) if cls is not None else None
    if attr is None:
        return False
    values = _element_values(ctx, cls, attr)
    return bool(values) and all(buffer_call(ctx, v) for v in values)


def _element_values(ctx, cls: cst.ClassDef, attr: str) -> Optional[List[cst.CSTNode]]:
    """Every element value the class (and its bases of this file) stores in ``self.attr``;
    None when it is also given a value that is not an empty or literal container."""
    found: List[cst.CSTNode] = []
    for owner in local_mro(ctx, cls):
        for method in methods(owner).values():
            selfp = self_name(method)
            for node in iter_subtree(method.body, into_scopes=False):
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                    if self_attr(node.func.value, selfp) != attr:
                        continue
                    if node.func.attr.value in _ADDERS and node.args:
                        found.append(node.args[-1].value)
                    elif node.func.attr.value not in ("clear", "pop", "index", "count", "__len__"):
                        return None
                elif isinstance(node, cst.Assign):
                    for target in node.targets:
                        where = target.target
                        if self_attr(where, selfp) == attr:
                            if not isinstance(node.value, (cst.List, cst.ListComp)):
                                return None
                            found.extend(_display_values(node.value))
                        elif isinstance(where, cst.Subscript) and self_attr(where.value, selfp) == attr:
                            found.append(node.value)
                elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and self_attr(node.target, selfp) == attr:
                    return None
    return found


def _display_values(value) -> List[cst.CSTNode]:
    if isinstance(value, cst.ListComp):
        return [value.elt]
    return [e.value for e in value.elements]
