"""Binding call arguments to parameters, and what a literal argument is worth.

Arguments bind by position and keyword exactly as Python would for the signature
given. Anything that is not a literal (or a module constant assigned once to a
literal) is UNKNOWN, and so is every parameter not passed explicitly when the call
has ``*args``/``**kwargs``: unknown is never reported as wrong.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import libcst as cst

from dslint.semantics.scopes import none_replacements


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __bool__(self) -> bool:  # an unknown must never pass for a value
        raise TypeError(f"{self.name} has no truth value; compare with `is`")


UNKNOWN = _Sentinel("UNKNOWN")


class Signature:
    def __init__(self, positional: Sequence[str], keyword_only: Sequence[str] = (), defaults: Optional[dict] = None) -> None:
        self.positional = tuple(positional)
        self.keyword_only = tuple(keyword_only)
        self.defaults = dict(defaults or {})

    @property
    def names(self):
        return self.positional + self.keyword_only


DATALOADER = Signature(
    (
        "dataset",
        "batch_size",
        "shuffle",
        "sampler",
        "batch_sampler",
        "num_workers",
        "collate_fn",
        "pin_memory",
        "drop_last",
        "timeout",
        "worker_init_fn",
        "multiprocessing_context",
        "generator",
    ),
    ("prefetch_factor", "persistent_workers", "pin_memory_device", "in_order"),
    {
        "batch_size": 1,
        "shuffle": None,
        "sampler": None,
        "batch_sampler": None,
        "num_workers": 0,
        "collate_fn": None,
        "pin_memory": False,
        "drop_last": False,
        "timeout": 0,
        "worker_init_fn": None,
        "multiprocessing_context": None,
        "generator": None,
        "prefetch_factor": None,
        "persistent_workers": False,
        "pin_memory_device": "",
        "in_order": True,
    },
)


class BoundCall:
    """A call's arguments by parameter name."""

    def __init__(self, call: cst.Call, signature: Signature) -> None:
        self.call = call
        self.signature = signature
        self.args: Dict[str, cst.Arg] = {}
        self.has_star_args = False
        self.has_star_kwargs = False
        position = 0
        for arg in call.args:
            if arg.star == "*":
                self.has_star_args = True
                continue
            if arg.star == "**":
                self.has_star_kwargs = True
                continue
            if arg.keyword is not None:
                self.args[arg.keyword.value] = arg
                continue
            if self.has_star_args:
                continue  # position unknown after *args
            if position < len(signature.positional):
                self.args[signature.positional[position]] = arg
            position += 1

    @property
    def is_open(self) -> bool:
        """Arguments may come from ``*args``/``**kwargs`` that we cannot see."""
        return self.has_star_args or self.has_star_kwargs

    def arg(self, name: str) -> Optional[cst.Arg]:
        return self.args.get(name)

    def passed(self, name: str) -> bool:
        return name in self.args

    def may_be_passed(self, name: str) -> bool:
        return name in self.args or self.is_open

    def expr(self, name: str) -> Optional[cst.BaseExpression]:
        arg = self.args.get(name)
        return arg.value if arg is not None else None


def loader_signature(positional: Sequence[str]) -> Signature:
    """A DataLoader subclass's signature that hands torch's arguments through: its own positional
    parameters, then torch's other parameters as keywords, with torch's defaults."""
    return Signature(tuple(positional), tuple(n for n in DATALOADER.names if n not in positional), DATALOADER.defaults)


def literal_value(expr: cst.CSTNode, constant=None):
    """The Python value of a literal expression, or UNKNOWN.

    ``constant(name_node)`` may resolve a Name to another expression (a module
    constant); it returns None when the name is not a known constant.
    """
    if isinstance(expr, cst.Integer):
        return expr.evaluated_value
    if isinstance(expr, cst.Float):
        return expr.evaluated_value
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        value = expr.evaluated_value
        return UNKNOWN if value is None else value
    if isinstance(expr, cst.Name):
        if expr.value == "True":
            return True
        if expr.value == "False":
            return False
        if expr.value == "None":
            return None
        if constant is not None:
            target = constant(expr)
            if target is not None:
                return literal_value(target, None)
        return UNKNOWN
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        inner = literal_value(expr.expression, constant)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(expr.operator, cst.Minus) else inner
        return UNKNOWN
    if isinstance(expr, (cst.List, cst.Tuple)):
        values = []
        for element in expr.elements:
            if not isinstance(element, cst.Element):
                return UNKNOWN
            value = literal_value(element.value, constant)
            if value is UNKNOWN:
                return UNKNOWN
            values.append(value)
        return values if isinstance(expr, cst.List) else tuple(values)
    return UNKNOWN


def is_truthy_literal(value) -> bool:
    return value is not UNKNOWN and bool(value)


def describe(expr: cst.CSTNode, module: cst.Module) -> str:
    """Source text of an expression, on one line, for messages."""
    text = module.code_for_node(expr).strip()
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


DATALOADER_QUALNAME = "torch.utils.data.DataLoader"


class SubclassInit(BoundCall):
    """``super().__init__(...)`` (or ``DataLoader.__init__(self, ...)``) in the ``__init__`` of a
    DataLoader subclass: a DataLoader construction whose arguments the subclass chooses.
    ``owner`` is the subclass; ``call`` is the ``__init__`` call as written."""

    def __init__(self, call: cst.Call, owner: cst.ClassDef, skip_self: bool) -> None:
        # ``Base.__init__(self, ...)`` binds ``self`` first: bind the rest (the same Arg nodes)
        super().__init__(call.with_changes(args=call.args[1:]) if skip_self else call, DATALOADER)
        self.call = call
        self.owner = owner


class ForwardedInit(SubclassInit):
    """``super().__init__(...)`` in the ``__init__`` of a subclass of a DataLoader subclass of the
    same file, whose own ``__init__`` hands its parameters on to DataLoader's unchanged
    (``super().__init__(ds, collate_fn=collate_fn, num_workers=num_workers)``): what the outer
    call passes for those parameters reaches DataLoader. ``args`` holds the outer call's
    arguments where they are forwarded and the inner construction's elsewhere."""

    def __init__(self, call: cst.Call, owner: cst.ClassDef, args: Dict[str, cst.Arg], star_args: bool, star_kwargs: bool) -> None:
        super().__init__(call.with_changes(args=()), owner, skip_self=False)
        self.call = call
        self.args = args
        self.has_star_args, self.has_star_kwargs = star_args, star_kwargs


def dataloader_constructions(ctx) -> list:
    """Every DataLoader construction of the file: ``DataLoader(...)`` calls (``ctx.dataloader_calls``)
    and the base-class initialisation inside the ``__init__`` of a class deriving from
    DataLoader (in this file or across the project): ``super().__init__(...)``,
    ``super(Cls, self).__init__(...)`` and ``DataLoader.__init__(self, ...)``. Each is a
    ``BoundCall`` whose ``call`` is the node to report; a subclass init is a
    ``SubclassInit`` (its ``owner`` is the class)."""
    def compute():
        inits = _subclass_inits(ctx)
        return list(ctx.dataloader_calls()) + inits + _forwarded_inits(ctx, inits)
    return ctx.memo(("calls.constructions",), compute)


def _subclass_inits(ctx) -> list:
    out = []
    for cls in ctx.nodes(cst.ClassDef):
        if not _derives_directly(ctx, cls):
            continue
        init = _init_of(cls)
        if init is None:
            continue
        for call in ctx.tree.scope_nodes(init, cst.Call):
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value != "__init__":
                continue
            if _is_super_init(call):
                out.append(SubclassInit(call, cls, skip_self=False))
            elif ctx.qualname(func.value) == DATALOADER_QUALNAME and call.args and call.args[0].keyword is None:
                out.append(SubclassInit(call, cls, skip_self=True))
    return out


def _derives_directly(ctx, cls: cst.ClassDef) -> bool:
    """The first base of ``cls`` is torch's DataLoader (so ``super().__init__`` is DataLoader's)."""
    bases = [b.value for b in cls.bases if b.keyword is None]
    if not bases:
        return False
    first = bases[0]
    if isinstance(first, cst.Subscript):  # ``DataLoader[T]``: the generic alias is the class itself
        first = first.value
    if ctx.qualname(first) == DATALOADER_QUALNAME:
        return True
    if isinstance(first, cst.Name) and first.value == cls.name.value:  # ``class DataLoader(DataLoader)``
        return ctx.view.is_subclass(ctx.qualname_of_def(cls), [DATALOADER_QUALNAME]) and not any(
            ctx.qualname(b) != DATALOADER_QUALNAME for b in bases[1:2]
        )
    return False


def _init_of(cls: cst.ClassDef) -> Optional[cst.FunctionDef]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)


def _is_super_init(call: cst.Call) -> bool:
    """``super().__init__(...)`` (also ``super(Cls, self).__init__(...)``)."""
    func = call.func
    return (isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call)
            and isinstance(func.value.func, cst.Name) and func.value.func.value == "super")


def _forwarded_inits(ctx, inits: list) -> list:
    """``ForwardedInit`` for each ``super().__init__(...)`` of a class whose first base is a class
    of this file with a ``SubclassInit`` (one level: the base derives from DataLoader itself)."""
    by_class: Dict[int, list] = {}
    for init in inits:
        by_class.setdefault(id(init.owner), []).append(init)
    if not by_class:
        return []
    named = {init.owner.name.value: init.owner for init in inits}
    out = []
    for cls in ctx.nodes(cst.ClassDef):
        bases = [b.value for b in cls.bases if b.keyword is None]
        base = named.get(bases[0].value) if bases and isinstance(bases[0], cst.Name) else None
        init, base_init = _init_of(cls), _init_of(base) if base is not None else None
        if base is None or init is None or base_init is None or id(cls) in by_class:
            continue
        out += [f for inner in by_class[id(base)] for f in _forwarded_through(ctx, cls, init, base_init, inner)]
    return out


def _forwarded_through(ctx, cls: cst.ClassDef, init: cst.FunctionDef, base_init: cst.FunctionDef, inner) -> list:
    """The ``ForwardedInit`` of each ``super().__init__(...)`` of ``init`` through the base's DataLoader
    construction ``inner`` (one per construction when the base builds it on several branches)."""
    params = [p.name.value for p in base_init.params.params[1:]]
    keyword_only = [p.name.value for p in base_init.params.kwonly_params]
    rest = base_init.params.star_kwarg
    # the base hands its ``**kwargs`` on: they are the outer call's other keywords
    hands_on = rest is not None and any(
        a.star == "**" and isinstance(a.value, cst.Name) and a.value.value == rest.name.value for a in inner.call.args
    )
    out = []
    for call in ctx.tree.scope_nodes(init, cst.Call):
        if not _is_super_init(call):
            continue
        outer = BoundCall(call, Signature(params, keyword_only))
        args = {}
        for name, arg in inner.args.items():
            forwarded = arg.value.value if isinstance(arg.value, cst.Name) and _forwarded(ctx, base_init, arg.value.value) else None
            args[name] = outer.args.get(forwarded, arg) if forwarded else arg
        star_kwargs = inner.has_star_kwargs or outer.has_star_kwargs
        if hands_on:
            args.update((k, a) for k, a in outer.args.items() if k not in params and k not in keyword_only and k in DATALOADER.names)
            star_kwargs = outer.has_star_kwargs or sum(a.star == "**" for a in inner.call.args) > 1
        out.append(ForwardedInit(call, cls, args, inner.has_star_args or outer.has_star_args, star_kwargs))
    return out


def _forwarded(ctx, init: cst.FunctionDef, name: str) -> bool:
    """``name`` is a parameter of ``init`` that reaches its DataLoader call unchanged, or replaced only
    when it is ``None`` (``if collate_fn is None: collate_fn = default``)."""
    return none_replacements(ctx, init, name) is not None
