"""Does this file run once per rank? The first sign of it, for the distributed rules.

``ddp_marker(ctx)`` finds it: a call of ``init_process_group``, a model wrapped in
``DistributedDataParallel``/FSDP, a ``DistributedSampler`` built, ``deepspeed.initialize`` or
``hvd.init``, a read of the launcher's environment (``os.environ["LOCAL_RANK"]``), a
construction of a project class (any file) deriving from one of those classes, or a call of a
project function (any file, through ``ctx.view.function_facts``, two calls deep) that calls
``init_process_group``. An ``accelerate.Accelerator()`` is a *framework* marker: the script runs
once per process, but the framework shards the loaders it prepares. Nothing else counts:
``dist.get_rank()`` alone is often guarded by ``is_initialized()``.

``single_process_arm(ctx, node)``: ``node`` sits in one arm of an ``if``/``else`` whose other arm
makes one of these markers (``if args.distributed: sampler = DistributedSampler(ds) ...
else: loader = DataLoader(ds, shuffle=True)``): that arm is the run without a process group.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Iterable, Iterator, Optional, Tuple

import libcst as cst

from dslint.semantics.walk import iter_subtree

#: qualified-name prefixes of libraries: never a project function
LIBRARIES = ("builtins.", "torch.", "numpy.", "os.", "sys.", "math.", "random.", "logging.", "time.", "json.")

PROCESS_GROUP_CALLS = {
    "torch.distributed.init_process_group": "`init_process_group`",
    "torch.distributed.distributed_c10d.init_process_group": "`init_process_group`",
    "torch.nn.parallel.DistributedDataParallel": "`DistributedDataParallel`",
    "torch.nn.parallel.distributed.DistributedDataParallel": "`DistributedDataParallel`",
    "torch.distributed.fsdp.FullyShardedDataParallel": "`FullyShardedDataParallel`",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel": "`FullyShardedDataParallel`",
    "torch.distributed.fsdp.fully_shard": "`fully_shard`",
    "torch.utils.data.DistributedSampler": "a `DistributedSampler`",
    "deepspeed.initialize": "`deepspeed.initialize`",
    "deepspeed.init_distributed": "`deepspeed.init_distributed`",
    "horovod.torch.init": "`hvd.init`",
}
#: calls that start a process group (followed into project functions of other files)
INIT_CALLS = frozenset(
    {"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group",
     "deepspeed.init_distributed", "horovod.torch.init"}
)
#: markers that start the distributed state (the others may sit in a helper the script imports)
STARTS = INIT_CALLS | {"deepspeed.initialize"}
FRAMEWORK_CALLS = {"accelerate.Accelerator": "`Accelerator()`", "lightning.fabric.Fabric": "`Fabric()`",
                   "lightning.Fabric": "`Fabric()`", "lightning_fabric.Fabric": "`Fabric()`"}
RANK_ENV = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})


@dataclass(frozen=True)
class Marker:
    """Where a file shows that it runs once per rank."""

    node: cst.CSTNode
    #: "`init_process_group`", "`os.environ['LOCAL_RANK']`", ...
    what: str
    #: "process_group" (plain torch.distributed) or "framework" (accelerate/Fabric shard what they prepare)
    kind: str = "process_group"
    #: the file starts the processes' distributed state itself (``init_process_group``, the launcher's
    #: environment, an ``Accelerator``): it is the script each rank runs, not a helper it imports
    start: bool = True


def ddp_marker(ctx, *, start: bool = False) -> Optional[Marker]:
    """The first sign (in source order) that the file runs once per rank; with ``start``, only a
    sign that the file starts its distributed state itself. None when nothing shows it."""
    return ctx.memo(("distributed.marker", start), lambda: _find_marker(ctx, start))


def _find_marker(ctx, start: bool) -> Optional[Marker]:
    framework = None
    for call in ctx.nodes(cst.Call):
        name = ctx.call_name(call)
        if name in PROCESS_GROUP_CALLS and (name in STARTS or not start):
            return Marker(call, PROCESS_GROUP_CALLS[name], start=name in STARTS)
        if name in FRAMEWORK_CALLS and framework is None:
            framework = Marker(call, FRAMEWORK_CALLS[name], "framework")
        key = env_key(ctx, call)
        if key in RANK_ENV:
            return Marker(call, f"a read of `{key}` from the launcher's environment")
    for sub in ctx.nodes(cst.Subscript):
        key = env_key(ctx, sub)
        if key in RANK_ENV:
            return Marker(sub, f"a read of `{key}` from the launcher's environment")
    found = _project_subclass_marker(ctx) if not start else None
    found = found or _marker_elsewhere(ctx)
    return found or framework


def _project_calls(ctx) -> Iterator[Tuple[cst.Call, str]]:
    """(call, qualified name) for the first call of each distinct dotted name that is not a library's."""
    asked = set()
    for call in ctx.nodes(cst.Call):
        name = ctx.call_name(call)
        if name and name not in asked and not name.startswith(LIBRARIES) and "." in name:
            asked.add(name)
            yield call, name


def _project_subclass_marker(ctx) -> Optional[Marker]:
    """A construction of a project class (any file) deriving from ``DistributedDataParallel``,
    FSDP or ``DistributedSampler`` (``from mylib import DistributedSampler``, a subclass that adds
    replica groups): the file runs once per rank as with torch's own class."""
    for call, name in _project_calls(ctx):
        root = ddp_subclass_root(ctx, name)
        if root is not None:
            return Marker(call, f"`{name}`, a subclass of {PROCESS_GROUP_CALLS[root]}", start=False)
    return None


def ddp_subclass_root(ctx, qualified: str) -> Optional[str]:
    """The torch class (DDP, FSDP, ``DistributedSampler``) the project class ``qualified`` (any
    file) derives from, or None."""
    bases = ctx.view.external_bases(qualified) or ()
    return next((base for base in bases if base in PROCESS_GROUP_CALLS and base not in STARTS), None)


def _marker_elsewhere(ctx) -> Optional[Marker]:
    """A call of a project function (any file; the first 20 asked) that starts a process group,
    itself or in a function it calls."""
    for call, name in islice(_project_calls(ctx), 20):
        if project_calls_any(ctx, name, INIT_CALLS, depth=1):
            return Marker(call, f"`{name.rsplit('.', 1)[-1]}` (it calls `init_process_group`)")
    return None


def project_calls_any(ctx, qualified: str, wanted: Iterable[str], depth: int = 2) -> bool:
    """The project function ``qualified`` (any file) calls one of ``wanted``, ``depth`` calls deep."""
    wanted = frozenset(wanted)
    facts = ctx.view.function_facts(qualified)
    if facts is None:
        return False
    targets = [target for kind, target, _ in facts.get("calls", ()) if kind == "func"]
    if any(t in wanted for t in targets):
        return True
    if depth <= 0:
        return False
    return any(project_calls_any(ctx, t, wanted, depth - 1) for t in targets[:20] if not t.startswith(LIBRARIES))


def env_key(ctx, node: cst.CSTNode) -> Optional[str]:
    """``"RANK"`` for ``os.environ["RANK"]``, ``os.environ.get("RANK")``, ``os.getenv("RANK")``."""
    if isinstance(node, cst.Subscript):
        if ctx.qualname(node.value) != "os.environ" if isinstance(node.value, (cst.Name, cst.Attribute)) else True:
            return None
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = ctx.literal(node.slice[0].slice.value)
            return key if isinstance(key, str) else None
        return None
    if isinstance(node, cst.Call) and node.args:
        func = node.func
        getter = (isinstance(func, cst.Attribute) and func.attr.value == "get"
                  and isinstance(func.value, (cst.Name, cst.Attribute)) and ctx.qualname(func.value) == "os.environ")
        if getter or ctx.call_name(node) == "os.getenv":
            key = ctx.literal(node.args[0].value)
            return key if isinstance(key, str) else None
    return None


def single_process_arm(ctx, node) -> bool:
    """See the module docstring."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(ancestor, cst.If) and ancestor.orelse is not None:
            other = ancestor.orelse if child is ancestor.body else ancestor.body if child is ancestor.orelse else None
            if other is not None and any(
                isinstance(n, cst.Call) and ctx.call_name(n) in PROCESS_GROUP_CALLS
                for n in iter_subtree(other, into_scopes=False)
            ):
                return True
        child = ancestor
    return False
