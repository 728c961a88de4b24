"""Other modules' classes and callables whose definitions this file's facts depend on, so that
the engine summarises their files too (``references`` of the summary)."""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex

_HOLDERS = (cst.List, cst.Tuple, cst.Element, cst.Arg)


def kept_objects(tree: TreeIndex, names: ModuleNames) -> List[str]:
    """Classes of other modules whose instances a class keeps (``self.reader = Reader(root)``):
    their methods may hand back what the handle rules follow (``handle_exports``); and what a
    lambda is handed to (``Pipeline([lambda x: x])``, also in a list): whether that object keeps
    it on ``self`` decides if a dataset holding the object can be pickled (``unpicklable``)."""
    out = []
    for assign in tree.nodes(cst.Assign):
        value = assign.value
        if type(value) is not cst.Call or not any(
            type(t.target) is cst.Attribute and type(t.target.value) is cst.Name and t.target.value.value == "self"
            for t in assign.targets
        ):
            continue
        out.append(value)
    for node in tree.nodes(cst.Lambda):
        holder = tree.parent.get(id(node))
        while type(holder) in _HOLDERS:
            holder = tree.parent.get(id(holder))
        if type(holder) is cst.Call:
            out.append(holder)
    found = []
    for call in out:
        qualified = names.qualname(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        if qualified and not qualified.startswith(("builtins.", f"{names.modname}.")):
            found.append(qualified)
    return found


__all__ = ["kept_objects"]
