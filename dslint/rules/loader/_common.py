"""Helpers the DataLoader rules share: literal tests on argument values, and the
loader calls a rule checks (less those the code expects to fail)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.report import FixSpec, NodeEdit
from dslint.semantics.batches import fresh_iterator_advances
from dslint.semantics.call_paths import arms_taken
from dslint.semantics.count_branches import handles_count
from dslint.semantics.calls import DATALOADER, UNKNOWN, BoundCall, Signature, dataloader_constructions, loader_signature
from dslint.semantics.epochs import set_epoch_insertion
from dslint.semantics.forwarding import caller_key_reaches, handled_before, key_shown, local_callee
from dslint.semantics.names import dotted_parts
from dslint.semantics.open_specs import open_spec, test_can_be_true
from dslint.semantics.libraries import library_iterable
from dslint.semantics.library_loaders import kwargs_loader_bounds
from dslint.semantics.passthrough_loaders import passthrough_loader_calls
from dslint.semantics.loader_partials import partial_loader_calls
from dslint.semantics.possible import is_zero
from dslint.semantics.loops import loader_loops
from dslint.semantics.module_calls import positional_args
from dslint.semantics.project import ITERABLE, MAP
from dslint.semantics.scopes import is_none
from dslint.semantics.user_values import chosen_by_user, kwargs_expr
from dslint.semantics.values import Possible, expand_kwargs, possible, possible_arg
from dslint.semantics.kwargs_forwarders import forwarded_loader_kwargs_calls
from dslint.semantics.kwargs_paths import path_values
from dslint.semantics.walk import iter_subtree
from dslint.semantics.zero_arms import workers_arm


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def literal_zero(value) -> bool:
    return is_zero(value)


def short(name: Optional[str]) -> str:
    return (name or "").rsplit(".", 1)[-1]


def not_none(ctx, bound, name) -> bool:
    """Passed, and not the literal ``None``."""
    arg = bound.arg(name)
    return arg is not None and ctx.literal(arg.value) is not None


def truthy(value) -> bool:
    return value is not UNKNOWN and bool(value)


def over_iterable(ctx, bound) -> bool:
    """The loader's dataset is an ``IterableDataset`` (see ``iterable_dataset``)."""
    return iterable_dataset(ctx, bound) is not None


def iterable_dataset(ctx, bound) -> Optional[str]:
    """What makes the loader's dataset an ``IterableDataset`` on every path, for a message
    (``"an IterableDataset"``, ``"a `datasets.IterableDataset`"``); None when it is not known to
    be one. The dataset is followed to the values that reach the call (value flow), each a
    project or torch class deriving from ``IterableDataset`` or a library's iterable dataset
    (``semantics/libraries.py``)."""
    expr = bound.expr("dataset")
    if expr is None:
        return None
    if ctx.dataset_kind(expr) == ITERABLE:
        return "an IterableDataset"
    index = loader_loops(ctx)
    nodes = index.value_nodes(expr)
    if not nodes:
        return None
    found = []
    for node in nodes:
        if ctx.dataset_kind(node) == ITERABLE:
            found.append("an IterableDataset")
            continue
        library = library_iterable(ctx, node, index.value_nodes)
        if library is None:
            return None
        found.append(f"a `{library}`")
    return found[0]


_RAISES_CONTEXTS = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "raises"})
_CAUGHT = frozenset({"ValueError", "TypeError", "AssertionError"})  # what torch raises; not a catch-all


def expects_error(ctx, node) -> bool:
    """The code expects the call to raise: inside ``with self.assertRaises(...)``/``pytest.raises(...)``
    or in the body of a ``try`` with a handler for the exception type torch raises (a bare
    ``except:`` or ``except Exception`` is a catch-all, not an expectation)."""
    previous = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.With) and previous is ancestor.body:
            for item in ancestor.items:
                expr = item.item
                if isinstance(expr, cst.Call):
                    parts = dotted_parts(expr.func)
                    if parts and parts[-1] in _RAISES_CONTEXTS:
                        return True
        if isinstance(ancestor, cst.Try) and previous is ancestor.body:
            for handler in ancestor.handlers:
                if handler.type is None:
                    continue
                names = [dotted_parts(n) for n in iter_subtree(handler.type) if isinstance(n, (cst.Name, cst.Attribute))]
                if any(parts and parts[-1] in _CAUGHT for parts in names):
                    return True
        previous = ancestor
    return False




def loader_calls(ctx):
    """Every DataLoader construction (``DataLoader(...)`` and a DataLoader subclass's
    ``super().__init__(...)``), less those the code expects to fail."""
    return [bound for bound in dataloader_constructions(ctx) if not expects_error(ctx, bound.call)]


def forwarding_loader_calls(ctx):
    """``loader_calls`` and the constructions of DataLoader subclasses that pass torch's arguments
    through (third-party ``library_loaders.KWARGS_LOADERS``, e.g. PyG's ``DataLoader``, and this file's
    ``passthrough_loaders``), each bound to its positional parameters and torch's keywords and defaults."""
    return loader_calls(ctx) + forwarded_loader_calls(ctx)


def forwarded_loader_calls(ctx):
    """``forwarding_loader_calls`` less the ``DataLoader(...)`` calls and subclass initialisations:
    the constructions of third-party and project loaders that hand torch's arguments on, the
    calls of project functions whose ``**kwargs`` reaches a DataLoader (``kwargs_forwarders``),
    and the calls of a ``partial(DataLoader, ...)`` (``loader_partials``)."""

    def forwarded(call, taken):  # a project function handing its ``**kwargs`` on: its own parameters are its own
        bound = BoundCall(call, Signature((), DATALOADER.names, {}))  # what it leaves out, the function may set
        bound.args = {name: arg for name, arg in bound.args.items() if name not in taken and name in DATALOADER.names}
        bound.has_star_kwargs = True  # the function may pass more of torch's arguments itself
        return bound

    extra = list(kwargs_loader_bounds(ctx))
    extra += [BoundCall(call, loader_signature(positional)) for call, positional in passthrough_loader_calls(ctx)]
    extra += [forwarded(call, taken) for call, taken in forwarded_loader_kwargs_calls(ctx)]
    extra += [PartialLoader(call, partial) for call, partial in partial_loader_calls(ctx)]
    return [b for b in extra if not expects_error(ctx, b.call)]


class PartialLoader(BoundCall):
    """A call of ``partial(DataLoader, **options)``: the partial's options, and the call's over them."""

    def __init__(self, call, partial) -> None:
        super().__init__(call, DATALOADER)
        self.partial = partial
        for arg in partial.args[1:]:
            self.args.setdefault(arg.keyword.value, arg)


def shuffled_with_supplied_sampler(ctx):
    """``forced_with_supplied_key`` for ``shuffle=True`` and a ``sampler`` (DSL501)."""
    for call, star, shown, callee, _ in forced_with_supplied_key(ctx, "sampler", _forced_shuffle):
        yield call, star, shown, callee


def _forced_shuffle(ctx, named):
    shuffle = named.get("shuffle")
    return ["shuffle"] if shuffle is not None and ctx.literal(shuffle.value) is True else []


def forced_with_supplied_key(ctx, key, forced):
    """``(call, dict expression, evidence, callee, forced names)`` for each call that writes
    options (``forced(ctx, {keyword: Arg})`` names them, e.g. ``shuffle=True``) next to a
    ``**d`` whose ``key`` entry the code shows may be there (``forwarding.key_shown``: it pops,
    reads or tests that key of ``d``, a copy of it, or of the callee's ``**kwargs``), where the
    call is a loader construction that does not name ``key``, or runs a function of this file
    (``callee``) that hands those options and the caller's ``key`` on to one."""
    loaders = forwarding_loader_calls(ctx)
    constructions = {id(b.call) for b in loaders}
    for call in ctx.nodes(cst.Call):
        stars = [a.value for a in call.args if a.star == "**"]
        if not stars:
            continue
        named = {a.keyword.value: a for a in call.args if a.keyword is not None}
        names = forced(ctx, named)
        if not names or key in named or "sampler" in named or "batch_sampler" in named:
            continue
        callee = None
        if id(call) not in constructions:
            callee = local_callee(ctx, call)
            params = callee.params if callee is not None else None
            if params is None or any(p.name.value in (key, *names) for p in (*params.params, *params.kwonly_params)):
                continue
            if not any(ctx.enclosing_function(b.call) is callee and all(caller_key_reaches(ctx, b.call, n) for n in (key, *names))
                       for b in loaders):
                continue
        for star in stars:
            shown = key_shown(ctx, star, key)
            if shown is None and callee is not None and isinstance(callee.params.star_kwarg, cst.Param):
                own = [n for n in ctx.tree.scope_nodes(callee, cst.Name) if n.value == callee.params.star_kwarg.name.value]
                shown = key_shown(ctx, own[0], key) if own else None
            if shown is not None and not handled_before(ctx, shown, call):
                yield call, star, shown, callee, names
                break


def forced_over_open_spec(ctx, bound):
    """(spec, [(option, why)]) for a loader built only from ``**d`` where ``d`` takes the entries
    of a loader specification the code does not list (``open_specs.open_spec``) and is given, on
    every path after that, a ``batch_size`` that can be other than 1, or a ``shuffle`` or
    ``drop_last`` that can be true (a value seen, or a test the code computes); None when the code
    looks for a ``batch_sampler`` entry before the call (it handles it)."""
    spec = open_spec(ctx, bound.call)
    if spec is None or not spec.written:
        return None
    for holder in (spec.holder, spec.source):
        shown = key_shown(ctx, holder, "batch_sampler")
        if shown is not None and handled_before(ctx, shown, bound.call):
            return None
    found = []
    for name, conflicts in (("batch_size", lambda v: v is None or not (is_int(v) and v == 1)),
                            ("shuffle", bool), ("drop_last", bool)):
        expr = spec.written.get(name)
        if expr is None:
            continue
        value = possible(ctx, expr).can_be(conflicts)
        if value is not None:
            found.append((name, f"can be `{value.value!r}` {where(ctx, expr, value)}"))
        elif name != "batch_size" and test_can_be_true(ctx, expr):
            found.append((name, f"is a test that can be true (line {line_of(ctx, expr)})"))
    return (spec, found) if found else None


def line_of(ctx, node) -> int:
    return ctx.line(node)


def where(ctx, expr, value) -> str:
    """Where a possible value comes from, for a message: "when `--workers` keeps its default",
    "after `workers = 0` (line 12)", "when a caller keeps the default of parameter `workers`"."""
    origin = value.origin
    if origin.startswith("the default of `-"):
        return f"when `{origin.split('`')[1]}` keeps its default"
    if origin.startswith("the default of parameter"):
        return f"when a caller keeps {origin}"
    if origin.startswith("a call passes"):
        return f"when called as this file calls it ({origin})"
    if origin == "the literal" and isinstance(expr, cst.IfExp):
        found = _branch(ctx, expr, value.value)
        if found:
            return found
    if origin == "the literal" and isinstance(expr, cst.Name):
        for node in ctx.nodes(cst.Assign):
            if not any(isinstance(t.target, cst.Name) and t.target.value == expr.value for t in node.targets):
                continue
            if ctx.enclosing_function(node) is not ctx.enclosing_function(expr):
                continue
            if _same(ctx.literal(node.value), value.value):
                return f"after `{expr.value} = {value.value!r}` (line {line_of(ctx, node)})"
            if isinstance(node.value, cst.IfExp):
                found = _branch(ctx, node.value, value.value)
                if found:
                    return f"{found} (line {line_of(ctx, node)})"
    return f"({origin})"


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


def _branch(ctx, expr: cst.IfExp, value) -> Optional[str]:
    """"when `test`" / "unless `test`" for the arm of a conditional expression giving ``value``."""
    test = " ".join(ctx.code(expr.test).split())
    test = test if len(test) <= 60 else test[:57] + "..."
    if _same(ctx.literal(expr.body), value):
        return f"when `{test}`"
    if _same(ctx.literal(expr.orelse), value):
        return f"unless `{test}`"
    return None


def zero_workers(ctx, index, bound) -> Optional[str]:
    """How ``num_workers`` can be 0 on some path, for a message; None when it cannot (or is
    unknown). Literal 0 or absent: "is 0". Otherwise a possible value (values.py: argparse
    defaults, parameter defaults and this file's callers, config defaults, ``**kwargs`` dicts,
    branches), or a test of the value against 0 outside the loader's function (the code
    expects 0 there); never when the loader's own function branches on the value first."""
    if literal_zero(ctx.value(bound, "num_workers")):
        return "is 0"
    found = possible_arg(ctx, bound, "num_workers")
    if literal_zero(found.known):
        return "is 0"
    expr = bound.expr("num_workers")
    if expr is not None and handles_count(ctx, index, bound, expr):
        return None
    zero = found.can_be(lambda v: is_int(v) and v == 0)
    if zero is not None:
        return f"can be 0 {where(ctx, expr, zero)}"
    func = ctx.enclosing_function(bound.call)
    for test in index.zero_tests(expr) if expr is not None else ():
        if ctx.enclosing_function(test) is not func:
            return f"can be 0 (the code tests `{ctx.code(test).strip()}` on line {line_of(ctx, test)})"
    return None


def user_zero_workers(ctx, index, bound) -> Optional[str]:
    """Where ``num_workers`` comes from when the user sets it (``semantics/user_values.py``:
    a configuration read, a command-line option, a parameter callers fill in), for a message;
    None when the project constrains it: the loader's function branches on it, its values
    are all listed (argparse ``choices``) and none is 0, or it is computed."""
    expr = bound.expr("num_workers")
    if expr is None and not bound.passed("num_workers") and bound.has_star_kwargs:
        expr = kwargs_expr(ctx, bound.call, "num_workers")
    if expr is None or handles_count(ctx, index, bound, expr):
        return None
    found = possible_arg(ctx, bound, "num_workers")
    if found.complete and found.values:
        return None
    where = chosen_by_user(ctx, expr)
    return f"comes from {where}" if where is not None else None


def fixed_by_code(ctx, bound, name) -> bool:
    """Every value seen for argument ``name`` is written in the code (a literal, a constant, a
    branch), none is a parameter's default or a command-line option's default."""
    found = possible_arg(ctx, bound, name)
    chosen = ("the default of", "a call passes", "a choice of", "`set_defaults", "a caller passing")
    return bool(found.values) and not any(v.origin.startswith(chosen) for v in found.values)


def must_be(ctx, bound, name, predicate) -> Optional[Possible]:
    """The values of argument ``name`` when every value seen satisfies ``predicate`` (at least one seen);
    for a ``**`` dict bound to a different dict on each path, its values on the paths that give it."""
    found = possible_arg(ctx, bound, name)
    if not found.values and not bound.passed(name):
        found = path_values(ctx, bound.call, name)
    return found if found.values and all(predicate(v.value) for v in found.values) else None


def must_be_on_a_call(ctx, bound, name, predicate) -> Optional[Possible]:
    """``must_be``, or the values of the arm of ``a if param_test else b`` that one of this file's
    calls of the enclosing function takes, when all of them satisfy ``predicate``
    (``call_paths.arms_taken``: ``prefetch_factor=4 if not test else None`` with ``test=False`` passed)."""
    found = must_be(ctx, bound, name, predicate)
    for arm in (arms_taken(ctx, bound.expr(name)) or ()) if found is None else ():
        values = possible(ctx, arm)
        if values.values and all(predicate(v.value) for v in values.values):
            return values
    return found


def always_set(index, bound, name) -> bool:
    """Argument ``name`` is passed and is something other than ``None`` on every path the
    value flow sees (a call, a lambda, a name bound to those; no unknown, no ``None``)."""
    expr = bound.expr(name)
    nodes = index.value_nodes(expr) if expr is not None else None
    return bool(nodes) and not any(is_none(n) for n in nodes)


_SET_START_METHOD = frozenset({"multiprocessing.set_start_method", "torch.multiprocessing.set_start_method"})


def fork_everywhere(ctx) -> bool:
    """The module sets the ``fork`` start method for every process it starts."""
    for call in ctx.calls_to(*_SET_START_METHOD):
        args = positional_args(call)
        if args and ctx.literal(args[0]) == "fork":
            return True
    return False


def fork_context(ctx, index, bound) -> bool:
    """The loader's ``multiprocessing_context`` is ``"fork"`` (or ``get_context("fork")``), also as
    the arm a test of the worker count takes whenever there are workers (``"fork" if n > 0 else None``)."""
    expr = bound.expr("multiprocessing_context")
    expr = workers_arm(ctx, bound, expr) or expr
    if expr is None:
        return False
    if ctx.literal(expr) == "fork":
        return True
    for value in index.values(expr):
        node = value.node
        if isinstance(node, cst.Call) and short(ctx.call_name(node)) == "get_context":
            args = positional_args(node)
            if args and ctx.literal(args[0]) == "fork":
                return True
    return False


def rejected_at_construction(ctx, bound) -> bool:
    """torch refuses the loader at construction (DSL501/DSL502 report it): no batch is ever loaded."""
    shuffle = ctx.value(bound, "shuffle")
    sampler = ctx.value(bound, "sampler")
    batch_sampler = ctx.value(bound, "batch_sampler")
    shuffled = shuffle is not UNKNOWN and bool(shuffle)
    return shuffled and (sampler is UNKNOWN or sampler is not None or batch_sampler is UNKNOWN or batch_sampler is not None)


def worker_options_set(ctx, bound) -> bool:
    for name in ("prefetch_factor", "multiprocessing_context", "persistent_workers", "timeout"):
        value = ctx.value(bound, name)
        if value is UNKNOWN or value:
            return True
    return False


def loads_samples(ctx, index, bound) -> bool:
    """The dataset is always an instance of a known map-style dataset class whose data is not
    already in memory (unknown datasets, iterable datasets and in-memory data are left alone), and
    whose ``__getitem__`` puts nothing on the GPU (``.cuda()``: forked workers could not run it)."""
    expr = bound.expr("dataset")
    if expr is None or index.in_memory(expr):
        return False
    nodes = index.value_nodes(expr)
    cuda = getattr(ctx.view, "moves_to_cuda", None)
    return bool(nodes) and all(isinstance(n, cst.Call) and ctx.dataset_kind(n) == MAP
                               and not (cuda and ctx.call_name(n) and cuda(ctx.call_name(n), "__getitem__")) for n in nodes)


def set_epoch_fix(ctx, index, loader, sampler, loops) -> Optional[FixSpec]:
    """Insert ``<sampler>.set_epoch(<epoch>)`` as the first statement of the epoch loop (unsafe:
    the loop variable may not count epochs from where the user expects, e.g. when resuming)."""
    insertion = set_epoch_insertion(ctx, index, loader, sampler, loops)
    if insertion is None:
        return None
    first, statement, indent = insertion
    edit = NodeEdit(start=first, end=first, end_at_start=True, content=statement + "\n" + indent)
    return FixSpec("unsafe", f"Insert `{statement}` at the start of the epoch loop", [edit])


def kwargs_entry(ctx, bound, name) -> Optional[Possible]:
    """What ``name`` is when the call does not pass it but a ``**`` dict this file builds holds it."""
    if bound.passed(name) or not bound.has_star_kwargs:
        return None
    return expand_kwargs(ctx, bound.call)[0].get(name)


def given(ctx, bound, name) -> bool:
    """Passed and not the literal ``None`` (nor a value known to be ``None`` there: a read under
    ``if x is None``), directly or as an entry of a ``**`` dict the file builds (an entry that can
    be ``None`` does not count)."""
    if not_none(ctx, bound, name):
        found = possible_arg(ctx, bound, name)
        return not (found.complete and found.values and all(v.value is None for v in found.values))
    entry = kwargs_entry(ctx, bound, name)
    return entry is not None and entry.can_be(lambda v: v is None) is None


def literal_option(ctx, bound, name):
    """The literal value of an argument, or of the ``**`` dict entry that holds it when every
    value seen is the same; UNKNOWN otherwise."""
    value = ctx.value(bound, name)
    entry = kwargs_entry(ctx, bound, name) if value is UNKNOWN else None
    if entry is not None and entry.values and len({repr(v.value) for v in entry.values}) == 1 and entry.complete:
        return entry.values[0].value
    return value


def set_epoch_message(loader, sampler) -> str:
    """DSL505's message at ``sampler``: a ``DistributedSampler`` call, or the loader standing for one per branch."""
    subject = "this loader's `DistributedSampler` (one per branch)" if sampler is loader.call else "this `DistributedSampler`"
    return (f"{subject} is never given the epoch (no `set_epoch` call): it shuffles with `seed + epoch` and the "
            "epoch stays 0, so every epoch visits the samples in the identical order")


def certain_option(ctx, bound, text: str) -> bool:
    """The option ``_option`` found is set on every path: ``shuffle`` a literal true value, a
    ``sampler``/``batch_sampler`` a construction (or a name bound once to one), not a value that
    may be ``None``."""
    if text.startswith("shuffle"):
        value = ctx.value(bound, "shuffle")
        return value is not UNKNOWN and bool(value)
    name = text.split()[0]
    arg = bound.arg(name)
    value = arg.value if arg is not None else None
    if isinstance(value, cst.Name):
        value = ctx.single_assignment(value)
    return isinstance(value, cst.Call)
