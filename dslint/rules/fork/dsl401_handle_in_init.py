"""DSL401 handle-in-init: a handle opened in a dataset's ``__init__`` and shared by forked workers."""

from __future__ import annotations

import re

from dslint.rules.base import ERROR, WARNING, Rule, Symptom
from dslint.rules.fork._common import (call_text, construction_calls, handle_message, handles_in_init, held_object, passed_handles,
                                       inherited_uses, write_only)
from dslint.semantics.handle_kinds import HANDLE_DERIVATIONS
from dslint.semantics.held_state import PICKLING_HOOKS
from dslint.semantics.instance_state import consumed_by_iter, handle_kind
from dslint.semantics.pre_fork import decides_pickling, holder_kind, length_handles
from dslint.semantics.regions import self_name


def _kept_unread(ctx, silenced):
    """(call, kind, attribute): a handle that does not pickle, opened in construction code and kept on ``self``
    (not closed there), that no per-sample code uses, in a class that leaves pickling to pickle."""
    for cls, init, func, selfp, call in construction_calls(ctx):
        kind = handle_kind(ctx, call)
        if kind in (None, "file", "image", "session", "db"):
            continue  # (a Pillow image and an HTTP session pickle; database clients vary; DSL104 judges a plain file)
        held, construction = held_object(ctx, cls, init, func, selfp, call, *HANDLE_DERIVATIONS.get(kind, ((), False)))
        unread = held and inherited_uses(ctx, cls, func, selfp, held, ("close",), silenced, construction, unread=True)
        qual = f"{ctx.names.modname}.{ctx.qualname_of_def(cls)}"  # (``method_facts`` takes the qualified name)
        if unread and not any(ctx.view.method_facts(qual, hook) is not None for hook in PICKLING_HOOKS):
            yield call, kind, unread[0]


class HandleInInit(Rule):
    """
    ## What it does
    Flags a file, archive (`gzip`, `bz2`, `lzma`, `tarfile`, `zipfile`, `np.load` of an `.npz`: its name, or reads by
    field name, `.files`, `.keys()`; `mmap_mode` does not apply to archives), `h5py.File`, `lmdb.open`, `sqlite3.connect`,
    `PIL.Image.open`, socket, database client or HTTP session handle, or a library handle that cannot be pickled
    (`openslide.OpenSlide`, `tifffile.TiffFile`, `soundfile.SoundFile`, `rasterio.open`, `netCDF4.Dataset`,
    `h5netcdf.File`, `tables.open_file`, `pd.HDFStore`), that a dataset's `__init__` creates and keeps on
    `self` (directly, through `f["key"]`, `env.begin()`, `conn.cursor()`, or in a container: `self.files.append(f)`,
    `self.files[k] = f`, `self.index.append((f[name]["x"], i))` for `f` in a local list of files, `self.txns = [envs[i].begin() for i in ...]`), when per-sample code (`__getitem__`, the yielding loop of `__iter__`, and what they call) uses
    it. Methods `__init__` calls on `self` (at any depth, none called per sample) run before the fork too, and so does
    `__len__` (samplers and `len(loader)` call it in the parent): a lazy opener that `__len__`, or a method `__init__`
    calls (also a hook an inherited `__init__` calls), runs opens the handle before the workers exist. An object of a
    class of the file whose `__init__` keeps a handle (`self.reader = Reader(path)`) holds it too, and so does the result of a project function (any module) that returns a handle it opened (`self.f = open_h5(p)`; `self.env, self.keys = scan(root)`), and a handle a construction in the project opens and hands over (`env = lmdb.open(p)` in the script, `Frames(env)`, `self.txn = env.begin()`). A class whose object a dataset builds, keeps and indexes with the sample index (`self.rows = Rows(path)`, `return self.rows[index]`) is a dataset itself: its own `__init__` is judged.

    ## When it does not fire
    - The lazy pattern: `self.db = None` in `__init__`, opened on first use in each worker.
    - A lazy opener's handle in a class with its own pickling (`__getstate__`) in a project that starts processes
      with spawn/forkserver only: workers get a pickled copy, never the parent's handle.
    - Handles the project re-creates per worker (reassigned in another method or a `worker_init_fn`, or a dataset that
      checks `get_worker_info()`/`os.getpid()`); `__setstate__` counts only with spawn/forkserver (forked workers never unpickle).
    - Read-only `np.load(mmap_mode=...)` maps of `.npy` arrays (a shared read-only mapping is safe) and
      `xr.open_dataset` (it pickles).
    - Handles that `__iter__` consumes by iteration (DSL302 reports those), and classes whose every DataLoader has
      `num_workers=0`.

    ## Preview
    With `--preview`, also an archive, HDF5, LMDB, SQLite, socket or library handle (none of them pickles) that
    `__init__` keeps on `self` and no per-sample code uses (`self.data = np.load(p)`, read whole
    in `__init__`), unless it is closed there or the class decides its own pickling (`__getstate__`): forked
    workers never read it, but a spawned worker cannot receive the dataset.

    ## Why is this bad?
    DataLoader workers are forked from the process that built the dataset, so they all inherit the *same* open file
    description: one worker's `seek()` moves the offset another worker is about to `read()` from. Measured on torch
    2.13 with 2 workers reading fixed-size records with `seek`+`read`: 54 wrong records in 60,000 buffered reads,
    silently. Archives and image decoders fail louder (`zipfile.BadZipFile: Bad CRC-32`, `OSError: image file is
    truncated`), h5py gives `KeyError: 'Unable to open object (bad object header version number)'`, LMDB forbids using
    an environment across `fork()`, and SQLite connections must not cross `fork()` either (`sqlite3.DatabaseError:
    database disk image is malformed`). Under the spawn or forkserver start methods (macOS, Windows, and Linux from
    Python 3.14) the dataset cannot even be sent to the workers: `TypeError: cannot pickle '_io.BufferedReader'
    object`. `bench/handle_fork.py` measured the library handles (4 forked workers, 8,000 reads, three runs): reads
    through a shared `tifffile`, `soundfile` or `rasterio` handle came back with other records' data (up to 205, 3,289
    and 10 wrong) and none of them pickles (OpenSlide: `ValueError: ctypes objects containing pointers cannot be
    pickled`; netCDF4: `NotImplementedError: Dataset is not picklable`). xarray's datasets pickle and read right. An `NpzFile`
    kept from `np.load(p, mmap_mode="r")` (4 forked workers, 6,000 reads): 226 reads failed with `zipfile.BadZipFile:
    Bad CRC-32`, and it does not pickle (`TypeError: cannot pickle '_io.BufferedReader' object`).

    ## Example
    ```python
    class Records(Dataset):
        def __init__(self, path):
            self.f = open(path, "rb")

        def __getitem__(self, i):
            self.f.seek(i * RECORD)
            return self.f.read(RECORD)
    ```

    ## Use instead
    ```python
    class Records(Dataset):
        def __init__(self, path):
            self.path = path
            self.f = None  # opened lazily, once in each worker

        def __getitem__(self, i):
            if self.f is None:
                self.f = open(self.path, "rb")
            self.f.seek(i * RECORD)
            return self.f.read(RECORD)
    ```

    ## References
    - pytorch/pytorch#11887, #11929 (h5py), pytorch/vision#689 (lmdb); the SQLite FAQ on connections across fork()
    - LMDB documentation: "Do not use an environment in a process that forked after opening it"
    """

    code = "DSL401"
    name = "handle-in-init"
    symptom = Symptom("integrity", "shared file offset across forked workers: wrong records; spawn: cannot pickle")
    level = ERROR
    summary = "A file, database or network handle opened in a dataset's `__init__` is shared by forked workers"
    help = "Store the path in `__init__` (`self.f = None`) and open the handle lazily on first use in `__getitem__`, so that every worker opens its own"  # noqa: E501

    valid = (
        """
        from torch.utils.data import DataLoader, Dataset, IterableDataset
        class Lazy(Dataset):
            def __init__(self, path):
                self.path = path
                self.f = None
            def __getitem__(self, i):
                if self.f is None:
                    self.f = open(self.path, "rb")
                self.f.seek(i * 8)
                return self.f.read(8)
        class Lines(IterableDataset):
            def __init__(self, path):
                self.lines = open(path)  # consumed by iteration: DSL302 reports it
            def __iter__(self):
                for line in self.lines:
                    yield line.strip()
        class Single(Dataset):
            def __init__(self, path):
                self.g = open(path, "rb")
            def __getitem__(self, i):
                self.g.seek(i * 8)
                return self.g.read(8)
        loader = DataLoader(Single("x.bin"), batch_size=4, num_workers=0)
        """,
        """
        import h5py
        import os
        import sqlite3
        from torch.utils.data import Dataset
        class Meta(Dataset):
            def __init__(self, path):
                self.path = path
                with h5py.File(path, "r") as f:  # closed before the fork
                    self.n = len(f["x"])
                self.h5 = h5py.File(path, "r")
                self.length = len(self.h5["x"])
                self.h5.close()
                self.h5 = None
            def __getitem__(self, i):
                if self.h5 is None:
                    self.h5 = h5py.File(self.path, "r")
                return self.h5["x"][i]
        class PerProcess(Dataset):
            def __init__(self, path):
                self.path = path
                self.conn = sqlite3.connect(path)
                self.pid = os.getpid()
            def __getitem__(self, i):
                if self.pid != os.getpid():
                    self._reconnect()
                return self.conn.execute("select v from t where k=?", (i,)).fetchone()
            def _reconnect(self):
                self.conn = sqlite3.connect(self.path)
                self.pid = os.getpid()
        """,
    )
    invalid = (
        """
        import h5py as h
        import torch.utils.data as tud
        class Frames(tud.Dataset):
            def __init__(self, path):
                self.images = h.File(path, "r")["images"]  # expect: DSL401
            def __len__(self):
                return len(self.images)
            def __getitem__(self, i):
                return self._load(i)
            def _load(self, i):
                return self.images[i]
        """,
        """
        import h5py
        import lmdb
        from lmdb import open as lmdb_open
        from torch.utils.data import Dataset
        class Env(Dataset):
            def __init__(self, path):
                env = lmdb_open(path, readonly=True, lock=False)  # expect: DSL401
                self.txn = env.begin()
            def __getitem__(self, i):
                return self.txn.get(str(i).encode())
        class Cells(Dataset):
            def __init__(self, paths):
                self.data = []
                any(self._add(p) for p in paths)
            def _add(self, path):
                f = h5py.File(path, "r")  # expect: DSL401
                self.data.append(f.get("cells"))
            def __getitem__(self, i):
                return self.data[0][i]
        class Reader:
            def __init__(self, path):
                self.env = lmdb.open(path, readonly=True)
            def get(self, key):
                with self.env.begin() as txn:
                    return txn.get(key)
        class Records(Dataset):
            def __init__(self, path):
                self.reader = Reader(path)  # expect: DSL401
                self.path = path
                self.clips = None
            def _open(self):
                self.clips = h5py.File(self.path, "r")["clips"]  # expect: DSL401
            def __len__(self):  # run in the parent by samplers and len(loader)
                if self.clips is None:
                    self._open()
                return len(self.clips)
            def __getitem__(self, i):
                if self.clips is None:
                    self._open()
                return self.clips[i], self.reader.get(str(i).encode())
        """,
        {
            "base.py": """
                from torch.utils.data import Dataset
                class Base(Dataset):
                    def __getitem__(self, i):
                        return self.read(i)
                """,
            "zipped.py": """
                import zipfile
                from base import Base
                class Zipped(Base):
                    def __init__(self, path):
                        self.zf = zipfile.ZipFile(path)  # expect: DSL401
                        self.names = self.zf.namelist()
                    def read(self, i): return self.zf.read(self.names[i])
                """,
        },
        """
        import gzip
        from torch.utils.data import DataLoader, Dataset
        RECORD = 16
        class Records(Dataset):
            def __init__(self, path):
                self.fh = open(path, "rb")  # expect: DSL401
            def __getitem__(self, i):
                self.fh.seek(i * RECORD)
                return self.fh.read(RECORD)
        class Packed(Dataset):
            def __init__(self, path):
                self.f = gzip.open(path)  # expect: DSL401
            def __getitem__(self, i):
                self.f.seek(i * 4)
                return self.f.read(4)
        def seed_worker(worker_id):
            import numpy as np, torch
            np.random.seed(torch.initial_seed() % 2**32)
        loader = DataLoader(Packed("a.gz"), num_workers=2, worker_init_fn=seed_worker)
        """,
    )

    def check(self, ctx):
        for call, kind, attr in handles_in_init(ctx):
            message = handle_message(ctx, kind, call, attr)
            if decides_pickling(ctx, call):  # (its ``__setstate__`` reopens for spawned workers only)
                message = re.sub(r"; under spawn/forkserver .*$", "; the class's own pickling (`__getstate__`) serves only spawn/forkserver workers: forked ones never unpickle it", message)
            yield self.report(call, message, level=WARNING if kind == "sqlite" else None)
        for node, kind, attr, origin in passed_handles(ctx):  # opened by the caller: `Frames(lmdb.open(p))`
            yield self.report(node, handle_message(ctx, kind, node, attr, origin), level=WARNING if kind == "sqlite" else None)
        silenced, unread = (lambda attr, uses: consumed_by_iter(ctx, uses)), (lambda call: write_only(ctx, call))
        for cls, init, func, selfp, call in construction_calls(ctx):
            kind = holder_kind(ctx, call, unread)  # self.reader = Reader(path): Reader's construction keeps a handle
            held, construction = held_object(ctx, cls, init, func, selfp, call) if kind else (None, ())
            used = held and inherited_uses(ctx, cls, func, selfp, held, ("close",), silenced, construction)
            if used:
                where = f"(whose constructor opens a {kind} handle and keeps it) in `__init__`"
                yield self.report(call, handle_message(ctx, kind, call, used[0]).replace("in `__init__`", where, 1))
        for call, kind, attr in _kept_unread(ctx, silenced) if self.preview_forms else ():
            error = re.search(r"cannot be pickled \(`([^`]+)`\)", handle_message(ctx, kind, call, attr))
            yield self.report(call, f"`{call_text(ctx, call)}` in `__init__` is kept on `self.{attr}`, which no per-sample code uses: forked "
                              "workers never read it, but under spawn/forkserver (the default on macOS and Windows, and on Linux from "
                              f"Python 3.14) the dataset cannot be pickled to the workers (`{error.group(1) if error else 'TypeError'}`); "
                              "close it once `__init__` has read what it needs, or keep only the data")
        for cls, func, call, kind, held, runner, before in length_handles(ctx, unread):  # run before the fork
            used = inherited_uses(ctx, cls, func, self_name(func), held, ("close",), silenced, before)
            if used:
                where = f"in `{func.name.value}`, run by `{runner}` in the parent before the workers start,"
                yield self.report(call, handle_message(ctx, kind, call, used[0]).replace("in `__init__`", where, 1))
