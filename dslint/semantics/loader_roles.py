"""Which role the callers give the loaders a factory function returns (DSL704, across files).

A loader factory (``def create_loader(ds, ...): return DataLoader(ds, sampler=...)``) is
often one function for every split: the training script keeps one of its results as
``train_loader`` and another as ``valid_loader``. What the factory hard-wires into every
loader (a ``DistributedSampler(..., drop_last=True)``) then also reaches the evaluation.

Phase 1 (``role_facts``, a summary fact) records, per file:

* ``calls``: ``[ref kind, ref, target]`` for an assignment of a call's result to a single
  name or attribute spelled like an evaluation loader (``valid_dataloader``,
  ``self.eval_loader``, ``test_loader``; tokens ``val``/``valid``/``validation``/``eval``/
  ``evaluation``/``test``, split on ``_`` and case); a call that passes a literal ``1``
  as its world size (``world_size=1``, ``num_replicas=1``) is left out: one process drops
  nothing; a function named like an evaluation loader (``def val_dataloader(self)``,
  ``build_eval_loader``) that returns a call's result counts the same;
* ``forwards``: ``[function, ref kind, ref]`` for a function whose ``return`` hands back
  another function's result unchanged (``return create_loader(ds, ...)``, or a name assigned
  once from that call).

Test modules and ``test_*`` functions are left out. A ref is ``["name", qualified]`` (a function of any module) or ``["local", Class.method]``
(``self.method(...)`` of a method of this module's class defining it).

Phase 2 (``eval_roles``) answers, for one function of the project, the callers (any file,
through up to three forwarding functions) that keep its result under an evaluation name.
No libcst is needed there: a cached run replays the answer.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import libcst as cst

from dslint.semantics.calls import BoundCall
from dslint.semantics.loops import DISTRIBUTED_SAMPLER, DISTRIBUTED_SAMPLER_SIGNATURE, is_test_code
from dslint.semantics.test_paths import is_test_module
from dslint.semantics.values import possible_arg
from dslint.semantics.walk import body_buckets, iter_subtree

EVAL_TOKENS = frozenset({"val", "valid", "validation", "eval", "evaluation", "test"})
WORLD_KEYWORDS = frozenset({"world_size", "num_replicas", "num_processes", "world"})
_LIBRARY_PREFIXES = ("builtins.", "torch.", "numpy.", "os.", "sys.", "math.", "random.", "logging.", "functools.")
_SPLIT = re.compile(r"_+|(?<=[a-z0-9])(?=[A-Z])")


def eval_name(name: str) -> bool:
    """``valid_dataloader``, ``evalLoader``, ``test_loader``: a name whose tokens name an evaluation split."""
    return any(token.lower() in EVAL_TOKENS for token in _SPLIT.split(name) if token)


def _target_name(target: cst.BaseExpression) -> Optional[str]:
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    return None


def _one_process(call: cst.Call) -> bool:
    return any(
        arg.keyword is not None and arg.keyword.value in WORLD_KEYWORDS
        and isinstance(arg.value, cst.Integer) and arg.value.value == "1"
        for arg in call.args
    )


def _ref(call: cst.Call, names, owner_methods: Dict[str, str], self_param: Optional[str]) -> Optional[list]:
    func = call.func
    if (isinstance(func, cst.Attribute) and self_param and isinstance(func.value, cst.Name)
            and func.value.value == self_param):
        local = owner_methods.get(func.attr.value)
        return ["local", local] if local else None
    if isinstance(func, (cst.Name, cst.Attribute)):
        qualified = names.qualname(func)
        if qualified and not qualified.startswith(_LIBRARY_PREFIXES):
            return ["name", qualified]
    return None


def _method_context(func: cst.FunctionDef, tree, local_qualname) -> Tuple[Dict[str, str], Optional[str]]:
    """({method name: local qualname} of the class defining ``func``, its ``self`` parameter)."""
    block = tree.parent_of(func)
    owner = tree.parent_of(block) if isinstance(block, cst.IndentedBlock) else None
    if not isinstance(owner, cst.ClassDef) or not func.params.params:
        return {}, None
    prefix = local_qualname(owner, tree)
    methods = {s.name.value: f"{prefix}.{s.name.value}" for s in owner.body.body if isinstance(s, cst.FunctionDef)}
    return methods, func.params.params[0].name.value


def _held_call(buckets, expr) -> Optional[cst.Call]:
    """The call ``expr`` (a name) holds: its one assignment in the function whose body's nodes
    are ``buckets`` (``loader = f(...)``)."""
    if not isinstance(expr, cst.Name):
        return None
    found = []
    for kind in (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor):
        for node in buckets.get(kind, ()):
            if any(isinstance(n, cst.Name) and n.value == expr.value for n in iter_subtree(node.target)):
                found.append(node)
    if len(found) != 1 or not isinstance(found[0], cst.AssignTarget) or not isinstance(found[0].target, cst.Name):
        return None
    for node in buckets.get(cst.Assign, ()):
        if len(node.targets) == 1 and node.targets[0] is found[0]:
            return node.value if isinstance(node.value, cst.Call) else None
    return None


def role_facts(tree, names, local_qualname) -> dict:
    calls: List[list] = []
    forwards: List[list] = []
    if is_test_module(names.modname):
        return {}  # a test names its loaders ``test_loader`` whatever they are for
    for func in tree.nodes(cst.FunctionDef):
        if func.name.value.startswith("test_"):
            continue
        buckets = body_buckets(func, tree)
        assigns, returns = buckets.get(cst.Assign, ()), buckets.get(cst.Return, ())
        if not assigns and not returns:
            continue
        methods, self_param = _method_context(func, tree, local_qualname)
        for node in assigns:
            if len(node.targets) == 1 and isinstance(node.value, cst.Call):
                name = _target_name(node.targets[0].target)
                if name and eval_name(name) and not _one_process(node.value):
                    ref = _ref(node.value, names, methods, self_param)
                    if ref:
                        calls.append([*ref, name])
        qual = None
        for node in returns:
            if node.value is None:
                continue
            value = node.value if isinstance(node.value, cst.Call) else _held_call(buckets, node.value)
            ref = _ref(value, names, methods, self_param) if value is not None else None
            if ref:
                qual = qual or local_qualname(func, tree)
                forwards.append([qual, *ref])
                if eval_name(func.name.value) and not _one_process(value):
                    calls.append([*ref, func.name.value])  # ``def val_dataloader(self): return make(...)``
    return {"calls": calls, "forwards": forwards} if calls or forwards else {}


# ----------------------------------------------------------------------- phase 2 (the index)


def _key(index, path: str, kind: str, ref: str):
    if kind == "local":
        return (path, ref)
    return index.locate(ref, path, table="functions")


def _tables(index):
    tables = getattr(index, "loader_role_tables", None)
    if tables is not None:
        return tables
    roles: Dict[tuple, List[list]] = {}
    forwarders: Dict[tuple, List[tuple]] = {}
    for path, summary in index.summaries.items():
        facts = summary.get("loader_roles") or {}
        for kind, ref, name in facts.get("calls", ()):
            key = _key(index, path, kind, ref)
            if key is not None:
                roles.setdefault(key, []).append([summary["module"], name])
        for qual, kind, ref in facts.get("forwards", ()):
            key = _key(index, path, kind, ref)
            if key is not None:
                forwarders.setdefault(key, []).append((path, qual))
    tables = (roles, forwarders)
    index.loader_role_tables = tables
    return tables


def eval_roles(index, key) -> List[list]:
    """[module, name] of each caller (any file) keeping the result of function ``key`` (or of a
    function returning its result, three deep) under an evaluation name."""
    roles, forwarders = _tables(index)
    found: List[list] = []
    seen = {key}
    frontier = [key]
    for _ in range(4):
        following = []
        for current in frontier:
            found.extend(r for r in roles.get(current, ()) if r not in found)
            for outer in forwarders.get(current, ()):
                if outer not in seen:
                    seen.add(outer)
                    following.append(outer)
        frontier = following
    return sorted(found)


# ----------------------------------------------------------------------- phase 2 (the factory's file)

_BRANCHES = (cst.If, cst.IfExp, cst.Try, cst.For, cst.While, cst.With, cst.Match) if hasattr(cst, "Match") else (
    cst.If, cst.IfExp, cst.Try, cst.For, cst.While, cst.With)


def unconditional(ctx, node: cst.CSTNode, func: cst.FunctionDef) -> bool:
    """``node`` runs every time ``func`` runs (no branch, loop or ``try`` between them; a ``with``
    counts as a branch too: it may swallow)."""
    for ancestor in ctx.ancestors(node):
        if ancestor is func:
            return True
        if isinstance(ancestor, _BRANCHES) or isinstance(ancestor, (cst.BooleanOperation, cst.Lambda, cst.FunctionDef)):
            return False
    return False


def _bound_name(ctx, node: cst.CSTNode) -> Optional[str]:
    """``x`` when ``node`` is the whole value of ``x = node``."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value
    return None


def _assigned_once(func: cst.FunctionDef, name: str) -> bool:
    count = 0
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)):
            target = node.target
            count += sum(1 for n in iter_subtree(target) if isinstance(n, cst.Name) and n.value == name)
        elif isinstance(node, (cst.For, cst.CompFor)):
            count += sum(1 for n in iter_subtree(node.target) if isinstance(n, cst.Name) and n.value == name)
    return count == 1


def returned_loader(ctx, sampler: cst.Call) -> Optional[Tuple[cst.FunctionDef, cst.Call]]:
    """(the function, the loader call) when ``sampler`` is the ``sampler=`` argument (inline, or a
    name assigned once) of a call that the function returns (directly, or through a name assigned
    once), both built every time the function runs; None otherwise."""
    func = ctx.enclosing_function(sampler, through_lambdas=False)
    if func is None or not unconditional(ctx, sampler, func):
        return None
    arg = ctx.parent(sampler)
    value: cst.CSTNode = sampler
    name = _bound_name(ctx, sampler)
    if name is not None:
        if not _assigned_once(func, name):
            return None
        args = [a for a in iter_subtree(func.body, into_scopes=False) if isinstance(a, cst.Arg) and a.keyword is not None
                and a.keyword.value == "sampler" and isinstance(a.value, cst.Name) and a.value.value == name]
        if len(args) != 1:
            return None
        arg, value = args[0], args[0].value
    if not (isinstance(arg, cst.Arg) and arg.keyword is not None and arg.keyword.value == "sampler" and arg.value is value):
        return None
    loader = ctx.parent(arg)
    if not isinstance(loader, cst.Call) or not unconditional(ctx, loader, func):
        return None
    returns = [r for r in iter_subtree(func.body, into_scopes=False) if isinstance(r, cst.Return)]
    if len(returns) != 1 or returns[0].value is None:
        return None
    returned = returns[0].value
    if returned is loader:
        return func, loader
    held = _bound_name(ctx, loader)
    if held is not None and isinstance(returned, cst.Name) and returned.value == held and _assigned_once(func, held):
        return func, loader
    return None


def factory_eval_roles(ctx, sampler: cst.Call) -> Optional[Tuple[str, List[list]]]:
    """(the factory's name, [module, name] of its evaluation callers) when ``sampler`` (``drop_last``
    True on every path) is built into every loader a function returns and some caller (any file) keeps one of those loaders
    under an evaluation name."""
    if is_test_code(ctx, sampler) or not possible_arg(
            ctx, BoundCall(sampler, DISTRIBUTED_SAMPLER_SIGNATURE), "drop_last").must_be(lambda v: v is True):
        return None
    found = returned_loader(ctx, sampler)
    if found is None:
        return None
    func = found[0]
    roles = ctx.view.loader_eval_roles(ctx.qualname_of_def(func))
    return (func.name.value, roles) if roles else None


def factory_eval_findings(ctx, skip=()):
    """(sampler, DSL704's message) for the ``DistributedSampler`` calls of this file (but those in
    ``skip``, by id) that ``factory_eval_roles`` answers for."""
    for sampler in ctx.calls_to(DISTRIBUTED_SAMPLER):
        found = None if id(sampler) in skip else factory_eval_roles(ctx, sampler)
        if found is not None:
            module, name = found[1][0]
            yield sampler, (
                f"`{found[0]}` builds every loader it returns with this `DistributedSampler(drop_last=True)`, and "
                f"`{module}` hands one out as `{name}`: the evaluation never sees the last `len % world_size` samples "
                "of its set; give evaluation loaders a sampler that neither drops nor pads")
