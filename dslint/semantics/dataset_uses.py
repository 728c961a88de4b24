"""Where a file uses objects as datasets: summary facts that show a project class without
a torch base to be one (``alternatives.duck_roots`` reads them across files).

* ``loader_classes``: the classes whose instances a ``DataLoader`` receives as its dataset,
  or ``Subset``/``random_split``/``ConcatDataset`` wraps (all index them per sample);
* ``loader_params``: the parameters of a function that its ``DataLoader`` receives as the
  dataset (``def make_loader(ds): return DataLoader(ds)``);
* ``class_args``: the constructions a file passes to functions (``make_loader(Pages())``),
  matched against ``loader_params`` across files by the index;
* ``indexed_params``: the parameters of a class's ``__init__`` kept on ``self`` and indexed
  by its ``__getitem__`` with the sample index (``self.inner[index]``, ``self.inner[self.ids[index]]``): a dataset wrapper
  indexes what it is given once per sample, so the class given (named by the parameter's
  annotation, or constructed by a call of the wrapper) is a dataset too; so is a class whose
  object ``__init__`` builds and keeps, indexed the same way (``self.rows = Rows(path)``; no
  parameter: position None, name "");
* ``loader_constructions``: what each construction a DataLoader receives, or the file passes
  to a function, passes (``option_reach``: the options a loader's dataset leaves off);
* ``factory_returns``: the classes whose instances each function returns;
* ``wrapped_args``: the constructions (and ``self``, in a method: its class) a file passes
  to class calls (``Wrapper(Pages())``, ``Wrapper(self)``), matched against
  ``indexed_params`` across files by the index.

A construction is a call whose class ``bindings.class_ref`` resolves, passed directly or
through each assignment of a name in its scope (any branch) or of ``self.<attr>`` in any
method of the class, either arm of a conditional expression, the elements of a list, a
list comprehension or generator, both sides of a ``+``, or what ``name.append(...)`` adds to a list in its scope.
"""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics.bindings import class_ref, enclosing_scope, scope_assignments
from dslint.semantics.calls import DATALOADER, BoundCall
from dslint.semantics.epoch_facts import dataloader_calls
from dslint.semantics.handle_flow import handle_args
from dslint.semantics.names import ModuleNames
from dslint.semantics.walk import TreeIndex, iter_subtree

QualnameOf = Callable[[cst.CSTNode], str]  # a def's local qualified name (``summary.local_qualname``)

# Calls that index the dataset(s) they are given per sample, as a DataLoader does.
DATASET_WRAPPERS = frozenset({"torch.utils.data.Subset", "torch.utils.data.random_split", "torch.utils.data.ConcatDataset"})


def use_facts(tree: TreeIndex, names: ModuleNames, qualname_of: QualnameOf) -> dict:
    """This module's facts for the file's summary, by name (see the module doc)."""
    return {fact.__name__: fact(tree, names, qualname_of) for fact in (
        loader_classes, loader_params, class_args, loader_constructions, indexed_params, wrapped_args, factory_returns,
        handle_args)}


def factory_returns(tree: TreeIndex, names: ModuleNames, qualname_of: QualnameOf) -> dict:
    """{function: [class, ...]} for each function of the file that returns a construction
    (``return Cls(...)``, or a name each branch binds to one: ``parser = A(...)`` / ``parser =
    B(...)``, ``return parser``): what its callers may hold (``sharding``: an object that iterates
    itself)."""
    returned: dict = {}
    for node in tree.nodes(cst.Return):
        func = tree.scope_node(node)
        if node.value is not None and type(func) is cst.FunctionDef:
            returned.setdefault(id(func), (func, []))[1].append(node.value)
    found = {}
    for func, values in returned.values():
        classes = sorted(constructed(tree, names, values, qualname_of))
        if classes:
            found[qualname_of(func)] = classes
    return found


def constructed(tree: TreeIndex, names: ModuleNames, values: list, qualname_of: QualnameOf) -> Set[str]:
    """Qualified names of the classes the expressions ``values`` may construct."""
    return {qualified for qualified, _ in construction_calls(tree, names, values, qualname_of)}


def construction_calls(tree: TreeIndex, names: ModuleNames, values: list, qualname_of: QualnameOf) -> List[Tuple[str, cst.Call]]:
    """(qualified class name, call) for each construction the expressions ``values`` may be."""
    found, seen = [], set()
    while values:
        value = values.pop()
        if value is None or id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, cst.Name):
            values += scope_assignments(tree, enclosing_scope(tree, value), value.value) or []
            values += _appended(tree, value)
        elif isinstance(value, cst.IfExp):
            values += [value.body, value.orelse]
        elif isinstance(value, (cst.List, cst.Tuple)):
            values += [e.value for e in value.elements if not isinstance(e, cst.StarredElement)]
        elif isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            values.append(value.elt)
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            values += [value.left, value.right]
        elif isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
            values += _self_assignments(tree, value)
        elif isinstance(value, cst.Call):
            ref = class_ref(tree, names, value)
            if ref is not None:
                found.append((f"{names.modname}.{qualname_of(ref[1])}" if ref[0] == "local" else ref[1], value))
    return found


def _appended(tree: TreeIndex, name: cst.Name) -> list:
    """What ``name.append(x)`` adds to a list in the scope of ``name`` (``parts.append(Pages(p))``)."""
    return list(tree.memo(("dataset_uses.appended",), lambda: _appends(tree)).get((id(enclosing_scope(tree, name)), name.value), ()))


def _appends(tree: TreeIndex) -> dict:
    found: dict = {}
    for call in tree.nodes(cst.Call):
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "append" and type(func.value) is cst.Name and len(call.args) == 1:
            found.setdefault((id(enclosing_scope(tree, call)), func.value.value), []).append(call.args[0].value)
    return found


def loader_classes(tree: TreeIndex, names: ModuleNames, qualname_of: QualnameOf) -> List[str]:
    return sorted(constructed(tree, names, _loader_datasets(tree, names), qualname_of))


def _loader_datasets(tree: TreeIndex, names: ModuleNames) -> list:
    """The dataset expressions of the file's DataLoaders, ``Subset``s, ``random_split``s..."""
    values = [BoundCall(call, DATALOADER).expr("dataset") for call in dataloader_calls(tree, names)]
    tails = names.call_tails({"Subset", "random_split", "ConcatDataset"})
    for call in tree.nodes(cst.Call):
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        if tail in tails and call.args and not call.args[0].star and names.qualname(func) in DATASET_WRAPPERS:
            values.append(call.args[0].value)
    return values


def loader_constructions(tree: TreeIndex, names: ModuleNames, qualname_of: QualnameOf) -> List[list]:
    """[class, callee, keywords, positional count] for each construction a DataLoader (or
    ``Subset``...) of the file receives (callee "") or that the file passes to a project-looking
    function (its qualified name, ``class_args``); the count is -1 behind ``*``/``**``: which
    options a loader's dataset was built with (``option_reach``)."""
    found = [(cls, "", call) for cls, call in construction_calls(tree, names, _loader_datasets(tree, names), qualname_of)]
    found += [(cls, callee, made) for callee, _, cls, made in _passed(tree, names, qualname_of)]
    return [[cls, callee, sorted(a.keyword.value for a in made.args if a.keyword is not None),
             -1 if any(a.star for a in made.args) else sum(a.keyword is None for a in made.args)] for cls, callee, made in found]


def loader_params(tree: TreeIndex, names: ModuleNames, qualname_of: QualnameOf) -> List[list]:
    """[function, position or None, name] for each parameter of a function (not a method) that
    a ``DataLoader`` of its body receives as the dataset, never rebound there."""
    found = []
    for call in dataloader_calls(tree, names):
        expr = BoundCall(call, DATALOADER).expr("dataset")
        func = tree.scope_node(expr) if isinstance(expr, cst.Name) else None
        if type(func) is not cst.FunctionDef or type(tree.scope_node(func)) is cst.ClassDef:
            continue
        positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        if expr.value not in positional + [p.name.value for p in func.params.kwonly_params]:
            continue
        if scope_assignments(tree, func, expr.value) != []:
            continue
        position = positional.index(expr.value) if expr.value in positional else None
        found.append([qualname_of(func), position, expr.value])
    return found


def class_args(tree: TreeIndex, names: ModuleNames, qualname_of: QualnameOf) -> List[list]:
    """[callee, position or keyword, class] for each construction of a class (a capitalised name)
    passed to a call of a project-looking function (a lower-case name, not a builtin)."""
    return [list(entry) for entry in dict.fromkeys((callee, where, cls) for callee, where, cls, _ in _passed(tree, names, qualname_of))]


def _passed(tree: TreeIndex, names: ModuleNames, qualname_of: QualnameOf) -> List[tuple]:
    """(callee, position or keyword, class, construction call) for ``class_args`` and
    ``loader_constructions`` (computed once per file)."""
    def compute():
        found = []
        for call, func in _calls_named(tree, lambda tail: tail[:1].islower()):
            callee = None
            for where, arg in _placed_args(call):
                made = sorted((c, id(m), m) for c, m in construction_calls(tree, names, [arg.value], qualname_of) if _capitalised(c))
                callee = callee or (names.qualname(func) if made else None)
                if callee and not callee.startswith("builtins."):
                    found += [(callee, where, c, m) for c, _, m in made]
        return found

    return tree.memo(("dataset_uses.passed",), compute)


def _calls_named(tree: TreeIndex, wanted) -> Iterator[Tuple[cst.Call, cst.BaseExpression]]:
    """(call, callee expression) for each call with arguments whose callee's last name passes ``wanted``."""
    for call in tree.nodes(cst.Call):
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        if tail and wanted(tail) and call.args:
            yield call, func


def _placed_args(call: cst.Call) -> Iterator[Tuple[object, cst.Arg]]:
    """(position or keyword, argument) for each argument that is a name or a call; positions
    after a ``*args`` are unknown, so those arguments are left out."""
    position = 0
    for arg in call.args:
        if arg.star:
            position = None if arg.star == "*" else position
            continue
        where = arg.keyword.value if arg.keyword is not None else position
        if arg.keyword is None and position is not None:
            position += 1
        if where is not None and isinstance(arg.value, (cst.Name, cst.Call)):
            yield where, arg


def _capitalised(qualified: str) -> bool:
    return qualified.rsplit(".", 1)[-1].lstrip("_")[:1].isupper()


def _self_assignments(tree: TreeIndex, attr: cst.Attribute) -> list:
    """The values assigned to ``self.<attr>`` in any method of the class whose method reads
    it there (``self.train_set = Pages()`` in ``setup``, ``DataLoader(self.train_set)``)."""
    method = tree.scope_node(attr)
    cls = tree.scope_node(method) if type(method) is cst.FunctionDef else None
    params = method.params.params if cls is not None and type(cls) is cst.ClassDef else ()
    if not params or params[0].name.value != attr.value.value:
        return []
    found = []
    for target in tree.nodes(cst.AssignTarget):
        node = target.target
        if type(node) is not cst.Attribute or node.attr.value != attr.attr.value or type(node.value) is not cst.Name:
            continue
        where = tree.scope_node(target)
        if type(where) is cst.FunctionDef and tree.scope_node(where) is cls and where.params.params:
            if where.params.params[0].name.value == node.value.value:
                found.append(tree.parent_of(target).value)
    return found


def indexed_params(tree: TreeIndex, names: ModuleNames, qualname_of: QualnameOf) -> List[list]:
    """[class, position (after ``self``) or None, name, annotation's class or None] for each
    ``__init__`` parameter a class keeps on ``self`` (``self.inner = inner``, never assigned
    otherwise) that its ``__getitem__`` subscripts with its index parameter (see the module doc)."""
    found = []
    for cls in tree.nodes(cst.ClassDef):
        methods = {s.name.value: s for s in _body(cls) if type(s) is cst.FunctionDef}
        init, getitem = methods.get("__init__"), methods.get("__getitem__")
        if init is None or getitem is None or len(getitem.params.params) < 2 or not init.params.params:
            continue
        indexed = _indexed_attrs(tree, getitem)
        if not indexed:
            continue
        positional = [p for p in (*init.params.posonly_params, *init.params.params)][1:]
        params = {p.name.value: p for p in (*positional, *init.params.kwonly_params)}
        kept = _kept_params(tree, cls, init, params)
        for attr, param in sorted(kept.items()):
            if attr not in indexed:
                continue
            position = next((i for i, p in enumerate(positional) if p.name.value == param), None)
            annotation = params[param].annotation
            found.append([qualname_of(cls), position, param, _annotated_class(names, annotation)])
        for attr in sorted(indexed - set(kept)):  # ``self.rows = Rows(path)``: a class it builds, indexed the same way
            built = [n.value for n in iter_subtree(init.body, into_scopes=False) if isinstance(n, cst.Assign) and any(
                type(t.target) is cst.Attribute and t.target.attr.value == attr and type(t.target.value) is cst.Name
                and t.target.value.value == init.params.params[0].name.value for t in n.targets)]
            found += [[qualname_of(cls), None, "", c] for c in sorted(constructed(tree, names, built, qualname_of))]
    return found


def _body(cls: cst.ClassDef) -> list:
    return list(cls.body.body) if isinstance(cls.body, cst.IndentedBlock) else []


def _indexed_attrs(tree: TreeIndex, getitem: cst.FunctionDef) -> Set[str]:
    """``self`` attributes ``__getitem__`` subscripts with its index (``_is_index``)."""
    selfp, index = getitem.params.params[0].name.value, getitem.params.params[1].name.value
    found = set()
    for sub in tree.nodes(cst.Subscript):
        value = sub.value
        if type(value) is not cst.Attribute or type(value.value) is not cst.Name or value.value.value != selfp:
            continue
        if tree.scope_node(sub) is not getitem:
            continue
        if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index) and _is_index(sub.slice[0].slice.value, selfp, index):
            found.add(value.attr.value)
    return found


def _is_index(expr, selfp: str, index: str) -> bool:
    """The index itself, or an index table read with it (``self.indices[index]``, as ``Subset``)."""
    if type(expr) is cst.Name:
        return expr.value == index
    if type(expr) is not cst.Subscript or len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return False
    table, key = expr.value, expr.slice[0].slice.value
    is_self = type(table) is cst.Attribute and type(table.value) is cst.Name and table.value.value == selfp
    return is_self and type(key) is cst.Name and key.value == index


def _kept_params(tree: TreeIndex, cls: cst.ClassDef, init: cst.FunctionDef, params: dict) -> dict:
    """{attribute: parameter} for ``self.attr = param`` in ``__init__``, when no other
    assignment of ``self.attr`` in the class's methods gives it another value."""
    selfp = init.params.params[0].name.value
    kept, other = {}, set()
    for node, value, target in _attribute_stores(tree):
        where = tree.scope_node(target)
        if type(where) is not cst.FunctionDef or tree.scope_node(where) is not cls or not where.params.params:
            continue
        if where.params.params[0].name.value != node.value.value:
            continue
        if where is init and node.value.value == selfp and type(value) is cst.Name and value.value in params:
            kept.setdefault(node.attr.value, set()).add(value.value)
        else:
            other.add(node.attr.value)
    return {attr: next(iter(ps)) for attr, ps in kept.items() if len(ps) == 1 and attr not in other}


def _attribute_stores(tree: TreeIndex):
    """(``x.attr`` target, its value or None, the AssignTarget) for each assignment to an
    attribute of a name, pairing ``self.a, self.b = a, b`` element by element."""
    for target in tree.nodes(cst.AssignTarget):
        node, value = target.target, tree.parent_of(target).value
        if type(node) is cst.Attribute and type(node.value) is cst.Name:
            yield node, value, target
        elif type(node) in (cst.Tuple, cst.List):
            values = value.elements if type(value) in (cst.Tuple, cst.List) and len(value.elements) == len(node.elements) else None
            for i, element in enumerate(node.elements):
                inner = element.value
                if type(inner) is cst.Attribute and type(inner.value) is cst.Name:
                    yield inner, (values[i].value if values is not None else None), target


def _annotated_class(names: ModuleNames, annotation) -> Optional[str]:
    """The class a parameter's annotation names (``GenericDataset[T]``: ``GenericDataset``)."""
    if annotation is None:
        return None
    expr = annotation.annotation
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    qualified = names.qualname(expr)
    return qualified if qualified and _capitalised(qualified) else None


def wrapped_args(tree: TreeIndex, names: ModuleNames, qualname_of: QualnameOf) -> List[list]:
    """[class called, position or keyword, class given] for each construction, or ``self`` of
    a method (its class), passed to a call of a capitalised name (a class construction)."""
    found = []
    for call, _ in _calls_named(tree, lambda tail: tail.lstrip("_")[:1].isupper()):
        callee = None
        for where, arg in _placed_args(call):
            classes = _own_class(tree, names, arg.value, qualname_of)
            classes = classes or [c for c in constructed(tree, names, [arg.value], qualname_of) if _capitalised(c)]
            if not classes:
                continue
            callee = callee or _callee(tree, names, call, qualname_of)
            if callee:
                found.extend([callee, where, c] for c in sorted(classes))
    return found


def _callee(tree: TreeIndex, names: ModuleNames, call: cst.Call, qualname_of: QualnameOf) -> Optional[str]:
    ref = class_ref(tree, names, call)
    if ref is None:
        return None
    return f"{names.modname}.{qualname_of(ref[1])}" if ref[0] == "local" else ref[1]


def _own_class(tree: TreeIndex, names: ModuleNames, expr, qualname_of: QualnameOf) -> List[str]:
    """``self`` (the first parameter of a method, not rebound): the method's class."""
    if type(expr) is not cst.Name:
        return []
    method = tree.scope_node(expr)
    if type(method) is not cst.FunctionDef or not method.params.params:
        return []
    cls = tree.scope_node(method)
    if type(cls) is not cst.ClassDef or method.params.params[0].name.value != expr.value:
        return []
    if any(type(d.decorator) is cst.Name and d.decorator.value in ("staticmethod", "classmethod") for d in method.decorators):
        return []
    if scope_assignments(tree, method, expr.value) != []:
        return []
    return [f"{names.modname}.{qualname_of(cls)}"]
