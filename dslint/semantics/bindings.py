"""Local data flow that both the summary and the rules need.

``value_binding``/``call_binding``: the one value (call) a name is assigned in a scope, and where in it.
``parameter_default``: the default of the parameter a name reads, when its function never rebinds it.
``single_assignment``: the value of the only assignment to a name in its scope
(function or module), or None when it is assigned more than once, rebound by a
loop, or bound some other way. ``class_ref``: the qualified name of the class an
expression constructs (``MyDS(...)``, or a name assigned once from such a call).
"""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from dslint.semantics.names import ModuleNames, binding_kind, dotted_parts
from dslint.semantics.walk import TreeIndex, iter_subtree


def enclosing_scope(tree: TreeIndex, node: cst.CSTNode):
    """The nearest FunctionDef, Lambda or ClassDef above ``node`` (None: module level)."""
    return tree.scope_node(node)


def names_in_target(target: cst.CSTNode) -> List[str]:
    kind = type(target)
    if kind is cst.Name:
        return [target.value]
    if kind is cst.Tuple or kind is cst.List:
        out: List[str] = []
        for element in target.elements:
            out.extend(names_in_target(element.value))
        return out
    if kind is cst.StarredElement:
        return names_in_target(target.value)
    return []


class _ScopeAssignments:
    """How the names of one scope are bound by assignment statements."""

    __slots__ = ("simple", "unpacked", "rebound", "annotated")

    def __init__(self) -> None:
        self.simple: Dict[str, List[cst.BaseExpression]] = {}  # `name = value`, source order
        self.unpacked: set = set()  # bound by a tuple/list/starred target of an Assign
        self.rebound: set = set()  # targets of AugAssign and For
        self.annotated: Dict[str, List[Optional[cst.BaseExpression]]] = {}  # AnnAssign values


def _assignment_index(tree: TreeIndex) -> Dict[int, _ScopeAssignments]:
    """Per scope (id of its node; 0 for the module), built once per tree."""
    return tree.memo(("bindings.assignments",), lambda: _build_assignment_index(tree))


def _build_assignment_index(tree: TreeIndex) -> Dict[int, _ScopeAssignments]:
    index: Dict[int, _ScopeAssignments] = {}

    def entry(node) -> _ScopeAssignments:
        scope = tree.scope_node(node)
        key = id(scope) if scope is not None else 0
        found = index.get(key)
        if found is None:
            found = index[key] = _ScopeAssignments()
        return found

    for assign in tree.nodes(cst.Assign):
        here = entry(assign)
        for target in assign.targets:
            if type(target.target) is cst.Name:
                here.simple.setdefault(target.target.value, []).append(assign.value)
            else:
                here.unpacked.update(names_in_target(target.target))
    for cls in (cst.AugAssign, cst.For):
        for node in tree.nodes(cls):
            names = names_in_target(node.target)
            if names:
                entry(node).rebound.update(names)
    for node in tree.nodes(cst.AnnAssign):
        for bound in names_in_target(node.target):
            entry(node).annotated.setdefault(bound, []).append(node.value)
    return index


def is_bound_here(ctx, name: cst.Name) -> bool:
    """The name is (part of) an assignment, annotated assignment, loop, comprehension or ``as``
    target: it is bound there, not read (an augmented assignment's target is read too)."""
    node: cst.CSTNode = name
    parent = ctx.parent(node)
    while isinstance(parent, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        node, parent = parent, ctx.parent(parent)
    if isinstance(parent, (cst.AssignTarget, cst.For, cst.CompFor, cst.AnnAssign)):
        return parent.target is node
    return isinstance(parent, cst.AsName)


def single_assignment(tree: TreeIndex, name: cst.Name) -> Optional[cst.BaseExpression]:
    """The value of the one assignment to ``name`` in its scope, if there is exactly one.

    None when it is also bound by unpacking, ``+=``, a ``for`` target, a second
    annotated assignment or a bare annotation after one, or is a parameter."""
    scope = enclosing_scope(tree, name)
    here = _assignment_index(tree).get(id(scope) if scope is not None else 0)
    found: List[cst.BaseExpression] = []
    if here is not None:
        if name.value in here.unpacked:
            return None
        found.extend(here.simple.get(name.value, ()))
        if name.value in here.rebound:
            return None
        for value in here.annotated.get(name.value, ()):
            if value is not None and not found:
                found.append(value)
                continue
            return None
    if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
        params = scope.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name.value:
                return None
    return found[0] if len(found) == 1 else None


def parameter_default(tree: TreeIndex, expr) -> Optional[cst.BaseExpression]:
    """The default of the parameter of the enclosing function that the name ``expr`` reads, when
    that function never assigns the name (``def build(ds, persistent_workers=True): ...
    DataLoader(ds, persistent_workers=persistent_workers)``: what runs when a caller keeps it)."""
    if type(expr) is not cst.Name:
        return None
    scope = enclosing_scope(tree, expr)
    if not isinstance(scope, cst.FunctionDef) or scope_assignments(tree, scope, expr.value) != []:
        return None
    params = scope.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == expr.value:
            return param.default
    return None


def scope_assignments(tree: TreeIndex, scope, name: str) -> Optional[List[cst.BaseExpression]]:
    """Every value assigned to ``name`` by a plain or annotated assignment in ``scope``
    (None: the module), in source order; None when the name is also bound some other
    way there (unpacking, ``+=``, a ``for`` target)."""
    here = _assignment_index(tree).get(id(scope) if scope is not None else 0)
    if here is None:
        return []
    if name in here.unpacked or name in here.rebound:
        return None
    found = list(here.simple.get(name, ()))
    found.extend(value for value in here.annotated.get(name, ()) if value is not None)
    return found


def call_binding(func: cst.FunctionDef, name: str):
    """(the one call ``name`` is assigned from in ``func``, its position: -1 for the whole result,
    ``i`` for element ``i`` of a tuple unpacking) or None when ``name`` is bound any other way or more than once."""
    found = value_binding(func, name)
    return found if found is not None and isinstance(found[0], cst.Call) else None


def value_binding(scope, name: str):
    """(the one value ``name`` is assigned in ``scope``, a function or the module, and its position:
    -1 for the whole value, ``i`` for element ``i`` of a tuple unpacking) or None when ``name`` is
    bound any other way (a loop, ``with``, ``+=``) or more than once."""
    found = value_bindings(scope, name)
    return found[0] if found is not None and len(found) == 1 else None


def value_bindings(scope, name: str):
    """Each (value, position) ``name`` is assigned in ``scope`` (as ``value_binding``), or None when it
    is also bound any other way (a loop, ``with``, ``+=``, a chained or annotated assignment)."""
    roots = [scope.body] if isinstance(scope, cst.FunctionDef) else list(scope.body)
    found, assigns = [], {}
    for root in roots:
        for node in iter_subtree(root, into_scopes=False):
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    assigns[id(target)] = node
            if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)):
                targets = [node.target]
            elif isinstance(node, (cst.For, cst.CompFor, cst.WithItem)):
                targets = [getattr(node, "target", None) or getattr(node, "asname", None)]
            else:
                continue
            for target in targets:
                if target is not None and any(isinstance(n, cst.Name) and n.value == name for n in iter_subtree(target)):
                    found.append(node)
    out = []
    for node in found:
        assign = assigns.get(id(node))
        if not isinstance(node, cst.AssignTarget) or assign is None or len(assign.targets) != 1:
            return None
        target = node.target
        if isinstance(target, cst.Name):
            out.append((assign.value, -1))
            continue
        position = next((i for i, element in enumerate(getattr(target, "elements", ()))
                         if isinstance(element, cst.Element) and isinstance(element.value, cst.Name) and element.value.value == name), None)
        if position is None:
            return None
        out.append((assign.value, position))
    return out


def local_aliases(tree: TreeIndex, expr) -> List[cst.BaseExpression]:
    """The module-level names a local or parameter of a function is assigned in that function
    (``if debug: init = debugging_init``): what it may stand for besides what callers pass. Names
    the function binds itself, and attributes, are left out."""
    scope = tree.scope_node(expr) if isinstance(expr, cst.Name) else None
    if type(scope) is not cst.FunctionDef:
        return []
    params = {p.name.value for p in (*scope.params.posonly_params, *scope.params.params, *scope.params.kwonly_params)}
    return [value for value in scope_assignments(tree, scope, expr.value) or ()
            if isinstance(value, cst.Name) and value.value not in params and scope_assignments(tree, scope, value.value) == []]


def referenced_callables(tree: TreeIndex, names: ModuleNames, expr, _depth: int = 0) -> List[cst.BaseExpression]:
    """The names a callable argument (``worker_init_fn=...``) may stand for: itself (a name or an
    attribute), the function a ``functools.partial(f, ...)`` wraps, each arm of a conditional that is
    not ``None``, the module-level names a local or parameter is assigned (``local_aliases``), and
    what the one value a local is bound to stands for (``init = partial(seed_worker, seed=s) if s
    is not None else None``)."""
    if expr is None or _depth > 4:
        return []
    if isinstance(expr, cst.Call) and names.qualname(expr.func) == "functools.partial" and expr.args:
        return referenced_callables(tree, names, expr.args[0].value, _depth + 1)
    if isinstance(expr, cst.IfExp):
        return [v for arm in (expr.body, expr.orelse) if not (isinstance(arm, cst.Name) and arm.value == "None")
                for v in referenced_callables(tree, names, arm, _depth + 1)]
    aliases = local_aliases(tree, expr)
    if aliases:
        return aliases
    scope = tree.scope_node(expr) if isinstance(expr, cst.Name) else None
    if type(scope) is cst.FunctionDef:
        values = scope_assignments(tree, scope, expr.value) or []
        found = referenced_callables(tree, names, values[0], _depth + 1) \
            if len(values) == 1 and isinstance(values[0], (cst.Call, cst.IfExp)) else []
        if found:
            return found
    return [expr] if isinstance(expr, (cst.Name, cst.Attribute)) else []


def local_class_path(tree: TreeIndex, name: str) -> Optional[cst.ClassDef]:
    by_name = tree.memo(("bindings.classes_by_name",), lambda: _classes_by_name(tree))
    local = by_name.get(name, ())
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
        if len(parts) == 2:
            local = local_class_path(tree, parts[0])
            if local is not None and _constructs_own_class(local, parts[1]):
                return ("local", local)  # ``Cls.from_config(...)``: a classmethod returning ``cls(...)``
        qualified = names.qualname(func)
        return ("qualified", qualified) if qualified else None
    if isinstance(expr, cst.Name):
        value = single_assignment(tree, expr) or block_assignment(tree, expr)
        return class_ref(tree, names, value, _depth + 1) if value is not None else None
    return None


_BLOCKS = (cst.IndentedBlock, cst.Module)


def block_assignment(tree: TreeIndex, name: cst.Name) -> Optional[cst.BaseExpression]:
    """The value of ``name = value`` last before the statement that reads ``name``, in that
    statement's own block, when no statement in between binds the name (``else: ds = Lines(p);
    loader = DataLoader(ds)`` while the other branch binds ``ds`` to something else). None when
    the block binds it no such way first."""
    node, parent = name, tree.parent_of(name)
    while parent is not None and not isinstance(parent, _BLOCKS):
        node, parent = parent, tree.parent_of(parent)
    if parent is None:
        return None
    statements = list(parent.body)
    position = next((i for i, s in enumerate(statements) if s is node), None)
    for previous in reversed(statements[:position] if position is not None else ()):
        if isinstance(previous, cst.SimpleStatementLine):
            for small in reversed(previous.body):
                if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                        and isinstance(small.targets[0].target, cst.Name) and small.targets[0].target.value == name.value:
                    return small.value
                if _binds(small, name.value):
                    return None
        elif _binds(previous, name.value):
            return None
    return None


def _binds(node: cst.CSTNode, name: str) -> bool:
    """Some statement in ``node`` (nested scopes aside) binds or deletes ``name``."""
    for sub in iter_subtree(node, into_scopes=False):
        if isinstance(sub, (cst.FunctionDef, cst.ClassDef)) and sub.name.value == name:
            return True
        if isinstance(sub, (cst.Import, cst.ImportFrom)):
            return True  # (not followed)
        target = None
        if isinstance(sub, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del)):
            target = sub.target
        elif isinstance(sub, cst.WithItem) and sub.asname is not None:
            target = sub.asname.name
        elif isinstance(sub, cst.ExceptHandler) and sub.name is not None:
            target = sub.name.name
        if target is not None and name in names_in_target(target):
            return True
    return False


def _constructs_own_class(cls: cst.ClassDef, method: str) -> bool:
    """``method`` is a ``@classmethod`` of ``cls`` whose every ``return`` gives ``cls(...)``."""
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    for stmt in body:
        if not (isinstance(stmt, cst.FunctionDef) and stmt.name.value == method):
            continue
        if not any(isinstance(d.decorator, cst.Name) and d.decorator.value == "classmethod" for d in stmt.decorators):
            return False
        params = stmt.params.params
        first = params[0].name.value if params else None
        returns = _returns(stmt.body)
        return bool(returns) and all(
            isinstance(r, cst.Call) and isinstance(r.func, cst.Name) and r.func.value == first for r in returns
        )
    return False


def _returns(node: cst.CSTNode) -> List[Optional[cst.CSTNode]]:
    """The values of the ``return`` statements of a function body (not of nested functions)."""
    found: List[Optional[cst.CSTNode]] = []
    for child in node.children:
        if isinstance(child, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            continue
        if isinstance(child, cst.Return):
            found.append(child.value)
        else:
            found.extend(_returns(child))
    return found


def _classes_by_name(tree: TreeIndex) -> Dict[str, List[cst.ClassDef]]:
    by_name: Dict[str, List[cst.ClassDef]] = {}
    for cls in tree.nodes(cst.ClassDef):
        by_name.setdefault(cls.name.value, []).append(cls)
    return by_name


def _self_class(tree: TreeIndex, names: ModuleNames, func: cst.FunctionDef, param: cst.Param) -> Optional[str]:
    """``Module.Cls`` when ``param`` is the instance parameter of a method of module-level ``Cls``."""
    body = tree.parent_of(func)
    cls = tree.parent_of(body) if isinstance(body, cst.IndentedBlock) else None
    if not isinstance(cls, cst.ClassDef) or not isinstance(tree.parent_of(cls), cst.Module):
        return None
    positional = (*func.params.posonly_params, *func.params.params)
    if not positional or positional[0] is not param or binding_kind(func):
        return None
    return f"{names.modname}.{cls.name.value}"


def annotated_class(tree: TreeIndex, names: ModuleNames, expr: Optional[cst.CSTNode]) -> Optional[str]:
    """The qualified class name a parameter is annotated with (``def f(ds: Shards)``), when
    ``expr`` names that parameter and nothing in the function rebinds it; else None.
    A string annotation and ``Optional[...]``/unions are not read. The ``self`` of a method of
    a module-level class stands for an instance of that class (``DataLoader(self)``)."""
    if not isinstance(expr, cst.Name):
        return None
    scope = enclosing_scope(tree, expr)
    if not isinstance(scope, cst.FunctionDef):
        return None
    params = scope.params
    param = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params)
                  if p.name.value == expr.value), None)
    assigned = scope_assignments(tree, scope, expr.value)
    if param is None or assigned is None or assigned:
        return None
    if param.annotation is None:
        return _self_class(tree, names, scope, param)
    annotation = param.annotation.annotation
    if not isinstance(annotation, (cst.Name, cst.Attribute)):
        return None
    qualified = names.qualname(annotation)
    return None if not qualified or qualified.startswith(("builtins.", "typing.")) else qualified
