"""Which optional parts does a construction leave out?

``unset_attributes(ctx, init, call)``: the attributes of ``self`` that ``__init__`` sets only from a
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
from dslint.semantics.self_stores import attribute_store_table


def unset_attributes(ctx, init: cst.FunctionDef, call: cst.Call) -> frozenset:
    selfp, owner = self_name(init), ctx.method_class(init)
    if selfp is None or owner is None or any(arg.star for arg in call.args):
        return frozenset()
    positional = [p for p in (*init.params.posonly_params, *init.params.params)][1:]
    passed = {arg.keyword.value for arg in call.args if arg.keyword is not None}
    passed.update(p.name.value for p in positional[:sum(arg.keyword is None for arg in call.args)])
    optional = {p.name.value for p in (*positional, *init.params.kwonly_params)
                if is_none(p.default) and p.name.value not in passed}
    unset = set()
    for attr, nodes in attribute_store_table(ctx, owner).items():  # (what ``__init__`` itself stores)
        values = [n.value.value if isinstance(n, cst.Assign) and isinstance(n.value, cst.Name) else None
                  for n in nodes if ctx.enclosing_function(n) is init]
        if values and all(v in optional for v in values):
            unset.add(attr)
    return frozenset(unset)
