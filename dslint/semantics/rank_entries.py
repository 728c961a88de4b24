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
from dslint.semantics.distributed import (
    FRAMEWORK_CALLS, PROCESS_GROUP_CALLS, RANK_ENV, SEED_CALLS, STARTS, env_key, mentions_rank,
)
from dslint.semantics.seed_helpers import passed_arguments
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


def _seed_calls(tree, names, ctx) -> List[cst.Call]:
    seed_tails = names.call_tails({q.rsplit(".", 1)[-1] for q in SEED_CALLS})
    # a project function named for a seed whose result is handed to another call returns a seed
    # (``start_seed=resolve_seed(cfg)``): it does not seed the global RNG
    return [call for call in tree.nodes(cst.Call)
            if (_tail(call) in seed_tails or "seed" in (_tail(call) or "").lower()) and _seeds(ctx.call_name(call))
            and (ctx.call_name(call) in SEED_CALLS or not isinstance(tree.parent_of(call), cst.Arg))]


def _deferred(ctx, call: cst.Call):
    """A seed call to a function that may be the project's own helper: what phase 2 needs to ask
    that helper whether it seeds per rank ([callee, keywords passed, number of positional arguments])."""
    name, passed = ctx.call_name(call), passed_arguments(call)
    if name is None or name in SEED_CALLS or passed is None:
        return False
    return [name, *passed]


def entry_facts(tree, names) -> dict:
    if is_test_module(names.modname):
        return {}
    ctx = NamesContext(names)
    start = markers(tree, names)[0]
    if start is None:
        return {}
    seeds = [_per_rank(tree, ctx, call) or _deferred(ctx, call) for call in _seed_calls(tree, names, ctx)]
    return {"start": start, "seeds": seeds}


def seed_references(entry: dict, seeders: Dict[str, dict]) -> List[str]:
    """The functions a DDP entry script's seeds, and a seeding helper's, call into (the engine
    analyses their files, so that phase 2 can ask them whether they seed per rank)."""
    seeds = list(entry.get("seeds", ())) + [seed for facts in seeders.values() for seed in facts["seeds"]]
    return sorted({seed[0] for seed in seeds if isinstance(seed, list) and seed[0] != "via"})


def _rank_roots(tree, ctx, call: cst.Call, func: cst.FunctionDef) -> Optional[List[str]]:
    """The parameters of ``func`` that carry the rank into seed call ``call``: the roots of the
    rank-naming expressions (``accelerator`` in ``seed += accelerator.process_index``), else the
    parameters the ``if`` tests guarding them read; [] when the rank comes from nowhere else."""
    params = {p.name.value for p in (*func.params.params, *func.params.posonly_params, *func.params.kwonly_params)}
    sources = [arg.value for arg in call.args if mentions_rank(ctx, arg.value)]
    names = {arg.value.value for arg in call.args if isinstance(arg.value, cst.Name)}
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value in names for t in node.targets):
            sources.append(node.value)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name) and node.target.value in names:
            sources.append(node.value)
    sources = [s for s in sources if s is not None and mentions_rank(ctx, s)]
    roots, tests = set(), set()
    for source in sources:
        for node in iter_subtree(source, into_scopes=False):
            if isinstance(node, cst.Name) and node.value in params and mentions_rank(ctx, node):
                roots.add(node.value)  # ``seed + rank`` with a parameter ``rank``
            elif isinstance(node, cst.Attribute) and mentions_rank(ctx, node):
                root = node
                while isinstance(root, cst.Attribute):
                    root = root.value
                if isinstance(root, cst.Name) and root.value in params:
                    roots.add(root.value)
        for ancestor in tree.ancestors(source):
            if ancestor is func:
                break
            if isinstance(ancestor, cst.If):
                tests.update(n.value for n in iter_subtree(ancestor.test, into_scopes=False)
                             if isinstance(n, cst.Name) and n.value in params)
    return sorted(roots or tests)


def seeder_facts(tree, names) -> Dict[str, dict]:
    """Module-level functions of any file that seed torch's global RNG (a summary fact):
    {function: {"params": [...], "seeds": [...]}}, each seed True (names a rank), False (does not),
    ["via", params] (names a rank only when one of these parameters is passed) or a deferred call
    to another function (see ``_deferred``)."""
    if is_test_module(names.modname):
        return {}
    ctx = NamesContext(names)
    found: Dict[str, dict] = {}
    for call in _seed_calls(tree, names, ctx):
        func = next((a for a in tree.ancestors(call) if isinstance(a, (cst.FunctionDef, cst.ClassDef, cst.Module))), None)
        if not isinstance(func, cst.FunctionDef) or not isinstance(tree.parent_of(func), cst.Module):
            continue
        if _per_rank(tree, ctx, call):
            via = _rank_roots(tree, ctx, call, func)
            seed = ["via", via] if via else True
        else:
            seed = _deferred(ctx, call)
        facts = found.setdefault(func.name.value, {"params": [p.name.value for p in (*func.params.posonly_params, *func.params.params)], "seeds": []})
        facts["seeds"].append(seed)
    return found


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
                if facts.get("start") and _seeds_per_rank(index, caller[0], facts.get("seeds") or [], strict=True):
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


def _resolve(index, path: str, seed, strict: bool, depth: int) -> Optional[bool]:
    """Whether one seed of a file seeds per rank: a deferred call is asked of the project function
    it calls (with the parameters it passes); None when that function seeds nothing at all."""
    if isinstance(seed, bool):
        return seed
    if seed[0] == "via":
        return False  # a parameter of an entry script's function: not known to be passed
    name, keywords, positional = seed
    located = index.locate(name, path, table="functions") if depth < 3 else None
    if located is None:
        return False if strict else None  # a helper not analysed may seed the same on every rank
    summary = index.summaries[located[0]]
    facts = (summary.get("rank_seeders") or {}).get(located[1])
    if facts is None:
        calls = (summary.get("functions", {}).get(located[1]) or {}).get("calls", ())
        calls_more = any(not target.startswith("builtins.") for _, target, _ in calls)
        return False if calls_more else None  # a function named for a seed that calls nothing: it returns one
    passed = set(keywords) | set(facts["params"][:positional])
    answers = []
    for inner in facts["seeds"]:
        if not isinstance(inner, bool) and inner[0] == "via":
            answers.append(bool(passed & set(inner[1])))
        else:
            answers.append(_resolve(index, located[0], inner, False, depth + 1))
    answers = [a for a in answers if a is not None]
    return (bool(answers) and all(answers)) if answers else None


def _seeds_per_rank(index, path: str, seeds: list, strict: bool) -> bool:
    """At least one seed names the rank (itself, or through a project helper that adds the rank
    to the seed for what it is passed) and every other seed does too (seed-named functions that
    seed nothing aside)."""
    answers = [_resolve(index, path, seed, strict, 0) for seed in seeds]
    answers = [a for a in answers if a is not None]
    return bool(answers) and all(answers)


def helper_per_rank(index, path: str, seed: list) -> bool:
    """A call to a project helper (``[callee, keywords, positional count]``) seeds per rank."""
    return _resolve(index, path, seed, False, 0) is True
