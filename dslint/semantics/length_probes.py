"""Values the code itself treats as possibly length-less, and the ``len()``/``bool()`` it
takes of them before it asks.

Framework code that receives loaders or datasets from its users cannot know their
classes, and a user object that nothing shows to be length-less is not assumed to be
one. The evidence taken here is the function's own *length probe* of the value:

- ``hasattr(x, "__len__")``, ``isinstance(x, Sized)``, ``len(x)`` inside
  ``try: ... except TypeError``;
- a call ``probe(x)`` of a *probe function*: one whose parameter it passes to ``len()``
  inside ``try: ... except TypeError`` (or tests with ``hasattr``/``Sized``), defined in
  this file or, as a module-level function, in another file of the project (summary
  fact ``length_probes``), or a library's (``transformers.trainer_utils.has_length``);
- ``isinstance(x.dataset, IterableDataset)`` / ``hasattr(x.dataset, "__len__")``: ``x`` is a
  loader whose dataset may have no length.

A value is the name read (``dl``, ``self.loader``), or for a loop variable the collection
it runs over (``for dl in loaders`` and ``[... for dl in loaders if dl]`` read the same
values). A ``len()`` of the value that runs *before* the probe on the same path (earlier in
the function, not in the other branch of an ``if``, not itself guarded) raises the
``TypeError`` the probe exists to avoid. ``self`` of a class that (or a base of which)
(any file) defines ``__len__`` has a length: its ``len()`` is no probe. ``bool()`` (an ``if x:``) counts only when the
value is a loader (the probe function's parameter is annotated ``DataLoader`` or the probe
reads ``x.dataset``): ``DataLoader.__len__`` always exists and asks the dataset, while an
object with no ``__len__`` is simply true. Uses after the probe are not judged (a flag set
from the probe may guard them).
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple

import libcst as cst

from dslint.semantics.classes import defines_method
from dslint.semantics.iterable_evidence import ITERABLE_CLASSES, sole_parameter
from dslint.semantics.names import canonical, dotted_parts
from dslint.semantics.walk import body_buckets, iter_subtree

SIZED = frozenset({"typing.Sized", "collections.abc.Sized"})
# a probe names the error ``len()`` raises; a catch-all handler guards everything, probes nothing
CAUGHT = frozenset({"TypeError"})
COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def catches_type_error(handlers) -> bool:
    for handler in handlers:
        if handler.type is None:
            continue
        for node in iter_subtree(handler.type):
            parts = dotted_parts(node)
            if parts and parts[-1] in CAUGHT:
                return True
    return False


def _in_type_error_try(node: cst.CSTNode, parents) -> bool:
    """``node`` is in the body of a ``try`` with a handler for ``TypeError``."""
    previous = node
    for ancestor in parents(node):
        if isinstance(ancestor, cst.Try) and previous is ancestor.body and catches_type_error(ancestor.handlers):
            return True
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        previous = ancestor
    return False


def _single_arg(call: cst.Call, count: int = 1) -> Optional[List[cst.BaseExpression]]:
    if len(call.args) != count or any(a.keyword is not None or a.star for a in call.args):
        return None
    return [a.value for a in call.args]


#: the builtins a length probe of its own calls (``direct_probe``)
PROBE_CALLS = frozenset({"len", "hasattr", "isinstance"})


def direct_probe(call: cst.Call, qualname, parents, tails=None) -> Optional[Tuple[cst.BaseExpression, bool]]:
    """(the probed expression, whether it is a loader's ``.dataset``) when ``call`` is a length
    probe of its own: ``hasattr(x, "__len__")``, ``isinstance(x, Sized)``, ``len(x)`` under
    ``except TypeError``, ``isinstance(x.dataset, IterableDataset)``. ``tails``: the names
    those builtins may be spelled with in the file (``ModuleNames.call_tails(PROBE_CALLS)``),
    to skip resolving other calls."""
    func = call.func
    if tails is not None:
        tail = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        if tail not in tails:
            return None
    name = qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
    probed = None
    if name == "builtins.len" and (args := _single_arg(call)) and _in_type_error_try(call, parents):
        probed = args[0]
    elif name == "builtins.hasattr" and (args := _single_arg(call, 2)):
        if isinstance(args[1], cst.SimpleString) and args[1].evaluated_value == "__len__":
            probed = args[0]
    elif name == "builtins.isinstance" and (args := _single_arg(call, 2)):
        classes = args[1].elements if isinstance(args[1], cst.Tuple) else [args[1]]
        kinds = {qualname(c.value if isinstance(c, cst.Element) else c) for c in classes}
        if kinds & SIZED:
            probed = args[0]
        elif kinds & ITERABLE_CLASSES and _dataset_of(args[0]) is not None:
            return _dataset_of(args[0]), True
    if probed is None:
        return None
    owner = _dataset_of(probed)
    return (owner, True) if owner is not None else (probed, False)


def _dataset_of(expr) -> Optional[cst.BaseExpression]:
    if isinstance(expr, cst.Attribute) and expr.attr.value == "dataset":
        return expr.value
    return None


def _annotated_loader(param: cst.Param) -> bool:
    if param.annotation is None:
        return False
    return any(isinstance(n, cst.Name) and n.value == "DataLoader" or isinstance(n, cst.Attribute)
               and n.attr.value == "DataLoader" for n in iter_subtree(param.annotation))


def probe_parameter(func: cst.FunctionDef, qualname, parents, tree=None, tails=None) -> Optional[list]:
    """[position, name, loader annotated] of the parameter ``func`` probes for a length (the
    first such parameter), else None. A method's position counts ``self``."""
    params = list(func.params.posonly_params) + list(func.params.params)
    names = {p.name.value: i for i, p in enumerate(params)}
    for node in body_buckets(func, tree).get(cst.Call, ()):
        found = direct_probe(node, qualname, parents, tails)
        if found and isinstance(found[0], cst.Name) and found[0].value in names:
            position = names[found[0].value]
            return [position, found[0].value, found[1] or _annotated_loader(params[position])]
    return None


def summary_probes(tree, names, local_qualname) -> Dict[str, list]:
    """Module-level functions of a file that probe a parameter for a length (summary fact)."""
    found = {}
    for func in tree.nodes(cst.FunctionDef):
        parent = tree.parent_of(func)
        if not isinstance(parent, cst.Module):
            continue
        answer = probe_parameter(func, names.qualname, tree.ancestors, tree, names.call_tails(PROBE_CALLS))
        if answer is not None:
            found[local_qualname(func, tree)] = answer
    return found


# ---------------------------------------------------------------------- per function

def _local_probe(ctx, call: cst.Call) -> Optional[list]:
    """The probe parameter of the function ``call`` calls: a function or ``self`` method of
    this file, or a module-level function of another file of the project."""
    func = call.func
    target = None
    if isinstance(func, cst.Name):
        defs = _module_functions(ctx).get(func.value, [])
        target = defs[0] if len(defs) == 1 else None
        if target is None and not defs:
            return _project_probe(ctx, ctx.qualname(func))
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        enclosing = ctx.enclosing_function(call)
        cls = ctx.method_class(enclosing) if enclosing is not None else None
        if cls is not None and isinstance(cls.body, cst.IndentedBlock):
            defs = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value]
            target = defs[0] if len(defs) == 1 else None
            if target is not None:
                answer = _target_probe(ctx, target)
                return [answer[0] - 1, answer[1], answer[2]] if answer and answer[0] > 0 else None
    elif isinstance(func, cst.Attribute):
        return _project_probe(ctx, ctx.qualname(func))
    if target is None:
        return None
    return _target_probe(ctx, target)


def _target_probe(ctx, target: cst.FunctionDef) -> Optional[list]:
    """``probe_parameter`` of a function of this file, once per function."""
    return ctx.memo(("length_probes.target", id(target)), lambda: probe_parameter(target, ctx.qualname, ctx.ancestors, ctx.tree, ctx.names.call_tails(PROBE_CALLS)))


def _module_functions(ctx) -> Dict[str, list]:
    def compute():
        found: Dict[str, list] = {}
        for node in ctx.module.body:  # (module-level statements: the functions whose parent is the module)
            if isinstance(node, cst.FunctionDef):
                found.setdefault(node.name.value, []).append(node)
        return found
    return ctx.memo("length_probes.module_functions", compute)


#: library functions that probe their first parameter for a length (``len(x)`` under ``except
#: TypeError``): Hugging Face's trainer helper, which copies of its ``Trainer`` import
LIBRARY_PROBES = {"transformers.trainer_utils.has_length": [0, "dataset", False]}


def _project_probe(ctx, qualified: Optional[str]) -> Optional[list]:
    if not qualified or qualified.startswith("builtins."):
        return None
    if canonical(qualified) in LIBRARY_PROBES:
        return LIBRARY_PROBES[canonical(qualified)]
    return ctx.memo(("length_probes.project", qualified), lambda: ctx.view.length_probe(qualified))


def value_key(ctx, expr) -> Optional[Tuple[str, str]]:
    """What value ``expr`` reads, for matching within one function: ("each", collection) for a
    loop variable, ("name", code) for a name or ``self.x``-style chain; None otherwise."""
    if isinstance(expr, cst.Name):
        for ancestor in ctx.ancestors(expr):
            if isinstance(ancestor, COMPREHENSIONS):
                comp = ancestor.for_in
                while comp is not None:
                    if _binds(comp.target, expr.value):
                        return _collection(ctx, comp.iter, comp.target, expr.value)
                    comp = comp.inner_for_in
            elif isinstance(ancestor, cst.For) and _binds(ancestor.target, expr.value):
                return _collection(ctx, ancestor.iter, ancestor.target, expr.value)
            elif isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
        return "name", expr.value
    if isinstance(expr, cst.Attribute) and dotted_parts(expr):
        return "name", ".".join(dotted_parts(expr))
    return None


def _binds(target, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in iter_subtree(target))


def _collection(ctx, iterable, target, name) -> Optional[Tuple[str, str]]:
    if isinstance(target, cst.Name):
        source = iterable
    elif isinstance(target, cst.Tuple) and len(target.elements) == 2 and isinstance(iterable, cst.Call) \
            and ctx.qualname(iterable.func) == "builtins.enumerate" and _single_arg(iterable) \
            and isinstance(target.elements[1].value, cst.Name) and target.elements[1].value.value == name:
        source = iterable.args[0].value
    else:
        return None
    if isinstance(source, (cst.Name, cst.Attribute)) and dotted_parts(source):
        return "each", ".".join(dotted_parts(source))
    return None


def function_probes(ctx, func: cst.FunctionDef) -> List[Tuple[Tuple[str, str], cst.Call, bool]]:
    """(value key, probe call, the value is a loader) for each length probe in ``func``."""
    def compute():
        found, cls, selfp = [], ctx.method_class(func), ctx.regions.get(func).self_param
        tails = ctx.names.call_tails(PROBE_CALLS)
        for node in body_buckets(func, ctx.tree).get(cst.Call, ()):
            direct = direct_probe(node, ctx.qualname, ctx.ancestors, tails)
            if direct is not None:
                expr, loader = direct
            else:
                answer = _local_probe(ctx, node)
                if answer is None or answer[0] < 0 or answer[0] >= len(node.args):
                    continue
                arg = node.args[answer[0]]
                if arg.keyword is not None or arg.star or any(a.star or a.keyword for a in node.args[:answer[0]]):
                    continue
                expr, loader = arg.value, bool(answer[2])
            key = value_key(ctx, expr)
            if key is not None and not (key == ("name", selfp) and cls is not None
                                        and defines_method(ctx, cls, "__len__")):  # ``self`` has a length
                found.append((key, node, loader))
        return found
    return ctx.memo(("length_probes", id(func)), compute)


def _exclusive(ctx, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """``a`` and ``b`` lie in different branches of one ``if`` (or conditional expression)."""
    chain_a = [a] + list(ctx.ancestors(a))
    ids_b = {id(n): n for n in [b] + list(ctx.ancestors(b))}
    previous = a
    for node in chain_a[1:]:
        if id(node) in ids_b:
            if isinstance(node, (cst.If, cst.IfExp)):
                branches = [node.body, node.orelse]
                where_a = [i for i, br in enumerate(branches) if br is not None and _within(ctx, previous, br)]
                where_b = [i for i, br in enumerate(branches) if br is not None and _within(ctx, b, br)]
                return bool(where_a and where_b and where_a != where_b)
            return False
        previous = node
    return False


def _leaves_before(ctx, use, probe) -> bool:
    """The use sits in a branch of an ``if`` that ends in ``return``/``raise``/``continue``/
    ``break`` and does not hold the probe: the probe runs on another path."""
    for ancestor in ctx.ancestors(use):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            return False
        if isinstance(ancestor, (cst.IndentedBlock, cst.SimpleStatementSuite)) \
                and isinstance(ctx.parent(ancestor), (cst.If, cst.Else)) and not _within(ctx, probe, ancestor):
            last = ancestor.body[-1] if ancestor.body else None
            small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else last
            if isinstance(small, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
                return True
    return False


def _within(ctx, node, root) -> bool:
    return node is root or any(a is root for a in ctx.ancestors(node))


def _guarded_by_probe(ctx, use, probes, key=None) -> bool:
    """The use sits under a test (``if``, conditional, ``and``/``or``) that makes a probe, or
    that narrows the value's type (``isinstance(x, ...)``: the code knows what it holds)."""
    calls = {id(p[1]) for p in probes}
    for node in (n for a in ctx.ancestors(use) if isinstance(a, (cst.If, cst.IfExp, cst.While))
                 for n in iter_subtree(a.test)):
        if isinstance(node, cst.Call) and ctx.qualname(node.func) == "builtins.isinstance" and node.args \
                and key is not None and value_key(ctx, node.args[0].value) == key:
            return True
    for ancestor in ctx.ancestors(use):
        tests = []
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)):
            tests = [ancestor.test]
        elif isinstance(ancestor, cst.BooleanOperation):
            tests = [ancestor.left]
        elif isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            break
        if any(id(n) in calls for t in tests for n in iter_subtree(t)):
            return True
    return False


def early_uses(ctx, func: cst.FunctionDef, uses: Iterator[Tuple[cst.CSTNode, cst.BaseExpression, bool]]):
    """(use, probe, loader) for each use — (node, the expression whose length it takes, a truth
    test) — of a probed value of ``func`` that runs before the probe on the same path."""
    probes = function_probes(ctx, func)
    if not probes:
        return
    order = {}
    for i, node in enumerate(iter_subtree(func.body, into_scopes=False)):
        order[id(node)] = i
    for node, expr, truth in uses:
        key = value_key(ctx, expr)
        if key is None or id(node) not in order or _guarded_by_probe(ctx, node, probes, key):
            continue
        for probe_key, probe, loader in probes:
            if probe_key != key or probe is node or order.get(id(probe), -1) <= order[id(node)]:
                continue
            if truth and not loader or _exclusive(ctx, node, probe) or _within(ctx, probe, node) \
                    or _leaves_before(ctx, node, probe):
                continue
            yield node, probe, loader
            break


# ---------------------------------------------------------------------- attributes a class probes

def _self_attr(expr, self_names) -> Optional[str]:
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value in self_names:
        return expr.attr.value
    return None


def attribute_probes(tree, names, local_qualname) -> Dict[str, list]:
    """{class: [[attribute, callee, position, loader]]}: the ``self.x`` its methods probe for a
    length (summary fact) — directly (callee ""), or handed to a function at ``position``
    that may probe it (resolved against ``length_probes`` when asked)."""
    found: Dict[str, list] = {}
    tails = names.call_tails(PROBE_CALLS)
    for cls in tree.nodes(cst.ClassDef):
        if not isinstance(cls.body, cst.IndentedBlock):
            continue
        entries = []
        for method in cls.body.body:
            if not isinstance(method, cst.FunctionDef) or not method.params.params:
                continue
            selves = {method.params.params[0].name.value}
            for node in body_buckets(method, tree).get(cst.Call, ()):
                direct = direct_probe(node, names.qualname, tree.ancestors, tails)
                if direct is not None:
                    attr = _self_attr(direct[0], selves)
                    if attr is not None:
                        entries.append([attr, "", -1, direct[1]])
                    continue
                if not isinstance(node.func, (cst.Name, cst.Attribute)) or _self_attr(node.func, selves):
                    continue
                callee = names.qualname(node.func)
                if not callee or callee.startswith("builtins."):
                    continue
                for position, arg in enumerate(node.args):
                    if arg.star or arg.keyword is not None:
                        break
                    attr = _self_attr(arg.value, selves)
                    if attr is not None:
                        entries.append([attr, callee, position, False])
        unique = []
        for entry in entries:
            if entry not in unique:
                unique.append(entry)
        if unique:
            found[local_qualname(cls, tree)] = unique
    return found


def annotated_class(ctx, index, expr) -> Optional[str]:
    """The class a name's one binding, a parameter, is annotated with (a string too)."""
    param = sole_parameter(index, expr)[1]
    annotation = param.annotation.annotation if param is not None and param.annotation else None
    if isinstance(annotation, (cst.Name, cst.Attribute)):
        return ctx.qualname(annotation)
    if isinstance(annotation, cst.SimpleString):
        text = annotation.evaluated_value
        parts = text.split(".") if isinstance(text, str) else []
        if parts and all(p.isidentifier() for p in parts):
            head = ctx.names.resolve_global(parts[0])
            return canonical(".".join([head, *parts[1:]])) if head else None
    return None


def outside_uses(ctx, index, func: cst.FunctionDef, uses):
    """(use, [class, loader]) for each use of ``obj.x`` — ``obj`` a parameter annotated with a
    project class whose own methods probe ``self.x`` for a length — in code outside that
    class, with no probe of its own in the function."""
    candidates = [(node, expr, truth) for node, expr, truth in uses
                  if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value != "self"]
    probes = function_probes(ctx, func) if candidates else []  # (the probes cost a walk: only when needed)
    probed = {key for key, _, _ in probes}
    for node, expr, truth in candidates:
        if value_key(ctx, expr) in probed or _guarded_by_probe(ctx, node, probes, value_key(ctx, expr)):
            continue
        if not _annotated_parameter_named(ctx, node, expr.value.value):
            continue  # (cheap: resolving the name's bindings costs a table per scope)
        qualified = annotated_class(ctx, index, expr.value)
        answer = ctx.view.probed_attribute(qualified, expr.attr.value) if qualified else None
        if answer and (answer[1] or not truth):
            yield node, answer


# ---------------------------------------------------------------------- a test that cannot be true

def _known_loader(ctx, index, expr) -> bool:
    """``expr`` is a DataLoader: a parameter annotated ``DataLoader``, a ``self.x`` the class
    body annotates so, or a name every value of which is a DataLoader construction."""
    if isinstance(expr, cst.Name):
        scope, bindings = index.name_bindings(expr.value, expr)
        if bindings and len(bindings) == 1 and bindings[0].kind == "param" and isinstance(bindings[0].node, cst.Param):
            return _annotated_loader(bindings[0].node)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        func = ctx.enclosing_function(expr)
        cls = ctx.method_class(func) if func is not None else None
        body = cls.body.body if cls is not None and isinstance(cls.body, cst.IndentedBlock) else ()
        for stmt in body:
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and stmt.body else None
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                    and small.target.value == expr.attr.value:
                return _annotated_loader(cst.Param(name=small.target, annotation=small.annotation))
        return False
    nodes = index.value_nodes(expr) if isinstance(expr, cst.Name) else None
    return bool(nodes) and all(isinstance(n, cst.Call) and ctx.is_dataloader_call(n) for n in nodes)


def vacuous_tests(ctx, index, func: cst.FunctionDef, uses):
    """(use, test) for each use in the branch of ``if isinstance(x, IterableDataset):`` that
    runs when it is false, where ``x`` is a DataLoader: a loader is never an
    ``IterableDataset`` (its dataset may be), so that branch is every loader's."""
    for node, expr, _truth in uses:
        key = value_key(ctx, expr)
        if key is None:
            continue
        previous = node
        for ancestor in ctx.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                break
            if isinstance(ancestor, (cst.If, cst.IfExp)):
                test, negated = ancestor.test, False
                if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                    test, negated = test.expression, True
                tested = _tested_iterable(ctx, test)
                false_branch = ancestor.body if negated else ancestor.orelse
                if tested is not None and value_key(ctx, tested) == key and false_branch is not None \
                        and _within(ctx, previous, false_branch) and _known_loader(ctx, index, tested):
                    yield node, test
                    break
            previous = ancestor


def _tested_iterable(ctx, test) -> Optional[cst.BaseExpression]:
    if not isinstance(test, cst.Call) or ctx.qualname(test.func) != "builtins.isinstance":
        return None
    args = _single_arg(test, 2)
    if not args:
        return None
    classes = args[1].elements if isinstance(args[1], cst.Tuple) else [args[1]]
    kinds = {ctx.qualname(c.value if isinstance(c, cst.Element) else c) for c in classes}
    return args[0] if kinds & ITERABLE_CLASSES else None


def _annotated_parameter_named(ctx, node, name: str) -> bool:
    """Some function enclosing ``node`` has an annotated parameter called ``name``."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            params = ancestor.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                if param.name.value == name and param.annotation is not None:
                    return True
    return False
