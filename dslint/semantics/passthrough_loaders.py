"""Project DataLoader subclasses that take torch's own arguments.

``class InfiniteLoader(DataLoader): def __init__(self, *args, **kwargs):
super().__init__(*args, **kwargs)`` adds behaviour (an endless ``__iter__``, a
counter) but not parameters: a call ``InfiniteLoader(ds, num_workers=0,
prefetch_factor=2)`` is a DataLoader construction with torch's signature, and the
loader rules judge its arguments like those of ``DataLoader(...)``.
"""

from __future__ import annotations

from typing import List, Tuple

import libcst as cst

from dslint.semantics.calls import DATALOADER, SubclassInit, dataloader_constructions


def _forwards_everything(init: cst.FunctionDef, call: cst.Call) -> bool:
    """``__init__(self, *args, **kwargs)`` hands exactly ``*args, **kwargs`` on."""
    params = init.params
    if params.params[1:] or params.kwonly_params or params.posonly_params:
        return False
    star, kwargs = params.star_arg, params.star_kwarg
    if not isinstance(star, cst.Param) or kwargs is None:
        return False
    passed = [(a.star, a.value.value if isinstance(a.value, cst.Name) else None) for a in call.args]
    return passed == [("*", star.name.value), ("**", kwargs.name.value)]


def passthrough_loader_calls(ctx) -> List[Tuple[cst.Call, Tuple[str, ...]]]:
    """``(call, positional parameters)`` for each construction, in this file, of a DataLoader
    subclass of this file whose ``__init__`` forwards ``*args, **kwargs`` unchanged."""

    def find():
        names = set()
        for init in dataloader_constructions(ctx):
            func = ctx.enclosing_function(init.call) if isinstance(init, SubclassInit) else None
            if func is not None and isinstance(init.call.func.value, cst.Call) and _forwards_everything(func, init.call):
                names.add(f"{ctx.names.modname}.{ctx.qualname_of_def(init.owner)}")
        if not names:
            return []
        return [(call, DATALOADER.positional) for call in ctx.nodes(cst.Call) if ctx.call_name(call) in names]

    return ctx.memo(("passthrough_loaders.calls",), find)
