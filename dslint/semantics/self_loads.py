"""The attributes a method reads on ``self``: a summary fact (``self_loads``).

``self.<attr>`` anywhere in the body (stores too: the fact errs towards "read"), in functions
and lambdas nested in it, and ``getattr(self, "attr")``; ``ANY`` (``"*"``) when the method hands
``self`` on where anything may read it (``f(self)``, ``other = self``, ``getattr(self, name)``,
``vars(self)``). ``dslint.semantics.attr_reads`` answers the cross-file question from it.

API: ``self_loads(buckets, self_param, parent) -> list``.
"""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.attr_reads import ANY
from dslint.semantics.walk import iter_subtree

# builtins that take ``self`` without reading its attributes by name
_PLAIN = frozenset({"len", "isinstance", "type", "id", "hash", "repr", "str", "super", "issubclass", "callable"})
# where a bare ``self`` reads nothing by name: ``self[i]``, ``for x in self``, ``return self``, ``self is x``
_INERT = (cst.Subscript, cst.For, cst.Return, cst.Comparison, cst.ComparisonTarget, cst.UnaryOperation, cst.If,
          cst.Yield)


def self_loads(buckets: dict, self_param, parent: dict) -> List[str]:
    """The attributes the method whose body ``buckets`` holds reads on ``self`` (``ANY``: may read any)."""
    if not self_param:
        return []
    found = set()
    for node in buckets.get(cst.Attribute, ()):
        owner = node.value
        if type(owner) is cst.Name and owner.value == self_param:
            found.add(node.attr.value)
    for node in buckets.get(cst.Name, ()):
        if node.value == self_param and _hands_on(node, parent.get(id(node)), parent, found):
            found.add(ANY)
    for scope in (*buckets.get(cst.FunctionDef, ()), *buckets.get(cst.Lambda, ())):
        for node in iter_subtree(scope):
            if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == self_param:
                found.add(node.attr.value)
            elif type(node) is cst.Name and node.value == self_param:
                found.add(ANY)  # (a nested scope handing ``self`` on: not followed)
    return sorted(found)


def _hands_on(name: cst.Name, up, parent: dict, found: set) -> bool:
    if up is None or (type(up) is cst.Attribute and up.value is name) or isinstance(up, _INERT):
        return False
    if type(up) is cst.Arg:
        call = parent.get(id(up))
        func = call.func if type(call) is cst.Call else None
        if type(func) is cst.Name and func.value in _PLAIN:
            return False
        if type(func) is cst.Name and func.value in ("getattr", "hasattr") and call.args[0] is up and len(call.args) > 1:
            key = call.args[1].value
            if type(key) is cst.SimpleString and key.value[:1] in "'\"":
                found.add(key.value[1:-1])
                return False
    return True
