"""DSL201 per-sample-directory-scan: a directory that is the same for every sample is
listed again for every sample."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.rules.base import WARNING, Rule
from dslint.rules.per_sample._common import TIME_RATIO, call_text, candidates, outermost, where
from dslint.semantics import dataflow as df
from dslint.semantics.call_facts import has_star, unresolved_receiver
from dslint.semantics.file_reads import scans_fixed_directory

SCAN_FUNCTIONS = {
    "os.listdir": "os.listdir",
    "os.scandir": "os.scandir",
    "os.walk": "os.walk",
    "os.fwalk": "os.fwalk",
    "glob.glob": "glob.glob",
    "glob.iglob": "glob.iglob",
    "pathlib.Path.glob": "Path.glob",
    "pathlib.Path.rglob": "Path.rglob",
    "pathlib.Path.iterdir": "Path.iterdir",
}
SCAN_METHODS = frozenset({"glob", "rglob", "iterdir"})
SCAN_TAILS = frozenset({"listdir", "scandir", "walk", "fwalk", "glob", "iglob", "rglob", "iterdir"})


def _scan_name(ctx, call: cst.Call) -> Optional[str]:
    name = ctx.call_name(call)
    if name in SCAN_FUNCTIONS:
        return SCAN_FUNCTIONS[name]
    func = call.func
    if name is None and isinstance(func, cst.Attribute) and func.attr.value in SCAN_METHODS:
        if unresolved_receiver(ctx, func):
            return f"Path.{func.attr.value}"
    return None


class PerSampleDirectoryScan(Rule):
    """
    ## What it does
    Flags directory listings in per-sample code (`__getitem__`, the loop that
    yields in `__iter__`, and the helpers they call, in any file):
    `os.listdir`, `os.scandir`, `os.walk`, `glob.glob`/`glob.iglob` and
    `Path.glob`/`rglob`/`iterdir`, when the directory (and pattern) is the same
    for every sample.

    A glob whose pattern names the sample but whose directory is fixed
    (`self.mask_dir.glob(name + ".*")`, `glob.glob(os.path.join(self.root,
    f"{name}_*.png"))`, `glob.glob(self.mask_dir + name + ".*")`) is reported
    too: glob lists the whole directory to find the one file. The directory is
    the part of the pattern before the first component with a literal
    wildcard (or, for a pattern built by `+`, what comes before the first
    per-sample piece); a per-sample value inside that component is taken as a
    file name. `Path.rglob` walks its whole tree whatever the
    pattern.

    ## When it does not fire
    - A scan of a per-sample folder (`os.listdir(self.dirs[idx])`,
      `glob.glob(os.path.join(self.root, self.ids[idx], "*.png"))`), or of a
      pattern whose directory is only known per sample (`glob.glob(p + "*")`).
    - A scan in `__init__`, before the loop of `__iter__` (once per epoch), in a
      lazy once-per-worker block (`if self.files is None: ...`, or after an early
      `if self.loaded: return`) or in an `lru_cache`d helper, or behind a counter the
      method resets (`if self.seen < self.every: return` ... `self.seen = 0`: a rescan
      every few samples, for a directory that grows while training).
    - Classes that are not datasets, and glob modules other than `glob`/pathlib.
    - A scan in an `except` handler (it runs when loading the item failed: the
      folder listed to suggest a name for a missing file), and the `__getitem__`
      of a dataset whose `__len__` returns `1` (one sample: one scan per epoch).

    ## Why is this bad?
    Every item pays for listing the whole directory again. Measured on
    torch 2.13 with a 5,000-file directory: `os.listdir` took 2,536 µs per
    item against 0.3 µs for indexing a list built once in `__init__` (about
    10,000x), `glob.glob` about 24,000x and `os.walk` about 9,000x; a 2-worker
    DataLoader epoch was 12-35x slower. On network file systems the gap is
    larger still.

    ## Example
    ```python
    class Frames(Dataset):
        def __getitem__(self, idx):
            files = sorted(os.listdir(self.root))
            return load(os.path.join(self.root, files[idx]))
    ```

    ## Use instead
    ```python
    class Frames(Dataset):
        def __init__(self, root):
            self.root = root
            self.files = sorted(os.listdir(root))

        def __getitem__(self, idx):
            return load(os.path.join(self.root, self.files[idx]))
    ```

    ## References
    - [evidence: PERF-1](../docs/evidence.md#perf-1) (measured per-item and per-epoch ratios)
    - PyTorch tutorial "Writing Custom Datasets, DataLoaders and Transforms": index files in `__init__`
    """

    code = "DSL201"
    name = "per-sample-directory-scan"
    symptom = TIME_RATIO
    level = WARNING
    summary = "A directory that is the same for every sample is listed again for every sample"
    help = "List the directory once in `__init__` and index the stored list in `__getitem__`"

    valid = (
        # the scanned folder depends on the index: per-sample work
        """
        import os
        from torch.utils.data import Dataset

        class Clips(Dataset):
            def __getitem__(self, idx):
                folder = self.clip_dirs[idx]
                frames = sorted(os.listdir(folder))
                return [os.path.join(folder, f) for f in frames]
        """,
        # lazy once-per-worker listing, and a scan in __init__
        """
        import glob
        from pathlib import Path
        from torch.utils.data import Dataset

        class Lazy(Dataset):
            def __init__(self, root):
                self.root = Path(root)
                self.all = sorted(self.root.rglob("*.png"))
                self.files = None

            def __getitem__(self, idx):
                if self.files is None:
                    self.files = sorted(glob.glob(str(self.root / "*.jpg")))
                return self.files[idx]
        """,
        # the loop item of __iter__ is per sample; the scan before the loop runs once per epoch
        """
        import os
        from torch.utils.data import IterableDataset

        class Shards(IterableDataset):
            def __iter__(self):
                shards = os.listdir(self.root)
                for shard in shards:
                    for name in os.listdir(os.path.join(self.root, shard)):
                        yield name
        """,
        # memoised helper, and code that is not dataset code
        """
        import functools
        import os
        from torch.utils.data import Dataset

        @functools.lru_cache(maxsize=None)
        def list_dir(root):
            return sorted(os.listdir(root))

        class D(Dataset):
            def __getitem__(self, idx):
                return list_dir(self.root)[idx]

        def count_files(root):
            return len(os.listdir(root))

        class NotADataset:
            def __getitem__(self, idx):
                return sorted(os.listdir(self.root))[idx]
        """,
        # a glob module that is not pathlib; patterns whose directory is per sample
        """
        import glob
        import os
        import glob2
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, idx):
                a = glob2.glob("x/*")
                b = glob.glob(os.path.join(self.root, self.ids[idx], "*.png"))
                c = glob.glob(self.prefixes[idx] + "*")
                d = self.dirs[idx].glob("*.png")
                e = glob.glob(self.patterns[idx])
                return a, b, c, d, e
        """,
    )
    invalid = (
        """
        import os
        import glob as g
        from os import listdir as ls
        from pathlib import Path
        from torch.utils.data import Dataset

        class Frames(Dataset):
            def __init__(self, root):
                self.root = root

            def __getitem__(self, idx):
                files = sorted(os.listdir(self.root))  # expect: DSL201
                pngs = g.glob(os.path.join(self.root, "*.png"))  # expect: DSL201
                n = len(ls(self.root))  # expect: DSL201
                masks = list(Path(self.root).rglob("*.npy"))  # expect: DSL201
                return files[idx], pngs[idx], n, masks
        """,
        # a module-level helper reached from __getitem__
        """
        import os
        import torch.utils.data as tud

        DATA = "/data/images"

        def list_images():
            return [f for f in os.listdir(DATA) if f.endswith(".jpg")]  # expect: DSL201

        class Images(tud.Dataset):
            def __getitem__(self, index):
                name = list_images()[index]
                return name
        """,
        # __getitem__ in a base class file, the scanning helper in the subclass file
        {
            "base.py": """
                from torch.utils.data import Dataset

                class Base(Dataset):
                    def __getitem__(self, idx):
                        return self.load(idx)
            """,
            "folder.py": """
                from pathlib import Path
                from base import Base

                class Folder(Base):
                    def load(self, idx):
                        files = sorted(Path(self.root).iterdir())  # expect: DSL201
                        return files[idx]
            """,
        },
        # the pattern names the sample, the directory it lists does not
        """
        import glob
        import os
        from torch.utils.data import Dataset

        class Masks(Dataset):
            def __getitem__(self, idx):
                name = self.ids[idx]
                mask = list(self.mask_dir.glob(name + "_mask.*"))  # expect: DSL201
                pattern = os.path.join(self.root, f"{name}.*")
                image = glob.glob(pattern)  # expect: DSL201
                depth = glob.glob(self.depth_dir + name + "_depth.*")  # expect: DSL201
                return mask[0], image[0], depth[0]
        """,
        # the yielding loop of __iter__ rescans the same directory for every item
        """
        import glob
        from torch.utils.data import IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                for i in range(self.n):
                    paths = glob.glob(self.pattern)  # expect: DSL201
                    yield paths[i % len(paths)]
        """,
    )

    def check(self, ctx):
        found = []
        for call in candidates(ctx, SCAN_TAILS):
            name = _scan_name(ctx, call)
            if name is None or has_star(call) or not df.per_item(ctx, call):
                continue
            what = "lists the same directory again for every sample"
            if df.inputs_depend(ctx, call):
                if not scans_fixed_directory(ctx, call, name):
                    continue
                what = "lists the same directory for every sample to find that sample's file"
            found.append(
                (
                    call,
                    f"`{call_text(ctx, call, name)}` {what} ({where(ctx, call)}): a directory scan per item "
                    "measured ~10,000x slower than listing it once in `__init__`",
                )
            )
        for node, message in outermost(ctx, found):
            yield self.report(node, message)
