"""Across files: does calling a project callable return an object holding a random generator it
created (the phase 1 facts of ``rng_holders``, read from the project index). No libcst here: a
cached run replays these answers without parsing."""

from __future__ import annotations

from typing import Optional

from dslint.semantics.modules import canonical

_DEPTH = 6


def _facts(index, key) -> Optional[dict]:
    return index.summaries[key[0]].get("rng_holders", {}).get(key[1])


def _resolve(index, key, target: list):
    """The function key a ``via`` target of function ``key`` names."""
    kind, name = target
    if kind == "self":
        owner = index.locate(f"{index.summaries[key[0]]['module']}.{key[1].rpartition('.')[0]}", key[0])
        return index.find_method(index.mro(owner), name) if owner is not None else None
    return index.locate(canonical(name), key[0], table="functions")


def _holds(index, key, seen) -> bool:
    if key is None or key in seen or len(seen) > _DEPTH:
        return False
    seen.add(key)
    facts = _facts(index, key)
    return bool(facts and facts["each"]) and all(_returned(index, key, entry, seen) for entry in facts["each"])


def _returned(index, key, entry: dict, seen) -> bool:
    """One ``return`` of function ``key`` hands back a holder."""
    if entry["fresh"]:
        return True
    for target in entry["picks"]:
        picker = _resolve(index, key, target)
        picked = _facts(index, picker) if picker is not None else None
        if picked is not None and picked["getattr"]:
            return True
    return any(_holds(index, _resolve(index, key, target), set(seen)) for target in entry["via"])


def holder_returned(index, qualified: str, method: Optional[str], from_path: str) -> bool:
    """Calling the project function ``qualified`` (or, with ``method``, that method of the
    instance ``qualified`` stands for: a project class, or the one class a project function
    returns) returns an object holding a generator it created."""
    if method is None:
        return _holds(index, index.locate(canonical(qualified), from_path, table="functions"), set())
    owner = index.locate(canonical(qualified), from_path)
    if owner is None:
        function = index.locate(canonical(qualified), from_path, table="functions")
        facts = _facts(index, function) if function is not None else None
        returned = set(facts["returns"]) if facts else set()
        if len(returned) != 1:
            return False
        owner = index.locate(canonical(returned.pop()), function[0])
    found = index.find_method(index.mro(owner), method) if owner is not None else None
    return _holds(index, found, set())
