"""What becomes of a handle a call opens.

For an opener call (``PIL.Image.open``, ``open``, ``gzip.open``, ``zipfile.ZipFile``,
``h5py.File``, ``np.load(mmap_mode=...)``...) this decides its fate:

* ``CLOSED``     -- a ``with`` item, closed on all paths (``.close()``, ``closing()``,
  ``ExitStack.enter_context``), or owned by an outer managed object;
* ``RETURNED``   -- returned or yielded: the caller owns it;
* ``STORED_SELF``-- kept on ``self`` (``self.h = open(p)``);
* ``STORED``     -- put in a container (``cache[k] = ...``, ``.append(...)``, list/dict
  displays and comprehensions): one more handle every time the code runs;
* ``CHAINED``    -- a method called on the unnamed result (``Image.open(p).convert()``);
* ``TEMPORARY``  -- passed to another call and dropped (``json.load(open(p))``);
* ``UNCLOSED``   -- bound to a name that is never closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from dslint.semantics.names import dotted_parts
from dslint.semantics.regions import self_name

CLOSED = "closed"
RETURNED = "returned"
STORED_SELF = "stored-self"
STORED = "stored"
CHAINED = "chained"
TEMPORARY = "temporary"
UNCLOSED = "unclosed"

IMAGE_OPEN = "PIL.Image.open"
FILE_OPENERS = frozenset(
    {
        "builtins.open",
        "gzip.open",
        "bz2.open",
        "lzma.open",
        "tarfile.open",
        "zipfile.ZipFile",
        "h5py.File",
        "codecs.open",
        "gzip.GzipFile",
        "bz2.BZ2File",
        "lzma.LZMAFile",
        "io.FileIO",
        "os.fdopen",
    }
)
MMAP_LOADERS = frozenset({"numpy.load", "numpy.memmap"})
# Methods that read the pixels (Image.load()): single-frame files close afterwards.
IMAGE_LOADING_METHODS = frozenset(
    {
        "load",
        "convert",
        "copy",
        "resize",
        "crop",
        "rotate",
        "transpose",
        "filter",
        "point",
        "split",
        "getdata",
        "tobytes",
        "thumbnail",
        "reduce",
        "quantize",
        "getpixel",
        "histogram",
        "getbbox",
        "getextrema",
        "save",
    }
)
# Wrappers that do not change who owns the handle.
_CLOSING = frozenset({"contextlib.closing"})
_MEMORY_FILES = frozenset({"io.BytesIO", "io.StringIO"})
_ADDERS = frozenset({"append", "add", "extend", "insert", "appendleft", "setdefault", "put", "update"})


@dataclass
class Fate:
    kind: str
    # the statement or expression that decides it (e.g. the assignment storing it)
    site: Optional[cst.CSTNode] = None
    # for CHAINED: the method called on the handle
    method: Optional[str] = None
    # name the handle was bound to, if any
    name: Optional[str] = None


def opener_kind(ctx, call: cst.Call) -> Optional[str]:
    """"image", "file" or "mmap" for calls that open an OS-level handle."""
    qualified = ctx.call_name(call)
    if qualified == IMAGE_OPEN:
        return "image" if not _image_source_is_fileobj(ctx, call) else None
    if qualified in FILE_OPENERS:
        return "file"
    if qualified in MMAP_LOADERS:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "mmap_mode":
                value = ctx.literal(arg.value)
                return "mmap" if isinstance(value, str) else None
        return "mmap" if qualified == "numpy.memmap" else None
    if (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "open"
        and isinstance(call.func.value, cst.Call)
        and ctx.call_name(call.func.value) in ("pathlib.Path", "pathlib.PurePath")
    ):
        return "file"
    return None


def _image_source_is_fileobj(ctx, call: cst.Call) -> bool:
    """``Image.open(f)`` on a file object: Pillow does not own (or close) it."""
    if not call.args:
        return False
    source = call.args[0].value
    if isinstance(source, cst.Call):
        qualified = ctx.call_name(source)
        return qualified in _MEMORY_FILES or qualified in FILE_OPENERS or opener_kind(ctx, source) is not None or (
            isinstance(source.func, cst.Attribute) and source.func.attr.value in ("open", "urlopen", "extractfile")
        )
    if isinstance(source, cst.Name):
        return _name_is_fileobj(ctx, source)
    return False


def _name_is_fileobj(ctx, name: cst.Name) -> bool:
    func = ctx.enclosing_function(name)
    for item in ctx.nodes(cst.WithItem):
        if item.asname is not None and isinstance(item.asname.name, cst.Name) and item.asname.name.value == name.value:
            if func is None or ctx.enclosing_function(item) is func:
                return True
    value = ctx.single_assignment(name)
    if isinstance(value, cst.Call):
        qualified = ctx.call_name(value)
        return qualified in _MEMORY_FILES or qualified in FILE_OPENERS
    return False


def fate(ctx, call: cst.Call) -> Fate:
    node: cst.CSTNode = call
    while True:
        parent = ctx.parent(node)
        # transparent wrappers: parentheses are not nodes; closing(x) passes ownership on
        if isinstance(parent, cst.Arg):
            outer = ctx.parent(parent)
            if isinstance(outer, cst.Call):
                outer_name = ctx.call_name(outer)
                if outer_name in _CLOSING:
                    node = outer
                    continue
                if isinstance(outer.func, cst.Attribute) and outer.func.attr.value in ("enter_context", "push", "callback"):
                    return Fate(CLOSED, outer)
                if isinstance(outer.func, cst.Attribute) and outer.func.attr.value in _ADDERS:
                    return Fate(STORED, outer)
                return Fate(TEMPORARY, outer)
            return Fate(TEMPORARY, parent)
        if isinstance(parent, cst.WithItem):
            return Fate(CLOSED, parent)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            grand = ctx.parent(parent)
            if isinstance(grand, cst.Call) and grand.func is parent:
                return Fate(CHAINED, grand, method=parent.attr.value)
            return Fate(CHAINED, parent, method=parent.attr.value)
        if isinstance(parent, (cst.Return, cst.Yield)):
            return Fate(RETURNED, parent)
        if isinstance(parent, (cst.Element, cst.StarredElement)):
            display = ctx.parent(parent)
            if isinstance(ctx.parent(display), (cst.Return, cst.Yield)):
                return Fate(RETURNED, display)
            return Fate(STORED, display)
        if isinstance(parent, (cst.DictElement,)) and parent.value is node:
            return Fate(STORED, ctx.parent(parent))
        if isinstance(parent, (cst.ListComp, cst.SetComp, cst.GeneratorExp)) and parent.elt is node:
            if isinstance(parent, cst.GeneratorExp):
                return Fate(TEMPORARY, parent)
            return Fate(STORED, parent)
        if isinstance(parent, cst.DictComp) and parent.value is node:
            return Fate(STORED, parent)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            return _assigned(ctx, call, parent)
        if isinstance(parent, cst.IfExp):
            node = parent
            continue
        if isinstance(parent, cst.NamedExpr) and parent.value is node:
            return _bound_name(ctx, call, parent.target, parent)
        if isinstance(parent, cst.Expr):
            return Fate(TEMPORARY, parent)
        return Fate(TEMPORARY, parent)


def _assigned(ctx, call: cst.Call, assign) -> Fate:
    targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
    for target in targets:
        if isinstance(target, cst.Subscript):
            return Fate(STORED, assign)
        if isinstance(target, cst.Attribute):
            parts = dotted_parts(target)
            func = ctx.enclosing_function(assign)
            if func is not None and parts and len(parts) == 2 and parts[0] == self_name(func):
                return Fate(STORED_SELF, assign, name=parts[1])
            return Fate(STORED, assign)
    names = [t for t in targets if isinstance(t, cst.Name)]
    if names:
        return _bound_name(ctx, call, names[0], assign)
    return Fate(TEMPORARY, assign)


def _bound_name(ctx, call: cst.Call, target: cst.CSTNode, site: cst.CSTNode) -> Fate:
    if not isinstance(target, cst.Name):
        return Fate(TEMPORARY, site)
    name = target.value
    func = ctx.enclosing_function(site)
    scope_nodes = ctx.nodes(cst.Name)
    loaded = False
    for use in scope_nodes:
        if use.value != name or use is target:
            continue
        if ctx.enclosing_function(use) is not func:
            continue
        parent = ctx.parent(use)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            method = parent.attr.value
            if method in ("close", "__exit__"):
                return Fate(CLOSED, parent, name=name)
            if method in IMAGE_LOADING_METHODS:
                loaded = True
            continue
        if isinstance(parent, cst.WithItem):
            return Fate(CLOSED, parent, name=name)
        if isinstance(parent, cst.Arg):
            outer = ctx.parent(parent)
            if isinstance(outer, cst.Call):
                if ctx.call_name(outer) in _CLOSING:
                    return Fate(CLOSED, outer, name=name)
                if isinstance(outer.func, cst.Attribute) and outer.func.attr.value in ("enter_context", "push", "callback"):
                    return Fate(CLOSED, outer, name=name)
                if isinstance(outer.func, cst.Attribute) and outer.func.attr.value in _ADDERS:
                    return Fate(STORED, outer, name=name)
        if isinstance(parent, (cst.Return, cst.Yield)):
            return Fate(RETURNED, parent, name=name)
        if isinstance(parent, (cst.Element, cst.DictElement)):
            return Fate(STORED, parent, name=name)
        if isinstance(parent, cst.Assign) and parent.value is use:
            for assign_target in parent.targets:
                if isinstance(assign_target.target, (cst.Subscript, cst.Attribute)):
                    inner = _assigned(ctx, call, parent)
                    return Fate(inner.kind, parent, name=name)
    return Fate(CHAINED if loaded else UNCLOSED, site, method="load" if loaded else None, name=name)
