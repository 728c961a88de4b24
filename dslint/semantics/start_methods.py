"""Which start methods the project sets for new processes (``multiprocessing.set_start_method``).

Under ``spawn`` or ``forkserver`` a DataLoader's workers are fresh interpreters, not forks
of a process that has initialised CUDA, so CUDA in worker code runs (each worker pays for a
context of its own) instead of failing. A file records the methods it sets (a summary fact);
the project's answer is the union over its files: only when every method set anywhere is a
non-fork one does the project run its workers outside ``fork``.
"""

from __future__ import annotations

from typing import Iterable, List

import libcst as cst

from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex

SETTERS = frozenset({"multiprocessing.set_start_method", "torch.multiprocessing.set_start_method"})
NON_FORK = frozenset({"spawn", "forkserver"})
UNKNOWN = "?"


def start_methods(tree: TreeIndex, names: ModuleNames) -> List[str]:
    """The start methods this file sets: each literal method, ``"?"`` for one it cannot read."""
    if not any(node.value == "set_start_method" for node in tree.nodes(cst.Name)):
        return []
    found = set()
    for call in tree.nodes(cst.Call):
        if not isinstance(call.func, (cst.Name, cst.Attribute)) or names.qualname(call.func) not in SETTERS:
            continue
        arg = next((a for a in call.args if a.keyword is None), None)
        arg = arg or next((a for a in call.args if a.keyword is not None and a.keyword.value == "method"), None)
        value = arg.value if arg is not None else None
        found.add(value.evaluated_value if isinstance(value, cst.SimpleString) else UNKNOWN)
    return sorted(found)


def workers_not_forked(methods: Iterable[str]) -> bool:
    """Every start method the project sets is ``spawn`` or ``forkserver`` (and it sets one)."""
    methods = set(methods)
    return bool(methods) and methods <= NON_FORK


def main_is_unimportable(path: str) -> bool:
    """``path`` is a Jupyter notebook: its code runs in a ``__main__`` that has no file, so a worker
    started with spawn or forkserver cannot import anything the notebook defines, a module-level
    function or class included (``AttributeError: Can't get attribute 'collate' on <module
    '__main__' (built-in)>``). Moving a lambda to the notebook's top level fixes nothing there."""
    return path.lower().endswith(".ipynb")
