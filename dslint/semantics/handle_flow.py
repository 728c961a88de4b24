"""Open handles that a construction hands to a class of the project.

A script often opens the handle itself and gives it to the dataset: ``env =
lmdb.open(root)`` at module level, then ``Frames(env, names)``, whose ``__init__``
keeps ``env`` (or ``env.begin()``) for ``__getitem__``. The handle is opened before
the DataLoader forks its workers, exactly as if ``__init__`` had opened it.

- ``handle_args(tree, names, qualname_of)`` (a summary fact): ``[callee, keyword or
  position, shown, kind]`` for each argument of a call of a project callee that is an
  opened handle: an opener call (``HANDLE_KINDS``: ``lmdb.open``, ``h5py.File``,
  ``open``...), or a name every binding of which, in the call's scope or the module, is
  one.
- ``handle_index.handle_table(index, flow)`` (once per project index) follows each such
  argument to the ``__init__`` parameter it binds.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.handle_kinds import HANDLE_KINDS, LIBRARY_PICKLE_ERRORS
from dslint.semantics.names import ModuleNames, dotted_text
from dslint.semantics.walk import TreeIndex

#: kinds a caller hands on as an open handle (an image opened by the caller is no shared descriptor to speak of)
_PASSED_KINDS = frozenset({"file", "tar", "zip", "h5py", "lmdb", "sqlite", "db", "socket", *LIBRARY_PICKLE_ERRORS})
_OPENER_TAILS = frozenset(q.rsplit(".", 1)[-1] for q, kind in HANDLE_KINDS.items() if kind in _PASSED_KINDS)
#: libraries whose functions take no project class: their calls are skipped before the arguments are walked
_LIBRARIES = ("torch", "builtins", "numpy", "os", "lmdb", "h5py", "sqlite3", "zipfile", "tarfile", "socket", "json", "pickle")


def handle_args(tree: TreeIndex, names: ModuleNames, qualname_of: Callable) -> list:
    """See the module docstring."""
    found: list = []
    if not names.call_tails(_OPENER_TAILS):  # no opener is called here: no argument can be an opened handle
        return found
    for call in tree.nodes(cst.Call):
        if not isinstance(call.func, (cst.Name, cst.Attribute)) or not call.args:
            continue
        qualified = names.qualname(call.func)
        if not qualified or qualified.split(".")[0] in _LIBRARIES:
            continue
        opened = [(position, arg, _opened(tree, names, arg.value)) for position, arg in enumerate(call.args) if not arg.star]
        opened = [item for item in opened if item[2] is not None]
        for position, arg, (kind, shown) in opened:
            slot = arg.keyword.value if arg.keyword is not None else position
            found.append([qualified, slot, shown, kind])
    return found


def _opened(tree: TreeIndex, names: ModuleNames, expr, depth: int = 0) -> Optional[Tuple[str, str]]:
    """(kind, shown) when ``expr`` is an opened handle of a kind a caller hands on."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Name, cst.Attribute)):
        kind = HANDLE_KINDS.get(names.qualname(expr.func) or "")
        if kind in _PASSED_KINDS:
            return kind, f"{dotted_text(expr.func) or '...'}(...)"
        return None
    if not isinstance(expr, cst.Name) or depth > 2:
        return None
    scope = tree.scope_node(expr)
    if scope is not None and not names.scope(scope).lookup(expr.value)[0]:
        scope = None  # a name its function does not bind (a parameter is the caller's value): the module's
    values = scope_assignments(tree, scope, expr.value)
    found = [_opened(tree, names, value, depth + 1) for value in values or ()]
    return found[0] if found and all(found) and len({f[0] for f in found}) == 1 else None
