"""What an iterable dataset's stream is made of, from its class bodies.

Where a one-shot iterator on ``self`` comes from (a file, a reader, a cursor, a
generator made once in ``__init__``), which ``self`` attributes an ``__iter__``
iterates, and which instance state a ``__next__`` advances and whether it can stop.
Whether the iteration consults ``torch.utils.data.get_worker_info()`` is
``worker_info.py``'s. A method, callable or function that cannot be seen is unknown
here, never a yes.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics import lifetimes as lt
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.passed_iterators import PASSED, passed_one_shot
from dslint.semantics.classes import called_method, find_method
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree

# --------------------------------------------------------------------------- self attributes bound


def target_attrs(target: cst.CSTNode, selfp: Optional[str]) -> List[str]:
    """``X`` for each ``self.X`` an assignment target binds (tuples and lists unpacked)."""
    attr = self_attr(target, selfp)
    if attr:
        return [attr]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[str] = []
        for element in target.elements:
            out.extend(target_attrs(element.value, selfp))
        return out
    return []


def assigned_attrs(func: cst.FunctionDef, nodes: Optional[Iterable[cst.CSTNode]] = None) -> Set[str]:
    """``self.X`` attributes (re)bound by plain or annotated assignment."""
    selfp = self_name(func)
    found: Set[str] = set()
    for node in nodes if nodes is not None else iter_subtree(func.body, into_scopes=False):
        if isinstance(node, cst.AssignTarget):
            found.update(target_attrs(node.target, selfp))
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            found.update(target_attrs(node.target, selfp))
    return found


def mutated_attrs(funcs: Iterable[cst.FunctionDef]) -> Set[str]:
    """``self.X`` assigned in any way (plain, annotated, augmented) by these functions."""
    found: Set[str] = set()
    for func in funcs:
        found |= assigned_attrs(func)
        selfp = self_name(func)
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, cst.AugAssign):
                found.update(target_attrs(node.target, selfp))
    return found


class InitValues:
    """Resolve names and ``self.X`` inside one ``__init__`` to the expression assigned."""

    def __init__(self, ctx, init: cst.FunctionDef) -> None:
        self.ctx = ctx
        self.init = init
        self.selfp = self_name(init)
        self.attrs: Dict[str, List[cst.BaseExpression]] = {}
        self.with_names: Set[str] = set()
        for node in iter_subtree(init.body, into_scopes=False):
            if isinstance(node, cst.AssignTarget):
                attr = self_attr(node.target, self.selfp)
                if attr:
                    self.attrs.setdefault(attr, []).append(self.ctx.parent(node).value)
                else:
                    for attr in target_attrs(node.target, self.selfp):
                        self.attrs.setdefault(attr, []).append(None)  # unpacked: unknown
            elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
                attr = self_attr(node.target, self.selfp)
                if attr:
                    self.attrs.setdefault(attr, []).append(node.value if isinstance(node, cst.AnnAssign) else None)
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                if isinstance(node.asname.name, cst.Name):
                    self.with_names.add(node.asname.name.value)

    def value(self, expr: Optional[cst.CSTNode]) -> Optional[cst.CSTNode]:
        """One step: a local name or self attribute assigned once, to its value."""
        if isinstance(expr, cst.Name):
            if expr.value in self.with_names:
                return None
            if self.ctx.enclosing_function(expr) is not self.init:
                return None
            return self.ctx.single_assignment(expr)
        attr = self_attr(expr, self.selfp)
        if attr:
            values = self.attrs.get(attr, [])
            return values[0] if len(values) == 1 else None
        return None

    def resolve(self, expr: Optional[cst.CSTNode], depth: int = 0) -> Optional[cst.CSTNode]:
        while depth < 4 and isinstance(expr, (cst.Name, cst.Attribute)):
            if isinstance(expr, cst.Name) and expr.value in self.with_names:
                return None
            nxt = self.value(expr)
            if nxt is None:
                return expr
            expr, depth = nxt, depth + 1
        return expr

    def mentions_with_name(self, expr: cst.CSTNode) -> bool:
        return any(isinstance(n, cst.Name) and n.value in self.with_names for n in iter_subtree(expr, into_scopes=False))


# --------------------------------------------------------------------------- one-shot iterators made in __init__

FILE = "file"
ITERATOR = "iterator"
CURSOR = "cursor"

_ITER_BUILTINS = frozenset(
    {"builtins.iter", "builtins.map", "builtins.filter", "builtins.zip", "builtins.enumerate", "builtins.reversed"}
)
_ENDLESS = frozenset({"itertools.count", "itertools.cycle", "itertools.repeat", "itertools.tee"})
_CSV_READERS = frozenset({"csv.reader", "csv.DictReader"})
_LAZY_LISTINGS = frozenset({"os.scandir", "os.walk", "glob.iglob"})
_CHUNKED_READERS = frozenset(
    {"pandas.read_csv", "pandas.read_table", "pandas.read_json", "pandas.read_sql", "pandas.read_sql_query", "pandas.read_fwf"}
)
# The file openers whose handle iterates line by line (archives and HDF5 files do not).
_ITERATOR_FILE_OPENERS = lt.FILE_OPENERS - {"tarfile.open", "zipfile.ZipFile", "h5py.File"}
_PATHS = frozenset({"pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "pathlib.WindowsPath"})
_DB_CONNECT = frozenset(
    {
        "sqlite3.connect", "sqlite3.dbapi2.connect", "pyodbc.connect", "psycopg2.connect", "psycopg.connect",
        "pymysql.connect", "MySQLdb.connect", "mysql.connector.connect",
    }
)
# connections whose execute() returns the cursor
_EXECUTE_RETURNS_CURSOR = frozenset({"sqlite3.connect", "sqlite3.dbapi2.connect", "pyodbc.connect"})


def _opens_file(ctx, call: cst.Call) -> bool:
    if ctx.call_name(call) in _ITERATOR_FILE_OPENERS:
        return True
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "open" and lt.opener_kind(ctx, call) == "file"


def _is_file(ctx, values: InitValues, expr) -> bool:
    expr = values.resolve(expr)
    return isinstance(expr, cst.Call) and _opens_file(ctx, expr)


def _is_path(ctx, values: InitValues, expr) -> bool:
    expr = values.resolve(expr)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return _is_path(ctx, values, expr.left)
    return isinstance(expr, cst.Call) and ctx.call_name(expr) in _PATHS


def _connection(ctx, values: InitValues, expr) -> Optional[str]:
    expr = values.resolve(expr)
    if isinstance(expr, cst.Call):
        name = ctx.call_name(expr)
        if name in _DB_CONNECT:
            return name
    return None


def _iterator_source(ctx, cls, values: InitValues, expr, depth: int = 0) -> Optional[Tuple[cst.CSTNode, str]]:
    """(creating node, FILE/ITERATOR/CURSOR) when ``expr`` in ``__init__`` makes a one-shot iterator."""
    if expr is None or depth > 3:
        return None
    if isinstance(expr, cst.GeneratorExp):
        return None if values.mentions_with_name(expr) else (expr, ITERATOR)
    if isinstance(expr, cst.Name):
        return _iterator_source(ctx, cls, values, values.value(expr), depth + 1)
    if not isinstance(expr, cst.Call):
        return None
    if values.mentions_with_name(expr):
        return None  # built on a handle a `with` already closed: a different failure
    name = ctx.call_name(expr)
    positional = [arg.value for arg in expr.args if arg.keyword is None and not arg.star]
    if _opens_file(ctx, expr):
        return expr, FILE
    if name in _ITER_BUILTINS or name in _CSV_READERS or (
        name and name.startswith("itertools.") and name not in _ENDLESS
    ):
        if name == "builtins.iter" and len(expr.args) != 1:
            return None  # iter(callable, sentinel)
        flavour = FILE if any(_is_file(ctx, values, arg) for arg in positional) else ITERATOR
        return expr, flavour
    if name in _LAZY_LISTINGS:
        return expr, ITERATOR
    if name in _CHUNKED_READERS:
        for arg in expr.args:
            if arg.keyword is not None and arg.keyword.value in ("chunksize", "iterator"):
                value = ctx.literal(arg.value)
                if value is not UNKNOWN and value not in (None, False, 0):
                    return expr, ITERATOR
        return None
    func = expr.func
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if method in ("glob", "rglob", "iterdir") and _is_path(ctx, values, func.value):
            return expr, ITERATOR
        if method == "execute" and _connection(ctx, values, func.value) in _EXECUTE_RETURNS_CURSOR:
            return expr, CURSOR
        if method == "execute" and isinstance(func.value, cst.Call):
            inner = func.value
            if (
                isinstance(inner.func, cst.Attribute)
                and inner.func.attr.value == "cursor"
                and _connection(ctx, values, inner.func.value) in _EXECUTE_RETURNS_CURSOR
            ):
                return expr, CURSOR
        if method == "__iter__" and not expr.args:
            return expr, ITERATOR
        local = called_method(ctx, cls, expr, values.selfp)
        if local is not None:
            return (expr, ITERATOR) if ctx.regions.get(local).is_generator else None
        if self_attr(func, values.selfp):
            return None
    if name and not name.startswith("builtins."):
        facts = ctx.view.function_facts(name)
        if facts is not None and facts.get("gen"):
            return expr, ITERATOR
        if one_shot(ctx, expr) is not None:
            return expr, ITERATOR  # a function of this file that returns a fresh iterator
    return None


# --------------------------------------------------------------------------- one-shot iterators anywhere

GENERATOR = "generator"  # a generator object: cannot be copied, so a wrapper's deepcopy falls back to it


def _module_function(ctx, call: cst.Call) -> Optional[cst.FunctionDef]:
    func = call.func
    if not isinstance(func, cst.Name) or ctx.call_name(call) != f"{ctx.names.modname}.{func.value}":
        return None
    found = [n for n in ctx.nodes(cst.FunctionDef) if n.name.value == func.value and ctx.tree.scope_node(n) is None]
    return found[0] if len(found) == 1 else None


def returned_one_shot(ctx, func: cst.FunctionDef, depth: int = 0) -> Optional[str]:
    """GENERATOR or ITERATOR when every ``return`` of ``func`` hands back a fresh one-shot
    iterator (a generator function counts as GENERATOR); None otherwise."""
    if ctx.regions.get(func).is_generator:
        return GENERATOR
    kinds: Set[Optional[str]] = set()
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, cst.Return):
            kinds.add(one_shot(ctx, node.value, depth + 1) if node.value is not None else None)
    if not kinds or None in kinds:
        return None
    return GENERATOR if kinds == {GENERATOR} else ITERATOR


def one_shot(ctx, expr: Optional[cst.CSTNode], depth: int = 0) -> Optional[str]:
    """Is ``expr`` a one-shot iterator? GENERATOR (a generator expression, a call of a
    generator function of the project, or of a function of this file returning one),
    ITERATOR (``iter(x)``, ``map``/``filter``/``zip``/``enumerate``, a non-endless
    ``itertools`` iterator, a function of this file returning one), or None. A local
    name counts when its one assignment does."""
    if expr is None or depth > 4:
        return None
    if isinstance(expr, cst.GeneratorExp):
        return GENERATOR
    if isinstance(expr, cst.Name):
        return one_shot(ctx, ctx.single_assignment(expr), depth + 1)
    if not isinstance(expr, cst.Call):
        return None
    name = ctx.call_name(expr)
    if name in _ITER_BUILTINS:
        return None if name == "builtins.iter" and len(expr.args) != 1 else ITERATOR
    if name and name.startswith("itertools.") and name not in _ENDLESS:
        return ITERATOR
    local = _module_function(ctx, expr)
    if local is not None:
        return returned_one_shot(ctx, local, depth + 1)
    if name and not name.startswith("builtins."):
        facts = ctx.view.function_facts(name)
        if facts is not None and facts.get("gen"):
            return GENERATOR
    return None


def init_iterators(ctx, cls, init: cst.FunctionDef) -> Dict[str, Tuple[cst.CSTNode, str]]:
    """Attributes ``__init__`` binds to a one-shot iterator: attr -> (creating node, FILE/ITERATOR/CURSOR)."""
    values = InitValues(ctx, init)
    found: Dict[str, Tuple[cst.CSTNode, str]] = {}
    for attr, assigned in values.attrs.items():
        if len(assigned) != 1 or assigned[0] is None:
            continue
        value = assigned[0]
        source = _iterator_source(ctx, cls, values, value) or passed_one_shot(ctx, cls, init, value)
        if source is not None:
            found[attr] = source
            continue
        # self.cur = conn.cursor(); self.cur.execute(sql)
        if (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "cursor"
            and _connection(ctx, values, value.func.value)
        ):
            for node in iter_subtree(init.body, into_scopes=False):
                if (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in ("execute", "executemany")
                    and self_attr(node.func.value, values.selfp) == attr
                ):
                    found[attr] = (node, CURSOR)
                    break
    return found


# --------------------------------------------------------------------------- what an iteration consumes and advances

# functions that iterate the argument they are given
_ITERATING = frozenset(
    {
        "builtins.iter", "builtins.next", "builtins.enumerate", "builtins.zip", "builtins.map", "builtins.filter",
        "builtins.list", "builtins.tuple", "builtins.set", "builtins.frozenset", "builtins.sorted", "builtins.dict",
        "builtins.sum", "builtins.min", "builtins.max", "builtins.any", "builtins.all", "csv.reader", "csv.DictReader",
    }
)


def iterated_attrs(ctx, funcs: List[cst.FunctionDef], entry: cst.FunctionDef) -> Set[str]:
    """``self.X`` that these functions iterate: ``for``, comprehension, ``yield from``, ``next()``,
    iterating builtins/``itertools``/``csv``, or (from a non-generator ``__iter__``) returning it."""
    consumed: Set[str] = set()
    for func in funcs:
        selfp = self_name(func)
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, (cst.For, cst.CompFor)):
                attr = self_attr(node.iter, selfp)
            elif isinstance(node, cst.Yield) and isinstance(node.value, cst.From):
                attr = self_attr(node.value.item, selfp)
            elif isinstance(node, cst.Call):
                attr = None
                name = ctx.call_name(node)
                if name in _ITERATING or (name and name.startswith("itertools.")):
                    for arg in node.args:
                        if arg.keyword is None and self_attr(arg.value, selfp):
                            consumed.add(self_attr(arg.value, selfp))
                elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "__next__":
                    attr = self_attr(node.func.value, selfp)
            elif isinstance(node, cst.Return) and func is entry and not ctx.regions.get(func).is_generator:
                attr = self_attr(node.value, selfp) if node.value is not None else None
            else:
                attr = None
            if attr:
                consumed.add(attr)
    return consumed


def is_stop_iteration(expr: Optional[cst.CSTNode]) -> bool:
    """``StopIteration`` or ``StopIteration(...)``."""
    if isinstance(expr, cst.Call):
        expr = expr.func
    return isinstance(expr, cst.Name) and expr.value == "StopIteration"


def returns_self(func: cst.FunctionDef) -> List[cst.Return]:
    """The ``return self`` statements of a method."""
    selfp = self_name(func)
    return [
        node
        for node in iter_subtree(func.body, into_scopes=False)
        if isinstance(node, cst.Return) and isinstance(node.value, cst.Name) and node.value.value == selfp
    ]


def draws_from_self(func: cst.FunctionDef) -> bool:
    """The method advances its own instance as an iterator (``next(self)``,
    ``self.__next__()``): the samples come from ``__next__``, as with ``return self``."""
    selfp = self_name(func)
    for node in iter_subtree(func.body, into_scopes=False):
        if not isinstance(node, cst.Call):
            continue
        target = node.func
        if (isinstance(target, cst.Name) and target.value == "next" and node.args
                and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == selfp):
            return True
        if (isinstance(target, cst.Attribute) and target.attr.value == "__next__"
                and isinstance(target.value, cst.Name) and target.value.value == selfp):
            return True
    return False


_ADVANCING_METHODS = ("__next__", "pop", "popleft", "readline", "read", "fetchone")


def advanced_state(ctx, funcs: List[cst.FunctionDef]) -> Tuple[Set[str], bool]:
    """Attributes that ``__next__`` (and what it reaches) advances; can it stop?"""
    advanced: Set[str] = set()
    tested: Set[Optional[str]] = set()
    stops = False
    for func in funcs:
        selfp = self_name(func)
        for node in iter_subtree(func.body, into_scopes=False):
            if isinstance(node, cst.AugAssign):
                advanced.update(target_attrs(node.target, selfp))
            elif isinstance(node, cst.Assign):
                reads = {self_attr(n, selfp) for n in iter_subtree(node.value, into_scopes=False)}
                for target in node.targets:
                    for attr in target_attrs(target.target, selfp):
                        if attr in reads:  # self.pos = self.pos + 1, self.buf = self.buf[1:]
                            advanced.add(attr)
            elif isinstance(node, cst.Raise) and is_stop_iteration(node.exc):
                stops = True
                for ancestor in ctx.ancestors(node):
                    if isinstance(ancestor, (cst.If, cst.While)):
                        tested.update(self_attr(n, selfp) for n in iter_subtree(ancestor.test, into_scopes=False))
                        break
                    if isinstance(ancestor, cst.FunctionDef):
                        break
            elif isinstance(node, cst.Call):
                func_expr = node.func
                if isinstance(func_expr, cst.Name) and func_expr.value == "next" and node.args:
                    attr = self_attr(node.args[0].value, selfp)
                    if attr:
                        advanced.add(attr)
                        if len(node.args) == 1:
                            stops = True  # StopIteration propagates
                elif isinstance(func_expr, cst.Attribute) and func_expr.attr.value in _ADVANCING_METHODS:
                    attr = self_attr(func_expr.value, selfp)
                    if attr:
                        advanced.add(attr)
                        if func_expr.attr.value == "__next__":
                            stops = True
    # `if not self.more: raise StopIteration` ... `self.more = False`: a flag that ends the stream
    advanced |= {a for a in tested if a} & mutated_attrs(funcs)
    return advanced, stops


def reset_on_exhaustion(ctx, cls: cst.ClassDef, funcs: List[cst.FunctionDef]) -> Set[str]:
    """Attributes reassigned right before ``raise StopIteration`` (or in ``except StopIteration``)."""
    reset: Set[str] = set()
    for func in funcs:
        for node in iter_subtree(func.body, into_scopes=False):
            statements: List[cst.CSTNode] = []
            if isinstance(node, cst.Raise) and is_stop_iteration(node.exc):
                child: cst.CSTNode = node
                for ancestor in ctx.ancestors(node):
                    body = getattr(ancestor, "body", None)
                    if isinstance(body, (list, tuple)):
                        for stmt in body:
                            if stmt is child:
                                break
                            statements.append(stmt)
                    if isinstance(ancestor, (cst.IndentedBlock, cst.SimpleStatementSuite, cst.FunctionDef)):
                        break
                    child = ancestor
            elif isinstance(node, cst.ExceptHandler) and is_stop_iteration(node.type):
                statements.append(node.body)
            for stmt in statements:
                nodes = list(iter_subtree(stmt, into_scopes=False))
                reset |= assigned_attrs(func, nodes)
                selfp = self_name(func)
                for sub in nodes:
                    if isinstance(sub, cst.Call) and self_attr(sub.func, selfp):
                        method = find_method(ctx, cls, sub.func.attr.value)
                        if method is not None:
                            reset |= assigned_attrs(method)
    return reset
