"""Distributed (DDP) facts of one file.

The DSL7xx rules ask the same questions, answered here from the one parse and, for
what crosses files, through ``ctx.view``:

* **does this file run under a process group** (``ddp_marker``, from ``ddp_markers.py``): the
  first sign that it runs once per rank (``init_process_group``, DDP/FSDP, a ``DistributedSampler``
  or a project subclass of one of them, the launcher's environment, a project function that starts
  a process group); an ``accelerate.Accelerator()`` is a *framework* marker;
* **which expressions name a rank** (``mentions_rank``): ``get_rank()``, the
  launcher's rank variables, ``accelerator.process_index``, and names spelled like a
  rank (``local_rank``, ``is_main_process``, ``master_process``); with
  ``shards=True`` also the world size (``world_size``, ``num_replicas``,
  ``num_shards``), which a per-rank shard needs;
* **which code runs on one rank only** (``rank_guarded``): under an ``if`` whose
  test names a rank; and a loader no loop of the file iterates whose every read is
  such code (``read_on_one_rank``);
* **whether the global RNG is seeded the same on every rank** (``global_seeds``):
  ``torch.manual_seed``/``seed_everything``/``set_seed`` calls (also inside a
  project function, any file; a function of a file the engine did not analyse
  counts when its name says seed: ``utils.set_seed(args.seed)``), Lightning's CLI
  (it seeds before building the datamodule), and whether their seed names a rank
  (``seed + rank`` seeds each rank differently);
* **whether results are combined across ranks** (``gather_calls``): the
  collectives (``all_gather``, ``all_reduce``, ``gather_object``...), accelerate's
  ``gather``/``reduce``, and project functions (any file) that call them;
* **which loaders feed a gathered evaluation** (``eval_feeds``): a loop in this
  file over a loader whose sampler does not shuffle and that no training loop uses
  (a loop that calls ``.backward()`` trains: ``trains``), whose function, or a caller
  of it, gathers; unless it de-duplicates (``gather_for_metrics``, a slice bounded by
  ``len(...)``, results keyed by the sample index the batch carries or written with
  ``index_copy_``/``scatter_``). A loader handed to a function of another file is
  unknown: whether that function de-duplicates cannot be seen from its summary.

Cross-file facts come from the summaries of the files the engine analyses (those
that use the data API): a helper in a file that never mentions it is unknown.

Nothing here guesses: a value that cannot be followed is unknown and the rules stay
silent on it.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from dslint.semantics.calls import BoundCall
from dslint.semantics.loops import DISTRIBUTED_SAMPLER_SIGNATURE
from dslint.semantics.names import dotted_parts
from dslint.semantics.ddp_markers import (  # noqa: F401  (re-exported: the DSL7xx rules ask here)
    FRAMEWORK_CALLS, INIT_CALLS, LIBRARIES, PROCESS_GROUP_CALLS, RANK_ENV, STARTS, Marker, ddp_marker, env_key,
    project_calls_any,
)
from dslint.semantics.eval_keys import INDEX_WRITES, keyed_store, sample_index_name, unique_ids
from dslint.semantics.instance_state import is_read
from dslint.semantics.seed_helpers import passed_arguments
from dslint.semantics.values import possible_arg
from dslint.semantics.walk import iter_subtree

RANK_CALLS = frozenset(
    {"torch.distributed.get_rank", "torch.distributed.get_node_local_rank", "torch.distributed.distributed_c10d.get_rank",
     "horovod.torch.rank", "horovod.torch.local_rank"}
)
WORLD_CALLS = frozenset({"torch.distributed.get_world_size", "horovod.torch.size"})
#: identifiers that name this process's rank, or whether it is the main one
RANK_NAMES = frozenset(
    {"process_index", "local_process_index", "is_main_process", "is_local_main_process", "main_process",
     "master_process", "is_master", "is_main", "is_global_zero", "is_primary", "is_chief", "node_rank"}
)
#: identifiers that name the world a per-rank shard is cut from
WORLD_NAMES = frozenset(
    {"world_size", "num_replicas", "num_processes", "num_shards", "shard_id", "n_shards", "nshards", "ddp_world_size",
     "world", "split_dataset_by_node", "split_by_node", "nodesplitter"}
)
SEED_CALLS = frozenset(
    {"torch.manual_seed", "torch.random.manual_seed", "pytorch_lightning.seed_everything",
     "pytorch_lightning.utilities.seed.seed_everything", "lightning.seed_everything", "lightning.pytorch.seed_everything",
     "lightning.fabric.seed_everything", "lightning_fabric.seed_everything",
     "lightning_fabric.utilities.seed.seed_everything", "lightning.pytorch.utilities.seed.seed_everything",
     "transformers.set_seed", "transformers.trainer_utils.set_seed", "accelerate.utils.set_seed",
     "accelerate.utils.random.set_seed", "timm.utils.random_seed"}
)
#: Lightning's CLI seeds the global RNG before it builds the datamodule (``seed_everything_default``)
SEEDING_CLIS = frozenset(
    {"lightning.pytorch.cli.LightningCLI", "pytorch_lightning.cli.LightningCLI", "pytorch_lightning.utilities.cli.LightningCLI",
     "lightning.pytorch.LightningCLI"}
)
GATHER_CALLS = frozenset(
    {"torch.distributed.all_gather", "torch.distributed.all_gather_object", "torch.distributed.all_gather_into_tensor",
     "torch.distributed.gather", "torch.distributed.gather_object", "torch.distributed.all_reduce",
     "torch.distributed.reduce", "torch.distributed.reduce_scatter", "torch.distributed.nn.all_gather",
     "torch.distributed.nn.functional.all_gather", "torch.distributed.nn.functional.all_reduce",
     "horovod.torch.allreduce", "horovod.torch.allgather", "horovod.torch.allgather_object"}
)
#: accelerate's and Fabric's methods that combine values across processes
GATHER_METHODS = frozenset({"gather", "reduce", "all_gather", "all_reduce"})
#: gathers that drop the sampler's padding themselves
DEDUP_METHODS = frozenset({"gather_for_metrics"})


def line_of(ctx, node: cst.CSTNode) -> int:
    """The 1-based line where ``node`` starts (for messages; regenerates the code once per node)."""
    from dslint.positions import node_ranges

    found = node_ranges(ctx.module, [node]).get(id(node))
    return found[0][0] if found else 0


# ----------------------------------------------------------------------- does it run under DDP


# ----------------------------------------------------------------------- ranks


def _identifier_is_rank(name: str, shards: bool) -> bool:
    lower = name.lower()
    if "rank" in lower or lower in RANK_NAMES:
        return True
    return shards and (lower in WORLD_NAMES or lower.endswith("world_size"))


def mentions_rank(ctx, expr: Optional[cst.CSTNode], *, shards: bool = False) -> bool:
    """``expr`` names this process's rank (or, with ``shards``, the world a shard is cut from);
    a class or function is searched with its nested bodies."""
    if expr is None:
        return False
    for node in iter_subtree(expr, into_scopes=isinstance(expr, (cst.ClassDef, cst.FunctionDef))):
        if isinstance(node, cst.Name) and _identifier_is_rank(node.value, shards):
            return True
        if isinstance(node, cst.Attribute) and _identifier_is_rank(node.attr.value, shards):
            return True
        if isinstance(node, cst.Arg) and node.keyword is not None and _identifier_is_rank(node.keyword.value, shards):
            return True
        if isinstance(node, cst.Call):
            name = ctx.call_name(node)
            if name in RANK_CALLS or (shards and name in WORLD_CALLS):
                return True
            key = env_key(ctx, node)
            if key in RANK_ENV and (shards or "RANK" in key or "PROCID" in key):
                return True
        if isinstance(node, cst.Subscript):
            key = env_key(ctx, node)
            if key in RANK_ENV and (shards or "RANK" in key or "PROCID" in key):
                return True
    return False


def construction_reads_world(names, cls: cst.ClassDef) -> bool:
    """Phase 1 (class fact ``world_sharded``): the class's ``__init__`` asks for the number of
    processes (``torch.distributed.get_world_size()``): a dataset that keeps its own share of the
    data on each rank (``if i % world_size == rank``) is cut per rank when it is built."""
    for stmt in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            return any(isinstance(n, cst.Call) and isinstance(n.func, (cst.Name, cst.Attribute))
                       and names.qualname(n.func) in WORLD_CALLS for n in iter_subtree(stmt.body))
    return False


def rank_dependent(ctx, index, expr: Optional[cst.CSTNode], *, shards: bool = False, depth: int = 0) -> bool:
    """``expr``, or what its names are bound to (their assignments in scope, and their values
    through ``index.values``: parameters, returns; two steps), names a rank; with ``shards``, also
    a construction of a project class that reads the world size when it is built."""
    if expr is None:
        return False
    if mentions_rank(ctx, expr, shards=shards) or (shards and isinstance(expr, cst.Call) and _world_sharded(ctx, expr)):
        return True
    if depth >= 2:
        return False
    for node in iter_subtree(expr, into_scopes=False):
        if not isinstance(node, cst.Name) or node.value in ("None", "True", "False") or _not_a_variable(ctx, node):
            continue
        _, bindings = index.name_bindings(node.value, node)
        sources = [b.value for b in bindings or () if b.kind == "value" and b.value is not None]
        sources += [v.node for v in index.values(node) if v.node is not None and not isinstance(v.node, cst.FunctionDef)]
        for source in sources:
            if source is not node and rank_dependent(ctx, index, source, shards=shards, depth=depth + 1):
                return True
            if shards and isinstance(source, cst.Call) and _world_sharded(ctx, source):
                return True
    return False


def _world_sharded(ctx, call: cst.Call) -> bool:
    """``call`` constructs a project class whose ``__init__`` (or a base's) reads the world size."""
    name = ctx.call_name(call) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
    return bool(name) and ctx.view.world_sharded(name)


def _not_a_variable(ctx, name: cst.Name) -> bool:
    """The attribute of ``args.model`` or the keyword of ``f(transform=...)``: a name that reads no
    variable, so the bindings of a variable spelled the same say nothing of it."""
    parent = ctx.parent(name)
    return (isinstance(parent, cst.Attribute) and parent.attr is name) or (isinstance(parent, cst.Arg) and parent.keyword is name)


def rank_guarded(ctx, node: cst.CSTNode) -> bool:
    """``node`` runs under an ``if`` (or conditional expression) whose test names a rank; not in
    the ``else`` of a test that picks one rank (``if rank == 0: ... else: <every other rank>``)."""
    previous = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.IfExp)) and previous is not ancestor.test and mentions_rank(ctx, ancestor.test):
            if not (previous is ancestor.orelse and _picks_one_rank(ancestor.test)):
                return True
        previous = ancestor
    return False


def read_on_one_rank(ctx, index, loader) -> bool:
    """Every read of the name the loader's assignment binds, in the loader's function (or the module),
    runs under a rank test (``rank_guarded``: ``if is_main_process(): validation(model, loader)``), and
    there is at least one: for a loader no loop of the file iterates, where it is used is where it runs."""
    statement = ctx.parent(loader.call)
    if not isinstance(statement, cst.Assign) or statement.value is not loader.call:
        return False
    bound = {t.target.value for t in statement.targets if type(t.target) is cst.Name}
    reads = [name for name in iter_subtree(loader.function or ctx.module, into_scopes=False) if type(name) is cst.Name
             and name.value in bound and is_read(ctx, name) and index.is_loader(name, loader)]
    return bool(reads) and all(rank_guarded(ctx, name) for name in reads)


def _picks_one_rank(test) -> bool:
    """``rank == 0``, ``rank in (-1, 0)``, ``is_main_process()``: true on one rank (its ``else`` on the others)."""
    if isinstance(test, cst.Comparison):
        return len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, (cst.Equal, cst.Is, cst.In))
    return isinstance(test, (cst.Call, cst.Name, cst.Attribute))


# ----------------------------------------------------------------------- seeds


def global_seeds(ctx, index) -> List[Tuple[cst.Call, bool]]:
    """Calls that seed torch's global RNG in this file (directly or through a project function of
    any file), each with whether its seed differs per rank (also: a helper adding the rank to it)."""
    return ctx.memo(("distributed.seeds",), lambda: _global_seeds(ctx, index))


def _global_seeds(ctx, index) -> List[Tuple[cst.Call, bool]]:
    out = []
    for call in ctx.nodes(cst.Call):
        name = ctx.call_name(call)
        seeds = name in SEED_CALLS or (name in SEEDING_CLIS and not _seed_off(ctx, call))
        if not seeds and name and not name.startswith(LIBRARIES):
            target = index.call_target(call)
            if target is not None:
                seeds = any(ctx.call_name(c) in SEED_CALLS for c in iter_subtree(target[0].body) if isinstance(c, cst.Call))
            else:
                seeds = project_calls_any(ctx, name, SEED_CALLS, depth=1) or (  # another file's helper (or its name)
                    "seed" in name.rsplit(".", 1)[-1].lower() and ctx.view.function_facts(name) is None)
        if seeds:
            out.append((call, any(rank_dependent(ctx, index, arg.value) for arg in call.args) or (
                name not in SEED_CALLS and not name.startswith(LIBRARIES) and (passed := passed_arguments(call)) is not None
                and ctx.view.helper_seeds_per_rank(name, *passed))))
    return out



def _seed_off(ctx, call: cst.Call) -> bool:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "seed_everything_default":
            return ctx.literal(arg.value) in (False, None)
    return False


# ----------------------------------------------------------------------- gathering


def gather_calls(ctx, index, block: cst.CSTNode, depth: int = 2) -> List[cst.Call]:
    """Calls in ``block`` (and the same-module functions it calls, ``depth`` levels; project
    functions of other files through ``ctx.view``) that combine values across ranks."""
    out: List[cst.Call] = []
    seen = set()
    work = [(block, 0)]
    while work:
        current, level = work.pop()
        for node in iter_subtree(current, into_scopes=False):
            if not isinstance(node, cst.Call):
                continue
            if is_gather(ctx, node):
                out.append(node)
                continue
            target = index.call_target(node)
            if target is not None:
                if level < depth and id(target[0]) not in seen:
                    seen.add(id(target[0]))
                    work.append((target[0].body, level + 1))
                continue
            name = ctx.call_name(node)
            if name and not name.startswith(LIBRARIES) and project_calls_any(ctx, name, GATHER_CALLS, depth=1):
                out.append(node)
    return out


def is_gather(ctx, call: cst.Call) -> bool:
    name = ctx.call_name(call)
    if name in GATHER_CALLS:
        return True
    func = call.func
    return (name is None and isinstance(func, cst.Attribute) and func.attr.value in GATHER_METHODS
            and bool(call.args) and ddp_framework(ctx))


def ddp_framework(ctx) -> bool:
    """The file builds an ``Accelerator``/``Fabric`` (whose ``gather`` combines across processes)."""
    return ctx.memo(("distributed.framework",), lambda: any(ctx.call_name(c) in FRAMEWORK_CALLS for c in ctx.nodes(cst.Call)))


def method_name(call: cst.Call) -> Optional[str]:
    """The last name a call is made by (``backward`` for ``loss.backward()``)."""
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)


def call_order(ctx) -> Dict[int, int]:
    """Position of every call of the file in source order."""
    return ctx.memo(("distributed.call_order",), lambda: {id(c): i for i, c in enumerate(ctx.nodes(cst.Call))})


def trains(index, loop) -> Optional[cst.Call]:
    """A ``.backward()`` call the loop makes (its body or same-module functions it calls)."""
    for call in index.loop_calls(loop.loop):
        if method_name(call) == "backward":
            return call
    return None


# ----------------------------------------------------------------------- evaluation




def _no_shuffle(ctx, samplers) -> bool:
    return all(possible_arg(ctx, BoundCall(s, DISTRIBUTED_SAMPLER_SIGNATURE), "shuffle").must_be(lambda v: v is False)
               for s in samplers)


def _evals_before(ctx, func, loop) -> bool:
    """A ``model.eval()`` call in ``func`` (or the module body) before ``loop``."""
    order = call_order(ctx)
    first = order.get(id(next((c for c in iter_subtree(loop) if isinstance(c, cst.Call)), loop)), 0)
    for node in iter_subtree(func.body if func is not None else ctx.module, into_scopes=False):
        if isinstance(node, cst.Call) and method_name(node) == "eval" and not node.args and order.get(id(node), first) < first:
            return True
    return False


def _truncates(ctx, block) -> bool:
    """A slice bounded by ``len(...)`` (gathered results cut back to the dataset length), or
    ``gather_for_metrics`` (it drops the padding a distributed sampler added)."""
    for node in iter_subtree(block, into_scopes=False):
        if isinstance(node, cst.Call) and method_name(node) in DEDUP_METHODS:
            return True
        if isinstance(node, cst.Slice) and node.upper is not None:
            if any(isinstance(c, cst.Call) and ctx.call_name(c) == "builtins.len" for c in iter_subtree(node.upper)):
                return True
    return False


def _gathered(ctx, index, blocks) -> Optional[Tuple[str, cst.Call]]:
    if any(_truncates(ctx, b) for b in blocks):
        return None
    for block in blocks:
        found = gather_calls(ctx, index, block)
        if found:
            name = ctx.call_name(found[0]) or method_name(found[0]) or "a collective"
            short = name.rsplit(".", 1)[-1]
            what = f"`{short}`" if name in GATHER_CALLS or "." not in name else f"`{short}`, which calls a collective"
            return what, found[0]
    return None


def eval_feeds(ctx, index, loader, samplers) -> Optional[Tuple[str, str, cst.Call]]:
    """(how the loader is evaluated, how the results are gathered, the gathering call) when the
    loader, over samplers that do not shuffle and in no training loop, is iterated in this file
    and the loop's function (or a caller of it) gathers without de-duplicating; None otherwise."""
    loops = index.loops_of(loader)
    if not _no_shuffle(ctx, samplers) or any(trains(index, loop) is not None for loop in loops):
        return None
    for loop in loops:
        func = ctx.enclosing_function(loop.loop)
        if index.is_eval(loop):
            how = "a loop under `no_grad`/`inference_mode`"
        elif _evals_before(ctx, func, loop.loop):
            how = "a loop after `.eval()`"
        else:
            how = "a loop over a sampler that does not shuffle"
        blocks = [func.body if func is not None else ctx.module]
        blocks += [caller_scope.body for caller_scope in _caller_scopes(ctx, index, func)]
        if _keyed_by_index(ctx, loop, blocks):
            continue
        found = _gathered(ctx, index, blocks)
        if found is not None:
            return how, found[0], found[1]
    return None


def _keyed_by_index(ctx, loop, blocks) -> bool:
    """Padded duplicates land on the same entry: the batch carries each sample's index
    (``for x, index in loader``; an ``enumerate`` counter does not count), the results are
    written by index (``index_copy_``, ``scatter_``, ``bank[idx] = out``), or gathered results are picked out by an
    index list (``[gathered[i] for i in original_indices]``)."""
    target = loop.loop.target
    header = loop.loop.iter
    if (isinstance(header, cst.Call) and ctx.call_name(header) == "builtins.enumerate"
            and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
        target = target.elements[1].value
    if any(isinstance(n, cst.Name) and sample_index_name(n.value) for n in iter_subtree(target)):
        return True
    for block in blocks:
        for node in iter_subtree(block, into_scopes=False):
            if isinstance(node, cst.Call) and method_name(node) in INDEX_WRITES:
                return True
            if keyed_store(node) or unique_ids(node):
                return True  # ``bank[idx] = feats``: a duplicate rewrites its own slot (or is dropped by id)
            if isinstance(node, (cst.CompFor, cst.For)) and node is not loop.loop:
                parts = dotted_parts(node.iter) if isinstance(node.iter, (cst.Name, cst.Attribute)) else None
                if parts and sample_index_name(parts[-1]):
                    return True
    return False


def _caller_scopes(ctx, index, func):
    if func is None:
        return []
    out = []
    for call in index.callers(func)[:8]:
        outer = ctx.enclosing_function(call)
        if outer is not None and outer is not func and outer not in out:
            out.append(outer)
    return out
