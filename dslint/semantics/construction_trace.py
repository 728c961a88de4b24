"""What an inherited constructor runs on ``self``, across files, from the summaries.

A dataset class may take its ``__init__`` from a base in another file whose construction
calls hooks the subclass overrides (``self._query(...)`` to validate columns, ``self._open()``):
those overrides run in the parent process, before the DataLoader forks its workers. The
trace lists the project methods construction runs through ``self.m()`` and ``super().m()``,
resolved from the instance's class, depth first and in call order (the order of the calls
in each method's body); loops and branches are not told apart.
"""

from __future__ import annotations

from typing import List, Optional, Set, Tuple

Key = Tuple[str, str]
_LIMIT = 200


def construction_trace(index, cls: Key) -> List[list]:
    """[method, end] for the methods ``__init__`` of an instance of ``cls`` runs, in the order it
    runs them; the entries from the next one up to ``end`` are the calls this run made."""
    init = index.find_method(index.mro(cls), "__init__")
    out: List[list] = []
    if init is not None:
        _expand(index, cls, init, out, set())
    return out


def _expand(index, cls: Key, method: Key, out: List[list], active: Set[Key]) -> None:
    if method in active or len(out) >= _LIMIT:
        return
    entry = [method, len(out) + 1]
    out.append(entry)
    facts = index.function_facts(method)
    if not facts:
        return
    active.add(method)
    owner = (method[0], method[1].rpartition(".")[0])
    for kind, name, _ in facts.get("calls", ()):
        target: Optional[Key] = None
        if kind == "self":
            target = index.find_method(index.mro(cls), name)
        elif kind == "super" and owner[1] in index.summaries[owner[0]]["classes"]:
            target = index.find_method(index.mro(cls), name, after=owner)
        if target is not None:
            _expand(index, cls, target, out, active)
    active.discard(method)
    entry[1] = len(out)


def construction_runs(index, cls: Key, path: str) -> List[list]:
    """[method name, attributes that later construction code stores] for each method of file
    ``path`` that the construction of ``cls`` runs (after its last run: a handle it opens and
    a later ``self.h = None`` or ``close`` helper drops is not kept)."""
    trace = construction_trace(index, cls)
    keys = [key for key, _ in trace]
    found = []
    for position, (key, end) in enumerate(trace):
        if key[0] != path or key in keys[position + 1:]:
            continue  # another file's method, or not its last run
        later = set()
        for other in keys[end:]:
            later.update((index.function_facts(other) or {}).get("self_stores", ()))
        found.append([key[1].rpartition(".")[2], sorted(later)])
    return found


__all__ = ["construction_runs", "construction_trace"]
