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
* ``UNCLOSED``   -- bound to a name that is never closed;
* ``UNKNOWN``    -- one element of a tuple a helper returns, used in a way not followed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from dslint.semantics.archives import read_by_field
from dslint.semantics.bindings import is_bound_here
from dslint.semantics.handle_kinds import LIBRARY_HANDLES
from dslint.semantics.names import dotted_parts
from dslint.semantics.once import once_guarded  # noqa: F401  (re-exported: once-only code lives in once.py)
from dslint.semantics.reaching import rebinds
from dslint.semantics.regions import self_name
from dslint.semantics.walk import iter_subtree

CLOSED = "closed"
RETURNED = "returned"
STORED_SELF = "stored-self"
STORED = "stored"
CHAINED = "chained"
TEMPORARY = "temporary"
UNCLOSED = "unclosed"
UNKNOWN = "unknown"

IMAGE_OPEN = "PIL.Image.open"
# The one knowledge table of calls that return an object holding an open file until
# its ``close()``: file objects (FILE_OPENERS), and library handles (LIBRARY_OPENERS:
# archives, HDF5/NetCDF/raster datasets, LMDB environments). ``fsspec.open`` is not
# one: it returns a lazy ``OpenFile`` that opens nothing until it is entered.
FILE_OPENERS = frozenset(
    {"builtins.open", "gzip.open", "bz2.open", "lzma.open", "tarfile.open", "zipfile.ZipFile", "h5py.File"}
    | {"codecs.open", "gzip.GzipFile", "bz2.BZ2File", "lzma.LZMAFile", "io.FileIO", "os.fdopen"}
)
# The library handles that cannot be pickled (``handle_kinds.LIBRARY_HANDLES``: PyTables files, also
# behind pandas' HDFStore, stay in PyTables' registry of open files until closed; h5netcdf files and
# OpenSlide slides hold theirs until closed or collected), and these; PyAV containers, imageio readers
# and SciPy NetCDF files also hold their file until closed or collected.
LIBRARY_OPENERS = frozenset(LIBRARY_HANDLES) | frozenset(
    {"tarfile.TarFile", "netCDF4.MFDataset", "lmdb.open"}
    | {"xarray.open_dataset", "xarray.open_dataarray", "xarray.open_mfdataset", "smart_open.open"}
    | {"smart_open.smart_open", "av.open", "imageio.get_reader", "imageio.v2.get_reader", "scipy.io.netcdf_file"}
)
# Library handles whose file stays open after the program drops the object: PyTables
# keeps every file it opens (also behind pandas' HDFStore) in its registry of open files
# until ``close()``. Measured by ``bench/handle_release.py`` (300 distinct files opened,
# read and dropped in one statement): tables 3.11.1 and pandas 3.1.1 left 300 descriptors
# open, also after ``gc.collect()``; rasterio 1.4.4, h5py 3.16.0, lmdb 3.0.0 and xarray
# 2026.9.0 left none, netCDF4 1.7.5 none once the collector ran. Those release their file
# when the object is freed, as Python's file objects do.
NATIVE_OPENERS = frozenset({"tables.open_file", "pandas.HDFStore"})
# the library handles that measurement showed freed with their object (messages say so)
FREED_ON_DROP = frozenset({"rasterio.open", "h5py.File", "lmdb.open", "netCDF4.Dataset", "netCDF4.MFDataset"}) | {
    "xarray.open_dataset", "xarray.open_dataarray", "xarray.open_mfdataset"}
MMAP_LOADERS = frozenset({"numpy.load", "numpy.memmap"})
# ``np.load`` of an ``.npz`` path: an ``NpzFile`` holds its archive open until closed
# (or collected: a temporary is closed at once, a kept one is not)
NPZ = "npz"
# the last names the openers are called by (aliases are added by the caller)
OPENER_TAILS = frozenset(q.rsplit(".", 1)[1] for q in FILE_OPENERS | LIBRARY_OPENERS | MMAP_LOADERS | {IMAGE_OPEN})
# calls that import the module their string argument names
_IMPORTERS = frozenset({"importlib.import_module", "builtins.__import__"})
# Methods that read the pixels (Image.load()): single-frame files close afterwards.
IMAGE_LOADING_METHODS = frozenset(
    {"load", "convert", "copy", "resize", "crop", "rotate", "transpose", "filter", "point", "split", "getdata"}
    | {"tobytes", "thumbnail", "reduce", "quantize", "getpixel", "histogram", "getbbox", "getextrema", "save"}
    | {"getpalette", "getcolors", "getchannel"}
)
# Methods of a library handle that return a view holding the handle open (an LMDB transaction or
# cursor, an HDF5 dataset or group by name)
VIEW_METHODS = frozenset({"begin", "cursor", "get", "require_dataset", "require_group"})
# Openers whose first argument is a path or a descriptor they own, never a file object.
_PATH_ONLY = frozenset({"builtins.open", "io.FileIO", "os.fdopen", "codecs.open"})
# Wrappers that do not change who owns the handle.
_CLOSING = frozenset({"contextlib.closing"})
_MEMORY_FILES = frozenset({"io.BytesIO", "io.StringIO"})
ADDERS = frozenset({"append", "add", "extend", "insert", "appendleft", "setdefault", "put", "update"})


@dataclass
class Fate:
    kind: str
    # the statement or expression that decides it (e.g. the assignment storing it)
    site: Optional[cst.CSTNode] = None
    # for CHAINED: the method called on the handle
    method: Optional[str] = None
    # name the handle was bound to, if any
    name: Optional[str] = None


def opener_name(ctx, call: cst.Call) -> Optional[str]:
    """The qualified name of the call, also for a module imported by a call
    (``xr = importlib.import_module("xarray")``, or a project helper that calls
    ``importlib.import_module``: ``xr = lazy_import("xarray")``; ``xr.open_dataset``)."""
    qualified = ctx.call_name(call)
    if qualified is not None or not isinstance(call.func, cst.Attribute):
        return qualified
    receiver = call.func.value
    if not isinstance(receiver, cst.Name):
        return None
    value = ctx.single_assignment(receiver)
    if not isinstance(value, cst.Call) or len(value.args) != 1 or value.args[0].keyword is not None:
        return None
    module = ctx.literal(value.args[0].value)
    if not isinstance(module, str) or not module.replace(".", "").replace("_", "").isalnum():
        return None
    importer = ctx.call_name(value)
    if importer is None or not (importer in _IMPORTERS or _calls_importer(ctx, importer)):
        return None
    return f"{module}.{call.func.attr.value}"


def _calls_importer(ctx, qualified: str) -> bool:
    def compute() -> bool:
        facts = ctx.view.function_facts(qualified)
        return bool(facts) and any(kind == "func" and target in _IMPORTERS for kind, target, _ in facts["calls"])

    return ctx.memo(("lifetimes.importer", qualified), compute)


def opener_kind(ctx, call: cst.Call) -> Optional[str]:
    """"image", "file", "mmap" or "npz" for calls that open an OS-level handle."""
    qualified = opener_name(ctx, call)
    if qualified == IMAGE_OPEN:
        return "image" if not _image_source_is_fileobj(ctx, call) else None
    if qualified in FILE_OPENERS or qualified in LIBRARY_OPENERS:
        # a reader over a file object the code opened (``av.open(f)``, ``zipfile.ZipFile(
        # BytesIO(b))``, ``tarfile.open(fileobj=f)``) does not own it: nothing to close here
        return None if qualified not in _PATH_ONLY and _source_is_fileobj(ctx, call) else "file"
    if qualified in MMAP_LOADERS:
        if qualified == "numpy.load" and call.args and (
            _names_suffix(ctx, call.args[0].value, ".npz") or read_by_field(ctx, call)
        ):
            return NPZ  # (an archive ignores ``mmap_mode``)
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


def _names_suffix(ctx, expr, suffix: str, depth: int = 0) -> bool:
    """A path expression whose text ends with ``suffix`` (``f"{split}.npz"``,
    ``root + ".npz"``, ``os.path.join(root, "x.npz")``, a name bound once to one)."""
    if depth > 3:
        return False
    value = ctx.literal(expr)
    if isinstance(value, str):
        return value.endswith(suffix)
    if isinstance(expr, cst.FormattedString):
        last = expr.parts[-1] if expr.parts else None
        return isinstance(last, cst.FormattedStringText) and last.value.endswith(suffix)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Divide)):
        return _names_suffix(ctx, expr.right, suffix, depth + 1)
    if isinstance(expr, cst.Call) and ctx.call_name(expr) == "os.path.join" and expr.args:
        return _names_suffix(ctx, expr.args[-1].value, suffix, depth + 1)
    if isinstance(expr, cst.Name):
        bound = ctx.single_assignment(expr)
        return bound is not None and _names_suffix(ctx, bound, suffix, depth + 1)
    return False


def _source_is_fileobj(ctx, call: cst.Call) -> bool:
    """The opener reads a file object it is handed (first argument, or ``fileobj=``) that
    holds no descriptor (an in-memory buffer) or that the code closes itself (a ``with``
    target). One opened for it and left to it (``h5py.File(fs.open(p))``) is the reader's
    to keep alive: keeping the reader keeps the descriptor."""
    given = [a for a in call.args if a.keyword is not None and a.keyword.value == "fileobj"]
    if given:
        source = given[0].value
    elif call.args and call.args[0].keyword is None:
        source = call.args[0].value
    else:
        return False
    if isinstance(source, cst.Call):
        return ctx.call_name(source) in _MEMORY_FILES
    return isinstance(source, cst.Name) and _name_is_fileobj(ctx, source, managed_only=True)


def _image_source_is_fileobj(ctx, call: cst.Call) -> bool:
    """``Image.open(f)`` on a file object: Pillow does not own (or close) it."""
    return bool(call.args) and _is_fileobj(ctx, call.args[0].value)


def _is_fileobj(ctx, source) -> bool:
    if isinstance(source, cst.Call):
        qualified = ctx.call_name(source)
        return qualified in _MEMORY_FILES or qualified in FILE_OPENERS or opener_kind(ctx, source) is not None or (
            isinstance(source.func, cst.Attribute) and source.func.attr.value in ("open", "urlopen", "extractfile")
        )
    if isinstance(source, cst.Name):
        return _name_is_fileobj(ctx, source)
    return False


def _name_is_fileobj(ctx, name: cst.Name, managed_only: bool = False) -> bool:
    func = ctx.enclosing_function(name)
    for item in ctx.nodes(cst.WithItem):
        if item.asname is not None and isinstance(item.asname.name, cst.Name) and item.asname.name.value == name.value:
            if func is None or ctx.enclosing_function(item) is func:
                return True
    value = ctx.single_assignment(name)
    if isinstance(value, cst.Call):
        qualified = ctx.call_name(value)
        return qualified in _MEMORY_FILES or (qualified in FILE_OPENERS and not managed_only)
    return False


def fate(ctx, call: cst.Call, position: Optional[int] = None) -> Fate:
    """What becomes of the handle ``call`` returns; with ``position``, of element
    ``position`` of the tuple it returns (``m, meta = read(p)``: what becomes of ``m``)."""
    if position is not None:
        return _element_fate(ctx, call, position)
    return _follow(ctx, call, call)


def _follow(ctx, call: cst.Call, node: cst.CSTNode) -> Fate:
    """What becomes of the value of ``node``, which holds the handle ``call`` opened."""
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
                if isinstance(outer.func, cst.Attribute) and outer.func.attr.value in ADDERS:
                    return Fate(STORED, outer)
                return Fate(TEMPORARY, outer)
            return Fate(TEMPORARY, parent)
        if isinstance(parent, cst.WithItem):
            return Fate(CLOSED, parent)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            grand = ctx.parent(parent)
            if isinstance(grand, cst.Call) and grand.func is parent:
                if parent.attr.value in ("close", "__exit__"):
                    return Fate(CLOSED, grand)  # `open(p, "a").close()`: closed at once
                return Fate(CHAINED, grand, method=parent.attr.value)
            return Fate(CHAINED, parent, method=parent.attr.value)
        if isinstance(parent, (cst.Return, cst.Yield)):
            return Fate(RETURNED, parent)
        if isinstance(parent, (cst.Element, cst.StarredElement)):
            display = ctx.parent(parent)
            if isinstance(ctx.parent(display), (cst.Return, cst.Yield)):
                return Fate(RETURNED, display)
            target = _unpacked_into(ctx, display, parent)
            if target is not None:  # `a, b = open(x), open(y)`: each name gets one, no container
                return _target_fate(ctx, call, target, ctx.parent(display))
            return Fate(STORED, display)
        if isinstance(parent, (cst.DictElement,)) and parent.value is node:
            return Fate(STORED, ctx.parent(parent))
        if isinstance(parent, (cst.ListComp, cst.SetComp, cst.GeneratorExp)) and parent.elt is node:
            if isinstance(parent, cst.GeneratorExp):
                return Fate(TEMPORARY, parent)
            closer = _closed_by_loop(ctx, parent)
            return Fate(CLOSED, closer) if closer is not None else Fate(STORED, parent)
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


def _closed_by_loop(ctx, comp: cst.CSTNode) -> Optional[cst.CSTNode]:
    """``files = [open(p) for p in paths]`` then ``for f in files: ... f.close()`` in the same
    function, the name never rebound: every handle is closed there (the loop's ``close`` call)."""
    assign = ctx.parent(comp)
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)):
        return None
    name, func = assign.targets[0].target.value, ctx.enclosing_function(comp)
    if func is None:
        return None
    for loop in ctx.tree.scope_nodes(func, cst.For):
        if not (isinstance(loop.iter, cst.Name) and loop.iter.value == name and isinstance(loop.target, cst.Name)):
            continue
        for call in iter_subtree(loop.body, into_scopes=False):
            if (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "close"
                    and isinstance(call.func.value, cst.Name) and call.func.value.value == loop.target.value):
                return call
    return None


def _element_fate(ctx, call: cst.Call, position: int) -> Fate:
    parent = ctx.parent(call)
    if isinstance(parent, (cst.Return, cst.Yield)):
        return Fate(RETURNED, parent)
    if not isinstance(parent, cst.Assign) or parent.value is not call or len(parent.targets) != 1:
        return Fate(UNKNOWN, parent)
    target = parent.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or position >= len(target.elements):
        return Fate(UNKNOWN, parent)
    if any(isinstance(e, cst.StarredElement) for e in target.elements):
        return Fate(UNKNOWN, parent)
    return _target_fate(ctx, call, target.elements[position].value, parent)


def _target_fate(ctx, call: cst.Call, element, site) -> Fate:
    """What becomes of a handle that one element of an unpacking target receives."""
    if isinstance(element, cst.Name):
        return _bound_name(ctx, call, element, site)
    if isinstance(element, cst.Subscript):
        return Fate(STORED, site)
    if isinstance(element, cst.Attribute):
        parts = dotted_parts(element)
        func = ctx.enclosing_function(site)
        if func is not None and parts and len(parts) == 2 and parts[0] == self_name(func):
            return Fate(STORED_SELF, site, name=parts[1])
        return Fate(STORED, site)
    return Fate(UNKNOWN, site)


def _unpacked_into(ctx, display, element):
    """The target ``element`` of the display ``display`` is unpacked into: ``a, b = x, y`` (one
    target of the same length, no starred element on either side); None otherwise."""
    assign = ctx.parent(display)
    if not isinstance(display, (cst.Tuple, cst.List)) or not isinstance(assign, cst.Assign) \
            or assign.value is not display or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != len(display.elements):
        return None
    if any(isinstance(e, cst.StarredElement) for e in (*target.elements, *display.elements)):
        return None
    position = next(i for i, e in enumerate(display.elements) if e is element)
    return target.elements[position].value


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
    # After an unconditional rebinding of the name (`img = img.convert()`), later
    # uses refer to the new value, not to the handle.
    stop = _rebinding_after(ctx, site, name)
    stop_ids = {id(n) for n in iter_subtree(stop)} if stop is not None else None
    in_stop = False
    for use in scope_nodes:
        if stop_ids is not None:
            if id(use) in stop_ids:
                in_stop = True
            elif in_stop:
                break
        if use.value != name or use is target:
            continue
        if ctx.enclosing_function(use) is not func:
            continue
        if is_bound_here(ctx, use):
            continue  # a target (`img, label = ...`), not a use of the handle
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
                if isinstance(outer.func, cst.Attribute) and outer.func.attr.value in ADDERS:
                    return Fate(STORED, outer, name=name)
        if isinstance(parent, (cst.Return, cst.Yield)):
            return Fate(RETURNED, parent, name=name)
        if isinstance(parent, (cst.Element, cst.DictElement)):
            if isinstance(ctx.parent(ctx.parent(parent)), (cst.Return, cst.Yield)):
                return Fate(RETURNED, parent, name=name)  # `return img, label`: the caller owns it
            return Fate(STORED, parent, name=name)
        if isinstance(parent, cst.Assign) and parent.value is use:
            for assign_target in parent.targets:
                if isinstance(assign_target.target, (cst.Subscript, cst.Attribute)):
                    inner = _assigned(ctx, call, parent)
                    return Fate(inner.kind, parent, name=name)
    return Fate(CHAINED if loaded else UNCLOSED, site, method="load" if loaded else None, name=name)


def _rebinding_after(ctx, site: cst.CSTNode, name: str) -> Optional[cst.CSTNode]:
    """The first later statement of the site's own block that rebinds ``name`` unconditionally."""
    if not isinstance(site, (cst.Assign, cst.AnnAssign)):
        return None
    line = ctx.parent(site)
    block = ctx.parent(line) if isinstance(line, cst.SimpleStatementLine) else None
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return None
    body = list(block.body)
    index = next((i for i, stmt in enumerate(body) if stmt is line), None)
    if index is None:
        return None
    return next((stmt for stmt in body[index + 1 :] if rebinds(stmt, name)), None)


def kept_through_view(ctx, call: cst.Call, fate: Fate) -> bool:
    """A library handle (HDF5, LMDB, NetCDF...) that lives on in a view of it the code keeps: a
    subscript (``f["ann"]``, a lazy dataset that holds its file) or a ``VIEW_METHODS`` call
    (``env.begin()``, a transaction that holds its environment), taken from the handle itself or
    from the name it is bound to, that is stored (on ``self`` or in a container) or returned. The
    file is meant to stay open for as long as the view is used, so closing it would break the view."""
    if opener_name(ctx, call) not in LIBRARY_OPENERS | {"h5py.File"}:
        return False
    if fate.name is None:
        views = [_view_of(ctx, call)]
    else:
        func = ctx.enclosing_function(fate.site)
        views = [_view_of(ctx, use) for use in ctx.nodes(cst.Name)
                 if use.value == fate.name and ctx.enclosing_function(use) is func and not is_bound_here(ctx, use)]
    return any(view is not None and _follow(ctx, call, view).kind in (STORED_SELF, STORED, RETURNED) for view in views)


def _view_of(ctx, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    parent = ctx.parent(node)
    if isinstance(parent, cst.Subscript) and parent.value is node:
        return parent
    if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in VIEW_METHODS:
        grand = ctx.parent(parent)
        return grand if isinstance(grand, cst.Call) and grand.func is parent else None
    return None


def image_loaded_by_name(ctx, fate: Fate) -> bool:
    """A handle kept under ``fate.name`` (``self.cache[i] = im``) that its function also loads by
    that name: a loading method on it (``im.convert("RGB")``) or handing it to a call that is
    not an adder (``transform(im)``). Pillow closes a single-frame file when it loads it, so
    what the container keeps holds no descriptor."""
    if fate.name is None:
        return False
    func = ctx.enclosing_function(fate.site)
    for use in ctx.nodes(cst.Name):
        if use.value != fate.name or ctx.enclosing_function(use) is not func or is_bound_here(ctx, use):
            continue
        parent = ctx.parent(use)
        if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value in IMAGE_LOADING_METHODS:
            return True
        outer = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
        if isinstance(outer, cst.Call) and not (isinstance(outer.func, cst.Attribute) and outer.func.attr.value in ADDERS):
            return True
    return False
