"""Torchvision datasets that hold their whole split in memory.

MNIST and its variants, CIFAR, SVHN and USPS read their files once, when built, into
arrays; ``__getitem__`` then indexes a small array and turns it into an image. With no
transform, or with only conversions (``ToTensor``, ``Normalize``...), there is no
per-sample work that worker processes would take off the training loop: a 28x28 or 32x32
image is converted in microseconds. Augmentations and resizes are work.

API: ``cheap_vision_dataset(ctx, call, values)``: ``call`` builds one of those datasets
with no transform or conversions only; ``values(expr)`` gives the terminal value nodes of
an expression (None when unknown), as ``LoaderLoops.value_nodes`` does.
"""

from __future__ import annotations

import libcst as cst

__all__ = ["cheap_vision_dataset"]

_IN_MEMORY = frozenset({"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN", "USPS"})
_CONVERSIONS = frozenset({"ToTensor", "PILToTensor", "Normalize", "ConvertImageDtype", "ToImage", "ToDtype",
                          "ToPureTensor", "ToImageTensor"})
_COMPOSE = "Compose"
#: positional arguments before ``transform`` (``MNIST(root, train, transform)``, ``SVHN(root, split, transform)``)
_BEFORE_TRANSFORM = 2


def cheap_vision_dataset(ctx, call: cst.Call, values) -> bool:
    """See the module docstring."""
    kind = _torchvision(ctx, call, "datasets")
    if kind not in _IN_MEMORY or any(arg.star for arg in call.args):
        return False
    positional = [arg for arg in call.args if arg.keyword is None]
    if kind == "QMNIST" and len(positional) > 1:
        return False  # ``QMNIST(root, what, ...)``: another order
    transform = [arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "transform"]
    transform += [arg.value for arg in positional[_BEFORE_TRANSFORM:_BEFORE_TRANSFORM + 1]]
    if len(positional) > _BEFORE_TRANSFORM + 1 or len(transform) > 1:
        return False
    return not transform or _conversions_only(ctx, transform[0], values, 0)


def _conversions_only(ctx, expr, values, depth: int) -> bool:
    if depth > 3:
        return False
    nodes = [expr] if isinstance(expr, (cst.Call, cst.List, cst.Tuple)) else values(expr)
    if not nodes:
        return False
    for node in nodes:
        if isinstance(node, cst.Name) and node.value == "None":
            continue
        if not isinstance(node, cst.Call):
            return False
        kind = _torchvision(ctx, node, "transforms")
        if kind in _CONVERSIONS:
            continue
        items = node.args[0].value if kind == _COMPOSE and len(node.args) == 1 and not node.args[0].star else None
        if not isinstance(items, (cst.List, cst.Tuple)) or any(
                not isinstance(e, cst.Element) or not _conversions_only(ctx, e.value, values, depth + 1) for e in items.elements):
            return False
    return True


def _torchvision(ctx, call: cst.Call, package: str):
    """The class name ``call`` builds when it is of ``torchvision.<package>`` (any submodule)."""
    name = ctx.call_name(call) or ""
    return name.rsplit(".", 1)[-1] if name.startswith(f"torchvision.{package}.") else None
