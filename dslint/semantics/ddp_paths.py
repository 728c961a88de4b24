"""Does the code that builds and runs a loader take part in the file's DDP run?

``ddp_marker`` answers per file: the first sign that the file runs once per rank. A file can hold
several code paths, though, and only some of them use the process group: a class whose
``_train_single`` wraps the model in ``DistributedDataParallel`` and shards its loaders, beside a
``_train_other`` that trains a plain model on plain loaders. Launched once per rank, that second
path trains one independent model per process; nothing in it expects the ranks to split the data.

``on_rank_path(ctx, index, loader, marker)`` is True when the loader's own path shows per-rank
code, or when the marker cannot be placed away from it:

* the marker, or the loader, is at module level (a script: everything runs under it);
* the path is the function that builds the loader, the same-file functions that call it (three
  calls up), and the functions whose loops iterate it (with their epoch functions; a helper's own
  callers are not climbed, since they are other paths through it); a function on
  it shows per-rank code when it holds the marker, calls one of ``PROCESS_GROUP_CALLS`` (DDP, FSDP,
  a ``DistributedSampler``, ``init_process_group``...), a project subclass of one of them or a
  project function (any file) that starts a process group, or names a rank or the world size
  (``mentions_rank(..., shards=True)``);
* a method on the path reads ``self.x`` that a method of its class family assigns from such code
  (``self.model = DDP(model)`` in ``__init__``).

Only a marker inside a function that is not on the path, with none of the above on it, makes the
answer False.
"""

from __future__ import annotations

from typing import List, Optional, Set

import libcst as cst

from dslint.semantics.ddp_markers import (
    INIT_CALLS, LIBRARIES, PROCESS_GROUP_CALLS, Marker, ddp_subclass_root, project_calls_any,
)
from dslint.semantics.distributed import mentions_rank
from dslint.semantics.loops import DISTRIBUTED_SAMPLER
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree

MAX_PATH = 24  #: functions looked at on one loader's path


def overridden_sharding(ctx, loader) -> Optional[Marker]:
    """The loader is built in a method that overrides a project method (any file) which builds a
    ``DistributedSampler``: the class family runs once per rank and shards its loaders there, and
    this override drops that (a trainer subclass rebuilding ``self.train_loader`` in ``_setup_data``
    without the base's ``if self.is_distributed: sampler = DistributedSampler(...)``)."""
    func = loader.function
    cls = ctx.method_class(func) if func is not None else None
    if cls is None:
        return None
    found = ctx.view.overridden_facts(ctx.qualname_of_def(cls), func.name.value)
    if found is None or not any(target == DISTRIBUTED_SAMPLER for _, target, _ in found[1].get("calls", ())):
        return None
    name = ".".join(found[0].rsplit(".", 2)[-2:])
    return Marker(func, f"the method it overrides, `{name}`, builds a `DistributedSampler`", kind="override",
                  start=False)


def on_rank_path(ctx, index, loader, marker: Marker) -> bool:
    """See the module docstring."""
    home = marker.node if isinstance(marker.node, cst.FunctionDef) else ctx.enclosing_function(marker.node)
    if home is None or loader.function is None:
        return True
    path = _path(ctx, index, loader)
    if home in path:
        return True
    return any(_per_rank(ctx, func) or _reads_rank_state(ctx, index, func) for func in path)


def _path(ctx, index, loader) -> List[cst.FunctionDef]:
    """The loader's function and its same-file callers (climbed), then the functions its loops run in
    and their epoch functions (not climbed: a shared helper's other callers are other paths)."""
    path: List[cst.FunctionDef] = []
    frontier = [(ctx.enclosing_function(loader.call), 0)]
    while frontier and len(path) < MAX_PATH:
        func, depth = frontier.pop()
        if func is None or func in path:
            continue
        path.append(func)
        if depth < 3:
            frontier.extend((ctx.enclosing_function(call), depth + 1) for call in index.callers(func)[:8])
    for loop in index.loops_of(loader):
        for func in (ctx.enclosing_function(loop.loop), *(f for f, _ in index.epoch_functions(loop))):
            if func is not None and func not in path:
                path.append(func)
    return path


def _per_rank(ctx, node: cst.CSTNode) -> bool:
    return ctx.memo(("ddp_paths.per_rank", id(node)), lambda: _shows_rank(ctx, node))


def _shows_rank(ctx, node: cst.CSTNode) -> bool:
    if mentions_rank(ctx, node, shards=True):
        return True
    asked = 0
    for call in iter_subtree(node, into_scopes=True):
        if not isinstance(call, cst.Call):
            continue
        name = ctx.call_name(call)
        if name in PROCESS_GROUP_CALLS:
            return True
        if name and "." in name and not name.startswith(LIBRARIES) and asked < 20:
            asked += 1
            if ddp_subclass_root(ctx, name) is not None or project_calls_any(ctx, name, INIT_CALLS, depth=1):
                return True
    return False


def _reads_rank_state(ctx, index, func: cst.FunctionDef) -> bool:
    """A method reading ``self.x`` that its class family assigns from per-rank code."""
    cls = ctx.method_class(func)
    if cls is None:
        return False
    attrs = _rank_state(ctx, index, cls)
    if not attrs:
        return False
    me = self_name(func)
    return any(self_attr(n, me) in attrs for n in iter_subtree(func, into_scopes=True))


def _rank_state(ctx, index, cls: cst.ClassDef) -> Set[str]:
    def compute() -> Set[str]:
        out: Set[str] = set()
        for member in index.class_family(cls):
            for method in (n for n in member.body.body if isinstance(n, cst.FunctionDef)):
                me = self_name(method)
                for node in iter_subtree(method, into_scopes=True):
                    if isinstance(node, cst.Assign) and _per_rank(ctx, node.value):
                        out.update(a for t in node.targets if (a := self_attr(t.target, me)) is not None)
        return out

    return ctx.memo(("ddp_paths.rank_state", id(cls)), compute)
