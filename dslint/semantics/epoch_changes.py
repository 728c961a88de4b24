"""What an epoch loop changes on a loader's dataset (DSL510): ``ds.set_epoch(...)``,
``ds.attr = ...``, ``ds.method(...)``, and whether the receiver is the loader's dataset."""

from __future__ import annotations

import libcst as cst

from dslint.semantics.bindings import local_class_path
from dslint.semantics.epochs import per_sample_state_set_by


def method_changes(ctx, dataset, method):
    """The per-sample state a method of the dataset's class (a class of this file) sets."""
    node = dataset[0] if dataset else None
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Name):
        return []
    cls = local_class_path(ctx.tree, node.func.value)
    return per_sample_state_set_by(ctx, cls, method) if cls is not None else []


def change_of(node):
    """(node to report, receiver, description) for ``X.set_epoch(...)``, ``X.attr = ...`` or
    ``X.method(...)`` (a method whose changes are checked by the caller)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "set_epoch":
        return node, node.func.value, "`set_epoch`"
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and not node.func.attr.value.startswith("__"):
        return node, node.func.value, f"`{node.func.attr.value}()`"
    targets = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        targets = [node.target]
    for target in targets:
        if isinstance(target, cst.Attribute):
            return node, target.value, f"assigning `.{target.attr.value}`"
    return None


def is_loader_dataset(index, loader, dataset, receiver, stack) -> bool:
    if isinstance(receiver, cst.Attribute) and receiver.attr.value == "dataset":
        if index.is_loader(receiver.value, loader, stack=stack):
            return True
    if dataset is None:
        return False
    return index.value_nodes(receiver, stack=stack) == dataset
