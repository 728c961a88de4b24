"""A ``DistributedSampler`` that the code builds for a loader's dataset and then does not hand to the loader.

Building ``DistributedSampler(ds)`` in the function that builds ``DataLoader(ds, ...)`` says the
author means that loader to be cut per rank. The loader still iterates the whole dataset on every
rank when, on a path where the sampler was built, it gets something else:

* **rebound**: the sampler's name is assigned again before the loader reads it, on every path
  (``s = DistributedSampler(ds)``, then ``s = SequentialSampler(ds)``), and no other read sees the
  first value: the distributed sampler is built and thrown away;
* **picked away**: the loader chooses between it and ``None`` (or a torch sampler) by a test that the
  sampler was built to serve both ways (``s = DistributedSampler(ds, shuffle=train)`` then
  ``sampler=s if train else None``): where the test fails, the sampler made for that case is dropped,
  whatever the run's distribution. A test that also guards the construction
  (``DistributedSampler(ds) if ddp else None`` read as ``s if ddp else None``) drops nothing, and a
  choice made only under an ``if`` of its own (``if not cfg.dist_eval_sampler:``) is deliberate.

API: ``dropped_distributed_sampler(ctx, index, loader)`` -> ``Dropped`` or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Optional, Set

import libcst as cst

from dslint.semantics.calls import BoundCall
from dslint.semantics.loops import DISTRIBUTED_SAMPLER, DISTRIBUTED_SAMPLER_SIGNATURE, RANDOM_SAMPLER, SEQUENTIAL_SAMPLER
from dslint.semantics.scopes import is_none, names_used
from dslint.semantics.walk import iter_subtree

__all__ = ["Dropped", "dropped_distributed_sampler"]

_PLAIN_SAMPLERS = frozenset({RANDOM_SAMPLER, SEQUENTIAL_SAMPLER})


@dataclass(frozen=True)
class Dropped:
    """The ``DistributedSampler(...)`` call the loader does not get, and how it loses it."""

    built: cst.Call
    at: cst.CSTNode  #: the value the name is rebound to, or the test that picks it away
    picked_when: Optional[bool] = None  #: for a test: the outcome that drops the sampler


def dropped_distributed_sampler(ctx, index, loader) -> Optional[Dropped]:
    """The distributed sampler built over this loader's dataset, in the loader's function, that the
    loader does not get on a path where it was built (see the module's docstring); None otherwise."""
    dataset = loader.bound.expr("dataset")
    sampler = loader.bound.expr("sampler")
    if not isinstance(dataset, (cst.Name, cst.Attribute)) or sampler is None:
        return None
    if loader.bound.expr("batch_sampler") is not None:
        return None
    func = ctx.enclosing_function(loader.call)
    text = ctx.code(dataset)
    for built in _built_over(ctx, func, text):
        found = _rebound(ctx, index, built, sampler, func) or _picked(ctx, index, built, sampler)
        if found is not None:
            return found
    return None


def _built_over(ctx, func, text: str) -> Iterator[cst.Call]:
    root = func if func is not None else ctx.module
    for node in iter_subtree(root):
        if not isinstance(node, cst.Call) or ctx.call_name(node) != DISTRIBUTED_SAMPLER:
            continue
        dataset = BoundCall(node, DISTRIBUTED_SAMPLER_SIGNATURE).expr("dataset")
        if dataset is not None and ctx.code(dataset) == text and ctx.enclosing_function(node) is func:
            yield node


def _binding_of(ctx, index, call: cst.Call):
    """(name, its scope, its bindings, the binding) when ``call`` is the whole value, or an arm of
    the value, of ``name = ...``."""
    statement = ctx.parent(call)
    while isinstance(statement, cst.IfExp):
        statement = ctx.parent(statement)
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return None
    target = statement.targets[0].target
    if not isinstance(target, cst.Name):
        return None
    scope, found = index.name_bindings(target.value, statement)
    binding = next((b for b in found or () if b.node is statement), None)
    return (target.value, scope, found, binding) if binding is not None else None


def _reads(ctx, root, name: str) -> Iterator[cst.Name]:
    for node in iter_subtree(root):
        if isinstance(node, cst.Name) and node.value == name and not _is_target(ctx, node):
            yield node


def _is_target(ctx, name: cst.Name) -> bool:
    child: cst.CSTNode = name
    for ancestor in ctx.ancestors(name):
        if isinstance(ancestor, (cst.AssignTarget, cst.AsName)):
            return True
        if isinstance(ancestor, (cst.For, cst.CompFor, cst.AnnAssign)):
            return child is ancestor.target
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
        child = ancestor
    return False


def _rebound(ctx, index, built: cst.Call, sampler, func) -> Optional[Dropped]:
    """The loader reads the sampler's name, and no read of the name anywhere in the function can
    see the distributed sampler's binding."""
    if not isinstance(sampler, cst.Name):
        return None
    bound = _binding_of(ctx, index, built)
    if bound is None or bound[0] != sampler.value:
        return None
    name, scope, found, binding = bound
    seen: List[cst.Name] = list(_reads(ctx, func if func is not None else ctx.module, name))
    if not any(read is sampler for read in seen):
        return None
    for read in seen:
        reaching = index.reaching(read, scope, found)
        if reaching is None or any(b is binding for b in reaching):
            return None
    later = index.reaching(sampler, scope, found) or ()
    values = [b.value for b in later if b.value is not None]
    return Dropped(built, values[0]) if len(values) == 1 else None


def _picked(ctx, index, built: cst.Call, sampler) -> Optional[Dropped]:
    """``sampler=s if test else None`` (or a name bound once to that), where ``s`` may be the
    distributed sampler, the other arm is ``None`` or a torch sampler, and the test reads a name the
    sampler's own arguments read but no test guarding its construction does."""
    choice = sampler
    if isinstance(choice, cst.Name):
        values = [v.node for v in index.values(choice)]
        choice = next((ctx.parent(v) for v in values if v is not None and isinstance(ctx.parent(v), cst.IfExp)), None)
    if not isinstance(choice, cst.IfExp):
        return None
    test = set(names_used(choice.test))
    own = {n for arg in built.args for n in names_used(arg.value)} - set(names_used(built.args[0].value))
    arms = (choice.body, choice.orelse)
    for kept, other, drops_when in ((*arms, False), (*arms[::-1], True)):
        if not any(v.node is built for v in index.values(kept)):
            continue
        if not all(_plain(ctx, v.node) for v in index.values(other)):
            return None
        if not _tests_around(ctx, choice) <= _tests_around(ctx, built):
            return None  # chosen only under a test of its own (`if not cfg.dist_eval: s = s if train else None`)
        if test & own and not test & _guards(ctx, built) and not test & set(names_used(kept)):
            return Dropped(built, choice.test, drops_when)
    return None


def _plain(ctx, node) -> bool:
    if node is None:
        return False
    return is_none(node) or (isinstance(node, cst.Call) and ctx.call_name(node) in _PLAIN_SAMPLERS)


def _tests_around(ctx, node) -> Set[str]:
    """The code of the tests of the ``if`` statements around ``node`` in its function."""
    out: Set[str] = set()
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            break
        if isinstance(ancestor, cst.If):
            out.add(ctx.code(ancestor.test).strip())
    return out


def _guards(ctx, node) -> Set[str]:
    """Names read by the tests of the ``if``s and conditional expressions around ``node`` in its function."""
    out: Set[str] = set()
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)) and child is not ancestor.test:
            out.update(names_used(ancestor.test))
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            break
        child = ancestor
    return out
