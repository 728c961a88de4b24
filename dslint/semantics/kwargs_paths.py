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

``zero_paths(ctx, bound, options)`` judges each path whole: the path's dict, with the keys the
scope writes into the name after the paths join (``kwargs["persistent_workers"] = flag`` in the
call's own block, before it: they apply to every path) and the call's own keywords. A path
whose ``num_workers`` is certainly 0 (a literal 0, or left out: torch's default) while a
worker-only option may be set there (any value an ``options`` predicate accepts) is a loader
torch rejects whenever that path runs::

    if phase == "train":
        args = {"dataset": ds, "num_workers": workers}
    else:
        args = {"dataset": ds, "num_workers": 0}
    args["persistent_workers"] = opt.get("persistent_workers", True)
    DataLoader(**args)

API: ``path_values(ctx, call, key) -> Possible``, ``path_entry(ctx, bound, keys)``,
``zero_paths(ctx, bound, options)``.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.kwargs_dicts import dict_changes, entry_expressions, unchanged_values
from dslint.semantics.loops import loader_loops
from dslint.semantics.possible import NOTHING, Possible
from dslint.semantics.values import expand_kwargs, possible, possible_arg


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


def zero_paths(ctx, bound, options) -> List[tuple]:
    """``(the path's dict, [(option, where it is written)])`` for each path whose ``num_workers`` is
    certainly 0 while worker-only options may be set (see the module docstring)."""
    stars = [arg for arg in bound.call.args if arg.star]
    if len(stars) != 1 or stars[0].star != "**" or not isinstance(stars[0].value, cst.Name) or bound.arg("num_workers"):
        return []  # (a count the call passes itself is the same on every path: judged as such)
    name, scope = stars[0].value.value, ctx.tree.scope_node(bound.call)
    dicts = scope_assignments(ctx.tree, scope, name)
    if not dicts or len(dicts) < 2 or not all(_is_dict(ctx, d) for d in dicts):
        return []
    writes = _joined_writes(ctx, scope, name, dicts, bound.call)
    if writes is None:
        return []
    joined, own = writes
    found = []
    for each in dicts:
        wrapped = cst.Call(cst.Name("dict"), args=[cst.Arg(each, star="**")])
        entries, closed = expand_kwargs(ctx, wrapped)
        if not closed:
            continue
        where = {key: (entry_expressions(ctx, wrapped, key) or [each])[0] for key in entries}
        for key, value in own[id(each)] + joined:
            entries[key], where[key] = possible(ctx, value), value
        for arg in bound.call.args:
            if arg.keyword is not None:
                entries[arg.keyword.value], where[arg.keyword.value] = possible(ctx, arg.value), arg.value
        workers = entries.get("num_workers")
        if workers is not None and not (workers.complete and workers.values and all(v.value == 0 for v in workers.values)):
            continue
        set_here = [(option, where[option]) for option, is_set in options.items()
                    if option in entries and any(is_set(v.value) for v in entries[option].values)]
        if set_here:
            found.append((each, set_here))
    return found


def _is_dict(ctx, value) -> bool:
    return isinstance(value, cst.Dict) or isinstance(value, cst.Call) and ctx.call_name(value) == "builtins.dict"


def _joined_writes(ctx, scope, name: str, dicts, call) -> Optional[tuple]:
    """The key writes into ``name``: those in a block that holds the call, after every binding and
    before the call (every path's), and, per binding, those later in that binding's own branch (that
    path's only); None when the scope changes the dict any other way (an update, a call it is
    handed to, a write on some other path)."""
    joined, own = [], {id(d): [] for d in dicts}
    for change in dict_changes(ctx, scope, name):
        if change is None or change[0] is None:
            return None
        branch = [d for d in dicts if _after_in_branch(ctx, d, change[1])]
        if len(branch) == 1:
            own[id(branch[0])].append(change)
            continue
        block, at = _block_of(ctx, change[1])
        body = list(block.body) if block is not None else []
        holder = _statement_in(ctx, call, block) if block is not None else None
        if holder is None or body.index(holder) <= body.index(at):
            return None
        bound_at = [_statement_in(ctx, d, block) for d in dicts]
        if any(b is None or body.index(b) >= body.index(at) for b in bound_at):
            return None
        joined.append(change)
    return joined, own


def _after_in_branch(ctx, binding, node) -> bool:
    """``node`` comes after the statement that binds ``binding``, in that statement's block (or
    nested in a later statement of it)."""
    block, statement = _block_of(ctx, binding)
    if block is None or isinstance(block, cst.Module):
        return False
    later = _statement_in(ctx, node, block)
    body = list(block.body)
    return later is not None and body.index(later) > body.index(statement)


def _block_of(ctx, node):
    """The statement block around ``node`` and the statement of it that holds ``node``."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            return ancestor, child
        child = ancestor
    return None, None


def _statement_in(ctx, node, block):
    """The statement of ``block`` that holds ``node`` (None: not in that block)."""
    child = node
    for ancestor in ctx.ancestors(node):
        if ancestor is block:
            return child
        child = ancestor
    return None
