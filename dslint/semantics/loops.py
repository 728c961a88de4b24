"""Loops over a DataLoader, and the epoch loop around them.

The loop-level rules (DSL505-508, DSL510, DSL511) ask the same questions about
one file, answered here once and cached on the context (``loader_loops(ctx)``):

* **which DataLoader a loop iterates**: ``for batch in loader:`` (also through
  ``enumerate``, ``tqdm``, ``zip``, ``iter``, ``islice``, and a name bound to such
  a wrapper), where ``loader`` is a ``DataLoader(...)`` call (or the construction of a
  third-party loader handing torch's arguments and sampler through, ``library_loaders.py``:
  PyG's, MONAI's) bound to a name or a ``self.attr``, returned by a function or method of the module, or passed as an
  argument to the function that holds the loop (every call site of that function
  in the module is followed, each giving its own answer);
* **the epoch loop** around that loop: an enclosing ``for``/``while`` in the same
  function, or around a call of the helper function that holds the loop
  (``train_one_epoch(model, loader)`` inside ``for epoch in ...``), through up to
  three levels of same-module calls; it re-iterates the *same* loader, so a loop
  that builds a new loader on every iteration (``for f in files: loader =
  DataLoader(...)``) is no epoch loop;
* **what a value can be** (``values``, from ``value_flow.py``, on top of
  ``module_calls.py`` and ``scopes.py``): the expressions an expression may
  evaluate to; anything else is unknown (``Value.node is None``);
* the **sampler** passed to a loader, the **calls made in a loop** (the body and
  the same-module functions it calls), and whether a loop is **evaluation** code
  (under ``torch.no_grad()``/``torch.inference_mode()``).

Everything stays inside the module: a value that crosses into another file, a
call to a function defined elsewhere, or a name bound by ``for``/``with`` to
something other than a wrapper is unknown, and rules stay silent on unknowns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import libcst as cst

from dslint.semantics.calls import BoundCall, Signature
from dslint.semantics.grad_modes import NO_GRAD
from dslint.semantics.call_costs import costly_call, costly_read
from dslint.semantics.indexing import TENSOR_FACTORIES
from dslint.semantics.kwargs_dicts import closed_entries
from dslint.semantics.library_loaders import sampled_loader_bounds
from dslint.semantics.module_calls import MAX_CALLERS, positional_args
from dslint.semantics.optional_parts import unset_attributes
from dslint.semantics.regions import self_name
from dslint.semantics.scopes import COMPREHENSIONS, is_none, names_used
from dslint.semantics.self_checks import is_self_check
from dslint.semantics.value_flow import Value, ValueFlow
from dslint.semantics.vision_memory import cheap_vision_dataset
from dslint.semantics.walk import iter_subtree
from dslint.semantics.test_paths import is_test_path

LOOP_TYPES = (cst.For, cst.While)
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)

MAX_HOPS = 3  #: helper levels between a loop and its epoch loop

DISTRIBUTED_SAMPLER = "torch.utils.data.DistributedSampler"
RANDOM_SAMPLER = "torch.utils.data.RandomSampler"
SEQUENTIAL_SAMPLER = "torch.utils.data.SequentialSampler"
WEIGHTED_SAMPLER = "torch.utils.data.WeightedRandomSampler"
RANDOM_SAMPLERS = frozenset({RANDOM_SAMPLER, DISTRIBUTED_SAMPLER, WEIGHTED_SAMPLER})
#: LightningModule / LightningDataModule hooks: Lightning iterates these loaders
#: itself (and calls ``set_epoch`` on their samplers).
FRAMEWORK_HOOKS = frozenset({"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"})
EVALUATION_HOOKS = frozenset({"val_dataloader", "test_dataloader", "predict_dataloader"})

_IN_MEMORY_CALLS = frozenset({"torch.utils.data.TensorDataset", "builtins.range", "builtins.list", "builtins.tuple", "builtins.sorted"})

DISTRIBUTED_SAMPLER_SIGNATURE = Signature(
    ("dataset", "num_replicas", "rank", "shuffle", "seed", "drop_last"),
    (),
    {"num_replicas": None, "rank": None, "shuffle": True, "seed": 0, "drop_last": False},
)
RANDOM_SAMPLER_SIGNATURE = Signature(("data_source", "replacement", "num_samples", "generator"), (), {"replacement": False, "num_samples": None})
WEIGHTED_SAMPLER_SIGNATURE = Signature(("weights", "num_samples", "replacement", "generator"), (), {"replacement": True})


# --------------------------------------------------------------------------- records


@dataclass(eq=False)
class Loader:
    """A ``DataLoader(...)`` call of the module."""

    call: cst.Call
    bound: BoundCall
    #: the method (``train_dataloader``...) or function whose body holds the call
    function: Optional[cst.FunctionDef] = None

    @property
    def framework_driven(self) -> bool:
        """Built in a Lightning hook (``*_dataloader`` method): Lightning iterates it."""
        return self.function is not None and self.function.name.value in FRAMEWORK_HOOKS


@dataclass(frozen=True)
class LoaderRef:
    loader: Loader
    origin: cst.CSTNode
    path: Tuple[cst.Call, ...]


@dataclass(eq=False)
class LoaderLoop:
    """``for ... in <loader>``: one loop over one loader (along one call path)."""

    loop: cst.For
    #: the expression naming the loader in the loop header (after unwrapping
    #: ``enumerate``/``tqdm``/``zip``)
    iterable: cst.BaseExpression
    loader: Loader
    #: where the loader object is created, as seen from this loop
    origin: cst.CSTNode
    #: call sites crossed outward to bind the loader (a parameter of a helper)
    path: Tuple[cst.Call, ...]
    #: the enclosing loop that re-runs this one (None: iterated once)
    epoch_loop: Optional[cst.CSTNode] = None
    #: call sites from the function holding ``loop`` up to the epoch loop's function
    epoch_calls: Tuple[cst.Call, ...] = ()
    _epoch_done: bool = field(default=False, repr=False)


# --------------------------------------------------------------------------- helpers


def is_test_code(ctx, node: cst.CSTNode) -> bool:
    """Test code: a ``tests``/``test`` directory, ``test_*.py``/``*_test.py``/``conftest.py``, a ``test_*``
    function, or a dataset module's own check (its ``__main__`` block, ``self_checks``)."""
    if is_test_path(ctx.path):
        return True
    func = ctx.enclosing_function(node)
    while func is not None:
        if func.name.value.startswith("test_"):
            return True
        func = ctx.enclosing_function(func)
    return is_self_check(ctx, node)


# --------------------------------------------------------------------------- the index


class LoopIndex(ValueFlow):
    """The loop facts of one file; build through ``loader_loops(ctx)``."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.loaders: List[Loader] = []
        self._by_call: Dict[int, Loader] = {}
        for bound in (*ctx.dataloader_calls(), *sampled_loader_bounds(ctx)):
            loader = Loader(bound.call, bound, ctx.enclosing_function(bound.call))
            self.loaders.append(loader)
            self._by_call[id(bound.call)] = loader
        self._loops: Optional[List[LoaderLoop]] = None

    # ------------------------------------------------------------ loaders
    def loader_of_call(self, call: cst.CSTNode) -> Optional[Loader]:
        return self._by_call.get(id(call))

    @property
    def loops(self) -> List[LoaderLoop]:
        """Every ``for`` loop over a known loader, one entry per (loop, loader, path)."""
        if self._loops is None:
            self._loops = []
            if self.loaders:
                for loop in self.ctx.nodes(cst.For):
                    for part in self.iter_parts(loop.iter):
                        for ref in self.resolve_loader(part, wrappers=True):
                            self._loops.append(LoaderLoop(loop, part, ref.loader, ref.origin, ref.path))
        return self._loops

    def loops_of(self, loader: Loader) -> List[LoaderLoop]:
        return [loop for loop in self.loops if loop.loader is loader]

    def possible_loops(self, loader: Loader) -> List[LoaderLoop]:
        """``for`` loops whose iterable may be ``loader`` among other values (a name each arm of an
        ``if`` binds to its own loader): not loops *of* it (``loops_of``), but uses of it."""
        out = []
        for loop in self.ctx.nodes(cst.For):
            for part in self.iter_parts(loop.iter):
                values = self.values(part, wrappers=True)
                if len({id(v.node) for v in values}) > 1 and any(v.node is loader.call for v in values):
                    out.append(LoaderLoop(loop, part, loader, loader.call, ()))
        return out

    def resolve_loader(self, expr: cst.BaseExpression, *, wrappers: bool = False, stack: Tuple[cst.Call, ...] = ()) -> List[LoaderRef]:
        """The loaders ``expr`` is, one per call path; a path with alternatives is unknown."""
        if not self.loaders:
            return []
        groups: Dict[Tuple[int, ...], List[Value]] = {}
        for value in self.values(expr, stack=stack, wrappers=wrappers):
            groups.setdefault(tuple(id(c) for c in value.path), []).append(value)
        out = []
        for values in groups.values():
            nodes = {id(v.node) for v in values}
            loader = self.loader_of_call(values[0].node) if values[0].node is not None else None
            if len(nodes) == 1 and loader is not None:
                out.append(LoaderRef(loader, values[0].origin or loader.call, values[0].path))
        return out

    def is_loader(self, expr: cst.BaseExpression, loader: Loader, stack: Tuple[cst.Call, ...] = ()) -> bool:
        """Is ``expr`` certainly ``loader`` (on every path)?"""
        return self.value_nodes(expr, stack=stack) == [loader.call]

    def training_hook_loaders(self) -> List[Loader]:
        """Loaders returned by a ``train_dataloader`` method (Lightning's training hook)."""
        return self.hook_loaders(("train_dataloader",))

    def evaluation_hook_loaders(self) -> List[Loader]:
        """Loaders returned by ``val_dataloader``/``test_dataloader``/``predict_dataloader`` methods."""
        return self.hook_loaders(EVALUATION_HOOKS)

    def hook_loaders(self, hooks: Iterable[str]) -> List[Loader]:
        """Loaders returned by a method named one of ``hooks``."""
        hooks = frozenset(hooks)
        out = []
        for func in self.ctx.nodes(cst.FunctionDef):
            if func.name.value not in hooks or self.ctx.method_class(func) is None:
                continue
            for ret in self.returns(func) or ():
                for ref in self.resolve_loader(ret):
                    if ref.loader not in out:
                        out.append(ref.loader)
        return out

    # ------------------------------------------------------------ samplers
    def sampler_values(self, loader: Loader) -> List[Value]:
        """What the loader's ``sampler`` argument may be ([] when absent; unknown under ``**kwargs``)."""
        expr = loader.bound.expr("sampler")
        if expr is None:  # (a ``**`` dict this file builds may give it: ``dict(..., sampler=sampler)``)
            given, closed = closed_entries(self.ctx, loader.bound.call, "sampler") if loader.bound.is_open else ([], True)
            return [*(v for e in given for v in self.values(e)), *(() if closed else (Value(None),))]
        return list(self.values(expr))

    def sampler_calls(self, loader: Loader, qualified: Iterable[str]) -> List[cst.Call]:
        """The sampler constructor calls (of the given classes) the loader's sampler may be."""
        wanted = set(qualified)
        out = []
        for value in self.sampler_values(loader):
            node = value.node
            if isinstance(node, cst.Call) and self.ctx.call_name(node) in wanted and node not in out:
                out.append(node)
        return out

    # ------------------------------------------------------------ epoch loops
    def epoch(self, loop: LoaderLoop) -> Optional[cst.CSTNode]:
        """The loop that re-runs ``loop`` (computed on first use)."""
        if not loop._epoch_done:
            loop._epoch_done = True
            found = self._find_loop(loop.loop, loop.path, 0, frozenset(), unconditional=False)
            if found is not None:
                loop.epoch_loop, loop.epoch_calls = found
                if self.in_epoch(loop, loop.origin) is not None:
                    # A new loader every iteration (``for file in files: loader = DataLoader(...)``):
                    # each loader object is iterated once, so this is no epoch loop for it.
                    loop.epoch_loop, loop.epoch_calls = None, ()
        return loop.epoch_loop

    def epoch_functions(self, loop: LoaderLoop) -> List[Tuple[cst.FunctionDef, Tuple[cst.Call, ...]]]:
        """Helper functions that run once per epoch, with the call stack that binds their parameters.

        These are the function holding the loader loop and the functions between
        it and the epoch loop (not the epoch loop's own function).
        """
        if self.epoch(loop) is None or not loop.epoch_calls:
            return []
        out = []
        positions = [loop.loop, *loop.epoch_calls[:-1]]
        for i, node in enumerate(positions):
            func = self.ctx.enclosing_function(node)
            if func is not None:
                out.append((func, tuple(reversed(loop.epoch_calls[i:]))))
        return out

    def in_epoch(self, loop: LoaderLoop, node: cst.CSTNode) -> Optional[Tuple[cst.Call, ...]]:
        """If ``node`` runs once per epoch of ``loop`` or more often: the call stack binding its parameters."""
        epoch_loop = self.epoch(loop)
        if epoch_loop is None:
            return None
        if self.inside(node, epoch_loop.body):
            return ()
        func = self.ctx.enclosing_function(node)
        for helper, stack in self.epoch_functions(loop):
            if func is helper:
                return stack
        return None

    def step_loop(self, node: cst.CSTNode, max_hops: int = 2) -> Optional[Tuple[cst.CSTNode, Tuple[cst.Call, ...]]]:
        """The loop that runs ``node`` on every one of its iterations (no ``if``/``except`` between)."""
        return self._find_loop(node, (), 0, frozenset(), unconditional=True, max_hops=max_hops)

    def _find_loop(self, node, path, depth, seen, *, unconditional: bool, max_hops: int = MAX_HOPS):
        loop, blocked = self.enclosing_loop(node, unconditional=unconditional)
        if loop is not None:
            return loop, ()
        if blocked:
            return None
        func = self.ctx.enclosing_function(node, through_lambdas=False)
        if func is None or depth >= max_hops:
            return None
        target = self.call_target(path[0]) if path else None
        if target is not None and target[0] is func:
            candidates, rest = [path[0]], path[1:]
        else:
            candidates, rest = self.callers(func), ()
        for call in candidates[:MAX_CALLERS]:
            if id(call) in seen:
                continue
            found = self._find_loop(call, rest, depth + 1, seen | {id(call)}, unconditional=unconditional, max_hops=max_hops)
            if found is not None:
                return found[0], (call, *found[1])
        return None

    def enclosing_loop(self, node: cst.CSTNode, *, unconditional: bool = False):
        """(the nearest loop whose body holds ``node`` in the same function, blocked by a condition)."""
        previous = node
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, LOOP_TYPES):
                if previous is ancestor.body:
                    return ancestor, False
                if unconditional:
                    return None, True  # in the header or the else branch
            elif isinstance(ancestor, _SCOPES):
                return None, False
            elif unconditional and isinstance(ancestor, (cst.If, cst.IfExp, cst.ExceptHandler, cst.Else, cst.BooleanOperation)):
                if not (isinstance(ancestor, (cst.If, cst.IfExp)) and previous is ancestor.test):
                    return None, True
            elif unconditional and isinstance(ancestor, COMPREHENSIONS):
                return None, True
            previous = ancestor
        return None, False

    def inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        """``node`` is ``container`` or below it, without entering another function."""
        if node is container:
            return True
        for ancestor in self.ctx.ancestors(node):
            if ancestor is container:
                return True
            if isinstance(ancestor, _SCOPES):
                return False
        return False

    # ------------------------------------------------------------ loop contents
    def body_nodes(self, block: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Nodes of a block, not entering nested functions, lambdas or classes."""
        for node in iter_subtree(block, into_scopes=False):
            if node is not block and isinstance(node, _SCOPES):
                continue
            yield node

    def loop_calls(self, loop: cst.CSTNode, depth: int = 2, *, unconditional: bool = False) -> List[cst.Call]:
        """Calls in the loop body and in the same-module functions it calls (``depth`` levels).

        With ``unconditional``, only calls that run on every iteration: none under
        an ``if``/``except``/conditional expression (so ``if mode == "train":
        loss.backward()`` in a helper shared by training and validation does not
        make the validation loop a training loop).
        """
        out: List[cst.Call] = []
        seen_funcs = set()
        work = [(loop.body, 0)]
        while work:
            block, level = work.pop()
            for node in self.body_nodes(block):
                if not isinstance(node, cst.Call):
                    continue
                if unconditional and self.conditional_within(node, block):
                    continue
                out.append(node)
                if level < depth:
                    target = self.call_target(node)
                    if target is not None and id(target[0]) not in seen_funcs:
                        seen_funcs.add(id(target[0]))
                        work.append((target[0].body, level + 1))
        return out

    def conditional_within(self, node: cst.CSTNode, block: cst.CSTNode) -> bool:
        """Between ``block`` and ``node`` there is an ``if``, ``except``, ``else`` or a short-circuit."""
        previous = node
        for ancestor in self.ctx.ancestors(node):
            if ancestor is block:
                return False
            if isinstance(ancestor, (cst.If, cst.IfExp)) and previous is not ancestor.test:
                return True
            if isinstance(ancestor, (cst.ExceptHandler, cst.Else, cst.BooleanOperation)):
                return True
            previous = ancestor
        return False

    def is_test_code(self, node: cst.CSTNode) -> bool:
        """Test code (``is_test_code``)."""
        return is_test_code(self.ctx, node)

    def in_memory(self, expr: Optional[cst.BaseExpression]) -> bool:
        """The dataset is data already in memory, cheap to index: a ``TensorDataset``, a tensor,
        a ``range``/list/tuple, or a class of this file whose ``__getitem__`` only indexes (calls nothing)."""
        nodes = self.value_nodes(expr) if expr is not None else None
        if not nodes:
            return False
        return all(self._in_memory_node(node) for node in nodes)

    def _in_memory_node(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.List, cst.Tuple, cst.ListComp)):
            return True
        if not isinstance(node, cst.Call):
            return False
        name = self.ctx.call_name(node) or ""
        if name in _IN_MEMORY_CALLS or (name.startswith("torch.") and name.rsplit(".", 1)[-1] in TENSOR_FACTORIES):
            return True
        if name == "torch.utils.data.Subset":
            args = positional_args(node)
            return bool(args) and self.in_memory(args[0])
        if cheap_vision_dataset(self.ctx, node, self.value_nodes):
            return True
        if isinstance(node.func, cst.Name):
            _, found = self.name_bindings(node.func.value, node)
            if found and len(found) == 1 and isinstance(found[0].node, cst.ClassDef):
                getitem = self.find_method(found[0].node, "__getitem__")
                if getitem is None:
                    return False
                local = any(isinstance(a, cst.FunctionDef) for a in self.ctx.ancestors(found[0].node))
                if local or getattr(self.ctx.view, "indexes_only", None) is None:  # a local class, no index: its body
                    nodes = list(self.body_nodes(getitem.body))
                    return not any(costly_call(n, self.ctx.call_name(n), self_name(getitem)) if isinstance(n, cst.Call)
                                   else costly_read(n) for n in nodes)
                init = self.find_method(found[0].node, "__init__")
                return self._in_memory_elsewhere(name, unset_attributes(self.ctx, init, node) if init is not None else frozenset())
            elif found and any(b.kind != "other" or not isinstance(b.node, (cst.Import, cst.ImportFrom)) for b in found):
                return False  # bound in this file to something else than an import
        return self._in_memory_elsewhere(name)

    def _in_memory_elsewhere(self, qualified: str, unset: frozenset = frozenset()) -> bool:
        """A project class (of this file or another) whose ``__getitem__`` only indexes data in
        memory (``indexing.indexes_only``, through the project index; without it, not known),
        apart from what runs under ``if self.X:`` for an ``X`` the construction leaves unset
        (``optional_parts``: a class of this file built without its transform)."""
        indexes_only = getattr(self.ctx.view, "indexes_only", None)
        if not qualified or "." not in qualified or indexes_only is None:
            return False
        return indexes_only(qualified, "__getitem__", sorted(unset)) if unset else indexes_only(qualified, "__getitem__")

    def is_eval(self, loop: LoaderLoop) -> bool:
        """The loop runs with gradients off (``torch.no_grad``/``inference_mode``): evaluation."""
        positions = [loop.loop, *loop.epoch_calls]
        for node in positions:
            for ancestor in self.ctx.ancestors(node):
                if isinstance(ancestor, cst.With):
                    for item in ancestor.items:
                        if self.is_no_grad(item.item):
                            return True
                if isinstance(ancestor, cst.FunctionDef):
                    if any(self.is_no_grad(d.decorator) for d in ancestor.decorators):
                        return True
                    break
        return False

    def is_no_grad(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            expr = expr.func
        return self.ctx.qualname(expr) in NO_GRAD if isinstance(expr, (cst.Name, cst.Attribute)) else False

    def iter_parts(self, expr: cst.BaseExpression) -> List[cst.BaseExpression]:
        """The iterables a loop header iterates: ``enumerate(tqdm(a))`` -> [a]; ``zip(a, b)`` -> [a, b]."""
        kind = self.wrapper_kind(expr)
        args = positional_args(expr) if kind else []
        if kind == "single" and args:
            return self.iter_parts(args[0])
        if kind == "zip" and args:
            out = []
            for arg in args:
                out.extend(self.iter_parts(arg))
            return out
        return [expr]


def loader_loops(ctx) -> LoopIndex:
    """The file's ``LoopIndex``, computed once and kept on the context."""
    return ctx.memo(("loops.index",), lambda: LoopIndex(ctx))


__all__ = [
    "DISTRIBUTED_SAMPLER",
    "DISTRIBUTED_SAMPLER_SIGNATURE",
    "FRAMEWORK_HOOKS",
    "RANDOM_SAMPLERS",
    "RANDOM_SAMPLER_SIGNATURE",
    "WEIGHTED_SAMPLER_SIGNATURE",
    "Loader",
    "LoaderLoop",
    "LoaderRef",
    "LoopIndex",
    "Value",
    "is_none",
    "loader_loops",
    "names_used",
    "positional_args",
]
