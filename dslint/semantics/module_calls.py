"""Same-module calls and classes, by name: what a call runs and who calls a function.

``ModuleCalls`` (on top of ``ScopeBindings``) answers, inside one file: which
function a call runs (``f(...)``, ``self.m(...)``, ``Class(...)`` for its
``__init__``), the call sites of a function (``Process(target=f, args=(...))`` is one for
``f``), the expression a call passes for a
parameter, the expressions a function returns, and every ``self.attr = ...`` of a
class family. A call of anything defined elsewhere runs nothing known here.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from dslint.semantics.calls import BoundCall, Signature
from dslint.semantics.names import dotted_parts
from dslint.semantics.regions import self_name
from dslint.semantics.scopes import Binding, ScopeBindings, is_none, names_in_target
from dslint.semantics.walk import iter_subtree

MAX_CALLERS = 16  #: call sites followed for one parameter
#: calls that run ``target=f`` with ``args=(...)`` in a new process or thread
PROCESS_STARTERS = (
    "multiprocessing.Process", "multiprocessing.context.Process", "torch.multiprocessing.Process", "threading.Thread",
)


def positional_args(call: cst.Call) -> List[cst.BaseExpression]:
    out = []
    for arg in call.args:
        if arg.star or arg.keyword is not None:
            break
        out.append(arg.value)
    return out


class ModuleCalls(ScopeBindings):
    """Call targets, call sites and returns of one file, and its classes by name."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._attr_memo: Dict[Tuple[int, str], Optional[List[Tuple[cst.FunctionDef, Binding]]]] = {}
        self._target_memo: Dict[int, Optional[Tuple[cst.FunctionDef, bool, Optional[cst.ClassDef]]]] = {}
        self._callers: Optional[Dict[int, List[cst.Call]]] = None
        self._returns_memo: Dict[int, Optional[List[cst.BaseExpression]]] = {}

    def call_target(self, call: cst.Call) -> Optional[Tuple[cst.FunctionDef, bool, Optional[cst.ClassDef]]]:
        """(function, drops its first parameter, class constructed) a same-module call runs."""
        key = id(call)
        if key in self._target_memo:
            return self._target_memo[key]
        result = self._call_target(call)
        self._target_memo[key] = result
        return result

    def _call_target(self, call: cst.Call):
        func = call.func
        if isinstance(func, cst.Name):
            _, found = self.name_bindings(func.value, call)
            if not found or len(found) != 1 or found[0].kind != "def":
                return None
            node = found[0].node
            if isinstance(node, cst.FunctionDef):
                return node, False, None
            if isinstance(node, cst.ClassDef):
                init = self.find_method(node, "__init__")
                return (init, True, node) if init is not None else None
            return None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            method = self.ctx.enclosing_function(call, through_lambdas=False)
            if method is None:
                return None
            cls = self.ctx.method_class(method)
            if cls is None or self_name(method) != func.value.value:
                return None
            target = self.find_method(cls, func.attr.value)
            if target is None:
                return None
            decorators = {(dotted_parts(d.decorator) or [""])[-1] for d in target.decorators}
            if "property" in decorators:
                return None
            return target, "staticmethod" not in decorators, None
        return None

    def callers(self, func: cst.FunctionDef) -> List[cst.Call]:
        """Same-module call sites of ``func`` (``f(...)``, ``self.f(...)``, ``Class(...)`` for ``__init__``)."""
        if self._callers is None:
            self._callers = {}
            known = set(self.defs())
            for call in self.ctx.nodes(cst.Call):
                func_node = call.func
                tail = func_node.value if isinstance(func_node, cst.Name) else (
                    func_node.attr.value if isinstance(func_node, cst.Attribute) else None
                )
                if tail not in known:
                    continue
                target = self.call_target(call)
                if target is not None:
                    self._callers.setdefault(id(target[0]), []).append(call)
            for call in self.ctx.calls_to(*PROCESS_STARTERS):
                started = self.process_target(call)
                if started is not None:
                    self._callers.setdefault(id(started), []).append(call)
        return self._callers.get(id(func), [])

    def process_target(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The same-module function a ``Process(target=f, args=(...))``/``Thread(...)`` call runs."""
        if self.ctx.call_name(call) not in PROCESS_STARTERS:
            return None
        target = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "target"), None)
        if not isinstance(target, cst.Name):
            return None
        _, found = self.name_bindings(target.value, call)
        if not found or len(found) != 1 or found[0].kind != "def" or not isinstance(found[0].node, cst.FunctionDef):
            return None
        return found[0].node

    def _process_argument(self, call: cst.Call, func: cst.FunctionDef, param: cst.Param) -> Optional[cst.BaseExpression]:
        """What a ``Process(target=func, args=(...), kwargs={...})`` call passes for ``param``."""
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        args = keywords.get("args")
        if isinstance(args, (cst.Tuple, cst.List)) and all(isinstance(e, cst.Element) for e in args.elements):
            if param.name.value in params and params.index(param.name.value) < len(args.elements):
                return args.elements[params.index(param.name.value)].value
        kwargs = keywords.get("kwargs")
        if isinstance(kwargs, cst.Dict):
            for element in kwargs.elements:
                if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString):
                    if element.key.evaluated_value == param.name.value:
                        return element.value
        return None

    def argument(self, call: cst.Call, func: cst.FunctionDef, param: cst.Param) -> Optional[cst.BaseExpression]:
        """The expression ``call`` passes for ``param`` of ``func`` (a literal default counts: None,
        True, False, a number or a string; an expression default is unknown here)."""
        if self.process_target(call) is func:
            return self._process_argument(call, func, param)
        target = self.call_target(call)
        drop = target[1] if target is not None else False
        params = func.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        if drop:
            positional = positional[1:]
        bound = BoundCall(call, Signature(positional, [p.name.value for p in params.kwonly_params]))
        arg = bound.arg(param.name.value)
        if arg is not None:
            return arg.value
        if bound.is_open:
            return None
        default = param.default
        if is_none(default) or (isinstance(default, cst.Name) and default.value in ("True", "False")):
            return default
        if isinstance(default, (cst.Integer, cst.Float, cst.SimpleString)):
            return default
        return None

    def returns(self, func: cst.FunctionDef) -> Optional[List[cst.BaseExpression]]:
        """The returned expressions of a function; None for a generator or nothing returned."""
        key = id(func)
        if key in self._returns_memo:
            return self._returns_memo[key]
        values: Optional[List[cst.BaseExpression]] = []
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, (cst.Yield, cst.Await)):
                values = None
                break
            if isinstance(node, cst.Return) and node.value is not None:
                values.append(node.value)
        if not values:
            values = None
        self._returns_memo[key] = values
        return values

    # Own walker, not classes.py: that one skips keyword bases, unwraps Base[T], has no depth limit and no siblings in class_family.
    def _module_classes(self, name: str) -> List[cst.ClassDef]:
        return [c for c in self.defs().get(name, []) if isinstance(c, cst.ClassDef)]

    def _bases(self, cls: cst.ClassDef) -> List[cst.ClassDef]:
        out = []
        for base in cls.bases:
            parts = dotted_parts(base.value)
            if parts and len(parts) == 1:
                found = self._module_classes(parts[0])
                if len(found) == 1 and found[0] is not cls:
                    out.append(found[0])
        return out

    def class_family(self, cls: cst.ClassDef) -> List[cst.ClassDef]:
        """The class, its bases and its subclasses defined in this module (by name)."""
        family = [cls]
        changed = True
        while changed:
            changed = False
            for other in self.ctx.nodes(cst.ClassDef):
                if other in family:
                    continue
                bases = self._bases(other)
                if any(b in family for b in bases) or any(other in self._bases(f) for f in family):
                    family.append(other)
                    changed = True
            if len(family) > 32:
                break
        return family

    def find_method(self, cls: cst.ClassDef, name: str, _depth: int = 0) -> Optional[cst.FunctionDef]:
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
                return stmt
        if _depth < 5:
            for base in self._bases(cls):
                found = self.find_method(base, name, _depth + 1)
                if found is not None:
                    return found
        return None

    def self_attr_bindings(self, cls: cst.ClassDef, attr: str) -> Optional[List[Tuple[cst.FunctionDef, Binding]]]:
        """Every ``self.attr = ...`` of the class family; None when it is also bound some other way."""
        key = (id(cls), attr)
        if key in self._attr_memo:
            return self._attr_memo[key]
        out: List[Tuple[cst.FunctionDef, Binding]] = []
        opaque = False
        for member in self.class_family(cls):
            body = member.body.body if isinstance(member.body, cst.IndentedBlock) else ()
            for stmt in body:
                if isinstance(stmt, cst.FunctionDef):
                    if stmt.name.value == attr:
                        opaque = opaque or not any(
                            (dotted_parts(d.decorator) or [""])[-1] == "property" for d in stmt.decorators
                        )
                        if not opaque:
                            for ret in self.returns(stmt) or [None]:
                                out.append((stmt, Binding("value", stmt, ret)))
                        continue
                    sname = self_name(stmt)
                    if sname is None:
                        continue
                    for node in iter_subtree(stmt.body, into_scopes=False):
                        opaque = opaque or self._self_assign(node, sname, attr, stmt, out)
                elif isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                            for target in targets:
                                if isinstance(target, cst.Name) and target.value == attr and not isinstance(small, cst.AugAssign):
                                    if small.value is not None:
                                        out.append((None, Binding("value", small, small.value)))
                                elif attr in names_in_target(target):
                                    opaque = True
        result = None if opaque or not out else out
        self._attr_memo[key] = result
        return result

    @staticmethod
    def _self_assign(node, sname, attr, method, out) -> bool:
        """Record ``self.attr = v`` in ``out``; True when ``self.attr`` is bound opaquely."""

        def is_self_attr(target) -> bool:
            return (
                isinstance(target, cst.Attribute)
                and target.attr.value == attr
                and isinstance(target.value, cst.Name)
                and target.value.value == sname
            )

        if isinstance(node, cst.Assign):
            for target in node.targets:
                if is_self_attr(target.target):
                    out.append((method, Binding("value", node, node.value)))
                elif isinstance(target.target, (cst.Tuple, cst.List)):
                    if any(is_self_attr(e.value) for e in target.target.elements):
                        return True
        elif isinstance(node, cst.AnnAssign) and is_self_attr(node.target) and node.value is not None:
            out.append((method, Binding("value", node, node.value)))
        elif isinstance(node, (cst.AugAssign, cst.For)) and is_self_attr(node.target):
            return True
        elif isinstance(node, cst.WithItem) and node.asname is not None and is_self_attr(node.asname.name):
            return True
        return False
