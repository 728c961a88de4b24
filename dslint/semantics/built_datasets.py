"""Which classes a DataLoader's dataset may be an instance of, and what each construction passes.

``built_classes(tree, names, expr, qualify)`` (phase 1, loader fact ``built``): ``[class, passes]``
for each construction the dataset expression may be (a name bound in several places: each one),
with ``passes`` its ``[keywords, positional count]``, None when it has a ``*``/``**`` argument.
Asked by ``kept_elsewhere`` (which lambdas a class keeps reach another file's workers).
"""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.bindings import block_assignment, class_ref, enclosing_scope, scope_assignments, single_assignment


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
            passes = None if any(arg.star for arg in value.args) else [
                sorted(arg.keyword.value for arg in value.args if arg.keyword is not None),
                sum(1 for arg in value.args if arg.keyword is None)]
            out.append([qualify(ref), passes])
    return out
