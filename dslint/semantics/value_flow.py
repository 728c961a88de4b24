"""What an expression may evaluate to, inside one file.

``ValueFlow.values(expr)`` lists the expressions ``expr`` may evaluate to,
following single and multiple assignments, tuple unpacking, ``self.attr``
assignments anywhere in the class family, parameters (bound at the call sites, or
by the call stack the caller gives), ``return`` values of same-module functions,
both arms of a conditional expression and, with ``wrappers``, the iterable inside
``enumerate``/``tqdm``/``iter``/``islice``. Anything else is unknown
(``Value.node is None``): a value that crosses into another file, a call to a
function defined elsewhere, a name bound by ``for``/``with``. A ``DataLoader``
call the subclass knows (``loader_of_call``) is a terminal, and ``loader.dataset``
(``.sampler``...) is what was passed for that argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

import libcst as cst

from dslint.semantics.module_calls import MAX_CALLERS, ModuleCalls, positional_args
from dslint.semantics.names import dotted_parts
from dslint.semantics.regions import self_name
from dslint.semantics.scopes import Binding

MAX_DEPTH = 10  #: resolution steps for one value
MAX_OUTWARD = 3  #: parameters followed out to their call sites, in one value

_SINGLE_WRAPPERS = frozenset({"builtins.enumerate", "builtins.iter", "itertools.islice", "rich.progress.track"})
_LOADER_ATTRS = frozenset({"dataset", "sampler", "batch_sampler", "collate_fn", "worker_init_fn"})


@dataclass(frozen=True)
class Value:
    """One thing an expression may evaluate to.

    ``node`` is the terminal expression (a call such as ``DataLoader(...)``, a
    lambda, a literal, a ``def``/``class``), or None when unknown. ``path`` lists
    the call sites crossed outward to bind parameters: values with different
    paths are different executions (``run(train_loader)`` and ``run(val_loader)``),
    not alternatives. ``origin`` is the expression, in the code that asked, whose
    evaluation creates the object (the ``DataLoader(...)`` call or the call of
    the factory that returns it).
    """

    node: Optional[cst.CSTNode]
    path: Tuple[cst.Call, ...] = ()
    origin: Optional[cst.CSTNode] = None


class ValueFlow(ModuleCalls):
    """The values of one file's expressions, memoized per (expression, stack, path, origin)."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._values_memo: Dict[tuple, Tuple[Value, ...]] = {}

    def loader_of_call(self, call: cst.CSTNode):
        """The ``Loader`` a ``DataLoader(...)`` call is (the loop index knows them; here none)."""
        return None

    def wrapper_kind(self, call: cst.CSTNode) -> Optional[str]:
        """"single" for enumerate/tqdm/iter/islice/track (arg 0 is iterated), "zip", or None."""
        if not isinstance(call, cst.Call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
            return None
        name = self.ctx.call_name(call)
        if not name:
            return None
        if name == "builtins.zip":
            return "zip"
        if name in _SINGLE_WRAPPERS or (name.startswith("tqdm.") and name.endswith(".tqdm")):
            return "single"
        return None

    def values(
        self,
        expr: Optional[cst.CSTNode],
        *,
        stack: Tuple[cst.Call, ...] = (),
        path: Tuple[cst.Call, ...] = (),
        origin: Optional[cst.CSTNode] = None,
        wrappers: bool = False,
        _depth: int = 0,
    ) -> Tuple[Value, ...]:
        """What ``expr`` may evaluate to (see ``Value``); ``stack`` binds parameters of the functions entered."""
        if expr is None:
            return (Value(None, path, origin),)
        key = (id(expr), tuple(map(id, stack)), tuple(map(id, path)), id(origin), wrappers)
        cached = self._values_memo.get(key)
        if cached is not None:
            return cached
        self._values_memo[key] = (Value(None, path, origin),)  # cycle guard
        if _depth > MAX_DEPTH:
            result: Tuple[Value, ...] = (Value(None, path, origin),)
        else:
            result = tuple(self._values(expr, stack, path, origin, wrappers, _depth + 1))
        self._values_memo[key] = result
        return result

    def _values(self, expr, stack, path, origin, wrappers, depth) -> Iterator[Value]:
        unknown = Value(None, path, origin)
        more = dict(wrappers=wrappers, _depth=depth)
        if isinstance(expr, cst.Name):
            if expr.value in ("None", "True", "False"):
                yield Value(expr, path, origin)
                return
            scope, found = self.name_bindings(expr.value, expr)
            if not found:
                yield unknown
                return
            found = self.reaching(expr, scope, found) or found
            for binding in found:
                yield from self._binding_values(scope, binding, stack, path, origin, wrappers, depth)
            return
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _LOADER_ATTRS:
                base = self.values(expr.value, stack=stack, path=path, _depth=depth)
                loader = self.loader_of_call(base[0].node) if len({id(v.node) for v in base}) == 1 else None
                arg = loader.bound.expr(expr.attr.value) if loader is not None else None
                if arg is not None:  # ``loader.dataset``: what was passed as ``dataset``
                    yield from self.values(arg, path=path, origin=origin, _depth=depth)
                    return
            found = self._self_attr_at(expr)
            if found is None:
                yield unknown
                return
            for _, binding in found:
                if binding.kind == "value" and binding.value is not None:
                    yield from self.values(binding.value, path=path, origin=origin, **more)
                else:
                    yield unknown
            return
        if isinstance(expr, cst.IfExp):
            yield from self.values(expr.body, stack=stack, path=path, origin=origin, **more)
            yield from self.values(expr.orelse, stack=stack, path=path, origin=origin, **more)
            return
        if isinstance(expr, cst.NamedExpr):
            yield from self.values(expr.value, stack=stack, path=path, origin=origin, **more)
            return
        if isinstance(expr, cst.Call):
            if self.loader_of_call(expr) is not None:
                yield Value(expr, path, origin or expr)
                return
            if wrappers and self.wrapper_kind(expr) == "single":
                args = positional_args(expr)
                if args:
                    yield from self.values(args[0], stack=stack, path=path, origin=origin, **more)
                    return
            target = self.call_target(expr)
            if target is not None and target[2] is None:
                returned = self.returns(target[0])
                if returned is not None:
                    for value in returned:
                        yield from self.values(value, stack=(*stack, expr), path=path, origin=origin or expr, **more)
                    return
            yield Value(expr, path, origin or expr)
            return
        if isinstance(
            expr,
            (cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.SimpleString, cst.ConcatenatedString, cst.Integer,
             cst.Float, cst.List, cst.Tuple, cst.Dict, cst.Set),
        ):
            yield Value(expr, path, origin)
            return
        yield unknown

    def reaching(self, name: cst.Name, scope, found: List[Binding]) -> Optional[List[Binding]]:
        """The bindings of ``name`` that can reach this read of it, when straight-line code
        tells: the last plain assignment among the statements before the read (in its block,
        then the enclosing blocks), or the parameter when nothing before the read binds it.
        None (every binding may reach) when a statement before the read binds the name inside
        a branch, loop or ``try``, when a loop around the read binds it (the next iteration
        sees it), or when the read is in a nested function or lambda."""
        key = ("reaching", id(name))
        if key in self._values_memo:
            return self._values_memo[key]  # type: ignore[return-value]
        result = self._reaching(name, scope, found)
        self._values_memo[key] = result  # type: ignore[assignment]
        return result

    def _reaching(self, name, scope, found):
        if any(b.kind == "global" for b in found):
            return None
        holders = []
        for binding in found:
            chain = {id(binding.node)}
            chain.update(id(a) for a in self.ctx.ancestors(binding.node))
            holders.append((binding, chain))

        def bound_in(node) -> List[Binding]:
            return [b for b, chain in holders if id(node) in chain]

        def last_before(smalls, inside) -> Optional[List[Binding]]:
            for small in reversed(smalls):
                direct = [b for b in inside if b.node is small]
                if direct:
                    return [direct[-1]] if direct[-1].kind == "value" else []
                if any(id(small) in chain for b, chain in holders if b in inside):
                    return []  # a walrus or the like inside the statement
            return None

        child = name
        for ancestor in self.ctx.ancestors(name):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                smalls = list(ancestor.body)
                index = next((i for i, s in enumerate(smalls) if s is child), None)
                inside = [b for small in smalls[:index or 0] for b in bound_in(small)]
                if inside:
                    return last_before(smalls[:index], inside) or None
            if ancestor is scope and not isinstance(ancestor, cst.Module):
                params = [b for b in found if b.kind == "param"]
                return params or None
            if isinstance(ancestor, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                return None  # read in a nested scope: when it runs is not told here
            if isinstance(ancestor, (cst.For, cst.While)) and child is not getattr(ancestor, "iter", None):
                if bound_in(ancestor):
                    return None  # the loop binds it: a later iteration sees that binding
            if isinstance(ancestor, cst.Try) and child is not ancestor.body and bound_in(ancestor.body):
                return None  # a handler or ``else`` may run after any part of the body
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
                statements = list(ancestor.body)
                index = next((i for i, s in enumerate(statements) if s is child), None)
                if index is None:
                    return None
                for statement in reversed(statements[:index]):
                    inside = bound_in(statement)
                    if not inside:
                        continue
                    if not isinstance(statement, cst.SimpleStatementLine):
                        return None  # bound in a branch, loop, ``with`` or ``try``: maybe
                    return last_before(list(statement.body), inside) or None
                if isinstance(ancestor, cst.Module):
                    return None  # nothing before the read binds it at module level
            child = ancestor
        return None

    def _binding_values(self, scope, binding: Binding, stack, path, origin, wrappers, depth) -> Iterator[Value]:
        unknown = Value(None, path, origin)
        more = dict(wrappers=wrappers, _depth=depth)
        if binding.kind == "def":
            yield Value(binding.node, path, origin)
        elif binding.kind == "value":
            if binding.index is None:
                yield from self.values(binding.value, stack=stack, path=path, origin=origin, **more)
            else:
                yield from self._element(binding.value, binding.index, stack, path, origin, wrappers, depth)
        elif binding.kind == "param" and isinstance(scope, cst.FunctionDef):
            if stack:
                target = self.call_target(stack[-1])
                if target is not None and target[0] is scope:
                    arg = self.argument(stack[-1], scope, binding.node)
                    if arg is None:
                        yield unknown
                    else:
                        yield from self.values(arg, stack=stack[:-1], path=path, origin=origin, **more)
                    return
            callers = self.callers(scope)
            if not callers or len(path) >= MAX_OUTWARD:
                yield unknown
                return
            for call in callers[:MAX_CALLERS]:
                arg = self.argument(call, scope, binding.node)
                if arg is None:
                    yield Value(None, (*path, call), origin)
                else:
                    yield from self.values(arg, path=(*path, call), origin=origin, **more)
        else:
            yield unknown

    def _element(self, value, index, stack, path, origin, wrappers, depth) -> Iterator[Value]:
        more = dict(wrappers=wrappers, _depth=depth)
        if isinstance(value, (cst.Tuple, cst.List)):
            elements = value.elements
            if index < len(elements) and all(isinstance(e, cst.Element) for e in elements):
                yield from self.values(elements[index].value, stack=stack, path=path, origin=origin, **more)
                return
        elif isinstance(value, cst.Call):
            target = self.call_target(value)
            returned = self.returns(target[0]) if target is not None and target[2] is None else None
            if returned:
                for ret in returned:
                    if isinstance(ret, cst.Tuple) and index < len(ret.elements) and all(
                        isinstance(e, cst.Element) for e in ret.elements
                    ):
                        yield from self.values(
                            ret.elements[index].value, stack=(*stack, value), path=path, origin=origin or value, **more
                        )
                    else:
                        yield Value(None, path, origin)
                return
        elif isinstance(value, (cst.Name, cst.Attribute)):  # ``a, b = loaders``: what ``loaders`` holds
            for held in self.values(value, stack=stack, path=path, origin=origin, **more):
                if isinstance(held.node, (cst.Tuple, cst.List)):
                    yield from self._element(held.node, index, stack, held.path, origin, wrappers, depth)
                else:
                    yield Value(None, held.path, origin)
            return
        yield Value(None, path, origin)

    def _self_attr_at(self, expr: cst.Attribute):
        """Bindings of ``self.attr`` read at ``expr`` (None when not a ``self`` attribute of a known class)."""
        if not isinstance(expr.value, cst.Name):
            return None
        return self.self_attr_at(expr, expr.value.value, expr.attr.value)

    def self_attr_at(self, at: cst.CSTNode, base: str, attr: str):
        """Bindings of ``<base>.attr`` read at ``at``, when ``base`` is the method's ``self``."""
        method = self.ctx.enclosing_function(at, through_lambdas=False)
        if method is None:
            return None
        cls = self.ctx.method_class(method)
        if cls is None or self_name(method) != base:
            return None
        return self.self_attr_bindings(cls, attr)

    def values_at(self, parts: List[str], at: cst.CSTNode) -> Optional[Tuple[List[Binding], Tuple[Value, ...]]]:
        """(bindings, values) of ``name`` or ``self.attr`` (as dotted ``parts``) if it were read at ``at``."""
        if len(parts) == 1:
            scope, found = self.name_bindings(parts[0], at)
            if not found:
                return None
            out: List[Value] = []
            for binding in found:
                out.extend(self._binding_values(scope, binding, (), (), None, False, 1))
            return list(found), tuple(out)
        if len(parts) == 2:
            attr_found = self.self_attr_at(at, parts[0], parts[1])
            if attr_found is None:
                return None
            out = []
            for _, binding in attr_found:
                out.extend(self.values(binding.value) if binding.value is not None else (Value(None),))
            return [b for _, b in attr_found], tuple(out)
        return None

    def value_nodes(self, expr, **kwargs) -> Optional[List[cst.CSTNode]]:
        """The distinct terminal nodes of ``expr``; None when any is unknown."""
        out: List[cst.CSTNode] = []
        for value in self.values(expr, **kwargs):
            if value.node is None:
                return None
            if value.node not in out:
                out.append(value.node)
        return out


    # ------------------------------------------------------------ tests on a value
    def value_keys(self, expr, _depth: int = 0) -> List[Tuple[str, object]]:
        """Where the value of ``expr`` is read under another spelling: (dotted text, scope) for
        the expression itself and for what it was assigned from (a ``self.x`` assigned from a
        parameter of ``__init__``: that parameter in ``__init__``). The scope is the function
        (None: module level) or, for ``self.x``, the class."""
        parts = dotted_parts(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if not parts or _depth > 3:
            return []
        func = self.ctx.enclosing_function(expr, through_lambdas=False)
        out: List[Tuple[str, object]] = []
        if len(parts) == 2 and func is not None and self_name(func) == parts[0] and self.ctx.method_class(func) is not None:
            cls = self.ctx.method_class(func)
            out.append((f"self.{parts[1]}", cls))
            for _, binding in self.self_attr_bindings(cls, parts[1]) or ():
                if binding.value is not None:
                    out.extend(self.value_keys(binding.value, _depth + 1))
            return out
        out.append((".".join(parts), func))
        if len(parts) == 1:
            _, found = self.name_bindings(parts[0], expr)
            for binding in found or ():
                if binding.kind == "value" and binding.index is None and binding.value is not None:
                    out.extend(self.value_keys(binding.value, _depth + 1))
        return out

    def reads_key(self, node, key: Tuple[str, object]) -> bool:
        """``node`` reads the value ``key`` (see ``value_keys``) names."""
        text, scope = key
        parts = dotted_parts(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if not parts:
            return False
        func = self.ctx.enclosing_function(node, through_lambdas=False)
        if isinstance(scope, cst.ClassDef):
            if len(parts) != 2 or func is None or self_name(func) != parts[0] or f"self.{parts[1]}" != text:
                return False
            owner = self.ctx.method_class(func)
            return owner is not None and owner in self.class_family(scope)
        return ".".join(parts) == text and func is scope

    def zero_tests(self, expr) -> List[cst.CSTNode]:
        """The tests the code makes on the value of ``expr`` that tell 0 from a positive count
        (``n > 0``, ``n == 0``, ``n >= 1``, ``if n:``, ``not n``), wherever the value is read
        under its spellings (``value_keys``): the code itself expects it can be 0."""
        keys = self.value_keys(expr)
        if not keys:
            return []
        return [test for test, operand in self._zero_tests() if any(self.reads_key(operand, k) for k in keys)]

    def _zero_tests(self) -> List[Tuple[cst.CSTNode, cst.CSTNode]]:
        cached = self._values_memo.get(("zero_tests",))
        if cached is not None:
            return cached  # type: ignore[return-value]
        found: List[Tuple[cst.CSTNode, cst.CSTNode]] = []
        for node in self.ctx.nodes(cst.Comparison):
            if len(node.comparisons) != 1:
                continue
            target = node.comparisons[0]
            operand = _zero_operand(node.left, target.operator, target.comparator)
            if operand is not None:
                found.append((node, operand))
        for kind in (cst.If, cst.While, cst.IfExp):
            for node in self.ctx.nodes(kind):
                for operand in _truth_operands(node.test):
                    found.append((node.test, operand))
        self._values_memo[("zero_tests",)] = found  # type: ignore[assignment]
        return found


_ZERO_OPS = {(cst.GreaterThan, 0), (cst.NotEqual, 0), (cst.Equal, 0), (cst.LessThanEqual, 0), (cst.GreaterThanEqual, 1), (cst.LessThan, 1)}
_MIRROR = {cst.GreaterThan: cst.LessThan, cst.LessThan: cst.GreaterThan, cst.GreaterThanEqual: cst.LessThanEqual,
           cst.LessThanEqual: cst.GreaterThanEqual, cst.Equal: cst.Equal, cst.NotEqual: cst.NotEqual}


def _zero_operand(left, operator, right):
    """``X`` of ``X > 0``, ``0 < X``, ``X == 0``, ``X >= 1``... (a test that tells 0 from more)."""
    for operand, literal, op in ((left, right, type(operator)), (right, left, _MIRROR.get(type(operator)))):
        if isinstance(literal, cst.Integer) and op is not None and (op, literal.evaluated_value) in _ZERO_OPS:
            if isinstance(operand, (cst.Name, cst.Attribute)):
                return operand
    return None


def _truth_operands(test) -> List[cst.CSTNode]:
    """The names whose truth a test reads: ``if n:``, ``if not n``, ``if n and m``."""
    if isinstance(test, (cst.Name, cst.Attribute)):
        return [test]
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _truth_operands(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return _truth_operands(test.left) + _truth_operands(test.right)
    return []
