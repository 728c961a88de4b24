"""Which datasets of the project inherit an object a plain base class creates at construction.

A mixin (not a dataset itself) may create a random generator in its ``__init__`` and
keep it on ``self``; the datasets that derive from it, in any file, run that
``__init__`` (inherited, or called through ``super().__init__()``/``Base.__init__(self)``)
and draw from the attribute per sample, or hold such an object on ``self`` (a transform)
and call it per sample. ``state_heirs`` answers, from the summaries alone, which dataset
classes do so, with the DataLoaders over them; ``shared_elsewhere``
whether any file of the project reseeds or replaces the attribute on another object.

Plain functions of a ``ProjectIndex`` (no libcst); rules reach them through ``View``.
"""

from __future__ import annotations

from typing import List, Optional

from dslint.semantics.inheritance import first_definer
from dslint.semantics.test_paths import is_test_path
from dslint.semantics.modules import canonical
from dslint.semantics.project import ENTRY_POINTS, WHOLE, Key, ProjectIndex

PER_PROCESS_CALLS = frozenset({"os.getpid", "multiprocessing.current_process", "os.getppid"})


def runs_init_of(index: ProjectIndex, cls: Key, base: Key) -> bool:
    """Does constructing ``cls`` run ``base.__init__``: inherited, or reached through
    ``super().__init__(...)`` / ``Base.__init__(self, ...)`` calls of the ``__init__`` chain."""
    mro = index.mro(cls)
    if base not in mro:
        return False
    current = first_definer(index, cls, "__init__")
    for _ in range(12):
        if current == base:
            return True
        if not isinstance(current, tuple):
            return False
        facts = index.function_facts((current[0], f"{current[1]}.__init__")) or {}
        following = None
        for kind, target, _ in facts.get("calls", ()):
            if kind == "super" and target == "__init__":
                method = index.find_method(mro, "__init__", after=current)
                following = (method[0], method[1].rpartition(".")[0]) if method else None
            elif kind == "func" and target.endswith(".__init__"):
                located = index.locate(canonical(target[: -len(".__init__")]), current[0])
                if located == base:
                    return True
                if located is not None and located in mro and located != current:
                    following = first_definer(index, located, "__init__")
        if following is None:
            return False
        current = following
    return False


def per_sample_draws(index: ProjectIndex, cls: Key) -> set:
    """The ``self`` attributes whose objects code reached per sample from ``cls`` uses."""
    found = set()
    for name, _ in ENTRY_POINTS:
        for func in index.reachable(cls, name):
            mode = index.per_sample.get(func)
            facts = index.function_facts(func)
            if mode is None or facts is None:
                continue
            for attr, in_loop in facts.get("self_draws", ()):
                if mode[0] == WHOLE or in_loop:
                    found.add(attr)
    return found


def _touches(index: ProjectIndex, cls: Key, base: Key, attrs: set) -> bool:
    """A class of ``cls``'s MRO other than ``base`` gives one of ``attrs`` a value, or some
    method of it asks which worker or process it runs in."""
    for key in index.mro(cls):
        if key == base:
            continue
        for facts in index.class_info(key)["methods"].values():
            if attrs & set(facts.get("self_stores", ())) or facts.get("worker_info"):
                return True
            if any(call[1] in PER_PROCESS_CALLS for call in facts.get("calls", ())):
                return True
    return False


def shared_elsewhere(index: ProjectIndex, attrs: set) -> bool:
    """Some file reseeds ``<x>.<attr>`` or assigns it on another object (a ``worker_init_fn``)."""
    for summary in index.summaries.values():
        if attrs & set(summary.get("reseeded_attrs", ())):
            return True
        functions = list(summary["functions"].values())
        functions += [m for cls in summary["classes"].values() for m in cls["methods"].values()]
        if any(attrs & set(facts.get("assigns", ())) for facts in functions):
            return True
    return False


def _drawing_methods(index: ProjectIndex, cls: Key, wanted: set) -> dict:
    """Methods of ``cls`` (along its MRO) whose call reaches a use of ``wanted``: name -> attrs."""
    found = {}
    for key in index.mro(cls):
        for name in index.class_info(key)["methods"]:
            if name in found or name == "__init__":
                continue
            used = set()
            for func in index.reachable(cls, name):
                facts = index.function_facts(func) or {}
                used |= wanted & {attr for attr, _ in facts.get("self_draws", ())}
            if used:
                found[name] = used
    return found


def _held(index: ProjectIndex, dataset: Key, users: dict) -> dict:
    """``self.<attr>`` of the dataset's ``__init__`` chain -> the ``users`` class it constructs."""
    held = {}
    for key in index.mro(dataset):
        facts = index.class_info(key)["methods"].get("__init__") or {}
        for attr, qualified in facts.get("self_news", ()):
            located = index.locate(canonical(qualified), key[0])
            if located in users:
                held[attr] = located
    return held


def _replaced(index: ProjectIndex, dataset: Key, attr: str) -> bool:
    """``self.<attr>`` is given a value outside the ``__init__`` chain, or on another object."""
    for key in index.mro(dataset):
        for name, facts in index.class_info(key)["methods"].items():
            if name != "__init__" and attr in facts.get("self_stores", ()):
                return True
    return shared_elsewhere(index, {attr})


def holders(index: ProjectIndex, base: Key, wanted: set) -> List[dict]:
    """Datasets whose ``__init__`` keeps on ``self`` an object of a plain class that runs
    ``base.__init__`` (``base`` or a subclass) and that per-sample code calls a method of
    (``self.t(x)``, ``self.t.apply(x)``) that uses one of ``wanted``."""
    users = {}
    for path, summary in index.summaries.items():
        for qual in summary["classes"]:
            key = (path, qual)
            if index.class_kind(key) is None and runs_init_of(index, key, base):
                users[key] = None
    found = []
    for path, summary in index.summaries.items():
        for qual in summary["classes"] if users and not is_test_path(path) else ():
            key = (path, qual)
            if index.class_kind(key) is None:
                continue
            held = _held(index, key, users)
            called = set()
            for name, _ in ENTRY_POINTS if held else ():
                for func in index.reachable(key, name):
                    mode, facts = index.per_sample.get(func), index.function_facts(func) or {}
                    for attr, method, in_loop in facts.get("held_calls", ()) if mode else ():
                        if attr in held and (mode[0] == WHOLE or in_loop):
                            called.add((attr, method))
            for attr, method in sorted(called):
                user = held[attr]
                if _replaced(index, key, attr):
                    continue  # the dataset (or a worker_init_fn) re-creates the held object
                if users[user] is None:
                    users[user] = {} if _touches(index, user, base, wanted) else _drawing_methods(index, user, wanted)
                if method in users[user] and not _touches(index, key, base, set()):
                    name = f"{summary['module']}.{qual}"
                    attrs = sorted(users[user][method])
                    found.append({"name": name, "attrs": attrs, "loaders": index.loaders_over(key)})
                    break
    return found


def state_heirs(index: ProjectIndex, base: Key, attrs: List[str]) -> Optional[List[dict]]:
    """The dataset classes (outside test files) that run ``base.__init__`` and use one of
    ``attrs`` per sample, leaving them as ``base`` made them, then those that hold such an
    object (``holders``): ``{"name", "attrs", "loaders"}`` each. Empty when the project
    reseeds or replaces the attributes elsewhere."""
    wanted = set(attrs)
    if index.class_kind(base) is not None or shared_elsewhere(index, wanted):
        return []
    heirs = []
    for path, summary in index.summaries.items():
        if is_test_path(path):
            continue
        for qual in summary["classes"]:
            key = (path, qual)
            if key == base or index.class_kind(key) is None or not runs_init_of(index, key, base):
                continue
            used = per_sample_draws(index, key) & wanted
            if not used or _touches(index, key, base, wanted):
                continue
            heirs.append({
                "name": f"{summary['module']}.{qual}",
                "attrs": sorted(used),
                "loaders": index.loaders_over(key),
            })
    return heirs + holders(index, base, wanted)
