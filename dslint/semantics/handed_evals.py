"""Evaluations a loader is handed to in another file, and whether they gather.

A script builds its evaluation loader and passes it to ``evaluate(loader, model)`` of
another module; the loop, and the merge of the per-rank results, happen there. Two
facts cross the file boundary, both recorded in the per-function summary
(``summary.function_facts``) and read back through ``ctx.view``:

* ``evals`` (``eval_facts``), for a function that iterates one of its parameters: does
  it train (a ``.backward()`` call), does it de-duplicate the padding a distributed
  sampler adds (``gather_for_metrics``, a slice bounded by ``len(...)``, results
  written by index or stored under each sample's id, ``{t["image_id"]: out}``, a batch
  that carries each sample's index), which collectives it
  calls, and which methods it calls on objects it builds from project classes
  (``logger = MetricLogger(); logger.synchronize()``);
* ``delegates`` (``delegated_classes``), for a method that calls the method of the same
  name on other objects (``for m in self.meters.values(): m.synchronize()``): the classes
  of its module that define that name, which is what such a container usually holds.

``handed_eval`` answers, for a loader of this file, the first such function it is
handed to that iterates it, does not train, does not de-duplicate, and gathers
(itself, through a project function, or through a method of a project object, two
levels deep). Anything not in the summaries (a library function, a file the engine
did not analyse, an argument passed by ``*args``) is unknown and gives no answer.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from dslint.semantics.calls import BoundCall
from dslint.semantics.distributed import (DEDUP_METHODS, GATHER_CALLS, eval_feeds, line_of, method_name,
                                          project_calls_any, trains)
from dslint.semantics.loops import DISTRIBUTED_SAMPLER, DISTRIBUTED_SAMPLER_SIGNATURE, is_test_code, loader_loops
from dslint.semantics.eval_keys import INDEX_WRITES, keyed_store, sample_id_key, sample_index_name, unique_ids
from dslint.semantics.values import possible_arg
from dslint.semantics.walk import body_buckets, iter_subtree

#: qualified-name prefixes that are not project code
LIBRARY_PREFIXES = ("builtins.", "torch.", "numpy.", "os.", "sys.", "math.", "random.", "logging.", "time.", "json.",
                    "collections.", "typing.", "functools.", "itertools.")


# ----------------------------------------------------------------------- summary side


def eval_facts(func: cst.FunctionDef, names, iterated: List[list]) -> dict:
    """What another file needs to know about ``func``, which iterates the parameters ``iterated``."""
    params = {name for _, name in iterated}
    built = {}
    nodes = list(iter_subtree(func.body, into_scopes=False))
    for node in nodes:
        if (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                and isinstance(node.value, cst.Call) and isinstance(node.value.func, (cst.Name, cst.Attribute))):
            qualified = names.qualname(node.value.func)
            if qualified and not qualified.startswith(LIBRARY_PREFIXES):
                built[node.targets[0].target.value] = qualified
    trains_, dedups, gathers, objects = False, False, [], []
    for node in nodes:
        if isinstance(node, cst.Call):
            method = method_name(node)
            trains_ = trains_ or method == "backward"
            dedups = dedups or method in DEDUP_METHODS or method in INDEX_WRITES or unique_ids(node)
            func_expr = node.func
            qualified = names.qualname(func_expr) if isinstance(func_expr, (cst.Name, cst.Attribute)) else None
            if qualified in GATHER_CALLS:
                gathers.append(qualified)
            elif (isinstance(func_expr, cst.Attribute) and isinstance(func_expr.value, cst.Name)
                  and func_expr.value.value in built):
                objects.append([built[func_expr.value.value], func_expr.attr.value])
        elif isinstance(node, cst.DictComp) and sample_id_key(node.key):
            dedups = True
        elif keyed_store(node):
            dedups = True
        elif isinstance(node, cst.Slice) and node.upper is not None:
            dedups = dedups or any(isinstance(c, cst.Call) and isinstance(c.func, cst.Name)
                                   and names.qualname(c.func) == "builtins.len" for c in iter_subtree(node.upper))
        elif isinstance(node, cst.For) and any(isinstance(n, cst.Name) and n.value in params for n in iter_subtree(node.iter)):
            dedups = dedups or any(isinstance(n, cst.Name) and sample_index_name(n.value) for n in iter_subtree(node.target))
    return {"trains": trains_, "dedups": dedups, "gathers": sorted(set(gathers)), "objects": objects}


def delegated_classes(func: cst.FunctionDef, tree, names, local_qualname) -> List[str]:
    """Classes of this module (other than ``func``'s own) that define ``func``'s name, when
    ``func`` calls that same method on an object other than ``self``."""
    name = func.name.value
    params = func.params.params
    self_param = params[0].name.value if params else None
    calls_same = any(
        isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == name
        and not (isinstance(n.func.value, cst.Name) and n.func.value.value == self_param)
        for n in body_buckets(func, tree).get(cst.Call, ())
    )
    if not calls_same or name.startswith("__"):
        return []
    out = []
    for cls in tree.nodes(cst.ClassDef):
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        if any(stmt is func for stmt in body):
            continue
        if any(isinstance(stmt, cst.FunctionDef) and stmt.name.value == name for stmt in body):
            out.append(f"{names.modname}.{local_qualname(cls, tree)}")
    return out[:4]


# ----------------------------------------------------------------------- rule side


def _method_gathers(ctx, cls: str, name: str, depth: int) -> bool:
    facts = ctx.view.method_facts(cls, name)
    if facts is None:
        return False
    for kind, target, _ in facts.get("calls", ()):
        if kind == "func" and (target in GATHER_CALLS or (
                depth > 0 and not target.startswith(LIBRARY_PREFIXES)
                and project_calls_any(ctx, target, GATHER_CALLS, depth=0))):
            return True
        if kind == "self" and depth > 0 and target != name and _method_gathers(ctx, cls, target, depth - 1):
            return True
    return depth > 0 and any(_method_gathers(ctx, other, name, depth - 1) for other in facts.get("delegates", ()))


def gathers_through(ctx, facts: dict) -> Optional[str]:
    """How a function of another file (its summary ``facts``) combines results across ranks."""
    evals = facts.get("evals") or {}
    if evals.get("gathers"):
        return f"`{evals['gathers'][0].rsplit('.', 1)[-1]}`"
    for kind, target, _ in facts.get("calls", ()):
        if kind == "func" and not target.startswith(LIBRARY_PREFIXES) and project_calls_any(ctx, target, GATHER_CALLS, depth=1):
            return f"`{target.rsplit('.', 1)[-1]}`, which calls a collective"
    for cls, method in evals.get("objects", ())[:12]:
        if _method_gathers(ctx, cls, method, depth=2):
            return f"`{cls.rsplit('.', 1)[-1]}.{method}`, which calls a collective"
    return None


def _handed_position(call: cst.Call, arg: cst.Arg, iterated: List[list]) -> bool:
    """``arg`` of ``call`` lands on a parameter that the callee iterates."""
    if arg.star:
        return False
    if arg.keyword is not None:
        return any(name == arg.keyword.value for _, name in iterated)
    position = [a for a in call.args if a.keyword is None].index(arg)
    if any(a.star for a in call.args[: call.args.index(arg)]):
        return False
    return any(pos == position for pos, _ in iterated)


def handed_eval(ctx, index, loader, samplers) -> Optional[Tuple[str, str, cst.Call]]:
    """(how the loader is evaluated, how results are gathered, the call that hands it over) when
    the loader, over distributed samplers that do not shuffle and in no training loop of this
    file, is handed to a project function of another file that iterates it without training and
    gathers without de-duplicating; None otherwise."""
    if not all(possible_arg(ctx, BoundCall(s, DISTRIBUTED_SAMPLER_SIGNATURE), "shuffle").must_be(lambda v: v is False)
               for s in samplers):
        return None
    if any(trains(index, loop) is not None for loop in index.loops_of(loader)):
        return None
    for call in ctx.nodes(cst.Call):
        if not call.args or index.call_target(call) is not None:
            continue
        name = ctx.call_name(call)
        if not name or "." not in name or name.startswith(LIBRARY_PREFIXES):
            continue
        handed = [a for a in call.args if isinstance(a.value, (cst.Name, cst.Attribute, cst.Call))
                  and index.is_loader(a.value, loader)]
        if not handed:
            continue
        facts = ctx.view.function_facts(name)
        evals = (facts or {}).get("evals")
        if not evals or evals["dedups"] or not any(_handed_position(call, a, facts["iterates"]) for a in handed):
            continue
        if evals["trains"]:
            return None
        how = gathers_through(ctx, facts)
        if how is not None:
            return f"a loop of `{name.rsplit('.', 1)[-1]}` in another file", how, call
    return None


def eval_references(facts: List[dict]) -> List[str]:
    """What the evaluations among ``facts`` (a file's function facts) call into: the project
    functions and the classes of the objects they build, whose files must be summarised too
    for ``gathers_through`` to see their collectives."""
    out = set()
    for one in facts:
        evals = one.get("evals")
        if not evals or evals["trains"] or evals["dedups"]:
            continue
        out.update(cls for cls, _ in evals["objects"])
        out.update(t for kind, t, _ in one["calls"] if kind == "func" and not t.startswith(LIBRARY_PREFIXES))
    return sorted(out)


def gathered_eval_samplers(ctx):
    """(sampler, DSL704's message) for each torch ``DistributedSampler`` of a loader of this file
    that feeds an evaluation whose results are gathered (``eval_feeds``, or ``handed_eval``: a
    project function of another file); the message says it drops when ``drop_last`` can be True."""
    if not ctx.dataloader_calls():
        return
    index = loader_loops(ctx)
    for loader in index.loaders:
        samplers = index.sampler_calls(loader, (DISTRIBUTED_SAMPLER,))
        if not samplers or is_test_code(ctx, loader.call) or loader.framework_driven:
            continue
        feed = eval_feeds(ctx, index, loader, samplers) or handed_eval(ctx, index, loader, samplers)
        for sampler in samplers if feed is not None else ():
            drops = possible_arg(ctx, BoundCall(sampler, DISTRIBUTED_SAMPLER_SIGNATURE), "drop_last").can_be(
                lambda v: v is True)
            off = ("drops the last `len % world_size` samples (`drop_last=True`), so up to `world_size - 1` "
                   "samples are never evaluated" if drops is not None else
                   "pads every rank to `ceil(len / world_size)` samples by repeating the first ones, so up to "
                   "`world_size - 1` samples are evaluated and counted twice")
            yield sampler, (
                f"this `DistributedSampler` feeds an evaluation ({feed[0]}) whose results are gathered "
                f"({feed[1]}, line {line_of(ctx, feed[2])}): unless `len(dataset)` divides the world size it {off}; "
                "shard without padding (each rank takes `range(rank, len, world_size)`) or de-duplicate the "
                "gathered results by sample index")
