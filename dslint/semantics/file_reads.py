"""Whole-file reads of a file that is the same for every sample.

Readers that load and parse a whole file (``json.load``, ``pd.read_*``,
``yaml.load``, ``pickle.load``, ``np.load``/``loadtxt``/``genfromtxt``,
``torch.load``, ``csv.reader`` read to the end), each by how it is given its
source; handles opened per sample from an index-invariant path, handles opened
once and read incrementally, whole-file texts (``open(p).read()``,
``Path(p).read_text()``) and iterators consumed to the end. "Per sample" and
"index-invariant" come from ``dslint.semantics.dataflow``.

API: ``reads_fixed_file(ctx, call, qualified)``, ``rereads_fixed_lines(ctx, call)``, ``READERS`` (qualified name ->
how its source is given), ``READER_TAILS``.
"""

from __future__ import annotations

import itertools
from typing import Dict, List, Optional

import libcst as cst

from dslint.semantics import dataflow as df
from dslint.semantics.call_facts import has_star, positional_or_keyword, unresolved_receiver
from dslint.semantics.calls import UNKNOWN as UNKNOWN_LITERAL
from dslint.semantics.memory_buffers import buffer_call, self_buffer_element
from dslint.semantics.records import same_record

OPENERS = frozenset({"builtins.open", "gzip.open", "bz2.open", "lzma.open", "codecs.open"})

PANDAS_READERS = frozenset(
    {"read_csv", "read_table", "read_fwf", "read_json", "read_parquet", "read_pickle", "read_excel", "read_feather"}
    | {"read_hdf", "read_orc", "read_sql", "read_sql_table", "read_sql_query", "read_xml", "read_stata", "read_sas"}
    | {"read_spss", "read_html"}
)
YAML_LOADERS = ("load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all", "full_load_all", "unsafe_load_all")

# qualified name -> how its source argument is given
READERS: Dict[str, str] = {
    "json.load": "handle",
    "pickle.load": "handle",
    "json.loads": "text",
    "pickle.loads": "text",
    "csv.reader": "csv",
    "csv.DictReader": "csv",
    "numpy.load": "path",
    "numpy.loadtxt": "path",
    "numpy.genfromtxt": "path",
    "torch.load": "path",
}
READERS.update({f"yaml.{name}": "stream" for name in YAML_LOADERS})
READERS.update({f"pandas.{name}": "path" for name in PANDAS_READERS})
# the last names a reader is called by (``pd.read_csv``, ``jload``: aliases are added by the caller)
READER_TAILS = frozenset(q.rsplit(".", 1)[1] for q in READERS) | PANDAS_READERS

SOURCE_KEYWORDS = (
    "fp", "s", "stream", "file", "f", "fname", "filepath_or_buffer", "path", "io", "path_or_buf", "csvfile", "data", "sql",
)


def reads_fixed_file(ctx, call: cst.Call, qualified: str) -> bool:
    """Does ``call`` (of the reader ``qualified``) read and parse a whole file that is
    the same for every sample?"""
    kind = READERS[qualified]
    if has_star(call):
        return False
    source = positional_or_keyword(call, 0, *SOURCE_KEYWORDS)
    if source is None:
        return False
    expr = source.value
    if in_memory(ctx, expr):
        return False  # `np.load(buf)` of a `BytesIO` filled from this sample's bytes reads no file
    # every other argument (skiprows=idx, a per-sample query) must be index-invariant too
    if any(df.depends_on_sample(ctx, arg.value) for arg in call.args if arg is not source):
        return False
    if kind == "path" and df.depends_on_sample(ctx, expr):
        return False
    if kind == "handle":
        return fresh_handle(ctx, expr)
    if kind == "text":
        return whole_file_text(ctx, expr)
    if kind == "stream":
        return fresh_handle(ctx, expr) or whole_file_text(ctx, expr)
    if kind == "csv":
        return fresh_handle(ctx, expr) and consumed_whole(ctx, call)
    # a path (or a handle) of a fixed file
    if opener_call(ctx, expr) is not None or (isinstance(expr, cst.Name) and opened_outside_sample(ctx, expr)):
        return fresh_handle(ctx, expr)
    if qualified == "numpy.load":
        mmap = positional_or_keyword(call, 1, "mmap_mode")
        if mmap is not None and ctx.literal(mmap.value) is not None:
            return False  # a memory map: opening it is cheap, pages load on access
    if qualified == "torch.load":
        mmap = positional_or_keyword(call, 99, "mmap")
        if mmap is not None and ctx.literal(mmap.value) is not False:
            return False
    return True


def in_memory(ctx, expr) -> bool:
    """``expr`` is an in-memory buffer (``BytesIO``/``StringIO``): a call, a local name bound
    only to such calls, or an element of a ``self`` list of them. Reading it touches no file."""
    if self_buffer_element(ctx, expr):
        return True
    values = _values(ctx, expr)
    return bool(values) and all(buffer_call(ctx, value) for value in values)


def _values(ctx, expr) -> Optional[List[cst.BaseExpression]]:
    """``expr`` itself, or for a local name every plain value it is bound to (None when
    some binding is not a plain value)."""
    return df.plain_bindings(ctx, expr) if isinstance(expr, cst.Name) else [expr]


def opener_call(ctx, expr) -> Optional[cst.Call]:
    """``expr`` itself, when it is a call that opens a file (``open(p)``, ``Path(p).open()``)."""
    if not isinstance(expr, cst.Call):
        return None
    name = ctx.call_name(expr)
    if name in OPENERS:
        return expr
    func = expr.func
    if name is None and isinstance(func, cst.Attribute) and func.attr.value == "open" and unresolved_receiver(ctx, func):
        return expr
    return None


def fresh_handle(ctx, expr) -> bool:
    """A file opened per sample from an index-invariant path (directly or through a local name)."""
    values = _values(ctx, expr)
    if not values:
        return False
    for value in values:
        opener = opener_call(ctx, value)
        if opener is None or has_star(opener) or not df.per_item(ctx, opener) or df.inputs_depend(ctx, opener):
            return False
    return True


def rereads_fixed_lines(ctx, call: cst.Call) -> bool:
    """``h.readlines()`` of a handle opened per sample from an index-invariant path: every line
    of the same file, read again for every sample (a list file re-read to pick one row)."""
    func = call.func
    return (isinstance(func, cst.Attribute) and func.attr.value == "readlines" and not call.args
            and df.per_item(ctx, call) and fresh_handle(ctx, func.value))


def opened_outside_sample(ctx, expr) -> bool:
    """A handle opened once (before the loop, in a lazy block) and read incrementally."""
    values = _values(ctx, expr)
    for value in values or ():
        opener = opener_call(ctx, value)
        if opener is not None and not df.per_item(ctx, opener):
            return True
    return False


def whole_file_text(ctx, expr) -> bool:
    """``open(p).read()``, ``Path(p).read_text()`` of an index-invariant file, read per sample."""
    values = _values(ctx, expr)
    if not values:
        return False
    for value in values:
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
            return False
        method = value.func.attr.value
        if method == "read" and not value.args:
            if not fresh_handle(ctx, value.func.value):
                return False
        elif method in ("read_text", "read_bytes") and unresolved_receiver(ctx, value.func):
            if not df.per_item(ctx, value) or df.inputs_depend(ctx, value):
                return False
        else:
            return False
    return True


WHOLE_CONSUMERS = frozenset(
    {"builtins.list", "builtins.tuple", "builtins.sorted", "builtins.set", "builtins.dict", "builtins.frozenset"}
)
LAZY_WRAPPERS = frozenset({"builtins.enumerate", "builtins.zip", "builtins.iter", "builtins.reversed"})


def consumed_whole(ctx, expr: cst.CSTNode, depth: int = 0) -> bool:
    """Is the iterator ``expr`` iterated to the end (a ``for`` loop, ``list(...)``)?"""
    if depth > 4:
        return False
    parent = ctx.parent(expr)
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is expr:
        return True
    if isinstance(parent, cst.Arg) and parent.keyword is None:
        outer = ctx.parent(parent)
        if isinstance(outer, cst.Call):
            name = ctx.call_name(outer)
            if name in WHOLE_CONSUMERS:
                return True
            if name in LAZY_WRAPPERS:
                return consumed_whole(ctx, outer, depth + 1)
        return False
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        name = parent.targets[0].target.value
        func = ctx.enclosing_function(expr)
        if func is None:
            return False
        for node in ctx.nodes(cst.Name):
            if node.value == name and node is not parent.targets[0].target and ctx.enclosing_function(node) is func:
                if consumed_whole(ctx, node, depth + 1):
                    return True
    return False


# ---------------------------------------------------------------------------- directory scans

_MAGIC = frozenset("*?[")
_SEPARATORS = ("/", "\\")
_PATH_JOINS = frozenset({"os.path.join", "posixpath.join", "ntpath.join"})
_TRANSPARENT = frozenset({"builtins.str", "os.fspath", "pathlib.Path", "pathlib.PurePath", "os.path.expanduser"})


def scans_fixed_directory(ctx, call: cst.Call, scan: str) -> bool:
    """A glob whose pattern changes per sample but whose scanned directory does not.

    ``scan`` is ``"glob.glob"``, ``"glob.iglob"``, ``"Path.glob"`` or ``"Path.rglob"``.
    The pattern is read as pieces (literals, f-strings, ``+``, ``os.path.join``,
    ``Path / x``, a local name bound to one such value): the directory glob lists is
    everything before the first path component with a wildcard. When that prefix is
    the same for every sample and the per-sample part of the pattern only sits in or
    after that component (``self.root.glob(f"{name}_*.png")``,
    ``glob(join(self.root, name + ".*"))``), every sample lists the same directory to
    find its own file. ``Path.rglob`` walks the whole tree of its receiver whatever the
    pattern. A per-sample value inside the wildcard component is taken as a file name
    (no separator in it); a wildcard only a variable could hold is not seen (silent).
    """
    if has_star(call):
        return False
    if scan in ("Path.glob", "Path.rglob"):
        if not isinstance(call.func, cst.Attribute):
            return False
        receiver = call.func.value
        if df.depends_on_sample(ctx, receiver):
            return False
        if scan == "Path.rglob":
            return True
        source = positional_or_keyword(call, 0, "pattern")
        if source is None:
            return False
        pieces = _pieces(ctx, source.value, 0)
        prefix = [("dyn", receiver), ("lit", "/")]
    else:
        source = positional_or_keyword(call, 0, "pathname")
        if source is None:
            return False
        pieces = _pieces(ctx, source.value, 0)
        prefix = []
    others = [arg for arg in call.args if arg is not source]
    if pieces is None or any(df.depends_on_sample(ctx, arg.value) for arg in others):
        return False
    return _fixed_prefix(ctx, prefix + pieces)


def _fixed_prefix(ctx, pieces) -> bool:
    """The pieces before the first component with a literal wildcard are index-invariant,
    something fixed comes before the first per-sample piece (the directory, or the start
    of the path when the pattern is built by ``+``), and some piece after them varies."""
    components = [[]]
    for kind, value in pieces:
        if kind == "dyn":
            components[-1].append((kind, value))
            continue
        text = value.replace("\\", "/")
        for index, part in enumerate(text.split("/")):
            if index:
                components.append([])
            if part:
                components[-1].append(("lit", part))
    first = next(
        (i for i, comp in enumerate(components) if any(k == "lit" and _MAGIC & set(v) for k, v in comp)), None
    )
    if first is None:  # no literal wildcard
        return False
    before = [p for comp in components[:first] for p in comp]
    after = [p for comp in components[first:] for p in comp]
    if any(kind == "dyn" and df.depends_on_sample(ctx, value) for kind, value in before):
        return False
    # the fixed part: the components before, or (``self.mask_dir + name + ".*"``)
    # what the wildcard component starts with before its first per-sample piece
    lead = before + list(itertools.takewhile(lambda p: not _varies(ctx, p), components[first]))
    return bool(lead) and any(_varies(ctx, piece) for piece in after)


def _varies(ctx, piece) -> bool:
    return piece[0] == "dyn" and df.depends_on_sample(ctx, piece[1])


def _pieces(ctx, expr, depth: int):
    """``expr`` as a list of ("lit", text) and ("dyn", node) pieces, or None when some
    literal part is not a plain string."""
    if depth > 4:
        return [("dyn", expr)]
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return [("lit", value)] if isinstance(value, str) else None
    if isinstance(expr, cst.ConcatenatedString):
        left, right = _pieces(ctx, expr.left, depth + 1), _pieces(ctx, expr.right, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(expr, cst.FormattedString):
        out = []
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringText):
                out.append(("lit", part.value))
            else:
                out.append(("dyn", part.expression))
        return out
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Divide)):
        left, right = _pieces(ctx, expr.left, depth + 1), _pieces(ctx, expr.right, depth + 1)
        if left is None or right is None:
            return None
        joint = [("lit", "/")] if isinstance(expr.operator, cst.Divide) else []
        return left + joint + right
    if isinstance(expr, cst.Call) and not has_star(expr):
        name = ctx.call_name(expr)
        if name in _PATH_JOINS and expr.args:
            out = []
            for index, arg in enumerate(expr.args):
                inner = _pieces(ctx, arg.value, depth + 1)
                if inner is None:
                    return None
                out.extend(([("lit", "/")] if index else []) + inner)
            return out
        if name in _TRANSPARENT and len(expr.args) == 1:
            return _pieces(ctx, expr.args[0].value, depth + 1)
    if isinstance(expr, cst.Name):
        values = df.plain_bindings(ctx, expr)
        if values is not None and len(values) == 1:
            return _pieces(ctx, values[0], depth + 1)
    return [("dyn", expr)]


# ---------------------------------------------------------------------------- one record of a shared file


def reads_shared_file_record(ctx, call: cst.Call, qualified: str) -> bool:
    """A whole file is loaded per sample only to take that sample's record from it.

    The path changes per sample, but the sample is addressed as a (file, record)
    pair: the path and the record position the loaded data is subscripted with come
    from the same per-sample entry (``path, row = self.items[idx]`` then
    ``np.load(path)["x"][row]``, also through the parameters of a helper called once
    in this file). Such an entry only exists because many samples share the file,
    so every sample loads all of their records. Memory maps are not reported.
    """
    if READERS.get(qualified) != "path" or has_star(call):
        return False
    source = positional_or_keyword(call, 0, *SOURCE_KEYWORDS)
    if source is None or not df.depends_on_sample(ctx, source.value):
        return False
    if any(df.depends_on_sample(ctx, arg.value) for arg in call.args if arg is not source):
        return False
    if _memory_mapped(ctx, call, qualified):
        return False
    key = _record_key(ctx, call)
    if key is None:
        return False
    return same_record(ctx, source.value, key)


def _memory_mapped(ctx, call: cst.Call, qualified: str) -> bool:
    if qualified == "numpy.load":
        mmap = positional_or_keyword(call, 1, "mmap_mode")
        return mmap is not None and ctx.literal(mmap.value) is not None
    if qualified == "torch.load":
        mmap = positional_or_keyword(call, 99, "mmap")
        return mmap is not None and ctx.literal(mmap.value) is not False
    return False


def _index_of(subscript: cst.Subscript):
    element = subscript.slice[0] if subscript.slice else None
    return element.slice.value if element is not None and isinstance(element.slice, cst.Index) else None


def _record_key(ctx, call: cst.Call):
    """The per-sample position the loaded data is subscripted with (after constant keys:
    ``np.load(p)["data"][row]``), directly or through the one local name it is bound to."""
    node: cst.CSTNode = call
    parent = ctx.parent(node)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        name = parent.targets[0].target
        values = df.plain_bindings(ctx, name)
        if values is None or len(values) != 1:
            return None
        func = ctx.enclosing_function(call)
        for use in ctx.nodes(cst.Name):
            if use.value == name.value and use is not name and ctx.enclosing_function(use) is func:
                key = _subscript_chain_key(ctx, use)
                if key is not None:
                    return key
        return None
    return _subscript_chain_key(ctx, call)


def _subscript_chain_key(ctx, node):
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            node, parent = parent, ctx.parent(parent)  # ``.iloc[row]``, ``.values[row]``
        if not (isinstance(parent, cst.Subscript) and parent.value is node):
            return None
        index = _index_of(parent)
        if index is None:
            return None
        if df.depends_on_sample(ctx, index):
            return index
        if ctx.literal(index) is UNKNOWN_LITERAL:
            return None
        node = parent
