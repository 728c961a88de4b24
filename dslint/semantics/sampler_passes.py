"""Which sampler a call builds, and which calls start a new pass over a loader.

- ``constructed_classes``: what a call may construct, also through a local name bound to
  one class or another (``make = DistributedSampler if ddp else RandomSampler``; ``make(ds)``);
- ``torch_sampler``: a call that builds one of torch's own samplers;
- ``iter_call_loops``: ``iter(loader)`` / ``loader.__iter__()`` calls, each of which
  starts a new pass over the loader's sampler, as a ``for`` loop over it would.
"""

from __future__ import annotations

from typing import List, Optional, Set

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.loops import LoaderLoop


def constructed_classes(ctx, call: cst.Call) -> Set[str]:
    """The qualified names of what ``call`` may construct: its callee, or each class a local name
    it calls may hold (``make = DistributedSampler if ddp else RandomSampler``; ``make(ds)``)."""
    name = ctx.call_name(call)
    if name is not None or not isinstance(call.func, cst.Name):
        return {name} if name else set()
    found: Set[str] = set()
    pending = list(scope_assignments(ctx.tree, ctx.tree.scope_node(call.func), call.func.value) or ())
    while pending:
        node = pending.pop()
        if isinstance(node, cst.IfExp):
            pending += [node.body, node.orelse]
        elif isinstance(node, (cst.Name, cst.Attribute)) and (qualified := ctx.qualname(node)):
            found.add(qualified)
    return found


def torch_sampler(ctx, node) -> bool:
    """``node`` constructs one of torch's own samplers (the other branch of a DDP switch:
    ``DistributedSampler(ds) if ddp else RandomSampler(ds)``)."""
    return isinstance(node, cst.Call) and any(q.startswith("torch.utils.data.") and q.endswith("Sampler")
                                              for q in constructed_classes(ctx, node))


def iter_call_loops(ctx, index, loader) -> List[LoaderLoop]:
    """``iter(loader)`` (or ``loader.__iter__()``) calls: each starts a new pass over the sampler,
    so one inside a loop (a ``next`` stream rebuilt on ``StopIteration`` every epoch) re-runs the
    sampler's order as a ``for`` loop over the loader would; the call stands for the loop."""
    def compute():
        out = []
        for call in ctx.nodes(cst.Call):
            target = iterated_by(ctx, call)
            for ref in index.resolve_loader(target, wrappers=True) if target is not None else ():
                out.append(LoaderLoop(call, target, ref.loader, ref.origin, ref.path))
        return out
    return [loop for loop in ctx.memo(("sampler_passes.iter_calls",), compute) if loop.loader is loader]


def iterated_by(ctx, call: cst.Call) -> Optional[cst.BaseExpression]:
    """What ``iter(x)`` or ``x.__iter__()`` iterates, or None for any other call."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "__iter__" and not call.args:
        return func.value
    if ctx.call_name(call) == "builtins.iter" and len(call.args) == 1 and not call.args[0].star and call.args[0].keyword is None:
        return call.args[0].value
    return None
