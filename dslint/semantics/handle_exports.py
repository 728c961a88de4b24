"""The functions of a file that return an open handle, as its summary records them.

``handle_returns`` answers, for the checked file, which of its functions hand an open
handle to their caller. Other files call them too (``self.reader.read(p)`` where the
reader is a class of another module, ``from .io import open_shard``), so phase 1 records
the answer in each file's summary (``"handle_returns"``: local qualified name ->
[kind, position in a returned tuple or None]); ``project.ProjectIndex.returned_handle``
looks it up across files and ``ctx.view.returned_handle`` records the question.

Phase 1 has only the parse (no project index yet), so the questions ``handle_returns``
and ``lifetimes`` ask are answered here from the tree and the module's names alone; a
question about another file (a project helper that imports a module by name) has no
answer, and the function is then simply not recorded.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import single_assignment
from dslint.semantics.calls import UNKNOWN, literal_value
from dslint.semantics.handle_returns import Returned, returning_functions
from dslint.semantics.memoised import memoised_def
from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex


class _NoProject:
    """The project as phase 1 sees it: nothing is known about other files."""

    def function_facts(self, qualified: str):
        return None

    def returned_handle(self, qualified: str):
        return None

    def handle_function_names(self):
        return ()


class ParseFacts:
    """The parse-only subset of ``FileContext`` that ``handle_returns`` and ``lifetimes`` use."""

    def __init__(self, tree: TreeIndex, names: ModuleNames) -> None:
        self.tree = tree
        self.names = names
        self.view = _NoProject()

    def memo(self, key, compute):
        # apart from the rule phase's answers: those may depend on other files
        return self.tree.memo(("handle_exports.parse_only", *key), compute)

    def nodes(self, cls):
        return self.tree.nodes(cls)

    def parent(self, node):
        return self.tree.parent_of(node)

    def ancestors(self, node):
        return self.tree.ancestors(node)

    def enclosing_function(self, node, *, through_lambdas: bool = True) -> Optional[cst.FunctionDef]:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
            if isinstance(ancestor, cst.ClassDef) or (isinstance(ancestor, cst.Lambda) and not through_lambdas):
                return None
        return None

    def method_class(self, func: cst.FunctionDef) -> Optional[cst.ClassDef]:
        block = self.parent(func)
        owner = self.parent(block) if isinstance(block, cst.IndentedBlock) else None
        return owner if isinstance(owner, cst.ClassDef) else None

    def qualname(self, expr) -> Optional[str]:
        return self.names.qualname(expr)

    def call_name(self, call: cst.Call) -> Optional[str]:
        return self.names.qualname(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None

    def single_assignment(self, name: cst.Name):
        return single_assignment(self.tree, name)

    def literal(self, expr):
        if expr is None:
            return UNKNOWN
        return literal_value(expr, self._constant)

    def _constant(self, name: cst.Name):
        # a module-level name assigned once (not shadowed by a local of the same name)
        for ancestor in self.ancestors(name):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)) and self.names.scope(ancestor).lookup(name.value)[0]:
                return None
        if name.value in self.names.imports or name.value in self.names.defs:
            return None
        values = self.names.assigns.get(name.value)
        return values[0] if values and len(values) == 1 else None


def exported_handles(tree: TreeIndex, names: ModuleNames) -> List[Tuple[cst.FunctionDef, Returned]]:
    """(function, (kind, position)) for the module-level functions and methods of the
    file that return a handle they opened."""
    facts = ParseFacts(tree, names)
    out = []
    for func, answer in returning_functions(facts):
        owner = facts.method_class(func)
        if memoised_def(names, func):
            continue  # the cache owns what it returns (``memoised``)
        if isinstance(facts.parent(func if owner is None else owner), cst.Module):
            out.append((func, answer))
    return out
