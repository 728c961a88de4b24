"""Facts about a call site that any rule may ask.

What a library call does to values: whether its result differs on every call (RNG,
clocks, ``next``), whether a method only computes a new value from its receiver and
arguments, whether it stores its arguments into the receiver. And the shape of the
call itself: the last name it is called by, its ``*``/``**`` arguments, the argument
given at a position or by keyword, and whether a method is called on a value
(``self.root.glob``) rather than on a module (``glob.glob``).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.kwargs_dicts import closed_items

# Calls whose result differs on every call (RNG, clocks, iterators).
VARYING_PREFIXES = ("random.", "numpy.random.", "secrets.", "uuid.", "time.", "datetime.", "torch.distributions.")
VARYING_EXACT = frozenset(
    {"os.urandom", "builtins.next", "builtins.input", "torch.rand", "torch.rand_like", "torch.randn", "torch.randn_like"}
    | {"torch.randint", "torch.randint_like", "torch.randperm", "torch.normal", "torch.bernoulli", "torch.multinomial"}
    | {"torch.poisson", "torch.seed", "torch.initial_seed"}
)

# Methods that only compute a new value from their receiver and arguments.
PURE_METHODS = frozenset(
    {"format", "format_map", "join", "replace", "strip", "lstrip", "rstrip", "lower", "upper", "casefold", "split"}
    | {"rsplit", "splitlines", "partition", "rpartition", "startswith", "endswith", "removeprefix", "removesuffix"}
    | {"zfill", "encode", "decode", "joinpath", "with_suffix", "with_name", "with_stem", "relative_to", "resolve"}
    | {"absolute", "expanduser", "as_posix", "exists", "is_file", "is_dir", "open", "read_text", "read_bytes", "get"}
    | {"keys", "values", "items", "copy"}
)

# Calls that store their arguments into the receiver.
MUTATORS = frozenset(
    {"append", "extend", "insert", "add", "update", "setdefault", "appendleft", "extendleft", "put", "put_nowait", "__setitem__"}
)


def varies_per_call(qualified: Optional[str]) -> bool:
    """A library call whose result is different on every call (RNG, clocks, ``next``)."""
    if not qualified:
        return False
    return qualified in VARYING_EXACT or qualified.startswith(VARYING_PREFIXES)


def last_name(node) -> Optional[str]:
    """``c`` for ``a.b.c`` (whatever ``a.b`` is) and for ``c``; None for anything else."""
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def has_star(call: cst.Call) -> bool:
    """Some argument is ``*args`` or ``**kwargs``."""
    return any(arg.star for arg in call.args)


def positional_or_keyword(call: cst.Call, index: int, *keywords: str) -> Optional[cst.Arg]:
    """The argument at position ``index`` or given by one of ``keywords``; None when it
    is absent or a ``*``/``**`` argument before it hides where it is."""
    position = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value in keywords:
                return arg
            continue
        if arg.star:
            return None
        if position == index:
            return arg
        position += 1
    return None


def unresolved_receiver(ctx, func: cst.Attribute) -> bool:
    """A method call on a value (``self.root.glob``), not a module function (``glob.glob``)."""
    receiver = func.value
    if isinstance(receiver, (cst.Name, cst.Attribute)):
        return ctx.qualname(receiver) is None
    return True


# ---------------------------------------------------------------------------- per-example functions

#: methods of a dataset object that apply a function to each example when it is read
EXAMPLE_HOOKS = frozenset({"set_transform", "with_transform"})
#: libraries whose dataset objects' ``.map(f)`` calls ``f`` on every example
DATASET_LIBRARIES = ("datasets.", "webdataset.", "torchdata.")


def per_example_functions(ctx) -> frozenset:
    """Ids of the functions (defs and lambdas of this file) that run once per example
    outside a Dataset class: those given to ``ds.set_transform(f)``/``ds.with_transform(f)``,
    to ``ds.map(f)`` on a dataset of the ``datasets``/``webdataset``/``torchdata``
    libraries, and the functions of this file they call by name."""
    return ctx.memo(("call_facts.per_example",), lambda: _per_example_functions(ctx))


def _per_example_functions(ctx) -> frozenset:
    defs = {}
    for func in ctx.nodes(cst.FunctionDef):
        defs.setdefault(func.name.value, []).append(func)
    found, work = set(), []
    for call in ctx.nodes(cst.Call):
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in EXAMPLE_HOOKS | {"map"}:
            continue
        if func.attr.value == "map" and not _from_dataset_library(ctx, func.value, 0):
            continue
        given = positional_or_keyword(call, 0, "transform", "function")
        if given is None:
            continue
        if isinstance(given.value, cst.Lambda):
            work.append(given.value)
        elif isinstance(given.value, cst.Name) and len(defs.get(given.value.value, ())) == 1:
            work.append(defs[given.value.value][0])
    while work:
        node = work.pop()
        if id(node) in found:
            continue
        found.add(id(node))
        body = node.body
        for sub in _calls_in(body):
            if isinstance(sub.func, cst.Name) and len(defs.get(sub.func.value, ())) == 1:
                work.append(defs[sub.func.value][0])
    return frozenset(found)


def _calls_in(node):
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            yield current
        stack.extend(current.children)


def _from_dataset_library(ctx, expr, depth: int) -> bool:
    """``expr`` is a dataset object of a library whose ``.map`` runs per example
    (``load_dataset(...)["train"].shuffle()``, a name bound to one)."""
    if depth > 6:
        return False
    if isinstance(expr, cst.Call):
        qualified = ctx.call_name(expr)
        if qualified is not None:
            return qualified.startswith(DATASET_LIBRARIES)
        return isinstance(expr.func, cst.Attribute) and _from_dataset_library(ctx, expr.func.value, depth + 1)
    if isinstance(expr, cst.Subscript):
        return _from_dataset_library(ctx, expr.value, depth + 1)
    if isinstance(expr, cst.Name):
        values = scope_assignments(ctx.tree, ctx.tree.scope_node(expr), expr.value) or ()
        return any(value is not expr and _from_dataset_library(ctx, value, depth + 1) for value in values)
    return False


def in_per_example_function(ctx, node) -> bool:
    """Inside a function that ``per_example_functions`` finds."""
    ids = per_example_functions(ctx)
    if not ids:
        return False
    return any(id(ancestor) in ids for ancestor in ctx.ancestors(node))


def passed_arguments(call: cst.Call, source=None) -> Optional[list]:
    """What a call passes, for the summaries (``sample_calls``): ``[positional, keywords]`` with
    each value ``[literal]`` (a string, number, bool or None written as such) or ``"?"``;
    ``positional`` is None after a ``*args``, and a ``**`` unpacking adds the keyword ``"**"``,
    unless ``source`` (a ``kwargs_dicts.FileSource``) finds every key the dicts can hold
    (``closed_items``): then each is a keyword (``"?"`` where its entries disagree).
    None for a call without arguments."""
    if not call.args:
        return None
    positional: Optional[list] = []
    keywords = {}
    items, closed = closed_items(source, call) if source is not None and any(a.star == "**" for a in call.args) else ([], False)
    for arg in call.args:
        if arg.star == "*":
            positional = None
        elif arg.star == "**":
            if not closed:  # (a closed dict's keys are added below)
                keywords["**"] = "?"
        elif arg.keyword is not None:
            keywords[arg.keyword.value] = _written_literal(arg.value)
        elif positional is not None:
            positional.append(_written_literal(arg.value))
    for key, value in items if closed else ():
        written = _written_literal(value)
        keywords[key] = written if keywords.get(key, written) == written else "?"
    return [positional, keywords]


def _written_literal(expr: cst.BaseExpression):
    if isinstance(expr, cst.SimpleString):
        return [expr.evaluated_value] if isinstance(expr.evaluated_value, str) else "?"
    if isinstance(expr, (cst.Integer, cst.Float)):
        return [expr.evaluated_value]
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return [{"True": True, "False": False, "None": None}[expr.value]]
    return "?"
