"""Helpers the DSL1xx handle rules share: the opener calls in dataset code, which
of them are never closed, what that costs (a runtime consequence, or only a
ResourceWarning), and the ``with`` rewrite that closes them."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.edits import with_statement_fix
from dslint.report import FixSpec
from dslint.semantics import lifetimes as lt
from dslint.semantics.bindings import is_bound_here
from dslint.semantics.call_facts import in_per_example_function, last_name
from dslint.semantics.containers import local_to
from dslint.semantics.handle_returns import helper_calls
from dslint.semantics.memoised import maybe_handle_calls, memoised_call
from dslint.semantics.memory_buffers import buffer_call, self_buffer_element
from dslint.semantics.once import called_only_lazily, in_once_block
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.sample_keys import distinct_per_sample
from dslint.semantics.walk import iter_subtree


def opened_handles(ctx, kinds, built=False):
    """(call, kind, fate) for every opener call in dataset code, and every call to a
    function (of this file or, through the summaries, of the project) that returns
    a handle it opened (``handle_returns``); with ``built``, also in the functions that
    run while a dataset is built (``in_construction``)."""
    tails = ctx.names.call_tails(lt.OPENER_TAILS)
    helpers, maybes = helper_calls(ctx), maybe_handle_calls(ctx)

    def wanted(call) -> bool:
        return ctx.in_dataset_code(call) or in_per_example_function(ctx, call) or (built and in_construction(ctx, call))

    for call in ctx.nodes(cst.Call):
        helper = helpers.get(id(call))
        if helper is not None:
            # a memoised helper's handle is the cache's, shared by every caller: not a new one
            if helper[1] in kinds and wanted(call) and not memoised_call(ctx, call):
                yield call, helper[1], lt.fate(ctx, call, helper[2])
            continue
        maybe = maybes.get(id(call))  # a new handle or a memoised one: reported only where it runs once
        if maybe is not None:
            if maybe[1] in kinds and wanted(call) and not per_sample(ctx, call):
                yield call, maybe[1], lt.fate(ctx, call)
            continue
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        if tail not in tails and not (isinstance(func, cst.Attribute) and tail in lt.OPENER_TAILS):
            continue
        kind = lt.opener_kind(ctx, call)
        if kind not in kinds or not wanted(call):
            continue
        yield call, kind, lt.fate(ctx, call)


def in_construction(ctx, node) -> bool:
    """In a function (of any file) that a dataset class's ``__init__`` reaches: it runs
    while the dataset is built, once per object, not per sample (``view.built_by``)."""
    func = ctx.enclosing_function(node)
    while func is not None:
        if ctx.view.built_by(ctx.qualname_of_def(func)):
            return True
        func = ctx.enclosing_function(func)
    return False


def unclosed_handles(ctx, kinds):
    """(call, kind, fate, consequence) for each handle of ``kinds`` that is never closed; the
    consequence (``consequence``) is None for the ResourceWarning-only forms (DSL104's),
    and for the handles opened while a dataset is built."""
    for call, kind, fate in opened_handles(ctx, kinds, built=True):
        if unclosed(ctx, call, fate):
            yield call, kind, fate, consequence(ctx, call, kind, fate)


def in_init(ctx, node) -> bool:
    func = ctx.enclosing_function(node)
    return func is not None and func.name.value == "__init__" and ctx.method_class(func) is not None


def in_lazy_block(ctx, node) -> bool:
    """Runs at most once per worker: in a once-only block, or in a method only such blocks call."""
    func = ctx.enclosing_function(node)
    return func is not None and (in_once_block(ctx, node) or called_only_lazily(ctx, func))


def in_local_container(ctx, call, fate) -> bool:
    """A per-sample handle added to a container local to its function (``images.append(
    Image.open(p))``, ``found[k] = open(p)``, ``sample = {"rgb": Image.open(p)}``,
    ``views = [Image.open(p) for p in paths]``: ``containers.local_to``): the container ends
    with the sample, dropped or returned to the caller, so nothing accumulates from one sample to the next."""
    func = ctx.enclosing_function(call)
    if func is None or in_init(ctx, call) or not ctx.is_per_sample(call):
        return False
    return local_to(ctx, fate.site, func)


def keyed_by_sample_index(ctx, fate) -> bool:
    """A handle stored under a key distinct for every sample (``self.cache[idx] = open(p)``
    in ``__getitem__(self, idx)``, or under ``self.paths[idx]`` when the dataset has one
    path per sample: ``sample_keys``): a "not opened yet" guard on that key still keeps
    one handle for every distinct sample, not one per file or per worker."""
    site = fate.site
    if not isinstance(site, cst.Assign) or len(site.targets) != 1:
        return False
    target = site.targets[0].target
    if not isinstance(target, cst.Subscript) or len(target.slice) != 1:
        return False
    key = target.slice[0].slice
    return isinstance(key, cst.Index) and distinct_per_sample(ctx, key.value)


def _kept_on_self(ctx, call, attr: str) -> bool:
    """The class treats ``self.attr`` as its one handle: it closes it somewhere
    (``__del__``, ``close()``) or tests whether it is open yet (``if not self.f:
    self._open()``), so storing a new one is the lazy once-per-worker pattern."""
    func = ctx.enclosing_function(call)
    cls = ctx.method_class(func) if func is not None else None
    if cls is None:
        return False
    for method in iter_subtree(cls.body, into_scopes=True):
        if not isinstance(method, cst.FunctionDef):
            continue
        selfp = self_name(method)
        if not selfp:
            continue
        for node in iter_subtree(method.body, into_scopes=False):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                if node.func.attr.value in ("close", "__exit__") and self_attr(node.func.value, selfp) == attr:
                    return True
            elif isinstance(node, (cst.If, cst.IfExp, cst.While)):
                if _tests_unset(node.test, selfp, attr):
                    return True
    return False


def _tests_unset(test, selfp, attr) -> bool:
    if isinstance(test, cst.BooleanOperation):
        return _tests_unset(test.left, selfp, attr) or _tests_unset(test.right, selfp, attr)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = test.expression
        if self_attr(inner, selfp) == attr:
            return True
        return (
            isinstance(inner, cst.Call)
            and isinstance(inner.func, cst.Name)
            and inner.func.value == "hasattr"
            and len(inner.args) >= 2
            and isinstance(inner.args[0].value, cst.Name)
            and inner.args[0].value.value == selfp
            and isinstance(inner.args[1].value, cst.SimpleString)
            and inner.args[1].value.evaluated_value == attr
        )
    if isinstance(test, cst.Comparison) and self_attr(test.left, selfp) == attr:
        return any(
            isinstance(c.operator, (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual))
            and isinstance(c.comparator, cst.Name)
            and c.comparator.value == "None"
            for c in test.comparisons
        )
    return False


def _wrapper_destination(ctx, call):
    """Where the object wrapping an opener goes, for ``wrapper(...(open(p))...)`` that
    does not consume the handle: "self" (``self.x = wrapper(open(p))``), "caller"
    (returned or yielded, alone or in a tuple), or None."""
    if _consumed_in_statement(ctx, call):
        return None
    node = call
    wrapped = False
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.Arg) and isinstance(ctx.parent(parent), cst.Call):
            node = ctx.parent(parent)
            wrapped = True
            continue
        if not wrapped:
            return None
        if isinstance(parent, (cst.Element, cst.StarredElement)) and isinstance(ctx.parent(parent), cst.Tuple):
            node = ctx.parent(parent)
            continue
        if isinstance(parent, (cst.Return, cst.Yield)):
            return "caller"
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            if any(isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self" for t in targets):
                return "self"
        return None


def unclosed(ctx, call, fate) -> bool:
    """The generic "never closed" fates that DSL101/DSL102 own."""
    if fate.kind == lt.TEMPORARY:
        destination = _wrapper_destination(ctx, call)
        # `self.reader = csv.reader(open(p))` in __init__: the handle is kept on self,
        # which DSL401 (and DSL302 for an iterator) report; it is not a leak to close
        if destination == "self" and in_init(ctx, call):
            return False
        # `return StreamWrapper(open(p))`: the caller owns the wrapped handle
        if destination == "caller":
            return False
    if fate.kind in (lt.CHAINED, lt.TEMPORARY, lt.UNCLOSED):
        return True
    if fate.kind == lt.STORED_SELF:
        # kept on self in __init__ is DSL401's; the lazy per-worker pattern is fine
        return not in_init(ctx, call) and not in_lazy_block(ctx, call) and not _kept_on_self(ctx, call, fate.name)
    return False


# ---------------------------------------------------------------- consequence

# Why an unclosed handle matters beyond a ResourceWarning (None: it does not).
KEPT = "kept"  # a new handle kept on `self` on every sample
NEVER_LOADED = "never-loaded"  # an image per sample whose pixels are never read
MULTI_FRAME = "multi-frame"  # the code handles formats Pillow keeps open after loading
NATIVE = "native"  # a library handle per sample: reference counting is not its close
# Formats Pillow keeps open after loading even with a single frame (GIF) or whose
# extension says the file is an animation (APNG, MPO). A TIFF is not one of them:
# Pillow closes a single-frame TIFF on load, and only the multi-frame attributes
# (``n_frames``, ``seek``...) tell a TIFF stack from a TIFF image.
_MULTI_FRAME_EXTENSIONS = frozenset({"gif", "mpo", "apng"})
_MULTI_FRAME_ATTRIBUTES = frozenset({"n_frames", "is_animated", "seek"})


def per_sample(ctx, node) -> bool:
    """Runs once per sample: per-sample dataset code, or a per-example function."""
    return ctx.is_per_sample(node) or in_per_example_function(ctx, node)


def released_how(ctx, call, kind) -> str:
    """How a handle with no ``consequence`` is released, as DSL104's message says it."""
    if not per_sample(ctx, call) and lt.opener_name(ctx, call) in lt.NATIVE_OPENERS:
        return "it does not run per sample: one handle per call, which the library releases through `close()`, not when it is dropped"
    if not per_sample(ctx, call):
        return "it does not run per sample, and it is released when it is dropped (a ResourceWarning)"
    if kind == "image" and memory_source(ctx, call):
        return "it reads an in-memory buffer, which holds no descriptor"
    if kind == "image":
        return (
            "Pillow closes single-frame files (JPEG, PNG) when it loads them and the image is dropped "
            "after its sample; only a ResourceWarning for other formats"
        )
    if lt.opener_name(ctx, call) in lt.FREED_ON_DROP:
        return "the library frees its file when the object is dropped (measured: no descriptor left open)"
    return "CPython's reference counting closes it when it is dropped, with a ResourceWarning in each worker"


def consequence(ctx, call, kind, fate) -> Optional[str]:
    """For a handle ``unclosed`` accepts: why it costs more than a ResourceWarning
    (KEPT, NEVER_LOADED, MULTI_FRAME, NATIVE), or None when CPython's reference
    counting or Pillow's load closes it promptly, or it runs once, not per sample."""
    if not per_sample(ctx, call):
        return None
    if kind == "image" and memory_source(ctx, call):
        return None  # an in-memory buffer holds no descriptor
    if fate.kind == lt.STORED_SELF or (fate.kind == lt.TEMPORARY and _wrapper_destination(ctx, call) == "self"):
        return KEPT
    if kind == "image":
        read, attributes = _image_uses(ctx, call, fate)
        if not read:
            return NEVER_LOADED
        return MULTI_FRAME if attributes & _MULTI_FRAME_ATTRIBUTES or multi_frame_code(ctx, call) else None
    return NATIVE if lt.opener_name(ctx, call) in lt.NATIVE_OPENERS else None


def _image_uses(ctx, call, fate):
    """(whether the image's pixels are read, the attributes used on it): read when a
    loading method runs on it or it is handed to a call (a transform, ``np.array``)
    or anything else than an attribute; only ``.size``/``.info``-style reads leave
    it unloaded."""
    if fate.name is None:
        if fate.kind == lt.CHAINED:
            return fate.method in lt.IMAGE_LOADING_METHODS, {fate.method}
        return True, set()  # handed on in its statement
    if fate.kind not in (lt.CHAINED, lt.UNCLOSED):
        return True, set()
    func = ctx.enclosing_function(fate.site)
    attributes, read = set(), False
    for use in ctx.nodes(cst.Name):
        if use.value != fate.name or ctx.enclosing_function(use) is not func or is_bound_here(ctx, use):
            continue
        parent = ctx.parent(use)
        if isinstance(parent, cst.Attribute) and parent.value is use:
            attributes.add(parent.attr.value)
        else:
            read = True
    return read or bool(attributes & lt.IMAGE_LOADING_METHODS), attributes


def multi_frame_code(ctx, call) -> bool:
    """The file shows multi-frame images where ``call`` opens one: a GIF/MPO/APNG path or
    extension in a string (not one given to a call that writes: ``frames[0].save(f"{n}.gif")``,
    ``imageio.mimsave``), ``n_frames``/``is_animated``, or ``PIL.ImageSequence``, outside the
    other classes of the file (another dataset's ``exts = ["gif"]`` says nothing of this one)."""
    own = _class_of(ctx, call)

    def compute() -> bool:
        texts = [(n, n.value) for n in ctx.nodes(cst.FormattedStringText)]
        texts += [(n, n.evaluated_value) for n in ctx.nodes(cst.SimpleString) if "\n" not in n.value]
        for node, text in texts:
            if isinstance(text, str) and len(text) < 200:
                tail = text.strip().lower().rsplit(".", 1)[-1].lstrip("*")
                if tail in _MULTI_FRAME_EXTENSIONS and not _written(ctx, node) and _class_of(ctx, node) in (None, own):
                    return True
        for node in (*ctx.nodes(cst.Attribute), *(n for n in ctx.nodes(cst.Name) if n.value == "ImageSequence")):
            if _class_of(ctx, node) not in (None, own) or isinstance(ctx.parent(node), cst.ImportAlias):
                continue
            if getattr(node, "attr", node).value in ("n_frames", "is_animated") or ctx.qualname(node) == "PIL.ImageSequence":
                return True
        return False

    return ctx.memo(("handles.multi_frame", id(own)), compute)


def _class_of(ctx, node):
    """The outermost class ``node`` is in, or None."""
    return next((a for a in reversed(list(ctx.ancestors(node))) if isinstance(a, cst.ClassDef)), None)


_WRITERS = ("save", "write", "dump", "export")


def _written(ctx, node) -> bool:
    """The string is (part of) an argument of a call that writes a file (``save``, ``imwrite``, ``mimsave``...)."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
        if isinstance(ancestor, cst.Arg):
            call = ctx.parent(ancestor)
            name = (last_name(call.func) or "").lower() if isinstance(call, cst.Call) else ""
            if any(word in name for word in _WRITERS):
                return True
    return False


def memory_source(ctx, call) -> bool:
    """``Image.open`` of an in-memory buffer (``BytesIO``, ``six.BytesIO``, a name bound
    to one in the function, an element of a ``self`` list of them: ``memory_buffers``),
    which holds no descriptor."""
    if not call.args:
        return False
    source = call.args[0].value
    if isinstance(source, cst.Name):
        func = ctx.enclosing_function(call)
        values = [
            a.value
            for a in ctx.nodes(cst.Assign)
            if ctx.enclosing_function(a) is func
            and any(isinstance(t.target, cst.Name) and t.target.value == source.value for t in a.targets)
        ]
        return bool(values) and all(buffer_call(ctx, v) for v in values)
    return buffer_call(ctx, source) or self_buffer_element(ctx, source)


# Calls that read everything they need from a handle before they return.
_EAGER_CALLS = frozenset(
    {
        "json.load",
        "pickle.load",
        "marshal.load",
        "yaml.load",
        "yaml.safe_load",
        "yaml.full_load",
        "yaml.unsafe_load",
        "tomllib.load",
        "tomli.load",
        "toml.load",
        "torch.load",
        "joblib.load",
        "numpy.loadtxt",
        "numpy.genfromtxt",
        "numpy.fromfile",
        "pandas.read_csv",
        "pandas.read_table",
        "pandas.read_json",
        "pandas.read_parquet",
        "pandas.read_pickle",
        "pandas.read_feather",
        "pandas.read_excel",
    }
    | {
        f"builtins.{name}"
        for name in ("list", "tuple", "set", "frozenset", "sorted", "dict", "sum", "len", "bytes", "bytearray")
    }
)
# Methods on a handle whose result no longer reads from it.
_EAGER_METHODS = frozenset({"read", "readlines", "readline", "read_text", "read_bytes", "write", "writelines"}) | (
    lt.IMAGE_LOADING_METHODS
)


def _consumed_in_statement(ctx, call) -> bool:
    """Whether the statement has read all it needs from the handle by its end.

    ``json.load(open(p))`` and ``open(p).read()`` have; ``csv.reader(open(p))`` or
    ``Image.open(open(p, "rb"))`` build an object that reads the file later, after a
    ``with`` block around the statement would have closed it.
    """
    node = call
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            grand = ctx.parent(parent)
            return isinstance(grand, cst.Call) and grand.func is parent and parent.attr.value in _EAGER_METHODS
        if not isinstance(parent, cst.Arg):
            return False
        outer = ctx.parent(parent)
        if not isinstance(outer, cst.Call):
            return False
        if ctx.call_name(outer) in _EAGER_CALLS:
            return True
        node = outer  # a wrapper that may keep the handle: safe only if something eager consumes it


def with_fix(ctx, call, fate, names):
    """The ``with`` rewrite, for an unnamed handle (it cannot be used after its statement).

    Safe when the statement consumes the handle; otherwise the object built from it
    may read the file after the block closes it, and the fix is unsafe.
    """
    if fate.kind not in (lt.CHAINED, lt.TEMPORARY) or fate.name is not None:
        return None
    if id(call) in helper_calls(ctx) or id(call) in maybe_handle_calls(ctx):
        return None  # what the helper returns need not be a context manager (or may be a cache's)
    edits = with_statement_fix(ctx, call, names)
    if edits is None:
        return None
    if _consumed_in_statement(ctx, call):
        return FixSpec("safe", "Open it in a `with` block", edits)
    return FixSpec(
        "unsafe",
        "Open it in a `with` block (unsafe: the object built from the handle may read it after the block closes it)",
        edits,
    )


def opener_text(ctx, call) -> str:
    """The opener as messages quote it: `` `open()` ``, or for a call to a function of the
    file that returns a handle, `` `load()` (which returns an open handle) ``."""
    parts = ctx.code(call.func).strip()
    helper = helper_calls(ctx).get(id(call))
    if helper is None:
        maybe = id(call) in maybe_handle_calls(ctx)
        return f"`{parts}()` (which returns a new open handle where it misses its cache)" if maybe else f"`{parts}()`"
    where = "" if helper[2] is None else " in a tuple"
    return f"`{parts}()` (which returns an open handle{where})"


# (rule cases) a project base without a torch base that a torch wrapper indexes per sample
WRAPPED_SOURCE = """
import torch
class SourceDataset:
    def __len__(self): return len(self.files)
    def __getitem__(self, i): raise NotImplementedError
    def as_torch(self): return Wrap(self)
class Wrap(torch.utils.data.Dataset):
    def __init__(self, inner): self.inner = inner
    def __getitem__(self, index): return self.inner[index]
"""
# (rule cases) a memoised opener (the cache owns its handle) and a plain one
SHARDS = "import functools\nimport h5py\n@functools.lru_cache(maxsize=8)\ndef cached_shard(p):\n    return h5py.File(p)\ndef open_shard(p):\n    return h5py.File(p)\n"
# (rule cases) an image helper of a base class; a helper that returns a cached or a new handle
IMAGE_BASE = "from PIL import Image\nclass ImageBase:\n    def load(self, path):\n        return Image.open(path)\n"
CACHED_OR_NEW = """
import functools
import xarray as xr
from torch.utils.data import Dataset
def _open(path):
    return xr.open_dataset(path)
_cached = functools.lru_cache()(_open)
def open_any(path, remote):
    if remote:
        return _cached(path)
    return _open(path)
class Cubes(Dataset):
    def __init__(self, paths):
        first = self._first(paths)  # expect: DSL104
        self.names = list(first.data_vars)
    def _first(self, paths):
        return open_any(paths[0], False)
    def __getitem__(self, i):
        return open_any(self.paths[i], True)["x"].values
"""
