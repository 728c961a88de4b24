"""DSL104 (opt-in): an unclosed handle whose only cost is a ResourceWarning."""

from __future__ import annotations

from dslint.rules.base import WARNING, Invalid, Rule, Symptom
from dslint.rules.handles._common import CACHED_OR_NEW, IMAGE_BASE, memory_source, opener_text, released_how, unclosed_handles, with_fix
from dslint.semantics.lifetimes import kept_through_view


class UnclosedHandleResourceWarning(Rule):
    """
    ## What it does
    Flags the handles opened in dataset code and never closed that DSL101 and DSL102 leave out because nothing stays
    open for long:

    - `Image.open(p).convert("RGB")`, an image loaded on a later statement, or handed to a transform or `np.array`,
      in code that shows no multi-frame format: Pillow loads and closes single-frame files;
    - a Python file object used and dropped per sample (`json.load(open(p))`, `open(p).read()`, `f = gzip.open(p)`
      then `f.read()`, `csv.reader(open(p))`), or a library handle freed with its object (`rasterio.open(p).read()`,
      `h5py.File`, `lmdb.open`, `xarray.open_dataset`, `netCDF4.Dataset`);
    - any handle opened once, not per sample: `json.load(open(p))` or `open(p).readlines()` in `__init__`,
      `h5py.File(p)` in `process()`, an `Image.open` in a setup method or in a helper of any file that `__init__`
      calls for every image while it builds the dataset, a helper whose paths return a new handle or an `lru_cache`d
      one (only where it runs once).

    Dataset code includes a project class without a torch base whose `__getitem__`/`__len__` serve an instance a
    `DataLoader` or `Subset` takes, or a torch dataset indexes per sample (`self.inner[index]`), the other
    subclasses of that class, and a function a package binds by a star import in one branch of an `if`/`try` (each
    branch's is followed).

    This is an opt-in rule: it runs only with `--preview` (or `preview = true`).

    ## Why is this bad?
    Mostly it is not, and that is the trade-off. CPython's reference counting closes a file object as soon as the
    last reference goes (the end of the statement or function), and Pillow closes a JPEG/PNG file when it loads the
    pixels. What remains is `ResourceWarning: unclosed file` (under `-X dev`, `-W default` or pytest), a descriptor
    held a little longer, and a dependence on CPython: PyPy and code that keeps a traceback or a reference cycle
    hold the file until the garbage collector runs. ruff keeps its "open without a context manager" rule (SIM115)
    out of its default set for the same reason. Enable this rule for code that must run warning-free (`-W
    error::ResourceWarning`).

    ## When it does not fire
    - The forms with a runtime consequence: DSL101 (an image never loaded, kept on `self`, or of a multi-frame
      format), DSL102 (a handle kept on `self`, a PyTables file per sample) and DSL103 (handles kept in a
      container).
    - Handles closed on every path, returned to the caller, kept on `self` in `__init__` (DSL401) or managed once
      per worker, as for DSL102.
    - A library handle that lives on in a view the code keeps or returns: `self.txn = lmdb.open(p).begin()`,
      `self.rows = h5py.File(p)["rows"]` (DSL401 reports these when `__init__` keeps them and samples read them).
    - A reader over an in-memory buffer or a file object the code closes (`av.open(f)` in `with open(p) as f`,
      `Image.open` of a `self` list's `BytesIO`): no descriptor.

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
    The `with` rewrite of DSL101 and DSL102, with the same conditions: safe when the statement consumes the handle
    (`json.load(f)`, `f.read()`, `im.convert()`), unsafe when the object built from it may read it later
    (`csv.reader(f)`, `transform(im)`).
    """

    code = "DSL104"
    name = "unclosed-handle-resource-warning"
    symptom = Symptom("resource_warnings", "ResourceWarning: unclosed file in the workers; the descriptor is released on drop")
    level = WARNING
    preview = True
    summary = "A handle in dataset code is not closed; reference counting or Pillow's load closes it (ResourceWarning only)"
    help = "Open it in a `with` block to close it explicitly"

    valid = (
        """
        import json
        import tables
        from PIL import Image
        from torch.utils.data import Dataset
        class D(Dataset):
            def __init__(self, index):
                with open(index) as f:
                    self.files = json.load(f)
            def __getitem__(self, i):
                with Image.open(self.paths[i]) as im:
                    image = im.convert("RGB")
                with open(self.files[i]) as f:
                    record = json.load(f)
                self.current = open(self.files[i])  # kept on self per sample: DSL102's
                return image, record, tables.open_file(self.tables[i]).read()  # a PyTables file: DSL102's
        """,
        # a base class of another file opens and returns the image; a subclass overrides it
        {
            "base.py": IMAGE_BASE,
            "faces.py": """
                import numpy as np
                from torch.utils.data import Dataset
                from base import ImageBase
                class Faces(Dataset, ImageBase):
                    def load(self, path):
                        return np.load(path)
                    def __getitem__(self, i):
                        return self.load(self.paths[i]).copy()  # the override runs: an array
                """,
        },
        # a container no DataLoader receives; a later star import outside a branch replaces the first reader
        {
            "imgio/__init__.py": "from .slow import *\nfrom .fast import *\n",
            "imgio/slow.py": "from PIL import Image\ndef read(p):\n    return Image.open(p).convert('RGB')\n",
            "imgio/fast.py": "def read(p):\n    return decode(p)\n",
            "pages.py": """
                from PIL import Image
                from torch.utils.data import DataLoader, Dataset
                from imgio import read
                def thumb(p):
                    return Image.open(p).convert("L")
                class Table:
                    def __init__(self, paths): self.rows = [thumb(p) for p in paths]
                    def __len__(self): return len(self.rows)
                    def __getitem__(self, i): return self.rows[i]
                class Pages(Dataset):
                    def __getitem__(self, i): return read(self.paths[i])
                loader, rows = DataLoader(Pages(), num_workers=4), Table(paths)
                """,
        },
    )
    invalid = (
        # a reader picked by a star import in each branch; a dataset base without a torch base, shown by a
        # DataLoader over a subclass; a helper the __init__ of a sibling calls while it builds the dataset
        {
            "imgio/__init__.py": "if fast():\n    from .fast import *\nelse:\n    from .slow import *\n",
            "imgio/fast.py": "def read(p):\n    return decode(p)\n",
            "imgio/slow.py": "from PIL import Image\ndef read(p):\n    im = Image.open(p)  # expect: DSL104\n    return im.convert('RGB')\n",
            "pages.py": """
                from PIL import Image
                from torch.utils.data import DataLoader
                from imgio import read
                def crops(p):
                    page = Image.open(p)  # expect: DSL104
                    return cut(page.convert("L"))
                class Base:
                    def __len__(self): return len(self.items)
                    def __getitem__(self, i): return read(self.items[i])
                class Lines(Base):
                    pass
                class Pages(Base):
                    def __init__(self, paths): self.items = [c for p in paths for c in crops(p)]
                loader = DataLoader(Lines() if lines else None, num_workers=4)
                """,
        },
        # inherited from a base class of another file: the image it returns is loaded and dropped
        {
            "base.py": IMAGE_BASE,
            "faces.py": """
                from torch.utils.data import Dataset
                from base import ImageBase
                class Faces(Dataset, ImageBase):
                    def __getitem__(self, i):
                        return self.load(self.paths[i]).convert("RGB")  # expect: DSL104
                """,
        },
        Invalid(
            """
            import json
            from PIL import Image
            from torch.utils.data import Dataset
            class D(Dataset):
                def __getitem__(self, i):
                    image = Image.open(self.paths[i]).convert("RGB")  # expect: DSL104
                    return image, json.load(open(self.metas[i]))  # expect: DSL104
            """,
            expected_replacement="""
            import json
            from PIL import Image
            from torch.utils.data import Dataset
            class D(Dataset):
                def __getitem__(self, i):
                    with Image.open(self.paths[i]) as im:
                        image = im.convert("RGB")  # expect: DSL104
                    with open(self.metas[i]) as f:
                        return image, json.load(f)  # expect: DSL104
            """,
        ),
        # images loaded later or handed to a transform, a video container (not those read from memory)
        """
        import av, io, six
        from PIL import Image as I
        import torch.utils.data as tud
        class D(tud.Dataset):
            def __init__(self, paths):
                self.jpegs = [six.BytesIO(open(p, "rb").read()) for p in paths]  # expect: DSL104
            def __getitem__(self, i):
                image = I.open(self.paths[i])  # expect: DSL104
                image = image.resize((64, 64))
                img = I.open(self.masks[i])  # expect: DSL104
                buf = six.BytesIO()
                buf.write(self.blobs[i])
                clip = av.open(self.videos[i])  # expect: DSL104
                thumb, jpeg, mem = I.open(buf), I.open(self.jpegs[i]), av.open(io.BytesIO(self.raw[i]))  # no descriptor
                return image, self.transform(img), thumb.size, jpeg.size, clip.streams, mem.streams
        """,
        # handles opened once, not per sample
        Invalid(
            """
            import h5py
            import json
            import xarray as xr
            from PIL import Image
            from torch.utils.data import Dataset
            class D(Dataset):
                def __init__(self, index, tsv, cube, palette):
                    self.files = json.load(open(index))  # expect: DSL104
                    self.lines = open(tsv, "r").readlines()  # expect: DSL104
                    self.attrs = xr.open_dataset(cube).attrs  # expect: DSL104
                    self.palette = Image.open(palette).getpalette()  # expect: DSL104
                def process(self):
                    for name in self.raw:
                        h5 = h5py.File(name)  # expect: DSL104
                        self.rows.append(h5["data"][:])
            """,
            expected_replacement="""
            import h5py
            import json
            import xarray as xr
            from PIL import Image
            from torch.utils.data import Dataset
            class D(Dataset):
                def __init__(self, index, tsv, cube, palette):
                    with open(index) as f:
                        self.files = json.load(f)  # expect: DSL104
                    with open(tsv, "r") as f:
                        self.lines = f.readlines()  # expect: DSL104
                    with xr.open_dataset(cube) as f:
                        self.attrs = f.attrs  # expect: DSL104
                    with Image.open(palette) as im:
                        self.palette = im.getpalette()  # expect: DSL104
                def process(self):
                    for name in self.raw:
                        h5 = h5py.File(name)  # expect: DSL104
                        self.rows.append(h5["data"][:])
            """,
        ),
        # Python file objects dropped per sample (the csv.reader fix is unsafe: it reads later)
        Invalid(
            """
            import csv
            import gzip as gz
            from torch.utils.data import Dataset
            class D(Dataset):
                def __getitem__(self, i):
                    f = gz.open(self.files[i])  # expect: DSL104
                    reader = csv.reader(open(self.tables[i]))  # expect: DSL104
                    return f.read(), [r for r in reader], open(self.texts[i]).read()  # expect: DSL104
            """,
            expected_replacement="""
            import csv
            import gzip as gz
            from torch.utils.data import Dataset
            class D(Dataset):
                def __getitem__(self, i):
                    f = gz.open(self.files[i])  # expect: DSL104
                    with open(self.tables[i]) as fh:
                        reader = csv.reader(fh)  # expect: DSL104
                    return f.read(), [r for r in reader], open(self.texts[i]).read()  # expect: DSL104
            """,
        ),
        # a helper that returns a new handle where it misses its cache, in setup code (silent per sample)
        CACHED_OR_NEW,
        # a per-example function of a `datasets` object, through a helper
        """
        from datasets import load_dataset
        from PIL import Image
        from torch.utils.data import DataLoader
        def read(path):
            image = Image.open(path)  # expect: DSL104
            return to_array(image.convert("RGB"))
        def decode(batch):
            batch["image"] = [read(p) for p in batch["path"]]
            return batch
        train = load_dataset("csv", data_files="x.csv")["train"]
        train.set_transform(decode)
        loader = DataLoader(train, batch_size=8, num_workers=4)
        """,
    )
    def check(self, ctx):
        for call, kind, fate, why in unclosed_handles(ctx, ("image", "file")):
            if why is None and not (kind == "image" and memory_source(ctx, call)) and not kept_through_view(ctx, call, fate):
                names = ("im", "image", "pil_image") if kind == "image" else ("f", "fh", "handle")
                message = f"{opener_text(ctx, call)} is never closed, but {released_how(ctx, call, kind)}"
                yield self.report(call, message, fix=with_fix(ctx, call, fate, names))
