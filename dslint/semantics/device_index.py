"""The project-wide side of ``device_flow``: which device or CUDA-placed model a class's
``self.attr`` or ``__init__`` parameter ends up holding, from the per-file ``devices``
summaries (no parsing here: a replayed warm run imports this module without libcst)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from dslint.semantics.modules import canonical

Key = Tuple[str, str]
DEVICE, PLACED = "device", "placed"


def attribute_origin(index, table, key: Key, attr: str, kind: str = DEVICE) -> Optional[str]:
    """How ``self.<attr>`` of an instance of class ``key`` (or of a subclass) can hold a CUDA
    device (``kind`` "device") or an object put on one ("placed"): a store of such a value by a
    class of its MRO, or a construction in the project that passes one to the ``__init__``
    parameter the attribute keeps. None when nothing shows it."""
    direct, reached = table[0], table[1]
    for cls in index.mro(key):
        if (cls, attr, kind) in direct:
            return direct[(cls, attr, kind)]
    for (heir, name, found), shown in reached.items():
        if name == attr and found == kind and key in index.mro(heir):
            return shown
    return None


def partial_origin(index, table, key: Key, param: str) -> Optional[str]:
    """How ``functools.partial`` somewhere in the project binds the parameter ``param`` of the
    function ``key`` to a value that can be a CUDA device, or None."""
    return table[2].get((key, param))


def device_table(index):
    stores: Dict[Key, List[list]] = {}
    forwards: Dict[Key, List[list]] = {}
    inits: Dict[Key, List[str]] = {}
    direct: Dict[tuple, str] = {}
    partials: Dict[tuple, str] = {}
    for path, summary in index.summaries.items():
        facts = summary.get("devices") or {}
        for qual, attr, param, shown, kind in facts.get("stores", ()):
            if param:
                stores.setdefault((path, qual), []).append([attr, param])
            else:
                direct.setdefault(((path, qual), attr, kind), f"`self.{attr} = {shown}` in `{qual}.__init__`")
        for qual, slot, param in facts.get("forwards", ()):
            forwards.setdefault((path, qual), []).append([slot, param])
        for qual, params in facts.get("inits", {}).items():
            inits[(path, qual)] = params
        for target, param, shown in facts.get("partials", ()):
            located = index.locate(canonical(target), path, table="functions")
            if located is not None:
                partials.setdefault((located, param), f"{shown} in {path}")
    reached: Dict[tuple, str] = {}
    params: Dict[tuple, str] = {}
    flow = (stores, forwards, inits)
    for path, summary in index.summaries.items():
        for callee, slot, shown, kind in (summary.get("devices") or {}).get("cuda_args", ()):
            cls = index.locate(canonical(callee), path)
            if cls is not None:
                follow_argument(index, cls, slot, kind, f"{shown} in {path}", *flow, reached, params)
    return direct, reached, partials, flow, params


def kept_attribute(index, table, key: Key, slot) -> Optional[str]:
    """The attribute in which an instance of class ``key`` keeps what its construction passes
    at ``slot`` (a keyword or a position), through ``super().__init__``; None when it keeps none."""
    reached: Dict[tuple, str] = {}
    follow_argument(index, key, slot, PLACED, "", *table[3], reached, {})
    return min(attr for _, attr, _ in reached) if reached else None


def init_param_origin(index, table, key: Key, param: str) -> Optional[str]:
    """How a construction in the project hands a CUDA device to the parameter ``param`` of the
    ``__init__`` of class ``key`` (directly or through a subclass's ``super().__init__``), or None."""
    return table[4].get((key, param, DEVICE))


def follow_argument(index, heir: Key, slot, kind, origin, stores, forwards, inits, reached, params_reached) -> None:
    """Follow a constructor argument of class ``heir`` at ``slot`` through the ``__init__``
    methods of its MRO: the attributes that keep it (``reached``) and the parameters it binds."""
    mro = index.mro(heir)
    after: Optional[Key] = None
    for _ in range(8):
        init = index.find_method(mro, "__init__", after=after)
        if init is None:
            return
        owner = (init[0], init[1].rpartition(".")[0])
        params = inits.get(owner)
        if params is None:
            return
        if isinstance(slot, int):
            if slot >= len(params):
                return
            slot = params[slot]
        params_reached.setdefault((owner, slot, kind), origin)
        for attr, param in stores.get(owner, ()):
            if param == slot:
                reached.setdefault((heir, attr, kind), origin)
        nxt = [s for s, param in forwards.get(owner, ()) if param == slot]
        if len(nxt) != 1:
            return
        slot, after = nxt[0], owner
