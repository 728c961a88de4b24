"""DSL401-403 and DSL601 on patterns taken from real projects (beyond the embedded cases).

Each case is checked through the engine exactly like the embedded valid/invalid
cases: an ``# expect: CODE`` marker on every line that must be reported, none in
the silent cases.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from tests.conftest import check_tree, expected_markers, write_files
from tests.test_rule_cases import run_case

_SETSTATE = """
        import h5py
        from torch.utils.data import Dataset

        class Picklable(Dataset):
            def __init__(self, path):
                self.path = path
                self.f = h5py.File(path, "r")  # expect: DSL401

            def __getstate__(self):
                state = dict(self.__dict__)
                state["f"] = None
                return state

            def __setstate__(self, state):
                self.__dict__.update(state)
                self.f = h5py.File(self.path, "r")

            def __getitem__(self, i):
                return self.f["x"][i]
        """

FLAGGED = {
    # the class reopens its file in ``__setstate__``, which forked workers (the default start) never run
    "setstate-reopens-only-when-spawned": ("DSL401", _SETSTATE),
    # mmdet's seeding (vedadet#45, mmdetection#8110): worker id plus values the partial bound when the
    # loader was built, so every epoch's recreated workers replay the same streams
    "mmdet-style-seed": (
        "DSL403",
        """
        import random
        from functools import partial
        import numpy as np
        import torch
        from torch.utils.data import DataLoader

        def worker_init_fn(worker_id, num_workers, rank, seed):
            worker_seed = num_workers * rank + worker_id + seed
            np.random.seed(worker_seed)  # expect: DSL403
            random.seed(worker_seed)
            torch.manual_seed(worker_seed)

        def build(ds, rank, seed):
            init_fn = partial(worker_init_fn, num_workers=2, rank=rank, seed=seed)
            return DataLoader(ds, num_workers=2, worker_init_fn=init_fn)
        """,
    ),
    # an `.npz` archive kept open: told by its members read by name or its `keys()` (the path says
    # nothing), also with `mmap_mode`, which archives ignore; measured in bench/handle_fork.py
    "npz-archive-read-by-member": (
        "DSL401",
        {
            "clips.py": """
                import numpy as np
                from torch.utils.data import DataLoader, Dataset

                class Clips(Dataset):
                    def __init__(self, path):
                        self.archive = np.load(path, mmap_mode="r")  # expect: DSL401
                        self.count = len(self.archive.keys())

                    def __len__(self):
                        return self.count

                    def __getitem__(self, i):
                        return self.archive["arr_" + str(i)]

                loader = DataLoader(Clips("clips.npz"), num_workers=4)
            """,
        },
    ),
    # handles that project functions of another module open and return: whole, or in a tuple
    # through a second function that binds it to None first (only the handle's element is kept)
    "handle-returned-by-helpers": (
        "DSL401",
        {
            "store/io.py": """
                import h5py
                import lmdb

                def open_h5(path):
                    return h5py.File(path, "r")

                def _env_and_keys(root):
                    env = lmdb.open(root, readonly=True, lock=False)
                    with env.begin() as txn:
                        keys = list(txn.cursor().iternext(values=False))
                    return env, keys

                def listing(kind, root):
                    env, keys = None, None
                    if kind == "lmdb":
                        env, keys = _env_and_keys(root)
                    return env, keys
            """,
            "store/__init__.py": "",
            "frames.py": """
                from torch.utils.data import Dataset
                from store import io
                from store.io import open_h5

                class Frames(Dataset):
                    def __init__(self, path, root):
                        self.f = open_h5(path)  # expect: DSL401
                        self.env, self.keys = io.listing("lmdb", root)  # expect: DSL401
                        self.closed = open_h5(path)
                        self.closed.close()

                    def __getitem__(self, i):
                        with self.env.begin() as txn:
                            raw = txn.get(self.keys[i])
                        return self.f["x"][i], raw, self.closed
            """,
        },
    ),
    # a local list of environments whose transactions, taken by index, a comprehension keeps on self
    "lmdb-list-entries": (
        "DSL401",
        """
        import lmdb
        from torch.utils.data import Dataset

        class Shards(Dataset):
            def __init__(self, paths):
                envs = [lmdb.open(p, readonly=True, lock=False) for p in paths]  # expect: DSL401
                self.txns = [envs[i].begin() for i in range(len(paths))]
                self.sizes = [envs[i].stat()["entries"] for i in range(len(paths))]

            def __getitem__(self, idx):
                return self.txns[0].get(str(idx).encode())
        """,
    ),
    "h5py-get": (
        "DSL401",
        """
        import h5py
        import torch
        import torch.utils.data as data

        class FromHdf5(data.Dataset):
            def __init__(self, file_path):
                super().__init__()
                hf = h5py.File(file_path)  # expect: DSL401
                self.input = hf.get("input")
                self.label = hf.get("label")

            def __getitem__(self, index):
                return torch.from_numpy(self.input[index]), torch.from_numpy(self.label[index])

            def __len__(self):
                return self.input.shape[0]
        """,
    ),
    "h5py-closed-in-del": (
        "DSL401",
        """
        import h5py
        import numpy as np
        import torch

        class Frames(torch.utils.data.Dataset):
            def __init__(self, h5_file, key="data"):
                super().__init__()
                self.h5f = h5py.File(h5_file, "r")  # expect: DSL401
                self.ds = self.h5f[key]

            def __len__(self):
                return self.ds.shape[0]

            def __getitem__(self, index):
                return self.ds[index].astype(np.float32), 0

            def __del__(self):
                self.h5f.close()
        """,
    ),
    "lmdb-crnn": (
        "DSL401",
        """
        import sys
        import lmdb
        from torch.utils.data import Dataset

        class lmdbDataset(Dataset):
            def __init__(self, root=None, transform=None):
                self.env = lmdb.open(  # expect: DSL401
                    root, max_readers=1, readonly=True, lock=False, readahead=False, meminit=False)
                if not self.env:
                    sys.exit(0)
                with self.env.begin(write=False) as txn:
                    self.nSamples = int(txn.get("num-samples".encode()))

            def __len__(self):
                return self.nSamples

            def __getitem__(self, index):
                with self.env.begin(write=False) as txn:
                    return txn.get(("image-%09d" % index).encode())
        """,
    ),
    "tar-members": (
        "DSL401",
        """
        import tarfile
        from torch.utils.data import Dataset

        class TarImages(Dataset):
            def __init__(self, path):
                self.tar = tarfile.open(path)  # expect: DSL401
                self.members = [m for m in self.tar.getmembers() if m.isfile()]

            def __len__(self):
                return len(self.members)

            def __getitem__(self, i):
                return self.tar.extractfile(self.members[i]).read()
        """,
    ),
    # library handles that cannot be pickled (bench/handle_fork.py): a whole-slide reader kept from
    # __init__, one held by a reader class of the file, and a sound file the script opens and hands over
    "library-handles": (
        "DSL401",
        """
        import openslide
        import soundfile
        import tifffile
        from torch.utils.data import DataLoader, Dataset

        class PageReader:
            def __init__(self, path):
                self.tif = tifffile.TiffFile(path)

            def page(self, i):
                return self.tif.pages[i].asarray()

        class Tiles(Dataset):
            def __init__(self, path, coords):
                self.slide = openslide.OpenSlide(path)  # expect: DSL401
                self.coords = coords

            def __len__(self):
                return len(self.coords)

            def __getitem__(self, i):
                return self.slide.read_region(self.coords[i], 0, (224, 224))

        class Pages(Dataset):
            def __init__(self, path, n):
                self.reader = PageReader(path)  # expect: DSL401
                self.n = n

            def __len__(self):
                return self.n

            def __getitem__(self, i):
                return self.reader.page(i)

        class Clips(Dataset):
            def __init__(self, sound, n):
                self.sound = sound  # expect: DSL401
                self.n = n

            def __len__(self):
                return self.n

            def __getitem__(self, i):
                self.sound.seek(i * 1600)
                return self.sound.read(1600)

        clips = Clips(soundfile.SoundFile("a.wav"), 10)
        loaders = [DataLoader(d, num_workers=4) for d in (Tiles("s.svs", []), Pages("p.tif", 3), clips)]
        """,
    ),
    "helper-in-other-file": (
        "DSL402",
        {
            "aug.py": """
                import random

                def jitter(rng, x):
                    return x + rng.random()
                """,
            "ds.py": """
                from torch.utils.data import Dataset
                from aug import jitter
                import random

                class Jittered(Dataset):
                    def __init__(self, xs):
                        self.xs = xs
                        self.rng = random.Random()  # expect: DSL402

                    def __getitem__(self, i):
                        return jitter(self.rng, self.xs[i])
                """,
        },
    ),
    "seed-helper-same-file": (
        "DSL403",
        """
        import random
        import numpy as np
        import torch
        from torch.utils.data import DataLoader

        def set_seed(seed):
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)

        def worker_init(worker_id):
            set_seed(1000 + worker_id)  # expect: DSL403

        loader = DataLoader(ds, num_workers=4, worker_init_fn=worker_init)
        """,
    ),
    "seed-helper-chosen-under-a-test": (
        "DSL403",
        """
        import random
        import numpy as np
        from torch.utils.data import DataLoader

        def debugging_init(worker_id):
            random.seed(0)  # expect: DSL403
            np.random.seed(worker_id)

        def get_loader(ds, workers, debug, worker_init_fn=None):
            if debug:
                worker_init_fn = debugging_init  # (the parameter stands for it on this path)
            return DataLoader(ds, num_workers=workers, worker_init_fn=worker_init_fn)
        """,
    ),
    "seed-staticmethod": (
        "DSL403",
        """
        import numpy as np
        from torch.utils.data import DataLoader, Dataset

        class Data(Dataset):
            @staticmethod
            def worker_init_fn(worker_id):
                np.random.seed(worker_id)  # expect: DSL403

        loader = DataLoader(Data(), num_workers=2, worker_init_fn=Data.worker_init_fn)
        """,
    ),
    "script-with-a-loader": (
        "DSL601",
        """
        import csv
        from torch.utils.data import DataLoader, Dataset

        class Segments(Dataset):
            def __init__(self, path):
                with open(path) as f:
                    self.rows = [tuple(row) for row in csv.reader(f)]  # expect: DSL601

            def __getitem__(self, index):
                return self.rows[index]

        if __name__ == "__main__":
            ds = Segments("segments.csv")
            for batch in DataLoader(ds, num_workers=8):
                print(batch)
        """,
    ),
    "index-from-json": (
        "DSL601",
        """
        import json
        from torch.utils.data import Dataset

        class Coco(Dataset):
            def __init__(self, ann_file):
                with open(ann_file) as f:
                    data = json.load(f)
                self.images = [(im["file_name"], im["id"]) for im in data["images"]]  # expect: DSL601

            def __len__(self):
                return len(self.images)

            def __getitem__(self, index):
                name, image_id = self.images[index]
                return name, image_id
        """,
    ),
}

SILENT = {
    # a memory-mapped `.npy` array indexed by position: a shared read-only map, not an archive
    "npy-map-by-position": (
        "DSL401",
        """
        import numpy as np
        from torch.utils.data import DataLoader, Dataset

        class Rows(Dataset):
            def __init__(self, path):
                self.rows = np.load(path, mmap_mode="r")

            def __len__(self):
                return len(self.rows)

            def __getitem__(self, i):
                return self.rows[i]

        loader = DataLoader(Rows("rows.npy"), num_workers=4)
        """,
    ),
    # xarray's datasets pickle (their file manager reopens the file) and forked reads came back right
    # (bench/handle_fork.py): not a handle DSL401 reports
    "xarray-dataset": (
        "DSL401",
        """
        import xarray as xr
        from torch.utils.data import DataLoader, Dataset

        class Fields(Dataset):
            def __init__(self, path):
                self.ds = xr.open_dataset(path)

            def __len__(self):
                return self.ds.sizes["time"]

            def __getitem__(self, i):
                return self.ds["t2m"][i].values

        loader = DataLoader(Fields("era5.nc"), num_workers=4)
        """,
    ),
    # the only DataLoader (no workers) is over the dataset a name holds in its branch
    # (``bindings.block_assignment``), while the other branch binds the name to something else
    "lmdb-loader-in-one-branch": (
        "DSL401",
        """
        import pickle
        import lmdb
        from torch.utils.data import DataLoader, Dataset

        class Records(Dataset):
            def __init__(self, root):
                self.env = lmdb.open(root, readonly=True, lock=False)

            def __getitem__(self, i):
                with self.env.begin() as txn:
                    return txn.get(str(i).encode())

        def get_loader(root):
            if root.endswith("pkl"):
                with open(root, "rb") as f:
                    dataset = pickle.load(f)
                loader = DataLoader(dataset, batch_size=8, num_workers=0)
            else:
                dataset = Records(root)
                loader = DataLoader(dataset, batch_size=8, num_workers=0)
            return loader
        """,
    ),
    "h5py-loaded-then-closed": (
        "DSL401",
        """
        import h5py
        from torch.utils.data import Dataset

        class Loaded(Dataset):
            def __init__(self, path):
                hf = h5py.File(path, "r")
                self.x = hf["x"][:]
                self.y = hf["y"][()]
                hf.close()

            def __getitem__(self, i):
                return self.x[i], self.y[i]
        """,
    ),
    "h5py-read-into-memory": (
        "DSL401",
        """
        import h5py
        from torch.utils.data import Dataset

        class Loaded(Dataset):
            def __init__(self, path):
                self.x = h5py.File(path, "r")["x"][()]

            def __getitem__(self, i):
                return self.x[i]
        """,
    ),
    "h5py-lazy-helper": (
        "DSL401",
        """
        from h5py import File
        import torch

        class H5Dataset(torch.utils.data.Dataset):
            def __init__(self, path):
                self.path = path
                self.inputs = None

            def _load(self):
                if self.inputs is None:
                    dataset = File(self.path, "r")
                    self.inputs = dataset["inputs"]

            def __getitem__(self, index):
                self._load()
                return self.inputs[index]
        """,
    ),
    "write-only-log": (
        "DSL401",
        """
        from torch.utils.data import Dataset

        class Logged(Dataset):
            def __init__(self, items, log_path):
                self.items = items
                self.log = open(log_path, "a")

            def __getitem__(self, i):
                self.log.write(f"{i}\\n")
                return self.items[i]
        """,
    ),
    "read-whole-file": (
        "DSL401",
        """
        from torch.utils.data import Dataset

        class Lines(Dataset):
            def __init__(self, path):
                self.lines = open(path).read().splitlines()

            def __getitem__(self, i):
                return self.lines[i]
        """,
    ),
    "not-a-dataset": (
        "DSL401",
        """
        class Reader:
            def __init__(self, path):
                self.f = open(path, "rb")

            def __getitem__(self, i):
                self.f.seek(i)
                return self.f.read(1)
        """,
    ),
    "sqlite-memory": (
        "DSL401",
        """
        import sqlite3
        from torch.utils.data import Dataset

        class Memory(Dataset):
            def __init__(self, rows):
                self.db = sqlite3.connect(":memory:")
                self.db.executemany("insert into t values (?)", rows)

            def __getitem__(self, i):
                return self.db.execute("select v from t where rowid=?", (i,)).fetchone()
        """,
    ),
    "setstate-reopens": (  # in a project that starts its workers with spawn only (forked ones never unpickle)
        "DSL401",
        _SETSTATE.replace("  # expect: DSL401", "").replace("        from torch.utils.data import Dataset\n", """        from torch.utils.data import Dataset
        import torch.multiprocessing as mp

        if __name__ == "__main__":
            mp.set_start_method("spawn")
""", 1),
    ),
    "unrelated-class-reassigns-same-name": (
        "DSL402",
        """
        import numpy as np
        from torch.utils.data import Dataset

        class Other:
            def __init__(self):
                self.rng = None

            def reset(self):
                self.rng = np.random.default_rng(1)

        class Noisy(Dataset):
            def __getitem__(self, i):
                return i
        """,
    ),
    "rng-per-epoch-in-iter": (
        "DSL402",
        """
        import random
        from torch.utils.data import IterableDataset

        class Shuffled(IterableDataset):
            def __init__(self, items, seed=0):
                self.items = items
                self.rng = random.Random(seed)

            def __iter__(self):
                order = list(self.items)
                self.rng.shuffle(order)  # once per epoch, before the loop
                for item in order:
                    yield item
        """,
    ),
    "detectron2-style-seed": (
        "DSL403",
        {
            "env.py": """
                import random
                import numpy as np
                import torch

                def seed_all_rng(seed=None):
                    np.random.seed(seed)
                    torch.manual_seed(seed)
                    random.seed(seed)
                """,
            "build.py": """
                import torch
                from torch.utils.data import DataLoader
                from env import seed_all_rng

                def worker_init_reset_seed(worker_id):
                    initial_seed = torch.initial_seed() % 2**31
                    seed_all_rng(initial_seed + worker_id)

                loader = DataLoader(ds, num_workers=4, worker_init_fn=worker_init_reset_seed)
                """,
        },
    ),
    "small-literal-list": (
        "DSL601",
        """
        from torch.utils.data import Dataset

        class Tiny(Dataset):
            def __init__(self, n):
                self.names = ["a", "b", "c"]
                self.n = n

            def __getitem__(self, i):
                return self.names[i % 3]
        """,
    ),
    "counter-index": (
        "DSL601",
        """
        from torch.utils.data import IterableDataset

        class Stream(IterableDataset):
            def __init__(self, path):
                with open(path) as f:
                    self.lines = f.read().splitlines()
                self.pos = 0

            def __iter__(self):
                return self

            def __next__(self):
                line = self.lines[self.pos]
                self.pos += 1
                return line
        """,
    ),
    "script-iterates-directly": (
        "DSL601",
        """
        import csv
        from torch.utils.data import Dataset

        class Segments(Dataset):
            def __init__(self, path):
                with open(path) as f:
                    self.rows = [tuple(row) for row in csv.reader(f)]

            def __getitem__(self, index):
                return self.rows[index]

            def __len__(self):
                return len(self.rows)

        if __name__ == "__main__":
            for row in Segments("segments.csv"):  # one process, no DataLoader
                print(row)
        """,
    ),
    "spawn-loader": (
        "DSL601",
        """
        from pathlib import Path
        from torch.utils.data import DataLoader, Dataset

        class Tokens(Dataset):
            def __init__(self, path):
                self.lines = Path(path).read_text().splitlines()

            def __getitem__(self, index):
                return self.lines[index]

        loader = DataLoader(Tokens("t.txt"), num_workers=2, multiprocessing_context="spawn")
        """,
    ),
}


def _check(tmp_path, code, case):
    write_files(tmp_path, case)
    outcome = check_tree(tmp_path, select=[code])
    assert not outcome.result.internal_errors
    got = {(d.path.replace("\\", "/"), d.row, d.code) for d in outcome.diagnostics if d.code == code}
    return got, {m for m in expected_markers(tmp_path) if m[2] == code}


@pytest.mark.parametrize("name", sorted(FLAGGED))
def test_flagged(tmp_path, name):
    code, case = FLAGGED[name]
    got, expected = _check(tmp_path, code, case)
    assert expected and got == expected


@pytest.mark.parametrize("name", sorted(SILENT))
def test_silent(tmp_path, name):
    code, case = SILENT[name]
    got, _ = _check(tmp_path, code, case)
    assert got == set()


def test_messages_name_the_consequence(tmp_path):
    code, case = FLAGGED["lmdb-crnn"]
    write_files(tmp_path, case)
    outcome = check_tree(tmp_path, select=[code])
    [diagnostic] = [d for d in outcome.diagnostics if d.code == code]
    assert "can't pickle Environment objects" in diagnostic.message
    assert "MDB_BAD_RSLOT" not in diagnostic.message  # lock=False: no reader lock table


def test_library_handle_messages_give_the_measured_consequence(tmp_path):
    code, case = FLAGGED["library-handles"]
    write_files(tmp_path, case)
    outcome = check_tree(tmp_path, select=[code])
    messages = {d.start[0]: d.message for d in outcome.diagnostics if d.code == code}
    slide, pages, sound = (messages[line] for line in sorted(messages))
    assert "ctypes objects containing pointers cannot be pickled" in slide and "other records' data" not in slide
    assert "cannot pickle '_io.BufferedReader' object" in pages and "other records' data" in pages
    assert "cannot pickle '_cffi_backend.__CDataOwn' object" in sound


def test_every_library_handle_is_measured_by_the_bench_script():
    # the messages quote bench/handle_fork.py's measurement: each opener of the table has a writer there
    import importlib.util
    from pathlib import Path

    from dslint.semantics.handle_kinds import LIBRARY_FORK_WRONG, LIBRARY_HANDLES, LIBRARY_PICKLE_ERRORS

    script = Path(__file__).resolve().parent.parent / "bench" / "handle_fork.py"
    spec = importlib.util.spec_from_file_location("handle_fork", script)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert set(LIBRARY_HANDLES) <= set(bench.LIBRARIES)
    assert set(LIBRARY_HANDLES.values()) == set(LIBRARY_PICKLE_ERRORS) >= set(LIBRARY_FORK_WRONG)


def test_sqlite_is_a_warning(tmp_path):
    [case] = [c for code, kind, c in MORE_CASES if code == "DSL401" and kind == "invalid" and "sqlite3.connect" in c]
    write_files(tmp_path, case)
    outcome = check_tree(tmp_path, select=["DSL401"])
    [diagnostic] = [d for d in outcome.diagnostics if d.code == "DSL401"]
    assert diagnostic.level == "warning" and "database disk image is malformed" in diagnostic.message


# --------------------------------------------------------------------------- more cases

# Cases of this family's rules that do not fit in the rule modules (300 lines each);
# they run exactly like the embedded ones (tests/test_rule_cases.py).
MORE_CASES = [
    # handles re-opened in each worker (a worker_init_fn), a lazily opening reader object, a
    # length read through a closed file (moved from the rule module)
    ("DSL401", "valid", """
        import h5py
        import lmdb
        from torch.utils.data import DataLoader, Dataset, get_worker_info
        class Env(Dataset):
            def __init__(self, path):
                self.path = path
                self.env = lmdb.open(path, readonly=True, lock=False)
            def __getitem__(self, i):
                with self.env.begin() as txn:
                    return txn.get(str(i).encode())
        def reopen(worker_id):
            ds = get_worker_info().dataset
            ds.env = lmdb.open(ds.path, readonly=True, lock=False)
        loader = DataLoader(Env("db"), num_workers=4, worker_init_fn=reopen)
        class Cells(Dataset):
            def __init__(self, paths):
                self.paths = paths
                self.open_all()  # re-run in each worker by the worker_init_fn
            def open_all(self):
                self.data = []
                for p in self.paths:
                    self.data.append(h5py.File(p, "r")["cells"])
            def __getitem__(self, i):
                return self.data[0][i]
        def reopen_all(worker_id):
            get_worker_info().dataset.open_all()
        class Reader:
            def __init__(self, path):
                self.path, self.db = path, None
            def get(self, key):
                if self.db is None:  # opened on first use, in each worker
                    self.db = lmdb.open(self.path, readonly=True)
                with self.db.begin() as txn:
                    return txn.get(key)
        class Records(Dataset):
            def __init__(self, path):
                self.reader = Reader(path)
                self.path, self.h5 = path, None
            def __len__(self):
                with h5py.File(self.path, "r") as f:  # closed before the fork
                    return len(f["x"])
            def __getitem__(self, i):
                if self.h5 is None:
                    self.h5 = h5py.File(self.path, "r")
                return self.h5["x"][i], self.reader.get(str(i).encode())
        """),
    # DSL401: the script opens the handle and hands it to the dataset, which keeps it (or what it derives) for
    # __getitem__: opened before the fork, as if __init__ had opened it
    ('DSL401', 'invalid', {
        "frames.py": """
            from torch.utils.data import Dataset

            class Frames(Dataset):
                def __init__(self, env, names):
                    self.txn = env.begin(write=False)  # expect: DSL401
                    self.names = names

                def __len__(self):
                    return len(self.names)

                def __getitem__(self, i):
                    return self.txn.get(self.names[i].encode())

            class Records(Dataset):
                def __init__(self, f, n):
                    self.f = f  # expect: DSL401
                    self.n = n

                def __getitem__(self, i):
                    self.f.seek(i * 64)
                    return self.f.read(64)
            """,
        "train.py": """
            import lmdb
            from torch.utils.data import DataLoader
            from frames import Frames, Records

            env = lmdb.open("frames.lmdb", readonly=True)
            frames = DataLoader(Frames(env, ["a"]), batch_size=4, num_workers=4)

            def records(path):
                return DataLoader(Records(open(path, "rb"), 100), num_workers=2)
            """,
    }),
    # DSL401: a path handed over (each worker opens its own), or a handle the dataset reopens per worker
    ('DSL401', 'valid', {
        "frames.py": """
            import lmdb
            from torch.utils.data import Dataset, get_worker_info

            class Frames(Dataset):
                def __init__(self, root, names):
                    self.root, self.names, self.txn = root, names, None

                def __getitem__(self, i):
                    if self.txn is None:
                        self.txn = lmdb.open(self.root, readonly=True).begin()
                    return self.txn.get(self.names[i].encode())

            class Shards(Dataset):
                def __init__(self, env):
                    self.env = env

                def __getitem__(self, i):
                    if get_worker_info() is not None:
                        self.env = lmdb.open(self.env.path(), readonly=True)
                    with self.env.begin() as txn:
                        return txn.get(str(i).encode())
            """,
        "train.py": """
            import lmdb
            from torch.utils.data import DataLoader
            from frames import Frames, Shards

            frames = DataLoader(Frames("frames.lmdb", ["a"]), num_workers=4)
            shards = DataLoader(Shards(lmdb.open("shards.lmdb")), num_workers=4)
            """,
        "shadow.py": """
            import lmdb
            from torch.utils.data import DataLoader, Dataset

            class Keys(Dataset):
                def __init__(self, env):
                    self.env = env

                def __getitem__(self, i):
                    return self.env[i]

            env = lmdb.open("keys.lmdb")  # a module name; the function's parameter of that spelling is the caller's

            def build(env):
                return DataLoader(Keys(env), num_workers=4)

            keys = build(["a", "b"])
            """,
    }),
    # DSL403: a seed read from a global the parent set (an option): the same in every worker
    ('DSL403', 'invalid', """
        import argparse
        import random
        import numpy as np
        from torch.utils.data import DataLoader

        parser = argparse.ArgumentParser()
        parser.add_argument("--seed", type=int, default=7)
        opt = parser.parse_args()

        def init(worker_id):
            np.random.seed(opt.seed)  # expect: DSL403
            random.seed(opt.seed)

        loader = DataLoader(ds, num_workers=4, worker_init_fn=init)
        """),
    # DSL403: a global seed that may be None draws fresh entropy in each worker
    ('DSL403', 'valid', """
        import argparse
        import numpy as np
        from torch.utils.data import DataLoader

        parser = argparse.ArgumentParser()
        parser.add_argument("--seed", type=int, default=None)
        opt = parser.parse_args()

        def init(worker_id):
            np.random.seed(opt.seed)

        loader = DataLoader(ds, num_workers=4, worker_init_fn=init)
        """),
    # DSL401: a lazy opener that __init__ runs (through a helper) opens the handle in the parent
    ('DSL401', 'invalid', """
        import h5py
        from torch.utils.data import Dataset

        class Episodes(Dataset):
            def __init__(self, path, merge=None):
                self.path = path
                self.h5 = None
                if merge:
                    self.merge(merge)

            def _open(self):
                if self.h5 is None:
                    self.h5 = h5py.File(self.path, "r")  # expect: DSL401

            def merge(self, keys):
                self._open()
                self.extra = [self.h5[k][:] for k in keys]

            def __getitem__(self, i):
                self._open()
                return self.h5["x"][i]
        """),
    ('DSL401', 'valid', {  # the project spawns its workers, and the class pickles without the handle
        "train.py": "import torch.multiprocessing as mp\nmp.set_start_method('spawn')\n",
        "data.py": """
            import zipfile
            from torch.utils.data import Dataset

            class Archive(Dataset):
                def __init__(self, path):
                    self.path, self._zip = path, None
                    self.names = self._get_zip().namelist()

                def _get_zip(self):
                    if self._zip is None:
                        self._zip = zipfile.ZipFile(self.path)
                    return self._zip

                def __getstate__(self):
                    return dict(self.__dict__, _zip=None)

                def __getitem__(self, i):
                    return self._get_zip().read(self.names[i])
            """}),
    ('DSL401', 'valid', """
        import h5py
        from torch.utils.data import Dataset

        class Episodes(Dataset):
            def __init__(self, path):
                self.path = path
                self.h5 = None
                self.count = self.length()
                self.h5.close()
                self.h5 = None  # reopened lazily in each worker

            def _open(self):
                if self.h5 is None:
                    self.h5 = h5py.File(self.path, "r")

            def length(self):
                self._open()
                return len(self.h5["x"])

            def __getitem__(self, i):
                self._open()
                return self.h5["x"][i]
        """),
    # a dataset of an evaluation split keeps its seeded generator: the same draws keep evaluation reproducible
    ('DSL402', 'valid', """
        import numpy as np
        from torch.utils.data import Dataset

        class ValidationCrops(Dataset):
            def __init__(self, items, seed):
                self.items = items
                self.random = np.random.RandomState(seed)

            def __getitem__(self, i):
                return self.items[i][self.random.randint(4):]
        """),
    ('DSL402', 'invalid', """
        import numpy as np
        from torch.utils.data import Dataset

        class TrainingCrops(Dataset):
            def __init__(self, items, seed):
                self.items = items
                self.random = np.random.RandomState(seed)  # expect: DSL402

            def __getitem__(self, i):
                return self.items[i][self.random.randint(4):]
        """),
    ('DSL401', 'valid', """
        import numpy as np
        from torch.utils.data import Dataset

        class Mapped(Dataset):
            def __init__(self, path):
                self.data = np.load(path, mmap_mode="r")  # read-only mapping: safe to share

            def __getitem__(self, i):
                return self.data[i]
        """),
    ('DSL401', 'valid', {
            "data.py": """
                import lmdb
                from torch.utils.data import Dataset

                class Env(Dataset):
                    def __init__(self, path):
                        self.path = path
                        self.env = lmdb.open(path, readonly=True, lock=False)

                    def __getitem__(self, i):
                        with self.env.begin() as txn:
                            return txn.get(str(i).encode())
                """,
            "train.py": """
                from torch.utils.data import DataLoader
                from data import Env
                from workers import reopen

                loader = DataLoader(Env("db"), num_workers=4, worker_init_fn=reopen)
                """,
            "workers.py": """
                import lmdb
                import torch

                def reopen(worker_id):
                    info = torch.utils.data.get_worker_info()
                    info.dataset.env = lmdb.open(info.dataset.path, readonly=True)
                """,
        }),
    ('DSL401', 'valid', """
        import json
        from torch.utils.data import Dataset

        class Loaded(Dataset):
            def __init__(self, path):
                self.f = open(path)
                self.items = json.load(self.f)  # only __init__ uses the handle

            def __getitem__(self, i):
                return self.items[i]
        """),

    ('DSL401', 'valid', """
        from PIL import Image
        from torch.utils.data import Dataset

        class Background(Dataset):
            def __init__(self, path):
                self.bg = Image.open(path)
                self.bg.load()  # decoded in the parent: single-frame files are closed

            def __getitem__(self, i):
                return self.bg.crop((i, i, i + 8, i + 8))
        """),
    ('DSL401', 'valid', """
        import requests
        from torch.utils.data import Dataset

        class Remote(Dataset):
            def __init__(self, urls):
                self.urls = urls
                self.session = requests.Session()  # no connection yet

            def __getitem__(self, i):
                return self.session.get(self.urls[i]).content
        """),
    ('DSL401', 'invalid', """
        import sqlite3
        from torch.utils.data import Dataset

        class Table(Dataset):
            def __init__(self, path):
                self.conn = sqlite3.connect(path)  # expect: DSL401
                self.n = self.conn.execute("select count(*) from t").fetchone()[0]

            def __getitem__(self, i):
                return self.conn.execute("select v from t where k=?", (i,)).fetchone()
        """),
    ('DSL401', 'invalid', """
        from PIL import Image
        from torch.utils.data import Dataset

        class Atlas(Dataset):
            def __init__(self, path, size):
                self.atlas = Image.open(path)  # expect: DSL401
                self.size = size

            def __getitem__(self, i):
                return self.atlas.crop((i * self.size, 0, (i + 1) * self.size, self.size))
        """),
    ('DSL402', 'valid', """
        import numpy as np
        from torch.utils.data import Dataset

        class OnlyInit(Dataset):
            def __init__(self, n):
                self.rng = np.random.default_rng(0)
                self.noise = self.rng.normal(size=n)  # drawn once, in the parent

            def __getitem__(self, i):
                return self.noise[i]
        """),
    ('DSL403', 'valid', """
        import numpy as np
        from torch.utils.data import DataLoader

        def init(worker_id, seed=None):
            np.random.seed(seed)  # None: fresh entropy in every worker

        loader = DataLoader(ds, num_workers=2, worker_init_fn=init)
        """),
    # DSL401: a lazy opener that a constructor of another file runs through a hook (an override the
    # base's __init__ and its __getitem__ both call) opens the handle in the parent
    ('DSL401', 'invalid', {
        "base.py": """
            from torch.utils.data import Dataset

            class Records(Dataset):
                def __init__(self, path, columns):
                    self.path, self.columns = path, columns
                    self._setup()
                    for column in columns:  # validate: one query per column
                        self._query(column, 0)
                    self._finish()

                def _setup(self):
                    pass

                def _finish(self):
                    pass

                def __getitem__(self, i):
                    return [self._query(column, i) for column in self.columns]
            """,
        "tables.py": """
            import sqlite3
            from base import Records

            class Table(Records):
                def _setup(self):
                    self.conn = None
                    self.shards = None

                def _connect(self):
                    if self.shards is None:
                        if self.conn is None:
                            self.conn = sqlite3.connect(self.path)  # expect: DSL401
                    else:
                        self.conn = self.shards[0]  # the other arm: never after the connect

                def _query(self, column, i):
                    self._connect()
                    return self.conn.execute(f"SELECT {column} FROM t WHERE rowid = ?", (i,)).fetchone()
            """,
    }),
    # DSL401: ... unless the base's constructor drops it again at its end (through another hook)
    ('DSL401', 'valid', {
        "base.py": """
            from torch.utils.data import Dataset

            class Records(Dataset):
                def __init__(self, path, columns):
                    self.path, self.columns = path, columns
                    self._setup()
                    for column in columns:  # validate: one query per column
                        self._query(column, 0)
                    self._finish()

                def _setup(self):
                    pass

                def _finish(self):
                    pass

                def __getitem__(self, i):
                    return [self._query(column, i) for column in self.columns]
            """,
        "tables.py": """
            import sqlite3
            from base import Records

            class Table(Records):
                def _setup(self):
                    self.conn = None

                def _finish(self):
                    self.conn.close()
                    self.conn = None  # each worker connects on its first query

                def _query(self, column, i):
                    if self.conn is None:
                        self.conn = sqlite3.connect(self.path)
                    return self.conn.execute(f"SELECT {column} FROM t WHERE rowid = ?", (i,)).fetchone()
            """,
    }),
]


@pytest.mark.parametrize(
    "code,kind,case", [pytest.param(*case, id=f"{case[0]}-{case[1]}-more-{i}") for i, case in enumerate(MORE_CASES)]
)
def test_more_cases(tmp_path, code, kind, case):
    run_case(tmp_path, code, kind, case)


# DSL403 on torch < 1.9: the declared torch version, and where a loader stays silent
_OLD_DATA = """
    import numpy as np
    import torch.utils.data as tud

    class Tiles(tud.Dataset):
        def __getitem__(self, i):
            return i + np.random.rand()
    """
OLD_TORCH_CASES = [
    ('DSL403', 'valid', {  # the dataset reseeds numpy itself, from the first index each worker gets
        "requirements.txt": "torch==1.4.0\n", "data.py": """
    import numpy as np
    import torch.utils.data as tud

    class Crops(tud.Dataset):
        def __init__(self, rows):
            self.rows, self.seeded = rows, False

        def __getitem__(self, i):
            if not self.seeded:
                np.random.seed(i)
                self.seeded = True
            return self.rows[i] + np.random.rand()

    loader = tud.DataLoader(Crops([1.0] * 8), shuffle=True, num_workers=4)
    """}),
    ('DSL403', 'valid', {  # the project's DataLoader subclass chooses its own worker_init_fn
        "requirements.txt": "torch==1.8.1\n", "data.py": _OLD_DATA + """
    def reseed(worker_id):
        np.random.seed(tud.get_worker_info().seed % 2**32)

    class Loader(tud.DataLoader):
        def __init__(self, dataset, **kwargs):
            super().__init__(dataset, worker_init_fn=reseed, **kwargs)
    """, "train.py": """
    from data import Loader, Tiles
    loader = Loader(Tiles(), shuffle=True, num_workers=4)
    """}),
    ('DSL403', 'valid', {  # a subclass called with positional arguments: its own signature is not known
        "requirements.txt": "torch==1.8.1\n", "data.py": _OLD_DATA + """
    class Loader(tud.DataLoader):
        def __init__(self, dataset, workers=0, shuffle=False):
            super().__init__(dataset, shuffle=shuffle, num_workers=workers)
    """, "train.py": """
    from data import Loader, Tiles
    loader = Loader(Tiles(), 4, True)
    """}),
    ('DSL403', 'valid', {  # chosen at run time, and no dataset class of the project draws (a test's does not count)
        "setup.cfg": "[options]\ninstall_requires =\n    torch<1.9\n",
        "data.py": "import torch.utils.data as tud\n\nclass Plain(tud.Dataset):\n    def __getitem__(self, i):\n        return i\n",
        "tests/test_data.py": _OLD_DATA,
        "train.py": """
    from torch.utils.data import DataLoader
    def fit(dataset, n):
        return DataLoader(dataset, shuffle=True, num_workers=n)
    """}),
    ('DSL403', 'valid', {  # one declaration asks for a torch that seeds numpy itself
        "requirements.txt": "torch==1.6.0\n", "pyproject.toml": '[project]\ndependencies = ["torch>=2.0"]\n',
        "train.py": _OLD_DATA + "\n    loader = tud.DataLoader(Tiles(), shuffle=True, num_workers=4)\n"}),
    ('DSL403', 'invalid', {  # a conda environment pins pytorch; setup.py only bounds it from below
        "environment.yml": "name: x\ndependencies:\n  - pytorch=1.6.0\n",
        "setup.py": "from setuptools import setup\nsetup(install_requires=['torch>=1.6.0'])\n",
        "train.py": _OLD_DATA + "\n    loader = tud.DataLoader(Tiles(), shuffle=True, num_workers=4)  # expect: DSL403\n"}),
    ('DSL403', 'invalid',  # a dataset drawing through a helper, a handed callable, or chosen at run time
    {"requirements.txt": "torch==1.7.1+cpu\nnumpy\n", "pkg/__init__.py": "", "pkg/data.py": """
        import numpy as np
        import torch.utils.data as tud
        def crop(x):
            return x[np.random.randint(4):]
        class Crops(tud.Dataset):
            def __getitem__(self, i):
                return crop(list(range(10)))
        class Points(tud.Dataset):
            def __init__(self, augment=None):
                self.augment = augment
            def __getitem__(self, i):
                return self.augment(i)
        class Net:
            def augment(self, points):
                return points * np.random.uniform(0.9, 1.1)
        class Loader(tud.DataLoader):
            def __init__(self, dataset, batch_size=1, shuffle=False, num_workers=0, worker_init_fn=None):
                super().__init__(dataset, batch_size, shuffle, num_workers=num_workers, worker_init_fn=worker_init_fn)
        """, "pkg/train.py": """
        from torch.utils.data import DataLoader
        from pkg.data import Crops, Loader, Points
        def fit(cfg, model, registry):
            a = DataLoader(Crops(), num_workers=cfg.workers)  # expect: DSL403
            b = DataLoader(Points(augment=model.augment), num_workers=4)  # expect: DSL403
            c = Loader(registry[cfg.name](), shuffle=True, num_workers=cfg.workers)  # expect: DSL403
            return a, b, c
        """}),
    ('DSL403', 'invalid', {  # chosen at run time from the classes the loader's file names, that the call can build
        "requirements.txt": "torch==1.8.1\n",
        "quiet/data_loader.py": "import torch.utils.data as tud\n\nclass Steady(tud.Dataset):\n    def __getitem__(self, i):\n        return i\n",
        "quiet/data_factory.py": """
        from torch.utils.data import DataLoader
        from data_loader import Steady
        data_dict = {"steady": Steady}
        def provide(args):
            Data = data_dict[args.data]
            return DataLoader(Data(root=args.root), shuffle=True, num_workers=4)
        """,
        "noisy/data_loader.py": """
        import numpy as np
        import torch.utils.data as tud
        class Steady(tud.Dataset):
            def __init__(self, root, window=8):
                self.root, self.window = root, window
            def __getitem__(self, i):
                return i
        class Noisy(tud.Dataset):
            def __init__(self, root):
                self.root = root
            def __getitem__(self, i):
                return i + np.random.rand()
        """,
        "noisy/data_factory.py": """
        from torch.utils.data import DataLoader
        from data_loader import Noisy, Steady
        data_dict = {"steady": Steady, "noisy": Noisy}
        def provide(args):
            Data = data_dict[args.data]
            if args.window:
                data_set = Data(root=args.root, window=args.window)  # only Steady takes a window
                return DataLoader(data_set, shuffle=True, num_workers=4)
            data_set = Data(root=args.root)
            return DataLoader(data_set, shuffle=True, num_workers=4)  # expect: DSL403
        """}),
]


@pytest.mark.parametrize(
    "code,kind,case", [pytest.param(*case, id=f"{case[0]}-{case[1]}-old-torch-{i}") for i, case in enumerate(OLD_TORCH_CASES)]
)
def test_old_torch_cases(tmp_path, code, kind, case):
    run_case(tmp_path, code, kind, case)


@pytest.mark.parametrize("case", [pytest.param(c, id=f"old-torch-{i}") for i, (_, kind, c) in enumerate(OLD_TORCH_CASES) if kind == "invalid"])
def test_old_torch_form_needs_preview(tmp_path, case):
    """The missing-`worker_init_fn` form is a preview form of DSL403: silent on the default settings."""
    write_files(tmp_path, case)
    assert [d for d in check_tree(tmp_path, select=["DSL403"], preview=False).diagnostics if d.code == "DSL403"] == []


@pytest.mark.parametrize("spec,verdict", [
    ("==1.6.0+cu101", True), ("=1.8", True), (">=1.4,<1.9", True), ("<=1.8.1", True), ("~=1.7.0", True),
    (" 1.5", True), (">=1.6.0", None), ("<2.0", None), (">=1.9", False), ("==2.1.0", False), ("<1.10", None),
])
def test_torch_spec_verdicts(spec, verdict):
    from dslint.semantics.torch_version import spec_verdict

    assert spec_verdict(spec) is verdict


def test_dsl401_hdf5_views_kept_through_locals_loops_and_tuples(tmp_path):
    """``__init__`` keeps views of HDF5 files it opened (``group = f[name]``, ``x = group["x"]``)
    in a list on ``self`` as parts of tuples, the files coming from a local list comprehension
    and a loop over it (``init_code.held_in_container``): the workers inherit the parent's
    handles, DSL401. Data read out of the views (``x[:]``), names iterated over a file, and files
    the same loop closes keep nothing."""
    write_files(tmp_path, {"data.py": """
        import h5py
        from torch.utils.data import Dataset

        class Views(Dataset):
            def __init__(self, paths):
                files = [h5py.File(p, "r") for p in paths]
                self.index = []
                for file in files:
                    for name in file:
                        group = file[name]
                        x = group["x"]
                        for j in range(len(x)):
                            self.index.append((x, j))

            def __getitem__(self, i):
                x, j = self.index[i]
                return x[j]

        class Loaded(Dataset):
            def __init__(self, paths):
                files = [h5py.File(p, "r") for p in paths]
                self.index = []
                self.names = []
                for file in files:
                    for name in file:
                        self.names.append(name)
                        self.index.append((file[name]["x"][:], name))
                    file.close()

            def __getitem__(self, i):
                return self.index[i][0], self.names[i]
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL401"]).diagnostics]
    assert found == [("DSL401", 6)]


def test_dsl401_a_handle_kept_by_an_object_of_a_project_class(tmp_path):
    """``__init__`` hands each HDF5 file it opens to an object of a project class (another file)
    that keeps its argument on ``self``, and keeps the object (``self.readers[k] = Reader(f)``,
    ``self.first = Reader(f)``); ``__getitem__`` reads through the objects: the workers inherit
    the parent's handles (``kept_objects.keeping_construction``), DSL401. An object given only
    a name of the file (not the handle) holds no handle."""
    write_files(tmp_path, {
        "tools/reader.py": """
            class Reader:
                def __init__(self, handle):
                    self.handle = handle

                def rows(self, i):
                    return self.handle["x"][i]
            """,
        "data.py": """
            import h5py
            from torch.utils.data import Dataset
            from tools.reader import Reader

            class Kept(Dataset):
                def __init__(self, paths):
                    self.readers = {}
                    for k, path in enumerate(paths):
                        f = h5py.File(path, "r")
                        self.readers[k] = Reader(f)

                def __getitem__(self, i):
                    return self.readers[i % 2].rows(i)

            class KeptDirectly(Dataset):
                def __init__(self, path):
                    f = h5py.File(path, "r")
                    self.first = Reader(f)

                def __getitem__(self, i):
                    return self.first.rows(i)

            class Named(Dataset):
                def __init__(self, paths):
                    self.readers = {}
                    for k, path in enumerate(paths):
                        f = h5py.File(path, "r")
                        self.readers[k] = Reader(path)
                        f.close()

                def __getitem__(self, i):
                    return self.readers[i % 2].rows(i)
            """,
    })
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL401"]).diagnostics]
    assert found == [("DSL401", 9), ("DSL401", 17)]


def test_dsl402_a_generator_drawn_only_after_the_sample_failed_is_not_a_per_sample_draw(tmp_path):
    """A fixed-seed generator drawn from only to pick a replacement index once the requested
    sample failed (after ``if data is not None: return data`` in the retry loop, or in an
    ``except``: ``retries.on_failure_path``) draws once per failed sample, not per sample: no
    DSL402. The same generator drawn before the attempt runs for every sample: reported."""
    write_files(tmp_path, {"data.py": """
        import random
        from torch.utils.data import Dataset

        class Mapped(Dataset):
            def __init__(self, items, fn):
                self.items, self.fn = items, fn
                self.rng = random.Random(42)

            def __getitem__(self, i):
                while True:
                    data = self.fn(self.items[i])
                    if data is not None:
                        return data
                    i = self.rng.randrange(len(self.items))

        class Guarded(Dataset):
            def __init__(self, items, fn):
                self.items, self.fn = items, fn
                self.rng = random.Random(42)

            def __getitem__(self, i):
                try:
                    return self.fn(self.items[i])
                except OSError:
                    return self.fn(self.items[self.rng.randrange(len(self.items))])

        class Drawn(Dataset):
            def __init__(self, items, fn):
                self.items, self.fn = items, fn
                self.rng = random.Random(42)

            def __getitem__(self, i):
                while True:
                    j = self.rng.randrange(len(self.items))
                    data = self.fn(self.items[j])
                    if data is not None:
                        return data
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL402"]).diagnostics]
    assert found == [("DSL402", 30)]


def test_dsl401_a_handle_a_helper_opens_and_construction_closes_through_another_helper(tmp_path):
    """``__init__`` (through a helper) connects, reads the keys, then calls a method that closes
    the handle and resets the attribute: nothing open reaches the workers
    (``helper_drops.dropped_by_construction``). A closing method that only closes under a
    branch of its own does not count, nor does a helper call that one path skips."""
    write_files(tmp_path, {"data.py": """
        import lmdb
        from torch.utils.data import Dataset

        class Closed(Dataset):
            def __init__(self, path, reset=False):
                self.path, self.env, self.keys = path, None, None
                self._scan(reset)
            def _connect(self):
                self._close()
                self.env = lmdb.open(self.path, readonly=True, lock=False)
                with self.env.begin() as txn:
                    self.keys = list(txn.cursor().iternext(values=False))
            def _close(self):
                if self.env is not None:
                    self.env.close()
                self.env = None
            def _scan(self, reset):
                if reset:
                    done = []
                else:
                    self._connect()
                    done = self.keys
                    self._close()
                self.todo = [k for k in self.keys or () if k not in done]
            def __getitem__(self, i):
                self._connect()
                with self.env.begin() as txn:
                    return txn.get(self.keys[i])

        class Open(Dataset):
            def __init__(self, path, debug):
                self.path, self.env, self.keys = path, None, None
                self._connect()
                if debug:
                    self._close()
            def _connect(self):
                self._close()
                self.env = lmdb.open(self.path, readonly=True, lock=False)  # expect: DSL401
                with self.env.begin() as txn:
                    self.keys = list(txn.cursor().iternext(values=False))
            def _close(self):
                if self.env is not None:
                    self.env.close()
                    self.env = None
            def __getitem__(self, i):
                with self.env.begin() as txn:
                    return txn.get(self.keys[i])
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL401"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_helper_drops_follow_the_helper_to_the_construction_code_that_closes_it(tmp_path):
    """``helper_drops.dropped_by_construction`` reads past the helper that opens: its caller, run
    only while constructing, calls a method that closes and resets the attribute at its top level.
    ``instance_state.dropped_in_init`` alone reads only the helper."""
    from dslint.check_file import file_contexts
    from dslint.semantics.classes import dataset_inits
    from dslint.semantics.helper_drops import dropped_by_construction
    from dslint.semantics.instance_state import dropped_in_init

    source = textwrap.dedent('''
        import lmdb
        from torch.utils.data import Dataset

        class Scanned(Dataset):
            def __init__(self, path, reset=False):
                self.path, self.env = path, None
                self._scan(reset)
            def _connect(self):
                self.env = lmdb.open(self.path, readonly=True, lock=False)
            def _close(self):
                if self.env is not None:
                    self.env.close()
                self.env = None
            def _scan(self, reset):
                if not reset:
                    self._connect()
                    self.keys = list(self.env.begin().cursor().iternext(values=False))
                    self._close()

        class Kept(Scanned):
            def __init__(self, path):
                self.path, self.env = path, None
                self._connect()
                self._close_maybe()
            def _close_maybe(self):
                if self.path.endswith(".tmp"):
                    self._close()
        ''')
    ctx = file_contexts({"data.py": source})["data.py"]
    answers = {}
    for cls, init, selfp in dataset_inits(ctx):
        connect = next(m for m in ctx.nodes(cst.FunctionDef) if m.name.value == "_connect")
        opened = next(c for c in ctx.nodes(cst.Call) if ctx.call_name(c) == "lmdb.open")
        answers[cls.name.value] = (
            dropped_in_init(ctx, connect, "self", "env", opened),
            dropped_by_construction(ctx, cls, connect, "self", "env", opened),
        )
    assert answers == {"Scanned": (False, True), "Kept": (False, False)}


def test_dsl601_an_index_grown_by_adding_parsed_files_in_a_loop(tmp_path):
    """``self.ann += json.load(open(f))`` in a loop over annotation files grows the index like
    ``.extend`` (``init_code.fills_under``); a counter grown by ``+= 1`` is no index."""
    write_files(tmp_path, {"captions.py": """
        import json
        from torch.utils.data import Dataset

        class Captions(Dataset):
            def __init__(self, files):
                self.ann = []  # expect: DSL601
                self.total = 0
                for f in files:
                    self.ann += json.load(open(f))
                    self.total += 1
            def __len__(self):
                return len(self.ann)
            def __getitem__(self, i):
                return self.ann[i]["image"], self.ann[i]["caption"], self.total
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL601"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_a_pyg_dataset_reads_its_samples_through_get(tmp_path):
    """PyG's ``Dataset.__getitem__`` calls ``self.get(idx)``: a subclass's ``get`` is per-sample code
    (``project.LIBRARY_ENTRY_POINTS``), so an HDF5 file ``__init__`` keeps and ``get`` reads is
    inherited by every worker (DSL401), as it would be through ``__getitem__``."""
    write_files(tmp_path, {"graphs.py": """
        import h5py
        from torch_geometric.data import Data, Dataset

        class Molecules(Dataset):
            def __init__(self, path):
                super().__init__()
                self.h5 = h5py.File(path, "r")  # expect: DSL401
            def len(self):
                return len(self.h5["pos"])
            def get(self, idx):
                return Data(pos=self.h5["pos"][idx])

        class Counted(Dataset):
            def __init__(self, path):
                super().__init__()
                with h5py.File(path, "r") as f:
                    self.n = len(f["pos"])
            def len(self):
                return self.n
            def get(self, idx):
                return Data(idx=idx)
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL401"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_dsl401_a_class_the_dataset_builds_and_indexes_per_sample_is_a_dataset_too(tmp_path):
    """A dataset's ``__init__`` builds a reader of another file and keeps it; its ``__getitem__``
    indexes the reader with the sample index, so the reader's ``__getitem__`` runs per sample
    (``dataset_uses.indexed_params``). The reader opens its HDF5 file in its own ``__init__``,
    before the fork: reported there. A reader that opens lazily in each worker is not."""
    write_files(tmp_path, {
        "readers.py": """
        import h5py

        class Eager:
            def __init__(self, path):
                self.f = h5py.File(path, "r")  # expect: DSL401

            def __len__(self):
                return len(self.f)

            def __getitem__(self, i):
                return self.f[str(i)][()]

        class Lazy:
            def __init__(self, path):
                self.path, self.f = path, None

            def __len__(self):
                return 100

            def __getitem__(self, i):
                if self.f is None:
                    self.f = h5py.File(self.path, "r")
                return self.f[str(i)][()]
        """,
        "data.py": """
        from torch.utils.data import DataLoader, Dataset
        from readers import Eager, Lazy

        class Songs(Dataset):
            def __init__(self, path, lazy=False):
                self.rows = Lazy(path) if lazy else Eager(path)
                self.size = 100

            def __len__(self):
                return self.size

            def __getitem__(self, index):
                return self.rows[index]

        loader = DataLoader(Songs("a.h5"), num_workers=2)
        """})
    outcome = check_tree(tmp_path, select=["DSL401"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


_KEPT_UNREAD = """
import h5py
import numpy as np
from torch.utils.data import DataLoader, Dataset


class Poses(Dataset):
    def __init__(self, path):
        self.data = np.load(path)  # expect: DSL401
        self.names = self.data["imgname"]
        self.center = self.data["center"].astype(np.float32)

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        return self.names[i], self.center[i]


class Closed(Dataset):
    def __init__(self, path):
        self.f = h5py.File(path, "r")
        self.x = self.f["x"][:]
        self.f.close()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


class Pickled(Poses):
    def __getstate__(self):
        return {"names": self.names, "center": self.center}


loaders = [DataLoader(Poses("a.npz"), num_workers=4), DataLoader(Closed("a.h5"), num_workers=4)]
"""


_ZIP_KEPT = {
    "len": """
        import zipfile
        from torch.utils.data import Dataset

        class Zipped(Dataset):
            def __init__(self, path):
                self.zf = zipfile.ZipFile(path)  # read by __len__ only, in the parent
                self.path = path

            def __len__(self):
                return len(self.zf.namelist())

            def __getitem__(self, i):
                with zipfile.ZipFile(self.path) as zf:
                    return zf.read(zf.namelist()[i])
        """,
    "init": """
        import zipfile
        from torch.utils.data import Dataset

        class Members(Dataset):
            def __init__(self, path):
                self.zf = zipfile.ZipFile(path)  # read by __init__ only
                self.names = self.zf.namelist()

            def __getitem__(self, i):
                return self.names[i]
        """,
}


@pytest.mark.parametrize("name", sorted(_ZIP_KEPT))
def test_dsl401_an_archive_kept_but_read_only_before_the_fork(tmp_path, name):
    """Forked workers never read it (silent by default); with --preview, a spawned worker cannot receive it."""
    write_files(tmp_path, textwrap.dedent(_ZIP_KEPT[name]))
    assert not check_tree(tmp_path, select=["DSL401"], preview=False).diagnostics
    assert [f.row for f in check_tree(tmp_path, select=["DSL401"]).diagnostics] == [6]


def test_dsl401_a_handle_kept_but_never_read_per_sample_is_a_preview_form(tmp_path):
    """An archive ``__init__`` reads whole and keeps open, never read per sample: forked workers are
    fine, but a spawned worker cannot receive the dataset (the ``NpzFile`` holds an open file). Only
    with --preview; silent when ``__init__`` closes it, and when a class decides its own pickling."""
    run_case(tmp_path / "a", "DSL401", "invalid", _KEPT_UNREAD)
    write_files(tmp_path / "b", _KEPT_UNREAD)
    assert not check_tree(tmp_path / "b", select=["DSL401"], preview=False).diagnostics
    found = check_tree(tmp_path / "b", select=["DSL401"]).diagnostics
    assert [f.row for f in found] == [8] and "cannot pickle '_io.BufferedReader' object" in found[0].message
