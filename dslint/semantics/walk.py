"""One fast pass over a libcst tree: parents, nodes grouped by type, and scopes.

libcst's visitor protocol calls back for every node, whitespace included; that
costs as much as parsing. The rules only need the syntactic nodes, so this walker
follows the dataclass fields that hold them and skips whitespace, brackets and
punctuation (the field table is computed once per node class). It is ~15x faster
than ``Module.visit`` and is the only full traversal a checked file gets.

The same pass records, for every node, its nearest enclosing function, lambda or
class (``scope_of``), and for every such scope the nodes of its body by type
(``scope_nodes``: what ``iter_subtree(scope.body, into_scopes=False)`` yields), so
the per-function questions of the summary and the name resolver never walk a
function again.

Type tests: libcst's node classes have ``ABCMeta`` as their metaclass, so an
``isinstance`` that fails runs ``ABCMeta.__instancecheck__`` (a Python-level call).
Hot paths here test ``type(node)`` against sets of concrete classes, and
``isa(node, cls)`` caches any class-subclass decision per concrete type.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple, Type

import libcst as cst

_SKIP_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "header",
        "footer",
        "leading_lines",
        "lines_after_decorators",
        "newline",
        "colon",
        "equal",
        "dot",
        "operator",
        "asynchronous",
        "lbrace",
        "rbrace",
        "lbracket",
        "rbracket",
        "indent",
        "trailing_whitespace",
        "arrow",
        "star",
        "at",
    }
)

_FIELDS: Dict[type, tuple] = {}
_CSTNode = cst.CSTNode

# type(value) -> 1 (a CSTNode), 2 (a tuple or list), 0 (anything else)
_KIND: Dict[type, int] = {tuple: 2, list: 2, type(None): 0, str: 0}

SCOPE_TYPES = frozenset({cst.FunctionDef, cst.Lambda, cst.ClassDef})


def _kind(cls: type) -> int:
    kind = _KIND.get(cls)
    if kind is None:
        kind = _KIND[cls] = 1 if issubclass(cls, _CSTNode) else 0
    return kind


_ISA: Dict[Tuple[type, object], bool] = {}


def isa(node: object, classes) -> bool:
    """``isinstance(node, classes)``, with the answer cached per concrete type."""
    key = (type(node), classes)
    answer = _ISA.get(key)
    if answer is None:
        answer = _ISA[key] = isinstance(node, classes)
    return answer


def _fields_of(cls: type) -> tuple:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in _SKIP_FIELDS and not f.name.startswith("whitespace")
        )
        _FIELDS[cls] = names
    return names


_RFIELDS: Dict[type, tuple] = {}


def _reversed_fields_of(cls: type) -> tuple:
    names = _RFIELDS.get(cls)
    if names is None:
        names = _RFIELDS[cls] = tuple(reversed(_fields_of(cls)))
    return names


def body_buckets(scope: cst.CSTNode, tree: Optional["TreeIndex"] = None) -> Dict[type, list]:
    """{type: nodes} of ``scope``'s body, nested scopes excluded (what
    ``iter_subtree(scope.body, into_scopes=False)`` yields): from the tree's walk
    when ``scope`` is one of its nodes, else by walking the body."""
    buckets = tree.scope_buckets(scope) if tree is not None else None
    if buckets is None:
        buckets = {}
        for node in iter_subtree(scope.body, into_scopes=False):
            bucket = buckets.get(type(node))
            if bucket is None:
                buckets[type(node)] = [node]
            else:
                bucket.append(node)
    return buckets


class TreeIndex:
    """Parents of every syntactic node, the nodes of each type in source order, and scopes."""

    __slots__ = ("parent", "by_type", "scope_of", "_scoped", "_memo")

    def __init__(self, module: cst.Module) -> None:
        self.parent: Dict[int, cst.CSTNode] = {}
        self.by_type: Dict[type, List[cst.CSTNode]] = {}
        # id(node) -> nearest enclosing FunctionDef/Lambda/ClassDef (None: module level)
        self.scope_of: Dict[int, Optional[cst.CSTNode]] = {}
        # id(scope node) (0: the module) -> {type: nodes of its body, source order}
        self._scoped: Dict[int, Dict[type, list]] = {}
        self._memo: Dict[object, object] = {}
        self._walk(module)

    def memo(self, key, compute):
        """``compute()``, once per tree and ``key``: the one place per-file answers are
        cached (rules reach it as ``FileContext.memo``). Keys are tuples that start with
        the asking module's name, e.g. ``("fork.family", id(cls))``."""
        memo = self._memo
        if key in memo:
            return memo[key]
        value = memo[key] = compute()
        return value

    def _walk(self, root: cst.CSTNode) -> None:
        parent = self.parent
        scope_of = self.scope_of
        by_type = self.by_type
        scoped = self._scoped
        reversed_fields = _RFIELDS
        kinds = _KIND
        scope_types = SCOPE_TYPES
        module_buckets: Dict[type, list] = {}
        scoped[0] = module_buckets
        scope_of[id(root)] = None
        # Iterative pre-order walk: children are pushed last field first, so that they
        # pop in source order. Entries: (node, its scope, the body buckets it belongs
        # to or None).
        stack: list = [(root, None, module_buckets)]
        pop = stack.pop
        push = stack.append
        while stack:
            node, scope, buckets = pop()
            cls = type(node)
            bucket = by_type.get(cls)
            if bucket is None:
                by_type[cls] = [node]
            else:
                bucket.append(node)
            if buckets is not None:
                bucket = buckets.get(cls)
                if bucket is None:
                    buckets[cls] = [node]
                else:
                    bucket.append(node)
            names = reversed_fields.get(cls) or _reversed_fields_of(cls)
            if cls in scope_types:
                # a new scope: its body's nodes go to its own buckets, the rest
                # (decorators, parameters, bases) to none
                body = node.body
                own: Dict[type, list] = {}
                scoped[id(node)] = own
                child_scope = node
            else:
                own = buckets
                body = None
                child_scope = scope
            for name in names:
                value = getattr(node, name)
                kind = kinds.get(type(value))
                if kind is None:
                    kind = _kind(type(value))
                if kind == 1:
                    key = id(value)
                    parent[key] = node
                    scope_of[key] = child_scope
                    if body is None:
                        push((value, child_scope, own))
                    else:
                        push((value, child_scope, own if value is body else None))
                elif kind == 2:
                    for item in reversed(value):
                        k = kinds.get(type(item))
                        if k is None:
                            k = _kind(type(item))
                        if k == 1:
                            key = id(item)
                            parent[key] = node
                            scope_of[key] = child_scope
                            push((item, child_scope, own if body is None else None))

    def nodes(self, cls: Type[cst.CSTNode]) -> list:
        return self.by_type.get(cls, [])

    def parent_of(self, node: cst.CSTNode):
        return self.parent.get(id(node))

    def ancestors(self, node: cst.CSTNode):
        parent = self.parent
        current = parent.get(id(node))
        while current is not None:
            yield current
            current = parent.get(id(current))

    def scope_node(self, node: cst.CSTNode):
        """The nearest FunctionDef, Lambda or ClassDef above ``node`` (None: module level)."""
        key = id(node)
        if key in self.scope_of:
            return self.scope_of[key]
        for ancestor in self.ancestors(node):  # a node not from this tree's walk
            if type(ancestor) in SCOPE_TYPES:
                return ancestor
        return None

    def scope_nodes(self, scope: Optional[cst.CSTNode], cls: type) -> list:
        """Nodes of type ``cls`` in the body of ``scope`` (None: the module), nested
        function, lambda and class bodies excluded (their defining node included)."""
        buckets = self._scoped.get(id(scope) if scope is not None else 0)
        if buckets is None:
            return []
        return buckets.get(cls, [])

    def scope_buckets(self, scope: Optional[cst.CSTNode]) -> Optional[Dict[type, list]]:
        """{type: nodes} of the body of ``scope`` (see ``scope_nodes``); None when
        ``scope`` is not a function, lambda or class of this tree."""
        return self._scoped.get(id(scope) if scope is not None else 0)


_VALIDATE = cst.CSTNode.__dict__["__post_init__"]
# The dataclass ``__init__`` calls ``self.__post_init__()`` and ignores the result:
# a C method (``object.__sizeof__``: returns an int, touches nothing) is the
# cheapest stand-in, ~10% of a parse cheaper than a Python ``def`` doing nothing.
_TRUSTED = object.__sizeof__


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module``, without re-validating each node the parser builds.

    Every libcst node constructor runs ``_validate`` (``CSTNode.__post_init__``):
    checks meant for trees built by hand, which a tree the parser built from source
    always passes (libcst's own note there: "PERF: ... avoid validating the tree when
    parsing a file"). Skipping them takes ~20% off the parse. Validation is switched
    off only for the duration of the parse; nothing else builds nodes meanwhile
    (the analysis runs on one thread per process).
    """
    base = cst.CSTNode
    base.__post_init__ = _TRUSTED
    try:
        return cst.parse_module(text)
    finally:
        base.__post_init__ = _VALIDATE


def last_statement(suite) -> Optional[cst.CSTNode]:
    """The last statement a suite runs: the last small statement of its last line (``return``
    in ``...; return x``), the last compound statement, or None for an empty or missing suite."""
    body = getattr(suite, "body", None) or [None]
    last = body[-1]
    return last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else last


def iter_subtree(node: cst.CSTNode, *, into_scopes: bool = True):
    """Pre-order syntactic nodes under ``node`` (itself included).

    With ``into_scopes=False`` the walk does not enter nested function, lambda
    or class bodies (their defining node itself is still yielded).
    """
    reversed_fields = _RFIELDS
    kinds = _KIND
    scope_types = SCOPE_TYPES
    stack = [node]
    pop = stack.pop
    push = stack.append
    first = True
    while stack:
        current = pop()
        yield current
        cls = type(current)
        if not into_scopes and not first and cls in scope_types:
            continue
        first = False
        # last field first, so that children pop in source order
        for name in reversed_fields.get(cls) or _reversed_fields_of(cls):
            value = getattr(current, name)
            kind = kinds.get(type(value))
            if kind is None:
                kind = _kind(type(value))
            if kind == 1:
                push(value)
            elif kind == 2:
                for item in reversed(value):
                    k = kinds.get(type(item))
                    if k is None:
                        k = _kind(type(item))
                    if k == 1:
                        push(item)


_SCOPE_NODES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def plain_returns(func: cst.FunctionDef, tree: Optional["TreeIndex"] = None) -> Optional[List[cst.Return]]:
    """The ``return`` statements of ``func``'s own body (not of nested scopes), in source order;
    None when the function is a generator or a coroutine (a ``yield`` or ``await`` in it).
    With the function's ``tree``, from that tree's one walk (``body_buckets``)."""
    buckets = body_buckets(func, tree)
    if buckets.get(cst.Yield) or buckets.get(cst.Await):
        return None
    return list(buckets.get(cst.Return, ()))
