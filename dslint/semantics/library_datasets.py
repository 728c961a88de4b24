"""Iterable datasets that come from libraries, not from a class of the project.

A DataLoader refuses ``shuffle``/``sampler``/``batch_sampler`` over any
``torch.utils.data.IterableDataset``; these libraries hand out such objects:

* Hugging Face ``datasets``: ``datasets.IterableDataset`` (an ``IterableDataset``
  subclass), returned by ``load_dataset(..., streaming=True)`` (also its splits,
  ``["train"]``) and by ``Dataset.to_iterable_dataset()``;
* ``webdataset``: ``WebDataset``/``DataPipeline`` (and the pipelines their
  methods return: ``.shuffle(...)``, ``.decode(...)``, ``.to_tuple(...)``...);
* ``torchdata``: iterable datapipes (``IterDataPipe`` and ``IterableWrapper``).

This is a minimal table kept in one place until a shared library-knowledge module
exists; anything not listed here is not known to be iterable.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.calls import literal_value

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
