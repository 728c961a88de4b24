"""What the tests a read has passed say of the value read.

``narrow(ctx, expr, values)`` answers, for a name or a dotted attribute read at ``expr``
(``workers``, ``self.sampler``, ``args.num_workers``), which of the values found for it can
still be there, the way a type checker narrows a variable by the tests on its path:

- in the body of ``if t``: every conjunct of ``t`` holds (``if a and x > 0``);
- in the ``else`` of ``if t``: ``t`` is false, so every disjunct of ``t`` is false
  (``if x == 0 or infer: ... else: read``); ``not`` flips a test;
- after a guard ``if t: ... return`` (or ``raise``, ``continue``, ``break``) with no ``else``,
  earlier in an enclosing block of the same function: ``t`` is false; after ``assert t``: true;
  after a statement there that divides by it (``x / (b * n)``, ``//``, ``%``; not in a lambda, a
  comprehension, a conditional's arms or the right of ``and``/``or``): it is truthy, as 0 and
  ``None`` raise;
- the same for both arms of a conditional expression.

The tests understood compare the target with a literal or a module constant (``x == 0``,
``x > 1``, ``x is None``, ``x in (0, 1)``, either side) or take its truth (``x``, ``not x``).
A test that pins the value (``x == 0``, ``x is None`` holding) makes it exactly that literal;
any other keeps the values that pass and every value it cannot evaluate (unknown ones).

``excludes(ctx, expr, value)``: one of those tests rules the literal ``value`` out at ``expr``.

A test stops counting when the code between it and the read binds the same target again,
or when the test and the read lie in different functions. ``values.possible`` narrows every
name and attribute it reads this way.
"""

from __future__ import annotations

import operator
from typing import Callable, Iterator, List, Tuple

import libcst as cst

from dslint.semantics.calls import UNKNOWN, literal_value
from dslint.semantics.possible import Possible, Value, exactly
from dslint.semantics.walk import iter_subtree, last_statement

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.Module)
_EXITS = (cst.Return, cst.Raise, cst.Continue, cst.Break)
_OPERATORS = {
    cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt, cst.LessThanEqual: operator.le,
    cst.GreaterThan: operator.gt, cst.GreaterThanEqual: operator.ge, cst.Is: operator.is_,
    cst.IsNot: operator.is_not, cst.In: lambda a, b: a in b, cst.NotIn: lambda a, b: a not in b,
}
_MIRRORED = {cst.LessThan: operator.gt, cst.LessThanEqual: operator.ge, cst.GreaterThan: operator.lt,
             cst.GreaterThanEqual: operator.le, cst.Equal: operator.eq, cst.NotEqual: operator.ne,
             cst.Is: operator.is_, cst.IsNot: operator.is_not}

#: whether ``x <op> c`` holding (True) or failing (False) leaves ``x`` exactly ``c``
_PINS = {cst.Equal: True, cst.Is: True, cst.NotEqual: False, cst.IsNot: False}

#: a test part and whether it holds at the read
Fact = Tuple[cst.BaseExpression, bool]


def narrow(ctx, expr: cst.CSTNode, found: Callable[[], Possible]) -> Possible:
    """``found()`` (the values bound to ``expr``) narrowed by the tests passed before ``expr``."""
    if not _is_target(expr):
        return found()
    tests = list(_target_tests(ctx, expr, ctx.code(expr).strip()))
    for part, truth, compared in tests:
        if compared is not None and _PINS.get(type(part.comparisons[0].operator)) == truth:
            return exactly(compared[1], f"the test on line {ctx.line(part)}")
    values = found()
    if not tests:
        return values
    kept = tuple(v for v in values.values if all(_admits(compared, truth, v) for _, truth, compared in tests))
    return Possible(kept, values.complete)


def excludes(ctx, expr: cst.CSTNode, value) -> bool:
    """A test passed before ``expr`` (a name or dotted attribute) rules out the literal ``value``
    there (``if n == 0: return``, ``assert n > 0``, a division by ``n``)."""
    if not _is_target(expr):
        return False
    probe = Value(value, "")
    return any(not _admits(compared, truth, probe) for _, truth, compared in _target_tests(ctx, expr, ctx.code(expr).strip()))


def _target_tests(ctx, expr: cst.CSTNode, text: str) -> Iterator[Tuple[cst.BaseExpression, bool, object]]:
    """(part, whether it holds, its comparison: None for the target's own truth) for each test passed
    before ``expr`` that is about the target ``text`` (``narrow`` and ``excludes`` read these)."""
    for part, truth in passed_tests(ctx, expr, text):
        compared = _comparison(ctx, part, text)
        if compared is not None or _same(ctx, part, text):
            yield part, truth, compared


def passed_tests(ctx, expr: cst.CSTNode, text: str) -> Iterator[Fact]:
    """The test parts known to hold (or not) where ``expr`` is read, about anything."""
    child = expr
    for parent in ctx.ancestors(expr):
        if isinstance(parent, _SCOPES):
            return
        if isinstance(parent, (cst.If, cst.IfExp)) and (child is parent.body or child is parent.orelse):
            if not (isinstance(parent, cst.If) and _rebinds(ctx, child, text, expr)):
                yield from _facts(parent.test, child is parent.body)
        if isinstance(parent, cst.IndentedBlock) and isinstance(child, cst.BaseStatement):
            yield from _guards(ctx, parent, child, text, expr)
        child = parent


def _guards(ctx, block: cst.IndentedBlock, statement: cst.BaseStatement, text: str, read) -> Iterator[Fact]:
    """Guards earlier in ``block`` than ``statement``: ``if t: ...; return`` and ``assert t``."""
    body = list(block.body)
    index = next((i for i, s in enumerate(body) if s is statement), 0)
    if _rebinds(ctx, statement, text, read):
        return
    for before in reversed(body[:index]):
        if isinstance(before, cst.If) and before.orelse is None and isinstance(last_statement(before.body), _EXITS):
            yield from _facts(before.test, False)
        elif isinstance(before, cst.SimpleStatementLine):
            for small in before.body:
                if isinstance(small, cst.Assert):
                    yield from _facts(small.test, True)
                elif not _rebinds(ctx, small, text, read):  # ``x / (b * n)`` ran: ``n`` was not 0 (nor None)
                    yield from ((divisor, True) for divisor in _divisors(small))
        if _rebinds(ctx, before, text, read):
            return


def _divisors(node: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """The factors of every divisor (``/``, ``//``, ``%``) that evaluating the simple statement
    ``node`` always computes: not in a lambda, a comprehension, the arms of a conditional
    expression or the right side of ``and``/``or``, which may not run."""
    if isinstance(node, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
        return
    if isinstance(node, cst.IfExp):
        yield from _divisors(node.test)
        return
    if isinstance(node, cst.BooleanOperation):
        yield from _divisors(node.left)
        return
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.FloorDivide, cst.Modulo)):
        yield from _factors(node.right)
    for child in node.children:
        yield from _divisors(child)


def _factors(expr: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """``b * n`` is 0 when either is: both factors (and a plain divisor itself)."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        yield from _factors(expr.left)
        yield from _factors(expr.right)
    else:
        yield expr


def _facts(test: cst.BaseExpression, truth: bool) -> Iterator[Fact]:
    """What ``test`` being ``truth`` says part by part: ``a and b`` true, ``a or b`` false, ``not``."""
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And) == truth:
            yield from _facts(test.left, truth)
            yield from _facts(test.right, truth)
        return
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from _facts(test.expression, not truth)
        return
    yield test, truth


def _is_target(expr) -> bool:
    if isinstance(expr, cst.Name):
        return True
    return isinstance(expr, cst.Attribute) and _is_target(expr.value)


def _same(ctx, node, text: str) -> bool:
    return _is_target(node) and ctx.code(node).strip() == text


def _comparison(ctx, part, text: str):
    """(operator function, literal) for ``x <op> literal`` or ``literal <op> x``; None otherwise."""
    if not (isinstance(part, cst.Comparison) and len(part.comparisons) == 1):
        return None
    target = part.comparisons[0]
    if _same(ctx, part.left, text):
        literal, table = literal_value(target.comparator, ctx.module_constant), _OPERATORS
    elif _same(ctx, target.comparator, text):
        literal, table = literal_value(part.left, ctx.module_constant), _MIRRORED
    else:
        return None
    function = table.get(type(target.operator))
    return None if function is None or literal is UNKNOWN else (function, literal)


def _admits(compared, truth: bool, value: Value) -> bool:
    """Whether ``value`` can pass a test (``compared``: its operator and literal, or None for the
    target's own truth) with outcome ``truth``; True when that cannot be told."""
    if value.value is UNKNOWN:
        return True
    try:
        if compared is None:
            return bool(value.value) == truth
        function, literal = compared
        return bool(function(value.value, literal)) == truth
    except Exception:  # noqa: BLE001 - a comparison the value does not support tells nothing
        return True


def _rebinds(ctx, branch: cst.CSTNode, text: str, read: cst.CSTNode) -> bool:
    """The branch binds ``text`` (assignment, augmented assignment, ``for``/``with`` target) before ``read``."""
    end = ctx.line(read)
    targets: List[cst.CSTNode] = []
    for node in iter_subtree(branch, into_scopes=False):
        if isinstance(node, cst.AssignTarget):
            targets.append(node.target)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For)):
            targets.append(node.target)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets.append(node.asname.name)
        elif isinstance(node, cst.NamedExpr):
            targets.append(node.target)
    return any(ctx.line(target) <= end and any(ctx.code(part).strip() == text for part in _bound(target))
               for target in targets)


def _bound(target: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The names and attributes a target binds (``a, self.b = ...``; not the ``b`` of ``self.b``)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _bound(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _bound(target.value)
    elif _is_target(target):
        yield target
