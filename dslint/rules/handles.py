"""DSL1xx: file handles opened in dataset code and never closed, or kept."""

from __future__ import annotations

import libcst as cst

from dslint.edits import with_statement_fix
from dslint.report import FixSpec
from dslint.rules.base import ERROR, WARNING, Rule, Symptom
from dslint.semantics import lifetimes as lt
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree


def _opened_handles(ctx, kinds):
    """(call, kind, fate) for every opener call in dataset code."""
    tails = ctx.names.call_tails(_OPENER_TAILS)
    for call in ctx.nodes(cst.Call):
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        if tail not in tails:
            continue
        kind = lt.opener_kind(ctx, call)
        if kind not in kinds or not ctx.in_dataset_code(call):
            continue
        yield call, kind, lt.fate(ctx, call)


_OPENER_TAILS = frozenset(
    {"open", "ZipFile", "File", "GzipFile", "BZ2File", "LZMAFile", "FileIO", "fdopen", "load", "memmap"}
)


def _in_init(ctx, node) -> bool:
    func = ctx.enclosing_function(node)
    return func is not None and func.name.value == "__init__" and ctx.method_class(func) is not None


def _in_lazy_block(ctx, node) -> bool:
    func = ctx.enclosing_function(node)
    if func is None:
        return False
    chain = []
    for ancestor in ctx.ancestors(node):
        if ancestor is func:
            break
        chain.append(ancestor)
    return ctx.regions.get(func).classify(node, chain)[1] or lt.once_guarded(ctx, node)


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


def _unclosed(ctx, call, fate) -> bool:
    """The generic "never closed" fates that DSL101/DSL102 own."""
    if fate.kind == lt.TEMPORARY:
        destination = _wrapper_destination(ctx, call)
        # `self.reader = csv.reader(open(p))` in __init__: the handle is kept on self,
        # which DSL401 (and DSL302 for an iterator) report; it is not a leak to close
        if destination == "self" and _in_init(ctx, call):
            return False
        # `return StreamWrapper(open(p))`: the caller owns the wrapped handle
        if destination == "caller":
            return False
    if fate.kind in (lt.CHAINED, lt.TEMPORARY, lt.UNCLOSED):
        return True
    if fate.kind == lt.STORED_SELF:
        # kept on self in __init__ is DSL401's; the lazy per-worker pattern is fine
        return not _in_init(ctx, call) and not _in_lazy_block(ctx, call) and not _kept_on_self(ctx, call, fate.name)
    return False


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
        "builtins.list",
        "builtins.tuple",
        "builtins.set",
        "builtins.frozenset",
        "builtins.sorted",
        "builtins.dict",
        "builtins.sum",
        "builtins.len",
        "builtins.bytes",
        "builtins.bytearray",
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


def _with_fix(ctx, call, fate, names):
    """The ``with`` rewrite, for an unnamed handle (it cannot be used after its statement).

    Safe when the statement consumes the handle; otherwise the object built from it
    may read the file after the block closes it, and the fix is unsafe.
    """
    if fate.kind not in (lt.CHAINED, lt.TEMPORARY) or fate.name is not None:
        return None
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


def _opener_text(ctx, call) -> str:
    parts = ctx.code(call.func).strip()
    return f"{parts}()"


class UnclosedImageOpen(Rule):
    """
    ## What it does
    Flags `PIL.Image.open(...)` in dataset code (methods of a `Dataset` subclass and
    the functions they call per sample) whose image is not opened in a `with`
    block or closed on all paths, including the common
    `Image.open(path).convert("RGB")` chain.

    ## Why is this bad?
    `Image.open` keeps the file open until the image is loaded *and* Pillow decides
    to close it. Pillow closes single-frame files (JPEG, PNG, single-frame TIFF)
    right after `load()`, which `.convert()` triggers, so the chain does not leak
    descriptors for those. But GIF (even single-frame), APNG, MPO, PSD and
    multi-frame TIFF files stay open until the image is garbage-collected: every
    worker emits `ResourceWarning: unclosed file`, and an image that is kept alive
    keeps its descriptor. An image that is never loaded keeps its file open for as
    long as it lives.

    This rule reports at warning level: for single-frame formats the chain is
    harmless; a handle that is *kept* is reported by DSL103 instead.

    ## Example
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            return to_tensor(Image.open(self.paths[i]).convert("RGB"))
    ```

    ## Use instead
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            with Image.open(self.paths[i]) as im:
                return to_tensor(im.convert("RGB"))
    ```

    ## Fix safety
    For an image that is never named (`x = Image.open(p).convert("RGB")`,
    `return Image.open(p).copy()`), the fix wraps the statement in
    `with Image.open(p) as im:` and uses `im` in it. It is offered only when
    moving the `Image.open` call in front of its statement changes nothing else
    (no conditional, boolean operator, comprehension or earlier call on the way),
    the new name is unused in the function, and comments are kept. It is safe
    when the statement has read the pixels by its end (a loading method such as
    `.convert()`, `.copy()` or `.resize()` on the image); otherwise, e.g.
    `x = transform(Image.open(p))`, the object built from the image may read the
    file after the block closed it, and the fix is unsafe.

    ## References
    - Pillow: "File handling in Pillow" (`_exclusive_fp`, `load()` closes single-frame files)
    - pytorch/vision#539, python-pillow/Pillow#559
    """

    code = "DSL101"
    name = "unclosed-image-open"
    symptom = Symptom("resource_warnings", "multi-frame images stay open until GC: ResourceWarning in workers")
    level = WARNING
    summary = "`Image.open()` in dataset code is not closed"
    fix_availability = "sometimes"
    help = "Open the image with `with Image.open(path) as im:` and return data loaded from it"

    valid = (
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                with Image.open(self.paths[i]) as im:
                    return im.convert("RGB")
        """,
        """
        import io
        from PIL import Image as PILImage
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                with open(self.paths[i], "rb") as f:
                    return PILImage.open(f).convert("RGB")

            def decode(self, data):
                return PILImage.open(io.BytesIO(data)).convert("RGB")
        """,
        """
        from PIL import Image

        def not_dataset_code(p):
            return Image.open(p).convert("RGB")
        """,
        """
        from PIL import Image
        import torch.utils.data as tud

        class D(tud.Dataset):
            def _load(self, p):
                return Image.open(p)  # the caller owns it
        """,
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                path, label = self.items[i]
                image = Image.open(path)
                if self.mode:
                    image = image.convert(self.mode)
                return image, label  # maybe the opened image itself: the caller owns it
        """,
    )
    invalid = (
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                return Image.open(self.paths[i]).convert("RGB")  # expect: DSL101
        """,
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                image = Image.open(self.paths[i])  # expect: DSL101
                image = image.resize((64, 64))
                return image, i  # the resized copy, not the opened image
        """,
        """
        from PIL import Image as I
        import torch.utils.data as tud

        class D(tud.Dataset):
            def __getitem__(self, i):
                img = I.open(self.paths[i])  # expect: DSL101
                return self.transform(img)
        """,
        """
        import PIL.Image
        from torch.utils.data import IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                for p in self.paths:
                    yield load(p)

        def load(p):
            return PIL.Image.open(p).copy()  # expect: DSL101
        """,
    )

    def check(self, ctx):
        for call, kind, fate in _opened_handles(ctx, ("image",)):
            if not _unclosed(ctx, call, fate):
                continue
            text = _opener_text(ctx, call)
            if fate.kind == lt.CHAINED and fate.method in lt.IMAGE_LOADING_METHODS:
                message = (
                    f"`{text}` is never closed: Pillow closes single-frame files on load, but GIF, APNG, "
                    "MPO and multi-frame TIFF files stay open until garbage collection (ResourceWarning in "
                    "every worker)"
                )
            else:
                message = (
                    f"`{text}` is never closed: the file stays open until the image is garbage-collected "
                    "(ResourceWarning), and for as long as the image is kept"
                )
            yield self.report(call, message, fix=_with_fix(ctx, call, fate, ("im", "image", "pil_image")))


class UnclosedFileOpen(Rule):
    """
    ## What it does
    Flags `open()`, `io.open`, `gzip`/`bz2`/`lzma.open`, `tarfile.open`,
    `zipfile.ZipFile`, `h5py.File` and `Path(...).open()` in dataset code whose
    handle is not a `with` item and not closed on all paths, such as
    `json.load(open(path))`.

    A handle kept on `self` is not reported when the class manages it as its
    one handle: it closes it somewhere (`__del__`, `close()`) or opens it lazily
    (`if not self.f: self._open()`).

    ## Why is this bad?
    The descriptor stays open until the object is garbage-collected. CPython's
    reference counting usually frees a temporary quickly, but every such handle
    emits `ResourceWarning: unclosed file` in the workers, the timing depends on
    the interpreter and on reference cycles, and a handle that ends up referenced
    from a traceback, a cache or a sample stays open. Handles that are *kept* on
    every sample are reported by DSL103, handles created in `__init__` by DSL401.

    ## Example
    ```python
    class Records(Dataset):
        def __getitem__(self, i):
            return json.load(open(self.files[i]))
    ```

    ## Use instead
    ```python
    class Records(Dataset):
        def __getitem__(self, i):
            with open(self.files[i]) as f:
                return json.load(f)
    ```

    ## Fix safety
    For a handle that is never named (`json.load(open(p))`, `open(p).read()`),
    the fix wraps the statement in `with open(p) as f:` and passes `f`; the name
    is fresh and nothing else moves. It is safe when the statement consumes the
    file: a read method on it, or a call that reads everything before it returns
    (`json.load`, `pickle.load`, `yaml.safe_load`, `torch.load`, `np.loadtxt`,
    `pd.read_csv`, `list(...)` and the like). For anything else, such as
    `rows = csv.reader(open(p))`, the wrapped object would read the file after
    the block closed it (`ValueError: I/O operation on closed file`), so the fix
    is unsafe and applied only with `--unsafe-fixes`.
    """

    code = "DSL102"
    name = "unclosed-file-open"
    symptom = Symptom("resource_warnings", "ResourceWarning in workers; descriptor held until GC")
    level = WARNING
    summary = "A file opened in dataset code is not closed"
    fix_availability = "sometimes"
    help = "Open the file in a `with` block so it is closed on every path"

    valid = (
        """
        import csv
        from torch.utils.data import Dataset, IterableDataset

        class Lines(IterableDataset):
            def __iter__(self):
                for path in self.paths:
                    # the caller owns the wrapped handle
                    yield path, Wrapper(open(path))

        class Rows(Dataset):
            def __init__(self, path):
                # kept on self in __init__: DSL401's, not a leak to close
                self.reader = csv.reader(open(path))
        """,
        """
        import json
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                with open(self.files[i]) as f:
                    return json.load(f)
        """,
        """
        import gzip
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                f = gzip.open(self.files[i])
                try:
                    return f.read()
                finally:
                    f.close()
        """,
        """
        from contextlib import ExitStack
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                with ExitStack() as stack:
                    fs = [stack.enter_context(open(p)) for p in self.files[i]]
                    return [f.read() for f in fs]
        """,
        """
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                if self.h is None:
                    self.h = open(self.path, "rb")
                self.h.seek(i * 8)
                return self.h.read(8)
        """,
        """
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                open(self.markers[i], "a").close()  # closed at once
                return i
        """,
        """
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, path):
                self.path = path
                self.data = None

            def _open(self):
                self.data = open(self.path, "rb")

            def __del__(self):
                if self.data:
                    self.data.close()

            def __getitem__(self, i):
                if not self.data:
                    self._open()  # once per worker, through a helper
                self.data.seek(i)
                return self.data.read(1)
        """,
    )
    invalid = (
        """
        import json
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                return json.load(open(self.files[i]))  # expect: DSL102
        """,
        """
        import gzip as gz
        from torch.utils.data import dataset

        class D(dataset.Dataset):
            def __getitem__(self, i):
                f = gz.open(self.files[i])  # expect: DSL102
                return f.read()
        """,
    )

    def check(self, ctx):
        for call, kind, fate in _opened_handles(ctx, ("file",)):
            if not _unclosed(ctx, call, fate):
                continue
            where = "in every worker, for every sample" if ctx.is_per_sample(call) else "when it is collected"
            yield self.report(
                call,
                f"`{_opener_text(ctx, call)}` is never closed: the descriptor stays open until garbage "
                f"collection (ResourceWarning {where})",
                fix=_with_fix(ctx, call, fate, ("f", "fh", "handle")),
            )


class RetainedFileHandles(Rule):
    """
    ## What it does
    Flags handles from `Image.open`, `open` and the other openers of DSL102, and
    `np.load(..., mmap_mode=...)`, that dataset code keeps without loading them:
    a new handle stored in a list, dict or cache on every sample, or one handle
    per file opened in `__init__` and kept.

    The once-per-worker lazy pattern (`if self.h is None: self.h = open(...)`,
    also on a nested attribute: `if not hasattr(self.local, "f"): self.local.f
    = open(...)`), which holds one handle per worker or thread, is not reported,
    nor is an image returned to the caller (`return image, label`).

    ## Why is this bad?
    Each kept handle holds a file descriptor. Measured on torch 2.13 with two
    workers, keeping unloaded images or memory maps grew each worker by one
    descriptor per sample (14 to 114 over 100 samples) until the worker died with
    `OSError: [Errno 24] Too many open files` and the main process saw a bare
    `EOFError`. Handles opened for every file in `__init__` are inherited by every
    worker: 200 files held 213-219 descriptors in each.

    ## Example
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            img = Image.open(self.paths[i])
            self.seen.append(img)
            return img
    ```

    ## Use instead
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            with Image.open(self.paths[i]) as im:
                img = im.convert("RGB")  # loaded: no descriptor kept
            self.seen.append(img)
            return img
    ```
    """

    code = "DSL103"
    name = "retained-file-handles"
    symptom = Symptom("fd_growth", "+1 descriptor per sample in each worker, until EMFILE")
    level = ERROR
    summary = "Dataset code keeps a new open file handle per sample or per file"
    help = "Keep loaded data (`.convert()`, `.copy()`, `np.array(...)`) instead of open handles, or open files lazily per worker"

    valid = (
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                with Image.open(self.paths[i]) as im:
                    self.cache[i] = im.convert("RGB")
                return self.cache[i]
        """,
        """
        import numpy as np
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, path):
                self.data = np.load(path, mmap_mode="r")  # one shared map: fine

            def __getitem__(self, i):
                return self.data[i]
        """,
        """
        import h5py
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                path = self.files[i]
                if path not in self.handles:
                    self.handles[path] = h5py.File(path, "r")
                return self.handles[path]["x"][()]
        """,
        """
        import threading
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, path):
                self.path = path
                self.local = threading.local()

            def _file(self):
                if not hasattr(self.local, "f"):
                    self.local.f = open(self.path)  # once per thread
                return self.local.f

            def __getitem__(self, i):
                f = self._file()
                f.seek(self.offsets[i])
                return f.readline()
        """,
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                path, label = self.items[i]
                image = Image.open(path)
                if self.transform is not None:
                    image = self.transform(image)
                return image, label  # returned to the caller, not kept
        """,
    )
    invalid = (
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                img = Image.open(self.paths[i])  # expect: DSL103
                self.seen.append(img)
                return img
        """,
        """
        import numpy as np
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                self.maps[i] = np.load(self.files[i], mmap_mode="r")  # expect: DSL103
                return self.maps[i][0]
        """,
        """
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, paths):
                self.handles = [open(p, "rb") for p in paths]  # expect: DSL103

            def __getitem__(self, i):
                return self.handles[i].read()
        """,
    )

    def check(self, ctx):
        for call, kind, fate in _opened_handles(ctx, ("image", "file", "mmap")):
            if fate.kind != lt.STORED or _in_lazy_block(ctx, call):
                continue
            text = _opener_text(ctx, call)
            if _in_init(ctx, call) or not ctx.is_per_sample(call):
                message = (
                    f"`{text}` opens one handle per file and keeps them all: every worker inherits every "
                    "open descriptor, and enough files exhaust the limit (`OSError: [Errno 24] Too many "
                    "open files`)"
                )
            else:
                message = (
                    f"`{text}` keeps a new open handle on every sample: each worker gains one descriptor "
                    "per sample until `OSError: [Errno 24] Too many open files`"
                )
            yield self.report(call, message)
