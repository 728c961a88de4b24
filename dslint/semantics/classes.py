"""The class hierarchy inside one file: bases, method resolution, families.

One place answers "which classes of this file share an instance with this one" and
"which method runs for ``self.m``": rules and other semantics modules ask here and
never walk class bases themselves. Cross-file facts (is a class a dataset, which
methods a base in another module defines) come from ``FileContext.class_kind`` and
``ctx.view``.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.bindings import local_class_path
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree


def methods(cls: cst.ClassDef) -> Dict[str, cst.FunctionDef]:
    found: Dict[str, cst.FunctionDef] = {}
    if isinstance(cls.body, cst.IndentedBlock):
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef):
                found[stmt.name.value] = stmt
    return found


def local_mro(ctx, cls: cst.ClassDef) -> List[cst.ClassDef]:
    """The class and its bases that are defined in this file (by name), in MRO-ish order."""
    order: List[cst.ClassDef] = []
    stack = [cls]
    while stack:
        current = stack.pop(0)
        if any(current is seen for seen in order):
            continue
        order.append(current)
        bases = local_bases(ctx, current)
        stack[0:0] = bases
    return order


def find_method(ctx, cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    for klass in local_mro(ctx, cls):
        method = methods(klass).get(name)
        if method is not None:
            return method
    return None


def defines_method(ctx, cls: cst.ClassDef, name: str) -> bool:
    """The class or a base defines ``name``: in this file, or in another file of the project."""
    return find_method(ctx, cls, name) is not None or ctx.view.has_method(ctx.qualname_of_def(cls), name)


def reached_methods(ctx, cls: cst.ClassDef, start: cst.FunctionDef) -> List[cst.FunctionDef]:
    """``start`` and the methods of this file's classes it reaches through ``self.m``."""
    out = [start]
    work = [start]
    while work:
        func = work.pop()
        selfp = self_name(func)
        for node in iter_subtree(func.body, into_scopes=False):
            name = self_attr(node, selfp)
            if name is None:
                continue
            method = find_method(ctx, cls, name)
            if method is not None and not any(method is seen for seen in out):
                out.append(method)
                work.append(method)
    return out


def called_method(ctx, cls: cst.ClassDef, call: cst.Call, selfp: Optional[str]) -> Optional[cst.FunctionDef]:
    """The method of this file's classes that a ``self.m(...)`` call runs."""
    if isinstance(call.func, cst.Attribute) and self_attr(call.func, selfp):
        return find_method(ctx, cls, call.func.attr.value)
    return None


def has_class_attribute(ctx, cls: cst.ClassDef, name: str) -> bool:
    """A class body in the local MRO binds ``name`` (``name = ...``, ``name: T = ...`` or ``name: T``)."""
    for klass in local_mro(ctx, cls):
        if isinstance(klass.body, cst.IndentedBlock):
            for stmt in klass.body.body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        targets = []
                        if isinstance(small, cst.Assign):
                            targets = [t.target for t in small.targets]
                        elif isinstance(small, cst.AnnAssign):
                            targets = [small.target]
                        if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                            return True
    return False


def all_methods(ctx, cls: cst.ClassDef) -> List[cst.FunctionDef]:
    seen: Set[str] = set()
    out = []
    for klass in local_mro(ctx, cls):
        for name, method in methods(klass).items():
            if name not in seen:
                seen.add(name)
                out.append(method)
    return out


def local_bases(ctx, cls: cst.ClassDef) -> List[cst.ClassDef]:
    found = []
    for arg in cls.bases:
        if arg.keyword is not None:
            continue
        expr = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
        if isinstance(expr, cst.Name):
            local = local_class_path(ctx.tree, expr.value)
            if local is not None and local is not cls:
                found.append(local)
    return found


def class_family(ctx, cls: cst.ClassDef) -> List[cst.ClassDef]:
    """``cls``, its bases defined in this file and its subclasses defined in this file.

    These are the classes whose methods run on an instance that ``cls.__init__``
    (or one of its bases' ``__init__``) built.
    """
    memo = ctx.memo(("classes.family",), dict)
    cached = memo.get(id(cls))
    if cached is not None:
        return cached
    family: List[cst.ClassDef] = [cls]
    ids = {id(cls)}
    stack = [cls]
    while stack:
        for base in local_bases(ctx, stack.pop()):
            if id(base) not in ids:
                ids.add(id(base))
                family.append(base)
                stack.append(base)
    subs = {id(cls)}
    changed = True
    while changed:
        changed = False
        for other in ctx.nodes(cst.ClassDef):
            if id(other) in subs:
                continue
            if any(id(base) in subs for base in local_bases(ctx, other)):
                subs.add(id(other))
                changed = True
                if id(other) not in ids:
                    ids.add(id(other))
                    family.append(other)
    memo[id(cls)] = family
    return family


def dataset_inits(ctx) -> Iterator[Tuple[cst.ClassDef, cst.FunctionDef, str]]:
    """(dataset class, its ``__init__``, the self parameter) in this file."""
    for cls in ctx.dataset_classes():
        if not isinstance(cls.body, cst.IndentedBlock):
            continue
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
                param = self_name(stmt)
                if param:
                    yield cls, stmt, param


def constructions_of(ctx, cls: cst.ClassDef) -> List[cst.Call]:
    """The calls of this file that construct ``cls`` by its name (``Cls(...)``)."""
    name = cls.name.value
    qualified = f"{ctx.names.modname}.{ctx.qualname_of_def(cls)}"
    return [
        call
        for call in ctx.nodes(cst.Call)
        if isinstance(call.func, cst.Name) and call.func.value == name and ctx.qualname(call.func) == qualified
    ]
