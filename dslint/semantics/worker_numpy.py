"""DataLoaders whose workers start from the parent's numpy global RNG state (torch < 1.9).

Before torch 1.9 a worker seeded ``random`` and torch itself but not numpy, so every forked
worker began with the same numpy global state (and, as the parent's state does not move,
began so again every epoch). ``unseeded_numpy_loaders(ctx)`` yields, for this file, each
DataLoader call where all of these hold:

1. the project declares torch below 1.9 (``torch_version``: a pin or cap in its requirements,
   setup or conda environment files);
2. its workers can be more than 0 (``num_workers`` is not 0 on every path; unknown counts as
   possibly more) and it has no ``worker_init_fn`` on any path (absent or ``None``);
3. the dataset it gets may draw from numpy's global RNG per sample (``numpy_rng``): its class
   does, or its class calls a function chosen at run time and a project function of that
   name does, or the dataset is chosen at run time (not a class this file can name) and some
   dataset class of the project does (then only for a loader that may shuffle or takes a
   sampler: a training loader);
4. it is not test code, nor a loader this file only evaluates with (every loop over it runs
   under ``no_grad``/``eval()``, without a training step) or built over a test split.
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

import libcst as cst

from dslint.semantics.batches import evaluation_only, evaluation_split
from dslint.semantics.bindings import block_assignment, class_ref, single_assignment
from dslint.semantics.calls import DATALOADER
from dslint.semantics.context import DATALOADER_NAME
from dslint.semantics.loops import is_test_code, loader_loops
from dslint.semantics.summary import local_qualname
from dslint.semantics.values import possible_arg


_HOW = {
    "dataset": "its dataset",
    "chosen": "its dataset calls a function it is handed at run time, and a project function of that name",
    "project": "its dataset is chosen at run time, and a dataset class of the project",
}


def _dataset_name(ctx, expr) -> Tuple[Optional[str], bool]:
    """(qualified class name, chosen at run time)."""
    ref = class_ref(ctx.tree, ctx.names, expr)
    if ref is None:
        return None, True
    if ref[0] == "local":
        return f"{ctx.names.modname}.{local_qualname(ref[1], ctx.tree)}", False
    return ref[1], False


def _built_with(ctx, expr) -> Optional[List[str]]:
    """The keywords of the construction an unknown dataset comes from (``data_set = Data(root=r,
    win=w)`` where ``Data = data_dict[args.data]``), when every argument is a keyword."""
    if isinstance(expr, cst.Name):
        expr = single_assignment(ctx.tree, expr) or block_assignment(ctx.tree, expr)
    if not isinstance(expr, cst.Call) or not expr.args or any(a.star or a.keyword is None for a in expr.args):
        return None
    return sorted(a.keyword.value for a in expr.args)


def _may_have_workers(ctx, bound) -> bool:
    workers = possible_arg(ctx, bound, "num_workers")
    return not workers.must_be(lambda v: v == 0)


def _may_shuffle(ctx, bound) -> bool:
    if not possible_arg(ctx, bound, "shuffle").must_be(lambda v: not v):
        return True
    return not possible_arg(ctx, bound, "sampler").must_be(lambda v: v is None)


def _no_worker_init(ctx, bound) -> bool:
    init = possible_arg(ctx, bound, "worker_init_fn")
    return init.must_be(lambda v: v is None)


def _loader_constructions(ctx) -> List:
    """DataLoader calls, and constructions of a project subclass of DataLoader that keeps its
    ``worker_init_fn`` to its callers (bound as DataLoader's own arguments: the dataset first,
    every other argument by keyword)."""
    found = list(ctx.dataloader_calls())
    asked = {}
    for call in ctx.nodes(cst.Call):
        name = ctx.call_name(call)
        if not name or name == DATALOADER_NAME or not name.rpartition(".")[2][:1].isupper():
            continue  # (classes are capitalised: a cheap filter before asking the project)
        if name not in asked:
            asked[name] = ctx.view.loader_subclass(name)
        # (its own signature is unknown here: only the dataset by position, the rest by keyword)
        if asked[name] is False and sum(arg.keyword is None for arg in call.args) <= 1:
            found.append(ctx.bind(call, DATALOADER))
    return found


def unseeded_numpy_loaders(ctx) -> Iterator[Tuple[cst.Call, str]]:
    declared = ctx.view.old_torch()
    if not declared:
        return
    calls = _loader_constructions(ctx)
    if not declared:
        return
    index = None
    for bound in calls:
        call = bound.call
        if is_test_code(ctx, call) or not _may_have_workers(ctx, bound) or not _no_worker_init(ctx, bound):
            continue
        dataset, unknown = _dataset_name(ctx, bound.expr("dataset"))
        if unknown and not _may_shuffle(ctx, bound):
            continue  # a dataset chosen at run time: only a training loader (shuffled or sampled)
        where = ctx.view.loader_numpy_draws(dataset, unknown, _built_with(ctx, bound.expr("dataset")) if unknown else None)
        if not where:
            continue
        index = index or loader_loops(ctx)
        loader = index.loader_of_call(call)
        if evaluation_split(ctx, index, bound.expr("dataset")):
            continue
        if loader is not None and evaluation_only(ctx, index, loader, []):
            continue
        how = _HOW[where[0]]
        yield call, (
            f"this project declares torch<1.9 ({declared[0]}: `{declared[1]}`), where DataLoader workers "
            f"inherit numpy's global RNG state: {how} draws from it per sample ({where[1]}) and no "
            "`worker_init_fn` reseeds numpy, so every worker (and every epoch) repeats the same random numbers"
        )
