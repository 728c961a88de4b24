"""A project function that returns an open handle, called in a dataset's construction code.

``self.f = open_h5(path)``, where ``open_h5`` (a function of this file or of another module,
``handle_returns``) returns the ``h5py.File`` it opened, keeps that file on ``self`` just as
``self.f = h5py.File(path)`` does; ``self.env, self.keys = list_keys(root)`` keeps the handle
at the position of the tuple the function returns it in (at any depth of such functions).

API:

* ``helper_handle(ctx, call)``: (the handle's kind, as ``handle_kinds.HANDLE_KINDS`` names it,
  its position in a returned tuple or None) for such a call, when the function's every
  ``return`` gives back a handle of one opener that DSL401 knows; else None.
* ``held_element(ctx, init, self_param, call, position)``: the ``self`` attribute that an
  assignment unpacking the call's tuple binds at ``position`` (``self.env, self.keys = call``).
"""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from dslint.semantics.handle_returns import helper_calls
from dslint.semantics.handle_kinds import HANDLE_KINDS
from dslint.semantics.instance_state import Held
from dslint.semantics.regions import self_attr


def helper_handle(ctx, call: cst.Call) -> Optional[Tuple[str, Optional[int]]]:
    found = helper_calls(ctx).get(id(call))
    if found is None or found[4] is None:
        return None
    kind = HANDLE_KINDS.get(found[4])
    return (kind, found[2]) if kind is not None else None


def held_element(ctx, init: cst.FunctionDef, self_param: str, call: cst.Call, position: int) -> Optional[Held]:
    statement = ctx.parent(call)
    if not isinstance(statement, cst.Assign) or statement.value is not call:
        return None
    held = Held(call)
    for target in statement.targets:
        elements = target.target.elements if isinstance(target.target, (cst.Tuple, cst.List)) else ()
        if position < len(elements) and not any(isinstance(e, cst.StarredElement) for e in elements):
            attr = self_attr(elements[position].value, self_param)
            if attr is not None:
                held.attrs[attr] = statement
    return held if held.attrs else None
