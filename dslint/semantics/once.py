"""Code that runs at most once per object: behind a "not set yet" guard on an
attribute of ``self`` that the guarded code sets (the lazy once-per-worker pattern).

Used by ``lifetimes`` (a handle opened once is not one per sample) and ``dataflow``.

``every_few_calls`` is code behind a counter of ``self`` that its function compares and resets
(``if self.seen < self.every: return`` ... ``self.seen = 0``): it runs once every few samples,
which per-sample cost rules do not count as per sample (a handle opened there still counts).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.bindings import block_assignment
from dslint.semantics.loops import loader_loops
from dslint.semantics.names import dotted_parts
from dslint.semantics.regions import self_name
from dslint.semantics.walk import iter_subtree, last_statement


def _chain(expr: cst.CSTNode) -> Optional[str]:
    parts = dotted_parts(expr)
    return ".".join(parts) if parts else None


def _hasattr_chain(call: cst.CSTNode) -> Optional[str]:
    """``OBJ.name`` for ``hasattr(OBJ, "name")``."""
    if not isinstance(call, cst.Call) or dotted_parts(call.func) != ["hasattr"] or len(call.args) < 2:
        return None
    owner = _chain(call.args[0].value)
    value = call.args[1].value
    if owner and isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
        return f"{owner}.{value.evaluated_value}"
    return None


def _getattr_chain(call: cst.CSTNode) -> Optional[str]:
    """``OBJ.name`` for ``getattr(OBJ, "name", None)``."""
    if not isinstance(call, cst.Call) or dotted_parts(call.func) != ["getattr"] or len(call.args) != 3:
        return None
    owner = _chain(call.args[0].value)
    value = call.args[1].value
    default = call.args[2].value
    if (
        owner
        and isinstance(value, cst.SimpleString)
        and isinstance(value.evaluated_value, str)
        and isinstance(default, cst.Name)
        and default.value == "None"
    ):
        return f"{owner}.{value.evaluated_value}"
    return None


def _attribute_chain(expr: cst.CSTNode) -> Optional[str]:
    if isinstance(expr, cst.Attribute):
        return _chain(expr)
    return _getattr_chain(expr)


def _tested_chains(test: cst.BaseExpression, want_set: bool) -> set:
    """Attribute chains that ``test`` checks as not set yet (``want_set=False``: ``X is None``,
    ``not X``, ``not hasattr(O, "x")``) or as already set (``X``, ``X is not None``, ``hasattr``)."""
    found: set = set()
    if isinstance(test, cst.BooleanOperation):
        left, right = _tested_chains(test.left, want_set), _tested_chains(test.right, want_set)
        if isinstance(test.operator, cst.Or) and not want_set and not (left and right):
            return found  # `if self.h is None or force:` runs again whenever `force`
        return left | right
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _tested_chains(test.expression, not want_set)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        right = comparison.comparator
        chain = _attribute_chain(test.left)
        if chain and isinstance(right, cst.Name) and right.value == "None":
            if isinstance(comparison.operator, (cst.Is, cst.Equal)) and not want_set:
                found.add(chain)
            if isinstance(comparison.operator, (cst.IsNot, cst.NotEqual)) and want_set:
                found.add(chain)
        return found
    if want_set:
        chain = _attribute_chain(test) or _hasattr_chain(test)
        if chain:
            found.add(chain)
    return found


def _assigned_chains(root: cst.CSTNode) -> set:
    found = set()
    for node in iter_subtree(root, into_scopes=False):
        if isinstance(node, cst.AssignTarget):
            targets = [node.target]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            targets = [node.target]
        else:
            continue
        while targets:
            target = targets.pop()
            if isinstance(target, (cst.Tuple, cst.List)):
                targets.extend(e.value for e in target.elements)
            elif isinstance(target, cst.Attribute):
                chain = _chain(target)
                if chain:
                    found.add(chain)
    return found


def _on_self(chains: set, selfp: str) -> set:
    return {c for c in chains if c.split(".", 1)[0] == selfp and "." in c}


def _returns_only(block: cst.BaseSuite) -> bool:
    if isinstance(block, cst.SimpleStatementSuite):
        statements = list(block.body)
    else:
        statements = []
        for stmt in block.body:
            statements.extend(stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [stmt])
    return bool(statements) and isinstance(statements[-1], cst.Return) and all(
        isinstance(s, (cst.Return, cst.Expr, cst.Pass)) for s in statements
    )


def once_guarded(ctx, node: cst.CSTNode) -> bool:
    """``node`` runs at most once per object, behind a "not set yet" guard on an attribute
    chain of ``self`` that the guarded code sets. Complements the region classifier with:

    * guards on nested attributes: ``if not hasattr(self.local, "f"): self.local.f = open(p)``,
      ``if getattr(self, "db", None) is None: ...``;
    * an early return once set: ``if self.loaded: return`` ... ``self.loaded = True``;
    * a path replaced by what it opens: ``f = self.files[k]; if isinstance(f, Path): f = open(f);
      self.files[k] = f`` (``_replaces_path_entry``);
    * an empty slot filled once per key: ``if self.files[k] is None: self.files[k] = open(p)``
      (``_fills_tested_slot``);
    * a cache of any container, also a module-level one in a function, filled once per key
      (``filled_once_per_key``).
    """
    func = ctx.enclosing_function(node)
    if func is None:
        return False
    if filled_once_per_key(ctx, node, func):
        return True
    selfp = self_name(func)
    if not selfp:
        return False
    assigned_in_func = None
    for guard, returns in _guards(ctx, node, func):
        if not returns:
            if _on_self(_tested_chains(guard.test, want_set=False), selfp) & _assigned_chains(guard.body):
                return True
            if _replaces_path_entry(ctx, guard, selfp) or _fills_tested_slot(guard, selfp):
                return True
            continue
        checked = _on_self(_tested_chains(guard.test, want_set=True), selfp)
        if checked:
            if assigned_in_func is None:
                assigned_in_func = _assigned_chains(func.body)
            if checked & assigned_in_func:
                return True
    return False


def _guards(ctx, node: cst.CSTNode, func):
    """(``if``, returns) for each ``if`` of ``func`` that decides whether ``node`` runs, innermost
    first: one whose body holds it (False), and one before it in an enclosing block that has no
    ``else`` and only returns (True: ``node`` runs when its test is false)."""
    previous = node
    for ancestor in ctx.ancestors(node):
        if ancestor is func:
            return
        if isinstance(ancestor, cst.If) and previous is ancestor.body:
            yield ancestor, False
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
            for stmt in ancestor.body:
                if stmt is previous:
                    break
                if isinstance(stmt, cst.If) and stmt.orelse is None and _returns_only(stmt.body):
                    yield stmt, True
        previous = ancestor


def every_few_calls(ctx, node: cst.CSTNode) -> bool:
    """``node`` runs once every few calls of its method: behind an early return, or inside an ``if``,
    that orders a counter of ``self`` against another value (``if self.seen < self.every: return``,
    ``if self.seen >= self.every:``) which the method resets to 0 (``self.seen = 0``)."""
    func = ctx.enclosing_function(node)
    selfp = self_name(func) if func is not None else None
    if not selfp:
        return False
    ordered = set()
    for guard, _ in _guards(ctx, node, func):
        ordered |= _ordered_chains(guard.test)
    counters = _on_self(ordered, selfp)
    if not counters:  # (the method's body is walked only for a node behind such a test)
        return False
    resets = {_chain(n.target) for n in iter_subtree(func.body, into_scopes=False) if isinstance(n, cst.AssignTarget)
              and isinstance(n.target, cst.Attribute) and isinstance(ctx.parent(n).value, cst.Integer)
              and ctx.parent(n).value.value == "0"}
    return bool(counters & resets)


def _ordered_chains(test: cst.BaseExpression) -> set:
    """Attribute chains that ``test`` orders against something (``<``, ``<=``, ``>``, ``>=``)."""
    if isinstance(test, cst.BooleanOperation):
        return _ordered_chains(test.left) | _ordered_chains(test.right)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or not isinstance(
            test.comparisons[0].operator, (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)):
        return set()
    return {c for c in (_attribute_chain(test.left), _attribute_chain(test.comparisons[0].comparator)) if c}


def in_once_block(ctx, node: cst.CSTNode) -> bool:
    """``node`` runs at most once per object in its function: inside a lazy guard the region
    classifier knows (``if self.h is None: self.h = ...``, ``regions``) or ``once_guarded``."""
    func = ctx.enclosing_function(node)
    if func is None:
        return False
    chain = []
    for ancestor in ctx.ancestors(node):
        if ancestor is func:
            break
        chain.append(ancestor)
    return ctx.regions.get(func).classify(node, chain)[1] or once_guarded(ctx, node)


def called_only_lazily(ctx, func: cst.FunctionDef) -> bool:
    """``func`` is a method that its class calls (``self.build_index()``), and every such call sits
    in a once-only block (``if self.index is None: self.build_index()``, the method assigning
    ``self.index``): its body runs at most once per object, in the process that first needs it."""
    if ctx.method_class(func) is None:
        return False
    sites = loader_loops(ctx).callers(func)
    return bool(sites) and all(in_once_block(ctx, call) for call in sites)


def _fills_tested_slot(guard: cst.If, selfp: str) -> bool:
    """``if self.files[k] is None: self.files[k] = open(p)`` (or ``if not self.files[k]:``): the
    block fills the slot it finds empty, so it runs once per key (``keyed_by_sample_index`` tells
    a key distinct for every sample)."""
    test = guard.test
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        slot = test.expression
    elif isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Is) \
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None":
        slot = test.left
    else:
        return False
    if not isinstance(slot, cst.Subscript) or (dotted_parts(slot.value) or [""])[0] != selfp:
        return False
    return any(target.deep_equals(slot) for target in _assigned_targets(guard.body))


#: the types of a path not opened yet (what an ``isinstance`` guard tests before replacing it)
_PATH_TYPES = frozenset({"str", "bytes", "Path", "PurePath", "PosixPath", "WindowsPath", "PathLike"})


def _replaces_path_entry(ctx, guard: cst.If, selfp: str) -> bool:
    """``if isinstance(X, Path):`` (or ``str``, ``os.PathLike``...) whose body stores into ``X``'s
    place on ``self`` (``self.h5[k] = ...``, ``self.f = ...``), where ``X`` is that place or a
    local name just read from it (``bindings.block_assignment``): the entry holds a path until it is
    opened and then the handle, so the block runs once per entry (per key, not per sample)."""
    test = guard.test
    if not (isinstance(test, cst.Call) and dotted_parts(test.func) == ["isinstance"] and len(test.args) == 2):
        return False
    kinds = test.args[1].value
    names = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
    if not names or not all((dotted_parts(n) or [""])[-1] in _PATH_TYPES for n in names):
        return False
    place = test.args[0].value
    if isinstance(place, cst.Name):
        place = block_assignment(ctx.tree, place)
    if not isinstance(place, (cst.Attribute, cst.Subscript)) or (dotted_parts(_base(place)) or [""])[0] != selfp:
        return False
    text = ctx.code(place).strip()
    return any(ctx.code(target).strip() == text for target in _assigned_targets(guard.body))


def _assigned_targets(block: cst.BaseSuite):
    """The targets of the plain assignments (``x = ...``, each of ``a = b = ...``) in ``block``, not in nested scopes."""
    return (node.target for node in iter_subtree(block, into_scopes=False) if isinstance(node, cst.AssignTarget))


def _base(expr: cst.CSTNode) -> cst.CSTNode:
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr


def filled_once_per_key(ctx, node: cst.CSTNode, func: cst.FunctionDef) -> bool:
    """``node`` fills a cache once per key, for a container of the module as well as of ``self``:

    * behind a membership guard that the block answers: ``if key not in CACHE: CACHE[key] = ...``;
    * after a search of the container that returns what it finds: ``for e in CACHE: if e["path"] ==
      key: return ...`` (also ``for i in range(len(CACHE))``, ``enumerate``), followed in the same
      block by an ``append`` to the searched container (or, for parallel lists, to it and to another):
      the block runs only for a key not seen yet.
    """
    previous = node
    for ancestor in ctx.ancestors(node):
        if ancestor is func:
            return False
        if isinstance(ancestor, cst.If) and previous is ancestor.body and _answers_membership(ancestor):
            return True
        if isinstance(ancestor, cst.IndentedBlock):
            statements = list(ancestor.body)
            at = next((i for i, stmt in enumerate(statements) if stmt is previous), None)
            if at is not None:
                for i in range(at - 1, -1, -1):
                    searched = _searched_container(statements[i])
                    if searched and any(_appends_to(stmt, searched) for stmt in statements[i + 1:at + 1]):
                        return True
        previous = ancestor
    return False


def _answers_membership(guard: cst.If) -> bool:
    """``if key not in CACHE:`` whose body stores ``CACHE[key]``."""
    test = guard.test
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.NotIn)):
        return False
    key, cache = test.left, test.comparisons[0].comparator
    if not dotted_parts(cache):
        return False
    return any(isinstance(target, cst.Subscript) and target.value.deep_equals(cache) and len(target.slice) == 1
               and isinstance(target.slice[0].slice, cst.Index) and target.slice[0].slice.value.deep_equals(key)
               for target in _assigned_targets(guard.body))


def _searched_container(stmt: cst.CSTNode) -> Optional[str]:
    """The dotted name of the container a ``for`` statement searches (its body has an ``if`` on an
    ``==`` comparison whose block returns), or None."""
    if not isinstance(stmt, cst.For) or stmt.orelse is not None:
        return None
    source = stmt.iter
    if isinstance(source, cst.Call) and dotted_parts(source.func) in (["range"], ["enumerate"]) and source.args:
        source = source.args[0].value
        if isinstance(source, cst.Call) and dotted_parts(source.func) == ["len"] and source.args:
            source = source.args[0].value
    parts = dotted_parts(source)
    if not parts:
        return None
    for node in iter_subtree(stmt.body, into_scopes=False):
        if isinstance(node, cst.If) and isinstance(node.test, cst.Comparison) and any(
                isinstance(c.operator, cst.Equal) for c in node.test.comparisons) and _ends_with_return(node.body):
            return ".".join(parts)
    return None


def _ends_with_return(block: cst.BaseSuite) -> bool:
    return isinstance(last_statement(block), cst.Return)


def _appends_to(stmt: cst.CSTNode, container: str) -> bool:
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "append"
               and ".".join(dotted_parts(n.func.value) or []) == container
               for n in iter_subtree(stmt, into_scopes=False))
