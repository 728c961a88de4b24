"""A file's cross-file facts, as plain JSON-able data.

The project index (``project.py``) is built from these summaries alone, so a file
that is unchanged never needs re-parsing to take part in cross-file analysis
(dataset classes derived across files, methods inherited from another file,
``worker_init_fn`` helpers). Everything here is derived from the one parse of the
file and kept small.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from dslint.semantics.bindings import class_ref
from dslint.semantics.calls import DATALOADER, UNKNOWN, BoundCall, literal_value
from dslint.semantics.modules import canonical
from dslint.semantics.names import ModuleNames, dotted_parts
from dslint.semantics.regions import RegionCache, is_cached
from dslint.semantics.walk import TreeIndex, body_buckets

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
WORKER_INFO = "torch.utils.data.get_worker_info"


def local_qualname(node: cst.CSTNode, tree: TreeIndex) -> str:
    """``Outer.Inner`` / ``func.<locals>.Local`` path of a class or function in its module."""
    memo = tree.memo(("summary.local_qualname",), dict)
    found = memo.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    parts = [node.name.value]
    for ancestor in tree.ancestors(node):
        kind = type(ancestor)
        if kind is cst.ClassDef:
            parts.append(ancestor.name.value)
        elif kind is cst.FunctionDef:
            parts.append("<locals>")
            parts.append(ancestor.name.value)
    result = ".".join(reversed(parts))
    memo[id(node)] = (node, result)
    return result


class Summarizer:
    def __init__(self, tree: TreeIndex, names: ModuleNames, regions: RegionCache) -> None:
        self.tree = tree
        self.names = names
        if getattr(regions, "tree", None) is None:
            regions.tree = tree  # per-function facts from the tree's per-scope node lists
        self.regions = regions
        self.worker_info_tails = names.call_tails({"get_worker_info"})
        self.class_paths: Dict[str, List[str]] = {}
        for node in tree.nodes(cst.ClassDef):
            self.class_paths.setdefault(node.name.value, []).append(local_qualname(node, tree))

    def resolve_class_ref(self, expr: cst.CSTNode, owner: Optional[cst.ClassDef] = None) -> Optional[str]:
        """Qualified name of a base-class expression (``Dataset[int]`` counts as ``Dataset``).

        A base evaluates before its class's name is bound: in ``class Dataset(Dataset)``
        the base is the imported ``Dataset``, not the class itself."""
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        parts = dotted_parts(expr)
        if not parts:
            return None
        if owner is not None and parts[0] == owner.name.value and self.names.scope_node(owner) is None:
            targets = self.names.imports.get(parts[0])
            if targets is not None and len(targets) == 1:
                return canonical(".".join([next(iter(targets)), *parts[1:]]))
        qualified = self.names.qualname(expr)
        if qualified is None and len(parts) == 1:
            local = self.class_paths.get(parts[0], [])
            if len(local) == 1:
                return f"{self.names.modname}.{local[0]}"
        return qualified

    def function_facts(self, func: cst.FunctionDef) -> dict:
        """Calls (in source order), ``get_worker_info`` use and attributes assigned on
        other objects, in the body of ``func`` (nested scopes excluded).

        The body's nodes come by type from the tree's one walk
        (``TreeIndex.scope_buckets``), not from a walk of their own."""
        regions = self.regions.get(func)
        tree = self.tree
        buckets = body_buckets(func, tree)
        self_param = regions.self_param
        calls = []
        uses_worker_info = False
        assigned = set()
        Attribute, Name = cst.Attribute, cst.Name
        for node in buckets.get(cst.AssignTarget, ()):
            target = node.target
            if type(target) is Attribute:
                owner = target.value
                if not (type(owner) is Name and owner.value == self_param):
                    assigned.add(target.attr.value)
        plain = not regions._loop_bodies and not regions.lazy_bodies
        parent = tree.parent
        for node in buckets.get(cst.Call, ()):
            target = self.call_target(node, self_param)
            if target is None:
                continue
            if plain:
                in_loop = False
            else:
                ancestors = []
                current = parent.get(id(node))
                while current is not None and current is not func:
                    ancestors.append(current)
                    current = parent.get(id(current))
                in_loop, lazy = regions.classify(node, ancestors)
                if lazy:
                    continue
            calls.append([target[0], target[1], in_loop])
        tails = self.worker_info_tails
        for node in buckets.get(Name, ()):
            if node.value in tails and _is_worker_info_ref(node, self.names):
                uses_worker_info = True
                break
        if not uses_worker_info:
            for node in buckets.get(Attribute, ()):
                if node.attr.value in tails and _is_worker_info_ref(node, self.names):
                    uses_worker_info = True
                    break
        return {
            "calls": calls,
            "gen": regions.is_generator,
            "cached": is_cached(func),
            "worker_info": uses_worker_info,
            "assigns": sorted(assigned),
            # any call at all in the body (builtins included): a method without one only indexes
            "calls_any": bool(buckets.get(cst.Call)),
        }

    def loader_facts(self, call: cst.Call) -> dict:
        """What other files need to know about a DataLoader built here."""
        bound = BoundCall(call, DATALOADER)
        ref = class_ref(self.tree, self.names, bound.expr("dataset"))
        dataset = None
        if ref is not None:
            dataset = f"{self.names.modname}.{local_qualname(ref[1], self.tree)}" if ref[0] == "local" else ref[1]

        def constant(name_node):
            values = self.names.assigns.get(name_node.value)
            if values and len(values) == 1 and name_node.value not in self.names.imports:
                return values[0]
            return None

        def literal(name):
            if bound.passed(name):
                value = literal_value(bound.expr(name), constant)
            else:
                value = UNKNOWN if bound.is_open else DATALOADER.defaults.get(name)
            return None if value is UNKNOWN else value

        return {
            "dataset": dataset,
            "num_workers": literal("num_workers"),
            "persistent_workers": literal("persistent_workers"),
            "worker_init_fn": self.function_ref(bound.expr("worker_init_fn")),
            "collate_fn": self.function_ref(bound.expr("collate_fn")),
        }

    def function_ref(self, expr) -> Optional[str]:
        """Qualified name of a function passed by name (or through functools.partial)."""
        if expr is None:
            return None
        if isinstance(expr, cst.Call) and self.names.qualname(expr.func) == "functools.partial" and expr.args:
            expr = expr.args[0].value
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self.names.qualname(expr)
        return None

    def call_target(self, call: cst.Call, self_param: Optional[str]):
        func = call.func
        kind = type(func)
        if kind is cst.Attribute:
            value = func.value
            if self_param and type(value) is cst.Name and value.value == self_param:
                return ("self", func.attr.value)
            if (
                type(value) is cst.Call
                and type(value.func) is cst.Name
                and value.func.value == "super"
            ):
                return ("super", func.attr.value)
        if kind is cst.Name or kind is cst.Attribute:
            qualified = self.names.qualname(func)
            if qualified and not qualified.startswith("builtins."):
                return ("func", qualified)
        return None


def _dataloader_calls(tree: TreeIndex, names: ModuleNames):
    tails = names.call_tails({"DataLoader"})
    for call in tree.nodes(cst.Call):
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        if tail in tails and names.qualname(func) == "torch.utils.data.DataLoader":
            yield call


_ONE_SHOT_BUILTINS = frozenset(
    {"builtins.iter", "builtins.map", "builtins.filter", "builtins.zip", "builtins.enumerate", "builtins.reversed"}
)


def _passed_iterators(tree: TreeIndex, names: ModuleNames) -> List[list]:
    """Arguments of class constructions (a called name whose last part, less leading
    underscores, is capitalised) that may be one-shot iterators: ``[callee, position or
    keyword, "gen" | "iter" | "call", the called function for "call"]``. The index decides
    whether a "call" makes a generator (a generator function of the project)."""
    found = []
    for call in tree.nodes(cst.Call):
        if not isinstance(call.func, (cst.Name, cst.Attribute)):
            continue
        last = (call.func.attr if isinstance(call.func, cst.Attribute) else call.func).value.lstrip("_")
        if not last[:1].isupper() or any(
            type(a) is cst.FunctionDef and a.name.value.startswith("test_") for a in tree.ancestors(call)
        ):
            continue  # (a test function drains what it passes once, on purpose)
        callee = None
        position = 0
        for arg in call.args:
            if arg.star:
                if arg.keyword is None and arg.star == "*":
                    position = None  # positions after *args are unknown
                continue
            where = arg.keyword.value if arg.keyword is not None else position
            if arg.keyword is None and position is not None:
                position += 1
            if where is None:
                continue
            value, kind, target = arg.value, None, None
            if isinstance(value, cst.GeneratorExp):
                kind = "gen"
            elif isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)):
                target = names.qualname(value.func)
                if target in _ONE_SHOT_BUILTINS and not (target == "builtins.iter" and len(value.args) != 1):
                    kind, target = "iter", None
                elif target and not target.startswith("builtins."):
                    kind = "call"
            if kind is None:
                continue
            callee = callee or names.qualname(call.func)
            if callee is None:
                break
            found.append([callee, where, kind, target])
    return found


def _is_worker_info_ref(node: cst.CSTNode, names: ModuleNames) -> bool:
    parts = dotted_parts(node)
    if not parts or parts[-1] not in names.call_tails({"get_worker_info"}):  # aliases too
        return False
    return names.qualname(node) == WORKER_INFO


def summarize(tree: TreeIndex, names: ModuleNames, regions: RegionCache) -> dict:
    s = Summarizer(tree, names, regions)
    classes: Dict[str, dict] = {}
    functions: Dict[str, dict] = {}
    for node in tree.nodes(cst.ClassDef):
        qual = local_qualname(node, tree)
        methods = {}
        for stmt in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if isinstance(stmt, cst.FunctionDef):
                methods[stmt.name.value] = s.function_facts(stmt)
        classes[qual] = {
            "bases": [s.resolve_class_ref(arg.value, node) for arg in node.bases if arg.keyword is None],
            "methods": methods,
        }
    for node in tree.nodes(cst.FunctionDef):
        parent = tree.parent_of(node)
        # methods are recorded with their class; everything else by its path
        if type(parent) is cst.IndentedBlock and type(tree.parent_of(parent)) is cst.ClassDef:
            continue
        functions[local_qualname(node, tree)] = s.function_facts(node)
    imports = {k: next(iter(v)) for k, v in names.imports.items() if len(v) == 1}
    loaders = [s.loader_facts(call) for call in _dataloader_calls(tree, names)]
    references = sorted({ref for facts in loaders for ref in (facts["worker_init_fn"], facts["collate_fn"]) if ref})
    return {
        "module": names.modname,
        "package": names.is_package,
        "imports": imports,
        "star_imports": list(names.star_imports),
        "classes": classes,
        "functions": functions,
        "loaders": loaders,
        "references": references,
        "passed_iterators": _passed_iterators(tree, names),
    }
