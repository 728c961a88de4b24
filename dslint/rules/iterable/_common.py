"""Helpers of the IterableDataset rules: which classes they judge, DSL301's fix, and
DSL303's judgement of whether a stream shards itself (or cannot be judged)."""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst

from dslint.report import FixSpec, NodeEdit
from dslint.semantics.classes import all_methods, find_method, reached_methods
from dslint.semantics.names import canonical, dotted_parts
from dslint.semantics.project import ITERABLE
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.libraries import hf_iterable, is_reiterating_wrapper, wraps_without_copy
from dslint.semantics.length_uses import (
    class_probed_uses, len_guarded, method_loader, probed_length_uses, truth_tested, vacuous_uses,
)
from dslint.semantics.bindings import class_ref
from dslint.semantics.calls import DATALOADER, BoundCall
from dslint.semantics.loops import is_test_code
from dslint.semantics.streams import (
    CURSOR, FILE, GENERATOR, PASSED, assigned_attrs, init_iterators, iterated_attrs, one_shot, returns_self,
    target_attrs,
)
from dslint.semantics.walk import iter_subtree
from dslint.semantics.worker_info import mentions_worker_info

DATAPIPE_ROOTS = [
    "torch.utils.data.IterDataPipe",
    "torch.utils.data.MapDataPipe",
    "torch.utils.data.datapipes.datapipe.IterDataPipe",
    "torch.utils.data.datapipes.datapipe.MapDataPipe",
    "torch.utils.data.datapipes.iter.IterDataPipe",
]
# torch's ChainDataset iterates other datasets: sharding is theirs to do.
DELEGATING_ROOTS = DATAPIPE_ROOTS + ["torch.utils.data.ChainDataset"]


def is_datapipe_or_chain(ctx, cls: cst.ClassDef) -> bool:
    qual = ctx.qualname_of_def(cls)
    if canonical(f"{ctx.names.modname}.{qual}") in DELEGATING_ROOTS:
        return True  # torch's own source
    return ctx.view.is_subclass(qual, DELEGATING_ROOTS)


def iterable_classes(ctx) -> List[cst.ClassDef]:
    """The file's IterableDataset classes, less DataPipes and ChainDatasets."""
    return [c for c in ctx.dataset_classes() if ctx.class_kind(c) == ITERABLE and not is_datapipe_or_chain(ctx, c)]


def inherited_iter_bases(ctx) -> List[Tuple[cst.ClassDef, cst.FunctionDef, List[dict]]]:
    """The file's plain (non-dataset) classes whose ``__iter__`` an IterableDataset of the
    project inherits (``class TorchStream(Stream, IterableDataset): pass``, in any file):
    (class, its ``__iter__``, the heirs as ``View.iterable_heirs`` gives them)."""
    found = []
    for cls in ctx.nodes(cst.ClassDef):
        iter_func = find_method(ctx, cls, "__iter__")
        if iter_func is None or ctx.method_class(iter_func) is not cls or ctx.class_kind(cls) is not None:
            continue
        heirs = ctx.view.iterable_heirs(ctx.qualname_of_def(cls), "__iter__")
        if heirs:
            found.append((cls, iter_func, heirs))
    return found


def literal_workers(loaders: List[dict]) -> Optional[List[int]]:
    """The literal ``num_workers`` of DataLoaders over a class; None when there are
    DataLoaders and every one of them has a literal 0 or 1 (no worker replays anything)."""
    workers = [facts.get("num_workers") for facts in loaders]
    literal = [w for w in workers if isinstance(w, int) and not isinstance(w, bool)]
    if loaders and len(literal) == len(workers) and all(w in (0, 1) for w in literal):
        return None
    return literal


def sharding_message(ctx, cls: cst.ClassDef, heirs: Optional[List[dict]], many: List[int], built_at=None) -> str:
    """DSL303's message for the ``__iter__`` of ``cls`` (inherited by ``heirs``, if any); ``built_at``:
    where its construction reads the worker info (``sharding.construction_worker_info``)."""
    if many:
        times = f"with `num_workers={many[-1]}` every sample arrives {many[-1]} times per epoch"
    else:
        times = "with N workers every sample arrives N times per epoch (2 workers: 200 items, 100 unique)"
    if built_at is not None:
        consults = (
            f"splits by `torch.utils.data.get_worker_info()` only while the object is built (line {ctx.line(built_at)}): "
            "that runs in the main process, where it returns None, and every worker gets a copy of the same split,"
        )
    elif any(mentions_worker_info(ctx, f) for f in all_methods(ctx, cls)):
        consults = (
            "reads `torch.utils.data.get_worker_info()` only to seed a random generator (or to test it "
            "for None), which does not split the data,"
        )
    else:
        consults = "never consults `torch.utils.data.get_worker_info()`"
    heir = ""
    if heirs:
        names = ", ".join(f"`{h['name'].rsplit('.', 1)[-1]}`" for h in heirs[:2])
        heir = f" (inherited by the IterableDataset {names}{' and others' if len(heirs) > 2 else ''})"
    return (
        f"`{cls.name.value}.__iter__`{heir} {consults} and no "
        f"`worker_init_fn` shards it: each DataLoader worker replays the whole stream, so {times}; "
        "torch's length warning misses it when `batch_size > 1`"
    )


# --------------------------------------------------------------------------- DSL301's fix

_SAFE_CALLS = frozenset(
    {
        "builtins.iter", "builtins.len", "builtins.range", "builtins.enumerate", "builtins.zip", "builtins.list",
        "builtins.tuple", "builtins.reversed", "builtins.int", "builtins.min", "builtins.max",
    }
)


def _indent_of(ctx, node: cst.CSTNode) -> str:
    """The indentation libcst gives the statement containing ``node``."""
    blocks = [a for a in ctx.ancestors(node) if isinstance(a, cst.IndentedBlock)]
    default = ctx.module.default_indent
    return "".join(b.indent if b.indent is not None else default for b in reversed(blocks))


def _portable(ctx, expr: cst.CSTNode, init_self: str) -> bool:
    """Can ``expr`` (from ``__init__``) be re-evaluated in another method of the instance?"""
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in ("None", "True", "False")
    if isinstance(expr, cst.Attribute):
        return isinstance(expr.value, cst.Name) and expr.value.value == init_self
    if isinstance(expr, cst.UnaryOperation):
        return _portable(ctx, expr.expression, init_self)
    if isinstance(expr, cst.BinaryOperation):
        return _portable(ctx, expr.left, init_self) and _portable(ctx, expr.right, init_self)
    if isinstance(expr, cst.Subscript):
        return _portable(ctx, expr.value, init_self) and all(
            isinstance(e.slice, cst.Index) and _portable(ctx, e.slice.value, init_self) for e in expr.slice
        )
    if isinstance(expr, (cst.List, cst.Tuple)):
        return all(isinstance(e, cst.Element) and _portable(ctx, e.value, init_self) for e in expr.elements)
    if isinstance(expr, cst.Call):
        if any(arg.keyword is not None or arg.star for arg in expr.args):
            return False
        if ctx.call_name(expr) not in _SAFE_CALLS:
            return False
        return all(_portable(ctx, arg.value, init_self) for arg in expr.args)
    return False


def _init_values(ctx, init: cst.FunctionDef) -> Dict[str, cst.BaseExpression]:
    """``self.X = value`` statements at the top level of ``__init__``, for attributes assigned once."""
    selfp = self_name(init)
    counts: Dict[str, int] = {}
    for node in iter_subtree(init.body, into_scopes=False):
        if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)):
            for attr in target_attrs(node.target, selfp):
                counts[attr] = counts.get(attr, 0) + 1
    values: Dict[str, cst.BaseExpression] = {}
    for stmt in init.body.body if isinstance(init.body, cst.IndentedBlock) else ():
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        small = stmt.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target, value = small.targets[0].target, small.value
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            target, value = small.target, small.value
        else:
            continue
        attr = self_attr(target, selfp)
        if attr and counts.get(attr) == 1:
            values[attr] = value
    return values


def iter_fix(ctx, cls, iter_func, ret, missing: Set[str]) -> Optional[FixSpec]:
    """Rewrite a ``... return self`` ``__iter__`` into a generator that restarts every epoch."""
    selfp = self_name(iter_func)
    body = iter_func.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    statements = list(body.body)
    last = statements[-1]
    if not (isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 and last.body[0] is ret):
        return None
    for i, stmt in enumerate(statements[:-1]):
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        if i == 0 and isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # docstring
        if isinstance(small, cst.Assign) and all(self_attr(t.target, selfp) for t in small.targets):
            continue
        return None
    init = find_method(ctx, cls, "__init__")
    resets: List[str] = []
    if missing:
        if init is None or self_name(init) != selfp:
            return None
        values = _init_values(ctx, init)
        for attr in sorted(missing):
            value = values.get(attr)
            if value is None or not _portable(ctx, value, selfp):
                return None
            text = " ".join(ctx.code(value).split())
            resets.append(f"{selfp}.{attr} = {text}")
    indent = _indent_of(ctx, ret)
    one = ctx.module.default_indent
    newline = ctx.module.default_newline
    lines = resets + [
        "while True:",
        f"{one}try:",
        f"{one}{one}sample = next({selfp})",
        f"{one}except StopIteration:",
        f"{one}{one}return",
        f"{one}yield sample",
    ]
    content = lines[0] + "".join(newline + indent + line for line in lines[1:])
    what = f" that resets {', '.join(f'`{selfp}.{a}`' for a in sorted(missing))} and" if missing else " that"
    return FixSpec(
        applicability="unsafe",
        message=f"Make `__iter__` a generator{what} restarts the stream every epoch",
        edits=[NodeEdit(start=ret, end=ret, content=content)],
    )


# --------------------------------------------------------------------------- DSL302


def rewound_attrs(funcs: Iterable[cst.FunctionDef]) -> Set[str]:
    """``self.X`` reassigned, or ``self.X.seek(...)``: a fresh start."""
    found: Set[str] = set()
    for func in funcs:
        found |= assigned_attrs(func)
        selfp = self_name(func)
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "seek":
                attr = self_attr(node.func.value, selfp)
                if attr:
                    found.add(attr)
    return found


def iteration_methods(ctx, cls, iter_func) -> List[cst.FunctionDef]:
    """The methods one pass over the dataset runs: what ``__iter__`` reaches, and what
    ``__next__`` reaches when ``__iter__`` hands back ``self``."""
    funcs = reached_methods(ctx, cls, iter_func)
    next_func = find_method(ctx, cls, "__next__")
    if next_func is not None and returns_self(iter_func):
        funcs += [f for f in reached_methods(ctx, cls, next_func) if not any(f is g for g in funcs)]
    return funcs


def init_only(ctx, cls, init) -> List[cst.FunctionDef]:
    """``__init__`` and the methods it calls (``self._setup()``) that no other method reaches."""
    helpers = [m for m in reached_methods(ctx, cls, init) if m is not init]
    others = [m for m in all_methods(ctx, cls) if m is not init and not any(m is h for h in helpers)]
    elsewhere = [r for m in others for r in reached_methods(ctx, cls, m)]
    return [init] + [h for h in helpers if not any(h is r for r in elsewhere)]


def state_message(attr: str, flavour: str) -> str:
    if flavour == FILE:
        return (
            f"`self.{attr}` is a file read once: it is opened in `__init__` and drained by `__iter__`, so every "
            "epoch after the first yields 0 samples, with or without workers (forked workers share one file "
            "offset, which stays at end-of-file and splits the lines between workers unpredictably)"
        )
    if flavour == PASSED:
        return (
            f"`self.{attr}` keeps the one-shot iterator that constructions of the class pass in (a generator or "
            "iterator, made once per dataset) and `__iter__` drains it: the first epoch exhausts it, so every later "
            "epoch or pass yields 0 samples; pass something re-iterable (a list, or a callable that makes a fresh "
            "iterator per `__iter__`)"
        )
    what = "a database cursor" if flavour == CURSOR else "an iterator"
    return (
        f"`self.{attr}` is {what} created once in `__init__` and drained by `__iter__`: the first epoch exhausts "
        "it, so with `num_workers=0` or `persistent_workers=True` every later epoch yields 0 samples "
        "(non-persistent workers hide it by re-forking the parent's untouched copy each epoch)"
    )


def reiterated_message(ctx, subject: str, found) -> str:
    """How a loop drains ``subject`` again (``reiteration.drained_again``'s answer ``found``)."""
    loop, inner, handed = found
    via = f", through `{ctx.code(handed.func).strip()}(...)` on line {ctx.line(handed)}" if handed is not None else ""
    where = f"a `for` of that function's own file{via}" if inner is handed else f"the `for` on line {ctx.line(inner)}{via}"
    return (f"{subject}, and the loop on line {ctx.line(loop)} drains it again on every pass ({where}): the first "
            "pass exhausts it, so every later pass of that `for` runs zero times, with no error")


def drained_init_iterators(ctx, cls) -> List[Tuple[str, cst.CSTNode, str]]:
    """(attr, creating node, flavour) for each one-shot iterator the construction of ``cls``
    stores on ``self`` and a pass over the dataset drains, with no method renewing it."""
    iter_func = find_method(ctx, cls, "__iter__")
    init = find_method(ctx, cls, "__init__")
    if iter_func is None or init is None:
        return []
    constructors = init_only(ctx, cls, init)
    candidates = {}
    for func in reversed(constructors):
        candidates.update(init_iterators(ctx, cls, func))
    if not candidates:
        return []
    consumed = iterated_attrs(ctx, iteration_methods(ctx, cls, iter_func), iter_func)
    renewed = rewound_attrs(m for m in all_methods(ctx, cls) if not any(m is c for c in constructors))
    return [
        (attr, node, flavour)
        for attr, (node, flavour) in sorted(candidates.items())
        if attr in consumed and attr not in renewed
    ]


def wrapped_one_shots(ctx):
    """(call, message) for each ``IterableWrapper(one_shot_iterator, ...)`` of the file: the
    pipe re-iterates an iterator the first epoch drained."""
    for call in ctx.nodes(cst.Call):
        if not is_reiterating_wrapper(ctx, call) or is_test_code(ctx, call):
            continue  # a test wraps a generator to drain it once
        kind = one_shot(ctx, call.args[0].value)
        if kind is None or (kind != GENERATOR and wraps_without_copy(ctx, call) is not True):
            continue
        wrapper = " ".join(ctx.code(call.func).split())
        why = (
            "a generator cannot be deep-copied, so the wrapper falls back to the generator itself"
            if kind == GENERATOR
            else "with `deepcopy=False` the wrapper iterates that same object"
        )
        yield call, (
            f"`{wrapper}` wraps a one-shot iterator and re-iterates it every epoch ({why}): the first epoch "
            "drains it, so every later pass over the pipe, and every later epoch of a DataLoader over it, "
            "yields 0 samples"
        )


# --------------------------------------------------------------------------- DSL304


def iterable_class_of(ctx, expr, depth: int = 0) -> Optional[Tuple[str, bool]]:
    """(class name, through a loader) when ``expr`` is an IterableDataset of a class with no
    ``__len__`` (or a DataLoader over one): a construction, a name bound once to one, a
    ``self.m()`` that returns one DataLoader, a Hugging Face streaming dataset."""
    through_loader = False
    value = expr
    if isinstance(value, cst.Name):
        assigned = ctx.single_assignment(value)
        if isinstance(assigned, cst.Call) and (ctx.is_dataloader_call(assigned) or method_loader(ctx, assigned)):
            value = assigned
    returned = method_loader(ctx, value) if depth == 0 else None
    if returned is not None:
        # self.train_dataloader(): a method of the class that returns one DataLoader
        found = iterable_class_of(ctx, returned, depth + 1)
        return (found[0], True) if found else None
    if isinstance(value, cst.Call) and ctx.is_dataloader_call(value):
        bound = BoundCall(value, DATALOADER)
        value = bound.expr("dataset")
        through_loader = True
        if value is None:
            return None
    if hf_iterable(ctx, value):
        return "datasets.IterableDataset", through_loader  # Hugging Face's streaming dataset
    ref = class_ref(ctx.tree, ctx.names, value)
    if ref is None:
        return None
    if ref[0] == "local":
        qualified = f"{ctx.names.modname}.{ctx.qualname_of_def(ref[1])}"
        name = ref[1].name.value
    else:
        qualified = ref[1]
        name = qualified.rsplit(".", 1)[-1]
    answer = ctx.view.class_method(qualified, "__len__")
    if not answer or answer.get("kind") != ITERABLE or answer.get("defined") is not False:
        return None
    if ref[0] == "local" and is_datapipe_or_chain(ctx, ref[1]):
        return None
    return name, through_loader


def len_findings(ctx):
    """(node, message) for each length DSL304 reports."""
    for use, test in vacuous_uses(ctx):
        tested = ctx.code(test.args[0].value)
        yield (
            use,
            f"`{ctx.code(test)}` is never true: `{tested}` is a DataLoader, not a dataset, so this branch also "
            f"runs for a loader over an IterableDataset without `__len__`, where this raises `TypeError: object "
            f"... has no len()` (test `{tested}.dataset`)",
        )
    for use, (owner, _loader) in class_probed_uses(ctx):
        is_len = isinstance(use, cst.Call) and ctx.call_name(use) == "builtins.len"
        expr = use.args[0].value if is_len else use
        yield (
            use,
            f"{'`len()` of' if is_len else 'testing the truth of'} `{ctx.code(expr)}`: `{owner}` itself probes "
            f"`self.{expr.attr.value}` for a length (it may have none: a loader over an IterableDataset without "
            "`__len__`), but this asks unguarded and raises `TypeError: object ... has no len()` then",
        )
    for use, probe, _loader in probed_length_uses(ctx):
        is_len = isinstance(use, cst.Call) and ctx.call_name(use) == "builtins.len"
        what = "`len()` of" if is_len else "testing the truth of"
        yield (
            use,
            f"{what} `{ctx.code(use.args[0].value if is_len else use)}` runs before line "
            f"{ctx.line(probe)} probes it for a length (`{ctx.code(probe)}`): when it has none (a loader over an "
            "IterableDataset without `__len__`), this raises `TypeError: object ... has no len()` first",
        )
    for call in ctx.calls_to("builtins.len"):
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            continue
        found = iterable_class_of(ctx, call.args[0].value)
        if found is None:
            continue
        class_name, through_loader = found
        if len_guarded(ctx, call):
            continue
        error = f"`TypeError: object of type '{class_name.rsplit('.', 1)[-1]}' has no len()`"
        if through_loader:
            message = (
                f"`len()` of a DataLoader over the IterableDataset `{class_name}` asks the dataset, which "
                f"defines no `__len__`: it raises {error}"
            )
        else:
            message = f"`{class_name}` is an IterableDataset that defines no `__len__`: `len()` raises {error}"
        yield call, message
    for tested in truth_tested(ctx):
        found = iterable_class_of(ctx, tested)
        if found is None or not found[1] or len_guarded(ctx, tested):
            continue
        error = f"`TypeError: object of type '{found[0].rsplit('.', 1)[-1]}' has no len()`"
        yield (
            tested,
            f"testing the truth of a DataLoader over the IterableDataset `{found[0]}` calls `DataLoader.__len__`, "
            f"which asks the dataset; it defines no `__len__`, so this raises {error} (test `is not None` instead)",
        )
