"""Which project functions run as (part of) a DataLoader's collate, across files.

A ``collate_fn`` is given by name (``summary.loader_facts``), as a method of an object
(``bound_collates``: ``self.m``, ``ds.m`` for a ``ds`` whose class is known), or installed
on a loader. A method handed over this way is looked up on the object, which may be an
instance of any project subclass of the class it names: each subclass's own override
runs too. What that method calls on ``self`` (``self.collate(examples)`` inside a
wrapper of a base class) runs in the same worker, resolved along the same instance's
MRO, so an abstract ``collate`` of a base class reaches the subclasses' implementations.

API: ``collate_table(index)`` -> {function key: [facts of the loaders it serves]}.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from dslint.semantics.modules import canonical

Key = Tuple[str, str]

#: how deep the ``self.m()`` calls of a collate method are followed
MAX_DEPTH = 4


def collate_table(index) -> Dict[Key, List[dict]]:
    table: Dict[Key, List[dict]] = {}
    for path, summary in index.summaries.items():
        for facts in summary.get("loaders", ()):
            ref = facts.get("collate_fn")
            located = index.function_key(canonical(ref), path) if ref else None
            if located is not None:
                table.setdefault(located, []).append(facts)
    roots: List[Tuple[Key, str, dict]] = []
    for path, summary in index.summaries.items():
        for ref, workers in summary.get("bound_collates", ()):
            facts = {"collate_fn": ref, "num_workers": workers}
            owner, _, method = canonical(ref).rpartition(".")
            cls = index.locate(owner, path) if owner else None
            if cls is not None:
                roots.append((cls, method, facts))
                continue
            located = index.function_key(canonical(ref), path)
            if located is not None:
                table.setdefault(located, []).append(facts)
    roots.extend(_parameter_roots(index))
    if roots:
        _reach_methods(index, roots, table)
    return table


def _parameter_roots(index) -> List[Tuple[Key, str, dict]]:
    """(class, method, loader facts) for ``collate_fn=p.m`` on an unannotated parameter ``p``,
    for each class a construction passed at ``p``'s place in a call of that function (a class's
    ``__init__`` through the class) shows."""
    wanted: dict = {}
    for path, summary in index.summaries.items():
        for qual, position, name, method, workers in (summary.get("param_collates") or {}).get("roots", ()):
            func = index.function_key(canonical(qual), path)
            if func is not None:
                wanted.setdefault(func, []).append((position, name, method, {"collate_fn": f"{qual}.{name}.{method}",
                                                                             "num_workers": workers}))
    if not wanted:
        return []
    tails = {key[1].rsplit(".", 1)[-1] for key in wanted} | {key[1].rsplit(".", 2)[-2] for key in wanted if "." in key[1]}
    found = []
    for path, summary in index.summaries.items():
        passes = [*summary.get("class_args", ()), *(summary.get("param_collates") or {}).get("passes", ())]
        for callee, where, cls in passes:
            if callee.rsplit(".", 1)[-1] not in tails:
                continue
            func = _called_function(index, canonical(callee), path)
            for position, name, method, facts in wanted.get(func, ()) if func is not None else ():
                located = index.locate(canonical(cls), path) if where in (position, name) else None
                if located is not None:
                    found.append((located, method, facts))
    return found


def _called_function(index, callee: str, path: str):
    """The function a call of ``callee`` runs: the function itself, or a class's ``__init__``."""
    cls = index.locate(callee, path)
    if cls is not None:
        return index.find_method(index.mro(cls), "__init__")
    return index.function_key(callee, path)


def _reach_methods(index, roots, table) -> None:
    """Each root method on every project class that has the root's class in its MRO, and the
    methods it calls on ``self``/``super()`` along that class's MRO."""
    classes = [(path, qual) for path, summary in index.summaries.items() for qual in summary["classes"]]
    mros = {}
    for cls, method, facts in roots:
        for heir in classes:
            mro = mros.get(heir)
            if mro is None:
                mro = mros[heir] = index.mro(heir)
            if cls not in mro:
                continue
            start = index.find_method(mro, method)
            if start is None:
                continue
            work = [(start, 0)]
            seen = set()
            while work:
                func, depth = work.pop()
                if func in seen:
                    continue
                seen.add(func)
                served = table.setdefault(func, [])
                if facts not in served:
                    served.append(facts)
                function = index.function_facts(func)
                if function is None or depth >= MAX_DEPTH:
                    continue
                owner = (func[0], func[1].rpartition(".")[0])
                for kind, target, _ in function["calls"]:
                    if kind not in ("self", "super"):
                        continue
                    callee = index.find_method(mro, target, after=owner if kind == "super" else None)
                    if callee is not None:
                        work.append((callee, depth + 1))
