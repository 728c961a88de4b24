"""Cross-file questions about inheritance and constructions, asked of the project index.

* ``first_definer``: which project class's method an instance uses, following bases in order;
* ``iterable_heirs``: the IterableDataset classes that use a plain class's ``__iter__``;
* ``one_shot_arguments``: which modules construct a class passing a one-shot iterator
  at a parameter of its ``__init__`` (the summaries' ``passed_iterators``).

Plain functions of a ``ProjectIndex`` (no libcst); rules reach them through ``View``.
"""

from __future__ import annotations

from typing import List, Optional

from dslint.semantics.modules import canonical
from dslint.semantics.project import ITERABLE, Key, ProjectIndex
from dslint.semantics.test_paths import is_test_path


def first_definer(index: ProjectIndex, key: Key, name: str, _seen=None):
    """The project class whose ``name`` an instance of ``key`` uses, following the bases
    in order (depth first, as Python's MRO does for these hierarchies): its key, None
    when no class defines it, or ``"unknown"`` when a base outside the project that
    may define it (torch's own dataset bases included) comes first."""
    seen = _seen if _seen is not None else set()
    if key in seen:
        return None
    seen.add(key)
    info = index.class_info(key)
    if name in info["methods"]:
        return key
    for base in info["bases"]:
        located = index.locate(canonical(base), key[0]) if base else None
        if located is None or located == key:
            known = index.KNOWN_BASES.get(canonical(base)) if base else None
            if known is not None and name not in known:
                continue
            return "unknown"
        found = first_definer(index, located, name, seen)
        if found is not None:
            return found
    return None

def iterable_heirs(index: ProjectIndex, key: Key, name: str) -> List[Key]:
    """IterableDataset classes of the project that are not ``key``'s kind themselves but use
    its method ``name`` (a plain class whose ``__iter__`` a torch subclass inherits)."""
    if index.class_kind(key) is not None or name not in index.class_info(key)["methods"]:
        return []
    heirs = []
    for path, summary in index.summaries.items():
        for qual, info in summary["classes"].items():
            other = (path, qual)
            if other == key or name in info["methods"] or index.class_kind(other) != ITERABLE or is_test_path(path):
                continue
            if first_definer(index, other, name) == key:
                heirs.append(other)
    return heirs

def one_shot_arguments(index: ProjectIndex, key: Key, position: Optional[int], keyword: str) -> List[str]:
    """Modules that construct class ``key`` (or a subclass using its ``__init__``) passing a
    one-shot iterator (a generator expression, ``iter()``/``map()``..., a call of a
    generator function of the project) at parameter ``position``/``keyword`` of
    ``__init__`` (position counted without ``self``)."""
    table = getattr(index, "passed_table", None)
    if table is None:
        table = index.passed_table = {}
        for path, summary in index.summaries.items():
            if is_test_path(path):
                continue  # a test drains what it passes once, on purpose
            for record in summary.get("passed_iterators", ()):
                located = index.locate(canonical(record[0]), path)
                if located is not None:
                    table.setdefault(located, []).append((path, record))
    found = set()
    for cls, records in table.items():
        if cls != key and first_definer(index, cls, "__init__") != key:
            continue
        for path, (_, where, kind, target) in records:
            if where != keyword and (position is None or where != position):
                continue
            if kind == "call":
                facts = index.function_by_name(canonical(target), path)
                if not (facts and facts.get("gen")):
                    continue
            found.add(index.summaries[path]["module"])
    return sorted(found)
