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
import os
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Set

import libcst as cst

from dslint.semantics.walk import TreeIndex, iter_subtree

BUILTIN_NAMES = frozenset(dir(builtins))

# Where torch and friends re-export a name, report the public spelling.
_CANONICAL_PREFIXES = (
    ("torch.utils.data.dataloader.", "torch.utils.data."),
    ("torch.utils.data.dataset.", "torch.utils.data."),
    ("torch.utils.data.sampler.", "torch.utils.data."),
    ("torch.utils.data.distributed.", "torch.utils.data."),
    ("torch.utils.data._utils.worker.", "torch.utils.data."),
    ("torchvision.datasets.vision.", "torchvision.datasets."),
    ("torchvision.datasets.folder.", "torchvision.datasets."),
    ("PIL.ImageFile.ImageFile", "PIL.Image.Image"),
)
_CANONICAL_EXACT = {
    "io.open": "builtins.open",
    "torch.utils.data.DataLoader2": "torch.utils.data.DataLoader",
}


def canonical(name: str) -> str:
    exact = _CANONICAL_EXACT.get(name)
    if exact is not None:
        return exact
    for prefix, replacement in _CANONICAL_PREFIXES:
        if name.startswith(prefix):
            return replacement + name[len(prefix) :]
    return name


def dotted_parts(node: cst.CSTNode) -> Optional[List[str]]:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything that is not a plain chain."""
    parts: List[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        parts.reverse()
        return parts
    return None


def dotted_text(node: cst.CSTNode) -> Optional[str]:
    parts = dotted_parts(node)
    return ".".join(parts) if parts else None


# --------------------------------------------------------------------------- modules


@lru_cache(maxsize=4096)
def _is_package_dir(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "__init__.py")) or os.path.isfile(
        os.path.join(directory, "__init__.pyi")
    )


def module_name_for(path: str) -> tuple[str, bool]:
    """Dotted module name of a file, from the packages (``__init__.py``) above it."""
    path = os.path.abspath(path)
    directory, filename = os.path.split(path)
    stem = filename.rsplit(".", 1)[0] if "." in filename else filename
    is_package = stem == "__init__"
    parts = [] if is_package else [stem]
    if is_package:
        parts = [os.path.basename(directory)]
        directory = os.path.dirname(directory)
    while directory and _is_package_dir(directory):
        parent = os.path.dirname(directory)
        parts.insert(0, os.path.basename(directory))
        if parent == directory:
            break
        directory = parent
    name = ".".join(p for p in parts if p)
    return (name or stem), is_package


def resolve_relative(level: int, module: Optional[str], modname: str, is_package: bool) -> Optional[str]:
    package = modname if is_package else modname.rpartition(".")[0]
    pieces = package.split(".") if package else []
    if level - 1 > len(pieces):
        return None
    base = pieces[: len(pieces) - (level - 1)] if level > 1 else pieces
    if module:
        base = base + module.split(".")
    return ".".join(base) or None


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


def _target_names(target: cst.CSTNode) -> Iterable[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


class Scope:
    """Names bound in one function, lambda or class body."""

    __slots__ = ("node", "imports", "others", "declared_global")

    def __init__(self, node: cst.CSTNode, modname: str, is_package: bool) -> None:
        self.node = node
        self.imports: Dict[str, Set[str]] = {}
        self.others: Set[str] = set()
        self.declared_global: Set[str] = set()
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            self._add_params(node.params)
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
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.others.add(star.name.value)

    def _bind(self, node: cst.CSTNode, modname: str, is_package: bool) -> None:
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            for local, full in import_bindings(node, modname, is_package):
                self.imports.setdefault(local, set()).add(full)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.others.add(node.name.value)
        elif isinstance(node, cst.AssignTarget):
            self.others.update(_target_names(node.target))
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            self.others.update(_target_names(node.target))
        elif isinstance(node, (cst.For, cst.CompFor)):
            self.others.update(_target_names(node.target))
        elif isinstance(node, (cst.WithItem, cst.ExceptHandler, cst.ExceptStarHandler)):
            asname = node.asname if isinstance(node, cst.WithItem) else node.name
            if asname is not None:
                self.others.update(_target_names(asname.name))
        elif isinstance(node, cst.NamedExpr):
            self.others.update(_target_names(node.target))
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            for item in node.names:
                self.declared_global.add(item.name.value)

    def lookup(self, name: str):
        """(found, qualified name or None)."""
        if name in self.others:
            return True, None
        targets = self.imports.get(name)
        if targets is not None:
            return True, (next(iter(targets)) if len(targets) == 1 else None)
        return False, None


class ModuleNames:
    """Module-level bindings of one file; shared by the summary and the rules."""

    def __init__(self, tree: TreeIndex, modname: str, is_package: bool) -> None:
        self.modname = modname
        self.is_package = is_package
        self.imports: Dict[str, Set[str]] = {}
        self.defs: Dict[str, str] = {}
        self.assigns: Dict[str, List[cst.CSTNode]] = {}
        self.star_imports: List[str] = []
        self._tree = tree
        self._scopes: Dict[int, Scope] = {}
        self._tails: Dict[frozenset, Set[str]] = {}
        for node in (*tree.nodes(cst.Import), *tree.nodes(cst.ImportFrom)):
            if self.scope_node(node) is not None:
                continue
            if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
                module = dotted_text(node.module) if node.module is not None else None
                target = resolve_relative(len(node.relative), module, modname, is_package) if node.relative else module
                if target:
                    self.star_imports.append(target)
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
                    for name in _target_names(target.target):
                        value = node.value if isinstance(target.target, cst.Name) else None
                        self.assigns.setdefault(name, []).append(value)
        for node in tree.nodes(cst.AnnAssign):
            if self.scope_node(node) is None:
                for name in _target_names(node.target):
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
        self._tails[key] = tails
        return tails

    # -- scopes
    def scope_node(self, node: cst.CSTNode):
        for ancestor in self._tree.ancestors(node):
            if isinstance(ancestor, _SCOPE_TYPES):
                return ancestor
        return None

    def scope(self, scope_node: cst.CSTNode) -> Scope:
        scope = self._scopes.get(id(scope_node))
        if scope is None:
            scope = Scope(scope_node, self.modname, self.is_package)
            self._scopes[id(scope_node)] = scope
        return scope

    # -- resolution
    def resolve_global(self, name: str, _depth: int = 0) -> Optional[str]:
        targets = self.imports.get(name)
        if targets is not None:
            if len(targets) == 1 and name not in self.defs:
                return next(iter(targets))
            return None
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
        return None

    def resolve_name(self, name: str, at: cst.CSTNode) -> Optional[str]:
        innermost = True
        for ancestor in self._tree.ancestors(at):
            if not isinstance(ancestor, _SCOPE_TYPES):
                continue
            if isinstance(ancestor, cst.ClassDef) and not innermost:
                continue
            innermost = False
            found, qualified = self.scope(ancestor).lookup(name)
            if found:
                return qualified
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
