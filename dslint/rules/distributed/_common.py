"""Helpers the DSL7xx rules share: Lightning hooks, what a loader's sampler and dataset
may be, where a loader goes, and what a loop over it does (trains, writes per-rank
output, evaluates)."""

from __future__ import annotations

from typing import List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.batches import evaluation_only, fresh_iterator_advances
from dslint.semantics.bindings import local_class_path
from dslint.semantics.calls import BoundCall, Signature
from dslint.semantics.classes import find_method, local_mro
from dslint.semantics.cuda import cuda_use
from dslint.semantics.cuda_kept import kept_on_instance
from dslint.semantics.ddp_markers import single_process_arm
from dslint.semantics.distributed import (
    RANK_CALLS,
    WORLD_CALLS,
    ddp_marker,
    global_seeds,
    line_of,
    mentions_rank,
    method_name,
    rank_dependent,
    rank_guarded,
    read_on_one_rank,
    trains,
)
from dslint.semantics.loops import DISTRIBUTED_SAMPLER, RANDOM_SAMPLER, SEQUENTIAL_SAMPLER, is_none, is_test_code
from dslint.semantics.rank_entries import split_entry_scripts
from dslint.semantics.trained_results import returned_position
from dslint.semantics.project import ITERABLE, ITERABLE_ROOTS, MAP
from dslint.semantics.worker_info import is_worker_info
from dslint.semantics.instance_state import assign_targets
from dslint.semantics.lightning import is_lightning_class, lightning_hook
from dslint.semantics.random_splits import seeded_before
from dslint.semantics.regions import self_attr
from dslint.semantics.values import expand_kwargs, possible_arg
from dslint.semantics.walk import iter_subtree

#: torch's samplers that draw random indices over the whole dataset (or a subset) on every rank
DRAWING_SAMPLERS = frozenset({"torch.utils.data.WeightedRandomSampler", "torch.utils.data.SubsetRandomSampler"})
TENSOR_DATASET = "torch.utils.data.TensorDataset"
#: calls that take a loader and shard it themselves (accelerate, Lightning, Fabric, deepspeed)
FRAMEWORK_SINKS = frozenset(
    {"prepare", "prepare_data_loader", "fit", "validate", "test", "predict", "setup_dataloaders", "initialize"}
)
SAVE_METHODS = frozenset(
    {"save", "savez", "savez_compressed", "dump", "to_csv", "to_parquet", "to_json", "imwrite", "imsave", "save_image",
     "write_text", "write_bytes", "memmap_", "save_pretrained"}
)


def ignored_seed(ctx, call: cst.Call) -> Optional[str]:
    """``self.seed`` when the class whose method makes ``call`` stores a seed (an attribute named
    like one) that the call does not use: the split was meant to be seeded and is not."""
    func = ctx.enclosing_function(call)
    cls = ctx.method_class(func) if func is not None else None
    if cls is None:
        return None
    used = {n.value for n in iter_subtree(call) if isinstance(n, cst.Name)}
    used |= {n.attr.value for n in iter_subtree(call) if isinstance(n, cst.Attribute)}
    for klass in local_mro(ctx, cls):
        for node in iter_subtree(klass):
            if not isinstance(node, (cst.AssignTarget, cst.AnnAssign)):
                continue
            for target in iter_subtree(node.target):
                if (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"
                        and "seed" in target.attr.value.lower() and target.attr.value not in used):
                    return f"self.{target.attr.value}"
    return None


# --------------------------------------------------------------------------- loaders


def sampler_kinds(ctx, index, loader) -> Optional[Set[str]]:
    """What a loader's ``sampler`` may be: "none" (also a ``**`` dict built without it on every path), "random"
    (also torch's weighted or subset sampler over weights or indices not cut per rank), "sequential",
    "distributed" (torch's own), "other"; None when unknown (a ``**`` dict not shown in full, a value from elsewhere)."""
    bound = loader.bound
    if bound.expr("batch_sampler") is not None and not is_none(bound.expr("batch_sampler")):
        return {"other"}
    expr = bound.expr("sampler")
    if expr is None:
        entries, closed = expand_kwargs(ctx, bound.call) if bound.is_open and not bound.has_star_args else ({}, not bound.is_open)
        return {"none"} if closed and not {"sampler", "batch_sampler"} & set(entries) else None
    out: Set[str] = set()
    for value in index.values(expr):
        node = value.node
        if node is None:
            return None
        if is_none(node):
            out.add("none")
            continue
        name = ctx.call_name(node) if isinstance(node, cst.Call) else None
        if name in DRAWING_SAMPLERS and not rank_dependent(ctx, index, node, shards=True):
            name = RANDOM_SAMPLER  # weights or indices not cut per rank: every rank draws from all of them
        out.add({RANDOM_SAMPLER: "random", SEQUENTIAL_SAMPLER: "sequential", DISTRIBUTED_SAMPLER: "distributed"}.get(name, "other"))
    return out


def dataset_kind(ctx, index, expr: Optional[cst.CSTNode]) -> Optional[str]:
    """MAP or ITERABLE when every value the dataset expression may take is a known dataset of
    that kind (a project class across files, torch's and torchvision's); None otherwise."""
    if expr is None:
        return None
    direct = ctx.dataset_kind(expr)
    if direct is not None:
        return direct
    kinds = set()
    for value in index.values(expr):
        node = value.node
        if not isinstance(node, cst.Call) or not isinstance(node.func, (cst.Name, cst.Attribute)):
            return None
        kind = ctx.class_kind_of_ref(node.func)
        if ctx.call_name(node) == "torch.utils.data.Subset":
            kind = MAP
        if kind is None:
            return None
        kinds.add(kind)
    return kinds.pop() if len(kinds) == 1 else None


def can_shuffle(ctx, loader) -> bool:
    """``shuffle`` can be True (a literal, a default, an argparse default...)."""
    return possible_arg(ctx, loader.bound, "shuffle").can_be(lambda v: v is True) is not None


def map_style(ctx, index, loader, samplers: Set[str]) -> bool:
    """The loader indexes its dataset: a known map-style dataset, or a loader that shuffles or has a
    ``RandomSampler`` (both need ``__len__`` and indexing; an IterableDataset raises)."""
    kind = dataset_kind(ctx, index, loader.bound.expr("dataset"))
    if kind == ITERABLE:
        return False
    return kind == MAP or "random" in samplers or (can_shuffle(ctx, loader) and loader.bound.passed("shuffle"))


def handed_to_framework(ctx, index, loader) -> bool:
    """The loader is passed to ``accelerator.prepare``/``trainer.fit``/``fabric.setup_dataloaders``...,
    which re-create its sampler per rank (or to any call with such a name that this file does not define)."""
    for call in ctx.nodes(cst.Call):
        if method_name(call) not in FRAMEWORK_SINKS or index.call_target(call) is not None:
            continue
        for arg in call.args:
            if any(value.node is loader.call for value in index.values(arg.value)):
                return True
    return False


def loops_over(index, loader):
    return [loop for loop in index.loops_of(loader)]


def per_rank_output(ctx, index, loop) -> Optional[cst.Call]:
    """A save in the loop whose arguments name the rank (``torch.save(x, f"out_{rank}_{i}.pt")``):
    the work is meant to be split across ranks, one output each."""
    for call in index.loop_calls(loop.loop):
        if method_name(call) in SAVE_METHODS and any(rank_dependent(ctx, index, a.value) for a in call.args):
            return call
    return None


def every_use_guarded(ctx, index, loader) -> bool:
    """The loader is built, or every loop over it runs (with no loop seen: every read of it), on one rank only; or it is built in the arm
    of an ``if``/``else`` whose other arm sets up DDP (``ddp_markers.single_process_arm``): the run
    without a process group."""
    if rank_guarded(ctx, loader.call) or single_process_arm(ctx, loader.call):
        return True
    loops = index.loops_of(loader)
    if not loops:  # no loop over it here: every read of it (``validate(loader)``) runs on one rank
        return read_on_one_rank(ctx, index, loader)
    return all(rank_guarded(ctx, loop.loop) or any(rank_guarded(ctx, c) for c in loop.path) for loop in loops)


def per_rank_work(ctx, index, loader, samplers) -> Optional[str]:
    """What makes iterating the whole dataset on every rank wrong for this loader (DSL702), or None."""
    for loop in index.loops_of(loader):
        if trains(index, loop) is not None:
            return "each epoch trains on every sample once per rank"
        saved = per_rank_output(ctx, index, loop)
        if saved is not None:
            return (f"every rank processes every sample and saves it (line {line_of(ctx, saved)}): the work and "
                    "the output are duplicated once per rank")
    if "random" in samplers or (can_shuffle(ctx, loader) and "sequential" not in samplers):
        if evaluation_only(ctx, index, loader, fresh_iterator_advances(ctx)):
            return None  # shuffled, but only evaluated or looked at here (one batch, then `break`)
        return "each epoch trains on every sample once per rank (a shuffled, training loader)"
    return None


def factory_trained(ctx, loader) -> Optional[Tuple[str, str, str]]:
    """(module, its DDP marker, the factory) when the loader's function returns it (or it as an
    element of a returned tuple) and a DDP file of the project trains on that result."""
    position = returned_position(ctx, loader.call)
    if position is None:
        return None
    func = ctx.enclosing_function(loader.call)
    for module, marker, where in ctx.view.ddp_trained_positions(ctx.qualname_of_def(func)):
        if where == position:
            return module, marker, func.name.value
    return None


def calls_in(block: cst.CSTNode):
    return [n for n in iter_subtree(block, into_scopes=False) if isinstance(n, cst.Call)]


# --------------------------------------------------------------------------- random_split per rank


def stage_resplits(ctx, calls, skip=()) -> List[cst.Call]:
    """Unseeded splits (but those in ``skip``) in the ``setup`` hook of a Lightning datamodule or
    module that keep a part for the test stage on ``self`` (``self.data_test``) and are guarded by nothing: no ``if`` around the call and no ``if`` with a
    ``return`` in the hook (``if stage == "fit":``, ``if self.train is not None: return``), and no
    seed set before it there. Lightning calls ``setup`` once per stage: each call draws anew."""
    out = []
    for call in calls:
        func = ctx.enclosing_function(call)
        if id(call) in skip or func is None or func.name.value != "setup" or seeded_before(ctx, call):
            continue
        cls = ctx.method_class(func)
        if cls is None or not is_lightning_class(ctx, cls):
            continue
        if not any("test" in attr.lower() for attr in _kept_on_self(ctx, call, func)):
            continue  # no part for the test stage: fit and validation use the one draw
        guarded = False
        for ancestor in ctx.ancestors(call):
            if ancestor is func:
                break
            guarded = guarded or isinstance(ancestor, (cst.If, cst.IfExp))
        if not guarded and not any(
                isinstance(n, cst.If) and any(isinstance(r, cst.Return) for r in iter_subtree(n.body, into_scopes=False))
                for n in iter_subtree(func.body, into_scopes=False)):
            out.append(call)
    return out


def _kept_on_self(ctx, call: cst.Call, func: cst.FunctionDef) -> List[str]:
    """The ``self`` attributes the split's parts end on: assigned there directly (``self.train,
    self.val = ...``), or through names the hook then assigns to ``self`` attributes."""
    parent = ctx.parent(call)
    if not isinstance(parent, cst.Assign):
        return []
    targets = []
    for target in assign_targets(parent):
        targets += [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
    kept = [attr for attr in (self_attr(t, "self") for t in targets) if attr]
    names = {t.value for t in targets if isinstance(t, cst.Name)}
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value in names:
            kept += [attr for attr in (self_attr(t, "self") for t in assign_targets(node)) if attr]
    return kept


def per_rank_splits(ctx, index, calls, skip=()):
    """(call, DSL701's message) for each unseeded split (but those in ``skip``, by id) that runs
    once per rank: in a Lightning hook of a class storing a seed the split ignores, in a file that
    starts its distributed state, or in a function that such a script of another file calls
    (``rank_entries``); unless the global RNG is seeded the same on every rank."""
    marker = None
    for call in calls:
        if id(call) in skip or is_test_code(ctx, call) or rank_guarded(ctx, call):
            continue
        hook = lightning_hook(ctx, call)
        if hook is not None:
            seed = ignored_seed(ctx, call)
            if seed is None:
                continue  # the training script (another file) may seed the global RNG: not seen
            where = f"Lightning calls `{hook}` on every rank and the split ignores `{seed}`"
        else:
            marker = marker or ddp_marker(ctx, start=True)
            entries = None if marker is not None else split_entry_scripts(ctx, call)
            if marker is None and not entries:
                continue
            where = (f"this script runs once per rank ({marker.what}, line {line_of(ctx, marker.node)})" if marker else
                     f"`{entries[0][0]}` runs once per rank ({entries[0][1]}), seeds the global RNG per rank and "
                     f"reaches `{entries[0][2]}`")
        seeds = global_seeds(ctx, index)
        if any(not per_rank for _, per_rank in seeds):
            continue  # the same global seed on every rank: the same split
        seeded = (f"; the global RNG is seeded per rank (line {line_of(ctx, seeds[0][0])})" if seeds else "")
        yield call, (
            "`random_split` without `generator=` draws its permutation from torch's global RNG, which each "
            f"process seeds on its own: {where}{seeded}, so every rank gets a different split and samples one rank "
            "validates on are trained on by another")


# --------------------------------------------------------------------------- streams

HF_LOAD = "datasets.load_dataset"
HF_SPLIT = frozenset({"datasets.distributed.split_dataset_by_node"})
#: methods of a Hugging Face dataset that return a dataset of the same rows
HF_SAME_ROWS = frozenset(
    {"map", "filter", "shuffle", "select_columns", "remove_columns", "rename_column", "rename_columns", "with_format",
     "cast", "cast_column", "add_column", "batch", "take", "skip", "with_transform", "set_format"}
)


def hf_stream(ctx, index, expr, depth: int = 0) -> Optional[Tuple[str, Optional[cst.Call]]]:
    """("stream", the ``load_dataset`` call) when ``expr`` may be a Hugging Face streaming dataset
    (``streaming=`` can be True, or ``.to_iterable_dataset()``) that nothing splits by node;
    ("split", None) when a path goes through ``split_dataset_by_node``/``.shard(...)``; None otherwise."""
    if expr is None or depth > 6:
        return None
    found = None
    for value in index.values(expr):
        node = value.node
        if not isinstance(node, cst.Call):
            continue
        name = ctx.call_name(node)
        method = method_name(node) if isinstance(node.func, cst.Attribute) and name is None else None
        if name in HF_SPLIT or method == "shard":
            return ("split", None)
        answer = None
        if name == HF_LOAD:
            streaming = possible_arg(ctx, BoundCall(node, Signature(("path",), ("streaming",), {"streaming": False})), "streaming")
            if streaming.can_be(lambda v: v is True) is not None:
                answer = ("stream", node)
        elif method in HF_SAME_ROWS:
            answer = hf_stream(ctx, index, node.func.value, depth + 1)
        elif method == "to_iterable_dataset":
            inner = hf_stream(ctx, index, node.func.value, depth + 1)
            answer = inner if inner is not None else _loaded(ctx, index, node.func.value)
        if answer is not None and answer[0] == "split":
            return answer
        found = found or answer
    return found


def _loaded(ctx, index, expr) -> Optional[Tuple[str, Optional[cst.Call]]]:
    for value in index.values(expr):
        if isinstance(value.node, cst.Call) and ctx.call_name(value.node) == HF_LOAD:
            return ("stream", value.node)
    return None


_NEUTRAL_BASES = frozenset({"builtins.object", "typing.Generic", "abc.ABC"})


def rank_blind_stream(ctx, cls: cst.ClassDef) -> Optional[cst.FunctionDef]:
    """The ``__iter__`` of an IterableDataset class whose bases are all known (this file's
    classes, torch's IterableDataset), that splits its stream by DataLoader worker
    (``get_worker_info``, also in a helper of any file) but never names a rank or a world size."""
    family = local_mro(ctx, cls)
    for klass in family:
        for base in klass.bases:
            if base.keyword is not None:
                continue
            expr = base.value.value if isinstance(base.value, cst.Subscript) else base.value
            if isinstance(expr, cst.Name) and local_class_path(ctx.tree, expr.value) is not None:
                continue
            if ctx.qualname(expr) not in ITERABLE_ROOTS | _NEUTRAL_BASES:
                return None
    iter_func = find_method(ctx, cls, "__iter__")
    if iter_func is None:
        return None
    qual = ctx.qualname_of_def(cls)
    reached = ctx.view.reachable_facts(qual, "__iter__")
    by_worker = any(is_worker_info(ctx, n) for klass in family for n in iter_subtree(klass)) or any(
        facts and facts.get("worker_info") for facts in reached)
    if not by_worker:
        return None  # DSL303's case: it splits by nothing
    if any(mentions_rank(ctx, klass, shards=True) for klass in family):
        return None
    for facts in reached:
        for _, target, _ in (facts or {}).get("calls", ()):
            if target in RANK_CALLS or target in WORLD_CALLS or target.rsplit(".", 1)[-1] in ("get_rank", "get_world_size"):
                return None
    return iter_func


def stream_classes(ctx, index, expr) -> List[cst.ClassDef]:
    """This file's classes the dataset expression may construct."""
    out = []
    for value in index.values(expr):
        node = value.node
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            cls = local_class_path(ctx.tree, node.func.value)
            if cls is not None and cls not in out:
                out.append(cls)
    return out


def torch_distributed_samplers(ctx, index, loader) -> List[cst.Call]:
    """torch's own ``DistributedSampler(...)`` calls the loader's sampler may be."""
    return index.sampler_calls(loader, (DISTRIBUTED_SAMPLER,))


# --------------------------------------------------------------------------- CUDA tensors in workers

START_METHOD_CALLS = frozenset({"multiprocessing.set_start_method", "torch.multiprocessing.set_start_method"})
#: tensor methods whose result stays on the receiver's device
SAME_DEVICE = frozenset(
    {"float", "double", "half", "bfloat16", "long", "int", "bool", "contiguous", "view", "reshape", "unsqueeze",
     "squeeze", "clone", "detach", "permute", "transpose", "flatten", "requires_grad_", "share_memory_"}
)


def forks_workers(ctx, loader) -> Optional[str]:
    """How many workers the loader may fork ("4 workers"), when it can have workers and starts
    them with ``fork``; None otherwise."""
    workers = possible_arg(ctx, loader.bound, "num_workers").can_be(
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0)
    if workers is None:
        return None
    if not possible_arg(ctx, loader.bound, "multiprocessing_context").must_be(lambda v: v is None or v == "fork"):
        return None
    for call in ctx.calls_to(*START_METHOD_CALLS):
        if not call.args or ctx.literal(call.args[0].value) != "fork":
            return None
    literal = workers.origin.startswith("`") or workers.origin in ("the default", "the literal")
    return f"{workers.value} workers" + ("" if literal else f" ({workers.origin})")


def cuda_value(ctx, index, expr, depth: int = 0) -> Optional[Tuple[str, cst.Call]]:
    """(what puts it on the GPU, the call) when ``expr`` may be a tensor made on the GPU."""
    if expr is None or depth > 3:
        return None
    for value in index.values(expr):
        node = value.node
        if not isinstance(node, cst.Call):
            continue
        what = cuda_use(ctx, node)
        if what is not None and what != "`.pin_memory()`":
            return what, node
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in SAME_DEVICE:
            inner = cuda_value(ctx, index, node.func.value, depth + 1)
            if inner is not None:
                return inner
    return None


def cuda_held(ctx, index, dataset) -> Optional[Tuple[str, cst.Call]]:
    """(what holds CUDA tensors, the call that put one there) for a ``TensorDataset`` of CUDA
    tensors or an instance of this file's dataset class whose ``__init__`` stores one on ``self``."""
    if dataset is None:
        return None
    for value in index.values(dataset):
        node = value.node
        if not isinstance(node, cst.Call):
            continue
        if ctx.call_name(node) == TENSOR_DATASET:
            for arg in node.args:
                found = cuda_value(ctx, index, arg.value)
                if found is not None:
                    return f"a `TensorDataset` of {found[0]} tensors", found[1]
            continue
        cls = local_class_path(ctx.tree, node.func.value) if isinstance(node.func, cst.Name) else None
        init = find_method(ctx, cls, "__init__") if cls is not None and ctx.class_kind(cls) else None
        if init is None:
            continue
        for stmt in iter_subtree(init.body, into_scopes=False):
            if isinstance(stmt, cst.Assign) and any(_on_self(t.target, init) for t in stmt.targets):
                for call in iter_subtree(stmt.value, into_scopes=False):
                    what = cuda_use(ctx, call) if isinstance(call, cst.Call) else None
                    if what is not None and what != "`.pin_memory()`" and kept_on_instance(ctx, call):
                        return f"`{cls.name.value}.__init__` stores a tensor moved with {what}", call
    return None


def _on_self(target, func) -> bool:
    params = func.params.params
    return (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and bool(params)
            and target.value.value == params[0].name.value)


def dropped_sampler_message(ctx, d) -> str:
    """DSL702's message for a loader that does not get the `DistributedSampler` built for its dataset."""
    how = (f"`{ctx.code(d.at)}` replaces it before the loader reads it" if d.picked_when is None
           else f"the loader drops it when `{ctx.code(d.at)}` is {str(d.picked_when).lower()}")
    return (f"this DataLoader does not get the `DistributedSampler` built for its dataset on line "
            f"{line_of(ctx, d.built)}: {how}, so every rank iterates the whole dataset")
