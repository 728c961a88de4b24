"""DSL102: a file opened in dataset code and never closed."""

from __future__ import annotations

from dslint.rules.base import WARNING, Invalid, Rule, Symptom
from dslint.rules.handles._common import opened_handles, opener_text, unclosed, with_fix
from dslint.semantics import lifetimes as lt


class UnclosedFileOpen(Rule):
    """
    ## What it does
    Flags `open()`, `io.open`, `gzip`/`bz2`/`lzma.open`, `tarfile.open`,
    `zipfile.ZipFile`, `h5py.File`, `netCDF4.Dataset`, `rasterio.open`,
    `xarray.open_dataset`/`open_dataarray`/`open_mfdataset`, `smart_open.open`,
    `lmdb.open`, `tifffile.TiffFile`, `soundfile.SoundFile` and
    `Path(...).open()` in dataset code whose handle is not a `with` item and not
    closed on all paths, such as `json.load(open(path))` or
    `[rasterio.open(p).read() for p in paths]`. A module imported by a call
    (`xr = importlib.import_module("xarray")`, or a project helper that calls
    `importlib.import_module`) is followed. `fsspec.open` is not an opener: it
    returns a lazy `OpenFile` that holds nothing until it is entered.

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
        # library openers closed by `with`, a lazy fsspec OpenFile, a temporary NpzFile (closed when dropped)
        """
        import fsspec
        import numpy as np
        import rasterio
        import xarray as xr
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                with rasterio.open(self.files[i]) as src:
                    image = src.read()
                with xr.open_dataset(self.cubes[i]) as cube:
                    mask = cube.mask.values
                lazy = fsspec.open(self.urls[i])
                with lazy as f:
                    raw = f.read()
                return image, mask, raw, np.load(f"{self.names[i]}.npz")["x"]
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
        # library openers: a raster per time step, a NetCDF patch through a lazy import, an npz archive
        {
            "lazy.py": """
                import importlib

                def lazy_import(name):
                    return importlib.import_module(name)
            """,
            "geo.py": """
                import rasterio
                from torch.utils.data import Dataset
                from lazy import lazy_import

                class Patches(Dataset):
                    def __getitem__(self, i):
                        xr = lazy_import("xarray")
                        nc = xr.open_dataset(self.files[i])  # expect: DSL102
                        steps = [rasterio.open(p).read() for p in self.series[i]]  # expect: DSL102
                        return nc.band.values, steps
            """,
        },
        Invalid(
            """
            import json
            from torch.utils.data import Dataset

            class D(Dataset):
                def __getitem__(self, i):
                    return json.load(open(self.files[i]))  # expect: DSL102
            """,
            expected_replacement="""
            import json
            from torch.utils.data import Dataset

            class D(Dataset):
                def __getitem__(self, i):
                    with open(self.files[i]) as f:
                        return json.load(f)  # expect: DSL102
            """,
        ),
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
        for call, kind, fate in opened_handles(ctx, ("file",)):
            if not unclosed(ctx, call, fate):
                continue
            where = "in every worker, for every sample" if ctx.is_per_sample(call) else "when it is collected"
            if lt.opener_name(ctx, call) in lt.LIBRARY_OPENERS:
                what = f"the file stays open until the handle is garbage-collected ({where.replace('when', 'until')})"
            else:
                what = f"the descriptor stays open until garbage collection (ResourceWarning {where})"
            yield self.report(
                call,
                f"`{opener_text(ctx, call)}` is never closed: {what}",
                fix=with_fix(ctx, call, fate, ("f", "fh", "handle")),
            )
