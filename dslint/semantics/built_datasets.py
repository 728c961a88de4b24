"""Which classes a DataLoader's dataset may be an instance of, and what each construction passes.

``built_classes(tree, names, expr, qualify)`` (phase 1, loader fact ``built``): ``[class, passes]``
for each construction the dataset expression may be (a name bound in several places: each one),
with ``passes`` its ``[keywords, positional count]``: the keys of a ``**`` dict the file builds
count as keywords (``RebalancedSet(split="valid", **common)`` with ``common = {"root": r}``:
``kwargs_dicts.closed_items``); None when it has a ``*`` argument or a ``**`` dict not followed
to every key it can hold.
Asked by ``kept_elsewhere`` (which lambdas a class keeps reach another file's workers).
"""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.bindings import block_assignment, class_ref, enclosing_scope, scope_assignments, single_assignment
from dslint.semantics.kwargs_dicts import FileSource, closed_items


def built_classes(tree, names, expr, qualify) -> List[list]:
    """See the module docstring."""
    values = [expr]
    for _ in range(5):
        if not (len(values) == 1 and isinstance(values[0], cst.Name)):
            break
        name = values[0]
        single = single_assignment(tree, name) or block_assignment(tree, name)
        values = [single] if single is not None else scope_assignments(tree, enclosing_scope(tree, name), name.value) or []
    out = []
    for value in values:
        ref = class_ref(tree, names, value) if isinstance(value, cst.Call) else None
        if ref is not None:
            out.append([qualify(ref), _passes(FileSource(tree, names), value)])
    return out


def _passes(source, call: cst.Call):
    """``[keywords, positional count]`` of ``call``, or None (see the module docstring)."""
    items, closed = closed_items(source, call)
    if not closed:
        return None
    keywords = {arg.keyword.value for arg in call.args if arg.keyword is not None} | {key for key, _ in items}
    return [sorted(keywords), sum(1 for arg in call.args if arg.keyword is None and not arg.star)]

