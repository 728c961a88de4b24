"""One fast pass over a libcst tree: parents and nodes grouped by type.

libcst's visitor protocol calls back for every node, whitespace included; that
costs as much as parsing. The rules only need the syntactic nodes, so this walker
follows the dataclass fields that hold them and skips whitespace, brackets and
punctuation (the field table is computed once per node class). It is ~15x faster
than ``Module.visit`` and is the only full traversal a checked file gets.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Type

import libcst as cst

_SKIP_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "header",
        "footer",
        "leading_lines",
        "lines_after_decorators",
        "newline",
        "colon",
        "equal",
        "dot",
        "operator",
        "asynchronous",
        "lbrace",
        "rbrace",
        "lbracket",
        "rbracket",
        "indent",
        "trailing_whitespace",
        "arrow",
        "star",
        "at",
    }
)

_FIELDS: Dict[type, tuple] = {}
_CSTNode = cst.CSTNode


def _fields_of(cls: type) -> tuple:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in _SKIP_FIELDS and not f.name.startswith("whitespace")
        )
        _FIELDS[cls] = names
    return names


class TreeIndex:
    """Parents of every syntactic node, and the nodes of each type in source order."""

    __slots__ = ("parent", "by_type")

    def __init__(self, module: cst.Module) -> None:
        self.parent: Dict[int, cst.CSTNode] = {}
        self.by_type: Dict[type, List[cst.CSTNode]] = {}
        self._walk(module)

    def _walk(self, root: cst.CSTNode) -> None:
        parent = self.parent
        by_type = self.by_type
        fields_of = _fields_of
        CSTNode = _CSTNode
        # Iterative pre-order walk; children are pushed reversed to keep source order.
        stack = [root]
        pop = stack.pop
        push = stack.append
        while stack:
            node = pop()
            cls = type(node)
            bucket = by_type.get(cls)
            if bucket is None:
                by_type[cls] = [node]
            else:
                bucket.append(node)
            children = []
            for name in fields_of(cls):
                value = getattr(node, name)
                if isinstance(value, CSTNode):
                    children.append(value)
                elif type(value) is tuple or type(value) is list:
                    for item in value:
                        if isinstance(item, CSTNode):
                            children.append(item)
            for child in reversed(children):
                parent[id(child)] = node
                push(child)

    def nodes(self, cls: Type[cst.CSTNode]) -> list:
        return self.by_type.get(cls, [])

    def parent_of(self, node: cst.CSTNode):
        return self.parent.get(id(node))

    def ancestors(self, node: cst.CSTNode):
        parent = self.parent
        current = parent.get(id(node))
        while current is not None:
            yield current
            current = parent.get(id(current))


def iter_subtree(node: cst.CSTNode, *, into_scopes: bool = True):
    """Pre-order syntactic nodes under ``node`` (itself included).

    With ``into_scopes=False`` the walk does not enter nested function, lambda
    or class bodies (their defining node itself is still yielded).
    """
    fields_of = _fields_of
    CSTNode = _CSTNode
    stack = [node]
    first = True
    while stack:
        current = stack.pop()
        yield current
        if not into_scopes and not first and isinstance(current, _SCOPE_NODES):
            continue
        first = False
        children = []
        for name in fields_of(type(current)):
            value = getattr(current, name)
            if isinstance(value, CSTNode):
                children.append(value)
            elif type(value) is tuple or type(value) is list:
                for item in value:
                    if isinstance(item, CSTNode):
                        children.append(item)
        stack.extend(reversed(children))


_SCOPE_NODES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
