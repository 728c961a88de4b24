"""Qualified names through imports, aliases and scopes, without running anything.

This is the project's own light resolver (libcst's QualifiedNameProvider costs ~8x a
parse). It follows pyflakes' model: module-level bindings from imports, ``def``/
``class`` statements and simple alias assignments; function scopes shadow them with
their parameters and local assignments; class scopes are visible only in the class
body. A name bound locally to anything but an import is a variable, so it resolves to
nothing: unknown is never guessed.
"""

from __future__ import annotations

import builtins
from typing import Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.modules import canonical, module_name_for, resolve_relative, spelled_tails  # noqa: F401  (re-exported)
from dslint.semantics.walk import TreeIndex, iter_subtree

_Attribute = cst.Attribute
_Name = cst.Name

BUILTIN_NAMES = frozenset(dir(builtins))

# What ``from M import *`` binds, for the library modules whose names rules ask about
# (their ``__all__``, as of torch 2.x). A star import of any other module binds names we
# cannot list without importing it; a name bound nowhere else in the file is taken
# from it only when it is the file's one such star import (the project index then
# finds the name in that module, or does not).
STAR_EXPORTS = {
    "torch.utils.data": frozenset({
        "BatchSampler", "ChainDataset", "ConcatDataset", "DFIterDataPipe", "DataChunk", "DataLoader", "Dataset",
        "DistributedSampler", "IterDataPipe", "IterableDataset", "MapDataPipe", "RandomSampler", "Sampler",
        "SequentialSampler", "StackDataset", "Subset", "SubsetRandomSampler", "TensorDataset",
        "WeightedRandomSampler", "default_collate", "default_convert", "functional_datapipe", "get_worker_info",
        "random_split",
    }),
    "torch.utils.data.distributed": frozenset({"DistributedSampler"}),
    "torch.utils.data.dataloader": frozenset({"DataLoader", "default_collate", "default_convert", "get_worker_info"}),
    "torch.utils.data.dataset": frozenset({
        "Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
        "random_split",
    }),
    "torch.utils.data.sampler": frozenset({
        "BatchSampler", "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler", "WeightedRandomSampler",
    }),
}
# Modules whose star import is known to bind no name of interest (so that it does not
# make a project module's star import ambiguous).
STAR_LIBRARIES = ("torch", "numpy", "os", "math", "typing", "torchvision", "PIL")


def star_target(star_imports: List[str], name: str, own: Optional[str] = None) -> Optional[str]:
    """The qualified name a module-level ``name`` bound by nothing else gets from the
    file's star imports, or None when it cannot be told. With several star imports of
    modules that are not libraries (``if tf: from .tf import *`` / ``else: from .pt import
    *``), the name is the module ``own``'s attribute: the project index follows each of
    its star imports (``alternatives.locate_all``)."""
    unknown = []
    for module in star_imports:
        exports = STAR_EXPORTS.get(module)
        if exports is not None:
            if name in exports:
                return f"{module}.{name}"
            continue
        if module == "torchvision.datasets" and name[:1].isupper():
            return f"{module}.{name}"
        if module.split(".", 1)[0] in STAR_LIBRARIES:
            continue
        unknown.append(module)
    if len(unknown) > 1:
        return f"{own}.{name}" if own else None
    return f"{unknown[0]}.{name}" if unknown else None


def dotted_parts(node: cst.CSTNode) -> Optional[List[str]]:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything that is not a plain chain."""
    # exact type tests: libcst's ABC isinstance is slow, and these classes have no subclasses
    parts: List[str] = []
    while type(node) is _Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is _Name:
        parts.append(node.value)
        parts.reverse()
        return parts
    return None


def binding_kind(func: cst.FunctionDef) -> Optional[str]:
    """"staticmethod" or "classmethod" when ``func`` is decorated so (also spelled
    ``builtins.staticmethod``), else None: whether a method's first parameter is the
    instance, the class or an ordinary argument."""
    for decorator in func.decorators:
        parts = dotted_parts(decorator.decorator)
        if parts and parts[-1] in ("staticmethod", "classmethod"):
            return parts[-1]
    return None


def dotted_text(node: cst.CSTNode) -> Optional[str]:
    parts = dotted_parts(node)
    return ".".join(parts) if parts else None


def import_bindings(node, modname: str, is_package: bool):
    """(local name, qualified name) pairs bound by an Import/ImportFrom statement."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted_text(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, full
            else:
                head = full.split(".")[0]
                yield head, head
    elif isinstance(node, cst.ImportFrom):
        module = dotted_text(node.module) if node.module is not None else None
        level = len(node.relative)
        if level:
            base = resolve_relative(level, module, modname, is_package)
        else:
            base = module
        if base is None or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted_text(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            yield local, f"{base}.{name}"


# --------------------------------------------------------------------------- scopes

_SCOPE_TYPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def target_names(target: cst.CSTNode) -> Iterable[str]:
    kind = type(target)
    if kind is cst.Name:
        yield target.value
    elif kind is cst.Tuple or kind is cst.List:
        for element in target.elements:
            yield from target_names(element.value)
    elif kind is cst.StarredElement:
        yield from target_names(target.value)


_IMPORT, _DEF, _TARGET, _AS, _GLOBAL = range(5)
# The node types that bind a name in a scope (all concrete: matched by exact type).
_BINDING_TYPES = {
    cst.Import: _IMPORT,
    cst.ImportFrom: _IMPORT,
    cst.FunctionDef: _DEF,
    cst.ClassDef: _DEF,
    cst.AssignTarget: _TARGET,
    cst.AnnAssign: _TARGET,
    cst.AugAssign: _TARGET,
    cst.For: _TARGET,
    cst.CompFor: _TARGET,
    cst.NamedExpr: _TARGET,
    cst.WithItem: _AS,
    cst.ExceptHandler: _AS,
    cst.ExceptStarHandler: _AS,
    cst.Global: _GLOBAL,
    cst.Nonlocal: _GLOBAL,
}


class Scope:
    """Names bound in one function, lambda or class body."""

    __slots__ = ("node", "imports", "others", "declared_global", "aliases", "_parent")

    def __init__(self, node: cst.CSTNode, modname: str, is_package: bool, tree: Optional[TreeIndex] = None) -> None:
        self.node = node
        self.imports: Dict[str, Set[str]] = {}
        self.others: Set[str] = set()
        self.declared_global: Set[str] = set()
        # a name the function binds once, as ``x = a.b`` (a dotted name): what it stands for, else None
        self.aliases: Dict[str, Optional[cst.BaseExpression]] = {}
        self._parent = tree.parent_of if tree is not None and isinstance(node, cst.FunctionDef) else None
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            self._add_params(node.params)
        buckets = tree.scope_buckets(node) if tree is not None else None
        if buckets is not None:
            # the body's nodes by type, from the tree's one walk: only binding types are visited
            body = node.body
            for cls in _BINDING_TYPES:
                for sub in buckets.get(cls, ()):
                    if sub is not body:
                        self._bind(sub, modname, is_package)
        else:
            body = node.body
            for sub in iter_subtree(body, into_scopes=False):
                if sub is body:
                    continue
                self._bind(sub, modname, is_package)
        self.others -= self.declared_global
        for name in self.declared_global:
            self.imports.pop(name, None)

    def _add_params(self, params: cst.Parameters) -> None:
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            self.others.add(param.name.value)
            self.aliases[param.name.value] = None
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.others.add(star.name.value)

    def _bind(self, node: cst.CSTNode, modname: str, is_package: bool) -> None:
        kind = _BINDING_TYPES.get(type(node))
        if kind is None:
            return
        if kind == _IMPORT:
            for local, full in import_bindings(node, modname, is_package):
                self.imports.setdefault(local, set()).add(full)
                self.aliases[local] = None
        elif kind == _DEF:
            self.others.add(node.name.value)
            self.aliases[node.name.value] = None
        elif kind == _TARGET:
            names = list(target_names(node.target))
            self.others.update(names)
            for name in names:
                value = None
                if name not in self.aliases and self._parent is not None and type(node) is cst.AssignTarget:
                    assign = self._parent(node)
                    if type(assign) is cst.Assign and len(assign.targets) == 1 and type(assign.value) in (cst.Name, cst.Attribute):
                        value = assign.value
                self.aliases[name] = value
        elif kind == _AS:
            asname = node.asname if type(node) is cst.WithItem else node.name
            if asname is not None:
                bound = list(target_names(asname.name))
                self.others.update(bound)
                self.aliases.update(dict.fromkeys(bound))
        elif kind == _GLOBAL:
            for item in node.names:
                self.declared_global.add(item.name.value)

    def alias(self, name: str) -> Optional[cst.BaseExpression]:
        """The dotted name a function's local stands for when its one binding is ``name = a.b``."""
        return self.aliases.get(name)

    def lookup(self, name: str):
        """(found, qualified name or None)."""
        if name in self.others:
            return True, None
        targets = self.imports.get(name)
        if targets is not None:
            return True, (next(iter(targets)) if len(targets) == 1 else None)
        return False, None


# Statements whose body may or may not run (a star import under one is a possible binding).
_BRANCH_TYPES = (cst.If, cst.Else, cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler, cst.For, cst.While)


class ModuleNames:
    """Module-level bindings of one file; shared by the summary and the rules."""

    def __init__(self, tree: TreeIndex, modname: str, is_package: bool) -> None:
        self.modname = modname
        self.is_package = is_package
        self.imports: Dict[str, Set[str]] = {}
        self.defs: Dict[str, str] = {}
        self.assigns: Dict[str, List[cst.CSTNode]] = {}
        self.star_imports: List[str] = []
        # star imports in a branch of an ``if``/``try`` (``if tf: from .tf import *`` /
        # ``else: from .pt import *``): each may bind the names, none surely does
        self.branch_stars: Set[str] = set()
        self._tree = tree
        self._scopes: Dict[int, Scope] = {}
        self._following: Set[tuple] = set()  # the function aliases being resolved (``resolve_name``)
        self._aliases: Optional[List[Tuple[str, str]]] = None  # (``_local_aliases``)
        self._tails: Dict[frozenset, Set[str]] = {}
        for node in (*tree.nodes(cst.Import), *tree.nodes(cst.ImportFrom)):
            if self.scope_node(node) is not None:
                continue
            if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
                module = dotted_text(node.module) if node.module is not None else None
                target = resolve_relative(len(node.relative), module, modname, is_package) if node.relative else module
                if target:
                    self.star_imports.append(target)
                    if any(type(a) in _BRANCH_TYPES for a in tree.ancestors(node)):
                        self.branch_stars.add(target)
                continue
            for local, full in import_bindings(node, modname, is_package):
                self.imports.setdefault(local, set()).add(full)
        for cls in (cst.ClassDef, cst.FunctionDef):
            for node in tree.nodes(cls):
                if self.scope_node(node) is None:
                    self.defs[node.name.value] = "class" if cls is cst.ClassDef else "function"
        for node in tree.nodes(cst.Assign):
            if self.scope_node(node) is None:
                for target in node.targets:
                    for name in target_names(target.target):
                        value = node.value if isinstance(target.target, cst.Name) else None
                        self.assigns.setdefault(name, []).append(value)
        for node in tree.nodes(cst.AnnAssign):
            if self.scope_node(node) is None:
                for name in target_names(node.target):
                    self.assigns.setdefault(name, []).append(node.value)

    def call_tails(self, last_names) -> Set[str]:
        """Names a call to something called ``last_names`` may be spelled with here.

        The last component itself, plus every import alias of it (``import X as Y``
        anywhere in the file) and every module-level alias assignment. Used to skip
        resolving calls that cannot match before doing the (costlier) resolution.
        """
        key = frozenset(last_names)
        cached = self._tails.get(key)
        if cached is not None:
            return cached
        key = frozenset(spelled for last in key for spelled in spelled_tails(last))
        tails = set(key)
        for alias in self._tree.nodes(cst.ImportAlias):
            if alias.asname is None or not isinstance(alias.asname.name, cst.Name):
                continue
            full = dotted_text(alias.name)
            if full and full.rsplit(".", 1)[-1] in key:
                tails.add(alias.asname.name.value)
        for name, values in self.assigns.items():
            if len(values) == 1 and values[0] is not None:
                parts = dotted_parts(values[0])
                if parts and parts[-1] in key:
                    tails.add(name)
        tails.update(name for name, last in self._local_aliases() if last in key)
        self._tails[key] = tails
        return tails

    def _local_aliases(self) -> List[Tuple[str, str]]:
        """(name, last part) of each ``name = a.b`` in the file (a function's alias: ``loader_class =
        torch.utils.data.DataLoader``), computed once."""
        if self._aliases is None:
            self._aliases = []
            for assign in self._tree.nodes(cst.Assign):
                value = assign.value
                last = value.attr.value if type(value) is cst.Attribute else (value.value if type(value) is cst.Name else None)
                if last and len(assign.targets) == 1 and type(assign.targets[0].target) is cst.Name:
                    self._aliases.append((assign.targets[0].target.value, last))
        return self._aliases

    # -- scopes
    def scope_node(self, node: cst.CSTNode):
        return self._tree.scope_node(node)

    def scope(self, scope_node: cst.CSTNode) -> Scope:
        scope = self._scopes.get(id(scope_node))
        if scope is None:
            scope = Scope(scope_node, self.modname, self.is_package, self._tree)
            self._scopes[id(scope_node)] = scope
        return scope

    # -- resolution
    def resolve_global(self, name: str, _depth: int = 0) -> Optional[str]:
        targets = self.imports.get(name)
        if targets is not None:
            if len(targets) == 1 and name not in self.defs:
                return next(iter(targets))
            return self._guarded_import(targets) if name not in self.defs else None
        if name in self.defs:
            return f"{self.modname}.{name}"
        values = self.assigns.get(name)
        if values is not None:
            if len(values) == 1 and values[0] is not None and _depth < 8:
                parts = dotted_parts(values[0])
                if parts and parts[0] != name:
                    head = self.resolve_global(parts[0], _depth + 1)
                    if head is not None:
                        return canonical(".".join([head, *parts[1:]]))
            return None
        if name in BUILTIN_NAMES:
            return f"builtins.{name}"
        if self.star_imports:
            return star_target(self.star_imports, name, self.modname)
        return None

    def _guarded_import(self, targets) -> Optional[str]:
        """A torch name imported beside a project fallback (``if HAS_TORCH: from torch.utils.data
        import DataLoader`` ``else: from pkg.dummy import Dummy as DataLoader``): the torch one,
        the only one under which data-loading code runs."""
        torch = [t for t in targets if t.split(".")[0] == "torch"]
        package = self.modname.split(".")[0]
        if len(torch) == 1 and all(t.split(".")[0] == package for t in targets if t not in torch) and "." in self.modname:
            return torch[0]
        return None

    def resolve_name(self, name: str, at: cst.CSTNode) -> Optional[str]:
        innermost = True
        scope_node = self._tree.scope_node
        ancestor = scope_node(at)
        while ancestor is not None:  # the enclosing scopes, innermost first
            if innermost or type(ancestor) is not cst.ClassDef:
                innermost = False
                scope = self._scopes.get(id(ancestor)) or self.scope(ancestor)
                found, qualified = scope.lookup(name)
                if found:
                    alias = scope.alias(name) if qualified is None else None
                    key = (id(ancestor), name)
                    if alias is not None and key not in self._following:
                        self._following.add(key)  # (``a = b.x`` and ``b = a.y``: followed once)
                        try:
                            return self.qualname(alias)  # ``loader_class = torch.utils.data.DataLoader``
                        finally:
                            self._following.discard(key)
                    return qualified
            ancestor = scope_node(ancestor)
        return self.resolve_global(name)

    def qualname(self, node: cst.CSTNode) -> Optional[str]:
        """Qualified name of a Name/Attribute chain, or None when unknown."""
        parts = dotted_parts(node)
        if not parts:
            return None
        head = self.resolve_name(parts[0], node)
        if head is None:
            return None
        return canonical(".".join([head, *parts[1:]]))
