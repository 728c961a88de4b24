"""Which code inside a function runs once per sample.

A function reached from ``__getitem__`` runs per sample as a whole. A generator
(``__iter__`` and the generators it reaches) runs per sample only inside the loops
that yield; the code before the loop runs once per epoch. In both, a block guarded
by a "not created yet" test on a ``self`` attribute (the lazy, once-per-worker
pattern ``if self.db is None: self.db = open_db()``) runs once, not per sample.
These facts are computed here once and used by the project summary (reachability)
and by the rules (is this node per-sample?).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set

import libcst as cst

from dslint.semantics.names import binding_kind, dotted_parts
from dslint.semantics.project import LOOP, WHOLE  # noqa: F401  (the per-sample modes, re-exported)
from dslint.semantics.walk import TreeIndex, iter_subtree

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def self_name(func: cst.FunctionDef) -> Optional[str]:
    """The name of a method's first parameter (``self`` by convention)."""
    params = (*func.params.posonly_params, *func.params.params)
    if not params:
        return None
    return None if binding_kind(func) else params[0].name.value


def self_attr(node: cst.CSTNode, self_param: Optional[str]) -> Optional[str]:
    """``X`` for ``self.X`` (the attribute directly on the instance)."""
    if (
        self_param
        and type(node) is cst.Attribute
        and type(node.value) is cst.Name
        and node.value.value == self_param
    ):
        return node.attr.value
    return None


def _checked_attrs(test: cst.BaseExpression, self_param: Optional[str]) -> Set[str]:
    """Self attributes a test checks for "not set yet"."""
    found: Set[str] = set()
    if isinstance(test, cst.BooleanOperation):
        return _checked_attrs(test.left, self_param) | _checked_attrs(test.right, self_param)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        attr = self_attr(inner, self_param)
        if attr:
            found.add(attr)
        if isinstance(inner, cst.Call):
            parts = dotted_parts(inner.func)
            if parts == ["hasattr"] and len(inner.args) >= 2:
                value = inner.args[1].value
                if isinstance(value, cst.SimpleString):
                    found.add(value.evaluated_value)
        return found
    if isinstance(test, cst.Comparison):
        left_attr = self_attr(test.left, self_param)
        for comparison in test.comparisons:
            op = comparison.operator
            right = comparison.comparator
            if isinstance(op, (cst.Is, cst.Equal)) and isinstance(right, cst.Name) and right.value == "None":
                if left_attr:
                    found.add(left_attr)
            if isinstance(op, (cst.NotEqual, cst.IsNot)) and left_attr and not (
                    isinstance(right, cst.Name) and right.value == "None"):
                # ``if self.pid != os.getpid():`` -- reopened per process (``is not None``: set already)
                found.add(left_attr)
            if isinstance(op, cst.NotIn) and isinstance(test.left, cst.SimpleString):
                found.add(test.left.evaluated_value)
            if isinstance(op, cst.NotIn):
                target_attr = self_attr(right, self_param)
                if target_attr:
                    found.add(target_attr)
        return found
    return found


_ASSIGNING = frozenset({cst.AssignTarget, cst.AnnAssign, cst.AugAssign})


def _assigned_attrs(body: cst.BaseSuite, self_param: Optional[str]) -> Set[str]:
    assigned: Set[str] = set()
    for node in iter_subtree(body, into_scopes=False):
        if type(node) not in _ASSIGNING:
            continue
        target = node.target
        if type(target) is cst.Subscript:
            target = target.value
        attr = self_attr(target, self_param)
        if attr:
            assigned.add(attr)
    return assigned


def is_lazy_guard(node: cst.If, self_param: Optional[str], cls: Optional[cst.ClassDef] = None) -> bool:
    """``if self.h is None: self.h = ...`` and its relatives (once per worker); with ``cls`` (the
    method's class) also ``if self.index is None: self.build_index()`` where that method of the
    class assigns ``self.index``."""
    if not self_param:
        return False
    checked = _checked_attrs(node.test, self_param)
    if not checked:
        return False
    if checked & _assigned_attrs(node.body, self_param):
        return True
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)} if cls is not None else {}
    for call in iter_subtree(node.body, into_scopes=False):
        if type(call) is cst.Call and not call.args:
            method = methods.get(self_attr(call.func, self_param) or "")
            if method is not None and checked & _assigned_attrs(method.body, self_name(method)):
                return True
    return False


def _class_of(func: cst.FunctionDef, tree: TreeIndex) -> Optional[cst.ClassDef]:
    block = tree.parent_of(func)
    owner = tree.parent_of(block) if type(block) is cst.IndentedBlock else None
    return owner if type(owner) is cst.ClassDef else None


class FunctionRegions:
    """Per-sample facts about one function body."""

    __slots__ = ("func", "self_param", "is_generator", "loops", "lazy_bodies", "_loop_bodies")

    def __init__(self, func: cst.FunctionDef, tree: Optional[TreeIndex] = None) -> None:
        self.func = func
        self.self_param = self_name(func)
        self.is_generator = False
        self.loops: List[cst.CSTNode] = []
        self.lazy_bodies: Set[int] = set()
        buckets = tree.scope_buckets(func) if tree is not None else None
        if buckets is None:
            self._scan(func)
            return
        # the body's nodes by type, from the tree's one walk (source order per type)
        loops = [*buckets.get(cst.For, ()), *buckets.get(cst.While, ())]
        yields = buckets.get(cst.Yield, ())
        self.is_generator = bool(yields)
        ifs = buckets.get(cst.If, ())
        cls = _class_of(func, tree) if ifs and self.self_param else None
        for node in ifs:
            if is_lazy_guard(node, self.self_param, cls):
                self.lazy_bodies.add(id(node.body))
        if yields and loops:
            # a loop yields when one of its body's descendants (in this scope) is a yield
            bodies = {id(loop.body): loop for loop in loops}
            parent = tree.parent
            yielding: Set[int] = set()
            for y in yields:
                current = parent.get(id(y))
                while current is not None and current is not func:
                    loop = bodies.get(id(current))
                    if loop is not None:
                        yielding.add(id(loop))
                    current = parent.get(id(current))
            self.loops = [loop for loop in loops if id(loop) in yielding]
        self._loop_bodies = {id(loop.body) for loop in self.loops}

    def _scan(self, func: cst.FunctionDef) -> None:
        """The same facts by walking the body (a function from no known tree)."""
        loops: List[cst.CSTNode] = []
        yields: List[cst.CSTNode] = []
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, _SCOPES):
                continue
            if isinstance(node, (cst.For, cst.While)):
                loops.append(node)
            elif isinstance(node, cst.Yield):
                yields.append(node)
                self.is_generator = True
            elif isinstance(node, cst.If) and is_lazy_guard(node, self.self_param):
                self.lazy_bodies.add(id(node.body))
        if yields:
            for loop in loops:
                if any(_contains(loop.body, y) for y in yields):
                    self.loops.append(loop)
        self._loop_bodies = {id(loop.body) for loop in self.loops}

    def classify(self, node: cst.CSTNode, ancestors: List[cst.CSTNode]) -> tuple[bool, bool]:
        """(in a yielding loop body, in a lazy once-only block) for ``node``.

        ``ancestors`` runs from ``node``'s parent up to (not including) the function.
        """
        in_loop = False
        lazy = False
        if not self._loop_bodies and not self.lazy_bodies:
            return in_loop, lazy
        for ancestor in ancestors:
            key = id(ancestor)
            if key in self._loop_bodies:
                in_loop = True
            if key in self.lazy_bodies:
                lazy = True
        return in_loop, lazy


def _contains(root: cst.CSTNode, target: cst.CSTNode) -> bool:
    for node in iter_subtree(root, into_scopes=False):
        if node is target:
            return True
    return False


def is_cached(func: cst.FunctionDef) -> bool:
    """Memoised functions (``functools.lru_cache``/``cache``) run once per argument."""
    for decorator in func.decorators:
        expr = decorator.decorator
        if isinstance(expr, cst.Call):
            expr = expr.func
        parts = dotted_parts(expr)
        if parts and parts[-1] in ("lru_cache", "cache", "cached_property"):
            return True
    return False


class RegionCache:
    """FunctionRegions per function node, computed on first use.

    With the file's ``TreeIndex`` (given here, or set by the summary), each
    function's facts come from the tree's per-scope node lists instead of a walk.
    """

    def __init__(self, tree: Optional[TreeIndex] = None) -> None:
        self._by_id: Dict[int, FunctionRegions] = {}
        self.tree = tree

    def get(self, func: cst.FunctionDef) -> FunctionRegions:
        regions = self._by_id.get(id(func))
        if regions is None:
            regions = FunctionRegions(func, self.tree)
            self._by_id[id(func)] = regions
        return regions
