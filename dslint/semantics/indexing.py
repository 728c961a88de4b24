"""Per-sample code that only indexes data already in memory.

A dataset whose ``__getitem__`` only indexes arrays or lists it holds, wraps the picked
entries in small tensors and draws random numbers does no loading: loader workers would
only add the cost of sending every batch between processes. This module says which calls
are that cheap. The summary records, per function, the calls that are not
(``call_costs.costly_calls``); ``indexes_only`` follows the ones that stay in the project
(``self.m()``, ``super().m()``, a project function) to decide for a whole method, and
``moves_to_cuda`` follows them to tell a method that puts its samples on the GPU (``.cuda()``).

Anything else (an opener, a decoder, a transform held on ``self``, a library call this
module does not list, a method of an unknown object not listed below, a pandas lookup) is
loading work.
"""

from __future__ import annotations

from typing import Optional, Set

# constructors of small tensors from values in hand, and random draws
TENSOR_FACTORIES = frozenset(
    {"tensor", "as_tensor", "from_numpy", "arange", "randn", "rand", "randint", "zeros", "ones", "randperm", "stack", "cat"}
)
_TORCH = TENSOR_FACTORIES | {
    "Tensor", "FloatTensor", "LongTensor", "IntTensor", "BoolTensor", "DoubleTensor", "HalfTensor", "ByteTensor",
    "full", "empty", "zeros_like", "ones_like", "full_like",
    # type tests of a value in hand (``if torch.is_tensor(idx): idx = idx.tolist()``)
    "is_tensor", "is_floating_point", "is_complex", "numel",
}
_NUMPY = frozenset({
    "array", "asarray", "zeros", "ones", "full", "empty", "arange", "reshape", "concatenate", "stack", "where",
    "nonzero", "int32", "int64", "float32", "float64", "clip", "random.randint", "random.choice", "random.rand",
    "random.randn", "random.random", "random.uniform", "random.permutation", "random.normal", "random.shuffle",
    "isscalar", "ndim", "shape", "size",
})
_RANDOM = frozenset({"random", "randint", "randrange", "choice", "choices", "sample", "shuffle", "uniform"})
_BUILTINS = frozenset({
    "len", "int", "float", "bool", "str", "tuple", "list", "dict", "set", "frozenset", "range", "min", "max", "sum",
    "abs", "round", "enumerate", "zip", "isinstance", "hasattr", "getattr", "sorted", "reversed", "divmod", "any",
    "all", "slice", "super",
})
# methods of arrays, tensors, lists and dicts that only reshape or pick values in memory (the receiver
# is often a plain local, so only the name is known; ``get``, ``read``, ``load`` are left out on purpose:
# a database transaction's ``get`` reads a file)
METHODS = frozenset({
    "append", "extend", "insert", "pop", "reshape", "astype", "tolist", "item", "numpy", "long", "float", "int",
    "copy", "clone", "view", "squeeze", "unsqueeze", "flatten", "toarray", "todense", "keys", "values", "items",
    "index", "count", "update", "size", "dim", "permute", "transpose", "contiguous", "detach", "expand",
})


# pandas lookups by label or position: work per sample even without a call
PANDAS_INDEXERS = frozenset({"loc", "iloc", "at", "iat"})


def cheap(qualified: Optional[str]) -> bool:
    """A call of ``qualified`` only builds or picks values in memory."""
    if not qualified:
        return False
    module, _, rest = qualified.partition(".")
    if module == "builtins":
        return rest in _BUILTINS
    if module == "torch":
        return rest in _TORCH
    if module == "numpy":
        return rest in _NUMPY
    if module == "copy":
        return rest in ("copy", "deepcopy")  # like ``.copy()``/``.clone()``: a copy of what is in memory
    return module == "random" and rest in _RANDOM


def indexes_only(index, cls, method, _seen: Optional[Set] = None, unset: frozenset = frozenset()) -> bool:
    """The project method or function ``method`` (a key of ``ProjectIndex``), run on an
    instance of class ``cls``, makes only cheap calls: its ``self.m()`` (looked up from
    ``cls``), ``super().m()`` and project functions are followed, cycle-safe. A call under
    ``if self.X:`` does not count when ``X`` is in ``unset`` (an optional part this instance was
    built without: ``transform=None``)."""
    seen = _seen if _seen is not None else set()
    if method in seen:
        return True
    seen.add(method)
    facts = index.function_facts(method)
    if not facts or facts.get("costly_calls") is None:
        return False
    for kind, name, guard in facts["costly_calls"]:
        if guard in unset:
            continue
        target = _callee(index, cls, method, kind, name)
        if target is None or not indexes_only(index, cls if kind != "func" else None, target, seen,
                                              unset if kind != "func" else frozenset()):
            return False
    return True


def moves_to_cuda(index, cls, method, _seen: Optional[Set] = None) -> bool:
    """The project method or function ``method``, run on an instance of class ``cls``, calls
    ``.cuda()``, itself or in a method or project function it reaches (followed as
    ``indexes_only`` follows them, cycle-safe): each sample is put on the GPU there."""
    seen = _seen if _seen is not None else set()
    if method in seen:
        return False
    seen.add(method)
    for kind, name, _guard in (index.function_facts(method) or {}).get("costly_calls") or ():
        if kind == "other" and name == "cuda":
            return True
        target = _callee(index, cls, method, kind, name)
        if target is not None and moves_to_cuda(index, cls if kind != "func" else None, target, seen):
            return True
    return False


def _callee(index, cls, method, kind: str, name: str):
    """The project method (``self``/``super``, looked up from ``cls``) or function a costly call names."""
    path, qual = method
    owner = (path, qual.rpartition(".")[0])
    if kind == "self" and cls is not None:
        return index.find_method(index.mro(cls), name)
    if kind == "super" and cls is not None and owner[1] in index.summaries[path]["classes"]:
        return index.find_method(index.mro(cls), name, after=owner)
    return index.locate(name, path, "functions") if kind == "func" else None


__all__ = ["METHODS", "PANDAS_INDEXERS", "TENSOR_FACTORIES", "cheap", "indexes_only", "moves_to_cuda"]
