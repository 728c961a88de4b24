"""Which optional parts does a construction leave out?

``unset_attributes(init, call)``: the attributes of ``self`` that ``__init__`` sets only from a
parameter whose default is ``None`` (``self.transform = transform`` for
``transform=None``) and that ``call`` does not pass. Code under ``if self.transform:`` (or
``is not None``) never
runs on that instance (``call_costs._guard``, ``indexing.indexes_only``): a dataset built
without its transform only indexes what it holds.
"""

from __future__ import annotations

import libcst as cst

from dslint.semantics.regions import self_name
from dslint.semantics.scopes import is_none
from dslint.semantics.walk import iter_subtree


def unset_attributes(init: cst.FunctionDef, call: cst.Call) -> frozenset:
    selfp = self_name(init)
    if selfp is None or any(arg.star for arg in call.args):
        return frozenset()
    positional = [p for p in (*init.params.posonly_params, *init.params.params)][1:]
    passed = {arg.keyword.value for arg in call.args if arg.keyword is not None}
    passed.update(p.name.value for p in positional[:sum(arg.keyword is None for arg in call.args)])
    optional = {p.name.value for p in (*positional, *init.params.kwonly_params)
                if is_none(p.default) and p.name.value not in passed}
    stores: dict = {}
    for node in iter_subtree(init.body, into_scopes=False):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == selfp:
                    value = node.value
                    stores.setdefault(t.attr.value, []).append(value.value if isinstance(value, cst.Name) else None)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Attribute):
            stores.setdefault(node.target.attr.value, []).append(None)
    return frozenset(attr for attr, values in stores.items() if values and all(v in optional for v in values))
