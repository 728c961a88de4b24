"""Local data flow that both the summary and the rules need.

``single_assignment``: the value of the only assignment to a name in its scope
(function or module), or None when it is assigned more than once, rebound by a
loop, or bound some other way. ``class_ref``: the qualified name of the class an
expression constructs (``MyDS(...)``, or a name assigned once from such a call).
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.names import ModuleNames, dotted_parts
from dslint.semantics.walk import TreeIndex


def enclosing_scope(tree: TreeIndex, node: cst.CSTNode):
    for ancestor in tree.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            return ancestor
        if isinstance(ancestor, cst.ClassDef):
            return ancestor
    return None


def names_in_target(target: cst.CSTNode) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[str] = []
        for element in target.elements:
            out.extend(names_in_target(element.value))
        return out
    if isinstance(target, cst.StarredElement):
        return names_in_target(target.value)
    return []


def single_assignment(tree: TreeIndex, name: cst.Name) -> Optional[cst.BaseExpression]:
    """The value of the one assignment to ``name`` in its scope, if there is exactly one."""
    scope = enclosing_scope(tree, name)
    found: List[cst.BaseExpression] = []
    for assign in tree.nodes(cst.Assign):
        if enclosing_scope(tree, assign) is not scope:
            continue
        for target in assign.targets:
            if isinstance(target.target, cst.Name) and target.target.value == name.value:
                found.append(assign.value)
            elif name.value in names_in_target(target.target):
                return None
    for cls in (cst.AugAssign, cst.For, cst.AnnAssign):
        for node in tree.nodes(cls):
            if name.value in names_in_target(node.target) and enclosing_scope(tree, node) is scope:
                if cls is cst.AnnAssign and node.value is not None and not found:
                    found.append(node.value)
                    continue
                return None
    if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
        params = scope.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name.value:
                return None
    return found[0] if len(found) == 1 else None


def local_class_path(tree: TreeIndex, name: str) -> Optional[cst.ClassDef]:
    local = [c for c in tree.nodes(cst.ClassDef) if c.name.value == name]
    return local[0] if len(local) == 1 else None


def class_ref(tree: TreeIndex, names: ModuleNames, expr: Optional[cst.CSTNode], _depth: int = 0):
    """("local", ClassDef) or ("qualified", name) for the class ``expr`` constructs, else None."""
    if expr is None or _depth > 4:
        return None
    if isinstance(expr, cst.Call):
        func = expr.func
        parts = dotted_parts(func)
        if not parts:
            return None
        if len(parts) == 1:
            local = local_class_path(tree, parts[0])
            if local is not None:
                return ("local", local)
        qualified = names.qualname(func)
        return ("qualified", qualified) if qualified else None
    if isinstance(expr, cst.Name):
        value = single_assignment(tree, expr)
        return class_ref(tree, names, value, _depth + 1) if value is not None else None
    return None
