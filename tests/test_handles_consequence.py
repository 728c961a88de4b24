"""The handle rules split by consequence: the default codes (DSL101, DSL102, DSL103)
report the forms whose handle stays open past its sample, the opt-in DSL104 every
other unclosed form the handle rules reported before the split, and no form is
reported twice or dropped."""

from __future__ import annotations

import textwrap

import pytest

from dslint.rules.base import all_rules, as_invalid, as_valid
from tests.conftest import check_tree, expected_markers, write_files

HEADER = """
import glob
import io
import json
import h5py
import lmdb
import pandas as pd
import rasterio
import six
import tables
import tarfile
import xarray as xr
from PIL import Image, ImageSequence
from torch.utils.data import Dataset
"""


def _dataset(init: str, body: str, prelude: str = "") -> str:
    """A map-style dataset whose ``__init__`` runs ``init`` and ``__getitem__`` ``body``."""
    return (
        textwrap.dedent(HEADER).lstrip("\n")
        + textwrap.dedent(prelude)
        + "\n\nclass D(Dataset):\n    def __init__(self, root):\n        self.root = root\n"
        + textwrap.indent(textwrap.dedent(init).strip("\n"), " " * 8)
        + "\n\n    def __getitem__(self, i):\n        p = self.paths[i]\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
        + "\n"
    )


# (id, the code that reports the line marked `# <-`, or None, the source)
FORMS = [
    # images: loaded and closed by Pillow unless the code shows multi-frame formats
    ("image-convert-chain", "DSL104", _dataset("", 'return Image.open(p).convert("RGB")  # <-')),
    ("image-chain-gif-glob", "DSL101", _dataset('self.paths = glob.glob(root + "/*.gif")', 'return Image.open(p).convert("RGB")  # <-')),
    ("image-chain-tiff-extension", "DSL104", _dataset("", 'return Image.open(p).copy()  # <-', 'EXTS = ["jpg", "tiff"]')),
    ("image-chain-tiff-stack", "DSL101", _dataset("", 'img = Image.open(p)  # <-\nframes = img.n_frames\nreturn img.copy(), frames', 'EXTS = ["tif"]')),
    ("image-chain-apng-extension", "DSL101", _dataset("", 'return Image.open(p).copy()  # <-', 'EXTS = ["png", "apng"]')),
    ("image-named-loaded-later", "DSL104", _dataset("", 'img = Image.open(p)  # <-\nimg = img.resize((8, 8))\nreturn img')),
    ("image-handed-to-transform", "DSL104", _dataset("", "img = Image.open(p)  # <-\nreturn self.transform(img)")),
    ("image-named-seek", "DSL101", _dataset("", 'img = Image.open(p)  # <-\nimg.seek(1)\nreturn img.convert("RGB")')),
    ("image-sequence", "DSL101", _dataset("", "return [f.copy() for f in ImageSequence.Iterator(Image.open(p))]  # <-")),
    ("image-never-loaded-chain", "DSL101", _dataset("", "w, h = Image.open(p).size  # <-\nreturn w * h")),
    ("image-never-loaded-named", "DSL101", _dataset("", "img = Image.open(p)  # <-\nreturn img.size, img.mode")),
    ("image-kept-on-self", "DSL101", _dataset("", "self.last = Image.open(p)  # <-\nreturn i")),
    ("image-kept-in-list", "DSL103", _dataset("", "self.seen.append(Image.open(p))  # <-\nreturn i")),
    # a container local to the sample's code ends with the sample: nothing accumulates
    ("image-in-local-list-returned", None, _dataset("", "views = []\nviews.append(Image.open(p))  # <-\nreturn views")),
    ("image-in-local-list-loaded", None, _dataset("", "views = []\nviews.append(Image.open(p))  # <-\nreturn [v.resize((8, 8)) for v in views]")),
    ("file-in-init-local-list-kept", "DSL103", _dataset("handles = []\nfor q in root:\n    handles.append(open(q))  # <-\nself.handles = handles", "return p")),
    ("image-six-buffer", None, _dataset("", 'return Image.open(six.BytesIO(self.blobs[i])).convert("RGB")  # <-')),
    ("image-io-buffer", None, _dataset("", 'return Image.open(io.BytesIO(self.blobs[i])).convert("RGB")  # <-')),
    ("image-once-in-init", "DSL104", _dataset('self.paths = glob.glob(root + "/*.gif")\nself.first = Image.open(self.paths[0]).convert("RGB")  # <-', "return p")),
    ("image-with", None, _dataset("", "with Image.open(p) as im:  # <-\n    return im.copy()")),
    # a function of the file that returns the handle it opens: judged where it is called
    ("helper-image-never-loaded", "DSL101", _dataset("", "return load(p).size  # <-", "def load(path):\n    return Image.open(path)")),
    ("helper-image-loaded", "DSL104", _dataset("", 'return load(p).convert("RGB")  # <-', "def load(path):\n    return Image.open(path)")),
    ("helper-file-in-tuple-kept", "DSL103", _dataset("", "f, n = load(p)  # <-\nself.kept.append(f)\nreturn n", "def load(path):\n    f = open(path)\n    return f, 1")),
    ("helper-file-closed-by-caller", None, _dataset("", "with load(p) as f:  # <-\n    return f.read()", "def load(path):\n    return open(path)")),
    ("helper-either-opener-kept", "DSL103", _dataset("", "self.kept[i] = load(p)  # <-\nreturn i", "def load(path):\n    return tarfile.open(path) if path.endswith('.tar') else open(path)")),
    ("helper-opener-or-none", None, _dataset("", "self.kept[i] = load(p)  # <-\nreturn i", "def load(path):\n    return open(path) if path else None")),
    ("helper-of-a-helper-kept", "DSL103", _dataset("", "self.kept[i] = load(p)  # <-\nreturn i", "def raw(path):\n    return open(path)\n\n\ndef load(path):\n    return raw(path)")),
    ("helper-itself", None, _dataset("", "return load(p).read()", "def load(path):\n    return open(path)  # <-")),
    # Python file objects: reference counting closes them when they are dropped
    ("file-json-load-temporary", "DSL104", _dataset("", "return json.load(open(p))  # <-")),
    ("file-read-chain", "DSL104", _dataset("", "return open(p).read()  # <-")),
    ("file-named-read", "DSL104", _dataset("", "f = open(p)  # <-\nreturn f.read()")),
    ("file-h5py-temporary", "DSL104", _dataset("", 'return h5py.File(p)["x"][()]  # <-')),
    ("file-tarfile-temporary", "DSL104", _dataset("", 'return tarfile.open(p).extractfile("a").read()  # <-')),
    ("file-json-once-in-init", "DSL104", _dataset('self.paths = json.load(open(root + "/index.json"))  # <-', "return p")),
    ("file-kept-on-self", "DSL102", _dataset("", "self.f = open(p)  # <-\nreturn self.f.read()")),
    ("file-kept-in-dict", "DSL103", _dataset("", "self.handles[i] = open(p)  # <-\nreturn i")),
    # PyTables files stay open until closed (bench/handle_release.py); rasterio and xarray
    # handles are freed with their object, as file objects are
    ("library-pytables-per-sample", "DSL102", _dataset("", "return tables.open_file(p).read()  # <-")),
    ("library-hdfstore-named-per-sample", "DSL102", _dataset("", 'store = pd.HDFStore(p)  # <-\nreturn store.get("frame")')),
    ("library-raster-per-sample", "DSL104", _dataset("", "return rasterio.open(p).read()  # <-")),
    ("library-netcdf-named-per-sample", "DSL104", _dataset("", "nc = xr.open_dataset(p)  # <-\nreturn nc.band.values")),
    ("library-once-in-init", "DSL104", _dataset('self.attrs = xr.open_dataset(root + "/c.nc").attrs  # <-', "return p")),
    # a view that holds its handle (an LMDB transaction, an HDF5 dataset) kept or returned: meant to stay open
    ("library-view-kept-on-self", None, _dataset("self.txn = lmdb.open(root).begin()  # <-", "return self.txn.get(p)")),
    ("library-view-returned", None, _dataset("", "f = h5py.File(p)  # <-\nrows = f['rows']\nreturn rows")),
    ("library-view-read-at-once", "DSL104", _dataset("", "f = h5py.File(p)  # <-\nreturn f['rows'][()]")),
    ("library-with", None, _dataset("", "with rasterio.open(p) as src:  # <-\n    return src.read()")),
]


def _marked_line(source: str) -> int:
    (line,) = [n for n, text in enumerate(source.splitlines(), 1) if text.rstrip().endswith("# <-")]
    return line


def _codes_by_line(tmp_path, files) -> dict:
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=["DSL1"])
    assert not outcome.result.internal_errors
    found: dict = {}
    for d in outcome.diagnostics:
        found.setdefault((d.path.replace("\\", "/"), d.row), set()).add(d.code)
    return found


@pytest.mark.parametrize("expected,source", [pytest.param(e, s, id=i) for i, e, s in FORMS])
def test_each_form_is_reported_by_exactly_one_code(tmp_path, expected, source):
    found = _codes_by_line(tmp_path, source)
    got = found.get(("example.py", _marked_line(source)), set())
    assert got == ({expected} if expected else set()), found


def test_dsl104_is_off_by_default_and_the_default_codes_are_on():
    from pathlib import Path

    from dslint.config import Settings

    default = {rule.code for rule in Settings(Path(".")).enabled_rules()}
    assert {"DSL101", "DSL102", "DSL103"} <= default and "DSL104" not in default
    assert all_rules()["DSL104"].preview
    assert "DSL104" in {rule.code for rule in Settings(Path("."), preview=True).enabled_rules()}


def _cases(code):
    rule = all_rules()[code]
    for i, case in enumerate(rule.valid):
        yield pytest.param(as_valid(case).code, id=f"{code}-valid-{i}")
    for i, case in enumerate(rule.invalid):
        yield pytest.param(as_invalid(case).code, id=f"{code}-invalid-{i}")


@pytest.mark.parametrize("case", [c for code in ("DSL101", "DSL102", "DSL103", "DSL104") for c in _cases(code)])
def test_no_line_is_reported_by_a_default_code_and_by_dsl104(tmp_path, case):
    found = _codes_by_line(tmp_path, case)
    both = {where: codes for where, codes in found.items() if "DSL104" in codes and codes & {"DSL101", "DSL102", "DSL103"}}
    assert not both


def test_the_fixes_stay_with_the_code_that_reports_the_form(tmp_path):
    write_files(tmp_path, _dataset("", 'return Image.open(p).convert("RGB")\n', 'EXT = ".gif"'))
    (finding,) = [d for d in check_tree(tmp_path, select=["DSL1"]).diagnostics]
    assert finding.code == "DSL101" and finding.fix is not None and finding.fix.applicability == "safe"
    write_files(tmp_path, _dataset("", "return json.load(open(p))\n"))
    (finding,) = [d for d in check_tree(tmp_path, select=["DSL1"]).diagnostics]
    assert finding.code == "DSL104" and finding.fix is not None and finding.fix.applicability == "safe"


def test_dsl103_silent_for_handles_closed_in_a_loop_and_for_a_method_run_only_lazily(tmp_path):
    """Handles opened in a list comprehension and each closed by a loop over that list are not
    kept (``lifetimes._closed_by_loop``); a method that only a once-only guard calls (``if
    self.index is None: self.build_index()``, the method setting ``self.index``) opens its files
    once per worker (``once.called_only_lazily``). The same files kept by ``__init__`` are reported."""
    write_files(
        tmp_path,
        {
            "data.py": """
            import h5py
            from torch.utils.data import Dataset

            class Frames(Dataset):
                def __init__(self, names):
                    self.names = names
                    self.index = None
                    files = [h5py.File(n, "r") for n in names]
                    self.count = 0
                    for f in files:
                        self.count += len(f["x"])
                        f.close()

                def build_index(self):
                    files = [h5py.File(n, "r") for n in self.names]
                    self.index = [(f["x"], i) for f in files for i in range(len(f["x"]))]

                def __len__(self):
                    return self.count

                def __getitem__(self, i):
                    if self.index is None:
                        self.build_index()
                    data, j = self.index[i]
                    return data[j]

            class Kept(Dataset):
                def __init__(self, names):
                    self.files = [h5py.File(n, "r") for n in names]

                def __getitem__(self, i):
                    return self.files[0]["x"][i]
            """,
        },
    )
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL103"]).diagnostics]
    assert found == [("DSL103", 29)]


def test_dsl103_np_load_kept_in_a_list_and_read_by_field_name_is_an_archive(tmp_path):
    """``np.load`` of a path without a visible suffix: reading the kept results by a field name
    (``d["mask"]``, ``self.arrays[i]["mask"]``) shows ``.npz`` archives, each holding its zip open;
    results read by position are arrays, which hold nothing."""
    write_files(
        tmp_path,
        {
            "data.py": """
            import os
            import numpy as np
            from torch.utils.data import Dataset

            class Archives(Dataset):
                def __init__(self, root):
                    self.archives = [np.load(os.path.join(root, f)) for f in sorted(os.listdir(root))]
                    self.masks = np.stack([d["mask"] for d in self.archives])

                def __getitem__(self, i):
                    return self.masks[i]

            class Indexed(Dataset):
                def __init__(self, root):
                    self.archives = [np.load(os.path.join(root, f)) for f in sorted(os.listdir(root))]

                def __getitem__(self, i):
                    return self.archives[i]["mask"]

            class Arrays(Dataset):
                def __init__(self, root):
                    self.arrays = [np.load(os.path.join(root, f)) for f in sorted(os.listdir(root))]

                def __getitem__(self, i):
                    return self.arrays[i][0]
            """,
        },
    )
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL103"]).diagnostics]
    assert found == [("DSL103", 7), ("DSL103", 15)]


def test_dsl103_silent_for_images_in_the_sample_s_own_dict_or_list(tmp_path):
    """Images opened into the sample being built (a dict display bound to a local name, a list
    comprehension added to it with ``.update``) end with the sample (``containers.local_to``):
    not kept. The same images added to a list on ``self``, to a module list, or to a list the
    caller passed in outlive the sample and are reported."""
    write_files(
        tmp_path,
        {
            "data.py": """
            from PIL import Image
            from torch.utils.data import Dataset

            SEEN = []

            class Frames(Dataset):
                def __init__(self, paths):
                    self.paths = paths
                    self.kept = []

                def __getitem__(self, i):
                    sample = {"rgb": Image.open(self.paths[i]), "index": i}
                    context = [Image.open(p) for p in self.paths[i + 1:i + 3]]
                    sample.update({"context": context})
                    return self.transform(sample)

                def frames(self, i, out):
                    self.kept.append({"rgb": Image.open(self.paths[i])})
                    SEEN.append([Image.open(self.paths[i])])
                    out.append({"rgb": Image.open(self.paths[i])})
                    return out
            """,
        },
    )
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL103"], preview=True).diagnostics]
    assert found == [("DSL103", 18), ("DSL103", 19), ("DSL103", 20)]


def test_dsl101_a_gif_the_file_only_writes_does_not_make_it_multi_frame_code(tmp_path):
    """A GIF name given to a call that writes (``frames[0].save(f"{n}.gif")``) says nothing of the
    images the dataset reads (``_common.multi_frame_code``): the JPEGs it opens and transforms are
    closed by Pillow's load, no DSL101. A GIF pattern it reads from is multi-frame code."""
    source = """
        from pathlib import Path
        from PIL import Image
        from torch.utils.data import Dataset

        class Frames(Dataset):
            def __init__(self, folder):
                self.paths = sorted(Path(folder).glob({pattern}))

            def __getitem__(self, i):
                image = Image.open(self.paths[i])
                return self.transform(image)

        def save_animation(frames, out, n):
            frames[0].save(str(out / f"{{n}}.gif"), save_all=True, append_images=frames[1:])
        """
    write_files(tmp_path, {"jpegs.py": source.format(pattern='"*.jpg"'), "gifs.py": source.format(pattern='"*.gif"')})
    found = [(f.path.rsplit("/", 1)[-1], f.code) for f in check_tree(tmp_path, select=["DSL101"]).diagnostics]
    assert found == [("gifs.py", "DSL101")]


def test_dsl103_silent_for_a_cached_image_the_same_code_loads(tmp_path):
    """An image cached by index and then loaded by the same code (``im.convert("RGB")``, handed
    to a transform: ``lifetimes.image_loaded_by_name``) has had its file closed by Pillow: the
    cache keeps pixels, no descriptor. A cached image only measured (``.size``) stays open."""
    write_files(
        tmp_path,
        {
            "data.py": """
            from PIL import Image
            from torch.utils.data import Dataset

            class Cached(Dataset):
                def __init__(self, paths):
                    self.paths = paths
                    self.images = {}
                    self.labels = {}
                    self.sizes = {}

                def __getitem__(self, i):
                    if self.images.get(i) is None:
                        image = Image.open(self.paths[i])
                        self.images[i] = image
                    else:
                        image = self.images[i]
                    image = image.convert("RGB")
                    label = Image.open(self.paths[i] + ".png")
                    self.labels[i] = label
                    raw = Image.open(self.paths[i])
                    self.sizes[i] = raw
                    return self.transform(image), self.transform(label), raw.size
            """,
        },
    )
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL103"]).diagnostics]
    assert found == [("DSL103", 20)]


def test_dsl101_another_class_reading_gifs_does_not_make_this_one_multi_frame(tmp_path):
    """Multi-frame evidence counts where the image is opened: in its own class or outside every
    class of the file (``_common.multi_frame_code``). A video dataset of the same module that
    globs GIFs says nothing of the JPEG dataset beside it; a module-level GIF pattern does."""
    source = """
        from pathlib import Path
        from PIL import Image
        from torch.utils.data import Dataset
        {module_level}

        class Images(Dataset):
            def __init__(self, folder):
                self.paths = [p for ext in ("jpg", "png") for p in Path(folder).glob(f"**/*.{{ext}}")]

            def __getitem__(self, i):
                image = Image.open(self.paths[i])
                return self.transform(image)

        class Videos(Dataset):
            def __init__(self, folder):
                self.paths = sorted(Path(folder).glob("**/*.gif"))

            def __getitem__(self, i):
                return self.frames(self.paths[i])
        """
    write_files(tmp_path, {"own.py": source.format(module_level=""), "shared.py": source.format(module_level='PATTERN = "*.gif"')})
    found = [(f.path.rsplit("/", 1)[-1], f.code) for f in check_tree(tmp_path, select=["DSL101"]).diagnostics]
    assert found == [("shared.py", "DSL101")]


def test_dsl103_a_path_entry_replaced_by_its_handle_is_opened_once_per_entry(tmp_path):
    """``f = self.files[k]; if isinstance(f, Path): f = h5py.File(f); self.files[k] = f``: the
    entry holds the path until the first sample opens it, then the handle, so each worker keeps
    one handle per entry (``once._replaces_path_entry``), not one per sample. A guard on a value
    that is not the replaced entry (``self.cache.get(i)`` stored under another key) guards nothing."""
    write_files(tmp_path, {"feats.py": """
        from pathlib import Path
        import h5py
        from torch.utils.data import Dataset

        class Feats(Dataset):
            def __init__(self, rows, root):
                self.rows = rows
                self.by_source = {"train": Path(root) / "train.h5", "val": Path(root) / "val.h5"}
                self.cache = {}

            def __len__(self):
                return len(self.rows)

            def __getitem__(self, i):
                row = self.rows[i]
                source = "train" if "train" in row else "val"
                f = self.by_source[source]
                if isinstance(f, (str, Path)):
                    f = h5py.File(f, "r")
                    self.by_source[source] = f
                g = self.cache.get(i)
                if isinstance(g, str):
                    g = h5py.File(g, "r")  # expect: DSL103
                    self.cache[row] = g
                return f[row][()], g[()]
        """})
    outcome = check_tree(tmp_path, select=["DSL103"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_dsl103_a_handle_put_by_its_name_into_the_sample_s_own_dict_ends_with_the_sample(tmp_path):
    """``mask = Image.open(p)`` then ``sample = {"mask": mask}`` (a dict the sample's code binds)
    keeps the handle no longer than ``{"mask": Image.open(p)}`` does (``containers.local_to`` takes
    the entry's display); put into a list on ``self`` by its name, it is kept."""
    write_files(tmp_path, {"masks.py": """
        from PIL import Image
        from torch.utils.data import Dataset

        class Masks(Dataset):
            def __init__(self, paths, transform=None):
                self.paths, self.transform, self.seen = paths, transform, []

            def __len__(self):
                return len(self.paths)

            def __getitem__(self, index):
                mask = Image.open(self.paths[index])
                if self.transform is not None:
                    sample = {"mask": mask}
                    mask = self.transform(sample)["mask"]
                return mask

            def remember(self, index):
                mask = Image.open(self.paths[index])  # expect: DSL103
                self.seen.append([mask])
                return index
        """})
    outcome = check_tree(tmp_path, select=["DSL103"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_dsl103_handles_kept_per_slot_do_not_grow_with_the_data(tmp_path):
    """A stream dataset opens one file per batch slot in ``__init__`` (``range`` of a configured
    count: ``sizes.counted_loop``) and, when a slot's sequence ends, closes that file before
    storing the next one (``containers.replaces_closed``): the handles kept stay at one per slot.
    Opening one per file (``range(len(files))``), or storing without the close, keeps more as
    the data grows: reported."""
    write_files(tmp_path, {"slots.py": """
        import h5py
        from torch.utils.data import IterableDataset

        class Slots(IterableDataset):
            def __init__(self, files, cfg):
                self.files, self.open = files, {}
                self.first = [h5py.File(files[b], "r") for b in range(cfg["loader"]["slots"])]
                self.every = [h5py.File(files[b], "r") for b in range(len(files))]  # expect: DSL103

            def __iter__(self):
                for i, path in enumerate(self.files):
                    slot = i % 4
                    if slot in self.open:
                        self.open[slot].close()
                    self.open[slot] = h5py.File(path, "r")
                    yield self.open[slot]["x"][()]

        class Leaky(IterableDataset):
            def __init__(self, files):
                self.files, self.open = files, {}

            def __iter__(self):
                for i, path in enumerate(self.files):
                    self.open[i] = h5py.File(path, "r")  # expect: DSL103
                    yield self.open[i]["x"][()]
        """})
    outcome = check_tree(tmp_path, select=["DSL103"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)
