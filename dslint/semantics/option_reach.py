"""Which options are off in the DataLoader workers of a dataset class (index phase, no libcst).

An option is an attribute that the class's ``__init__`` (the first along its bases) keeps
from a parameter whose default is ``None``, ``False`` or ``0`` (``option_guards.init_options``),
that no other method of the class or its bases stores, and that every construction of the
class the project hands to a DataLoader (or passes to a function of the project, which may
hand it to one: the summaries' ``loader_constructions``) leaves out. With no such construction
in the project, nothing is known to be off.

The per-sample reach (``ProjectIndex``) then skips a call under ``if self.X:`` of an off
option, and a call under ``if p:`` of a parameter ``p`` that every per-sample call of the
function leaves at its default, passes as ``None``/``False``/``0``, or forwards from an off
option or parameter of the caller. What is off in a function at every per-sample arrival is
kept (``ProjectIndex.off_guards``) for the rules: code under such a test runs in no worker.

API: ``off_attributes(index, cls, mro)``, ``callee_off(facts, position, kind, callee_facts, off)``,
``skipped(facts, position, off)``.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Tuple

Key = Tuple[str, str]
Guard = Tuple[str, str]  # ("self", attribute) | ("param", name)
_FALSY = ([None], [False], [0])


def _constructions(index) -> Dict[Key, List[list]]:
    table = getattr(index, "_option_constructions", None)
    if table is None:
        table = index._option_constructions = {}
        for path, summary in index.summaries.items():
            for cls, callee, keywords, count in summary.get("loader_constructions", ()):
                if callee and index.locate(callee, path, table="functions") is None:
                    continue  # handed to a library function (``tqdm(ds)``): no loader of the project
                located = index.locate(cls, path)
                if located is not None:
                    table.setdefault(located, []).append([keywords, count])
    return table


def off_attributes(index, cls: Key, mro: List[Key]) -> FrozenSet[Guard]:
    """The options of ``cls`` off in every construction a loader receives (see the module doc)."""
    init = index.find_method(mro, "__init__")
    built = _constructions(index).get(cls)
    if init is None or not built:
        return frozenset()
    owner = (init[0], init[1].rpartition(".")[0])
    options = index.class_info(owner).get("options") or {}
    off = set()
    for attr, (param, position) in options.items():
        if any(attr in (facts or {}).get("self_stores", ()) for c in mro
               for name, facts in index.class_info(c)["methods"].items() if (c, name) != (owner, "__init__")):
            continue
        if all(count >= 0 and param not in keywords and (position is None or count <= position) for keywords, count in built):
            off.add(("self", attr))
    return frozenset(off)


def skipped(facts: dict, position: int, off: FrozenSet[Guard]) -> bool:
    """The call at ``position`` of a function's recorded calls runs only under an off test."""
    if not off:
        return False
    for at, guards in facts.get("call_guards", ()):
        if at == position:
            return any((kind, name) in off for kind, name in guards)
    return False


def callee_off(facts: dict, position: int, kind: str, callee_facts: dict, off: FrozenSet[Guard]) -> FrozenSet[Guard]:
    """What is off in the callee of the call at ``position``: the caller's off options when the
    call is on the same instance (``self.m()``, ``super().m()``), and the callee's parameters
    the call leaves off."""
    found = {guard for guard in off if guard[0] == "self"} if kind in ("self", "super") else set()
    params = callee_facts.get("guard_params")
    if not params:
        return frozenset(found)
    passed = facts.get("call_args")
    positional, keywords = (passed[position] or [[], {}]) if passed and position < len(passed) else (None, {"**": "?"})
    forwards = next((f for at, f in facts.get("forwards", ()) if at == position), ())
    forwarded = {slot: (k, n) for slot, (k, n) in forwards}
    for param, at in params.items():
        slot = param if param in keywords else (at if at is not None and positional is not None and at < len(positional) else None)
        if slot is None:
            if positional is not None and "**" not in keywords:
                found.add(("param", param))  # left at its default
            continue
        value = keywords[param] if slot == param else positional[slot]
        if value in _FALSY or forwarded.get(slot) in off:
            found.add(("param", param))
    return frozenset(found)
