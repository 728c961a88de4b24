"""Which ``self`` attributes a class's methods read, and whether anything but construction does.

A dataset may compute something on the GPU in ``__init__`` and keep it for the main process
alone: class weights the training script hands to its loss (``train_dataset.class_weights``).
Its workers never touch that value, so nothing in them initialises CUDA. What tells the two
apart is whether any method of the dataset reads the attribute after construction.

Each method's summary fact ``self_loads`` (``dslint.semantics.self_loads``) lists the
attributes it reads on ``self``, ``ANY`` where it hands ``self`` on.
``read_after_construction(index, key, attr)`` answers whether some method other than
``__init__`` of the class, of a base or of a subclass (any file) reads ``attr``, or may.
Per-sample code, a ``collate_fn`` method and methods the main process calls all count, and
so does a base outside the project (a library's dataset class may read it): the question
errs towards "read".

API: ``read_after_construction(index, key, attr) -> bool``.
"""

from __future__ import annotations

from dslint.semantics.modules import canonical
from dslint.semantics.project import root_kind

ANY = "*"  # (in a method's ``self_loads``: it may read any attribute)
# bases outside the project that read no attribute of a subclass by name
_OPAQUE_FREE = frozenset({"builtins.object", "object", "abc.ABC", "typing.Generic", "typing.Protocol"})


def read_after_construction(index, key, attr: str) -> bool:
    """Does a method other than ``__init__`` of ``key``'s class, a base or a subclass read ``attr``?"""
    family = list(index.mro(key))
    for path, summary in index.summaries.items():
        for qual in summary["classes"]:
            other = (path, qual)
            if other not in family and key in index.mro(other):
                family.append(other)
    for cls in family:
        for base in index.class_info(cls)["bases"]:
            if index.locate(canonical(base or "?"), cls[0]) is None and root_kind(base) is None \
                    and canonical(base or "?") not in _OPAQUE_FREE:
                return True  # a library base (or one not resolved) may read it
        for name, facts in index.class_info(cls)["methods"].items():
            if name == "__init__" or facts is None:
                continue
            loads = facts.get("self_loads", [ANY])
            if attr in loads or ANY in loads:
                return True
    return False
