"""DSL301-DSL304: the IterableDataset protocol.

An IterableDataset is iterated once per epoch: the DataLoader calls ``iter()`` on
it (in every worker process, or in the main process with ``num_workers=0``) and
drains the result. Four ways this goes wrong, each measured on torch 2.13:

* DSL301 ``__iter__`` returns ``self``: the one iterator is exhausted after the
  first epoch;
* DSL302 an iterator (file, reader, cursor, generator) made once in ``__init__`` and
  drained by ``__iter__``: the same;
* DSL303 no sharding by worker: every worker replays the whole stream;
* DSL304 ``len()`` of an IterableDataset that has no ``__len__``: a TypeError.

Everything here is decided from the class bodies of the checked file and the
project index (``ctx.view``); a method, base or callable that cannot be seen is
unknown, and unknown is never reported.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Set, Tuple

import libcst as cst

from dslint.report import FixSpec, NodeEdit
from dslint.rules.base import ERROR, WARNING, Rule, Symptom
from dslint.semantics import lifetimes as lt
from dslint.semantics.classes import all_methods, find_method, local_mro, methods
from dslint.semantics.bindings import class_ref, local_class_path
from dslint.semantics.calls import DATALOADER, UNKNOWN, BoundCall
from dslint.semantics.loops import is_test_code
from dslint.semantics.names import canonical, dotted_parts
from dslint.semantics.project import ITERABLE
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.summary import WORKER_INFO
from dslint.semantics.walk import iter_subtree

DATAPIPE_ROOTS = [
    "torch.utils.data.IterDataPipe",
    "torch.utils.data.MapDataPipe",
    "torch.utils.data.datapipes.datapipe.IterDataPipe",
    "torch.utils.data.datapipes.datapipe.MapDataPipe",
    "torch.utils.data.datapipes.iter.IterDataPipe",
]
# torch's ChainDataset iterates other datasets: sharding is theirs to do.
DELEGATING_ROOTS = DATAPIPE_ROOTS + ["torch.utils.data.ChainDataset"]

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


# --------------------------------------------------------------------------- class helpers


def _body_nodes(func: cst.FunctionDef):
    """Nodes of a function body, not entering nested functions, lambdas or classes."""
    for node in iter_subtree(func.body, into_scopes=False):
        yield node


def _reached(ctx, cls: cst.ClassDef, start: cst.FunctionDef) -> List[cst.FunctionDef]:
    """``start`` and the methods of this file's classes it reaches through ``self.m``."""
    out = [start]
    work = [start]
    while work:
        func = work.pop()
        selfp = self_name(func)
        for node in _body_nodes(func):
            name = self_attr(node, selfp)
            if name is None:
                continue
            method = find_method(ctx, cls, name)
            if method is not None and not any(method is seen for seen in out):
                out.append(method)
                work.append(method)
    return out


def _target_attrs(target: cst.CSTNode, selfp: Optional[str]) -> List[str]:
    attr = self_attr(target, selfp)
    if attr:
        return [attr]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[str] = []
        for element in target.elements:
            out.extend(_target_attrs(element.value, selfp))
        return out
    return []


def _assigned_attrs(func: cst.FunctionDef, nodes: Optional[Iterable[cst.CSTNode]] = None) -> Set[str]:
    """``self.X`` attributes (re)bound by plain or annotated assignment."""
    selfp = self_name(func)
    found: Set[str] = set()
    for node in nodes if nodes is not None else _body_nodes(func):
        if isinstance(node, cst.AssignTarget):
            found.update(_target_attrs(node.target, selfp))
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            found.update(_target_attrs(node.target, selfp))
    return found


def _is_datapipe_or_chain(ctx, cls: cst.ClassDef) -> bool:
    qual = ctx.qualname_of_def(cls)
    if canonical(f"{ctx.names.modname}.{qual}") in DELEGATING_ROOTS:
        return True  # torch's own source
    return ctx.view.is_subclass(qual, DELEGATING_ROOTS)


def _iterable_classes(ctx) -> List[cst.ClassDef]:
    return [c for c in ctx.dataset_classes() if ctx.class_kind(c) == ITERABLE and not _is_datapipe_or_chain(ctx, c)]


def _is_stop_iteration(expr: Optional[cst.CSTNode]) -> bool:
    if isinstance(expr, cst.Call):
        expr = expr.func
    return isinstance(expr, cst.Name) and expr.value == "StopIteration"


def _indent_of(ctx, node: cst.CSTNode) -> str:
    """The indentation libcst gives the statement containing ``node``."""
    blocks = [a for a in ctx.ancestors(node) if isinstance(a, cst.IndentedBlock)]
    default = ctx.module.default_indent
    return "".join(b.indent if b.indent is not None else default for b in reversed(blocks))


# --------------------------------------------------------------------------- DSL301


def _advanced_state(ctx, funcs: List[cst.FunctionDef]) -> Tuple[Set[str], bool]:
    """Attributes that ``__next__`` (and what it reaches) advances; can it stop?"""
    advanced: Set[str] = set()
    tested: Set[Optional[str]] = set()
    stops = False
    for func in funcs:
        selfp = self_name(func)
        for node in _body_nodes(func):
            if isinstance(node, cst.AugAssign):
                advanced.update(_target_attrs(node.target, selfp))
            elif isinstance(node, cst.Assign):
                reads = {self_attr(n, selfp) for n in iter_subtree(node.value, into_scopes=False)}
                for target in node.targets:
                    for attr in _target_attrs(target.target, selfp):
                        if attr in reads:  # self.pos = self.pos + 1, self.buf = self.buf[1:]
                            advanced.add(attr)
            elif isinstance(node, cst.Raise) and _is_stop_iteration(node.exc):
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
                elif isinstance(func_expr, cst.Attribute) and func_expr.attr.value in (
                    "__next__",
                    "pop",
                    "popleft",
                    "readline",
                    "read",
                    "fetchone",
                ):
                    attr = self_attr(func_expr.value, selfp)
                    if attr:
                        advanced.add(attr)
                        if func_expr.attr.value == "__next__":
                            stops = True
    # `if not self.more: raise StopIteration` ... `self.more = False`: a flag that ends the stream
    advanced |= {a for a in tested if a} & _mutated_attrs(funcs)
    return advanced, stops


def _mutated_attrs(funcs: List[cst.FunctionDef]) -> Set[str]:
    """``self.X`` assigned in any way (plain, annotated, augmented) by these functions."""
    found: Set[str] = set()
    for func in funcs:
        found |= _assigned_attrs(func)
        selfp = self_name(func)
        for node in _body_nodes(func):
            if isinstance(node, cst.AugAssign):
                found.update(_target_attrs(node.target, selfp))
    return found


def _reset_on_exhaustion(ctx, cls: cst.ClassDef, funcs: List[cst.FunctionDef]) -> Set[str]:
    """Attributes reassigned right before ``raise StopIteration`` (or in ``except StopIteration``)."""
    reset: Set[str] = set()
    for func in funcs:
        for node in _body_nodes(func):
            statements: List[cst.CSTNode] = []
            if isinstance(node, cst.Raise) and _is_stop_iteration(node.exc):
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
            elif isinstance(node, cst.ExceptHandler) and _is_stop_iteration(node.type):
                statements.append(node.body)
            for stmt in statements:
                nodes = list(iter_subtree(stmt, into_scopes=False))
                reset |= _assigned_attrs(func, nodes)
                selfp = self_name(func)
                for sub in nodes:
                    if isinstance(sub, cst.Call) and self_attr(sub.func, selfp):
                        method = find_method(ctx, cls, sub.func.attr.value)
                        if method is not None:
                            reset |= _assigned_attrs(method)
    return reset


def _returns_self(func: cst.FunctionDef) -> List[cst.Return]:
    selfp = self_name(func)
    return [
        node
        for node in _body_nodes(func)
        if isinstance(node, cst.Return) and isinstance(node.value, cst.Name) and node.value.value == selfp
    ]


_SAFE_CALLS = frozenset(
    {
        "builtins.iter",
        "builtins.len",
        "builtins.range",
        "builtins.enumerate",
        "builtins.zip",
        "builtins.list",
        "builtins.tuple",
        "builtins.reversed",
        "builtins.int",
        "builtins.min",
        "builtins.max",
    }
)


def _portable(ctx, expr: cst.CSTNode, init_self: str) -> bool:
    """Can ``expr`` (from ``__init__``) be re-evaluated in another method of the instance?"""
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in ("None", "True", "False")
    if isinstance(expr, cst.Attribute):
        return isinstance(expr.value, cst.Name) and expr.value.value == init_self
    if isinstance(expr, cst.UnaryOperation):
        return _portable(ctx, expr.expression, init_self)
    if isinstance(expr, cst.BinaryOperation):
        return _portable(ctx, expr.left, init_self) and _portable(ctx, expr.right, init_self)
    if isinstance(expr, cst.Subscript):
        return _portable(ctx, expr.value, init_self) and all(
            isinstance(e.slice, cst.Index) and _portable(ctx, e.slice.value, init_self) for e in expr.slice
        )
    if isinstance(expr, (cst.List, cst.Tuple)):
        return all(isinstance(e, cst.Element) and _portable(ctx, e.value, init_self) for e in expr.elements)
    if isinstance(expr, cst.Call):
        if any(arg.keyword is not None or arg.star for arg in expr.args):
            return False
        if ctx.call_name(expr) not in _SAFE_CALLS:
            return False
        return all(_portable(ctx, arg.value, init_self) for arg in expr.args)
    return False


def _init_values(ctx, init: cst.FunctionDef) -> Dict[str, cst.BaseExpression]:
    """``self.X = value`` statements at the top level of ``__init__``, for attributes assigned once."""
    selfp = self_name(init)
    counts: Dict[str, int] = {}
    for node in _body_nodes(init):
        if isinstance(node, cst.AssignTarget):
            for attr in _target_attrs(node.target, selfp):
                counts[attr] = counts.get(attr, 0) + 1
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            for attr in _target_attrs(node.target, selfp):
                counts[attr] = counts.get(attr, 0) + 1
    values: Dict[str, cst.BaseExpression] = {}
    for stmt in init.body.body if isinstance(init.body, cst.IndentedBlock) else ():
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        small = stmt.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target, value = small.targets[0].target, small.value
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            target, value = small.target, small.value
        else:
            continue
        attr = self_attr(target, selfp)
        if attr and counts.get(attr) == 1:
            values[attr] = value
    return values


def _iter_fix(ctx, cls, iter_func, ret, missing: Set[str]) -> Optional[FixSpec]:
    """Rewrite a ``... return self`` ``__iter__`` into a generator that restarts every epoch."""
    selfp = self_name(iter_func)
    body = iter_func.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return None
    statements = list(body.body)
    last = statements[-1]
    if not (isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 and last.body[0] is ret):
        return None
    for i, stmt in enumerate(statements[:-1]):
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        small = stmt.body[0]
        if i == 0 and isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # docstring
        if isinstance(small, cst.Assign) and all(self_attr(t.target, selfp) for t in small.targets):
            continue
        return None
    init = find_method(ctx, cls, "__init__")
    resets: List[str] = []
    if missing:
        if init is None or self_name(init) != selfp:
            return None
        values = _init_values(ctx, init)
        for attr in sorted(missing):
            value = values.get(attr)
            if value is None or not _portable(ctx, value, selfp):
                return None
            text = " ".join(ctx.code(value).split())
            resets.append(f"{selfp}.{attr} = {text}")
    indent = _indent_of(ctx, ret)
    one = ctx.module.default_indent
    newline = ctx.module.default_newline
    lines = resets + [
        "while True:",
        f"{one}try:",
        f"{one}{one}sample = next({selfp})",
        f"{one}except StopIteration:",
        f"{one}{one}return",
        f"{one}yield sample",
    ]
    content = lines[0] + "".join(newline + indent + line for line in lines[1:])
    what = f" that resets {', '.join(f'`{selfp}.{a}`' for a in sorted(missing))} and" if missing else " that"
    return FixSpec(
        applicability="unsafe",
        message=f"Make `__iter__` a generator{what} restarts the stream every epoch",
        edits=[NodeEdit(start=ret, end=ret, content=content)],
    )


class IterReturnsSelf(Rule):
    """
    ## What it does
    Flags `return self` in the `__iter__` of an `IterableDataset` subclass whose
    `__next__` advances state on the instance (a counter, a cursor, an iterator)
    and can raise `StopIteration`, when nothing resets that state for the next
    `iter()` call.

    Not reported: an `__iter__` that resets everything `__next__` advances before
    returning `self`, a `__next__` that resets its state right before raising
    `StopIteration`, state that another method of the class reassigns (a `reset()`
    the caller may use), endless streams (a `__next__` that never stops), and
    classes whose `__next__` is not in the checked file. DataPipes and test
    code (a `tests/` directory, `test_*.py`), whose fixture streams are built
    and drained once per test, are left alone.

    ## Why is this bad?
    The DataLoader calls `iter(dataset)` at the start of every epoch. When that
    returns the dataset itself, every epoch continues the *same* iterator, which
    the first epoch exhausted. Measured on torch 2.13 with 100 samples over 3
    epochs: `num_workers=0` gave 100/0/0 samples and `persistent_workers=True`
    gave 200/0/0 (two workers, unsharded). Plain workers gave 200/200/200 only
    because each epoch re-forks the untouched parent copy, which hides the bug
    until someone turns persistence on or debugs with `num_workers=0`. Nothing
    raises: the training loop just runs empty epochs.

    ## Example
    ```python
    class Lines(IterableDataset):
        def __init__(self, lines):
            self.lines = lines
            self.pos = 0

        def __iter__(self):
            return self

        def __next__(self):
            if self.pos >= len(self.lines):
                raise StopIteration
            self.pos += 1
            return self.lines[self.pos - 1]
    ```

    ## Use instead
    ```python
    class Lines(IterableDataset):
        def __init__(self, lines):
            self.lines = lines

        def __iter__(self):
            for line in self.lines:
                yield line
    ```

    ## Fix safety
    A fix is offered when `__iter__` is just `return self` (optionally after
    assigning attributes) and every attribute that `__next__` (or a method it
    calls) assigns or advances is set once at the top of `__init__` from
    literals and other attributes. It rewrites `__iter__` into a generator that
    resets those attributes to their `__init__` values and then drains
    `next(self)`, so every epoch restarts. It is unsafe:
    `iter(ds)` no longer returns `ds`, the reset re-evaluates the `__init__`
    expression (for example `iter(self.items)`), and code that relied on resuming
    a partly consumed stream will now start over.

    ## References
    - PyTorch docs: `torch.utils.data.IterableDataset`
    - `../shared/PITFALLS.md` IT-1
    """

    code = "DSL301"
    name = "iter-returns-self"
    symptom = Symptom("epoch_counts", "second epoch yields 0 samples (num_workers=0 or persistent workers)")
    level = ERROR
    fix_availability = "sometimes"
    summary = "`IterableDataset.__iter__` returns `self`, so only the first epoch has samples"
    help = "Make `__iter__` a generator (or return a fresh iterator) so every `iter()` call starts over"

    valid = (
        """
        from torch.utils.data import IterableDataset

        class Reset(IterableDataset):
            def __init__(self, n):
                self.n = n
                self.i = 0

            def __iter__(self):
                self.i = 0
                return self

            def __next__(self):
                if self.i >= self.n:
                    raise StopIteration
                self.i += 1
                return self.i
        """,
        """
        from torch.utils.data import IterableDataset

        class ResetsOnExhaustion(IterableDataset):
            def __init__(self, n):
                self.n = n
                self.i = 0

            def __iter__(self):
                return self

            def __next__(self):
                if self.i >= self.n:
                    self.i = 0
                    raise StopIteration
                self.i += 1
                return self.i
        """,
        """
        import torch
        from torch.utils.data import IterableDataset

        class Endless(IterableDataset):
            def __iter__(self):
                return self

            def __next__(self):
                return torch.randn(3)
        """,
        """
        from torch.utils.data import IterableDataset

        class Gen(IterableDataset):
            def __iter__(self):
                for i in range(3):
                    yield i
                return self
        """,
        """
        class NotADataset:
            def __init__(self):
                self.i = 0

            def __iter__(self):
                return self

            def __next__(self):
                if self.i > 3:
                    raise StopIteration
                self.i += 1
                return self.i
        """,
        """
        from torch.utils.data import IterableDataset

        class ExternalReset(IterableDataset):
            def __init__(self, data):
                self.data = data
                self.it = iter(data)

            def set_epoch(self, epoch):
                self.it = iter(self.data)

            def __iter__(self):
                return self

            def __next__(self):
                return next(self.it)
        """,
        """
        from torch.utils.data import IterableDataset

        class Helper(IterableDataset):
            def __init__(self, data):
                self.data = data

            def __iter__(self):
                self._restart()
                return self

            def _restart(self):
                self.pos = 0

            def __next__(self):
                if self.pos >= len(self.data):
                    raise StopIteration
                self.pos += 1
                return self.data[self.pos - 1]
        """,
    )
    invalid = (
        """
        from torch.utils.data import IterableDataset, get_worker_info

        class Counter(IterableDataset):
            def __init__(self, n):
                self.n = n
                self.i = 0

            def __iter__(self):
                return self  # expect: DSL301

            def __next__(self):
                if self.i >= self.n:
                    raise StopIteration
                self.i += 1
                return self.i
        """,
        """
        import torch.utils.data as tud

        class Rows(tud.IterableDataset):
            def __init__(self, rows):
                self.rows = iter(rows)

            def __iter__(self):
                return self  # expect: DSL301

            def __next__(self):
                return self._parse(next(self.rows))

            def _parse(self, row):
                return row
        """,
        {
            "base.py": """
            import torch.utils.data as tud

            class Stream(tud.IterableDataset):
                pass
            """,
            "lines.py": """
            from base import Stream

            class Lines(Stream):
                def __init__(self, lines):
                    self.lines = lines
                    self.pos = 0

                def __iter__(self):
                    self.other = None
                    return self  # expect: DSL301

                def __next__(self):
                    if self.pos >= len(self.lines):
                        raise StopIteration
                    line = self._advance()
                    return line

                def _advance(self):
                    self.pos = self.pos + 1
                    return self.lines[self.pos - 1]
            """,
        },
    )

    def check(self, ctx):
        for cls in _iterable_classes(ctx):
            iter_func = methods(cls).get("__iter__")
            if iter_func is None or ctx.regions.get(iter_func).is_generator:
                continue
            if is_test_code(ctx, cls):
                continue  # a test's fixture stream, built and drained once per test
            returns = _returns_self(iter_func)
            if not returns:
                continue
            next_func = find_method(ctx, cls, "__next__")
            if next_func is None:
                continue  # defined elsewhere (unknown), or a different bug
            advancing = _reached(ctx, cls, next_func)
            advanced, stops = _advanced_state(ctx, advancing)
            if not advanced or not stops:
                continue
            reset = _reset_on_exhaustion(ctx, cls, advancing)
            init = find_method(ctx, cls, "__init__")
            for method in all_methods(ctx, cls):
                if method is init or any(method is f for f in advancing):
                    continue
                reset |= _assigned_attrs(method)
            for method in _reached(ctx, cls, iter_func):
                reset |= _assigned_attrs(method)
            missing = advanced - reset
            if not missing:
                continue
            ret = returns[0]
            names = ", ".join(f"`self.{a}`" for a in sorted(missing))
            message = (
                f"`__iter__` returns `self` and nothing resets {names}: every epoch continues the iterator the "
                "first epoch exhausted, so with `num_workers=0` or `persistent_workers=True` the second epoch "
                "yields 0 samples (non-persistent workers hide it by re-forking the parent's untouched copy)"
            )
            to_reset = (advanced | _mutated_attrs(advancing)) - _assigned_attrs(iter_func)
            yield self.report(ret, message, fix=_iter_fix(ctx, cls, iter_func, ret, to_reset))


# --------------------------------------------------------------------------- DSL302

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
        "sqlite3.connect",
        "sqlite3.dbapi2.connect",
        "pyodbc.connect",
        "psycopg2.connect",
        "psycopg.connect",
        "pymysql.connect",
        "MySQLdb.connect",
        "mysql.connector.connect",
    }
)
# connections whose execute() returns the cursor
_EXECUTE_RETURNS_CURSOR = frozenset({"sqlite3.connect", "sqlite3.dbapi2.connect", "pyodbc.connect"})
# functions that iterate the argument they are given
_ITERATING = frozenset(
    {
        "builtins.iter",
        "builtins.next",
        "builtins.enumerate",
        "builtins.zip",
        "builtins.map",
        "builtins.filter",
        "builtins.list",
        "builtins.tuple",
        "builtins.set",
        "builtins.frozenset",
        "builtins.sorted",
        "builtins.dict",
        "builtins.sum",
        "builtins.min",
        "builtins.max",
        "builtins.any",
        "builtins.all",
        "csv.reader",
        "csv.DictReader",
    }
)


class _InitValues:
    """Resolve names and ``self.X`` inside one ``__init__`` to the expression assigned."""

    def __init__(self, ctx, init: cst.FunctionDef) -> None:
        self.ctx = ctx
        self.init = init
        self.selfp = self_name(init)
        self.attrs: Dict[str, List[cst.BaseExpression]] = {}
        self.with_names: Set[str] = set()
        for node in _body_nodes(init):
            if isinstance(node, cst.AssignTarget):
                attr = self_attr(node.target, self.selfp)
                if attr:
                    self.attrs.setdefault(attr, []).append(self.ctx.parent(node).value)
                else:
                    for attr in _target_attrs(node.target, self.selfp):
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


def _is_file(ctx, values: _InitValues, expr) -> bool:
    expr = values.resolve(expr)
    if not isinstance(expr, cst.Call):
        return False
    if ctx.call_name(expr) in _ITERATOR_FILE_OPENERS:
        return True
    return (
        isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "open"
        and lt.opener_kind(ctx, expr) == "file"
    )


def _is_path(ctx, values: _InitValues, expr) -> bool:
    expr = values.resolve(expr)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return _is_path(ctx, values, expr.left)
    return isinstance(expr, cst.Call) and ctx.call_name(expr) in _PATHS


def _connection(ctx, values: _InitValues, expr) -> Optional[str]:
    expr = values.resolve(expr)
    if isinstance(expr, cst.Call):
        name = ctx.call_name(expr)
        if name in _DB_CONNECT:
            return name
    return None


def _self_method(ctx, cls, call: cst.Call, selfp) -> Optional[cst.FunctionDef]:
    if isinstance(call.func, cst.Attribute) and self_attr(call.func, selfp):
        return find_method(ctx, cls, call.func.attr.value)
    return None


def _iterator_source(ctx, cls, values: _InitValues, expr, depth: int = 0) -> Optional[Tuple[cst.CSTNode, str]]:
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
    if name in _ITERATOR_FILE_OPENERS or (
        isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "open" and lt.opener_kind(ctx, expr) == "file"
    ):
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
        local = _self_method(ctx, cls, expr, values.selfp)
        if local is not None:
            return (expr, ITERATOR) if ctx.regions.get(local).is_generator else None
        if self_attr(func, values.selfp):
            return None
    if name and not name.startswith("builtins."):
        facts = ctx.view.function_facts(name)
        if facts is not None and facts.get("gen"):
            return expr, ITERATOR
    return None


def _init_iterators(ctx, cls, init: cst.FunctionDef) -> Dict[str, Tuple[cst.CSTNode, str]]:
    """Attributes ``__init__`` binds to a one-shot iterator: attr -> (creating node, flavour)."""
    values = _InitValues(ctx, init)
    found: Dict[str, Tuple[cst.CSTNode, str]] = {}
    for attr, assigned in values.attrs.items():
        if len(assigned) != 1 or assigned[0] is None:
            continue
        value = assigned[0]
        source = _iterator_source(ctx, cls, values, value)
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
            for node in _body_nodes(init):
                if (
                    isinstance(node, cst.Call)
                    and isinstance(node.func, cst.Attribute)
                    and node.func.attr.value in ("execute", "executemany")
                    and self_attr(node.func.value, values.selfp) == attr
                ):
                    found[attr] = (node, CURSOR)
                    break
    return found


def _iterated_attrs(ctx, funcs: List[cst.FunctionDef], entry: cst.FunctionDef) -> Set[str]:
    """``self.X`` that these functions iterate: ``for``, comprehension, ``yield from``, ``next()``,
    iterating builtins/``itertools``/``csv``, or (from a non-generator ``__iter__``) returning it."""
    consumed: Set[str] = set()
    for func in funcs:
        selfp = self_name(func)
        for node in _body_nodes(func):
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


def _rewound_attrs(funcs: Iterable[cst.FunctionDef]) -> Set[str]:
    """``self.X`` reassigned, or ``self.X.seek(...)``: a fresh start."""
    found: Set[str] = set()
    for func in funcs:
        found |= _assigned_attrs(func)
        selfp = self_name(func)
        for node in _body_nodes(func):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "seek":
                attr = self_attr(node.func.value, selfp)
                if attr:
                    found.add(attr)
    return found


class IteratorStateInInit(Rule):
    """
    ## What it does
    Flags a one-shot iterator created in an `IterableDataset`'s `__init__`,
    stored on `self` and drained by `__iter__` (or a method it calls): an open
    file, a `csv.reader`, a database cursor (`conn.execute(...)`,
    `cursor.execute(...)`), `iter(...)`, `map`/`zip`/`enumerate`/`filter`, an
    `itertools` iterator, a generator expression, a call to a generator function
    or method, `os.scandir`/`os.walk`/`glob.iglob`/`Path.glob`, or a chunked
    pandas reader. "Drained" means iterated by `for`, a comprehension,
    `yield from`, `next()`, an iterating builtin (`list`, `enumerate`, ...), or
    returned from `__iter__`.

    Not reported: an attribute that `__iter__` or any other method reassigns (or
    rewinds with `seek`) - it is renewed for the next epoch; endless iterators
    (`itertools.count`/`cycle`/`repeat`); a reader over a handle that a `with`
    block closed in `__init__`. A handle that is only read or seeked (not
    iterated) is DSL401's.

    ## Why is this bad?
    An iterator can be iterated once. The first epoch drains it; every later
    epoch gets an exhausted iterator. Measured on torch 2.13, 100 samples over 3
    epochs: `iter(list)`, a generator, and a sqlite3 cursor gave 100/0/0 with
    `num_workers=0` and 200/0/0 with `persistent_workers=True` (non-persistent
    workers re-fork the parent's untouched copy each epoch and hide it). An open
    file or a `csv.reader` over one gave 100/0/0 in *every* configuration,
    including two plain workers: forked workers share the file offset, so the
    parent's copy is at end-of-file too. Nothing raises.

    ## Example
    ```python
    class Rows(IterableDataset):
        def __init__(self, path):
            self.reader = csv.reader(open(path))

        def __iter__(self):
            for row in self.reader:
                yield parse(row)
    ```

    ## Use instead
    ```python
    class Rows(IterableDataset):
        def __init__(self, path):
            self.path = path

        def __iter__(self):
            with open(self.path, newline="") as f:
                for row in csv.reader(f):
                    yield parse(row)
    ```

    ## References
    - PyTorch docs: `torch.utils.data.IterableDataset`
    - `../shared/PITFALLS.md` IT-1
    """

    code = "DSL302"
    name = "iterator-state-in-init"
    symptom = Symptom("epoch_counts", "second epoch yields 0 (or fewer) samples")
    level = ERROR
    summary = "An iterator made once in `__init__` is drained by `__iter__`, so later epochs are empty"
    help = "Create the iterator (open the file, run the query) inside `__iter__`, so every epoch gets a fresh one"

    valid = (
        """
        import csv
        from torch.utils.data import IterableDataset

        class Rows(IterableDataset):
            def __init__(self, path):
                self.path = path

            def __iter__(self):
                with open(self.path) as f:
                    for row in csv.reader(f):
                        yield row
        """,
        """
        from torch.utils.data import IterableDataset

        class Rewinds(IterableDataset):
            def __init__(self, path):
                self.f = open(path)

            def __iter__(self):
                self.f.seek(0)
                for line in self.f:
                    yield line
        """,
        """
        from torch.utils.data import IterableDataset

        class Renewed(IterableDataset):
            def __init__(self, items):
                self.items = items
                self.it = iter(items)

            def __iter__(self):
                self.it = iter(self.items)
                yield from self.it
        """,
        """
        from torch.utils.data import Dataset

        class SeekRead(Dataset):
            def __init__(self, path):
                self.f = open(path, "rb")

            def __getitem__(self, i):
                self.f.seek(i * 8)
                return self.f.read(8)
        """,
        """
        import itertools
        from torch.utils.data import IterableDataset

        class Endless(IterableDataset):
            def __init__(self, items):
                self.pool = itertools.cycle(items)
                self.items = list(items)

            def __iter__(self):
                for x in self.items:
                    yield x, next(self.pool)
        """,
        """
        from torch.utils.data import IterableDataset

        class ResetHook(IterableDataset):
            def __init__(self, items):
                self.items = items
                self.it = iter(items)

            def set_epoch(self, epoch):
                self.it = iter(self.items)

            def __iter__(self):
                yield from self.it
        """,
    )
    invalid = (
        """
        import csv
        from torch.utils.data import IterableDataset

        class Rows(IterableDataset):
            def __init__(self, path):
                self.reader = csv.reader(open(path))  # expect: DSL302

            def __iter__(self):
                for row in self.reader:
                    yield row
        """,
        """
        import itertools, sqlite3
        import torch.utils.data as tud

        class Query(tud.IterableDataset):
            def __init__(self, db):
                conn = sqlite3.connect(db)
                self.rows = conn.execute("SELECT x FROM t")  # expect: DSL302
                self.pairs = itertools.chain([1], [2])  # expect: DSL302
                self.lines = (l.strip() for l in open(db))  # expect: DSL302

            def __iter__(self):
                yield from self._rows()
                yield from enumerate(self.pairs)
                return_value = [l for l in self.lines]

            def _rows(self):
                for (x,) in self.rows:
                    yield x
        """,
        """
        from pathlib import Path
        from torch.utils.data import IterableDataset as ID

        class Files(ID):
            def __init__(self, root):
                self.root = Path(root)
                self.files = self.root.glob("*.txt")  # expect: DSL302
                self.gen = self._walk()  # expect: DSL302

            def _walk(self):
                yield 1

            def __iter__(self):
                first = next(self.gen)
                for f in self.files:
                    yield first, f
        """,
        {
            "base.py": """
            import torch.utils.data as tud

            class Base(tud.IterableDataset):
                pass
            """,
            "child.py": """
            from base import Base

            class Child(Base):
                def __init__(self, items):
                    self.it = iter(items)  # expect: DSL302

                def __iter__(self):
                    return self.it
            """,
        },
    )

    def check(self, ctx):
        reported: Set[int] = set()
        for cls in _iterable_classes(ctx):
            iter_func = find_method(ctx, cls, "__iter__")
            init = find_method(ctx, cls, "__init__")
            if iter_func is None or init is None:
                continue
            candidates = _init_iterators(ctx, cls, init)
            if not candidates:
                continue
            iterating = _reached(ctx, cls, iter_func)
            consumed = _iterated_attrs(ctx, iterating, iter_func)
            renewed = _rewound_attrs(m for m in all_methods(ctx, cls) if m is not init)
            for attr, (node, flavour) in sorted(candidates.items()):
                if attr not in consumed or attr in renewed or id(node) in reported:
                    continue
                reported.add(id(node))
                yield self.report(node, _state_message(attr, flavour))


def _state_message(attr: str, flavour: str) -> str:
    if flavour == FILE:
        return (
            f"`self.{attr}` is a file read once: it is opened in `__init__` and drained by `__iter__`, so every "
            "epoch after the first yields 0 samples, with or without workers (forked workers share one file "
            "offset, which stays at end-of-file and splits the lines between workers unpredictably)"
        )
    what = "a database cursor" if flavour == CURSOR else "an iterator"
    return (
        f"`self.{attr}` is {what} created once in `__init__` and drained by `__iter__`: the first epoch exhausts "
        "it, so with `num_workers=0` or `persistent_workers=True` every later epoch yields 0 samples "
        "(non-persistent workers hide it by re-forking the parent's untouched copy each epoch)"
    )


# --------------------------------------------------------------------------- DSL303

# Libraries whose streams split themselves across DataLoader workers.
SHARDING_LIBRARIES = ("webdataset", "datasets", "torchdata", "streaming", "litdata", "ray", "ffcv", "tensorflow_datasets")
_WRAPPED = re.compile(
    r"(^|_)(datasets?|ds|datapipes?|dp|pipes?|sources?|iterables?|loaders?|streams?|iterators?|readers?)($|_)", re.I
)
_RANGE_LIKE = frozenset({"builtins.range", "itertools.count", "itertools.repeat"})
_RNG_PREFIXES = ("random.", "numpy.random.", "torch.rand", "torch.normal", "torch.bernoulli", "torch.multinomial", "torch.poisson")


def _is_worker_info(ctx, node) -> bool:
    if isinstance(node, (cst.Name, cst.Attribute)):
        parts = dotted_parts(node)
        tails = ctx.names.call_tails({"get_worker_info"})  # the name and its import aliases
        return bool(parts) and parts[-1] in tails and ctx.qualname(node) == WORKER_INFO
    return False


def _mentions_worker_info(ctx, func: cst.FunctionDef) -> bool:
    return any(_is_worker_info(ctx, node) for node in iter_subtree(func.body, into_scopes=True))


def _shards_transitively(ctx, qualified: str, depth: int = 0, seen: Optional[Set[str]] = None) -> Optional[bool]:
    """Does the project function ``qualified`` (or what it calls) consult worker info? None: unknown."""
    seen = seen if seen is not None else set()
    if qualified in seen or depth > 4:
        return False
    seen.add(qualified)
    facts = ctx.view.function_facts(qualified)
    if facts is None:
        return None
    if facts.get("worker_info"):
        return True
    for kind, target, _ in facts.get("calls", ()):
        if kind == "func" and not target.startswith(("builtins.", "torch.", "numpy.", "random.", "os.")):
            if _shards_transitively(ctx, target, depth + 1, seen):
                return True
    return False


_DISPLAYS = (cst.List, cst.Tuple, cst.Set)


def _uses_rng(ctx, funcs: List[cst.FunctionDef]) -> bool:
    for func in funcs:
        for node in _body_nodes(func):
            if isinstance(node, cst.Call):
                name = ctx.call_name(node)
                if name and name.startswith(_RNG_PREFIXES):
                    return True
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in (
                    "normal",
                    "uniform",
                    "integers",
                    "standard_normal",
                    "randint",
                    "randn",
                    "rand",
                    "random",
                    "gauss",
                    "choice",
                    "binomial",
                    "poisson",
                ):
                    return True
    return False


# Modules whose objects are plain data (lists, files, arrays, readers): iterating
# them in every worker duplicates the data. Anything else may shard itself.
_PLAIN_DATA_MODULES = frozenset(
    {
        "builtins", "json", "os", "glob", "csv", "pathlib", "numpy", "pandas", "pickle", "yaml", "io",
        "gzip", "bz2", "lzma", "itertools", "collections", "random", "re", "h5py", "PIL", "torch",
        "torchvision", "torchaudio", "math", "functools", "operator", "tarfile", "zipfile", "sqlite3",
        "linecache", "fnmatch", "struct", "array", "string", "codecs", "shutil", "lmdb", "cv2",
        "imageio", "soundfile", "librosa", "scipy", "jsonlines", "pyarrow",
    }
)
_UNWRAP = frozenset(
    {"builtins.iter", "builtins.enumerate", "builtins.sorted", "builtins.list", "builtins.tuple", "builtins.reversed"}
)
UNKNOWN_SOURCE = "unknown"


def _param_looks_wrapped(ctx, attr: str, param: cst.Param) -> bool:
    annotation = ctx.code(param.annotation.annotation) if param.annotation is not None else ""
    return bool(_WRAPPED.search(attr) or _WRAPPED.search(param.name.value) or re.search(r"Dataset|DataPipe", annotation))


def _call_source(ctx, call: cst.Call) -> str:
    """"data" for calls known to make plain data, UNKNOWN_SOURCE for anything that may shard itself."""
    name = ctx.call_name(call)
    if name is None:
        return "data"  # a method of a local object: f.readlines(), text.split()
    top = name.split(".", 1)[0]
    if top in SHARDING_LIBRARIES:
        return UNKNOWN_SOURCE
    if ctx.view.function_facts(name) is not None:
        return "data"  # a project function: what it reaches was checked for worker info
    if top in _PLAIN_DATA_MODULES:
        return "data"
    return UNKNOWN_SOURCE  # a library function or a class we cannot see into


def _attr_origin(ctx, cls: cst.ClassDef, attr: str) -> str:
    """"data" or UNKNOWN_SOURCE for what ``__init__`` stores in ``self.attr``."""
    init = find_method(ctx, cls, "__init__")
    values = _InitValues(ctx, init).attrs.get(attr, []) if init is not None else []
    if not values or any(v is None for v in values):
        return UNKNOWN_SOURCE if _WRAPPED.search(attr) else "data"
    params = {p.name.value: p for p in (*init.params.posonly_params, *init.params.params, *init.params.kwonly_params)}
    params.pop(self_name(init) or "", None)
    # `self.reader = make_reader(...) if ... else reader`: unknown when any of them is
    origins = {_value_origin(ctx, init, params, attr, value) for value in values}
    return UNKNOWN_SOURCE if UNKNOWN_SOURCE in origins else "data"


def _value_origin(ctx, init, params, attr: str, value: cst.CSTNode, depth: int = 0) -> str:
    if ctx.dataset_kind(value) is not None:
        return UNKNOWN_SOURCE  # another dataset: it shards (or not) itself
    if isinstance(value, cst.Name):
        if value.value in params:
            return UNKNOWN_SOURCE if _param_looks_wrapped(ctx, attr, params[value.value]) else "data"
        local = ctx.single_assignment(value) if ctx.enclosing_function(value) is init else None
        if local is None or depth > 3:
            return UNKNOWN_SOURCE  # rebound along the way: cannot tell what it ends up being
        return _value_origin(ctx, init, params, attr, local, depth + 1)
    if isinstance(value, cst.Call):
        if any(
            isinstance(n, cst.Name) and n.value in params and _param_looks_wrapped(ctx, attr, params[n.value])
            for n in iter_subtree(value, into_scopes=False)
        ):
            return UNKNOWN_SOURCE
        return _call_source(ctx, value)
    return "data"


_ITERATOR_WRAPPERS = frozenset({"builtins.map", "builtins.filter", "builtins.zip"})


def _source_kind(ctx, cls, func: cst.FunctionDef, expr: cst.CSTNode, depth: int = 0) -> Optional[str]:
    """What iterating ``expr`` replays: "data", "range", None (a literal or a generator
    method judged on its own) or UNKNOWN_SOURCE (something that may shard itself)."""
    selfp = self_name(func)
    while True:
        if isinstance(expr, cst.Call) and ctx.call_name(expr) in _UNWRAP and expr.args:
            expr = expr.args[0].value
        elif (
            isinstance(expr, cst.Call)
            and not expr.args
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "__iter__"
        ):
            expr = expr.func.value
        else:
            break
    if isinstance(expr, cst.Call) and ctx.call_name(expr) in _RANGE_LIKE:
        return "range"
    if isinstance(expr, _DISPLAYS):
        return None
    if isinstance(expr, cst.Call) and ctx.call_name(expr) in _ITERATOR_WRAPPERS:
        # map(f, xs), filter(f, xs), zip(xs, ys): judged by what they iterate
        kinds = {
            _source_kind(ctx, cls, func, arg.value, depth + 1)
            for arg in expr.args
            if arg.keyword is None and not (ctx.call_name(expr) != "builtins.zip" and arg is expr.args[0])
        }
        for kind in (UNKNOWN_SOURCE, "data", "range"):
            if kind in kinds:
                return kind
        return None
    if isinstance(expr, cst.Call) and _self_method(ctx, cls, expr, selfp) is not None:
        return None  # a method of the class: its own loops are judged
    node = expr
    while isinstance(node, (cst.Call, cst.Attribute, cst.Subscript)):
        attr = self_attr(node, selfp)
        if attr:
            return _attr_origin(ctx, cls, attr)
        node = node.func if isinstance(node, cst.Call) else node.value
    if isinstance(expr, cst.Call):
        return _call_source(ctx, expr)
    if isinstance(expr, cst.Name) and depth < 3 and ctx.enclosing_function(expr) is func:
        value = ctx.single_assignment(expr)
        if value is not None:
            return _source_kind(ctx, cls, func, value, depth + 1)
    return "data"


def _stream_source(ctx, cls, iter_func, funcs) -> Optional[str]:
    """What the stream replays in every worker: "data", "range" (a counted loop or
    ``__next__``), or None when there is nothing to judge or the source may shard itself."""
    kinds: Set[Optional[str]] = set()
    for func in funcs:
        for loop in ctx.regions.get(func).loops:
            if isinstance(loop, cst.For):
                kinds.add(_source_kind(ctx, cls, func, loop.iter))
        for node in _body_nodes(func):
            if isinstance(node, cst.Yield) and isinstance(node.value, cst.From):
                kind = _source_kind(ctx, cls, func, node.value.item)
                # `yield from range(n)` streams bare counters: a toy, like a literal
                kinds.add(None if kind == "range" else kind)
    if not ctx.regions.get(iter_func).is_generator:
        selfp = self_name(iter_func)
        for ret in _body_nodes(iter_func):
            if not isinstance(ret, cst.Return) or ret.value is None:
                continue
            if isinstance(ret.value, cst.Name) and ret.value.value == selfp:
                kinds.add("range")  # __next__ produces the samples: judged like a counted loop
            else:
                kind = _source_kind(ctx, cls, iter_func, ret.value)
                # `return iter(range(n))` streams bare counters, like `yield from range(n)`
                kinds.add(None if kind == "range" else kind)
    if UNKNOWN_SOURCE in kinds:
        return None
    if "data" in kinds:
        return "data"
    if "range" in kinds:
        return "range"
    return None


def _references_sharding_function(ctx, cls: cst.ClassDef) -> bool:
    """A method of the class names a project function that consults worker info
    (e.g. ``wds.DataPipeline(..., split_by_worker)`` built in ``__init__``)."""
    seen: Set[str] = set()
    for method in all_methods(ctx, cls):
        for node in iter_subtree(method.body, into_scopes=True):
            if not isinstance(node, (cst.Name, cst.Attribute)):
                continue
            parent = ctx.parent(node)
            if isinstance(parent, cst.Attribute) and parent.value is node:
                continue  # only whole dotted names
            name = ctx.qualname(node)
            if not name or name in seen or name.split(".", 1)[0] in _PLAIN_DATA_MODULES:
                continue
            seen.add(name)
            if len(seen) > 64:
                return False
            if _shards_transitively(ctx, name):
                return True
    return False


class IterableWithoutWorkerSharding(Rule):
    """
    ## What it does
    Flags the `__iter__` of an `IterableDataset` subclass that replays its data
    source without ever consulting `torch.utils.data.get_worker_info()` - not in
    `__iter__`, not in any function or method it reaches (across files), not in
    a property it reads - when no DataLoader over the class has a
    `worker_init_fn` that shards it.

    It reports at warning level, and at error level when a DataLoader over the
    class is built with a literal `num_workers` greater than 1. It is silent when
    every DataLoader known to be built over the class has a literal
    `num_workers` of 0 or 1, and for streams it cannot judge: DataPipes and
    `ChainDataset` subclasses, wrappers that iterate another dataset or reader
    (an attribute named or annotated like a dataset, reader or stream, or built
    from a dataset class),
    streams built from libraries that shard for you (webdataset, Hugging Face
    `datasets`, torchdata, MosaicML streaming, litdata), `__iter__` calling
    methods the project does not define, random or endless generators
    (`while True: yield torch.randn(...)`) and bare counters
    (`return iter(range(n))`) that have no data to duplicate, and test code
    (a `tests/` directory, `test_*.py`), whose fixtures replay fixed streams on
    purpose.

    ## Why is this bad?
    Every DataLoader worker gets a copy of the dataset and calls `iter()` on it.
    Without sharding, each worker replays the whole stream. Measured on torch
    2.13: with 2 workers an epoch of 100 samples delivered 200 items (100
    unique), with 4 workers 400. Training silently sees every sample N times per
    epoch, and validation metrics are computed over duplicates. torch's own
    warning (`Length of IterableDataset ... was reported to be ...`) fires only
    for datasets with `__len__` and misses it entirely when `batch_size > 1`,
    because it compares batches with samples.

    ## Example
    ```python
    class Lines(IterableDataset):
        def __init__(self, path):
            self.path = path

        def __iter__(self):
            with open(self.path) as f:
                for line in f:
                    yield parse(line)
    ```

    ## Use instead
    ```python
    class Lines(IterableDataset):
        def __init__(self, path):
            self.path = path

        def __iter__(self):
            info = get_worker_info()
            workers, worker = (info.num_workers, info.id) if info else (1, 0)
            with open(self.path) as f:
                for i, line in enumerate(f):
                    if i % workers == worker:
                        yield parse(line)
    ```

    ## References
    - PyTorch docs: `torch.utils.data.IterableDataset` (the `worker_init_fn` and
      in-`__iter__` sharding examples), `torch.utils.data.get_worker_info`
    - pytorch/pytorch#30599, huggingface/datasets#3423
    - `../shared/PITFALLS.md` IT-2, W4
    """

    code = "DSL303"
    name = "iterable-without-worker-sharding"
    symptom = Symptom("duplicates", "every sample arrives once per worker")
    level = WARNING
    summary = "An IterableDataset does not shard by worker, so every worker yields every sample"
    help = (
        "Split the stream by `torch.utils.data.get_worker_info()` in `__iter__` (or in a `worker_init_fn`), "
        "e.g. keep item i when `i % info.num_workers == info.id`"
    )

    valid = (
        """
        from torch.utils.data import IterableDataset, get_worker_info

        class Sharded(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                info = get_worker_info()
                n, k = (info.num_workers, info.id) if info else (1, 0)
                for f in self.files[k::n]:
                    yield f
        """,
        """
        import torch.utils.data as tud

        def my_shard(files):
            info = tud.get_worker_info()
            return files if info is None else files[info.id :: info.num_workers]

        class ViaHelper(tud.IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                for f in self._mine():
                    yield f

            def _mine(self):
                return my_shard(self.files)
        """,
        {
            "shard.py": """
            import math
            import torch

            def worker_init_fn(worker_id):
                info = torch.utils.data.get_worker_info()
                ds = info.dataset
                per = math.ceil(len(ds.files) / info.num_workers)
                ds.files = ds.files[worker_id * per : (worker_id + 1) * per]
            """,
            "stream.py": """
            from torch.utils.data import IterableDataset as ID

            class Files(ID):
                def __init__(self, files):
                    self.files = files

                def __iter__(self):
                    for f in self.files:
                        yield f
            """,
            "train.py": """
            from torch.utils.data import DataLoader
            from shard import worker_init_fn
            from stream import Files

            loader = DataLoader(Files(["a", "b"]), num_workers=4, worker_init_fn=worker_init_fn)
            """,
        },
        """
        from torch.utils.data import DataLoader, IterableDataset

        class SingleProcess(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                yield from self.files

        ds = SingleProcess(["a"])
        loader = DataLoader(ds, batch_size=4)
        other = DataLoader(ds, num_workers=1)
        """,
        """
        import torch
        from torch.utils.data import IterableDataset

        class Noise(IterableDataset):
            def __iter__(self):
                while True:
                    yield torch.randn(3)
        """,
        """
        from torch.utils.data import IterableDataset

        class Shuffled(IterableDataset):
            def __init__(self, dataset, buffer=100):
                self.dataset = dataset
                self.buffer = buffer

            def __iter__(self):
                for x in self.dataset:
                    yield x
        """,
        """
        import webdataset as wds
        from torch.utils.data import IterableDataset

        class Shards(IterableDataset):
            def __init__(self, urls):
                self.urls = urls

            def __iter__(self):
                for sample in wds.WebDataset(self.urls):
                    yield sample
        """,
        """
        from torch.utils.data import IterableDataset

        class Abstract(IterableDataset):
            def __iter__(self):
                for item in self.items():
                    yield item
        """,
        {
            "base.py": """
            from torch.utils.data import get_worker_info

            class ShardMixin:
                def my_files(self):
                    info = get_worker_info()
                    return self.files if info is None else self.files[info.id :: info.num_workers]
            """,
            "ds.py": """
            from torch.utils.data import IterableDataset
            from base import ShardMixin

            class Files(ShardMixin, IterableDataset):
                def __init__(self, files):
                    self.files = files

                def __iter__(self):
                    for f in self.my_files():
                        yield f
            """,
        },
        """
        from torch.utils.data import IterableDataset, get_worker_info

        class ByProperty(IterableDataset):
            def __init__(self, files):
                self.files = files

            @property
            def mine(self):
                info = get_worker_info()
                return self.files if info is None else self.files[info.id :: info.num_workers]

            def __iter__(self):
                for f in self.mine:
                    yield f
        """,
        """
        import numpy as np
        from torch.utils.data import IterableDataset

        class RandomClips(IterableDataset):
            def __init__(self, files):
                self.files = files

            def generate(self):
                while True:
                    idx = np.random.choice(len(self.files))
                    yield self.files[idx]

            def __iter__(self):
                return iter(self.generate())

        class Empty(IterableDataset):
            def __iter__(self):
                return iter([])

        class Toy(IterableDataset):
            def __iter__(self):
                yield from [1, 2, 3]
        """,
        """
        from torch.utils.data import IterableDataset
        from torch.utils.data import get_worker_info as gwi

        class Aliased(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                def mine():
                    info = gwi()
                    return self.files if info is None else self.files[info.id :: info.num_workers]

                for f in mine():
                    yield f
        """,
        """
        from torch.utils.data.datapipes.iter import IterDataPipe

        class Pipe(IterDataPipe):
            def __init__(self, items):
                self.items = items

            def __iter__(self):
                yield from self.items
        """,
    )
    invalid = (
        """
        from torch.utils.data import IterableDataset

        class Lines(IterableDataset):
            def __init__(self, path):
                self.path = path

            def __iter__(self):  # expect: DSL303
                with open(self.path) as f:
                    for line in f:
                        yield line
        """,
        """
        import torch.utils.data as tud

        class Files(tud.IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):  # expect: DSL303
                return iter(self.files)

        def seed_only(worker_id):
            import random
            random.seed(worker_id)

        loader = tud.DataLoader(Files(["a"]), batch_size=8, num_workers=4, worker_init_fn=seed_only)
        """,
        {
            "helpers.py": """
            def load(path):
                return open(path).read()
            """,
            "base.py": """
            from torch.utils.data import IterableDataset

            class Stream(IterableDataset):
                pass
            """,
            "child.py": """
            from base import Stream
            from helpers import load

            class Child(Stream):
                def __init__(self, paths):
                    self.paths = paths

                def __iter__(self):  # expect: DSL303
                    for i in range(len(self.paths)):
                        yield load(self.paths[i])
            """,
            "train.py": """
            from torch.utils.data import DataLoader
            from child import Child

            ds = Child(["a", "b"])
            loader = DataLoader(ds, num_workers=0)
            fast = DataLoader(ds, num_workers=2)
            """,
        },
    )

    def check(self, ctx):
        for cls in _iterable_classes(ctx):
            iter_func = methods(cls).get("__iter__")
            if iter_func is None or is_test_code(ctx, cls):
                continue  # test fixtures replay fixed streams on purpose, and their tests assert what arrives
            qual = ctx.qualname_of_def(cls)
            loaders = ctx.view.loaders_over(qual)
            workers = [facts.get("num_workers") for facts in loaders]
            literal = [w for w in workers if isinstance(w, int) and not isinstance(w, bool)]
            if loaders and len(literal) == len(workers) and all(w in (0, 1) for w in literal):
                continue
            if self._shards_or_unknown(ctx, cls, qual, iter_func, loaders):
                continue
            many = sorted({w for w in literal if w > 1})
            level = ERROR if many else WARNING
            if many:
                times = f"with `num_workers={many[-1]}` every sample arrives {many[-1]} times per epoch"
            else:
                times = "with N workers every sample arrives N times per epoch (2 workers: 200 items, 100 unique)"
            message = (
                f"`{cls.name.value}.__iter__` never consults `torch.utils.data.get_worker_info()` and no "
                f"`worker_init_fn` shards it: each DataLoader worker replays the whole stream, so {times}; "
                "torch's length warning misses it when `batch_size > 1`"
            )
            yield self.report(iter_func, message, level=level, end_node=iter_func.name)

    def _shards_or_unknown(self, ctx, cls, qual, iter_func, loaders) -> bool:
        next_func = find_method(ctx, cls, "__next__")
        funcs = _reached(ctx, cls, iter_func)
        if next_func is not None and _returns_self(iter_func):
            funcs += [f for f in _reached(ctx, cls, next_func) if not any(f is g for g in funcs)]
        # sharding in this file: the methods reached, nested functions, any method of the class
        if any(_mentions_worker_info(ctx, f) for f in all_methods(ctx, cls)):
            return True
        # across files: whatever __iter__ (and __next__) reach
        entry_points = ["__iter__"] + (["__next__"] if _returns_self(iter_func) else [])
        for entry in entry_points:
            for facts in ctx.view.reachable_facts(qual, entry):
                if facts is None:
                    continue
                if facts.get("worker_info"):
                    return True
                for kind, target, _ in facts.get("calls", ()):
                    if kind == "func" and target.split(".", 1)[0] in SHARDING_LIBRARIES:
                        return True
        attrs_read: Dict[str, bool] = {}
        for func in funcs:
            selfp = self_name(func)
            for node in _body_nodes(func):
                if isinstance(node, cst.Call):
                    # super().m(): behaviour from a base we do not follow
                    if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Call):
                        inner = node.func.value.func
                        if isinstance(inner, cst.Name) and inner.value == "super":
                            return True
                    name = ctx.call_name(node)
                    if name and name.split(".", 1)[0] in SHARDING_LIBRARIES:
                        return True
                attr = self_attr(node, selfp)
                if attr and find_method(ctx, cls, attr) is None:
                    parent = ctx.parent(node)
                    called = isinstance(parent, cst.Call) and parent.func is node
                    attrs_read[attr] = attrs_read.get(attr, False) or called
        for attr, called in sorted(attrs_read.items()):
            if ctx.view.has_method(qual, attr):
                # a method or property of a base in another file
                if any(f and f.get("worker_info") for f in ctx.view.reachable_facts(qual, attr)):
                    return True
            elif called and not _assigned_anywhere(ctx, cls, attr):
                return True  # an abstract or library-provided method: unknown
        # a worker_init_fn on a loader over this class
        for facts in loaders:
            ref = facts.get("worker_init_fn")
            if ref is None or ref.startswith("builtins."):
                continue
            shards = _shards_transitively(ctx, ref)
            if shards is None or shards:
                return True
        source = _stream_source(ctx, cls, iter_func, funcs)
        if source is None:
            return True  # no data loop we can see (a queue, a socket, a self-sharding source)
        if source == "range" and _uses_rng(ctx, funcs):
            return True  # random samples: each worker draws its own
        return _references_sharding_function(ctx, cls)


def _assigned_anywhere(ctx, cls, attr: str) -> bool:
    for method in all_methods(ctx, cls):
        if attr in _assigned_attrs(method):
            return True
        selfp = self_name(method)
        for node in _body_nodes(method):
            if isinstance(node, cst.AugAssign) and self_attr(node.target, selfp) == attr:
                return True
    # class attributes
    for klass in local_mro(ctx, cls):
        if isinstance(klass.body, cst.IndentedBlock):
            for stmt in klass.body.body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        targets = []
                        if isinstance(small, cst.Assign):
                            targets = [t.target for t in small.targets]
                        elif isinstance(small, cst.AnnAssign):
                            targets = [small.target]
                        if any(isinstance(t, cst.Name) and t.value == attr for t in targets):
                            return True
    return False


# --------------------------------------------------------------------------- DSL304


def _guarded(ctx, call: cst.Call) -> bool:
    """Inside ``try: ... except TypeError`` or a ``hasattr(x, "__len__")``/``Sized`` test."""
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, cst.Try):
            for handler in ancestor.handlers:
                if handler.type is None:
                    return True
                names = {".".join(p) for p in [dotted_parts(n) for n in iter_subtree(handler.type)] if p}
                if names & {"TypeError", "Exception", "BaseException", "builtins.TypeError"}:
                    return True
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)):
            text = ctx.code(ancestor.test)
            if "__len__" in text or "Sized" in text:
                return True
        if isinstance(ancestor, cst.BooleanOperation):
            text = ctx.code(ancestor.left)
            if "__len__" in text or "Sized" in text:
                return True
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            break
    return False


class LenOfIterableDataset(Rule):
    """
    ## What it does
    Flags `len(x)` where `x` is an instance of an `IterableDataset` subclass
    (constructed right there, or a name bound once to such a construction), or a
    `DataLoader` over one, when neither the class nor any of its bases in the
    project defines `__len__`.

    Not reported: classes with a base outside the project that may define
    `__len__`, DataPipes, and calls guarded by `try: ... except TypeError` or a
    `hasattr(x, "__len__")` / `isinstance(x, Sized)` test.

    ## Why is this bad?
    An `IterableDataset` has no length unless its class defines `__len__`, and
    `DataLoader.__len__` for an iterable dataset asks the dataset. Both raise
    `TypeError: object of type 'Stream' has no len()` every time the line runs,
    typically when a learning-rate schedule or a progress bar is set up after
    the model and data are already loaded.

    ## Example
    ```python
    stream = Stream(paths)
    loader = DataLoader(stream, batch_size=32, num_workers=4)
    total_steps = epochs * len(loader)
    ```

    ## Use instead
    ```python
    class Stream(IterableDataset):
        ...
        def __len__(self):
            return self.num_samples  # the number of samples one epoch yields

    # or count the steps without asking the stream
    total_steps = epochs * math.ceil(num_samples / 32)
    ```

    ## References
    - PyTorch docs: `torch.utils.data.IterableDataset` (`__len__` is optional),
      "NOTE [ IterableDataset and __len__ ]" in `torch/utils/data/dataloader.py`
    - `../shared/PITFALLS.md` A26
    """

    code = "DSL304"
    name = "len-of-iterable-dataset"
    symptom = Symptom("exception_len", "TypeError: object of type ... has no len()")
    level = ERROR
    summary = "`len()` of an IterableDataset (or its DataLoader) that defines no `__len__`"
    help = "Define `__len__` on the dataset class, or compute the number of steps without `len()`"

    valid = (
        """
        from torch.utils.data import DataLoader, IterableDataset

        class Sized(IterableDataset):
            def __init__(self, n):
                self.n = n

            def __iter__(self):
                yield from range(self.n)

            def __len__(self):
                return self.n

        print(len(Sized(3)), len(DataLoader(Sized(3))))
        """,
        """
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield 1

        def steps(ds):
            return len(ds)  # unknown argument

        loader = DataLoader(Stream())
        try:
            n = len(loader)
        except TypeError:
            n = None
        m = len(loader) if hasattr(loader.dataset, "__len__") else None
        """,
        """
        import some_library
        from torch.utils.data import IterableDataset

        class Mixed(IterableDataset, some_library.SizedMixin):
            def __iter__(self):
                yield 1

        n = len(Mixed())
        """,
        {
            "base.py": """
            from torch.utils.data import IterableDataset

            class Base(IterableDataset):
                def __len__(self):
                    return 10
            """,
            "use.py": """
            from base import Base

            class Child(Base):
                def __iter__(self):
                    yield 1

            n = len(Child())
            """,
        },
    )
    invalid = (
        """
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield 1

        ds = Stream()
        loader = DataLoader(ds, batch_size=4)
        a = len(ds)  # expect: DSL304
        b = len(loader)  # expect: DSL304
        c = len(DataLoader(Stream()))  # expect: DSL304
        """,
        {
            "stream.py": """
            import torch.utils.data as tud

            class Base(tud.IterableDataset):
                pass

            class Stream(Base):
                def __iter__(self):
                    yield 1
            """,
            "train.py": """
            from torch.utils.data.dataloader import DataLoader as DL
            from stream import Stream as S

            def main():
                loader = DL(S(), num_workers=2)
                total = 10 * len(  # expect: DSL304
                    loader
                )
            """,
        },
    )

    def check(self, ctx):
        for call in ctx.calls_to("builtins.len"):
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                continue
            found = self._iterable_class(ctx, call.args[0].value)
            if found is None:
                continue
            class_name, through_loader = found
            if _guarded(ctx, call):
                continue
            error = f"`TypeError: object of type '{class_name}' has no len()`"
            if through_loader:
                message = (
                    f"`len()` of a DataLoader over the IterableDataset `{class_name}` asks the dataset, which "
                    f"defines no `__len__`: it raises {error}"
                )
            else:
                message = f"`{class_name}` is an IterableDataset that defines no `__len__`: `len()` raises {error}"
            yield self.report(call, message)

    @staticmethod
    def _iterable_class(ctx, expr) -> Optional[Tuple[str, bool]]:
        through_loader = False
        value = expr
        if isinstance(value, cst.Name):
            assigned = ctx.single_assignment(value)
            if isinstance(assigned, cst.Call) and ctx.is_dataloader_call(assigned):
                value = assigned
        if isinstance(value, cst.Call) and ctx.is_dataloader_call(value):
            bound = BoundCall(value, DATALOADER)
            value = bound.expr("dataset")
            through_loader = True
            if value is None:
                return None
        ref = class_ref(ctx.tree, ctx.names, value)
        if ref is None:
            return None
        if ref[0] == "local":
            qualified = f"{ctx.names.modname}.{ctx.qualname_of_def(ref[1])}"
            name = ref[1].name.value
        else:
            qualified = ref[1]
            name = qualified.rsplit(".", 1)[-1]
        answer = ctx.view.class_method(qualified, "__len__")
        if not answer or answer.get("kind") != ITERABLE or answer.get("defined") is not False:
            return None
        if ref[0] == "local" and _is_datapipe_or_chain(ctx, ref[1]):
            return None
        return name, through_loader
