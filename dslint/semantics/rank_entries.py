"""Which DDP entry scripts reach a function, and how they seed torch's global RNG (DSL701, across files).

A ``random_split`` without a generator is often written in a dataset factory
(``data.py: def build_splits(cfg): return random_split(full, [...])``) that the training
script of another file calls after it started the process group and seeded the global
RNG *per rank* (``torch.manual_seed(args.seed + rank)``). Nothing in the factory's file
shows DDP; the script shows it.

Phase 1 (``entry_facts``, a summary fact): a file that starts its distributed state itself
(``init_process_group``, ``deepspeed.initialize``/``init_distributed``, ``hvd.init``, an
``Accelerator()``/``Fabric()``, a read of ``RANK``/``LOCAL_RANK``... from the launcher's
environment) records what starts it and each call that seeds the global RNG
(``torch.manual_seed``, ``seed_everything``, ``set_seed``, any function named for seeding)
with whether its seed names a rank (the argument, or what the name it passes was assigned
in the same function: ``seed = args.seed + rank``).

Phase 2 (``split_entries``): the entry files (any file) whose functions call the given
function, directly or through up to three project functions, and that seed per rank only:
at least one seed names the rank and none does not. An entry without a seed is not
counted: a helper it calls may seed the same on every rank, which its summary does not show.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from dslint.semantics.calls import literal_value
from dslint.semantics.distributed import FRAMEWORK_CALLS, PROCESS_GROUP_CALLS, RANK_ENV, SEED_CALLS, STARTS, env_key, mentions_rank
from dslint.semantics.test_paths import is_test_module
from dslint.semantics.walk import iter_subtree


class NamesContext:
    """What ``mentions_rank``/``env_key`` ask of a file context, from the names of phase 1."""

    def __init__(self, names) -> None:
        self.names = names

    def qualname(self, expr):
        return self.names.qualname(expr)

    def call_name(self, call: cst.Call) -> Optional[str]:
        return self.names.qualname(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None

    def literal(self, expr):
        return literal_value(expr)


def _tail(call: cst.Call) -> Optional[str]:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)


def markers(tree, names) -> Tuple[Optional[str], Optional[str]]:
    """(what starts the file's distributed state, its first process-group marker of any kind:
    ``PROCESS_GROUP_CALLS`` or a rank read from the environment; frameworks aside), once per file."""
    return tree.memo(("rank_entries.markers",), lambda: _markers(tree, names))


def _markers(tree, names):
    ctx = NamesContext(names)
    tails = names.call_tails({q.rsplit(".", 1)[-1] for q in (*PROCESS_GROUP_CALLS, *FRAMEWORK_CALLS)})
    start = marker = framework = env = None
    for call in tree.nodes(cst.Call):
        tail = _tail(call)
        if tail in tails:
            name = ctx.call_name(call)
            if name in PROCESS_GROUP_CALLS:
                marker = marker or PROCESS_GROUP_CALLS[name]
                if name in STARTS:
                    start = start or PROCESS_GROUP_CALLS[name]
            elif name in FRAMEWORK_CALLS:
                framework = framework or FRAMEWORK_CALLS[name]
        elif tail in ("get", "getenv") and env is None:
            key = env_key(ctx, call)
            if key in RANK_ENV:
                env = f"a read of `{key}` from the launcher's environment"
    if env is None:
        for sub in tree.nodes(cst.Subscript):
            value = sub.value
            if (isinstance(value, cst.Attribute) and value.attr.value == "environ") or (
                    isinstance(value, cst.Name) and value.value == "environ"):
                key = env_key(ctx, sub)
                if key in RANK_ENV:
                    env = f"a read of `{key}` from the launcher's environment"
                    break
    return start or env or framework, marker or env


def _seeds(name: Optional[str]) -> bool:
    return bool(name) and (name in SEED_CALLS or "seed" in name.rsplit(".", 1)[-1].lower())


def _per_rank(tree, ctx, call: cst.Call) -> bool:
    scope = None
    for ancestor in tree.ancestors(call):
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            scope = ancestor
            break
    for arg in call.args:
        if mentions_rank(ctx, arg.value):
            return True
        if not isinstance(arg.value, cst.Name) or scope is None:
            continue
        name = arg.value.value
        for node in iter_subtree(scope.body if isinstance(scope, cst.FunctionDef) else scope, into_scopes=False):
            value = None
            if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets):
                value = node.value
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name) and node.target.value == name:
                value = node.value
            if value is not None and mentions_rank(ctx, value):
                return True
    return False


def entry_facts(tree, names) -> dict:
    if is_test_module(names.modname):
        return {}
    ctx = NamesContext(names)
    start = markers(tree, names)[0]
    if start is None:
        return {}
    seed_tails = names.call_tails({q.rsplit(".", 1)[-1] for q in SEED_CALLS})
    seeds = [_per_rank(tree, ctx, call) for call in tree.nodes(cst.Call)
             if (_tail(call) in seed_tails or "seed" in (_tail(call) or "").lower()) and _seeds(ctx.call_name(call))]
    return {"start": start, "seeds": seeds}


def names_context(names) -> NamesContext:
    """What ``mentions_rank``/``env_key`` need, over the module names of phase 1."""
    return NamesContext(names)


# ----------------------------------------------------------------------- phase 2 (the index)


def _callers(index) -> Dict[tuple, List[tuple]]:
    table = getattr(index, "rank_entry_callers", None)
    if table is not None:
        return table
    table = {}
    for path, summary in index.summaries.items():
        functions = list(summary.get("functions", {}).items())
        functions += [(f"{cls}.{name}", facts) for cls, c in summary.get("classes", {}).items()
                      for name, facts in c.get("methods", {}).items()]
        for qual, facts in functions:
            for kind, target, _ in facts.get("calls", ()):
                if kind != "func" or target.startswith(("builtins.", "torch.", "numpy.", "os.")):
                    continue
                located = index.locate(target, path, table="functions")
                if located is not None and located != (path, qual):
                    table.setdefault(located, []).append((path, qual))
    index.rank_entry_callers = table
    return table


def split_entries(index, key) -> List[list]:
    """[module, what starts it] of each entry file (any file) that seeds per rank only and whose
    functions call function ``key``, directly or through up to three project functions."""
    callers = _callers(index)
    found: List[list] = []
    seen = {key}
    frontier = [key]
    for _ in range(4):
        following = []
        for current in frontier:
            for caller in callers.get(current, ()):
                if caller in seen:
                    continue
                seen.add(caller)
                following.append(caller)
                summary = index.summaries[caller[0]]
                facts = summary.get("rank_entry") or {}
                seeds = facts.get("seeds") or []
                if facts.get("start") and seeds and all(seeds):
                    entry = [summary["module"], facts["start"]]
                    if entry not in found:
                        found.append(entry)
        frontier = following
    return sorted(found)


def split_entry_scripts(ctx, call: cst.Call) -> List[list]:
    """[module, what starts it, the function] for each entry script of another file that seeds
    per rank only and calls (up to four calls deep) the function making ``call``."""
    func = ctx.enclosing_function(call)
    if func is None:
        return []
    qual = ctx.qualname_of_def(func)
    return [[*entry, func.name.value] for entry in ctx.view.rank_split_entries(qual)]
