"""The project index: facts that cross files, computed from file summaries.

* which classes are datasets (map-style or iterable), through any chain of project
  classes and however the torch base was imported (namespace packages included);
* which functions run per sample: reached from ``__getitem__``/``__getitems__``/
  ``__iter__``/``__next__`` through ``self.method()``, ``super().method()`` and plain
  calls, with methods looked up along the dataset class's own MRO;
* which functions exist where (for ``worker_init_fn`` and helpers).

Rules never see the index directly: each file gets a ``View`` that records every
question and answer, which the cache replays against a new index to know whether a
file's cached findings still hold.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from dslint.semantics.alternatives import base_alternatives, callees, construction_reach, duck_roots, mro_variants
from dslint.semantics.modules import canonical, closest_path, source_root
from dslint.semantics.project_loaders import LoaderQueries
from dslint.semantics.option_reach import callee_off, off_attributes, skipped
from dslint.semantics.sample_calls import ENTRY_METHODS, ENTRY_POINTS, LOOP, WHOLE  # noqa: F401  (re-exported)

MAP = "map"
ITERABLE = "iterable"

ITERABLE_ROOTS = frozenset({
    "torch.utils.data.IterableDataset", "torch.utils.data.ChainDataset", "torch.utils.data.IterDataPipe",
    "torch.utils.data.datapipes.datapipe.IterDataPipe", "torch.utils.data.datapipes.iter.IterDataPipe",
})
MAP_ROOTS = frozenset({
    "torch.utils.data.Dataset", "torch.utils.data.TensorDataset", "torch.utils.data.Subset", "torch.utils.data.ConcatDataset",
    "torch.utils.data.StackDataset", "torch.utils.data.MapDataPipe", "torch.utils.data.datapipes.datapipe.MapDataPipe",
    "torchvision.datasets.VisionDataset",
})
#: PyG's ``Dataset`` (its source is read as code) reads samples through ``get(idx)``: ``LIBRARY_ENTRY_POINTS``
PYG_DATASETS = frozenset({"torch_geometric.data.Dataset", "torch_geometric.data.dataset.Dataset"})
#: map-style bases of libraries built on torch's ``Dataset`` (torchgeo's, MONAI's: ``__getitem__`` reads samples)
LIBRARY_MAP_DATASETS = frozenset({
    f"torchgeo.datasets.{module}{name}" for module in ("", "geo.")
    for name in ("GeoDataset", "NonGeoDataset", "RasterDataset", "VectorDataset", "NonGeoClassificationDataset")
} | {
    f"monai.data.{module}{name}" for module in ("", "dataset.")
    for name in ("Dataset", "CacheDataset", "PersistentDataset", "SmartCacheDataset", "ArrayDataset", "LMDBDataset")
})
LIBRARY_ROOTS = dict.fromkeys(PYG_DATASETS, MAP)
#: a project class on such a base (undefined in the project) is a dataset; the library's own class is not judged
LIBRARY_BASES = {**LIBRARY_ROOTS, **dict.fromkeys(LIBRARY_MAP_DATASETS, MAP), **dict.fromkeys(
    ("monai.data.IterableDataset", "monai.data.iterable_dataset.IterableDataset"), ITERABLE)}
DATALOADER_ROOTS = frozenset({"torch.utils.data.DataLoader"})

#: more entry points of a library base: the methods its own ``__getitem__`` calls per sample
LIBRARY_ENTRY_POINTS = {root: (("get", WHOLE),) for root in PYG_DATASETS}

Key = Tuple[str, str]  # (path, local qualified name)


def root_kind(qualified: Optional[str]) -> Optional[str]:
    if not qualified:
        return None
    qualified = canonical(qualified)
    if qualified in ITERABLE_ROOTS:
        return ITERABLE
    if qualified in MAP_ROOTS:
        return MAP
    if qualified.startswith("torchvision.datasets."):
        last = qualified.rsplit(".", 1)[1]
        if last[:1].isupper():
            return MAP
    return None



class ProjectIndex(LoaderQueries):
    def __init__(self, summaries: Dict[str, dict], module_paths: Optional[Dict[str, List[str]]] = None) -> None:
        """``module_paths``: module name -> every checked file with that name (summarised
        or not), so that a name shared by several files is ambiguous whichever of them
        were analysed; without it, the summarised files alone."""
        # In path order, whatever order the files were summarised in (shards finish in
        # any order): the first dataset class to reach a function names it in messages,
        # and cached answers are replayed against an index built in another run.
        self.summaries = dict(sorted(summaries.items()))
        summaries = self.summaries
        self.by_module: Dict[str, List[str]] = {}
        if module_paths is not None:
            self.by_module = {name: list(paths) for name, paths in module_paths.items()}
        else:
            for path, summary in summaries.items():
                self.by_module.setdefault(summary["module"], []).append(path)
        self._kind: Dict[Key, Optional[str]] = {}
        self._located: Dict[tuple, Optional[Key]] = {}
        self.per_sample: Dict[Key, Tuple[str, str]] = {}
        self.off_guards: Dict[Key, frozenset] = {}  # (``option_reach``) off at every per-sample arrival
        self._loaders: Optional[Dict[Key, List[dict]]] = None
        self._epoch_keys: Optional[set] = None
        self._epoch_methods: Optional[set] = None
        self._suffixes: Optional[Dict[str, List[str]]] = None  # (``rooted_paths``) module-name tails
        # (``alternatives``) files a name led to that are not summarised; datasets without a torch base
        self.alternatives_memo, self.wanted_paths, self.duck_roots = {}, set(), set()
        self.duck_roots, self._kind = duck_roots(self), {}
        self._compute_per_sample()
        self.built = construction_reach(self)

    # ---------------------------------------------------------------- locating
    def _pick(self, paths: List[str], from_path: Optional[str]) -> Optional[str]:
        return closest_path(paths, from_path,
                            lambda p: source_root(p, self.summaries[p]["module"]) if p in self.summaries else None)

    def locate(self, qualified: str, from_path: Optional[str], table: str = "classes", _depth: int = 0) -> Optional[Key]:
        """Where the class (or function) ``qualified`` is defined in the project."""
        memo_key = (qualified, from_path, table)
        if memo_key in self._located:
            return self._located[memo_key]
        self._located[memo_key] = None  # cycle guard
        result = self._locate(qualified, from_path, table, _depth)
        self._located[memo_key] = result
        return result

    def _namespace_paths(self, parts: List[str]) -> List[str]:
        """Files that module ``parts`` names when some of its packages are namespace
        packages (no ``__init__.py``, so the file's own module name is shorter): the
        checked files whose path ends with those directories and that file."""
        ends = (os.sep + os.sep.join(parts) + ".py", os.sep + os.sep.join(parts + ["__init__.py"]))
        for start in range(1, len(parts)):  # the file's own name: a dotted tail of ``parts``
            found = [path for path in self.by_module.get(".".join(parts[start:]), ()) if (os.sep + path).endswith(ends)]
            if found:
                return found
        return []

    def rooted_paths(self, parts: List[str], from_path: Optional[str]) -> List[str]:
        """Files that module ``parts`` names for a script run from inside a package: the import
        is rooted at a directory above ``from_path`` (``python scripts/train.py`` puts
        ``scripts/`` on ``sys.path``, so ``utils.slicer`` there is ``scripts/utils/slicer.py``,
        whose module name is ``scripts.utils.slicer``): checked files whose module name ends
        with ``parts`` and whose root directory holds ``from_path``."""
        if from_path is None:
            return []
        if self._suffixes is None:
            self._suffixes = {}
            for name, paths in self.by_module.items():
                pieces = name.split(".")
                for start in range(1, len(pieces)):
                    self._suffixes.setdefault(".".join(pieces[start:]), []).extend(paths)
        here = os.path.dirname(from_path) + os.sep
        tail = os.sep + os.path.join(*parts)
        found = []
        for path in self._suffixes.get(".".join(parts), ()):
            stem = os.sep + (path[:-len(os.sep + "__init__.py")] if path.endswith(os.sep + "__init__.py") else path[:-len(".py")])
            root = stem[:len(stem) - len(tail)] + os.sep  # (the checked directory itself: "/")
            if stem.endswith(tail) and (os.sep + here).startswith(root):
                found.append(path)
        return found

    def _locate(self, qualified: str, from_path: Optional[str], table: str, depth: int) -> Optional[Key]:
        parts = qualified.split(".")
        for i in range(len(parts) - 1, 0, -1):
            paths = self.by_module.get(".".join(parts[:i])) or self._namespace_paths(parts[:i]) \
                or self.rooted_paths(parts[:i], from_path)
            if not paths:
                continue
            path = self._pick(paths, from_path)
            if path is None or path not in self.summaries:
                return None  # ambiguous, or a file not analysed (the engine pulls those in)
            summary = self.summaries[path]
            rest = parts[i:]
            key = ".".join(rest)
            if key in summary[table]:
                return (path, key)
            if depth >= 6:
                return None
            target = summary["imports"].get(rest[0])
            if target is not None:
                return self.locate(canonical(".".join([target, *rest[1:]])), path, table, depth + 1)
            for star in reversed(summary["star_imports"]):  # the last one binding the name wins
                if star not in self.by_module and not self._namespace_paths(star.split(".")) \
                        and not self.rooted_paths(star.split("."), path):
                    continue  # a module the project does not have binds none of its names
                found = self.locate(f"{star}.{key}", path, table, depth + 1)
                if found is not None:
                    return found
            return None
        return None

    # ---------------------------------------------------------------- classes
    def class_info(self, key: Key) -> dict:
        return self.summaries[key[0]]["classes"][key[1]]

    def base_keys(self, key: Key) -> List[Key]:
        found = []
        for base in self.class_info(key)["bases"]:
            if base and root_kind(base) is None:
                located = self.locate(base, key[0])
                if located is not None and located != key:
                    found.append(located)
        return found

    def class_kind(self, key: Key) -> Optional[str]:
        if key in self._kind:
            return self._kind[key]
        self._kind[key] = None  # cycle guard
        kinds = set()
        for base in self.class_info(key)["bases"]:
            kind = root_kind(base)
            if kind is None and base:
                located = self.locate(base, key[0])
                if located is not None and located != key:
                    kind = self.class_kind(located)
                elif located is None:
                    kind = LIBRARY_BASES.get(canonical(base))
            if kind:
                kinds.add(kind)
        kinds.update(self.class_kind(k) for k in base_alternatives(self, key))  # star imports in branches
        if key in self.duck_roots:
            kinds.add(MAP)
        result = ITERABLE if ITERABLE in kinds else (MAP if MAP in kinds else None)
        self._kind[key] = result
        return result

    def kind_of(self, qualified: Optional[str], from_path: Optional[str]) -> Optional[str]:
        """Dataset kind of a class named by a qualified name (torch's own or the project's)."""
        if not qualified:
            return None
        kind = root_kind(qualified)
        if kind:
            return kind
        located = self.locate(canonical(qualified), from_path)
        return self.class_kind(located) if located else LIBRARY_ROOTS.get(canonical(qualified))

    def is_subclass_of(self, key: Key, roots: frozenset, _seen=None) -> bool:
        seen = _seen if _seen is not None else set()
        if key in seen:
            return False
        seen.add(key)
        for base in self.class_info(key)["bases"]:
            if base and canonical(base) in roots:
                return True
            if base:
                located = self.locate(base, key[0])
                if located is not None and self.is_subclass_of(located, roots, seen):
                    return True
        return False

    def mro(self, key: Key) -> List[Key]:
        order: List[Key] = []
        stack = [key]
        while stack:
            current = stack.pop(0)
            if current in order:
                continue
            order.append(current)
            stack[0:0] = self.base_keys(current)
        return order

    def find_method(self, mro: List[Key], name: str, after: Optional[Key] = None) -> Optional[Key]:
        started = after is None
        for cls in mro:
            if not started:
                started = cls == after
                continue
            if name in self.class_info(cls)["methods"]:
                return (cls[0], f"{cls[1]}.{name}")
        return None

    def function_facts(self, key: Key) -> Optional[dict]:
        summary = self.summaries[key[0]]
        if key[1] in summary["functions"]:
            return summary["functions"][key[1]]
        owner, _, name = key[1].rpartition(".")
        cls = summary["classes"].get(owner)
        if cls is not None:
            return cls["methods"].get(name)
        return None

    # ---------------------------------------------------------------- per sample
    def _compute_per_sample(self) -> None:
        for path, summary in self.summaries.items():
            for qual in summary["classes"]:
                key = (path, qual)
                if self.class_kind(key) is None:
                    continue
                self._reach_from(key)

    def _reach_from(self, cls: Key) -> None:
        for mro in mro_variants(self, cls):  # one for each definition a base may have (``alternatives``)
            self._reach_along(cls, mro)

    def _reach_along(self, cls: Key, mro: List[Key]) -> None:
        label = f"{self.summaries[cls[0]]['module']}.{cls[1]}"
        work: List[Tuple[Key, str]] = []
        extra = [e for c in mro for base in self.class_info(c)["bases"] if self.locate(base or "", c[0]) is None
                 for e in LIBRARY_ENTRY_POINTS.get(canonical(base or ""), ())]
        for name, mode in (*ENTRY_POINTS, *extra):
            method = self.find_method(mro, name)
            if method is not None:
                work.append((method, mode))
        seen: Dict[Key, tuple] = {}  # (with what ``option_reach`` shows off: the options the loaders' datasets leave off)
        work = [(func, mode, off_attributes(self, cls, mro)) for func, mode in work]
        while work:
            func, mode, off = work.pop()
            facts = self.function_facts(func)
            if facts is None or facts["cached"]:
                continue
            if mode is None:
                mode = LOOP if facts["gen"] else "entry"
            elif mode == WHOLE and facts["gen"]:
                mode = LOOP
            previous, before = seen.get(func, (None, None))
            if previous == WHOLE or previous == mode:
                if before <= off:
                    continue
                mode = previous
            off = off & before if before is not None else off
            seen[func] = (mode, off)
            if mode in (WHOLE, LOOP):
                current = self.per_sample.get(func)
                if current is None or (current[0] == LOOP and mode == WHOLE):
                    self.per_sample[func] = (mode, label)
                self.off_guards[func] = self.off_guards.get(func, off) & off
            owner = (func[0], func[1].rpartition(".")[0])
            for position, (kind, target, in_loop) in enumerate(facts["calls"]):
                if skipped(facts, position, off):
                    continue
                strong = mode == WHOLE or in_loop
                for callee in callees(self, kind, target, mro, owner, func[0]):
                    callee_facts = self.function_facts(callee)
                    if callee_facts is None:
                        continue
                    if strong or callee_facts["gen"]:
                        work.append((callee, LOOP if callee_facts["gen"] else WHOLE, callee_off(facts, position, kind, callee_facts, off)))

    def _callee(self, kind: str, target: str, mro: List[Key], owner: Key, path: str) -> Optional[Key]:
        if kind == "self":
            return self.find_method(mro, target)
        if kind == "super":
            return self.find_method(mro, target, after=owner)
        located = self.locate(target, path, table="functions")
        return located

    # for the modules that walk the index (``alternatives``)
    root_kind, pick, namespace_paths = staticmethod(root_kind), _pick, _namespace_paths

    # ---------------------------------------------------------------- loaders & helpers
    def defines_method(self, name: str) -> bool:
        """Some class of the project (any summarised file) defines a method called ``name``."""
        if getattr(self, "_method_names", None) is None:
            self._method_names = {m for summary in self.summaries.values() for c in summary["classes"].values() for m in c["methods"]}
        return name in self._method_names

    def has_method(self, key: Key, name: str) -> bool:
        """Defined on the class or a project base (torch's own bases are not counted)."""
        return self.find_method(self.mro(key), name) is not None

    def reachable(self, key: Key, method: str) -> List[Key]:
        """Every function reached from ``method`` of class ``key`` by any call."""
        mro = self.mro(key)
        start = self.find_method(mro, method)
        if start is None:
            return []
        seen = [start]
        work = [start]
        while work:
            func = work.pop()
            facts = self.function_facts(func)
            owner = (func[0], func[1].rpartition(".")[0])
            for kind, target, _ in facts["calls"] if facts else ():
                callee = self._callee(kind, target, mro, owner, func[0])
                if callee is not None and callee not in seen and self.function_facts(callee) is not None:
                    seen.append(callee)
                    work.append(callee)
        return seen

    def in_project(self, qualified: str) -> bool:
        """The qualified name is in a module of the project (summarised or not, namespace packages too)."""
        parts = qualified.split(".")
        return any(".".join(parts[:i]) in self.by_module or self._namespace_paths(parts[:i]) for i in range(len(parts) - 1, 0, -1))

    def function_by_name(self, qualified: str, from_path: str) -> Optional[dict]:
        located = self.locate(qualified, from_path, table="functions")
        return self.function_facts(located) if located else None

    def per_sample_mode(self, path: str, qual: str) -> Optional[Tuple[str, str]]:
        return self.per_sample.get((path, qual))

    # Bases outside the project whose methods are known: (qualified name) -> the
    # dunder methods they define. Any other non-project base may define anything.
    _KNOWN_BASES = {
        "torch.utils.data.IterableDataset": ("__getitem__", "__add__", "__iter__"),
        "torch.utils.data.Dataset": ("__getitem__", "__add__"),
        "builtins.object": (),
        "typing.Generic": (),
        "abc.ABC": (),
        "typing.Iterable": ("__iter__",),
        "typing.Iterator": ("__iter__", "__next__"),
        "collections.abc.Iterable": ("__iter__",),
        "collections.abc.Iterator": ("__iter__", "__next__"),
    }

    KNOWN_BASES = _KNOWN_BASES

    def class_method(self, qualified: str, from_path: str, name: str) -> Optional[dict]:
        """Kind of the project class named ``qualified`` and whether it has method ``name``.

        ``{"kind": ..., "defined": True | False | None}``: True when the class or a
        base defines it; False when every base is a project class or a known base
        without it; None when a base is unknown (a library base may define it).
        None (no dict) when the class is not in the project.
        """
        located = self.locate(canonical(qualified), from_path)
        if located is None:
            return None
        defined: Optional[bool] = False
        for key in self.mro(located):
            info = self.class_info(key)
            if name in info["methods"]:
                return {"kind": self.class_kind(located), "defined": True}
            for base in info["bases"]:
                known = self._KNOWN_BASES.get(canonical(base)) if base else None
                if known is not None:
                    if name in known:
                        return {"kind": self.class_kind(located), "defined": True}
                elif not base or self.locate(canonical(base), key[0]) is None:
                    defined = None
        return {"kind": self.class_kind(located), "defined": defined}

    def external_bases(self, qualified: str, from_path: Optional[str]) -> Optional[List[str]]:
        """Bases outside the project that the project class ``qualified`` derives from.

        Canonical qualified names, sorted, through any chain of project classes (so
        "is project class X an ``nn.Module``" can be asked across files); None when
        ``qualified`` is not a class of the project.
        """
        located = self.locate(canonical(qualified), from_path)
        if located is None:
            return None
        found = set()
        for key in self.mro(located):
            for base in self.class_info(key)["bases"]:
                if base and self.locate(canonical(base), key[0]) is None:
                    found.add(canonical(base))
        return sorted(found)

    def _function_key(self, qualified: str, from_path: str) -> Optional[Key]:
        """Where a function or a method (``mod.Class.method``) named ``qualified`` is defined."""
        located = self.locate(qualified, from_path, table="functions")
        if located is None:
            owner, _, name = qualified.rpartition(".")
            cls = self.locate(owner, from_path) if owner else None
            if cls is not None:
                located = self.find_method(self.mro(cls), name)
        return located

    # ------------------------------------------------------------ callers
    def called_from_other_files(self, key: Key, table: str = "functions") -> bool:
        """Some function of another summarised file calls the function (or, ``table="classes"``,
        constructs the class) ``key``. Calls at module level are not summarised: a script
        that calls it only there does not count."""
        def calls():
            for path, summary in self.summaries.items():
                bodies = list(summary["functions"].values())
                bodies += [m for cls in summary["classes"].values() for m in cls["methods"].values()]
                yield from ((path, target) for facts in bodies for kind, target, _ in facts["calls"] if kind == "func")
        return self._any_call_of(key, table, "_calls_by_tail", calls, skip=key[0])

    def workers_passed(self, key: Key) -> bool:
        """Some summarised file calls the function ``key`` with a worker count (``num_workers=``, not 0)."""
        def calls():
            for path, summary in self.summaries.items():
                yield from ((path, target) for target in summary.get("worker_kwargs", ()))
        return self._any_call_of(key, "functions", "_worker_callees", calls)

    def _any_call_of(self, key: Key, table: str, cache: str, calls, skip: Optional[str] = None) -> bool:
        """One of the (path, qualified callee) pairs ``calls()`` gives, in a file other than ``skip``,
        locates to ``key``; the pairs are indexed once by the callee's last name, under attribute ``cache``."""
        by_tail = getattr(self, cache, None)
        if by_tail is None:
            by_tail = {}
            for path, target in calls():
                by_tail.setdefault(target.rsplit(".", 1)[-1], []).append((path, target))
            setattr(self, cache, by_tail)
        return any(path != skip and self.locate(target, path, table=table) == key
                   for path, target in by_tail.get(key[1].rsplit(".", 1)[-1], ()))

    # ------------------------------------------------------------ returned handles
    def handle_function_names(self) -> List[str]:
        """The names of the project's functions and methods that return a handle they opened."""
        if getattr(self, "_handle_names", None) is None:
            self._handle_names = sorted(
                {qual.rsplit(".", 1)[-1] for summary in self.summaries.values() for qual in summary.get("handle_returns", ())}
            )
        return self._handle_names

    def returned_handle(self, qualified: str, from_path: str) -> Optional[list]:
        """[kind, position] when the project function or method (``mod.Class.method``,
        along the class's project bases) ``qualified`` returns a handle it opened."""
        key = self._function_key(qualified, from_path)
        if key is None:
            return None
        return self.summaries[key[0]].get("handle_returns", {}).get(key[1])
