"""What ``self.x`` holds, where it is written and where it is read.

For the attributes of a dataset instance: every ``self.<attr>`` in the methods of
a class family with whether it stores or loads (``self_attr_uses``), which
attributes keep an object an ``__init__`` creates (``held_on_self``) and what kind
of per-process object that is (``handle_kind``, ``rng_kind``, ``rng_factory_kind``), whether ``__init__``
drops it again (``dropped_in_init``), whether anything else in the file gives it a
new value (``stores_elsewhere``), and how it is read: per sample
(``per_sample_loads``), indexed by a local value (``indexed_by_local``) or consumed
by iteration (``consumed_by_iter``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set

import libcst as cst

from dslint.semantics import lifetimes as lt
from dslint.semantics.bindings import is_bound_here, single_assignment
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.classes import methods
from dslint.semantics.handle_kinds import HANDLE_KINDS
from dslint.semantics.kept_objects import keeping_construction
from dslint.semantics.regions import LOOP, self_attr, self_name
from dslint.semantics.start_methods import workers_not_forked
from dslint.semantics.walk import iter_subtree, plain_returns


def method_of(ctx, node: cst.CSTNode, family_ids: Optional[Set[int]]) -> Optional[cst.FunctionDef]:
    """The method of a family class (of any class: ``None``) that lexically contains ``node``."""
    func = ctx.enclosing_function(node)
    while func is not None:
        owner = ctx.method_class(func)
        if owner is not None:
            return func if family_ids is None or id(owner) in family_ids else None
        func = ctx.enclosing_function(func)
    return None


def is_store(ctx, node: cst.CSTNode) -> bool:
    """``node`` is written (an assignment, augmented assignment or ``del`` target)."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.AssignTarget) and parent.target is node:
        return True
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign)) and parent.target is node:
        return True
    if isinstance(parent, cst.Del):
        return True
    if isinstance(parent, (cst.Element, cst.StarredElement)):
        grand = ctx.parent(parent)
        if isinstance(grand, (cst.Tuple, cst.List)):
            return is_store(ctx, grand)
    return False


def is_read(ctx, name: cst.Name) -> bool:
    """``name`` is read here (not bound, written, deleted, an attribute's or a keyword's name)."""
    parent = ctx.parent(name)
    if isinstance(parent, cst.Attribute) and parent.attr is name or isinstance(parent, cst.Arg) and parent.keyword is name:
        return False
    if isinstance(parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.NameItem)):
        return False
    return not (is_bound_here(ctx, name) or is_store(ctx, name))


def store_value(ctx, target: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The value assigned to the assignment target ``target`` (None: none known)."""
    parent = ctx.parent(target)
    if isinstance(parent, cst.AssignTarget):
        assign = ctx.parent(parent)
        return assign.value if isinstance(assign, cst.Assign) else None
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign)):
        return parent.value
    return None


def absent_or_none(expr: Optional[cst.CSTNode]) -> bool:
    """No expression at all, or the literal ``None``."""
    return expr is None or (isinstance(expr, cst.Name) and expr.value == "None")


def assign_targets(stmt: cst.CSTNode) -> List[cst.CSTNode]:
    """The targets of an assignment statement (an annotation without a value has none)."""
    if isinstance(stmt, cst.Assign):
        return [t.target for t in stmt.targets]
    if isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
        return [stmt.target]
    return []


def self_stores(init: cst.FunctionDef, self_param: str) -> Dict[str, cst.CSTNode]:
    """``attr -> the last statement of init that assigns self.<attr> a value``."""
    last: Dict[str, cst.CSTNode] = {}
    for node in iter_subtree(init.body, into_scopes=False):
        if not isinstance(node, (cst.Assign, cst.AnnAssign)) or node.value is None:
            continue
        for target in assign_targets(node):
            attr = self_attr(target, self_param)
            if attr is not None:
                last[attr] = node
    return last


# --------------------------------------------------------------------------- uses


@dataclass
class AttrUse:
    node: cst.Attribute
    method: cst.FunctionDef
    store: bool


def self_attr_uses(ctx, family: List[cst.ClassDef], attr: str) -> List[AttrUse]:
    """Every ``self.<attr>`` in the methods of ``family`` (loads and stores)."""
    family_ids = {id(c) for c in family}
    uses = []
    for node in ctx.nodes(cst.Attribute):
        if node.attr.value != attr or not isinstance(node.value, cst.Name):
            continue
        method = method_of(ctx, node, family_ids)
        if method is None or node.value.value != self_name(method):
            continue
        uses.append(AttrUse(node, method, is_store(ctx, node)))
    return uses


def per_sample_loads(ctx, uses: List[AttrUse]) -> List[AttrUse]:
    return [use for use in uses if not use.store and ctx.is_per_sample(use.node)]


def indexed_by_local(ctx, use: AttrUse) -> bool:
    """``self.x[i]`` indexed by a local value (the sample index, a loop item...).

    A constant index, a slice, or an index read only from ``self`` (a counter such
    as ``self.pos``) is not per-sample random access.
    """
    parent = ctx.parent(use.node)
    if not isinstance(parent, cst.Subscript) or parent.value is not use.node:
        return False
    if len(parent.slice) != 1:
        return False
    index = parent.slice[0].slice
    if not isinstance(index, cst.Index) or ctx.literal(index.value) is not UNKNOWN:
        return False
    self_param = self_name(use.method)
    for node in iter_subtree(index.value, into_scopes=False):
        if not isinstance(node, cst.Name) or node.value == self_param:
            continue
        outer = ctx.parent(node)
        if isinstance(outer, cst.Attribute) and outer.attr is node:
            continue  # the attribute part of x.attr
        if ctx.qualname(node) is not None:
            continue  # an import, a module-level def or a builtin
        if ctx.literal(node) is not UNKNOWN:
            continue  # a module constant
        return True
    return False


def stores_elsewhere(
    ctx, family: List[cst.ClassDef], attr: str, init: cst.FunctionDef, construction=(), copies: bool = True
) -> bool:
    """Is ``attr`` given a new (non-None) value outside ``init`` (and the ``construction``
    functions, which run with it before the fork)? With ``copies=False``, a value that is
    another attribute (``self.rng = self.parent.rng``) shares an existing object: no re-creation.

    On ``self`` in any method of the class family (a lazy or per-worker reopen, a
    ``__setstate__`` when the project starts its workers with spawn/forkserver only, a ``worker_init``
    method...), on any other object anywhere in the file (``get_worker_info().dataset.<attr> = ...``),
    or via ``setattr``.
    """
    family_ids = {id(c) for c in family}
    for node in ctx.nodes(cst.Attribute):
        if node.attr.value != attr or not is_store(ctx, node):
            continue
        if ctx.enclosing_function(node) is init or any(ctx.enclosing_function(node) is f for f in construction):
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Del):
            continue
        if absent_or_none(store_value(ctx, node)) and not isinstance(parent, (cst.Element, cst.StarredElement)):
            continue
        if not copies and isinstance(store_value(ctx, node), cst.Attribute):
            continue
        method = method_of(ctx, node, None)  # innermost method, of any class
        if method is not None and method.name.value == "__setstate__" and not workers_not_forked(ctx.view.project_start_methods()):
            continue  # (run on unpickling: forked workers get the parent's object as it is)
        on_self = method is not None and isinstance(node.value, cst.Name) and node.value.value == self_name(method)
        if on_self and id(ctx.method_class(method)) not in family_ids:
            continue  # self.<attr> of an unrelated class: not this instance
        return True
    for call in ctx.calls_to("builtins.setattr"):
        if len(call.args) >= 2:
            name = ctx.literal(call.args[1].value)
            if name is UNKNOWN or name == attr:
                return True
    return False


_ITERATING_CALLS = frozenset(
    {
        "builtins.iter",
        "builtins.next",
        "builtins.enumerate",
        "builtins.zip",
        "builtins.list",
        "builtins.tuple",
        "builtins.map",
        "builtins.filter",
        "csv.reader",
        "csv.DictReader",
        "itertools.islice",
        "itertools.chain",
    }
)
_ITERATING_METHODS = frozenset({"__next__", "__iter__", "readline", "readlines", "fetchone", "fetchmany", "fetchall"})


def _in_iteration(ctx, node: cst.CSTNode) -> bool:
    """Is this ``self.x`` consumed by iteration (``for .. in self.x``, ``next(self.x)``)?"""
    parent = ctx.parent(node)
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node:
        return True
    if isinstance(parent, cst.Yield) and isinstance(parent.value, cst.From):
        return True
    if isinstance(parent, cst.From) and parent.item is node:
        return True
    if isinstance(parent, cst.Arg):
        outer = ctx.parent(parent)
        if isinstance(outer, cst.Call) and ctx.call_name(outer) in _ITERATING_CALLS:
            return True
    return isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _ITERATING_METHODS


def consumed_by_iter(ctx, uses: List[AttrUse]) -> bool:
    """The attribute is iterated in ``__iter__`` (or a generator it reaches)."""
    for use in uses:
        if use.store or not _in_iteration(ctx, use.node):
            continue
        func = ctx.enclosing_function(use.node)
        if func is None:
            continue
        if func.name.value in ("__iter__", "__next__") or ctx.per_sample_mode(func) == LOOP:
            return True
        if ctx.regions.get(func).is_generator:
            return True
    return False


# --------------------------------------------------------------------------- holders


@dataclass
class Held:
    """An object created in ``__init__`` and the ``self`` attributes that keep it."""

    call: cst.Call
    attrs: Dict[str, cst.CSTNode] = field(default_factory=dict)  # attr -> storing statement


def _is_key_subscript(sub: cst.Subscript) -> bool:
    """``f["images"]`` (a group or dataset of an HDF5 file), not ``d[:]``/``d[0]`` (loaded data).

    A string key anywhere in the chain; a variable key only directly on the file,
    where subscripts are always names (further down it may be an index).
    """
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return False
    index = sub.slice[0].slice.value
    if isinstance(index, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    return isinstance(index, (cst.Name, cst.Attribute)) and not isinstance(sub.value, cst.Subscript)


def _strip(expr: cst.CSTNode, derive_methods, derive_subscript: bool) -> cst.CSTNode:
    """Peel derivations that keep the object alive (``f["x"]``, ``env.begin()``)."""
    while True:
        if derive_subscript and isinstance(expr, cst.Subscript) and _is_key_subscript(expr):
            expr = expr.value
            continue
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in derive_methods
        ):
            expr = expr.func.value
            continue
        return expr


def _derived_from(ctx, call: cst.Call, derive_methods, derive_subscript: bool) -> cst.CSTNode:
    """The outermost derivation of ``call`` (``call["key"]``, ``call.begin()``), through
    the conditional alternatives that may pick it (``rng if rng else default_rng()``,
    ``rng or default_rng()``)."""
    node: cst.CSTNode = call
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.IfExp) and parent.test is not node:
            node = parent
            continue
        if isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.Or):
            node = parent
            continue
        if derive_subscript and isinstance(parent, cst.Subscript) and parent.value is node and _is_key_subscript(parent):
            node = parent
            continue
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in derive_methods:
            grand = ctx.parent(parent)
            if isinstance(grand, cst.Call) and grand.func is parent:
                node = grand
                continue
        return node


def _keep_self_targets(held: Held, stmt: cst.CSTNode, self_param: str, first_wins: bool) -> None:
    for target in assign_targets(stmt):
        attr = self_attr(target, self_param)
        if attr is None:
            continue
        if first_wins:
            held.attrs.setdefault(attr, stmt)
        else:
            held.attrs[attr] = stmt


def _closed_local(sub: cst.CSTNode, local: str) -> bool:
    """``local.close()``, or ``with local:``."""
    if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute):
        if isinstance(sub.func.value, cst.Name) and sub.func.value.value == local and sub.func.attr.value == "close":
            return True
    return isinstance(sub, cst.WithItem) and isinstance(sub.item, cst.Name) and sub.item.value == local


def held_on_self(
    ctx, init: cst.FunctionDef, self_param: str, call: cst.Call, derive_methods=(), derive_subscript=False
) -> Optional[Held]:
    """Which ``self`` attributes of ``init`` keep what ``call`` creates.

    ``self.x = call`` (also through derivations such as ``call["key"]`` or
    ``call.begin()``), or ``name = call`` followed by ``self.x = name``. None when
    the object is closed in ``__init__`` (``with``, ``.close()``), or kept nowhere.
    """
    node = _derived_from(ctx, call, derive_methods, derive_subscript)
    parent = ctx.parent(node)
    if not isinstance(parent, (cst.Assign, cst.AnnAssign)) or parent.value is not node:
        return None
    held = Held(call)
    local = None
    for target in assign_targets(parent):
        if self_attr(target, self_param) is not None:
            held.attrs[target.attr.value] = parent
        elif isinstance(target, cst.Name):
            local = target.value
    body_nodes = list(iter_subtree(init.body, into_scopes=False))
    if local is not None:
        for sub in body_nodes:
            if _closed_local(sub, local):
                return None  # the local is closed, or handed to a with block: nothing kept
            if not isinstance(sub, (cst.Assign, cst.AnnAssign)) or sub is parent or sub.value is None:
                continue
            base = _strip(sub.value, derive_methods, derive_subscript)
            if isinstance(base, cst.Name) and base.value == local:
                _keep_self_targets(held, sub, self_param, first_wins=False)
            elif isinstance(sub.value, cst.Call) and any(
                    isinstance(a.value, cst.Name) and a.value.value == local
                    and keeping_construction(ctx, a.value) is sub.value for a in sub.value.args):
                _keep_self_targets(held, sub, self_param, first_wins=True)  # `self.slicer = Slicer(local)`
    # self attributes derived from a kept one (self.txn = self.env.begin())
    for sub in body_nodes:
        if not isinstance(sub, (cst.Assign, cst.AnnAssign)) or sub.value is None:
            continue
        base = _strip(sub.value, derive_methods, derive_subscript)
        if base is not sub.value and self_attr(base, self_param) in held.attrs:
            _keep_self_targets(held, sub, self_param, first_wins=True)
    return held if held.attrs else None


def dropped_in_init(ctx, init: cst.FunctionDef, self_param: str, attr: str, site: cst.CSTNode, methods=("close",)) -> bool:
    """After ``site``, ``__init__`` closes, deletes or replaces ``self.<attr>`` (not in the other
    arm of an ``if`` that ``site`` is in: those never both run)."""
    seen_site = False
    inside = {id(node) for node in iter_subtree(site, into_scopes=False)}
    other_arms = set()
    for ancestor in ctx.ancestors(site):
        if ancestor is init:
            break
        if isinstance(ancestor, cst.If) and ancestor.orelse is not None:
            in_body = any(a is ancestor.body for a in ctx.ancestors(site))
            arm = ancestor.orelse if in_body else ancestor.body
            other_arms.update(id(node) for node in iter_subtree(arm, into_scopes=False))
    for sub in iter_subtree(init.body, into_scopes=False):
        if sub is site:
            seen_site = True
            continue
        if not seen_site or id(sub) in inside or id(sub) in other_arms or self_attr(sub, self_param) != attr:
            continue
        if is_store(ctx, sub):
            return True
        parent = ctx.parent(sub)
        if isinstance(parent, cst.Attribute) and parent.value is sub and parent.attr.value in methods:
            grand = ctx.parent(parent)
            if isinstance(grand, cst.Call) and grand.func is parent:
                return True
        if isinstance(parent, cst.WithItem) and parent.item is sub:
            return True  # ``with self.f:`` closes it at the end of the block
    return False


# --------------------------------------------------------------------------- kinds
# What an ``__init__`` call creates that carries per-process state when ``self`` keeps
# it: an OS handle or connection, or a random generator object.

_HANDLE_TAILS = frozenset(q.rsplit(".", 1)[-1] for q in HANDLE_KINDS)


def _call_tail(call: cst.Call) -> Optional[str]:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)


def handle_kind(ctx, call: cst.Call) -> Optional[str]:
    """The kind of handle ``call`` opens (a ``HANDLE_KINDS`` value), or None."""
    func = call.func
    tail = _call_tail(call)
    if tail is None:
        return None
    if tail == "open" and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        return "file" if lt.opener_kind(ctx, call) == "file" else None  # Path(p).open()
    if tail == "load" and ctx.call_name(call) == "numpy.load":
        return "npz" if lt.opener_kind(ctx, call) == lt.NPZ else None  # an archive keeps its zip file open
    if tail not in ctx.names.call_tails(_HANDLE_TAILS):
        return None
    kind = HANDLE_KINDS.get(ctx.call_name(call) or "")
    if kind == "image" and lt.opener_kind(ctx, call) != "image":
        return None  # Image.open(BytesIO(...)) or of a file object: not Pillow's handle
    return kind


_RNG_KINDS = {
    "numpy.random.default_rng": "numpy",
    "numpy.random.RandomState": "numpy",
    "numpy.random.Generator": "numpy",
    "numpy.random.mtrand.RandomState": "numpy",
    "random.Random": "random",
    "torch.Generator": "torch",
    "torch._C.Generator": "torch",
}
_RNG_TAILS = frozenset(q.rsplit(".", 1)[-1] for q in _RNG_KINDS)


def rng_kind(ctx, call: cst.Call) -> Optional[str]:
    """"numpy", "random" or "torch" for a call that creates a random generator object."""
    tail = _call_tail(call)
    if tail is None or tail not in ctx.names.call_tails(_RNG_TAILS):
        return None
    return _RNG_KINDS.get(ctx.call_name(call) or "")


def _returned_kind(ctx, func: cst.FunctionDef) -> Optional[str]:
    """The RNG kind every ``return`` of ``func`` hands back, directly or through a local."""
    returns = plain_returns(func, ctx.tree)
    if returns is None:
        return None
    kinds = set()
    for node in returns:
        value = node.value
        if isinstance(value, cst.Name):
            value = single_assignment(ctx.tree, value)
        kinds.add(rng_kind(ctx, value) if isinstance(value, cst.Call) else None)
    return kinds.pop() if len(kinds) == 1 else None


def rng_factory_kind(ctx, call: cst.Call, self_param: Optional[str], family: List[cst.ClassDef]) -> Optional[str]:
    """The RNG kind a call to a factory of this file returns: a module-level function, or
    a ``self.m(...)`` method of the class family, whose every ``return`` is a generator
    object creation (``return np.random.RandomState(seed)``). None for anything else."""
    func = call.func
    target: Optional[cst.FunctionDef] = None
    if isinstance(func, cst.Attribute) and self_param and self_attr(func, self_param):
        for cls in family:
            target = methods(cls).get(func.attr.value) or target
    elif isinstance(func, cst.Name):
        name = ctx.call_name(call)
        if name == f"{ctx.names.modname}.{func.value}":
            for node in ctx.nodes(cst.FunctionDef):
                if node.name.value == func.value and ctx.tree.scope_node(node) is None:
                    target = node
    return _returned_kind(ctx, target) if target is not None else None
