"""What third-party dataset types and pipeline stages are, by qualified name.

A small knowledge base of the data libraries real dataset code builds on, and the
questions rules ask of an expression made with them:

- Hugging Face ``datasets``: ``load_dataset(..., streaming=True)``,
  ``IterableDataset.from_generator``, ``Dataset.to_iterable_dataset()`` and what
  their methods (``map``, ``shuffle``, ``shard``, ``take``...) and
  ``split_dataset_by_node`` return are iterable datasets without ``__len__`` that
  split their shards across DataLoader workers by themselves;
- webdataset: ``DataPipeline``/``WebDataset``/``WebLoader`` compose stages
  (``split_by_worker``, ``split_by_node``, ``SimpleShardList``...); whatever is
  handed to them is iterated by the pipeline, whose stages decide the sharding;
- torchdata / torch DataPipes: ``IterableWrapper(iterable, deepcopy=...)``
  re-iterates (a deep copy of) what it wraps on every epoch;
- lhotse, MosaicML ``streaming``, litdata, ray, ffcv, tensorflow_datasets: streams
  that shard for you.

``library_iterable`` answers the DataLoader-argument rules' question (is this value
an instance of a library's iterable-style dataset, which refuses ``shuffle``,
``sampler`` and ``batch_sampler``?); ``hf_iterable`` and the pipeline questions serve
the IterableDataset rules. Every answer is "known" or None (unknown): a name not
listed here is never guessed.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.calls import literal_value
from dslint.semantics.values import possible

# Libraries whose streams split themselves across DataLoader workers (or whose
# pipelines take a splitting stage): a stream built from them is not judged.
SHARDING_LIBRARIES = (
    "webdataset", "datasets", "torchdata", "streaming", "litdata", "ray", "ffcv", "tensorflow_datasets", "lhotse",
)

# Calls that compose a pipeline out of the objects handed to them: the pipeline
# iterates them, and its own stages (split_by_worker, split_by_node) do the sharding.
PIPELINE_COMPOSERS = frozenset(
    {
        "webdataset.DataPipeline", "webdataset.pipeline.DataPipeline", "webdataset.compat.DataPipeline",
        "webdataset.WebLoader", "webdataset.compat.WebLoader", "webdataset.FluidWrapper",
        "wids.DataPipeline",
    }
)

# Wrappers that iterate the object they wrap afresh every epoch (a deep copy of it when
# ``deepcopy`` is true and the object can be copied; the object itself otherwise).
REITERATING_WRAPPERS = frozenset(
    {
        "torchdata.datapipes.iter.IterableWrapper",
        "torchdata.datapipes.iter.util.combining.IterableWrapper",
        "torch.utils.data.datapipes.iter.IterableWrapper",
        "torch.utils.data.datapipes.iter.utils.IterableWrapper",
    }
)

# ------------------------------------------------------------------ Hugging Face datasets
HF_ITERABLE = "datasets.IterableDataset"
_HF_LOADERS = frozenset({"datasets.load_dataset", "datasets.load.load_dataset"})
_HF_FROM = frozenset(
    {
        "datasets.IterableDataset.from_generator", "datasets.iterable_dataset.IterableDataset.from_generator",
        "datasets.IterableDataset.from_file",
    }
)
_HF_SPLIT_BY_NODE = frozenset({"datasets.distributed.split_dataset_by_node"})
# methods of an IterableDataset that return an IterableDataset
_HF_ITERABLE_METHODS = frozenset(
    {
        "map", "filter", "shuffle", "shard", "take", "skip", "rename_column", "rename_columns", "remove_columns",
        "select_columns", "cast", "cast_column", "with_format", "batch", "repeat",
    }
)
MAX_DEPTH = 6


def _keyword(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _sources(ctx, expr: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
    """The values a local name is assigned in its scope (every one), or None when it is
    a parameter, rebound in another way, or not assigned there."""
    scope = ctx.tree.scope_node(expr)
    if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
        params = scope.params
        if any(p.name.value == expr.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)):
            return None
    assigned = scope_assignments(ctx.tree, scope, expr.value)
    return assigned or None


def hf_iterable(ctx, expr: Optional[cst.CSTNode], depth: int = 0, _active: Optional[set] = None) -> bool:
    """Is ``expr`` certainly a Hugging Face ``datasets.IterableDataset``?

    ``load_dataset(..., streaming=True)`` (a streaming value that can only be true),
    ``IterableDataset.from_generator(...)``, ``ds.to_iterable_dataset()``, and what
    ``split_dataset_by_node`` and the dataset's own methods make of one; a local name
    counts when every assignment to it is one of these."""
    if expr is None or depth > MAX_DEPTH:
        return False
    active = _active if _active is not None else set()
    if isinstance(expr, cst.Name):
        key = (id(ctx.tree.scope_node(expr)), expr.value)
        if key in active:
            return True  # ds = ds.shuffle(): decided by the name's other assignments
        values = _sources(ctx, expr)
        if not values:
            return False
        active.add(key)
        try:
            return all(hf_iterable(ctx, value, depth + 1, active) for value in values)
        finally:
            active.discard(key)
    if not isinstance(expr, cst.Call):
        return False
    name = ctx.call_name(expr)
    if name in _HF_LOADERS:
        streaming = _keyword(expr, "streaming")
        if streaming is None or any(arg.star for arg in expr.args):
            return False
        split = _keyword(expr, "split")
        if split is None and not _positional_split(expr):
            return False  # no split: an IterableDatasetDict
        return possible(ctx, streaming).must_be(lambda v: v is True)
    if name in _HF_FROM:
        return True
    if name in _HF_SPLIT_BY_NODE:
        first = expr.args[0].value if expr.args and expr.args[0].keyword is None else _keyword(expr, "dataset")
        return hf_iterable(ctx, first, depth + 1, active)
    func = expr.func
    if isinstance(func, cst.Attribute):
        if func.attr.value == "to_iterable_dataset" and name is None:
            return _hf_map_style(ctx, func.value, depth + 1)
        if func.attr.value in _HF_ITERABLE_METHODS:
            return hf_iterable(ctx, func.value, depth + 1, active)
    return False


def _positional_split(call: cst.Call) -> bool:
    # load_dataset(path, name, data_dir, data_files, split, ...): split is the 5th
    positional = [arg for arg in call.args if arg.keyword is None]
    return len(positional) >= 5


def _hf_map_style(ctx, expr, depth: int) -> bool:
    """A ``datasets.Dataset`` loaded without streaming, for ``.to_iterable_dataset()``."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name):
        values = _sources(ctx, expr)
        return bool(values) and all(_hf_map_style(ctx, value, depth + 1) for value in values)
    if isinstance(expr, cst.Call) and ctx.call_name(expr) in _HF_LOADERS:
        streaming = _keyword(expr, "streaming")
        split = _keyword(expr, "split")
        if split is None or any(arg.star for arg in expr.args):
            return False
        return streaming is None or possible(ctx, streaming).must_be(lambda v: v is False)
    return False


# ------------------------------------------------------------------ pipelines


def consumed_by_pipeline(ctx, construction: cst.Call) -> bool:
    """Is the object ``construction`` makes handed to a pipeline composer
    (``wds.DataPipeline(obj, ...)``, or a list holding it, extended along the way and
    passed as ``DataPipeline(*stages)``) in the function that makes it?"""
    node: cst.CSTNode = construction
    parent = ctx.parent(node)
    if isinstance(parent, cst.Element):
        container = ctx.parent(parent)
        node = container
        parent = ctx.parent(container)
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        return isinstance(call, cst.Call) and ctx.call_name(call) in PIPELINE_COMPOSERS
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        local = parent.targets[0].target.value
        scope = ctx.tree.scope_node(parent)
        for call in ctx.nodes(cst.Call):
            if ctx.call_name(call) not in PIPELINE_COMPOSERS or ctx.tree.scope_node(call) is not scope:
                continue
            for arg in call.args:
                if isinstance(arg.value, cst.Name) and arg.value.value == local:
                    return True
    return False


def wraps_without_copy(ctx, call: cst.Call) -> Optional[bool]:
    """For a ``REITERATING_WRAPPERS`` call: True when ``deepcopy`` is certainly false,
    False when it is certainly true (the default), None when it cannot be told."""
    value = _keyword(call, "deepcopy")
    if value is None:
        positional = [arg for arg in call.args if arg.keyword is None]
        if any(arg.star for arg in call.args):
            return None
        if len(positional) < 2:
            return False
        value = positional[1].value
    found = possible(ctx, value)
    if found.must_be(lambda v: v is False):
        return True
    if found.must_be(lambda v: v is True):
        return False
    return None


def is_reiterating_wrapper(ctx, call: cst.Call) -> bool:
    return ctx.call_name(call) in REITERATING_WRAPPERS and bool(call.args) and call.args[0].keyword is None


# ------------------------------------------------------------------ iterable-style library datasets

#: classes (canonical qualified names) whose instances are iterable-style datasets
ITERABLE_CLASSES = frozenset(
    {
        "datasets.IterableDataset",
        "datasets.iterable_dataset.IterableDataset",
        "webdataset.WebDataset",
        "webdataset.DataPipeline",
        "webdataset.compat.WebDataset",
        "webdataset.pipeline.DataPipeline",
        "torchdata.datapipes.iter.IterDataPipe",
        "torchdata.datapipes.iter.IterableWrapper",
    }
)
#: methods of those objects that return another iterable dataset of the same library
_CHAINED = frozenset(
    {
        "map", "filter", "shuffle", "decode", "to_tuple", "batched", "unbatched", "rename", "select",
        "select_columns", "remove_columns", "rename_column", "rename_columns", "take", "skip", "with_format",
        "with_epoch", "with_length", "compose", "map_dict", "map_tuple", "shard", "cast", "cast_column",
    }
)
_STREAMING_LOADERS = frozenset({"datasets.load_dataset"})
#: chain methods of webdataset and torchdata pipelines that keep the callables they are given and run
#: them per sample in the workers (a pipeline is sent to spawned workers with its stages)
_KEEPING_STAGES = frozenset({"map", "map_dict", "map_tuple", "select", "filter", "compose", "batched"})
_LAZY_PIPELINES = ("webdataset.", "torchdata.")


def pipeline_callables(ctx, node: Optional[cst.CSTNode], resolve=None) -> List[cst.BaseExpression]:
    """The arguments of the stages a webdataset or torchdata pipeline chain keeps to run per sample
    (``wds.WebDataset(urls).map(f).select(g)`` -> [f, g]); empty for any other value (Hugging Face
    ``datasets`` apply ``map`` eagerly, or decide their own pickling)."""
    found: List[cst.BaseExpression] = []
    for _ in range(32):
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _CHAINED):
            break
        if node.func.attr.value in _KEEPING_STAGES:
            found.extend(arg.value for arg in node.args if not arg.star)
        node = node.func.value
    root = library_iterable(ctx, node, resolve) if found else None
    return found if root and root.startswith(_LAZY_PIPELINES) else []


def library_iterable(ctx, node: Optional[cst.CSTNode], resolve=None, _depth: int = 0) -> Optional[str]:
    """The library class an expression's value is an instance of, when it is one of the
    iterable datasets above (``None`` otherwise or when it cannot be told). ``resolve(expr)``
    may give the expressions a name stands for (every one must be iterable)."""
    if node is None or _depth > 8:
        return None
    if isinstance(node, (cst.Name, cst.Attribute)) and resolve is not None:
        nodes = resolve(node)
        found = [library_iterable(ctx, n, resolve, _depth + 1) for n in nodes or ()]
        return found[0] if found and all(found) else None
    if isinstance(node, cst.Subscript):  # load_dataset(..., streaming=True)["train"]
        return library_iterable(ctx, node.value, resolve, _depth + 1)
    if not isinstance(node, cst.Call) or not isinstance(node.func, (cst.Name, cst.Attribute)):
        return None
    name = ctx.call_name(node) or ""
    if name in ITERABLE_CLASSES:
        return name
    if name in _STREAMING_LOADERS:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "streaming" and literal_value(arg.value) is True:
                return "datasets.IterableDataset"
        return None
    func = node.func
    if isinstance(func, cst.Attribute):
        if func.attr.value == "to_iterable_dataset":
            return "datasets.IterableDataset"
        if func.attr.value in _CHAINED:
            return library_iterable(ctx, func.value, resolve, _depth + 1)
    return None
