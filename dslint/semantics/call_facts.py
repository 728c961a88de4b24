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
