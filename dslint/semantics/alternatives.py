"""Project facts that need every definition a name may have, asked of the project index.

* ``locate_all``: every class or function a qualified name may name. A package that
  picks its implementation at import time (``if tf_available(): from .tf import *`` /
  ``elif torch_available(): from .pt import *``) binds a name to one of several
  definitions; each is a possible one, and code reached through the name may be any of
  them. A later star import outside any branch replaces what came before, as Python does.
* ``duck_roots``: project classes that are datasets without a torch base: the class
  defining the ``__getitem__`` (with a ``__len__``) of an instance that a ``DataLoader``
  of the project receives (directly, wrapped by ``Subset``/``ConcatDataset``, or through
  a parameter of a project function: ``dataset_uses``), or that a dataset wrapper of
  the project indexes per sample (its ``__getitem__`` returns ``self.inner[index]`` of
  the object its ``__init__`` was given) is the project's own dataset base, and every
  class deriving from it is a dataset, as a subclass of torch's ``Dataset`` is.
* ``construction_reach``: the functions that run while a dataset object is built:
  reached from its ``__init__`` through ``self.m()``, ``super().m()`` and plain calls,
  across files (a module-level helper called for every image while ``__init__`` builds
  the index).

Plain functions of a ``ProjectIndex`` (no libcst); files the index wanted but did not
have (a star-imported module not summarised yet) are noted in ``index.wanted_paths``,
which the engine pulls into the next round.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from dslint.semantics.modules import canonical

Key = Tuple[str, str]

MAX_DEPTH = 6  #: import and star-import steps followed for one name
MAX_VARIANTS = 4  #: MROs followed for one class


def locate_all(index, qualified: str, from_path: Optional[str], table: str = "classes", _depth: int = 0) -> List[Key]:
    """Where the class (or function, ``table="functions"``) ``qualified`` may be defined:
    one key, several when star imports in branches each bring a definition, none when
    it is not a (summarised) project definition."""
    parts = qualified.split(".")
    for i in range(len(parts) - 1, 0, -1):
        found = _module_file(index, parts[:i], from_path)
        if found is not None:
            return _in_module(index, found, parts[i:], table, _depth) if found else []
    return []


def _module_file(index, parts: List[str], from_path: Optional[str]):
    """The summarised file of module ``parts``; "" when it is in the project but ambiguous or
    not summarised (noted in ``wanted_paths``); None when no checked file is that module."""
    paths = index.by_module.get(".".join(parts)) or index.namespace_paths(parts)
    if not paths:
        return None
    path = index.pick(paths, from_path)
    if path is not None and path not in index.summaries and getattr(index, "pull_wanted", True):
        index.wanted_paths.add(path)
    return path if path is not None and path in index.summaries else ""


def _in_module(index, path: str, rest: List[str], table: str, depth: int) -> List[Key]:
    """What module ``path`` binds ``rest`` to, once per (file, name): a name asked through many
    star imports is looked up once. A star import names its module exactly."""
    memo, memo_key = index.alternatives_memo, (path, ".".join(rest), table)
    if memo_key in memo:
        return memo[memo_key]
    memo[memo_key] = []  # cycle guard
    summary = index.summaries[path]
    name = ".".join(rest)
    found: List[Key] = []
    if name in summary[table]:
        found = [(path, name)]
    elif depth < MAX_DEPTH and summary["imports"].get(rest[0]) is not None:
        found = locate_all(index, canonical(".".join([summary["imports"][rest[0]], *rest[1:]])), path, table, depth + 1)
    elif depth < MAX_DEPTH:
        branched = set(summary.get("star_branches", ()))
        for star in summary["star_imports"]:
            module = _module_file(index, star.split("."), path)
            here = _in_module(index, module, rest, table, depth + 1) if module else []
            if here:
                found = found + [k for k in here if k not in found] if star in branched else list(here)
    memo[memo_key] = found
    return found


def callees(index, kind: str, target: str, mro: List[Key], owner: Key, path: str) -> List[Key]:
    """Every definition a call recorded in a summary may run: ``self.m()`` and ``super().m()``
    along ``mro``, a plain call any definition its name may have."""
    if kind == "func":
        return locate_all(index, target, path, "functions")
    callee = index.find_method(mro, target, after=owner if kind == "super" else None)
    return [callee] if callee is not None else []


def mro_variants(index, key: Key) -> List[List[Key]]:
    """The MROs an instance of class ``key`` may have: the index's own, then one for each
    other definition a class of it may have (a base star-imported in branches), at most
    ``MAX_VARIANTS``."""
    first = index.mro(key)
    variants = [first]
    for cls in first:
        for base in index.class_info(cls)["bases"]:
            if not base or index.root_kind(base) is not None:
                continue
            chosen = index.locate(base, cls[0])
            for other in locate_all(index, canonical(base), cls[0]):
                if chosen is not None and other not in (chosen, cls) and len(variants) < MAX_VARIANTS:
                    variants.append(_mro_with(index, key, {chosen: other}))
    return variants


def _mro_with(index, key: Key, swap: Dict[Key, Key]) -> List[Key]:
    order: List[Key] = []
    stack = [key]
    while stack:
        current = stack.pop(0)
        if current not in order:
            order.append(current)
            stack[0:0] = [swap.get(k, k) for k in index.base_keys(current)]
    return order


def base_alternatives(index, key: Key) -> List[Key]:
    """Every project class each base of class ``key`` may be (torch's roots excluded)."""
    found: List[Key] = []
    for base in index.class_info(key)["bases"]:
        if base and index.root_kind(base) is None:
            found.extend(k for k in locate_all(index, canonical(base), key[0]) if k != key and k not in found)
    return found


def _protocol_owner(index, key: Key) -> Optional[Key]:
    """The project class defining the ``__getitem__`` an instance of ``key`` uses, when that
    class (through its own bases) also has a ``__len__``: the map-style protocol's home."""
    method = index.find_method(index.mro(key), "__getitem__")
    if method is None:
        return None
    owner = (method[0], method[1].rpartition(".")[0])
    if index.find_method(index.mro(owner), "__len__") is None:
        return None
    return owner


def duck_roots(index) -> Set[Key]:
    """Project classes without a dataset base that a ``DataLoader`` shows to be datasets
    (the summaries' ``loader_classes``): for each class received, the class defining its
    ``__getitem__`` (see the module doc). Asked before any ``class_kind`` is memoized."""
    roots: Set[Key] = set()
    for path, qualified in _received(index):
        for key in locate_all(index, canonical(qualified), path):
            if index.class_kind(key) is None:
                owner = _protocol_owner(index, key)
                if owner is not None:
                    roots.add(owner)
    return roots


def _received(index) -> List[Tuple[str, str]]:
    """(path, class) for each class a file shows to be used as a dataset: handed to a
    ``DataLoader`` (or ``Subset``...) there, or to a project function that hands that
    parameter to one (``dataset_uses``)."""
    found = [(path, q) for path, summary in index.summaries.items() for q in summary.get("loader_classes", ())]
    params: Dict[Key, List[tuple]] = {}
    for path, summary in index.summaries.items():
        for qual, position, name in summary.get("loader_params", ()):
            params.setdefault((path, qual), []).append((position, name))
    tails = {key[1].rsplit(".", 1)[-1] for key in params}
    for path, summary in index.summaries.items():
        for callee, where, cls in summary.get("class_args", ()):
            if callee.rsplit(".", 1)[-1] not in tails:
                continue
            for key in locate_all(index, canonical(callee), path, "functions"):
                if any(where in (position, name) for position, name in params.get(key, ())):
                    found.append((path, cls))
    return found + _wrapped(index)


def _wrapped(index) -> List[Tuple[str, str]]:
    """(path, class) for each class a dataset wrapper indexes per sample (``dataset_uses``
    ``indexed_params``): a class with a dataset base (torch's, or a project base that has
    one) whose ``__getitem__`` indexes an ``__init__`` parameter it keeps; the class is the
    parameter's annotation, or one passed to a construction of the wrapper."""
    wrappers: Dict[Key, List[tuple]] = {}
    found = []
    for path, summary in index.summaries.items():
        for qual, position, name, annotation in summary.get("indexed_params", ()):
            key = (path, qual)
            if index.class_kind(key) is None:
                continue
            wrappers.setdefault(key, []).append((position, name))
            if annotation:
                found.append((path, annotation))
    tails = {key[1].rsplit(".", 1)[-1] for key in wrappers}
    for path, summary in index.summaries.items():
        for callee, where, cls in summary.get("wrapped_args", ()):
            if callee.rsplit(".", 1)[-1] not in tails:
                continue
            for key in locate_all(index, canonical(callee), path):
                if any(where in (position, name) for position, name in wrappers.get(key, ())):
                    found.append((path, cls))
    return found


def construction_reach(index) -> Dict[Key, str]:
    """Functions reached from the ``__init__`` of a dataset class (the first class to reach
    one names it), through ``self``/``super()`` methods along its MRO and plain calls to
    project functions, any definition a name may have."""
    # Construction code is followed only through files already summarised: pulling every
    # module a dataset's __init__ calls into (downloads, parsers, io helpers) would parse
    # them for every run, for the opt-in DSL104 alone.
    index.pull_wanted = False
    try:
        return _construction_reach(index)
    finally:
        index.pull_wanted = True


def _construction_reach(index) -> Dict[Key, str]:
    built: Dict[Key, str] = {}
    for path, summary in index.summaries.items():
        for qual in summary["classes"]:
            key = (path, qual)
            if index.class_kind(key) is None:
                continue
            mro = index.mro(key)
            start = index.find_method(mro, "__init__")
            if start is None:
                continue
            label = f"{summary['module']}.{qual}"
            work, seen = [start], {start}
            while work:
                func = work.pop()
                built.setdefault(func, label)
                facts = index.function_facts(func)
                owner = (func[0], func[1].rpartition(".")[0])
                for kind, target, _ in facts["calls"] if facts else ():
                    for callee in callees(index, kind, target, mro, owner, func[0]):
                        if callee not in seen and index.function_facts(callee) is not None:
                            seen.add(callee)
                            work.append(callee)
    return built
