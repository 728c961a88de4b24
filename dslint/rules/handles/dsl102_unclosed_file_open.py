"""DSL102: a file opened per sample, never closed, and kept or held by a library."""

from __future__ import annotations

from dslint.rules.base import WARNING, Invalid, Rule, Symptom
from dslint.rules.handles._common import KEPT, SHARDS, WRAPPED_SOURCE, opener_text, unclosed_handles, with_fix


class UnclosedFileOpen(Rule):
    """
    ## What it does
    Flags a file opened in per-sample dataset code (`__getitem__`, the yielding
    loop of `__iter__`, the functions they call) and never closed, when the
    handle outlives what reference counting closes at once. A project class
    without a torch base is a dataset when a torch dataset indexes it per sample
    (`return self.inner[index]` of the object its `__init__` is given), as
    when a `DataLoader` receives it:

    - a new handle kept on `self` on every sample (`self.f = open(p)`,
      `self.reader = csv.reader(open(p))`);
    - a PyTables file, `tables.open_file` or `pandas.HDFStore`, in any form
      (`[tables.open_file(p).root.x[:] for p in paths]`): PyTables keeps every file it
      opens in its registry until `close()`, so dropping the object releases nothing.
      A module imported by a call (`tb = importlib.import_module("tables")`, or a
      project helper that calls `importlib.import_module`) is followed.

    The openers are `open()`, `io.open`, `gzip`/`bz2`/`lzma.open`, `tarfile.open`,
    `zipfile.ZipFile`, `h5py.File`, `tifffile.TiffFile`, `soundfile.SoundFile`,
    `smart_open.open`, `av.open`, `imageio.get_reader`, `h5netcdf.File`,
    `openslide.OpenSlide`, `scipy.io.netcdf_file`, `Path(...).open()` and the
    library openers above.

    ## Why is this bad?
    A handle kept on `self` stays open between samples, one more descriptor per
    worker, and each replaced one is dropped unclosed (`ResourceWarning: unclosed
    file` on every sample). A PyTables file dropped unclosed stays open for good:
    opening, reading and dropping 300 distinct files left 300 descriptors open with
    tables 3.11 and pandas 3.1 (`bench/handle_release.py`), until the worker runs
    out. Handles kept in a container are DSL103's, handles opened in `__init__` and
    kept DSL401's.

    ## When it does not fire
    - A Python file object used and dropped in its statement or function
      (`json.load(open(p))`, `open(p).read()`, `f = gzip.open(p)` then
      `f.read()`): CPython's reference counting closes it at once; only a
      ResourceWarning remains. These forms are DSL104's (opt-in), with the same fix.
    - A library handle freed with its object (DSL104's too): `rasterio.open`, `h5py.File`, `lmdb.open`,
      `xarray.open_dataset`, `netCDF4.Dataset` (once the collector runs) left no descriptor open
      after 300 files opened, read and dropped (`bench/handle_release.py`).
    - A file read once, not per sample (`__init__`, `process()`, a script): DSL104's.
    - A handle closed on every path: a `with` item, `try`/`finally: f.close()`,
      `ExitStack.enter_context`, `open(p, "a").close()`.
    - A handle returned or wrapped for the caller (`return Wrapper(open(p))`).
      A function that returns the handle it opens (of this file, of another
      module, or a method on an object whose class the file names: `self.src =
      Source()`, or a `Source()` handed in where the file builds the dataset) is
      judged where it is called. A method on an object of unknown class (a
      parameter nothing in the file builds, two classes) is not followed.
    - A function memoised with `functools.lru_cache`/`cache` (decorated, or
      `lru_cache()(f)`): the cache owns the one handle it shares; closing it
      would break the next caller.
    - One handle the class manages: closed somewhere (`__del__`, `close()`) or
      opened lazily once per worker (`if self.f is None: self.f = open(p)`).
    - `fsspec.open`: a lazy `OpenFile` that holds nothing until it is entered.

    ## Example
    ```python
    class Tables(Dataset):
        def __getitem__(self, i):
            return pd.HDFStore(self.files[i]).get("frame")
    ```

    ## Use instead
    ```python
    class Tables(Dataset):
        def __getitem__(self, i):
            with pd.HDFStore(self.files[i]) as store:
                return store.get("frame")
    ```

    ## Fix safety
    For a handle that is never named (`tables.open_file(p).read()`, `json.load(open(p))`),
    the fix wraps the statement in `with ... as f:` and passes `f`; the name is fresh
    and nothing else moves. It is safe when the statement consumes the file: a read
    method on it, or a call that reads everything before it returns (`json.load`,
    `pickle.load`, `yaml.safe_load`, `torch.load`, `np.loadtxt`, `pd.read_csv`,
    `list(...)` and the like). For anything else, such as `csv.reader(open(p))`, the
    wrapped object would read the file after the block closed it (`ValueError: I/O
    operation on closed file`): unsafe, applied only with `--unsafe-fixes`.

    """

    code = "DSL102"
    name = "unclosed-file-open"
    symptom = Symptom("resource_warnings", "ResourceWarning in workers; descriptor held until GC")
    level = WARNING
    summary = "A file opened per sample is not closed and outlives its sample"
    help = "Open the file in a `with` block so it is closed on every path"

    valid = (
        # the wrapper reads its object by a fixed key, not by the sample index: not a dataset
        {
            "source.py": WRAPPED_SOURCE.replace("self.inner[index]", "self.inner[self.key]"),
            "rasters.py": "import rasterio\nfrom source import SourceDataset\nclass Rasters(SourceDataset):\n"
            "    def __getitem__(self, i):\n        return [rasterio.open(p).read() for p in self.files[i]]\n",
        },
        # Python file objects dropped at once, or read once: DSL104's (opt-in)
        """
        import gzip
        import json
        import xarray as xr
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, index, cube):
                self.files = json.load(open(index))
                self.attrs = xr.open_dataset(cube).attrs
            def __getitem__(self, i):
                f = gzip.open(self.blobs[i])
                return json.load(open(self.files[i])), open(self.texts[i]).read(), f.read()
        """,
        """
        import csv
        from torch.utils.data import Dataset, IterableDataset

        class Lines(IterableDataset):
            def __iter__(self):
                for path in self.paths:
                    yield path, Wrapper(open(path))  # the caller owns the wrapped handle

        class Rows(Dataset):
            def __init__(self, path):
                self.reader = csv.reader(open(path))  # kept on self in __init__: DSL401's
        """,
        """
        import gzip
        from contextlib import ExitStack
        import fsspec
        import pandas as pd
        import rasterio
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                f = gzip.open(self.files[i])
                try:
                    head = f.read()
                finally:
                    f.close()
                with ExitStack() as stack:
                    fs = [stack.enter_context(open(p)) for p in self.parts[i]]
                    parts = [g.read() for g in fs]
                with rasterio.open(self.rasters[i]) as src, pd.HDFStore(self.stores[i]) as store:
                    image = src.read() + store["a"]
                with fsspec.open(self.urls[i]) as g:
                    raw = g.read()
                open(self.markers[i], "a").close()  # closed at once
                return head, parts, image, raw
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
        # another module's function or method that returns a handle: closed by its caller, or
        # called on an object whose class the file does not tell (a parameter nothing here builds)
        {
            "texts.py": """
                def open_text(path):
                    return open(path)
                class Source:
                    def open(self, path):
                        return open(path)
                """,
            "lines.py": """
                from torch.utils.data import Dataset
                from texts import open_text
                class Lines(Dataset):
                    def __init__(self, paths, source):
                        self.paths, self.source = paths, source
                    def __getitem__(self, i):
                        with open_text(self.paths[i]) as f:
                            first = f.readline()
                        self.f = self.source.open(self.paths[i])
                        return first, self.f.readline()
                """,
        },
    )
    invalid = (
        # a function of another module returns a new handle; its memoised twin the cache's shared one
        {
            "shards.py": SHARDS,
            "d.py": "from torch.utils.data import Dataset\nfrom shards import cached_shard, open_shard\nclass D(Dataset):\n"
            "    def __getitem__(self, i):\n        self.f = cached_shard(self.paths[i])\n"
            "        self.g = open_shard(self.paths[i])  # expect: DSL102\n        return self.f, self.g\n",
        },
        # a project base without a torch base that a torch wrapper indexes per sample (``Wrap(self)``)
        {
            "source.py": WRAPPED_SOURCE,
            "rasters.py": "import tables\nfrom source import SourceDataset\nclass Rasters(SourceDataset):\n"
            "    def __getitem__(self, i):\n        return [tables.open_file(p).root.x[:] for p in self.files[i]]  # expect: DSL102\n",
        },
        # a function of another module that returns the handle it opens, kept on self per sample
        {
            "texts.py": """
                def open_text(path):
                    return open(path)
                """,
            "lines.py": """
                from torch.utils.data import Dataset
                from texts import open_text
                class Lines(Dataset):
                    def __getitem__(self, i):
                        self.f = open_text(self.paths[i])  # expect: DSL102
                        return self.f.readline()
                """,
        },
        # PyTables openers, one through a lazy import; library handles freed with their object are DSL104's
        {
            "lazy.py": """
                import importlib
                def lazy_import(name):
                    return importlib.import_module(name)
            """,
            "geo.py": """
                import pandas as pd
                import rasterio
                import xarray as xr
                from torch.utils.data import Dataset
                from lazy import lazy_import
                class Patches(Dataset):
                    def __getitem__(self, i):
                        tb = lazy_import("tables")
                        table = tb.open_file(self.tables[i])  # expect: DSL102
                        steps = [pd.HDFStore(p).get("frame") for p in self.series[i]]  # expect: DSL102
                        nc = xr.open_dataset(self.files[i])  # freed with its object: DSL104's
                        return nc.band.values, steps, table.root.x[:], rasterio.open(self.grids[i]).read()
            """,
        },
        Invalid(
            """
            import tables
            from torch.utils.data import Dataset
            class D(Dataset):
                def __getitem__(self, i):
                    return tables.open_file(self.files[i]).read()  # expect: DSL102
            """,
            expected_replacement="""
            import tables
            from torch.utils.data import Dataset
            class D(Dataset):
                def __getitem__(self, i):
                    with tables.open_file(self.files[i]) as f:
                        return f.read()  # expect: DSL102
            """,
        ),
        # a new handle kept on self on every sample
        """
        import csv
        import gzip as gz
        from torch.utils.data import dataset

        class D(dataset.Dataset):
            def __getitem__(self, i):
                self.f = gz.open(self.files[i])  # expect: DSL102
                self.rows = csv.reader(open(self.tables[i]))  # expect: DSL102
                return self.f.read(), next(self.rows)
        """,
    )

    def check(self, ctx):
        for call, _, fate, why in unclosed_handles(ctx, ("file",)):
            if why is None:
                continue
            text = opener_text(ctx, call)
            if why == KEPT:
                message = (
                    f"{text} keeps a new unclosed handle on `self` on every sample: the descriptor stays open "
                    "until the next sample replaces it (a ResourceWarning each time)"
                )
            else:
                message = (
                    f"{text} is never closed on a per-sample path: PyTables keeps the file in its registry of open "
                    "files until `close()`, not when the object is dropped, so open handles pile up in every worker"
                )
            fix = None if why == KEPT else with_fix(ctx, call, fate, ("f", "fh", "handle"))
            yield self.report(call, message, fix=fix)
