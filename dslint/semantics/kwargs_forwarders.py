"""Project functions that hand their ``**kwargs`` on to a DataLoader.

``def make_loader(ds, batch_size=1, **kwargs): return DataLoader(ds, batch_size=batch_size,
**kwargs)`` takes torch's keywords without naming them, and so does ``def tally(stat, ds,
**kwargs): ... make_loader(ds, **kwargs)`` one level up. A call ``tally(stat, ds,
num_workers=2, collate_fn=make_collate(n))`` builds a DataLoader with those options: the loader
rules judge the keywords it passes that the function does not take itself.

Phase 1 (summary entry ``kwargs_forwards``, ``kwargs_forwards(tree, names, qualname_of)``): for each
module-level function with a ``**kw`` parameter that it passes on unchanged (``**kw`` in a call;
it never stores into, deletes from, pops or updates ``kw``), its named parameters and the
qualified names of the callees it hands ``**kw`` to.

Phase 2 (``ProjectIndex.kwargs_loader``, ``project_loaders.py``: no parser there): the named parameters, along the chain, of a function
whose ``**kw`` reaches a ``torch.utils.data.DataLoader`` call through such functions (3 hops).

``forwarded_loader_kwargs_calls(ctx)``: ``(call, parameters the chain takes itself)`` for the
calls of this file to such a function (of any file of the project).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Set

import libcst as cst

from dslint.semantics.project_loaders import FORWARDED_LOADER
from dslint.semantics.walk import iter_subtree

__all__ = ["kwargs_forwards", "forwarded_loader_kwargs_calls"]
_READS = frozenset({"get", "keys", "items", "values", "copy", "__contains__"})


def kwargs_forwards(tree, names, qualname_of: Callable[[cst.CSTNode], str]) -> Dict[str, list]:
    """{local qualified name: [named parameters, [callees]]} (see the module docstring)."""
    out: Dict[str, list] = {}
    for func in tree.nodes(cst.FunctionDef):
        if type(tree.parent_of(func)) is not cst.Module or func.params.star_kwarg is None or func.decorators:
            continue
        kw = func.params.star_kwarg.name.value
        callees: Set[str] = set()
        changed = False
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, cst.Call):
                if any(a.star == "**" and isinstance(a.value, cst.Name) and a.value.value == kw for a in node.args):
                    target = names.qualname(node.func) if isinstance(node.func, (cst.Name, cst.Attribute)) else None
                    if target:
                        callees.add(target)
            elif _changes(tree, node, kw):
                changed = True
                break
        if callees and not changed:
            params = [p.name.value for p in (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params)]
            out[qualname_of(func)] = [params, sorted(callees)]
    return out


def _changes(tree, node, kw: str) -> bool:
    """``node`` is ``kw`` stored into, deleted from, rebound, or given to a method other than a read."""
    if not (isinstance(node, cst.Name) and node.value == kw):
        return False
    parent = tree.parent_of(node)
    if isinstance(parent, cst.Attribute) and parent.value is node:
        return parent.attr.value not in _READS
    if isinstance(parent, cst.Subscript) and parent.value is node:
        grand = tree.parent_of(parent)
        return isinstance(grand, (cst.AssignTarget, cst.Del)) or (isinstance(grand, cst.AugAssign) and grand.target is parent)
    return isinstance(parent, (cst.AssignTarget, cst.Del))


def forwarded_loader_kwargs_calls(ctx) -> List[tuple]:
    """``(call, parameters the chain takes itself)`` for this file's calls of project functions whose
    ``**kwargs`` reaches a DataLoader (``ctx.view.kwargs_loader``)."""

    def find():
        out = []
        names = set(ctx.view.kwargs_forwarder_names())
        for call in ctx.nodes(cst.Call) if names else ():
            func = call.func
            tail = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
            if tail not in names or not any(a.keyword is not None for a in call.args):
                continue
            qualified = ctx.call_name(call)
            if not qualified or qualified == FORWARDED_LOADER or "." not in qualified:
                continue
            params = ctx.view.kwargs_loader(qualified)
            if params is not None:
                out.append((call, tuple(params)))
        return out

    return ctx.memo(("kwargs_forwarders.calls",), find)
