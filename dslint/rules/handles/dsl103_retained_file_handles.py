"""DSL103: dataset code keeps a new open handle per sample or per file."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.handles._common import in_init, in_lazy_block, in_local_container, keyed_by_sample_index, multi_frame_code, opened_handles, opener_text  # noqa: E501
from dslint.semantics import lifetimes as lt
from dslint.semantics.containers import stays_bounded

PER_FILE = (" opens one handle per file and keeps them all: every worker inherits every open descriptor, "
            "and enough files exhaust the limit (`OSError: [Errno 24] Too many open files`)")
PER_SAMPLE = " keeps a new open handle on every sample: each worker gains one descriptor per sample until `OSError: [Errno 24] Too many open files`"


class RetainedFileHandles(Rule):
    """
    ## What it does
    Flags handles from `Image.open`, `open` and the other openers of DSL102,
    `np.load(..., mmap_mode=...)`, `np.memmap` and `np.load` of an `.npz` archive
    (an `NpzFile` keeps its zip open; the path ends in `.npz`, or the class reads
    the loaded results it keeps by field name: `d["mask"]`), or from a function that returns the
    handle it opens (alone or in a tuple: `data, meta = self._open(path)`; also a
    function of another module, or a method called on an object whose class the
    file names: `self.reader.read(p)` where `__init__` builds the reader or is
    handed one by the code of the file that builds the dataset), that dataset
    code keeps without loading them:
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

    ## When it does not fire
    - Loaded data is kept, not the handle: `im.convert()` inside a `with` block, `np.load(p)["x"]` of an `.npz`.
    - One shared handle or memory map opened in `__init__` (`self.data = np.load(path, mmap_mode="r")`).
    - A cache filled behind a "not opened yet" guard (`if path not in self.handles:`, `if self.h is None:`, `if self.files[shard] is None:`,
      `if not hasattr(self.local, "f"):`, or an entry that holds its path until opened: `f = self.files[k]`, `if
      isinstance(f, Path): f = h5py.File(f); self.files[k] = f`), also a module's cache (`if p not in _zips:`, or a search of the list that
      returns what it finds, then `_zips.append(...)`): at most one handle per file or per worker. A cache keyed by the sample index (`self.cache[idx]` in
      `__getitem__(self, idx)`), or by the entry of a per-sample table
      (`path = self.paths[idx]` where `__len__` returns `len(self.paths)`), is
      reported even behind such a guard: one handle for every sample seen.
    - A handle returned to the caller (`return image, label`); an image the same code also loads
      (`self.cache[i] = im` then `im.convert("RGB")` or `transform(im)`): Pillow closed its file.
      Handles that do not grow with the data: a slot refilled after its old handle is closed (`self.f[b].close()`,
      then `self.f[b] = h5py.File(p)`), one per pass of `range(cfg["slots"])` (a count no `len()` gives).
    - A handle added to a container local to the sample's code (`views.append(Image.open(p))` in
      `__getitem__`, or a dict or list built for the sample: `sample = {"rgb": Image.open(p)}`,
      `[Image.open(p) for p in context]` added to it): the container ends with the sample. Added to a
      list on `self`, a module list or a list the caller passed in, it is kept. An unclosed handle
      that is not kept: DSL101, DSL102 or DSL104.

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
        import os
        import numpy as np
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, root, names):
                self.arrays = [np.load(os.path.join(root, f"{n}.npz"))["x"] for n in names]  # loaded
            def __getitem__(self, i):
                with Image.open(self.paths[i]) as im:
                    self.cache[i] = im.convert("RGB")
                preview = Image.open(self.paths[i]).convert("L")  # not kept: DSL104's
                left, right = open(self.lefts[i]), open(self.rights[i])  # unpacked into names: no container
                return self.cache[i], self.arrays[i], preview, left.read(), right.read()
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
        # a helper that returns an open handle: kept only where its caller keeps it
        """
        import numpy as np
        from torch.utils.data import Dataset

        def open_map(path):
            return np.memmap(path, dtype="uint8", mode="r")

        class D(Dataset):
            def __init__(self, files):
                self.sizes = [len(open_map(f)) for f in files]  # measured and dropped
                self.index = open_map(files[0])  # one shared map
            def _read(self, path):
                data = np.memmap(path, dtype="uint8", mode="r")
                return data, data.shape
            def __getitem__(self, i):
                data, shape = self._read(self.files[i])
                return np.array(data[:4]), shape
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
        # a guarded cache keyed by the sample index: one handle per sample seen
        """
        import h5py
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, idx):
                if idx not in self.cache:
                    self.cache[idx] = h5py.File(self.fs.open(self.files[idx]), "r")  # expect: DSL103 (keeps its file object)
                return self.cache[idx]["x"][()]
        class E(Dataset):  # one path per sample (its length); a shard is shared by rows
            def __len__(self): return len(self.files)
            def __getitem__(self, idx):
                path = self.files[idx]
                if path not in self.cache:
                    self.cache[path] = h5py.File(path, "r")  # expect: DSL103
                shard, row = self.rows[idx]
                if shard not in self.shards:
                    self.shards[shard] = h5py.File(shard, "r")
                return self.cache[path]["x"][()], self.shards[shard]["x"][row]
        """,
        """
        import os
        import numpy as np
        from torch.utils.data import Dataset

        class Shards(Dataset):
            def __init__(self, root, names):
                self.archives = [np.load(os.path.join(root, f"{n}.npz")) for n in names]  # expect: DSL103
                self.arrays = [np.load(os.path.join(root, f"{n}.npz"))["x"] for n in names]  # loaded: fine
            def __getitem__(self, i):
                return self.archives[i]["x"], self.arrays[i]
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

    invalid += (
        # a helper of the file returns the handle it opens (alone or in a tuple): its caller keeps it
        """
        import numpy as np
        from torch.utils.data import Dataset

        class Chunks(Dataset):
            def __init__(self, files):
                self.maps = []
                for f in files:
                    self._add(f)
            def _open(self, path):
                data = np.memmap(path, dtype="uint8", mode="r")
                return data, {"size": data.shape}
            def _add(self, path):
                data, meta = self._open(path)  # expect: DSL103
                self.maps.append(data)
            def __getitem__(self, i):
                return self.maps[i][:4]
        """,
        # the same through a method of another file's class, on a reader the building code hands in
        {
            "reader.py": """
                import numpy as np
                class Reader:
                    def read(self, path):
                        data = np.memmap(path, dtype="uint8", mode="r")
                        return data, {"size": data.shape}
                """,
            "chunks.py": """
                from torch.utils.data import Dataset
                from reader import Reader
                class Store:
                    def __init__(self):
                        self.reader = Reader()
                    def dataset(self, files):
                        return Chunks(self.reader, files)
                class Chunks(Dataset):
                    def __init__(self, reader, files):
                        self.reader = reader
                        self.maps = []
                        for f in files:
                            data, meta = self.reader.read(f)  # expect: DSL103
                            self.maps.append(data)
                    def __getitem__(self, i):
                        return self.maps[i][:4]
                """,
        },
    )

    def check(self, ctx):
        for call, kind, fate in opened_handles(ctx, ("image", "file", "mmap", lt.NPZ)):
            keyed = keyed_by_sample_index(ctx, fate)
            if fate.kind != lt.STORED or (in_lazy_block(ctx, call) and not keyed) or in_local_container(ctx, call, fate) \
                    or stays_bounded(ctx, call, fate.site):
                continue
            if kind == "image" and lt.image_loaded_by_name(ctx, fate) and not multi_frame_code(ctx, call):
                continue  # this code also loads the kept image: Pillow has closed its file
            setup = in_init(ctx, call) or not (ctx.is_per_sample(call) or keyed)
            yield self.report(call, opener_text(ctx, call) + (PER_FILE if setup else PER_SAMPLE))
