"""FileContext: what a rule may ask about the file it checks.

Built once per file over the single parse; rules ask questions here instead of
re-deriving them: qualified names, enclosing functions and classes, which classes
are datasets, which code runs per sample, DataLoader arguments and literal values.
"""

from __future__ import annotations

from typing import Iterator, List, Optional

import libcst as cst

from dslint.semantics.bindings import class_ref, local_class_path, single_assignment
from dslint.semantics.calls import DATALOADER, UNKNOWN, BoundCall, Signature, literal_value
from dslint.semantics.names import ModuleNames, dotted_parts
from dslint.semantics.option_guards import node_guards, unchanged_params
from dslint.semantics.project import DATALOADER_ROOTS
from dslint.semantics.view import View
from dslint.semantics.regions import LOOP, WHOLE, RegionCache, self_name
from dslint.semantics.summary import local_qualname
from dslint.semantics.walk import TreeIndex

DATALOADER_NAME = "torch.utils.data.DataLoader"
#: displays whose value the module may change in place after binding them
MUTABLE_DISPLAYS = (cst.List, cst.Dict, cst.Set)
MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "setdefault", "pop", "remove", "clear",
                      "popitem", "discard", "sort", "reverse"})


class FileContext:
    def __init__(
        self,
        path: str,
        text: str,
        module: cst.Module,
        tree: TreeIndex,
        names: ModuleNames,
        regions: RegionCache,
        summary: dict,
        view: View,
        options: Optional[dict] = None,
    ) -> None:
        self.path = path
        self.text = text
        self.module = module
        self.tree = tree
        self.names = names
        self.regions = regions
        self.summary = summary
        self.view = view
        self.options = options or {}

    # ------------------------------------------------------------------ tree
    def memo(self, key, compute):
        """``compute()`` once per file and ``key`` (a tuple that starts with the asking
        module's name, e.g. ``("fork.family", id(cls))``): the one way rules and
        semantics cache per-file answers."""
        return self.tree.memo(key, compute)

    def nodes(self, cls):
        return self.tree.nodes(cls)

    def parent(self, node: cst.CSTNode):
        return self.tree.parent_of(node)

    def ancestors(self, node: cst.CSTNode):
        return self.tree.ancestors(node)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def enclosing_function(self, node: cst.CSTNode, *, through_lambdas: bool = True) -> Optional[cst.FunctionDef]:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
            if isinstance(ancestor, cst.ClassDef):
                return None
            if isinstance(ancestor, cst.Lambda) and not through_lambdas:
                return None
        return None

    def method_class(self, func: cst.FunctionDef) -> Optional[cst.ClassDef]:
        """The class whose body defines ``func`` directly, if any."""
        block = self.parent(func)
        if isinstance(block, cst.IndentedBlock):
            owner = self.parent(block)
            if isinstance(owner, cst.ClassDef):
                return owner
        return None

    def qualname_of_def(self, node) -> str:
        return local_qualname(node, self.tree)

    # ------------------------------------------------------------------ names
    def qualname(self, expr: cst.CSTNode) -> Optional[str]:
        return self.names.qualname(expr)

    def call_name(self, call: cst.Call) -> Optional[str]:
        if isinstance(call.func, (cst.Name, cst.Attribute)):
            return self.names.qualname(call.func)
        return None

    def calls_to(self, *qualified: str) -> Iterator[cst.Call]:
        wanted = set(qualified)
        last = self.names.call_tails({q.rsplit(".", 1)[-1] for q in wanted})
        for call in self.nodes(cst.Call):
            func = call.func
            tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
            if tail in last and self.call_name(call) in wanted:
                yield call

    # ------------------------------------------------------------------ datasets
    def class_kind(self, cls: cst.ClassDef) -> Optional[str]:
        return self.view.class_kind(self.qualname_of_def(cls))

    def dataset_classes(self) -> List[cst.ClassDef]:
        return self.memo(("context.dataset_classes",), lambda: [c for c in self.nodes(cst.ClassDef) if self.class_kind(c)])

    def dataset_class_of(self, node: cst.CSTNode) -> Optional[cst.ClassDef]:
        """The dataset class whose method contains ``node``."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.ClassDef):
                return ancestor if self.class_kind(ancestor) else None
        return None

    def per_sample_mode(self, func: cst.FunctionDef) -> Optional[str]:
        answer = self.view.per_sample(self.qualname_of_def(func))
        return answer[0] if answer else None

    def per_sample_label(self, func: cst.FunctionDef) -> Optional[str]:
        answer = self.view.per_sample(self.qualname_of_def(func))
        return answer[1] if answer else None

    def is_per_sample(self, node: cst.CSTNode) -> bool:
        """Does ``node`` run once for every sample the dataset produces?"""
        chain = []
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                break
            if isinstance(ancestor, cst.ClassDef):
                return False
            chain.append(ancestor)
        else:
            return False
        func = ancestor
        mode = self.per_sample_mode(func)
        if mode is None:
            return False
        in_loop, lazy = self.regions.get(func).classify(node, chain)
        if lazy or self.in_off_branch(node, func):
            return False
        return mode == WHOLE or (mode == LOOP and in_loop)

    def in_off_branch(self, node: cst.CSTNode, func: cst.FunctionDef) -> bool:
        """``node`` runs only under an ``if`` whose option or parameter is off at every
        per-sample arrival of ``func`` (``option_reach``): in no DataLoader worker."""
        off = self.memo(("context.off_guards", id(func)), lambda: self.view.off_guards(self.qualname_of_def(func)))
        if not off:
            return False
        selfp = self_name(func)
        return any(g in off for g in node_guards(node, self.tree.parent, func, selfp, unchanged_params(func, selfp)))

    def in_dataset_code(self, node: cst.CSTNode) -> bool:
        """Inside a method of a dataset class, or a function that runs per sample."""
        func = self.enclosing_function(node)
        while func is not None:
            owner = self.method_class(func)
            if owner is not None and self.class_kind(owner):
                return True
            if self.per_sample_mode(func):
                return True
            func = self.enclosing_function(func)
        return False

    def dataset_kind(self, expr: Optional[cst.CSTNode]) -> Optional[str]:
        """Kind of the dataset an expression evaluates to, when it can be told statically."""
        ref = class_ref(self.tree, self.names, expr)
        if ref is None:
            return None
        if ref[0] == "local":
            return self.class_kind(ref[1])
        return self.view.kind_of(ref[1])

    def class_kind_of_ref(self, ref: cst.CSTNode) -> Optional[str]:
        """Dataset kind of the class a Name/Attribute refers to."""
        if isinstance(ref, cst.Name):
            local = local_class_path(self.tree, ref.value)
            if local is not None:
                return self.class_kind(local)
        return self.view.kind_of(self.qualname(ref))

    def single_assignment(self, name: cst.Name) -> Optional[cst.BaseExpression]:
        """The value of the one assignment to ``name`` in its scope, if there is one."""
        return single_assignment(self.tree, name)

    # ------------------------------------------------------------------ literals
    def literal(self, expr: Optional[cst.CSTNode]):
        if expr is None:
            return UNKNOWN
        return literal_value(expr, self.module_constant)

    def module_constant(self, name: cst.Name) -> Optional[cst.BaseExpression]:
        """The value of a module-level name assigned exactly once, not shadowed where used."""
        for ancestor in self.ancestors(name):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                found, _ = self.names.scope(ancestor).lookup(name.value)
                if found:
                    return None
        if name.value in self.names.imports or name.value in self.names.defs:
            return None
        values = self.names.assigns.get(name.value)
        if values and len(values) == 1 and values[0] is not None:
            if isinstance(values[0], MUTABLE_DISPLAYS) and name.value in self._mutated_module_names():
                return None  # ``parts = []`` then ``parts.append(...)``: not the display's value
            return values[0]
        return None

    def _mutated_module_names(self) -> frozenset:
        """Names the module changes in place: ``x.append(...)`` (any mutating method),
        ``x[k] = ...``, ``del x[k]``, ``x += ...``."""
        def compute():
            out = set()
            for call in self.nodes(cst.Call):
                func = call.func
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value in MUTATORS:
                    out.add(func.value.value)
            for node in self.nodes(cst.AugAssign):
                if isinstance(node.target, cst.Name):
                    out.add(node.target.value)
            for node in self.nodes(cst.Subscript):
                if isinstance(node.value, cst.Name) and isinstance(self.parent(node), (cst.AssignTarget, cst.Del)):
                    out.add(node.value.value)
            return frozenset(out)
        return self.memo(("context.mutated",), compute)

    # ------------------------------------------------------------------ loaders
    def is_dataloader_call(self, call: cst.Call) -> bool:
        return self.call_name(call) == DATALOADER_NAME

    def dataloader_calls(self) -> List[BoundCall]:
        return self.memo(("context.loaders",), lambda: [BoundCall(c, DATALOADER) for c in self.calls_to(DATALOADER_NAME)])

    def bind(self, call: cst.Call, signature: Signature) -> BoundCall:
        return BoundCall(call, signature)

    def value(self, bound: BoundCall, name: str):
        """Literal value of an argument; the default when absent and nothing is hidden."""
        arg = bound.arg(name)
        if arg is not None:
            return self.literal(arg.value)
        if bound.is_open:
            return UNKNOWN
        return bound.signature.defaults.get(name, UNKNOWN)

    # ------------------------------------------------------------------ positions
    def line(self, node: cst.CSTNode) -> int:
        """The 1-based row where ``node`` starts (for messages that point at another line)."""
        from dslint.positions import node_ranges

        return node_ranges(self.module, [node])[id(node)][0][0]


__all__ = ["FileContext", "DATALOADER_NAME", "DATALOADER_ROOTS", "UNKNOWN", "dotted_parts"]

