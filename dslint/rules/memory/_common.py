"""Which ``__init__`` values are per-sample indexes of Python objects: lists or dicts of
strings or tuples (paths, ``(path, label)`` pairs, parsed annotations) built by a
comprehension, a listing, a parser, ``.tolist()``, or ``[]`` filled in a loop."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.bindings import single_assignment
from dslint.semantics.regions import self_attr
from dslint.semantics.walk import iter_subtree

# Calls returning a list (or dict) of Python strings / objects.
_LISTINGS = frozenset({"os.listdir", "glob.glob", "glob.iglob", "os.scandir"})
_PARSERS = frozenset({"json.load", "json.loads", "ujson.load", "orjson.loads", "yaml.safe_load", "yaml.full_load"})
_PATH_LISTING_METHODS = frozenset({"glob", "rglob", "iterdir"})
_LINE_METHODS = frozenset({"readlines", "splitlines", "split"})
_WRAPPERS = frozenset({"builtins.list", "builtins.sorted", "builtins.tuple", "builtins.dict", "builtins.set"})
_PATH_FUNCTIONS = ("join", "basename", "splitext", "relpath", "abspath")
_STRING_CALLS = frozenset({*(f"os.path.{f}" for f in _PATH_FUNCTIONS), "builtins.str", "builtins.tuple", "pathlib.Path"})
_STRING_METHODS = frozenset(
    {"strip", "rstrip", "lstrip", "split", "format", "join", "replace", "lower", "upper", "rsplit", "decode"}
)
_FILL_METHODS = frozenset({"append", "extend", "insert"})


class _Source:
    """Is an ``__init__`` expression a Python container of per-sample strings/tuples?"""

    def __init__(self, ctx, init: cst.FunctionDef) -> None:
        self.ctx = ctx
        self.init = init

    def describe(self, expr: cst.CSTNode, depth: int = 0) -> Optional[str]:
        """A short description of the container ``expr`` builds, or None when unknown."""
        if depth > 4:
            return None
        ctx = self.ctx
        if isinstance(expr, (cst.ListComp, cst.SetComp)):
            return "list" if self._stringish(expr.elt, expr.for_in, depth) else None
        if isinstance(expr, cst.DictComp):
            return "dict" if self._stringish(expr.value, expr.for_in, depth) else None
        if isinstance(expr, cst.Call):
            qualified = ctx.call_name(expr)
            if qualified in _PARSERS:
                return f"`{qualified}` result"
            if qualified in ("os.listdir",):
                return "`os.listdir` list"
            if qualified == "glob.glob":
                return "`glob.glob` list"
            if qualified in _WRAPPERS and expr.args:
                inner = expr.args[0].value
                if self._listing(inner) or self.describe(inner, depth + 1) or self._generator_of_strings(inner, depth):
                    return f"`{qualified.split('.')[-1]}(...)` list"
                return None
            if isinstance(expr.func, cst.Attribute):
                method = expr.func.attr.value
                if method == "tolist":
                    return "`.tolist()` list"
                if method in _LINE_METHODS and self._text_source(expr.func.value):
                    return "list of lines"
        return None

    # -- helpers
    def _listing(self, expr: cst.CSTNode) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        if self.ctx.call_name(expr) in _LISTINGS:
            return True
        func = expr.func
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value in _PATH_LISTING_METHODS
            and self._is_path(func.value)
        )

    def _is_path(self, expr: cst.CSTNode) -> bool:
        if isinstance(expr, cst.Call):
            return self.ctx.call_name(expr) in ("pathlib.Path", "pathlib.PurePath")
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
            return self._is_path(expr.left)
        if isinstance(expr, cst.Name):
            value = single_assignment(self.ctx.tree, expr)
            return value is not None and self._is_path(value)
        return False

    def _text_source(self, expr: cst.CSTNode) -> bool:
        """``f.read()``, ``open(p).read()``, ``Path(p).read_text()``, ``f`` (readlines)."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in ("read", "read_text", "strip", "rstrip"):
                return True
        if isinstance(expr, cst.Name):
            return self._file_name(expr)
        return False

    def _file_name(self, name: cst.Name) -> bool:
        for item in self.ctx.nodes(cst.WithItem):
            if (
                item.asname is not None
                and isinstance(item.asname.name, cst.Name)
                and item.asname.name.value == name.value
                and self.ctx.enclosing_function(item) is self.init
                and isinstance(item.item, cst.Call)
                and self.ctx.call_name(item.item) == "builtins.open"
            ):
                return True
        return False

    def _generator_of_strings(self, expr: cst.CSTNode, depth: int) -> bool:
        return isinstance(expr, cst.GeneratorExp) and self._stringish(expr.elt, expr.for_in, depth)

    def _iter_is_strings(self, for_in: cst.CompFor, depth: int) -> bool:
        source = for_in.iter
        if self._listing(source) or self._file_name_expr(source):
            return True
        if isinstance(source, cst.Call) and self.ctx.call_name(source) in _WRAPPERS and source.args:
            return self._listing(source.args[0].value) or self.describe(source.args[0].value, depth + 1) is not None
        return self.describe(source, depth + 1) is not None

    def _file_name_expr(self, expr: cst.CSTNode) -> bool:
        return isinstance(expr, cst.Name) and self._file_name(expr)

    def _stringish(self, elt: cst.CSTNode, for_in: cst.CompFor, depth: int) -> bool:
        """Is each element a str or tuple object (not an array, tensor or handle)?"""
        if isinstance(elt, cst.Tuple):
            return not _holds_arrays(self.ctx, elt)
        if isinstance(elt, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return True
        if isinstance(elt, cst.BinaryOperation) and isinstance(elt.operator, (cst.Add, cst.Modulo)):
            return any(isinstance(side, (cst.SimpleString, cst.FormattedString)) for side in (elt.left, elt.right))
        if isinstance(elt, cst.Call):
            if self.ctx.call_name(elt) in _STRING_CALLS:
                return True
            if isinstance(elt.func, cst.Attribute) and elt.func.attr.value in _STRING_METHODS:
                return True
            return False
        if isinstance(elt, (cst.Name, cst.Subscript, cst.Attribute)):
            # the loop item itself (or a field of it): strings when the source is
            return self._iter_is_strings(for_in, depth)
        return False


def _fills(ctx, init: cst.FunctionDef, self_param: str, attr: str) -> Optional[str]:
    """``self.<attr> = []`` filled in a loop of ``__init__`` with strings or tuples."""
    for node in iter_subtree(init.body, into_scopes=False):
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
            continue
        if node.func.attr.value not in _FILL_METHODS or not node.args:
            continue
        owner = node.func.value
        if self_attr(owner, self_param) != attr:
            continue
        if not any(isinstance(a, (cst.For, cst.While)) for a in _ancestors_until(ctx, node, init)):
            continue
        item = node.args[-1].value
        if _fill_item_stringish(ctx, item, init):
            return "list filled in a loop"
    return None


def _ancestors_until(ctx, node, stop):
    for ancestor in ctx.ancestors(node):
        if ancestor is stop:
            return
        yield ancestor


_ARRAY_PREFIXES = ("torch.", "numpy.", "PIL.", "cv2.", "h5py.", "pandas.", "scipy.", "librosa.", "soundfile.")


def _holds_arrays(ctx, display: cst.Tuple) -> bool:
    """A tuple built from arrays/tensors/images: its payload is not in the objects refcounts touch."""
    for element in display.elements:
        value = element.value
        if isinstance(value, cst.Call):
            qualified = ctx.call_name(value) or ""
            if qualified.startswith(_ARRAY_PREFIXES) or qualified == "builtins.open":
                return True
    return False


def _fill_item_stringish(ctx, item: cst.CSTNode, init) -> bool:
    if isinstance(item, cst.Tuple):
        return not _holds_arrays(ctx, item)
    if isinstance(item, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(item, cst.Call):
        if ctx.call_name(item) in _STRING_CALLS:
            return True
        return isinstance(item.func, cst.Attribute) and item.func.attr.value in _STRING_METHODS
    if isinstance(item, cst.Name):
        value = single_assignment(ctx.tree, item)
        if value is not None and value is not item:
            return _fill_item_stringish(ctx, value, init)
    return False


def _empty_container(expr: cst.CSTNode) -> bool:
    if isinstance(expr, (cst.List, cst.Dict)) and not expr.elements:
        return True
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Name)
        and expr.func.value in ("list", "dict")
        and not expr.args
    )


def python_objects(ctx, init: cst.FunctionDef, self_param: str, attr: str, value: cst.CSTNode) -> Optional[str]:
    """A short description of the Python-object container ``self.<attr> = value`` builds, or None."""
    what = _Source(ctx, init).describe(value)
    if what is None and _empty_container(value):
        what = _fills(ctx, init, self_param, attr)
    return what
