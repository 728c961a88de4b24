"""Handles that exist in the parent process before the DataLoader starts its workers,
besides the ones ``__init__`` opens itself.

Two facts, each asked only for a call the fork rules already look at:

* ``length_code``: ``len(dataset)`` runs in the parent. Samplers, ``len(loader)``,
  progress bars and training loops ask it before (and between) the epochs whose
  workers are forked or spawned, so a handle that ``__len__`` opens and keeps on
  ``self`` (itself, or through the lazy opener it shares with ``__getitem__``, at any
  depth of ``self.m()`` calls) is already open when the workers are made: their
  ``if self.f is None: self._open()`` never runs again.
* ``shared_construction_code``: a method ``__init__`` reaches that ``__getitem__`` runs too
  (``if self.f is None: self.f = open(...)``, called while building the index) opens the
  handle in the parent the same way.
* ``holder_kind``: ``self.reader = Reader(path)`` where ``Reader`` (a plain class of
  this file) opens a handle in its construction code and keeps it on its own ``self``
  holds that handle one level down. A class that only stores the path, closes what it
  opened, re-opens it outside construction (lazily, per worker), consults
  ``os.getpid()``/``get_worker_info()``, or defines its own pickling is not one.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.bindings import class_ref
from dslint.semantics.classes import called_method, class_family, dataset_inits, find_method, methods, reached_methods
from dslint.semantics.held_state import PICKLING_HOOKS
from dslint.semantics.init_code import family_construction, init_helpers
from dslint.semantics.helper_drops import dropped_by_construction
from dslint.semantics.handle_kinds import HANDLE_DERIVATIONS
from dslint.semantics.instance_state import (
    dropped_in_init,
    handle_kind,
    held_on_self,
    self_attr_uses,
    stores_elsewhere,
)
from dslint.semantics.names import dotted_parts
from dslint.semantics.regions import self_name
from dslint.semantics.start_methods import workers_not_forked
from dslint.semantics.walk import iter_subtree

PROCESS_CHECKS = frozenset(
    {"torch.utils.data.get_worker_info", "os.getpid", "os.getppid", "multiprocessing.current_process"}
)
#: a class that decides what pickle stores (``PICKLING_HOOKS``, ``__setstate__``), or closes itself
OWN_PICKLING = PICKLING_HOOKS | {"__setstate__", "__del__"}


def length_code(ctx, cls: cst.ClassDef) -> List[cst.FunctionDef]:
    """``__len__`` of the class (or its bases in this file) and the methods it reaches
    through ``self.m``: code the parent process runs before the workers exist."""

    def compute():
        length = find_method(ctx, cls, "__len__")
        if length is None or not self_name(length):
            return []
        return reached_methods(ctx, cls, length)

    return ctx.memo(("pre_fork.length_code", id(cls)), compute)


def shared_construction_code(ctx, cls: cst.ClassDef, init: cst.FunctionDef) -> List[tuple]:
    """(method, the statement of ``init`` that reaches it) for the methods ``init`` reaches through
    ``self.m`` that other code runs too: a lazy opener ``__getitem__`` shares (``init_helpers``
    answers for the methods only construction runs)."""

    def compute():
        only = {id(f) for f in init_helpers(ctx, cls, init)}
        out = []
        for stmt in init.body.body if isinstance(init.body, cst.IndentedBlock) else ():
            for node in iter_subtree(stmt, into_scopes=False):
                method = called_method(ctx, cls, node, self_name(init)) if isinstance(node, cst.Call) else None
                for func in reached_methods(ctx, cls, method) if method is not None else ():
                    if id(func) not in only and not any(func is f for f, _ in out):
                        out.append((func, stmt))
        return out

    return ctx.memo(("pre_fork.shared_construction_code", id(cls), id(init)), compute)


def length_handles(ctx, ignored=None):
    """(dataset class, function, call, kind, Held, who runs it, the functions whose stores run before
    the fork) for each handle that code the parent
    runs before the workers start opens and keeps on ``self``, once per call: what ``len(dataset)``
    runs (``length_code``), and the methods ``__init__`` reaches that other code runs too
    (``shared_construction_code``: ``__init__`` runs the lazy opener first, unless it closes or
    drops the handle afterwards); none for a class whose own pickling a spawn-only project uses.
    ``ignored(call)``: the caller's opens that do not matter, e.g. write-only files."""
    seen = set()
    inits = {id(cls): (init, selfp) for cls, init, selfp in dataset_inits(ctx)}
    for cls in ctx.dataset_classes():
        if _pickled_into_spawned_workers(ctx, cls):
            continue
        init, selfp = inits.get(id(cls), (None, None))
        runs = [(func, "__len__", None, (), ()) for func in length_code(ctx, cls)]
        if init is not None:
            runs += [(func, "__init__", stmt, (), ()) for func, stmt in shared_construction_code(ctx, cls, init)]
        else:
            runs += inherited_construction_code(ctx, cls)
        for func, runner, stmt, later, before in runs:
            for call, kind, held in opened_handles(ctx, func, ignored):
                if id(call) in seen or any(attr in later for attr in held.attrs):
                    continue  # (a constructor of another file drops it again)
                if stmt is not None and any(dropped_by_construction(ctx, cls, init, selfp, attr, stmt) for attr in held.attrs):
                    continue
                seen.add(id(call))
                yield cls, func, call, kind, held, runner, (func, *before)


def inherited_construction_code(ctx, cls: cst.ClassDef) -> List[tuple]:
    """(method, "__init__", None, attributes stored later, construction-only methods) for the
    methods of this file that an ``__init__`` inherited from another file runs, with what they
    reach through ``self.m``, when per-sample code runs them too (an override the base's
    constructor calls as a hook). The construction-only methods run before the fork as well:
    what they store is no re-creation in the workers."""
    runs = [(find_method(ctx, cls, name), later) for name, later in ctx.view.inherited_construction(
        ctx.qualname_of_def(cls))]
    runs = [(method, later) for method, later in runs if method is not None]
    only = tuple(method for method, _ in runs if ctx.per_sample_mode(method) is None)
    out: List[tuple] = []
    for method, later in runs:
        if ctx.per_sample_mode(method) is None:
            continue
        for func in reached_methods(ctx, cls, method):
            if not any(func is f for f, *_ in out):
                out.append((func, "__init__", None, set(later), only))
    return out


def decides_pickling(ctx, node) -> bool:
    """The class of the method holding ``node`` (or a class of its family) decides what pickle stores
    (``__getstate__``, ``__setstate__``, ``__reduce__``...)."""
    func = ctx.enclosing_function(node, through_lambdas=False)
    cls = ctx.method_class(func) if func is not None else None
    return cls is not None and _family_pickles(ctx, cls)


def _family_pickles(ctx, cls: cst.ClassDef) -> bool:
    return any(PICKLING_HOOKS & set(methods(klass)) for klass in class_family(ctx, cls))


def _pickled_into_spawned_workers(ctx, cls: cst.ClassDef) -> bool:
    """The class decides what pickle stores (``__getstate__``: typically the handle as ``None``) and
    the project starts its processes with spawn/forkserver only: its workers get a pickled copy,
    never the parent's handle."""
    return _family_pickles(ctx, cls) and workers_not_forked(ctx.view.project_start_methods())


def opened_handles(ctx, func: cst.FunctionDef, ignored=None):
    """(call, kind, Held) for every handle ``func`` opens and keeps on its ``self``."""
    selfp = self_name(func)
    if not selfp:
        return
    for call in iter_subtree(func.body, into_scopes=False):
        kind = handle_kind(ctx, call) if isinstance(call, cst.Call) else None
        if kind is None or (ignored is not None and ignored(call)):
            continue
        derive_methods, subscript = HANDLE_DERIVATIONS.get(kind, ((), False))
        held = held_on_self(ctx, func, selfp, call, derive_methods, subscript)
        if held is not None:
            yield call, kind, held


def _consults_process(ctx, family: List[cst.ClassDef]) -> bool:
    for klass in family:
        for node in iter_subtree(klass.body, into_scopes=True):
            if isinstance(node, (cst.Name, cst.Attribute)) and dotted_parts(node):
                parts = dotted_parts(node)
                if parts[-1] in ("get_worker_info", "getpid", "getppid", "current_process") and (
                    ctx.qualname(node) in PROCESS_CHECKS
                ):
                    return True
    return False


def holder_kind(ctx, call: cst.Call, ignored=None) -> Optional[str]:
    """The kind of handle that the object ``call`` constructs keeps open (see the module);
    ``ignored(open_call)``: opens that do not count (the same for every call of a rule)."""
    ref = class_ref(ctx.tree, ctx.names, call)
    if ref is None or ref[0] != "local":
        return None
    return ctx.memo(("pre_fork.holder_kind", id(ref[1])), lambda: _holder_kind(ctx, ref[1], ignored))


def _holder_kind(ctx, cls: cst.ClassDef, ignored) -> Optional[str]:
    if ctx.class_kind(cls):
        return None  # a dataset: its own construction is checked where it is defined
    family = class_family(ctx, cls)
    if any(name in OWN_PICKLING for klass in family for name in methods(klass)):
        return None
    init = methods(cls).get("__init__")
    if init is None or not self_name(init):
        return None
    construction = family_construction(ctx, cls)
    for func in (init, *init_helpers(ctx, cls, init)):
        for call, kind, held in opened_handles(ctx, func, ignored):
            for attr, site in held.attrs.items():
                if dropped_in_init(ctx, func, self_name(func), attr, site, ("close",)):
                    continue
                if stores_elsewhere(ctx, family, attr, func, construction):
                    return None  # re-opened outside construction (lazily, per worker)
                uses = self_attr_uses(ctx, family, attr)
                if any(not use.store and not any(use.method is f for f in construction) for use in uses):
                    return None if _consults_process(ctx, family) else kind
    return None
