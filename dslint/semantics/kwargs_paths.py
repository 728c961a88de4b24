"""The ``**`` dict of a call when its name is bound to a different dict on each path.

``values.expand_kwargs`` reads a name bound to several dicts only when all but one of them
are empty: one flat dict would pair a key of one path with a key of another
(``batch_sampler=`` on one branch, ``sampler=`` on the other). A question about one key
alone can still be answered path by path::

    if sharded:
        kwargs = dict(dataset=stream, persistent_workers=True)
    else:
        kwargs = dict(dataset=data, sampler=sampler)
    DataLoader(**kwargs, num_workers=cfg.get("num_workers", 0))

``path_values(ctx, call, key)`` gives what ``key`` can be on the paths whose dict holds it
(``persistent_workers``: ``True``), never complete (on the other paths the key is absent).
It answers only for a call whose one ``**`` argument is a name that its scope binds to a
dict display or ``dict(...)`` on each path that reaches the call and never changes after
(``kwargs_dicts.unchanged_values``); else nothing. A rule pairs the answer only with
arguments the call passes itself, which are the same on every path.

``path_entry(ctx, bound, keys)`` is where those keys are written when every one of them comes
from such a path's dict and from nowhere else: the entry of the first (where the fix goes).

API: ``path_values(ctx, call, key) -> Possible``, ``path_entry(ctx, bound, keys)``.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.kwargs_dicts import entry_expressions, unchanged_values
from dslint.semantics.loops import loader_loops
from dslint.semantics.possible import NOTHING, Possible
from dslint.semantics.values import expand_kwargs, possible_arg


def _path_dicts(ctx, call: cst.Call) -> List[cst.Call]:
    """Each path's dict, as a ``dict(**each)`` call of its own; empty when not such a call."""
    stars = [arg for arg in call.args if arg.star]
    if len(stars) != 1 or stars[0].star != "**" or not isinstance(stars[0].value, cst.Name):
        return []
    dicts = unchanged_values(ctx, loader_loops(ctx), stars[0].value)
    if dicts is None or len(dicts) < 2 or not all(isinstance(d, (cst.Dict, cst.Call)) for d in dicts):
        return []
    return [cst.Call(cst.Name("dict"), args=[cst.Arg(each, star="**")]) for each in dicts]


def path_values(ctx, call: cst.Call, key: str) -> Possible:
    """What ``key`` of the call's ``**`` dict can be on the paths that give it (see the module doc)."""
    found = NOTHING
    for each in _path_dicts(ctx, call):
        entries, _ = expand_kwargs(ctx, each)
        if key in entries:
            found = Possible(found.values + entries[key].values, False)
    return found


def path_entry(ctx, bound, keys) -> Optional[cst.CSTNode]:
    """The expression written for the first of ``keys`` in a path's dict, when each of them comes
    only from those dicts (not passed, not read from the call's ``**`` as one flat dict, and written
    in one of them); None otherwise (the finding stays at the call)."""
    if any(bound.passed(key) or possible_arg(ctx, bound, key).values for key in keys):
        return None
    dicts = _path_dicts(ctx, bound.call)
    written = [next((found[0] for each in dicts if (found := entry_expressions(ctx, each, key))), None) for key in keys]
    return written[0] if written and all(w is not None for w in written) else None
