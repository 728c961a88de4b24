"""Which bindings a name has where it is read, inside one file.

``ScopeBindings`` tables every way a name is bound in a function, lambda or the
module (assignments, tuple unpacking, parameters, ``def``/``class``, imports,
``global``, and the opaque ones: loop targets, ``with ... as``, ``except ... as``,
augmented assignments, ``del``, ``match`` captures), and answers which of those a
read of the name at a given node sees. The loop index (``loops.py``) builds on it
through ``module_calls.py`` and ``value_flow.py``; one instance serves one file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

import libcst as cst

from dslint.semantics.names import dotted_parts
from dslint.semantics.walk import iter_subtree

COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


@dataclass(frozen=True, eq=False)
class Binding:
    """One way a name is bound in a scope."""

    kind: str  #: "value", "param", "def", "global" or "other"
    node: cst.CSTNode  #: the statement, parameter or definition
    value: Optional[cst.BaseExpression] = None
    index: Optional[int] = None  #: position in a tuple-unpacking target


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


def names_used(expr: cst.CSTNode) -> Iterator[str]:
    """Variable names read in an expression (not attribute names or keywords)."""
    skip = set()
    for node in iter_subtree(expr):
        if isinstance(node, cst.Attribute):
            skip.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            skip.add(id(node.keyword))
        elif isinstance(node, cst.Name) and id(node) not in skip:
            yield node.value


def is_none(node: Optional[cst.CSTNode]) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def is_none_test(test: cst.CSTNode, name: str) -> bool:
    """``test`` is ``<name> is None``."""
    return (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == name
            and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Is)
            and is_none(test.comparisons[0].comparator))


def none_replacements(ctx, func: cst.FunctionDef, name: str) -> Optional[List[cst.BaseExpression]]:
    """The values a function assigns to its parameter ``name``, when each assignment sits directly
    under ``if <name> is None:`` (``if collate_fn is None: collate_fn = default_collate``): a value
    the caller gives passes unchanged. None when ``name`` is no parameter or is rebound otherwise."""
    if not any(p.name.value == name for p in (*func.params.params, *func.params.kwonly_params)):
        return None
    out = []
    for node in ctx.tree.scope_nodes(func, cst.AssignTarget):
        if not (isinstance(node.target, cst.Name) and node.target.value == name):
            continue
        block = next((a for a in ctx.ancestors(node) if isinstance(a, (cst.If, cst.Else, cst.FunctionDef))), None)
        assign = ctx.parent(node)
        if not isinstance(block, cst.If) or not is_none_test(block.test, name) or not isinstance(assign, cst.Assign):
            return None
        out.append(assign.value)
    return out


class ScopeBindings:
    """The name bindings of one file, tabled per scope on first use."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self._bindings_memo: Dict[int, Dict[str, List[Binding]]] = {}
        self._defs_by_name: Optional[Dict[str, List[cst.CSTNode]]] = None

    def bindings(self, scope: cst.CSTNode) -> Dict[str, List[Binding]]:
        """Name -> bindings in one function, lambda or the module (nested scopes excluded)."""
        table = self._bindings_memo.get(id(scope))
        if table is not None:
            return table
        table = {}

        def add(name: str, binding: Binding) -> None:
            table.setdefault(name, []).append(binding)

        if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
            params = scope.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                add(param.name.value, Binding("param", param))
            for star in (params.star_arg, params.star_kwarg):
                if isinstance(star, cst.Param):
                    add(star.name.value, Binding("other", star))
            body = scope.body
        else:
            body = scope
        for node in iter_subtree(body, into_scopes=False):
            if node is body or node is scope:
                continue
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    self._bind_target(target.target, node.value, node, add)
            elif isinstance(node, cst.AnnAssign):
                if node.value is not None:
                    self._bind_target(node.target, node.value, node, add)
            elif isinstance(node, cst.NamedExpr):
                self._bind_target(node.target, node.value, node, add)
            elif isinstance(node, cst.WithItem):
                if node.asname is not None:
                    if isinstance(node.asname.name, cst.Name):
                        add(node.asname.name.value, Binding("value", node, node.item))
                    else:
                        for name in names_in_target(node.asname.name):
                            add(name, Binding("other", node))
            elif isinstance(node, (cst.AugAssign, cst.For)):
                for name in names_in_target(node.target):
                    add(name, Binding("other", node))
            elif isinstance(node, cst.ExceptHandler):
                if node.name is not None:
                    for name in names_in_target(node.name.name):
                        add(name, Binding("other", node))
            elif isinstance(node, cst.Import):
                for alias in node.names:
                    local = alias.asname.name if alias.asname is not None else None
                    name = local.value if isinstance(local, cst.Name) else (dotted_parts(alias.name) or ["?"])[0]
                    add(name, Binding("other", node))
            elif isinstance(node, cst.ImportFrom):
                if not isinstance(node.names, cst.ImportStar):
                    for alias in node.names:
                        local = alias.asname.name if alias.asname is not None else alias.name
                        if isinstance(local, cst.Name):
                            add(local.value, Binding("other", node))
            elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                add(node.name.value, Binding("def", node))
            elif isinstance(node, (cst.Global, cst.Nonlocal)):
                for item in node.names:
                    add(item.name.value, Binding("global", node))
            elif isinstance(node, cst.Del):
                for name in names_in_target(node.target):
                    add(name, Binding("other", node))
            elif isinstance(node, (cst.MatchAs, cst.MatchStar)) and node.name is not None:
                add(node.name.value, Binding("other", node))
        self._bindings_memo[id(scope)] = table
        return table

    @staticmethod
    def _bind_target(target, value, stmt, add) -> None:
        if isinstance(target, cst.Name):
            add(target.value, Binding("value", stmt, value))
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            if all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in elements):
                for i, element in enumerate(elements):
                    add(element.value.value, Binding("value", stmt, value, i))
            else:
                for name in names_in_target(target):
                    add(name, Binding("other", stmt))

    def name_bindings(self, name: str, at: cst.CSTNode) -> Tuple[Optional[cst.CSTNode], Optional[List[Binding]]]:
        """(scope, bindings) of ``name`` as read at ``at``; bindings None when it cannot be told."""
        for ancestor in self.ctx.ancestors(at):
            if isinstance(ancestor, COMPREHENSIONS):
                comp = ancestor.for_in
                while comp is not None:
                    if name in names_in_target(comp.target):
                        return ancestor, None
                    comp = comp.inner_for_in
            elif isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                found = self.bindings(ancestor).get(name)
                if found:
                    if any(b.kind == "global" for b in found):
                        break
                    return ancestor, found
        module = self.ctx.module
        return module, self.bindings(module).get(name, [])

    def defs(self) -> Dict[str, List[cst.CSTNode]]:
        """Every ``def``/``class`` of the file by name."""
        if self._defs_by_name is None:
            self._defs_by_name = {}
            for cls in (cst.ClassDef, cst.FunctionDef):
                for node in self.ctx.nodes(cls):
                    self._defs_by_name.setdefault(node.name.value, []).append(node)
        return self._defs_by_name
