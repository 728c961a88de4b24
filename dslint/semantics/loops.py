"""Loops over a DataLoader, and the epoch loop around them.

The loop-level rules (DSL505-508, DSL510, DSL511) ask the same questions about
one file, answered here once and cached on the context (``loader_loops(ctx)``):

* **which DataLoader a loop iterates**: ``for batch in loader:`` (also through
  ``enumerate``, ``tqdm``, ``zip``, ``iter``, ``islice``, and a name bound to such
  a wrapper), where ``loader`` is a ``DataLoader(...)`` call bound to a name or a
  ``self.attr``, returned by a function or method of the module, or passed as an
  argument to the function that holds the loop (every call site of that function
  in the module is followed, each giving its own answer);
* **the epoch loop** around that loop: an enclosing ``for``/``while`` in the same
  function, or around a call of the helper function that holds the loop
  (``train_one_epoch(model, loader)`` inside ``for epoch in ...``), through up to
  three levels of same-module calls; it re-iterates the *same* loader, so a loop
  that builds a new loader on every iteration (``for f in files: loader =
  DataLoader(...)``) is no epoch loop;
* **what a value can be** (``values``): the expressions an expression may
  evaluate to, following single and multiple assignments, tuple unpacking,
  ``self.attr`` assignments anywhere in the class family, parameters (bound at
  the call sites), ``return`` values of same-module functions, and both arms of
  a conditional expression; anything else is unknown (``Value.node is None``);
* the **sampler** passed to a loader, the **calls made in a loop** (the body and
  the same-module functions it calls), and whether a loop is **evaluation** code
  (under ``torch.no_grad()``/``torch.inference_mode()``).

Everything stays inside the module: a value that crosses into another file, a
call to a function defined elsewhere, or a name bound by ``for``/``with`` to
something other than a wrapper is unknown, and rules stay silent on unknowns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import libcst as cst

from dslint.semantics.calls import BoundCall, Signature
from dslint.semantics.names import dotted_parts
from dslint.semantics.regions import self_name
from dslint.semantics.walk import iter_subtree

LOOP_TYPES = (cst.For, cst.While)
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)

MAX_DEPTH = 10  #: resolution steps for one value
MAX_OUTWARD = 3  #: parameters followed out to their call sites, in one value
MAX_CALLERS = 16  #: call sites followed for one parameter
MAX_HOPS = 3  #: helper levels between a loop and its epoch loop

DISTRIBUTED_SAMPLER = "torch.utils.data.DistributedSampler"
RANDOM_SAMPLER = "torch.utils.data.RandomSampler"
WEIGHTED_SAMPLER = "torch.utils.data.WeightedRandomSampler"
RANDOM_SAMPLERS = frozenset({RANDOM_SAMPLER, DISTRIBUTED_SAMPLER, WEIGHTED_SAMPLER})
#: LightningModule / LightningDataModule hooks: Lightning iterates these loaders
#: itself (and calls ``set_epoch`` on their samplers).
FRAMEWORK_HOOKS = frozenset({"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"})
EVALUATION_HOOKS = frozenset({"val_dataloader", "test_dataloader", "predict_dataloader"})

_SINGLE_WRAPPERS = frozenset({"builtins.enumerate", "builtins.iter", "itertools.islice", "rich.progress.track"})
_IN_MEMORY_CALLS = frozenset({"torch.utils.data.TensorDataset", "builtins.range", "builtins.list", "builtins.tuple", "builtins.sorted"})
_TENSOR_FACTORIES = frozenset(
    {"tensor", "as_tensor", "from_numpy", "arange", "randn", "rand", "randint", "zeros", "ones", "randperm", "stack", "cat"}
)
_LOADER_ATTRS = frozenset({"dataset", "sampler", "batch_sampler", "collate_fn", "worker_init_fn"})
_NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})

DISTRIBUTED_SAMPLER_SIGNATURE = Signature(
    ("dataset", "num_replicas", "rank", "shuffle", "seed", "drop_last"),
    (),
    {"num_replicas": None, "rank": None, "shuffle": True, "seed": 0, "drop_last": False},
)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, eq=False)
class Binding:
    """One way a name is bound in a scope."""

    kind: str  #: "value", "param", "def", "global" or "other"
    node: cst.CSTNode  #: the statement, parameter or definition
    value: Optional[cst.BaseExpression] = None
    index: Optional[int] = None  #: position in a tuple-unpacking target


@dataclass(frozen=True)
class Value:
    """One thing an expression may evaluate to.

    ``node`` is the terminal expression (a call such as ``DataLoader(...)``, a
    lambda, a literal, a ``def``/``class``), or None when unknown. ``path`` lists
    the call sites crossed outward to bind parameters: values with different
    paths are different executions (``run(train_loader)`` and ``run(val_loader)``),
    not alternatives. ``origin`` is the expression, in the code that asked, whose
    evaluation creates the object (the ``DataLoader(...)`` call or the call of
    the factory that returns it).
    """

    node: Optional[cst.CSTNode]
    path: Tuple[cst.Call, ...] = ()
    origin: Optional[cst.CSTNode] = None


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


def _names_in_target(target: cst.CSTNode) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[str] = []
        for element in target.elements:
            out.extend(_names_in_target(element.value))
        return out
    if isinstance(target, cst.StarredElement):
        return _names_in_target(target.value)
    return []


def names_used(expr: cst.CSTNode) -> Iterator[str]:
    """Variable names read in an expression (not attribute names or keywords)."""
    skip = set()
    for node in iter_subtree(expr):
        if isinstance(node, cst.Attribute):
            skip.add(id(node.attr))
        elif isinstance(node, cst.Arg) and node.keyword is not None:
            skip.add(id(node.keyword))
        elif isinstance(node, cst.Name) and id(node) not in skip:
            yield node.value


def positional_args(call: cst.Call) -> List[cst.BaseExpression]:
    out = []
    for arg in call.args:
        if arg.star or arg.keyword is not None:
            break
        out.append(arg.value)
    return out


def is_test_code(ctx, node: cst.CSTNode) -> bool:
    """Test code: a ``tests``/``test`` directory, ``test_*.py``/``*_test.py``/``conftest.py``, or a ``test_*`` function."""
    path = ctx.path
    if os.path.isabs(path):
        relative = os.path.relpath(path)
        path = relative if not relative.startswith("..") else os.path.basename(path)
    parts = path.replace("\\", "/").split("/")
    filename = parts[-1]
    if any(p in ("tests", "test", "testing") for p in parts[:-1]):
        return True
    if filename.startswith("test_") or filename.endswith("_test.py") or filename == "conftest.py":
        return True
    func = ctx.enclosing_function(node)
    while func is not None:
        if func.name.value.startswith("test_"):
            return True
        func = ctx.enclosing_function(func)
    return False


def is_none(node: Optional[cst.CSTNode]) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


# --------------------------------------------------------------------------- the index


class LoopIndex:
    """The loop facts of one file; build through ``loader_loops(ctx)``."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self._bindings_memo: Dict[int, Dict[str, List[Binding]]] = {}
        self._attr_memo: Dict[Tuple[int, str], Optional[List[Tuple[cst.FunctionDef, Binding]]]] = {}
        self._target_memo: Dict[int, Optional[Tuple[cst.FunctionDef, bool, Optional[cst.ClassDef]]]] = {}
        self._callers: Optional[Dict[int, List[cst.Call]]] = None
        self._values_memo: Dict[tuple, Tuple[Value, ...]] = {}
        self._returns_memo: Dict[int, Optional[List[cst.BaseExpression]]] = {}
        self._defs_by_name: Optional[Dict[str, List[cst.CSTNode]]] = None
        self.loaders: List[Loader] = []
        self._by_call: Dict[int, Loader] = {}
        for bound in ctx.dataloader_calls():
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
        if expr is None:
            return [Value(None)] if loader.bound.is_open else []
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
            elif unconditional and isinstance(ancestor, _COMPREHENSIONS):
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
        """Test code: a ``tests``/``test`` directory, ``test_*.py``/``*_test.py``/``conftest.py``, or a ``test_*`` function."""
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
        if name in _IN_MEMORY_CALLS or (name.startswith("torch.") and name.rsplit(".", 1)[-1] in _TENSOR_FACTORIES):
            return True
        if name == "torch.utils.data.Subset":
            args = positional_args(node)
            return bool(args) and self.in_memory(args[0])
        if isinstance(node.func, cst.Name):
            _, found = self.name_bindings(node.func.value, node)
            if found and len(found) == 1 and isinstance(found[0].node, cst.ClassDef):
                getitem = self.find_method(found[0].node, "__getitem__")
                if getitem is None:
                    return False
                return not any(isinstance(n, cst.Call) for n in self.body_nodes(getitem.body))
            if found and any(b.kind != "other" or not isinstance(b.node, (cst.Import, cst.ImportFrom)) for b in found):
                return False  # bound in this file to something else than an import
        return self._in_memory_elsewhere(name)

    def _in_memory_elsewhere(self, qualified: str) -> bool:
        """A project class of another file whose ``__getitem__`` (along its bases) calls nothing.

        Needs the project index to know, per function, whether it makes any call
        (``calls_any``); without that fact the class is not known to be in memory.
        """
        if not qualified or "." not in qualified:
            return False
        method_facts = getattr(self.ctx.view, "method_facts", None)
        if method_facts is None:
            return False
        facts = method_facts(qualified, "__getitem__")
        return bool(facts) and facts.get("calls_any") is False

    def is_eval(self, loop: LoaderLoop) -> bool:
        """The loop runs with gradients off (``torch.no_grad``/``inference_mode``): evaluation."""
        positions = [loop.loop, *loop.epoch_calls]
        for node in positions:
            for ancestor in self.ctx.ancestors(node):
                if isinstance(ancestor, cst.With):
                    for item in ancestor.items:
                        if self._no_grad(item.item):
                            return True
                if isinstance(ancestor, cst.FunctionDef):
                    if any(self._no_grad(d.decorator) for d in ancestor.decorators):
                        return True
                    break
        return False

    def _no_grad(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            expr = expr.func
        return self.ctx.qualname(expr) in _NO_GRAD if isinstance(expr, (cst.Name, cst.Attribute)) else False

    # ------------------------------------------------------------ wrappers
    def wrapper_kind(self, call: cst.CSTNode) -> Optional[str]:
        """"single" for enumerate/tqdm/iter/islice/track (arg 0 is iterated), "zip", or None."""
        if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
            return None
        name = self.ctx.call_name(call)
        if not name:
            return None
        if name == "builtins.zip":
            return "zip"
        if name in _SINGLE_WRAPPERS or (name.startswith("tqdm.") and name.endswith(".tqdm")):
            return "single"
        return None

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

    # ------------------------------------------------------------ scopes and bindings
    def bindings(self, scope: cst.CSTNode) -> Dict[str, List[Binding]]:
        """Name -> bindings in one function, lambda or the module (nested scopes excluded)."""
        table = self._bindings_memo.get(id(scope))
        if table is not None:
            return table
        table = {}

        def add(name: str, binding: Binding) -> None:
            table.setdefault(name, []).append(binding)

        if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
            params = scope.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                add(param.name.value, Binding("param", param))
            for star in (params.star_arg, params.star_kwarg):
                if isinstance(star, cst.Param):
                    add(star.name.value, Binding("other", star))
            body = scope.body
        else:
            body = scope
        for node in iter_subtree(body, into_scopes=False):
            if node is body or node is scope:
                continue
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    self._bind_target(target.target, node.value, node, add)
            elif isinstance(node, cst.AnnAssign):
                if node.value is not None:
                    self._bind_target(node.target, node.value, node, add)
            elif isinstance(node, cst.NamedExpr):
                self._bind_target(node.target, node.value, node, add)
            elif isinstance(node, cst.WithItem):
                if node.asname is not None:
                    if isinstance(node.asname.name, cst.Name):
                        add(node.asname.name.value, Binding("value", node, node.item))
                    else:
                        for name in _names_in_target(node.asname.name):
                            add(name, Binding("other", node))
            elif isinstance(node, (cst.AugAssign, cst.For)):
                for name in _names_in_target(node.target):
                    add(name, Binding("other", node))
            elif isinstance(node, cst.ExceptHandler):
                if node.name is not None:
                    for name in _names_in_target(node.name.name):
                        add(name, Binding("other", node))
            elif isinstance(node, cst.Import):
                for alias in node.names:
                    local = alias.asname.name if alias.asname is not None else None
                    name = local.value if isinstance(local, cst.Name) else (dotted_parts(alias.name) or ["?"])[0]
                    add(name, Binding("other", node))
            elif isinstance(node, cst.ImportFrom):
                if not isinstance(node.names, cst.ImportStar):
                    for alias in node.names:
                        local = alias.asname.name if alias.asname is not None else alias.name
                        if isinstance(local, cst.Name):
                            add(local.value, Binding("other", node))
            elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                add(node.name.value, Binding("def", node))
            elif isinstance(node, (cst.Global, cst.Nonlocal)):
                for item in node.names:
                    add(item.name.value, Binding("global", node))
            elif isinstance(node, cst.Del):
                for name in _names_in_target(node.target):
                    add(name, Binding("other", node))
            elif isinstance(node, (cst.MatchAs, cst.MatchStar)) and node.name is not None:
                add(node.name.value, Binding("other", node))
        self._bindings_memo[id(scope)] = table
        return table

    @staticmethod
    def _bind_target(target, value, stmt, add) -> None:
        if isinstance(target, cst.Name):
            add(target.value, Binding("value", stmt, value))
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            if all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in elements):
                for i, element in enumerate(elements):
                    add(element.value.value, Binding("value", stmt, value, i))
            else:
                for name in _names_in_target(target):
                    add(name, Binding("other", stmt))

    def name_bindings(self, name: str, at: cst.CSTNode) -> Tuple[Optional[cst.CSTNode], Optional[List[Binding]]]:
        """(scope, bindings) of ``name`` as read at ``at``; bindings None when it cannot be told."""
        for ancestor in self.ctx.ancestors(at):
            if isinstance(ancestor, _COMPREHENSIONS):
                comp = ancestor.for_in
                while comp is not None:
                    if name in _names_in_target(comp.target):
                        return ancestor, None
                    comp = comp.inner_for_in
            elif isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                found = self.bindings(ancestor).get(name)
                if found:
                    if any(b.kind == "global" for b in found):
                        break
                    return ancestor, found
        module = self.ctx.module
        return module, self.bindings(module).get(name, [])

    # ------------------------------------------------------------ classes
    def _defs(self) -> Dict[str, List[cst.CSTNode]]:
        """Every ``def``/``class`` of the file by name."""
        if self._defs_by_name is None:
            self._defs_by_name = {}
            for cls in (cst.ClassDef, cst.FunctionDef):
                for node in self.ctx.nodes(cls):
                    self._defs_by_name.setdefault(node.name.value, []).append(node)
        return self._defs_by_name

    def _module_classes(self, name: str) -> List[cst.ClassDef]:
        return [c for c in self._defs().get(name, []) if isinstance(c, cst.ClassDef)]

    def _bases(self, cls: cst.ClassDef) -> List[cst.ClassDef]:
        out = []
        for base in cls.bases:
            parts = dotted_parts(base.value)
            if parts and len(parts) == 1:
                found = self._module_classes(parts[0])
                if len(found) == 1 and found[0] is not cls:
                    out.append(found[0])
        return out

    def class_family(self, cls: cst.ClassDef) -> List[cst.ClassDef]:
        """The class, its bases and its subclasses defined in this module (by name)."""
        family = [cls]
        changed = True
        while changed:
            changed = False
            for other in self.ctx.nodes(cst.ClassDef):
                if other in family:
                    continue
                bases = self._bases(other)
                if any(b in family for b in bases) or any(other in self._bases(f) for f in family):
                    family.append(other)
                    changed = True
            if len(family) > 32:
                break
        return family

    def find_method(self, cls: cst.ClassDef, name: str, _depth: int = 0) -> Optional[cst.FunctionDef]:
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
                return stmt
        if _depth < 5:
            for base in self._bases(cls):
                found = self.find_method(base, name, _depth + 1)
                if found is not None:
                    return found
        return None

    def self_attr_bindings(self, cls: cst.ClassDef, attr: str) -> Optional[List[Tuple[cst.FunctionDef, Binding]]]:
        """Every ``self.attr = ...`` of the class family; None when it is also bound some other way."""
        key = (id(cls), attr)
        if key in self._attr_memo:
            return self._attr_memo[key]
        out: List[Tuple[cst.FunctionDef, Binding]] = []
        opaque = False
        for member in self.class_family(cls):
            body = member.body.body if isinstance(member.body, cst.IndentedBlock) else ()
            for stmt in body:
                if isinstance(stmt, cst.FunctionDef):
                    if stmt.name.value == attr:
                        opaque = opaque or not any(
                            (dotted_parts(d.decorator) or [""])[-1] == "property" for d in stmt.decorators
                        )
                        if not opaque:
                            for ret in self.returns(stmt) or [None]:
                                out.append((stmt, Binding("value", stmt, ret)))
                        continue
                    sname = self_name(stmt)
                    if sname is None:
                        continue
                    for node in iter_subtree(stmt.body, into_scopes=False):
                        opaque = opaque or self._self_assign(node, sname, attr, stmt, out)
                elif isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                            for target in targets:
                                if isinstance(target, cst.Name) and target.value == attr and not isinstance(small, cst.AugAssign):
                                    if small.value is not None:
                                        out.append((None, Binding("value", small, small.value)))
                                elif attr in _names_in_target(target):
                                    opaque = True
        result = None if opaque or not out else out
        self._attr_memo[key] = result
        return result

    @staticmethod
    def _self_assign(node, sname, attr, method, out) -> bool:
        """Record ``self.attr = v`` in ``out``; True when ``self.attr`` is bound opaquely."""

        def is_self_attr(target) -> bool:
            return (
                isinstance(target, cst.Attribute)
                and target.attr.value == attr
                and isinstance(target.value, cst.Name)
                and target.value.value == sname
            )

        if isinstance(node, cst.Assign):
            for target in node.targets:
                if is_self_attr(target.target):
                    out.append((method, Binding("value", node, node.value)))
                elif isinstance(target.target, (cst.Tuple, cst.List)):
                    if any(is_self_attr(e.value) for e in target.target.elements):
                        return True
        elif isinstance(node, cst.AnnAssign) and is_self_attr(node.target) and node.value is not None:
            out.append((method, Binding("value", node, node.value)))
        elif isinstance(node, (cst.AugAssign, cst.For)) and is_self_attr(node.target):
            return True
        elif isinstance(node, cst.WithItem) and node.asname is not None and is_self_attr(node.asname.name):
            return True
        return False

    # ------------------------------------------------------------ calls
    def call_target(self, call: cst.Call) -> Optional[Tuple[cst.FunctionDef, bool, Optional[cst.ClassDef]]]:
        """(function, drops its first parameter, class constructed) a same-module call runs."""
        key = id(call)
        if key in self._target_memo:
            return self._target_memo[key]
        result = self._call_target(call)
        self._target_memo[key] = result
        return result

    def _call_target(self, call: cst.Call):
        func = call.func
        if isinstance(func, cst.Name):
            _, found = self.name_bindings(func.value, call)
            if not found or len(found) != 1 or found[0].kind != "def":
                return None
            node = found[0].node
            if isinstance(node, cst.FunctionDef):
                return node, False, None
            if isinstance(node, cst.ClassDef):
                init = self.find_method(node, "__init__")
                return (init, True, node) if init is not None else None
            return None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            method = self.ctx.enclosing_function(call, through_lambdas=False)
            if method is None:
                return None
            cls = self.ctx.method_class(method)
            if cls is None or self_name(method) != func.value.value:
                return None
            target = self.find_method(cls, func.attr.value)
            if target is None:
                return None
            decorators = {(dotted_parts(d.decorator) or [""])[-1] for d in target.decorators}
            if "property" in decorators:
                return None
            return target, "staticmethod" not in decorators, None
        return None

    def callers(self, func: cst.FunctionDef) -> List[cst.Call]:
        """Same-module call sites of ``func`` (``f(...)``, ``self.f(...)``, ``Class(...)`` for ``__init__``)."""
        if self._callers is None:
            self._callers = {}
            known = set(self._defs())
            for call in self.ctx.nodes(cst.Call):
                func_node = call.func
                tail = func_node.value if isinstance(func_node, cst.Name) else (
                    func_node.attr.value if isinstance(func_node, cst.Attribute) else None
                )
                if tail not in known:
                    continue
                target = self.call_target(call)
                if target is not None:
                    self._callers.setdefault(id(target[0]), []).append(call)
        return self._callers.get(id(func), [])

    def argument(self, call: cst.Call, func: cst.FunctionDef, param: cst.Param) -> Optional[cst.BaseExpression]:
        """The expression ``call`` passes for ``param`` of ``func`` (a literal None default counts)."""
        target = self.call_target(call)
        drop = target[1] if target is not None else False
        params = func.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        if drop:
            positional = positional[1:]
        bound = BoundCall(call, Signature(positional, [p.name.value for p in params.kwonly_params]))
        arg = bound.arg(param.name.value)
        if arg is not None:
            return arg.value
        if bound.is_open:
            return None
        if is_none(param.default):
            return param.default
        return None

    def returns(self, func: cst.FunctionDef) -> Optional[List[cst.BaseExpression]]:
        """The returned expressions of a function; None for a generator or nothing returned."""
        key = id(func)
        if key in self._returns_memo:
            return self._returns_memo[key]
        values: Optional[List[cst.BaseExpression]] = []
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, (cst.Yield, cst.Await)):
                values = None
                break
            if isinstance(node, cst.Return) and node.value is not None:
                values.append(node.value)
        if not values:
            values = None
        self._returns_memo[key] = values
        return values

    # ------------------------------------------------------------ values
    def values(
        self,
        expr: Optional[cst.CSTNode],
        *,
        stack: Tuple[cst.Call, ...] = (),
        path: Tuple[cst.Call, ...] = (),
        origin: Optional[cst.CSTNode] = None,
        wrappers: bool = False,
        _depth: int = 0,
    ) -> Tuple[Value, ...]:
        """What ``expr`` may evaluate to (see ``Value``); ``stack`` binds parameters of the functions entered."""
        if expr is None:
            return (Value(None, path, origin),)
        key = (id(expr), tuple(map(id, stack)), tuple(map(id, path)), id(origin), wrappers)
        cached = self._values_memo.get(key)
        if cached is not None:
            return cached
        self._values_memo[key] = (Value(None, path, origin),)  # cycle guard
        if _depth > MAX_DEPTH:
            result: Tuple[Value, ...] = (Value(None, path, origin),)
        else:
            result = tuple(self._values(expr, stack, path, origin, wrappers, _depth + 1))
        self._values_memo[key] = result
        return result

    def _values(self, expr, stack, path, origin, wrappers, depth) -> Iterator[Value]:
        unknown = Value(None, path, origin)
        more = dict(wrappers=wrappers, _depth=depth)
        if isinstance(expr, cst.Name):
            if expr.value in ("None", "True", "False"):
                yield Value(expr, path, origin)
                return
            scope, found = self.name_bindings(expr.value, expr)
            if not found:
                yield unknown
                return
            for binding in found:
                yield from self._binding_values(scope, binding, stack, path, origin, wrappers, depth)
            return
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _LOADER_ATTRS:
                base = self.values(expr.value, stack=stack, path=path, _depth=depth)
                loader = self.loader_of_call(base[0].node) if len({id(v.node) for v in base}) == 1 else None
                arg = loader.bound.expr(expr.attr.value) if loader is not None else None
                if arg is not None:  # ``loader.dataset``: what was passed as ``dataset``
                    yield from self.values(arg, path=path, origin=origin, _depth=depth)
                    return
            found = self._self_attr_at(expr)
            if found is None:
                yield unknown
                return
            for _, binding in found:
                if binding.kind == "value" and binding.value is not None:
                    yield from self.values(binding.value, path=path, origin=origin, **more)
                else:
                    yield unknown
            return
        if isinstance(expr, cst.IfExp):
            yield from self.values(expr.body, stack=stack, path=path, origin=origin, **more)
            yield from self.values(expr.orelse, stack=stack, path=path, origin=origin, **more)
            return
        if isinstance(expr, cst.NamedExpr):
            yield from self.values(expr.value, stack=stack, path=path, origin=origin, **more)
            return
        if isinstance(expr, cst.Call):
            if self.loader_of_call(expr) is not None:
                yield Value(expr, path, origin or expr)
                return
            if wrappers and self.wrapper_kind(expr) == "single":
                args = positional_args(expr)
                if args:
                    yield from self.values(args[0], stack=stack, path=path, origin=origin, **more)
                    return
            target = self.call_target(expr)
            if target is not None and target[2] is None:
                returned = self.returns(target[0])
                if returned is not None:
                    for value in returned:
                        yield from self.values(value, stack=(*stack, expr), path=path, origin=origin or expr, **more)
                    return
            yield Value(expr, path, origin or expr)
            return
        if isinstance(
            expr,
            (cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.SimpleString, cst.ConcatenatedString, cst.Integer,
             cst.Float, cst.List, cst.Tuple, cst.Dict, cst.Set),
        ):
            yield Value(expr, path, origin)
            return
        yield unknown

    def _binding_values(self, scope, binding: Binding, stack, path, origin, wrappers, depth) -> Iterator[Value]:
        unknown = Value(None, path, origin)
        more = dict(wrappers=wrappers, _depth=depth)
        if binding.kind == "def":
            yield Value(binding.node, path, origin)
        elif binding.kind == "value":
            if binding.index is None:
                yield from self.values(binding.value, stack=stack, path=path, origin=origin, **more)
            else:
                yield from self._element(binding.value, binding.index, stack, path, origin, wrappers, depth)
        elif binding.kind == "param" and isinstance(scope, cst.FunctionDef):
            if stack:
                target = self.call_target(stack[-1])
                if target is not None and target[0] is scope:
                    arg = self.argument(stack[-1], scope, binding.node)
                    if arg is None:
                        yield unknown
                    else:
                        yield from self.values(arg, stack=stack[:-1], path=path, origin=origin, **more)
                    return
            callers = self.callers(scope)
            if not callers or len(path) >= MAX_OUTWARD:
                yield unknown
                return
            for call in callers[:MAX_CALLERS]:
                arg = self.argument(call, scope, binding.node)
                if arg is None:
                    yield Value(None, (*path, call), origin)
                else:
                    yield from self.values(arg, path=(*path, call), origin=origin, **more)
        else:
            yield unknown

    def _element(self, value, index, stack, path, origin, wrappers, depth) -> Iterator[Value]:
        more = dict(wrappers=wrappers, _depth=depth)
        if isinstance(value, (cst.Tuple, cst.List)):
            elements = value.elements
            if index < len(elements) and all(isinstance(e, cst.Element) for e in elements):
                yield from self.values(elements[index].value, stack=stack, path=path, origin=origin, **more)
                return
        elif isinstance(value, cst.Call):
            target = self.call_target(value)
            returned = self.returns(target[0]) if target is not None and target[2] is None else None
            if returned:
                for ret in returned:
                    if isinstance(ret, cst.Tuple) and index < len(ret.elements) and all(
                        isinstance(e, cst.Element) for e in ret.elements
                    ):
                        yield from self.values(
                            ret.elements[index].value, stack=(*stack, value), path=path, origin=origin or value, **more
                        )
                    else:
                        yield Value(None, path, origin)
                return
        yield Value(None, path, origin)

    def _self_attr_at(self, expr: cst.Attribute):
        """Bindings of ``self.attr`` read at ``expr`` (None when not a ``self`` attribute of a known class)."""
        if not isinstance(expr.value, cst.Name):
            return None
        return self.self_attr_at(expr, expr.value.value, expr.attr.value)

    def self_attr_at(self, at: cst.CSTNode, base: str, attr: str):
        """Bindings of ``<base>.attr`` read at ``at``, when ``base`` is the method's ``self``."""
        method = self.ctx.enclosing_function(at, through_lambdas=False)
        if method is None:
            return None
        cls = self.ctx.method_class(method)
        if cls is None or self_name(method) != base:
            return None
        return self.self_attr_bindings(cls, attr)

    def values_at(self, parts: List[str], at: cst.CSTNode) -> Optional[Tuple[List[Binding], Tuple[Value, ...]]]:
        """(bindings, values) of ``name`` or ``self.attr`` (as dotted ``parts``) if it were read at ``at``."""
        if len(parts) == 1:
            scope, found = self.name_bindings(parts[0], at)
            if not found:
                return None
            out: List[Value] = []
            for binding in found:
                out.extend(self._binding_values(scope, binding, (), (), None, False, 1))
            return list(found), tuple(out)
        if len(parts) == 2:
            attr_found = self.self_attr_at(at, parts[0], parts[1])
            if attr_found is None:
                return None
            out = []
            for _, binding in attr_found:
                out.extend(self.values(binding.value) if binding.value is not None else (Value(None),))
            return [b for _, b in attr_found], tuple(out)
        return None

    # ------------------------------------------------------------ conveniences
    def value_nodes(self, expr, **kwargs) -> Optional[List[cst.CSTNode]]:
        """The distinct terminal nodes of ``expr``; None when any is unknown."""
        out: List[cst.CSTNode] = []
        for value in self.values(expr, **kwargs):
            if value.node is None:
                return None
            if value.node not in out:
                out.append(value.node)
        return out


def loader_loops(ctx) -> LoopIndex:
    """The file's ``LoopIndex``, computed once and kept on the context."""
    return ctx.memo(("loops.index",), lambda: LoopIndex(ctx))


__all__ = [
    "DISTRIBUTED_SAMPLER",
    "DISTRIBUTED_SAMPLER_SIGNATURE",
    "FRAMEWORK_HOOKS",
    "RANDOM_SAMPLERS",
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
