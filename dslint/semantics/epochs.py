"""Epochs of a loop over a DataLoader: what runs once per epoch, and the sampler's epoch.

Built on the loop index (``loops.py``), for the rules about state that must change
from one epoch to the next:

* ``epoch_blocks``: the code that runs once per epoch of a loader loop (the epoch
  loop's body and the helpers between it and the loader loop, each with the call
  stack that binds its parameters);
* ``may_shuffle``: a ``DistributedSampler(...)`` call may shuffle (its ``shuffle`` is not certainly
  false); ``distributed_shuffles``: it shuffles (a literal
  ``shuffle`` that is true, or the default);
* ``samplers_never_given_the_epoch``: the shuffling ``DistributedSampler`` of a loader (its
  ``sampler=``, or written into its ``**`` dict) iterated in training epoch loops that no
  ``set_epoch`` call can reach, and that
  is not handed to another module inside the epoch loop (which may call it); the loops
  include ``alternative_loops`` (the name is this loader on one branch, another loader of
  the file on the other) and ``self.m(loader)`` calls of a static method handed the
  instance as ``self`` whose method trains over it (``instance_params.py``); when the
  ``sampler`` is one of several ``DistributedSampler(...)`` calls (one per branch: Horovod,
  DDP), the loader call stands for them (``branch_samplers``) and none may get the epoch;
* ``samplers_behind_project_calls``: the same sampler when its loader is handed to
  project code whose result an epoch loop iterates (``wrapped = backend.distribute(loader)``),
  and no file of the project names ``set_epoch`` (``ctx.view.project_sets_epoch``); also a
  loader returned by a method (itself or as a value of a returned dict or list) that another
  file re-iterates through an object annotated with the class or a base (``loader_results``),
  and a sampler written into the ``**`` dict of the loader (``params["sampler"] = ...``);
* ``set_epoch_insertion``: where ``<sampler>.set_epoch(<epoch>)`` would go: the
  first statement of a ``for <epoch> in range(...)`` loop, with a name for the
  sampler (or the loader's ``.sampler``) bound before that loop.

As everywhere in the loop index, what cannot be told is unknown, and an unknown
receiver of ``set_epoch`` counts as reaching the sampler.
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.batches import evaluation_loop
from dslint.semantics.calls import UNKNOWN, BoundCall
from dslint.semantics.instance_params import instance_method_target, training_loops_over
from dslint.semantics.loader_results import entry_samplers, kept_for_epochs, method_result_iterated, wrapper_iterated
from dslint.semantics.classes import find_method, reached_methods
from dslint.semantics.distributed import trains
from dslint.semantics.loops import DISTRIBUTED_SAMPLER, DISTRIBUTED_SAMPLER_SIGNATURE, LoaderLoop, is_none, is_test_code, positional_args
from dslint.semantics.names import dotted_parts
from dslint.semantics.project import ENTRY_METHODS
from dslint.semantics.regions import is_lazy_guard, self_attr, self_name
from dslint.semantics.sampler_passes import constructed_classes, iter_call_loops, iterated_by, torch_sampler
from dslint.semantics.values import possible_arg
from dslint.semantics.walk import iter_subtree


def epoch_blocks(index, loop) -> List[Tuple[cst.CSTNode, Tuple[cst.Call, ...]]]:
    """(block, call stack) for the code that runs once per epoch of ``loop`` (which has an epoch loop)."""
    epoch = index.epoch(loop)
    return [(epoch.body, ())] + [(f.body, stack) for f, stack in index.epoch_functions(loop)]


def distributed_shuffles(ctx, sampler: cst.Call) -> bool:
    """The ``DistributedSampler(...)`` call certainly shuffles (``shuffle`` is not known to be false)."""
    shuffle = ctx.value(BoundCall(sampler, DISTRIBUTED_SAMPLER_SIGNATURE), "shuffle")
    return shuffle is not UNKNOWN and bool(shuffle)


def may_shuffle(ctx, sampler: cst.Call) -> bool:
    """The ``DistributedSampler(...)`` call may shuffle: ``shuffle`` is not certainly false. A value read
    from a configuration this file cannot see (a dict loaded from a file, an unresolved option) counts:
    the code offers shuffled epochs, and on every configuration that shuffles, each epoch repeats one
    order (``set_epoch`` costs nothing when it is false)."""
    found = possible_arg(ctx, BoundCall(sampler, DISTRIBUTED_SAMPLER_SIGNATURE), "shuffle")
    return not found.must_be(lambda v: not v)


def samplers_never_given_the_epoch(ctx, index, reported: Set[int]) -> Iterator[Tuple[object, cst.Call, list]]:
    """(loader, sampler, its training epoch loops) for each loader whose one ``DistributedSampler``
    shuffles and is never given the epoch; samplers whose id is in ``reported`` are passed over."""
    found = list(_shuffling_samplers(ctx, index, reported))
    found += [pair for pair in entry_samplers(ctx, index, reported) if may_shuffle(ctx, pair[1])]
    for loader, sampler in found:
        loops = [
            loop
            for loop in (index.loops_of(loader) + alternative_loops(ctx, index, loader) + _instance_calls(ctx, index, loader)
                         + iter_call_loops(ctx, index, loader))
            if index.epoch(loop) is not None and not evaluation_loop(ctx, index, loop)
        ]
        samplers = branch_samplers(ctx, index, loader, sampler)
        loops = [loop for loop in loops if not _made_per_epoch(index, loop, samplers)]  # one sampler per iteration
        if not loops:
            if _rebuilt_each_pass(ctx, index, loader, samplers) and not _set_epoch_called(ctx, index, loader, samplers):
                yield loader, sampler, []  # a fresh sampler each pass, over the same data: epoch 0 again (no fix)
            continue
        if _set_epoch_called(ctx, index, loader, samplers):
            continue
        if any(_escapes(ctx, index, loop, (*samplers, loader.call)) for loop in loops):
            continue
        yield loader, sampler, loops


def samplers_without_epoch(ctx, index) -> Iterator[Tuple[object, cst.Call, list]]:
    """``samplers_never_given_the_epoch`` then ``samplers_behind_project_calls``, each sampler once."""
    reported: Set[int] = set()
    for found in (samplers_never_given_the_epoch, samplers_behind_project_calls):
        for loader, sampler, loops in found(ctx, index, reported):
            reported.add(id(sampler))
            yield loader, sampler, loops


def samplers_behind_project_calls(ctx, index, reported: Set[int]) -> Iterator[Tuple[object, cst.Call, list]]:
    """(loader, sampler, training epoch loops) for a loader whose one shuffling ``DistributedSampler``
    is handed to a call of project code (a function of the project, or a method of an object a
    project function or class made) whose result a training loop re-run by an epoch loop iterates
    (``wrapped = backend.distribute(loader)``), or, inside an epoch loop, to a function of another
    module whose loops iterate that parameter (``train_one_epoch(model, loader)``, from its
    summary), or returned by a function whose result a loop of another file re-iterates inside
    an outer loop (``loader = build(cfg)``), in a project where no file names ``set_epoch``:
    then nothing can give the sampler its epoch. Third-party wrappers (accelerate's
    ``prepare``) and unknown receivers are not followed."""
    pending = [pair for pair in _shuffling_samplers(ctx, index, reported) if not is_test_code(ctx, pair[0].call)]
    entries = [pair for pair in entry_samplers(ctx, index, reported)
               if may_shuffle(ctx, pair[1]) and not is_test_code(ctx, pair[0].call)]
    if not pending and not entries:
        return
    found: dict = {}
    for loop in ctx.nodes(cst.For):
        for part in index.iter_parts(loop.iter):
            for call in _producers(index, part):
                for loader, sampler in pending:
                    samplers = branch_samplers(ctx, index, loader, sampler)
                    if not _handed(index, call, (loader.call, *samplers)):
                        continue
                    candidate = LoaderLoop(loop, part, loader, loader.call, ())
                    if index.epoch(candidate) is None or index.is_eval(candidate):
                        continue
                    if _made_per_epoch(index, candidate, samplers):
                        continue  # a new sampler every epoch
                    if not _project_code(ctx, index, call):
                        continue
                    found.setdefault(id(sampler), (loader, sampler, []))[2].append(candidate)
    for call in ctx.nodes(cst.Call):
        facts = None
        for loader, sampler in pending:
            if not _handed(index, call, (loader.call,)):
                continue
            if facts is None:
                name = ctx.call_name(call) if index.call_target(call) is None else None
                facts = (ctx.view.function_facts(name) if name else None) or {}
            if not _iterated_argument(index, call, loader.call, facts.get("iterates", ())):
                continue
            candidate = LoaderLoop(call, call, loader, loader.call, ())  # the loop is in the callee
            if index.epoch(candidate) is None or index.is_eval(candidate):
                continue
            if _made_per_epoch(index, candidate, branch_samplers(ctx, index, loader, sampler)):
                continue  # a new sampler every epoch
            found.setdefault(id(sampler), (loader, sampler, []))[2].append(candidate)
    for loader, sampler in pending:
        factory = _factory_of(ctx, index, loader)
        if factory is not None and not index.loops_of(loader) and ctx.view.epoch_iterated(ctx.qualname_of_def(factory)):
            found.setdefault(id(sampler), (loader, sampler, []))
    for loader, sampler in pending + entries:
        if id(sampler) not in found and ((not index.loops_of(loader) and method_result_iterated(ctx, index, loader))
                                         or wrapper_iterated(ctx, index, loader)):  # (its loop: the wrapper's)
            found.setdefault(id(sampler), (loader, sampler, []))
        elif id(sampler) not in found and kept_for_epochs(ctx, index, loader):
            found.setdefault(id(sampler), (loader, sampler, []))
    if not found or ctx.view.project_sets_epoch():
        return
    for loader, sampler, loops in found.values():
        objects = (*branch_samplers(ctx, index, loader, sampler), loader.call)
        if not any(_escapes(ctx, index, loop, objects, to_project=False) for loop in loops):
            yield loader, sampler, loops


def alternative_loops(ctx, index, loader) -> List[LoaderLoop]:
    """Loops over a name that is ``loader`` on one branch and another of the module's loaders on the
    other (``if distributed: loader = DataLoader(ds, sampler=s)`` / ``else: loader = DataLoader(ds)``):
    the loop iterates ``loader`` whenever its branch was taken. Every alternative must be a known
    ``DataLoader`` call (an unknown value keeps the loop out)."""
    return [loop for loop in _alternative_loops(ctx, index) if loop.loader is loader]


def _instance_calls(ctx, index, loader) -> List[LoaderLoop]:
    """Calls ``self.m(loader)`` from a static method handed the instance as ``self`` whose method
    ``m`` trains in a loop over the parameter bound to the loader (``instance_params``); the call
    stands for the loop, as for a callee of another module."""
    out = []
    for call in ctx.nodes(cst.Call):
        target = instance_method_target(ctx, index, call)
        if target is not None and training_loops_over(ctx, index, call, target, loader.call):
            out.append(LoaderLoop(call, call, loader, loader.call, ()))
    return out


def _alternative_loops(ctx, index) -> List[LoaderLoop]:
    def compute():
        out = []
        for loop in ctx.nodes(cst.For):
            for part in index.iter_parts(loop.iter):
                groups: dict = {}
                for value in index.values(part, wrappers=True):
                    groups.setdefault(tuple(id(c) for c in value.path), []).append(value)
                for values in groups.values():
                    nodes = {id(v.node): v for v in values}
                    loaders = [index.loader_of_call(v.node) if v.node is not None else None for v in nodes.values()]
                    if len(nodes) < 2 or any(x is None for x in loaders):
                        continue
                    for value, loader in zip(nodes.values(), loaders):
                        out.append(LoaderLoop(loop, part, loader, value.origin or loader.call, value.path))
        return out
    return ctx.memo(("epochs.alternative_loops",), compute)


def _shuffling_samplers(ctx, index, reported: Set[int]) -> Iterator[Tuple[object, cst.Call]]:
    """(loader, its one ``DistributedSampler`` call, which shuffles), outside framework hooks."""
    for loader in index.loaders:
        if loader.framework_driven:
            continue
        values = index.sampler_values(loader)
        if not values or any(v.node is None for v in values):
            continue
        samplers = []
        for value in values:
            node = value.node
            if isinstance(node, cst.Call) and DISTRIBUTED_SAMPLER in constructed_classes(ctx, node):
                if node not in samplers:
                    samplers.append(node)
            elif not is_none(node) and not torch_sampler(ctx, node):
                samplers = []
                break
        if len(samplers) == 1 and id(samplers[0]) not in reported and may_shuffle(ctx, samplers[0]):
            yield loader, samplers[0]
        elif len(samplers) > 1 and not any(id(s) in reported for s in (*samplers, loader.call)) and any(
                may_shuffle(ctx, s) for s in samplers):
            yield loader, loader.call  # one sampler per branch (Horovod, DDP): the loader stands for them


def branch_samplers(ctx, index, loader, anchor) -> Tuple[cst.Call, ...]:
    """The ``DistributedSampler`` calls ``anchor`` stands for: itself, or when it is the loader (its
    sampler is one of several ``DistributedSampler(...)`` calls, one per branch), each of them."""
    if anchor is not loader.call:
        return (anchor,)
    return tuple(dict.fromkeys(v.node for v in index.sampler_values(loader)
                               if isinstance(v.node, cst.Call) and DISTRIBUTED_SAMPLER in constructed_classes(ctx, v.node)))


def _rebuilt_each_pass(ctx, index, loader, samplers) -> bool:
    """The loader, and its sampler, are made anew in each pass of an outer loop of their function
    (``for epoch ...: loader = DataLoader(ds, sampler=DistributedSampler(ds))``) over a dataset
    bound before that loop and not from its variables (not ``for shard in shards: data =
    load(shard)``), and a loop there trains on it: each fresh sampler starts at epoch 0 with its
    seed, so every pass visits the data in one order. A seed that varies (``seed=epoch``) is fine."""
    func = ctx.enclosing_function(loader.call)
    outer = next((a for a in ctx.ancestors(loader.call) if isinstance(a, (cst.For, cst.While)) or a is func), None)
    dataset = loader.bound.expr("dataset")
    if outer is None or outer is func or dataset is None or not any(
            index.inside(loop.loop, outer.body) and trains(index, loop) is not None for loop in index.loops_of(loader)):
        return False
    if any(a.keyword is not None and a.keyword.value == "seed" and not isinstance(a.value, cst.Integer) for s in samplers for a in s.args):
        return False  # (a seed of its own each pass)
    bound = {n.value for n in iter_subtree(outer.target) if isinstance(n, cst.Name)} if isinstance(outer, cst.For) else set()
    for node in iter_subtree(outer.body, into_scopes=False):  # (what each pass binds anew)
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else \
            [node.target] if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)) else []
        bound.update(n.value for t in targets for n in iter_subtree(t) if isinstance(n, cst.Name))
    return not ({n.value for n in iter_subtree(dataset) if isinstance(n, cst.Name)} & bound)


def _made_per_epoch(index, loop, samplers) -> bool:
    return any(index.in_epoch(loop, s) is not None for s in samplers)


def _producers(index, expr) -> List[cst.Call]:
    """The calls whose result (or an element of it) ``expr`` may be: ``w = f(...)``, ``a, w = f(...)``."""
    if isinstance(expr, cst.Call):
        return [expr]
    if not isinstance(expr, cst.Name):
        return []
    scope, found = index.name_bindings(expr.value, expr)
    if not found:
        return []
    found = index.reaching(expr, scope, found) or found
    return [b.value for b in found if b.kind == "value" and isinstance(b.value, cst.Call)]


def _factory_of(ctx, index, loader) -> Optional[cst.FunctionDef]:
    """The module-level function that builds ``loader`` and returns it (not a method)."""
    func = loader.function
    if func is None or ctx.method_class(func) is not None or ctx.enclosing_function(func) is not None:
        return None
    returned = index.returns(func) or ()
    if any(v.node is loader.call for r in returned for v in index.values(r)):
        return func
    return None


def _iterated_argument(index, call: cst.Call, target, iterated) -> bool:
    """An argument of ``call`` that may be ``target`` binds a parameter the callee's loops iterate
    (``iterated``: [position, name] pairs from its summary)."""
    positions = {i for i, _ in iterated}
    names = {n for _, n in iterated}
    for i, arg in enumerate(call.args):
        if arg.star or not any(v.node is target for v in index.values(arg.value)):
            continue
        if (arg.keyword is not None and arg.keyword.value in names) or (arg.keyword is None and i in positions):
            if not any(a.star for a in call.args[:i]):
                return True
    return False


def _handed(index, call: cst.Call, objects) -> bool:
    """An argument of ``call`` may be one of ``objects`` (both arms of a conditional count)."""
    return any(v.node is o for arg in call.args for v in index.values(arg.value) for o in objects)


def _project_code(ctx, index, call: cst.Call) -> bool:
    """``call`` runs project code: a function of this module or of the project, or a method of an
    object that a project function or class made."""
    if index.call_target(call) is not None or _made_by_project(ctx, call):
        return True
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    values = index.values(func.value)
    return bool(values) and all(isinstance(v.node, cst.Call) and (
        index.call_target(v.node) is not None or _made_by_project(ctx, v.node)) for v in values)


def _made_by_project(ctx, call: cst.Call) -> bool:
    name = ctx.call_name(call)
    if not name:
        return False
    return ctx.view.in_project(name)


def _set_epoch_called(ctx, index, loader, samplers) -> bool:
    """Some ``X.set_epoch(...)`` in the module may reach one of these samplers (unknown receivers count)."""
    for call in ctx.nodes(cst.Call):
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "set_epoch":
            continue
        receiver = func.value
        if isinstance(receiver, cst.Attribute) and receiver.attr.value in ("sampler", "batch_sampler"):
            nodes = [v.node for v in index.values(receiver.value)]
            if any(n is None or n is loader.call or index.loader_of_call(n) is None for n in nodes):
                return True
            continue
        for value in index.values(receiver):
            node = value.node
            if node is None or node is loader.call or any(node is s for s in samplers):
                return True
            if is_none(node) or index.loader_of_call(node) is not None:
                continue
            if isinstance(node, cst.Call):
                name = ctx.call_name(node) or ""
                if name.startswith("torch.utils.data.") and name.endswith("Sampler"):
                    continue
                if ctx.dataset_kind(node) is not None:
                    continue
            return True
    return False


def _escapes(ctx, index, loop, objects, to_project: bool = True) -> bool:
    """Inside the epoch loop, the loader or sampler is handed to code of another module (with
    ``to_project`` False: to code outside the project)."""
    for block, stack in epoch_blocks(index, loop):
        for node in index.body_nodes(block):
            if not isinstance(node, cst.Call) or index.wrapper_kind(node) or index.call_target(node):
                continue
            if instance_method_target(ctx, index, node) is not None:
                continue  # a method of this file's class: its `set_epoch` calls are in this module
            if (ctx.call_name(node) or "").startswith(("builtins.", "torch.utils.data.")):
                continue  # neither Python's builtins nor torch's data API call `set_epoch`
            if not to_project and _project_code(ctx, index, node):
                continue
            for arg in node.args:
                if any(v.node is o for v in index.values(arg.value, stack=stack) for o in objects):
                    return True
    return False


def set_epoch_insertion(ctx, index, loader, sampler, loops) -> Optional[Tuple[cst.CSTNode, str, str]]:
    """(first statement of the epoch loop, ``<sampler>.set_epoch(<epoch>)``, the loop body's indentation),
    when the loader's sampler is certainly ``sampler`` and an epoch loop counts epochs with a name."""
    if not all(v.node is sampler for v in index.sampler_values(loader)):
        return None
    if isinstance(sampler, cst.Call) and constructed_classes(ctx, sampler) != {DISTRIBUTED_SAMPLER}:
        return None  # a class chosen at run time: the other one may have no ``set_epoch``
    alternatives = {id(loop) for loop in _alternative_loops(ctx, index)}
    for loop in loops:
        if id(loop) in alternatives:
            continue  # on the other branch the sampler's name is unbound
        if isinstance(loop.loop, cst.Call) and iterated_by(ctx, loop.loop) is not None:
            continue  # ``iter(loader)`` may be rebuilt inside a step loop: its loop need not count epochs
        epoch = index.epoch(loop)
        if not isinstance(epoch, cst.For) or not isinstance(epoch.target, cst.Name) or epoch.target.value == "_":
            continue
        if not _counts(ctx, index, epoch.iter):
            continue
        body = epoch.body
        if not isinstance(body, cst.IndentedBlock) or not body.body:
            continue
        first = body.body[0]
        receiver = _receiver(index, loader, sampler, loop, epoch, first)
        if receiver is None:
            continue
        return first, f"{receiver}.set_epoch({epoch.target.value})", _indentation(ctx, body)
    return None


def _counts(ctx, index, expr) -> bool:
    """``range(...)``, ``trange(...)`` or ``tqdm(range(...))``: the loop variable counts epochs."""
    if not isinstance(expr, cst.Call):
        return False
    name = ctx.call_name(expr) or ""
    if name == "builtins.range" or (name.startswith("tqdm") and name.endswith(".trange")):
        return True
    args = positional_args(expr)
    return index.wrapper_kind(expr) == "single" and bool(args) and _counts(ctx, index, args[0])


def _receiver(index, loader, sampler, loop, epoch, first) -> Optional[str]:
    """A name for the sampler (or the loader's ``.sampler``) that is bound before the epoch loop."""
    candidates = [(loader.bound.expr("sampler"), sampler, "")]
    loader_exprs = [loop.iterable] if not loop.epoch_calls else [a.value for a in loop.epoch_calls[-1].args]
    candidates.extend((expr, loader.call, ".sampler") for expr in loader_exprs)
    for expr, target, suffix in candidates:
        parts = dotted_parts(expr) if expr is not None else None
        if not parts or len(parts) > 2:
            continue
        found = index.values_at(parts, first)
        if found is None:
            continue
        bindings, values = found
        if any(b.kind not in ("value", "param") or index.inside(b.node, epoch) for b in bindings):
            continue
        if values and all(v.node is target for v in values):
            return ".".join(parts) + suffix
    return None


def _indentation(ctx, block: cst.IndentedBlock) -> str:
    parts = []
    for node in (block, *ctx.ancestors(block)):
        if isinstance(node, cst.IndentedBlock):
            parts.append(node.indent if node.indent is not None else ctx.module.default_indent)
    return "".join(reversed(parts))


def persistent_workers(ctx, index, loop) -> bool:
    """The loop's loader certainly keeps its workers: ``persistent_workers`` is the literal ``True``,
    every value it takes on the loader's path is ``True`` (a factory's argument or parameter
    default, bound at the factory call that made this loader), a ``**kwargs`` entry is certainly
    ``True``, or the default of a command-line option is ``True`` (the default configuration)."""
    bound = loop.loader.bound
    literal = ctx.value(bound, "persistent_workers")
    if literal is not UNKNOWN:
        return literal is True
    expr = bound.expr("persistent_workers")
    if expr is not None:
        target = index.call_target(loop.origin) if isinstance(loop.origin, cst.Call) else None
        stack = (loop.origin,) if target is not None and target[0] is loop.loader.function else ()
        nodes = index.value_nodes(expr, stack=stack)
        if nodes:
            return all(isinstance(n, cst.Name) and n.value == "True" for n in nodes)
    found = possible_arg(ctx, bound, "persistent_workers")
    return found.must_be(lambda v: v is True) or any(
        v.value is True and v.origin.startswith("the default of `") for v in found.values)


def per_sample_state_set_by(ctx, cls: cst.ClassDef, method_name: str) -> List[str]:
    """The attributes the method ``method_name`` of this file's dataset class ``cls`` assigns on
    ``self`` (directly or through ``self.m()``, outside a lazy ``if self.x is None:``) that the
    per-sample methods (``__getitem__``/``__iter__``... and what they call) read: the state a
    call of it changes for the next samples."""
    start = find_method(ctx, cls, method_name)
    if start is None or method_name in ENTRY_METHODS:
        return []
    assigned = set()
    for func in reached_methods(ctx, cls, start):
        selfp = self_name(func)
        for node in iter_subtree(func.body, into_scopes=False):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else (
                [node.target] if isinstance(node, (cst.AnnAssign, cst.AugAssign)) else [])
            for target in targets:
                name = self_attr(target, selfp)
                if name and not any(isinstance(a, cst.If) and is_lazy_guard(a, selfp) for a in ctx.ancestors(node)):
                    assigned.add(name)
    read = set()
    for entry in ENTRY_METHODS:
        method = find_method(ctx, cls, entry)
        for func in reached_methods(ctx, cls, method) if method is not None else ():
            selfp = self_name(func)
            read.update(n for n in (self_attr(x, selfp) for x in iter_subtree(func.body, into_scopes=False)) if n)
    return sorted(assigned & read)
