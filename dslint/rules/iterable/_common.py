"""Helpers of the IterableDataset rules: which classes they judge, DSL301's fix, and
DSL303's judgement of whether a stream shards itself (or cannot be judged)."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Set

import libcst as cst

from dslint.report import FixSpec, NodeEdit
from dslint.semantics.bindings import class_ref
from dslint.semantics.classes import all_methods, called_method, find_method, has_class_attribute, reached_methods
from dslint.semantics.libraries import SHARDING_LIBRARIES
from dslint.semantics.names import canonical
from dslint.semantics.project import ITERABLE
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.streams import InitValues, mutated_attrs, returns_self, target_attrs
from dslint.semantics.worker_info import shards_transitively, worker_info_shards
from dslint.semantics.walk import iter_subtree

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


# --------------------------------------------------------------------------- DSL303: does the stream shard itself?

_WRAPPED = re.compile(
    r"(^|_)(datasets?|ds|datapipes?|dp|pipes?|sources?|iterables?|loaders?|streams?|iterators?|readers?)($|_)", re.I
)
_RANGE_LIKE = frozenset({"builtins.range", "itertools.count", "itertools.repeat"})
_RNG_PREFIXES = ("random.", "numpy.random.", "torch.rand", "torch.normal", "torch.bernoulli", "torch.multinomial", "torch.poisson")
_RNG_METHODS = (
    "normal", "uniform", "integers", "standard_normal", "randint", "randn", "rand", "random", "gauss", "choice",
    "binomial", "poisson",
)
_DISPLAYS = (cst.List, cst.Tuple, cst.Set)
# Modules whose objects are plain data (lists, files, arrays, readers): iterating
# them in every worker duplicates the data. Anything else may shard itself.
_PLAIN_DATA_MODULES = frozenset(
    {
        "builtins", "json", "os", "glob", "csv", "pathlib", "numpy", "pandas", "pickle", "yaml", "io",
        "gzip", "bz2", "lzma", "itertools", "collections", "random", "re", "h5py", "PIL", "torch",
        "torchvision", "torchaudio", "math", "functools", "operator", "tarfile", "zipfile", "sqlite3",
        "linecache", "fnmatch", "struct", "array", "string", "codecs", "shutil", "lmdb", "cv2",
        "imageio", "soundfile", "librosa", "scipy", "jsonlines", "pyarrow",
    }
)
_UNWRAP = frozenset(
    {"builtins.iter", "builtins.enumerate", "builtins.sorted", "builtins.list", "builtins.tuple", "builtins.reversed"}
)
_ITERATOR_WRAPPERS = frozenset({"builtins.map", "builtins.filter", "builtins.zip"})
UNKNOWN_SOURCE = "unknown"


def _uses_rng(ctx, funcs: List[cst.FunctionDef]) -> bool:
    for func in funcs:
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, cst.Call):
                name = ctx.call_name(node)
                if name and name.startswith(_RNG_PREFIXES):
                    return True
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in _RNG_METHODS:
                    return True
    return False


def _param_looks_wrapped(ctx, attr: str, param: cst.Param) -> bool:
    annotation = ctx.code(param.annotation.annotation) if param.annotation is not None else ""
    return bool(_WRAPPED.search(attr) or _WRAPPED.search(param.name.value) or re.search(r"Dataset|DataPipe", annotation))


def _call_source(ctx, call: cst.Call) -> str:
    """"data" for calls known to make plain data, UNKNOWN_SOURCE for anything that may shard itself."""
    name = ctx.call_name(call)
    if name is None:
        return "data"  # a method of a local object: f.readlines(), text.split()
    top = name.split(".", 1)[0]
    if top in SHARDING_LIBRARIES:
        return UNKNOWN_SOURCE
    if ctx.view.function_facts(name) is not None:
        return "data"  # a project function: what it reaches was checked for worker info
    if top in _PLAIN_DATA_MODULES:
        return "data"
    return UNKNOWN_SOURCE  # a library function or a class we cannot see into


def _attr_origin(ctx, cls: cst.ClassDef, attr: str) -> str:
    """"data" or UNKNOWN_SOURCE for what ``__init__`` stores in ``self.attr``."""
    init = find_method(ctx, cls, "__init__")
    values = InitValues(ctx, init).attrs.get(attr, []) if init is not None else []
    if not values or any(v is None for v in values):
        return UNKNOWN_SOURCE if _WRAPPED.search(attr) else "data"
    params = {p.name.value: p for p in (*init.params.posonly_params, *init.params.params, *init.params.kwonly_params)}
    params.pop(self_name(init) or "", None)
    # `self.reader = make_reader(...) if ... else reader`: unknown when any of them is
    origins = {_value_origin(ctx, init, params, attr, value) for value in values}
    return UNKNOWN_SOURCE if UNKNOWN_SOURCE in origins else "data"


def _value_origin(ctx, init, params, attr: str, value: cst.CSTNode, depth: int = 0) -> str:
    if ctx.dataset_kind(value) is not None:
        return UNKNOWN_SOURCE  # another dataset: it shards (or not) itself
    if isinstance(value, cst.Name):
        if value.value in params:
            return UNKNOWN_SOURCE if _param_looks_wrapped(ctx, attr, params[value.value]) else "data"
        local = ctx.single_assignment(value) if ctx.enclosing_function(value) is init else None
        if local is None or depth > 3:
            return UNKNOWN_SOURCE  # rebound along the way: cannot tell what it ends up being
        return _value_origin(ctx, init, params, attr, local, depth + 1)
    if isinstance(value, cst.Call):
        if any(
            isinstance(n, cst.Name) and n.value in params and _param_looks_wrapped(ctx, attr, params[n.value])
            for n in iter_subtree(value, into_scopes=False)
        ):
            return UNKNOWN_SOURCE
        return _call_source(ctx, value)
    return "data"


def _source_kind(ctx, cls, func: cst.FunctionDef, expr: cst.CSTNode, depth: int = 0) -> Optional[str]:
    """What iterating ``expr`` replays: "data", "range", None (a literal or a generator
    method judged on its own) or UNKNOWN_SOURCE (something that may shard itself)."""
    selfp = self_name(func)
    while True:
        if isinstance(expr, cst.Call) and ctx.call_name(expr) in _UNWRAP and expr.args:
            expr = expr.args[0].value
        elif (
            isinstance(expr, cst.Call)
            and not expr.args
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "__iter__"
        ):
            expr = expr.func.value
        else:
            break
    if isinstance(expr, cst.Call) and ctx.call_name(expr) in _RANGE_LIKE:
        return "range"
    if isinstance(expr, _DISPLAYS):
        return None
    if isinstance(expr, cst.Call) and ctx.call_name(expr) in _ITERATOR_WRAPPERS:
        # map(f, xs), filter(f, xs), zip(xs, ys): judged by what they iterate
        kinds = {
            _source_kind(ctx, cls, func, arg.value, depth + 1)
            for arg in expr.args
            if arg.keyword is None and not (ctx.call_name(expr) != "builtins.zip" and arg is expr.args[0])
        }
        for kind in (UNKNOWN_SOURCE, "data", "range"):
            if kind in kinds:
                return kind
        return None
    if isinstance(expr, cst.Call) and called_method(ctx, cls, expr, selfp) is not None:
        return None  # a method of the class: its own loops are judged
    node = expr
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        attr = self_attr(node, selfp)
        if attr:
            return _attr_origin(ctx, cls, attr)
        node = node.func if isinstance(node, cst.Call) else node.value
    if isinstance(expr, cst.Call):
        return _call_source(ctx, expr)
    if isinstance(expr, cst.Name) and depth < 3 and ctx.enclosing_function(expr) is func:
        value = ctx.single_assignment(expr)
        if value is not None:
            return _source_kind(ctx, cls, func, value, depth + 1)
    return "data"


def _stream_source(ctx, cls, iter_func, funcs) -> Optional[str]:
    """What the stream replays in every worker: "data", "range" (a counted loop or
    ``__next__``), or None when there is nothing to judge or the source may shard itself."""
    kinds: Set[Optional[str]] = set()
    for func in funcs:
        for loop in ctx.regions.get(func).loops:
            if isinstance(loop, cst.For):
                kinds.add(_source_kind(ctx, cls, func, loop.iter))
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, cst.Yield) and isinstance(node.value, cst.From):
                kind = _source_kind(ctx, cls, func, node.value.item)
                # `yield from range(n)` streams bare counters: a toy, like a literal
                kinds.add(None if kind == "range" else kind)
    if not ctx.regions.get(iter_func).is_generator:
        selfp = self_name(iter_func)
        for ret in iter_subtree(iter_func.body, into_scopes=False):
            if not isinstance(ret, cst.Return) or ret.value is None:
                continue
            if isinstance(ret.value, cst.Name) and ret.value.value == selfp:
                kinds.add("range")  # __next__ produces the samples: judged like a counted loop
            else:
                kind = _source_kind(ctx, cls, iter_func, ret.value)
                # `return iter(range(n))` streams bare counters, like `yield from range(n)`
                kinds.add(None if kind == "range" else kind)
    if UNKNOWN_SOURCE in kinds:
        return None
    if "data" in kinds:
        return "data"
    if "range" in kinds:
        return "range"
    return None


def _references_sharding_function(ctx, cls: cst.ClassDef) -> bool:
    """A method of the class names a project function that consults worker info
    (e.g. ``wds.DataPipeline(..., split_by_worker)`` built in ``__init__``)."""
    seen: Set[str] = set()
    for method in all_methods(ctx, cls):
        for node in iter_subtree(method.body, into_scopes=True):
            if not isinstance(node, (cst.Name, cst.Attribute)):
                continue
            parent = ctx.parent(node)
            if isinstance(parent, cst.Attribute) and parent.value is node:
                continue  # only whole dotted names
            name = ctx.qualname(node)
            if not name or name in seen or name.split(".", 1)[0] in _PLAIN_DATA_MODULES:
                continue
            seen.add(name)
            if len(seen) > 64:
                return False
            if shards_transitively(ctx, name):
                return True
    return False


def _shards_across_files(ctx, cls, qual: str, iter_func: cst.FunctionDef) -> bool:
    """Whatever ``__iter__`` (and ``__next__`` behind ``return self``) reach consults
    worker info or calls a library that shards for you."""
    entry_points = ["__iter__"] + (["__next__"] if returns_self(iter_func) else [])
    for entry in entry_points:
        for position, facts in enumerate(ctx.view.reachable_facts(qual, entry)):
            if facts is None:
                continue
            # the entry method itself is this file's, judged by worker_info_shards
            if facts.get("worker_info") and not (position == 0 and find_method(ctx, cls, entry) is not None):
                return True
            for kind, target, _ in facts.get("calls", ()):
                if kind == "func" and target.split(".", 1)[0] in SHARDING_LIBRARIES:
                    return True
    return False


def _reads_unknown_behaviour(ctx, cls, qual: str, funcs: List[cst.FunctionDef]) -> bool:
    """The iteration calls ``super().m()``, a sharding library, a base's method that
    consults worker info, or a ``self.m()`` that nothing in the project defines."""
    attrs_read: Dict[str, bool] = {}
    for func in funcs:
        selfp = self_name(func)
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, cst.Call):
                # super().m(): behaviour from a base we do not follow
                if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Call):
                    inner = node.func.value.func
                    if isinstance(inner, cst.Name) and inner.value == "super":
                        return True
                name = ctx.call_name(node)
                if name and name.split(".", 1)[0] in SHARDING_LIBRARIES:
                    return True
            attr = self_attr(node, selfp)
            if attr and find_method(ctx, cls, attr) is None:
                parent = ctx.parent(node)
                called = isinstance(parent, cst.Call) and parent.func is node
                attrs_read[attr] = attrs_read.get(attr, False) or called
    for attr, called in sorted(attrs_read.items()):
        if ctx.view.has_method(qual, attr):
            # a method or property of a base in another file
            if any(f and f.get("worker_info") for f in ctx.view.reachable_facts(qual, attr)):
                return True
        elif called and attr not in mutated_attrs(all_methods(ctx, cls)) and not has_class_attribute(ctx, cls, attr):
            return True  # an abstract or library-provided method: unknown
    return False


def _local_loader_hides_worker_init(ctx, cls: cst.ClassDef) -> bool:
    """A DataLoader of this file over the class passes a ``worker_init_fn`` that is a bound
    method (``self.init_worker``, ``ds.shard``), a lambda or a call result: it may shard."""
    for bound in ctx.dataloader_calls():
        ref = class_ref(ctx.tree, ctx.names, bound.expr("dataset"))
        if ref is None or ref[0] != "local" or ref[1] is not cls:
            continue
        target = bound.expr("worker_init_fn")
        if target is None or (isinstance(target, cst.Name) and target.value == "None"):
            continue
        if isinstance(target, cst.Call) and ctx.call_name(target) == "functools.partial" and target.args:
            target = target.args[0].value
        if not isinstance(target, (cst.Name, cst.Attribute)) or ctx.qualname(target) is None:
            return True
    return False


def shards_or_unknown(ctx, cls, qual: str, iter_func: cst.FunctionDef, loaders: List[dict]) -> bool:
    """The stream ``__iter__`` makes is sharded by worker (in the class, across files, or by
    a ``worker_init_fn`` of ``loaders``), or cannot be judged: DSL303 stays silent."""
    next_func = find_method(ctx, cls, "__next__")
    funcs = reached_methods(ctx, cls, iter_func)
    if next_func is not None and returns_self(iter_func):
        funcs += [f for f in reached_methods(ctx, cls, next_func) if not any(f is g for g in funcs)]
    # sharding in this file: the methods reached, nested functions, any method of the class
    # (worker info read only to seed a random generator does not split the data)
    if any(worker_info_shards(ctx, f) for f in all_methods(ctx, cls)):
        return True
    if _shards_across_files(ctx, cls, qual, iter_func) or _reads_unknown_behaviour(ctx, cls, qual, funcs):
        return True
    # a worker_init_fn on a loader over this class
    for facts in loaders:
        ref = facts.get("worker_init_fn")
        if ref is None or ref.startswith("builtins."):
            continue
        shards = shards_transitively(ctx, ref)
        if shards is None or shards:
            return True
    if _local_loader_hides_worker_init(ctx, cls):
        return True
    source = _stream_source(ctx, cls, iter_func, funcs)
    if source is None:
        return True  # no data loop we can see (a queue, a socket, a self-sharding source)
    if source == "range" and _uses_rng(ctx, funcs):
        return True  # random samples: each worker draws its own
    return _references_sharding_function(ctx, cls)
