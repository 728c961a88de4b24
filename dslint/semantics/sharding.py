"""Does an IterableDataset's stream split itself across DataLoader workers?

``shards_or_unknown`` answers for one class: yes when the class (or what its
``__iter__``/``__next__`` reach, in this file or across files) reads the worker info
for more than seeding (``worker_info.worker_info_shards``) outside the code that runs only
while it is built (``construction_code``: ``__init__`` and what only it runs, in the main
process, where ``get_worker_info()`` is None; ``construction_worker_info`` says where such a
read splits the data), when a ``worker_init_fn``
of a DataLoader over it may shard, or when its data source may shard itself (a
library of ``libraries.SHARDING_LIBRARIES``, a dataset or reader it wraps, a method
the project does not define); "range" streams of random draws count too. It stays
"unknown" (True: no report) whenever something cannot be followed.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.bindings import class_ref
from dslint.semantics.classes import all_methods, called_method, find_method, has_class_attribute, local_mro, methods, reached_methods
from dslint.semantics.held_classes import receiver_class
from dslint.semantics.init_code import init_helpers
from dslint.semantics.libraries import SHARDING_LIBRARIES
from dslint.semantics.random_draws import DRAW_METHODS, is_random_draw
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.streams import InitValues, draws_from_self, mutated_attrs, returns_self
from dslint.semantics.walk import iter_subtree
from dslint.semantics.worker_info import is_worker_info, iteration_shards, shards_transitively, worker_info_shards

_WRAPPED = re.compile(
    r"(^|_)(datasets?|ds|datapipes?|dp|pipes?|sources?|iterables?|loaders?|streams?|iterators?|readers?)($|_)", re.I
)
_RANGE_LIKE = frozenset({"builtins.range", "itertools.count", "itertools.repeat"})
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
    """The stream draws random values (reordering an index, ``np.random.shuffle(pool)``, or
    seeding makes no new samples: every worker still replays the same data), itself or through a
    method of an object it holds whose project class is known (``held_classes``)."""
    for func in funcs:
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, cst.Call):
                if is_random_draw(ctx.call_name(node)):
                    return True
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in DRAW_METHODS:
                    return True
                owner = receiver_class(ctx, node.func.value) if isinstance(node.func, cst.Attribute) else None
                if owner and ctx.view.method_draws(owner, node.func.attr.value):
                    return True  # ``self.buffer.sample(n)``: a project class's method that draws (any file)
    return False


def _param_looks_wrapped(ctx, attr: str, param: cst.Param) -> bool:
    annotation = ctx.code(param.annotation.annotation) if param.annotation is not None else ""
    return bool(_WRAPPED.search(attr) or _WRAPPED.search(param.name.value) or re.search(r"Dataset|DataPipe", annotation))


def _call_source(ctx, call: cst.Call) -> str:
    """"data" for calls known to make plain data, UNKNOWN_SOURCE for anything that may shard itself."""
    name = ctx.call_name(call)
    if name is None and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call):
        return _call_source(ctx, call.func.value)  # a chain `wds.WebDataset(urls).shuffle(64).decode()`: its root decides
    if name is None:
        return "data"  # a method of a local object: f.readlines(), text.split()
    top = name.split(".", 1)[0]
    if top in SHARDING_LIBRARIES:
        return UNKNOWN_SOURCE
    if ctx.view.function_facts(name) is not None:
        if any((ctx.view.class_method(c, "__iter__") or {}).get("defined") for c in ctx.view.factory_classes(name)):
            return UNKNOWN_SOURCE  # a factory's object that iterates itself: its class shards (or not) itself
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
    if isinstance(value, cst.Call) and ctx.call_name(value) in _UNWRAP and value.args and depth < 3:
        inner = self_attr(value.args[0].value, self_name(init))  # `self.stream = iter(self.source)`
        stored = InitValues(ctx, init).attrs.get(inner, []) if inner and inner != attr else []
        if stored and all(v is not None for v in stored):
            origins = {_value_origin(ctx, init, params, inner, v, depth + 1) for v in stored}
            return UNKNOWN_SOURCE if UNKNOWN_SOURCE in origins else "data"
    if isinstance(value, cst.Call):
        if any(
            isinstance(n, cst.Name) and n.value in params and _param_looks_wrapped(ctx, attr, params[n.value])
            for n in iter_subtree(value, into_scopes=False)
        ):
            return UNKNOWN_SOURCE
        return _call_source(ctx, value)
    return "data"


def _handed_producer(ctx, cls, expr: cst.CSTNode, selfp: Optional[str]) -> bool:
    """``self.x.m(...)`` where ``self.x`` is not built by ``__init__`` (a parameter stored there, of a
    class the code does not fix) and some project class defines a method ``m``: which ``m`` makes
    the stream, and whether it splits by worker, cannot be told here."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    attr = self_attr(expr.func.value, selfp)
    if not attr or not ctx.view.defines_method(expr.func.attr.value):
        return False
    init = find_method(ctx, cls, "__init__")
    values = InitValues(ctx, init).attrs.get(attr, []) if init is not None else []
    return not values or not all(isinstance(v, cst.Call) for v in values)


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
    if _dynamic_attribute(ctx, expr.elt if isinstance(expr, (cst.ListComp, cst.GeneratorExp)) else expr, selfp):
        return UNKNOWN_SOURCE  # `zip(*[getattr(self, n) for n in self.names])`: objects the code never names
    if isinstance(expr, cst.Call) and depth < 3 and any(
        _source_kind(ctx, cls, func, arg.value, depth + 1) == UNKNOWN_SOURCE for arg in expr.args
    ):
        return UNKNOWN_SOURCE  # a stage applied to a wrapped stream (`self.f(iter(self.source))`): the source decides
    if _handed_producer(ctx, cls, expr, selfp):
        return UNKNOWN_SOURCE  # a project method of an object handed in makes the stream (`self.task.train_iter()`)
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


def _dynamic_attribute(ctx, expr: cst.CSTNode, selfp: Optional[str]) -> bool:
    """``getattr(self, name)`` with a name that is not a literal: what it iterates is not known."""
    return isinstance(expr, cst.Call) and ctx.call_name(expr) == "builtins.getattr" and len(expr.args) >= 2 \
        and isinstance(expr.args[0].value, cst.Name) and expr.args[0].value.value == selfp \
        and not isinstance(expr.args[1].value, cst.SimpleString)


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
    if draws_from_self(iter_func):
        kinds.add("range")  # samples come from __next__: judged like a counted loop
    if not ctx.regions.get(iter_func).is_generator:
        selfp = self_name(iter_func)
        for ret in iter_subtree(iter_func.body, into_scopes=False):
            if not isinstance(ret, cst.Return) or ret.value is None:
                continue
            if isinstance(ret.value, cst.Name) and ret.value.value == selfp:
                # __next__ produces the samples: judged like a counted loop, or by the stream it takes them from
                kinds.update(_next_delegates_to(ctx, cls) or {"range"})
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


def _next_delegates_to(ctx, cls) -> Set[Optional[str]]:
    """What the class's ``__next__`` replays when every ``return`` of it takes the next item of
    another stream (``return next(self.source)``, ``return self.dataset.__next__()``), or of a
    project method of an object handed in (``return self.sampler.get_next(self.rng)``: UNKNOWN_SOURCE,
    as in ``_source_kind``), or when it returns what it builds from items it draws from other streams: those streams' kinds
    (``_source_kind``). Empty when it makes its samples itself."""
    next_func = find_method(ctx, cls, "__next__")
    kinds: Set[Optional[str]] = set()
    for ret in iter_subtree(next_func.body, into_scopes=False) if next_func is not None else ():
        if not isinstance(ret, cst.Return) or ret.value is None:
            continue
        if _handed_producer(ctx, cls, ret.value, self_name(next_func)):
            kinds.add(UNKNOWN_SOURCE)  # `return self.source.get_next(...)`: the object handed in makes each item
            continue
        drawn = _drawn_stream(ctx, ret.value)
        if drawn is None:
            return _drawn_kinds(ctx, cls, next_func)  # `return item`: made itself, or from what it drew
        kinds.add(_source_kind(ctx, cls, next_func, drawn))
    return kinds


def _drawn_stream(ctx, call) -> Optional[cst.CSTNode]:
    """The stream ``next(stream)`` (or ``stream.__next__()``) draws from; None for anything else."""
    if not isinstance(call, cst.Call):
        return None
    if ctx.call_name(call) == "builtins.next" and call.args:
        return call.args[0].value
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "__next__" and not call.args:
        return call.func.value
    return None


def _drawn_kinds(ctx, cls, next_func) -> Set[Optional[str]]:
    """The kinds of the streams a ``__next__`` that returns what it builds draws its items from
    (``data, key = next(self.stream)`` then ``return decode(data), key``); empty when it assigns
    no draw (an index drawn inside a subscript picks a sample it makes itself)."""
    selfp = self_name(next_func)
    items = [n.value for n in iter_subtree(next_func.body, into_scopes=False) if isinstance(n, cst.Assign)]
    drawn = [_drawn_stream(ctx, n) for n in items]  # `data, key = next(...)`, not an index `xs[next(order)]`
    drawn = [d for d in drawn if d is not None and not (isinstance(d, cst.Name) and d.value == selfp)]
    return {_source_kind(ctx, cls, next_func, d) for d in drawn}


def _references_sharding_function(ctx, cls: cst.ClassDef, qual: str) -> bool:
    """A method of the class names a project function that consults worker info
    (e.g. ``wds.DataPipeline(..., split_by_worker)`` built in ``__init__``)."""
    seen: Set[str] = set()
    own = f"{ctx.names.modname}.{qual}"  # the class itself (``Cls(...)`` in its own methods)
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
            # an object of another project class whose iteration splits by worker, made here
            called = isinstance(parent, cst.Call) and parent.func is node
            if called and name != own and iteration_shards(ctx, name):
                return True
    return False


def _shards_across_files(ctx, cls, qual: str, iter_func: cst.FunctionDef) -> bool:
    """Whatever ``__iter__`` (and ``__next__`` behind ``return self``) reach consults
    worker info or calls a library that shards for you."""
    entry_points = ["__iter__"] + (["__next__"] if returns_self(iter_func) or draws_from_self(iter_func) else [])
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
        dataset = bound.expr("dataset")
        ref = class_ref(ctx.tree, ctx.names, dataset)
        target = bound.expr("worker_init_fn")
        other_local = ref is not None and ref[0] == "local" and ref[1] is not cls
        if not other_local and _own_method_of(ctx, cls, dataset, target):
            return True  # ``worker_init_fn=ds.m`` over the loader's own ``ds``, ``m`` a method of ours
        if ref is None or ref[0] != "local" or ref[1] is not cls:
            continue
        if target is None or (isinstance(target, cst.Name) and target.value == "None"):
            continue
        if isinstance(target, cst.Call) and ctx.call_name(target) == "functools.partial" and target.args:
            target = target.args[0].value
        if not isinstance(target, (cst.Name, cst.Attribute)) or ctx.qualname(target) is None:
            return True
    return False


def _own_method_of(ctx, cls: cst.ClassDef, dataset, target) -> bool:
    """``target`` is a bound method ``x.m`` of the loader's own dataset ``x`` and ``m`` is a
    method of ``cls``: the loader's ``worker_init_fn`` may reconfigure (shard) an instance of it."""
    return (
        isinstance(dataset, cst.Name)
        and isinstance(target, cst.Attribute)
        and isinstance(target.value, cst.Name)
        and target.value.value == dataset.value
        and find_method(ctx, cls, target.attr.value) is not None
    )


def construction_code(ctx, cls) -> List[Tuple[cst.FunctionDef, cst.FunctionDef]]:
    """(``__init__``, function) for each ``__init__`` of the class's local MRO and each method that
    only it runs (``init_code.init_helpers``): code that runs once, in the parent process."""
    out = []
    for klass in local_mro(ctx, cls):
        init = methods(klass).get("__init__")
        if init is not None:
            out += [(init, init)] + [(init, helper) for helper in init_helpers(ctx, klass, init)]
    return out


def construction_worker_info(ctx, cls) -> Optional[cst.CSTNode]:
    """Where construction code splits the data by ``get_worker_info()``, which is None there (the
    object is built in the parent and copied into each worker): the read in an ``__init__``, or the
    ``self.m(...)`` call of an ``__init__`` that runs the helper reading it."""
    for init, func in construction_code(ctx, cls):
        if not worker_info_shards(ctx, func):
            continue
        if func is init:
            return next((n for n in iter_subtree(init.body) if isinstance(n, cst.Call) and is_worker_info(ctx, n.func)), init)
        for call in (n for n in iter_subtree(init.body, into_scopes=False) if isinstance(n, cst.Call)):
            method = called_method(ctx, cls, call, self_name(init))
            if method is not None and any(m is func for m in reached_methods(ctx, cls, method)):
                return call
        return init
    return None


def shards_or_unknown(ctx, cls, qual: str, iter_func: cst.FunctionDef, loaders: List[dict]) -> bool:
    """The stream ``__iter__`` makes is sharded by worker (in the class, across files, or by
    a ``worker_init_fn`` of ``loaders``), or cannot be judged: DSL303 stays silent."""
    next_func = find_method(ctx, cls, "__next__")
    funcs = reached_methods(ctx, cls, iter_func)
    if next_func is not None and (returns_self(iter_func) or draws_from_self(iter_func)):
        funcs += [f for f in reached_methods(ctx, cls, next_func) if not any(f is g for g in funcs)]
    # sharding in this file: the methods reached, nested functions, any method of the class
    # (worker info read only to seed a random generator does not split the data; nor in code that
    # runs only while the object is built, in the parent, where ``get_worker_info()`` is None)
    built = {id(f) for _, f in construction_code(ctx, cls)}
    if any(worker_info_shards(ctx, f) for f in all_methods(ctx, cls) if id(f) not in built):
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
    return _references_sharding_function(ctx, cls, qual)
