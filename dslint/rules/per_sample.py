"""DSL2xx: per-sample cost. Work that is the same for every sample, repeated for
every sample (directory scans, annotation reloads, model/transform/vocabulary
construction), and CUDA work in code that runs in DataLoader workers.

"Per-sample" comes from ``ctx.is_per_sample`` (``__getitem__``, the loop that
yields in ``__iter__``, what they reach, lazy once-per-worker blocks and
memoised helpers excluded); "the same for every sample" from
``dslint.semantics.dataflow`` (index dependence).
"""

from __future__ import annotations

import weakref
from typing import Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

from dslint.rules.base import ERROR, WARNING, Rule, Symptom
from dslint.semantics import dataflow as df
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.loops import is_test_code
from dslint.semantics.regions import LOOP

ENTRY_METHODS = ("__getitem__", "__getitems__", "__iter__", "__next__")

# ---------------------------------------------------------------------------- shared helpers


def _tail(call: cst.Call) -> Optional[str]:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def _candidates(ctx, tails) -> Iterator[cst.Call]:
    """Calls whose last name component may be one of ``tails`` (import aliases included)."""
    accepted = ctx.names.call_tails(frozenset(tails))
    for call in ctx.nodes(cst.Call):
        if _tail(call) in accepted:
            yield call


def _call_text(ctx, call: cst.Call, qualified: Optional[str] = None) -> str:
    text = ctx.code(call.func).strip()
    if len(text) > 40 or "\n" in text:
        text = f".{_tail(call)}" if isinstance(call.func, cst.Attribute) else (qualified or "call")
    return f"{text}()"


def _where(ctx, node: cst.CSTNode) -> str:
    func = ctx.enclosing_function(node)
    if func is None:
        return "per-sample code"
    name = func.name.value
    label = ctx.per_sample_label(func)
    mode = ctx.per_sample_mode(func)
    if mode == LOOP:
        return f"the loop that yields in `{name}` runs once per sample of `{label}`"
    return f"`{name}` runs once per sample of `{label}`"


def _unresolved_receiver(ctx, func: cst.Attribute) -> bool:
    """A method call on a value (``self.root.glob``), not a module function (``glob.glob``)."""
    receiver = func.value
    if isinstance(receiver, (cst.Name, cst.Attribute)):
        return ctx.qualname(receiver) is None
    return True


def _outermost(ctx, found: List[Tuple[cst.CSTNode, str]]) -> Iterator[Tuple[cst.CSTNode, str]]:
    """One defect, one finding: drop findings nested inside another finding of the same rule."""
    ids = {id(node) for node, _ in found}
    for node, message in found:
        nested = False
        for ancestor in ctx.ancestors(node):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                break
            if id(ancestor) in ids:
                nested = True
                break
        if not nested:
            yield node, message


def _positional_or_keyword(call: cst.Call, index: int, *keywords: str) -> Optional[cst.Arg]:
    position = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value in keywords:
                return arg
            continue
        if arg.star:
            return None
        if position == index:
            return arg
        position += 1
    return None


def _has_star(call: cst.Call) -> bool:
    return any(arg.star for arg in call.args)


# ---------------------------------------------------------------------------- file handles

OPENERS = frozenset({"builtins.open", "gzip.open", "bz2.open", "lzma.open", "codecs.open"})


def _opener_call(ctx, expr) -> Optional[cst.Call]:
    """``expr`` itself, when it is a call that opens a file (``open(p)``, ``Path(p).open()``)."""
    if not isinstance(expr, cst.Call):
        return None
    name = ctx.call_name(expr)
    if name in OPENERS:
        return expr
    func = expr.func
    if name is None and isinstance(func, cst.Attribute) and func.attr.value == "open" and _unresolved_receiver(ctx, func):
        return expr
    return None


def _bindings(ctx, expr) -> Optional[List[cst.BaseExpression]]:
    """What a local name is bound to, when every binding is a plain value."""
    if not isinstance(expr, cst.Name):
        return None
    values = df.bound_values(ctx, expr)
    if not values or any(v is None for v in values):
        return None
    return values


def _fresh_handle(ctx, expr) -> bool:
    """A file opened per sample from an index-invariant path (directly or through a local name)."""
    values = _bindings(ctx, expr) if isinstance(expr, cst.Name) else [expr]
    if not values:
        return False
    for value in values:
        opener = _opener_call(ctx, value)
        if opener is None or _has_star(opener) or not df.per_item(ctx, opener) or df.inputs_depend(ctx, opener):
            return False
    return True


def _opened_outside_sample(ctx, expr) -> bool:
    """A handle opened once (before the loop, in a lazy block) and read incrementally."""
    values = _bindings(ctx, expr) if isinstance(expr, cst.Name) else [expr]
    for value in values or ():
        opener = _opener_call(ctx, value)
        if opener is not None and not df.per_item(ctx, opener):
            return True
    return False


def _whole_file_text(ctx, expr) -> bool:
    """``open(p).read()``, ``Path(p).read_text()`` of an index-invariant file, read per sample."""
    values = _bindings(ctx, expr) if isinstance(expr, cst.Name) else [expr]
    if not values:
        return False
    for value in values:
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
            return False
        method = value.func.attr.value
        if method == "read" and not value.args:
            if not _fresh_handle(ctx, value.func.value):
                return False
        elif method in ("read_text", "read_bytes") and _unresolved_receiver(ctx, value.func):
            if not df.per_item(ctx, value) or df.inputs_depend(ctx, value):
                return False
        else:
            return False
    return True


_WHOLE_CONSUMERS = frozenset(
    {"builtins.list", "builtins.tuple", "builtins.sorted", "builtins.set", "builtins.dict", "builtins.frozenset"}
)
_LAZY_WRAPPERS = frozenset({"builtins.enumerate", "builtins.zip", "builtins.iter", "builtins.reversed"})


def _consumed_whole(ctx, expr: cst.CSTNode, depth: int = 0) -> bool:
    """Is the iterator ``expr`` iterated to the end (a ``for`` loop, ``list(...)``)?"""
    if depth > 4:
        return False
    parent = ctx.parent(expr)
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is expr:
        return True
    if isinstance(parent, cst.Arg) and parent.keyword is None:
        outer = ctx.parent(parent)
        if isinstance(outer, cst.Call):
            name = ctx.call_name(outer)
            if name in _WHOLE_CONSUMERS:
                return True
            if name in _LAZY_WRAPPERS:
                return _consumed_whole(ctx, outer, depth + 1)
        return False
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        name = parent.targets[0].target.value
        func = ctx.enclosing_function(expr)
        if func is None:
            return False
        for node in ctx.nodes(cst.Name):
            if node.value == name and node is not parent.targets[0].target and ctx.enclosing_function(node) is func:
                if _consumed_whole(ctx, node, depth + 1):
                    return True
    return False


# ---------------------------------------------------------------------------- DSL201

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
        if _unresolved_receiver(ctx, func):
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

    A scan of a per-sample folder (`os.listdir(self.dirs[idx])`) is the
    dataset's work and is not reported, nor is a scan in a lazy once-per-worker
    block (`if self.files is None: self.files = os.listdir(...)`, or after an
    early `if self.loaded: return` in a function that sets `self.loaded`) or in
    an `lru_cache`d helper.

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
    - `../shared/PITFALLS.md` PERF-1 (measured per-item and per-epoch ratios)
    - PyTorch tutorial "Writing Custom Datasets, DataLoaders and Transforms": index files in `__init__`
    """

    code = "DSL201"
    name = "per-sample-directory-scan"
    symptom = Symptom("time_ratio", "per-sample time, bad / good", exclusive=True)
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
        # a glob module that is not pathlib (resolved receiver) and a per-sample pattern
        """
        import glob2
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, idx):
                a = glob2.glob("x/*")
                b = self.root.glob(f"{self.ids[idx]}_*.png")
                return a, b
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
        for call in _candidates(ctx, SCAN_TAILS):
            name = _scan_name(ctx, call)
            if name is None or _has_star(call) or not df.per_item(ctx, call):
                continue
            if df.inputs_depend(ctx, call):
                continue
            found.append(
                (
                    call,
                    f"`{_call_text(ctx, call, name)}` lists the same directory again for every sample "
                    f"({_where(ctx, call)}): a directory scan per item measured ~10,000x slower than listing "
                    "it once in `__init__`",
                )
            )
        for node, message in _outermost(ctx, found):
            yield self.report(node, message)


# ---------------------------------------------------------------------------- DSL202

PANDAS_READERS = frozenset(
    {
        "read_csv",
        "read_table",
        "read_fwf",
        "read_json",
        "read_parquet",
        "read_pickle",
        "read_excel",
        "read_feather",
        "read_hdf",
        "read_orc",
        "read_sql",
        "read_sql_table",
        "read_sql_query",
        "read_xml",
        "read_stata",
        "read_sas",
        "read_spss",
        "read_html",
    }
)
YAML_LOADERS = ("load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all", "full_load_all", "unsafe_load_all")

# qualified name -> how its source argument is given
RELOADERS: Dict[str, str] = {
    "json.load": "handle",
    "pickle.load": "handle",
    "json.loads": "text",
    "pickle.loads": "text",
    "csv.reader": "csv",
    "csv.DictReader": "csv",
    "numpy.load": "path",
    "numpy.loadtxt": "path",
    "numpy.genfromtxt": "path",
    "torch.load": "path",
}
RELOADERS.update({f"yaml.{name}": "stream" for name in YAML_LOADERS})
RELOADERS.update({f"pandas.{name}": "path" for name in PANDAS_READERS})
RELOAD_TAILS = frozenset(q.rsplit(".", 1)[1] for q in RELOADERS)


def _display(qualified: str) -> str:
    module, _, name = qualified.rpartition(".")
    short = {"pandas": "pd", "numpy": "np"}.get(module, module)
    return f"{short}.{name}()"


SOURCE_KEYWORDS = (
    "fp", "s", "stream", "file", "f", "fname", "filepath_or_buffer", "path", "io", "path_or_buf", "csvfile", "data", "sql",
)


def _reload_cost(qualified: str) -> str:
    if qualified.startswith(("pandas.", "csv.", "numpy.loadtxt", "numpy.genfromtxt")):
        return "a whole-file CSV parse per item measured ~100,000x slower than loading it once in `__init__`"
    if qualified.startswith(("json.", "yaml.", "pickle.")):
        return "re-loading a 20k-record JSON per item measured ~48,000x slower than loading it once in `__init__`"
    return "every item pays for reading and deserialising the whole file, which `__init__` would pay once"


def _reload_problem(ctx, call: cst.Call, qualified: str) -> bool:
    kind = RELOADERS[qualified]
    if _has_star(call):
        return False
    source = _positional_or_keyword(call, 0, *SOURCE_KEYWORDS)
    if source is None:
        return False
    expr = source.value
    # every other argument (skiprows=idx, a per-sample query) must be index-invariant too
    if any(df.depends_on_sample(ctx, arg.value) for arg in call.args if arg is not source):
        return False
    if kind == "path" and df.depends_on_sample(ctx, expr):
        return False
    if kind == "handle":
        return _fresh_handle(ctx, expr)
    if kind == "text":
        return _whole_file_text(ctx, expr)
    if kind == "stream":
        return _fresh_handle(ctx, expr) or _whole_file_text(ctx, expr)
    if kind == "csv":
        return _fresh_handle(ctx, expr) and _consumed_whole(ctx, call)
    # a path (or a handle) of a fixed file
    if _opener_call(ctx, expr) is not None or (isinstance(expr, cst.Name) and _opened_outside_sample(ctx, expr)):
        return _fresh_handle(ctx, expr)
    if qualified == "numpy.load":
        mmap = _positional_or_keyword(call, 1, "mmap_mode")
        if mmap is not None and ctx.literal(mmap.value) is not None:
            return False  # a memory map: opening it is cheap, pages load on access
    if qualified == "torch.load":
        mmap = _positional_or_keyword(call, 99, "mmap")
        if mmap is not None and ctx.literal(mmap.value) is not False:
            return False
    return True


class PerSampleIndexReload(Rule):
    """
    ## What it does
    Flags reads and parses of a file that is the same for every sample, done in
    per-sample code: `json.load` (and `json.loads(open(p).read())`), `pd.read_*`,
    `yaml.load`/`safe_load`/`full_load`, `pickle.load`, `np.load`/`np.loadtxt`/
    `np.genfromtxt` and `torch.load` of a fixed path, and `csv.reader`/`DictReader`
    iterated over a whole file.

    Reads whose path depends on the sample (`torch.load(self.files[idx])`), a
    handle opened once and read incrementally, memory maps
    (`np.load(p, mmap_mode="r")`, `torch.load(p, mmap=True)`), lazy
    once-per-worker loads (`if self.df is None: self.df = pd.read_csv(...)`, or
    after an early `if self.loaded: return` in a function that sets
    `self.loaded`) and `lru_cache`d helpers are not reported.

    ## Why is this bad?
    The whole file is read and parsed again for every item, although the result
    never changes. Measured on torch 2.13: re-loading a 20k-record JSON annotation
    file per item took 10,165 µs against 0.2 µs for indexing it once loaded in
    `__init__` (about 48,000x); a CSV parse of the whole file about 104,000x. A
    2-worker DataLoader epoch was 47-92x slower.

    ## Example
    ```python
    class Labeled(Dataset):
        def __getitem__(self, idx):
            labels = pd.read_csv(self.csv_path)
            return self.images[idx], labels.loc[idx, "label"]
    ```

    ## Use instead
    ```python
    class Labeled(Dataset):
        def __init__(self, csv_path, images):
            self.labels = pd.read_csv(csv_path)["label"].to_numpy()
            self.images = images

        def __getitem__(self, idx):
            return self.images[idx], self.labels[idx]
    ```

    ## References
    - `../shared/PITFALLS.md` PERF-1 (measured per-item and per-epoch ratios)
    """

    code = "DSL202"
    name = "per-sample-index-reload"
    symptom = Symptom("time_ratio", "per-sample time, bad / good", exclusive=True)
    level = WARNING
    summary = "A file that is the same for every sample is read and parsed again for every sample"
    help = "Load the file once in `__init__` (or lazily once per worker) and index the loaded data"

    valid = (
        # index-dependent paths: per-sample files
        """
        import json
        import numpy as np
        import torch
        from torch.utils.data import Dataset

        class PerFile(Dataset):
            def __getitem__(self, idx):
                x = torch.load(self.files[idx])
                path = self.ann_paths[idx]
                with open(path) as f:
                    ann = json.load(f)
                y = np.load(f"{self.root}/{idx:06d}.npy")
                return x, ann, y
        """,
        # loaded once in __init__, lazily once per worker, memory-mapped, cached helper
        """
        import functools
        import pandas as pd
        import numpy as np
        from torch.utils.data import Dataset

        @functools.lru_cache()
        def labels(path):
            return pd.read_csv(path)

        class D(Dataset):
            def __init__(self, csv_path):
                self.df = pd.read_csv(csv_path)
                self.csv_path = csv_path
                self.table = None

            def __getitem__(self, idx):
                if self.table is None:
                    self.table = pd.read_parquet(self.parquet_path)
                arr = np.load(self.npy_path, mmap_mode="r")
                return self.df.iloc[idx], self.table.iloc[idx], arr[idx], labels(self.csv_path)
        """,
        # one handle opened before the loop and read record by record in __iter__
        """
        import json
        import pickle
        from torch.utils.data import IterableDataset

        class Records(IterableDataset):
            def __iter__(self):
                with open(self.path, "rb") as f:
                    while True:
                        try:
                            yield pickle.load(f)
                        except EOFError:
                            return

        class Lines(IterableDataset):
            def __iter__(self):
                with open(self.path) as f:
                    for line in f:
                        yield json.loads(line)
        """,
        # a csv row lookup that does not read the file to the end, and non-dataset code
        """
        import csv
        import json
        from torch.utils.data import Dataset

        class Header(Dataset):
            def __getitem__(self, idx):
                with open(self.path) as f:
                    header = next(csv.reader(f))
                return header, self.rows[idx]

        def load_config(path):
            with open(path) as f:
                return json.load(f)
        """,
        # a helper's parameter is unknown; a sample-dependent skiprows
        """
        import pandas as pd
        from torch.utils.data import Dataset

        def read_table(path):
            return pd.read_csv(path)

        class D(Dataset):
            def __getitem__(self, idx):
                row = pd.read_csv(self.csv_path, skiprows=idx, nrows=1)
                return read_table(self.paths[idx]), row
        """,
    )
    invalid = (
        """
        import json
        import pandas as pd
        from json import load as jload
        import numpy as np
        from torch.utils.data import Dataset

        class Labeled(Dataset):
            def __init__(self, root, csv_path):
                self.root = root
                self.csv_path = csv_path

            def __getitem__(self, idx):
                labels = pd.read_csv(self.csv_path)  # expect: DSL202
                with open(self.root + "/ann.json") as f:
                    ann = jload(f)  # expect: DSL202
                meta = json.loads(open(self.meta_path).read())  # expect: DSL202
                mean = np.loadtxt(self.mean_file)  # expect: DSL202
                return labels.iloc[idx], ann[idx], meta, mean
        """,
        """
        import csv
        import pickle
        import torch
        import yaml
        from pathlib import Path
        import torch.utils.data as tud

        class Cfg(tud.Dataset):
            def __getitem__(self, index):
                cfg = yaml.safe_load(Path(self.cfg_path).read_text())  # expect: DSL202
                with open(self.index_file, "rb") as fh:
                    index = pickle.load(fh)  # expect: DSL202
                with open(self.labels_csv) as f:
                    rows = list(csv.DictReader(f))  # expect: DSL202
                stats = torch.load(  # expect: DSL202
                    self.stats_path,
                )
                return cfg, index[index], rows[index], stats
        """,
        # a module-level helper reached from __getitem__
        """
        import json
        from torch.utils.data import Dataset

        ANNOTATIONS = "annotations.json"

        def load_annotations():
            with open(ANNOTATIONS) as f:
                return json.load(f)  # expect: DSL202

        class Coco(Dataset):
            def __getitem__(self, idx):
                return load_annotations()["images"][idx]
        """,
        # __getitem__ in the base class file, the reload in the subclass file
        {
            "base.py": """
                import torch.utils.data as data

                class BaseSet(data.Dataset):
                    def __getitem__(self, idx):
                        return self.read_label(idx)
            """,
            "labels.py": """
                import pandas
                from base import BaseSet

                class LabelSet(BaseSet):
                    def read_label(self, idx):
                        table = pandas.read_json(self.label_file)  # expect: DSL202
                        return table["label"][idx]
            """,
        },
    )

    def check(self, ctx):
        found = []
        for call in _candidates(ctx, RELOAD_TAILS | PANDAS_READERS):
            qualified = ctx.call_name(call)
            if qualified not in RELOADERS or not df.per_item(ctx, call):
                continue
            if not _reload_problem(ctx, call, qualified):
                continue
            found.append(
                (
                    call,
                    f"`{_display(qualified)}` reads and parses the same file again for every sample "
                    f"({_where(ctx, call)}): {_reload_cost(qualified)}",
                )
            )
        for node, message in _outermost(ctx, found):
            yield self.report(node, message)


# ---------------------------------------------------------------------------- DSL203

NOT_MODULES = frozenset({"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "LinearCrossEntropyOptions"})
MODULE_ROOTS = frozenset(
    {
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "pytorch_lightning.LightningModule",
        "transformers.PreTrainedModel",
    }
)
TRANSFORM_PREFIXES = ("torchvision.transforms.", "albumentations.")
TRANSFORM_CONTAINERS = frozenset({"Compose", "RandomApply", "RandomChoice", "RandomOrder", "OneOf", "SomeOf", "Sequential"})
NOT_TRANSFORMS = frozenset({"InterpolationMode"})
TOKENIZER_CALLS = frozenset(
    {
        "torchtext.vocab.build_vocab_from_iterator",
        "torchtext.vocab.vocab",
        "torchtext.vocab.Vocab",
        "torchtext.vocab.GloVe",
        "torchtext.vocab.FastText",
        "torchtext.vocab.Vectors",
        "torchtext.vocab.CharNGram",
        "torchtext.data.utils.get_tokenizer",
        "torchtext.data.get_tokenizer",
        "spacy.load",
        "spacy.blank",
        "transformers.pipeline",
        "tokenizers.Tokenizer.from_file",
        "sentencepiece.SentencePieceProcessor",
        "collections.Counter",
    }
)


def torch_module_class(qualified: Optional[str]) -> bool:
    """``torch.nn.Linear``, ``torch.nn.modules.conv.Conv2d``: torch's own ``nn.Module`` classes."""
    if not qualified or not qualified.startswith("torch.nn."):
        return False
    parts = qualified[len("torch.nn.") :].split(".")
    last = parts[-1]
    if not last[:1].isupper() or last in NOT_MODULES:
        return False
    return len(parts) == 1 or parts[0] == "modules"


_NOT_MODEL_BUILDERS = frozenset({"get_weight", "get_model_weights", "list_models", "get_model_builder", "Weights", "WeightsEnum"})


def model_builder(qualified: str) -> bool:
    """``torchvision.models.resnet50()``, ``timm.create_model()``: functions that build an ``nn.Module``."""
    if qualified in ("timm.create_model", "timm.models.create_model"):
        return True
    if not qualified.startswith("torchvision.models."):
        return False
    last = qualified.rsplit(".", 1)[-1]
    return not (last in _NOT_MODEL_BUILDERS or last.endswith("_Weights") or "feature_extraction" in qualified)


def _transform_class(qualified: str) -> Optional[str]:
    if not qualified.startswith(TRANSFORM_PREFIXES):
        return None
    parts = qualified.split(".")
    last = parts[-1]
    if not last[:1].isupper() or last in NOT_TRANSFORMS or "functional" in parts:
        return None
    return last


class _SetupState:
    def __init__(self) -> None:
        self.module_class: Dict[str, bool] = {}


_SETUP: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _project_module_class(ctx, qualified: str) -> bool:
    state = _SETUP.get(ctx)
    if state is None:
        state = _SETUP[ctx] = _SetupState()
    known = state.module_class.get(qualified)
    if known is None:
        bases = ctx.view.external_bases(qualified)
        known = bool(bases) and any(torch_module_class(b) or b in MODULE_ROOTS for b in bases)
        state.module_class[qualified] = known
    return known


def _setup_kind(ctx, call: cst.Call) -> Optional[Tuple[str, str]]:
    """(kind, display) of an index-invariant construction, or None."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained":
        return "pretrained", _call_text(ctx, call)
    qualified = ctx.call_name(call)
    if not qualified or qualified.startswith("builtins."):
        return None
    transform = _transform_class(qualified)
    if transform is not None:
        if not call.args and transform not in TRANSFORM_CONTAINERS:
            return None  # `ToTensor()`: nothing is set up
        return "transform", _call_text(ctx, call, qualified)
    if qualified in TOKENIZER_CALLS:
        if not call.args:
            return None
        if qualified == "collections.Counter" and ctx.literal(call.args[0].value) is not UNKNOWN:
            return None
        return ("vocab" if qualified == "collections.Counter" else "tokenizer"), _call_text(ctx, call, qualified)
    if qualified.startswith("transformers.") and "Tokenizer" in qualified.rsplit(".", 1)[-1] and call.args:
        return "tokenizer", _call_text(ctx, call, qualified)
    if torch_module_class(qualified) or model_builder(qualified):
        return "module", _call_text(ctx, call, qualified)
    return None


def _project_module_kind(ctx, call: cst.Call) -> Optional[Tuple[str, str]]:
    """A project class derived from ``nn.Module`` (in any file), constructed (asks the project index)."""
    qualified = ctx.call_name(call)
    if not qualified or qualified.startswith("builtins.") or not qualified.rsplit(".", 1)[-1][:1].isupper():
        return None
    if _project_module_class(ctx, qualified):
        return "module", _call_text(ctx, call, qualified)
    return None


def _maybe_model_builder(call: cst.Call) -> bool:
    """Cheap pre-check: ``models.resnet50(...)``, ``timm.create_model(...)`` (resolved later)."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value == "create_model" or (
            isinstance(func.value, (cst.Name, cst.Attribute)) and _last_name(func.value) in ("models", "tvm", "torchvision")
        )
    return isinstance(func, cst.Name)


def _last_name(node) -> Optional[str]:
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def _vocab_comprehension(ctx, comp: cst.DictComp) -> bool:
    """``{tok: i for i, tok in enumerate(self.tokens)}`` over an index-invariant collection."""
    loop = comp.for_in
    if loop.inner_for_in is not None or loop.ifs:
        return False
    if not isinstance(loop.iter, cst.Call) or ctx.call_name(loop.iter) != "builtins.enumerate" or not loop.iter.args:
        return False
    target = loop.target
    if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
        return False
    names = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
    if len(names) != 2:
        return False
    key, value = comp.key, comp.value
    if not (isinstance(key, cst.Name) and isinstance(value, cst.Name) and {key.value, value.value} == set(names)):
        return False
    return not df.depends_on_sample(ctx, loop.iter)


_SETUP_MESSAGES = {
    "module": (
        "constructs the same `nn.Module` for every sample",
        "parameter allocation and initialisation per item, measured 55x slower per item for a small model "
        "than building it once in `__init__`",
    ),
    "pretrained": (
        "loads the same pretrained files for every sample",
        "weights or vocabulary files are read and deserialised from disk per item; load them once in `__init__`",
    ),
    "transform": (
        "builds the same transform pipeline for every sample",
        "its construction is repeated per item; build it once in `__init__`",
    ),
    "tokenizer": (
        "builds the same tokenizer/vocabulary for every sample",
        "measured 5,600x slower per item than building it once in `__init__`",
    ),
    "vocab": (
        "builds the same vocabulary from a fixed collection for every sample",
        "the cost grows with the collection, measured 5,600x slower per item than building it once in `__init__`",
    ),
}


def _setup_message(text: str, kind: str, where: str) -> str:
    what, cost = _SETUP_MESSAGES[kind]
    return f"`{text}` {what} ({where}): {cost}"
SETUP_TAILS = frozenset(
    {"from_pretrained", "Counter", "pipeline", "from_file", "load", "blank", "get_tokenizer", "build_vocab_from_iterator"}
    | {"vocab", "Vocab", "SentencePieceProcessor", "GloVe", "FastText", "Vectors", "CharNGram"}
)


class PerSampleSetup(Rule):
    """
    ## What it does
    Flags construction work that is the same for every sample, done in
    per-sample code: `nn.Module` construction (torch's own `torch.nn` classes
    and project classes derived from `nn.Module`, across files), any
    `*.from_pretrained(...)`, torchvision/albumentations transform pipelines
    (`T.Compose(...)`), and tokenizer/vocabulary building (`spacy.load`,
    `torchtext` vocabularies, `Counter` over a fixed corpus,
    `{tok: i for i, tok in enumerate(tokens)}`).

    Constructions whose arguments depend on the sample
    (`T.RandomCrop(self.sizes[idx])`, `nn.Linear(x.shape[-1], 8)`) or on a
    random draw are not reported, nor are argument-less transforms such as
    `T.ToTensor()`, or `re.compile` (Python caches compiled patterns: measured
    0.7 µs vs 0.4 µs, a myth).

    ## Why is this bad?
    The object is rebuilt for every item although it never changes. Measured on
    torch 2.13: building a small `nn.Module` per item was 55x slower per item
    (7.4x per 2-worker epoch); building a vocabulary/tokenizer per item was
    5,600x slower (10.3x per epoch). `from_pretrained` reads and deserialises
    weights or vocabulary files from disk on every item.

    ## Example
    ```python
    class Embedded(Dataset):
        def __getitem__(self, idx):
            encoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU())
            with torch.no_grad():
                return encoder(self.features[idx])
    ```

    ## Use instead
    ```python
    class Embedded(Dataset):
        def __init__(self, features):
            self.features = features
            self.encoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU())

        def __getitem__(self, idx):
            with torch.no_grad():
                return self.encoder(self.features[idx])
    ```

    ## References
    - `../shared/PITFALLS.md` PERF-1 (measured per-item and per-epoch ratios; `re.compile` is a myth)
    """

    code = "DSL203"
    name = "per-sample-setup"
    symptom = Symptom("time_ratio", "per-sample time, bad / good", exclusive=True)
    level = WARNING
    summary = "An object that is the same for every sample (model, transform, tokenizer) is built for every sample"
    help = "Build it once in `__init__` (or lazily once per worker) and reuse it"

    valid = (
        # sample-dependent and random constructions, re.compile, argument-less transforms
        """
        import random
        import re
        import torch.nn as nn
        import torchvision.transforms as T
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, idx):
                x = self.data[idx]
                crop = T.RandomCrop(self.sizes[idx])
                scale = T.Resize(random.choice(self.scales))
                proj = nn.Linear(x.shape[-1], 8)
                pattern = re.compile(r"(\\d+)_(\\w+)")
                return proj(T.ToTensor()(crop(scale(x)))), pattern
        """,
        # built once in __init__, lazily per worker, or in a cached helper
        """
        import functools
        import torch.nn as nn
        from transformers import AutoTokenizer
        from torchvision import transforms
        from torch.utils.data import Dataset

        @functools.lru_cache(maxsize=1)
        def tokenizer(name):
            return AutoTokenizer.from_pretrained(name)

        class D(Dataset):
            def __init__(self):
                self.tf = transforms.Compose([transforms.Resize(256), transforms.ToTensor()])
                self.encoder = nn.Sequential(nn.Linear(4, 4))
                self.model = None

            def __getitem__(self, idx):
                if self.model is None:
                    self.model = nn.Linear(4, 4)
                tok = tokenizer("bert-base-uncased")
                return self.tf(self.images[idx]), tok(self.texts[idx])
        """,
        # a project class that is not an nn.Module, and non-dataset code
        {
            "things.py": """
                class Record:
                    def __init__(self, path):
                        self.path = path
            """,
            "ds.py": """
                import torch.nn as nn
                from torch.utils.data import Dataset
                from things import Record

                class D(Dataset):
                    def __getitem__(self, idx):
                        return Record(self.root)

                def make_model():
                    return nn.Linear(4, 4)
            """,
        },
    )
    invalid = (
        """
        import torch.nn as nn
        import torchvision.transforms as T
        from torch import nn as tnn
        from transformers import AutoTokenizer
        from torchvision.models import resnet18
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, idx):
                tf = T.Compose([T.Resize(self.size), T.ToTensor()])  # expect: DSL203
                tok = AutoTokenizer.from_pretrained(self.model_name)  # expect: DSL203
                head = nn.Sequential(  # expect: DSL203
                    nn.Linear(16, 16),
                    tnn.ReLU(),
                )
                norm = tnn.LayerNorm(16)  # expect: DSL203
                backbone = resnet18(weights=None)  # expect: DSL203
                return head(norm(tf(self.images[idx]))), tok(self.texts[idx]), backbone
        """,
        # vocab building in a module-level helper reached from __getitem__
        """
        from collections import Counter
        from torch.utils.data import Dataset

        CORPUS = ["a b", "b c"]

        def build_vocab():
            counts = Counter(w for line in CORPUS for w in line.split())  # expect: DSL203
            words = sorted(counts)
            return {w: i for i, w in enumerate(words)}  # expect: DSL203

        class Text(Dataset):
            def __getitem__(self, idx):
                vocab = build_vocab()
                return [vocab[w] for w in self.lines[idx].split()]
        """,
        # a project nn.Module (defined in another file) built per sample by a subclass's helper
        {
            "models.py": """
                import torch.nn as nn

                class Backbone(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(8, 8)

                class Small(Backbone):
                    pass
            """,
            "base.py": """
                from torch.utils.data import Dataset

                class Base(Dataset):
                    def __getitem__(self, idx):
                        return self.features(idx)
            """,
            "feats.py": """
                from base import Base
                from models import Small

                class Feats(Base):
                    def features(self, idx):
                        net = Small()  # expect: DSL203
                        return net(self.data[idx])
            """,
        },
    )

    def check(self, ctx):
        found = []
        for comp in ctx.nodes(cst.DictComp):
            if df.per_item(ctx, comp) and _vocab_comprehension(ctx, comp):
                found.append((comp, _setup_message("{token: index}", "vocab", _where(ctx, comp))))
        aliases = ctx.names.call_tails(SETUP_TAILS)
        for call in ctx.nodes(cst.Call):
            tail = _tail(call)
            if tail is None or not (tail in aliases or tail[:1].isupper() or _maybe_model_builder(call)):
                continue
            if _has_star(call):
                continue
            kind = _setup_kind(ctx, call)  # resolves names only; the project index is asked last
            if kind is None and tail[:1].isupper() and df.per_item(ctx, call):
                kind = _project_module_kind(ctx, call)
            elif kind is not None and not df.per_item(ctx, call):
                continue
            if kind is None or df.inputs_depend(ctx, call):
                continue
            kind_name, text = kind
            found.append((call, _setup_message(text, kind_name, _where(ctx, call))))
        for node, message in _outermost(ctx, found):
            yield self.report(node, message)


# ---------------------------------------------------------------------------- DSL204

CUDA_SAFE = frozenset(
    {
        "is_available",
        "is_initialized",
        "device_count",
        "get_arch_list",
        "get_gencode_flags",
        "manual_seed",
        "manual_seed_all",
        "seed",
        "seed_all",
        "empty_cache",
        "memory_stats",
        "memory_stats_as_nested_dict",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "memory_cached",
        "max_memory_cached",
        "memory_usage",
        "utilization",
        "temperature",
        "power_draw",
        "clock_rate",
        "device_memory_used",
        "is_tf32_supported",
    }
)
CUDA_TAILS = frozenset({"cuda", "to", "pin_memory"})
FORK_ERROR = (
    "`RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
    "you must use the 'spawn' start method`"
)


def _cuda_device(ctx, expr, depth: int = 0) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")`` or a name bound only to one of them."""
    if expr is None or depth > 3:
        return False
    value = ctx.literal(expr)
    if isinstance(value, str):
        return value == "cuda" or value.startswith("cuda:")
    if isinstance(expr, cst.Call) and ctx.call_name(expr) == "torch.device" and expr.args:
        first = ctx.literal(expr.args[0].value)
        return isinstance(first, str) and (first == "cuda" or first.startswith("cuda:"))
    if isinstance(expr, cst.Name):
        values = _bindings(ctx, expr) if ctx.enclosing_function(expr) is not None else None
        if values is None:
            local = df.bound_values(ctx, expr)
            if local:
                return False
            module_value = ctx.module_constant(expr)
            values = [module_value] if module_value is not None else None
        return bool(values) and all(_cuda_device(ctx, v, depth + 1) for v in values)
    return False


def _cuda_use(ctx, call: cst.Call) -> Optional[str]:
    """What makes ``call`` touch CUDA, as it will be shown, or None."""
    func = call.func
    qualified = ctx.call_name(call)
    if qualified is not None and qualified.startswith("torch.cuda."):
        rest = qualified[len("torch.cuda.") :]
        if rest.split(".")[0] in ("nvtx", "amp") or rest in CUDA_SAFE:
            return None
        return f"`{qualified}()`"
    if isinstance(func, cst.Attribute) and qualified is None and _unresolved_receiver(ctx, func):
        method = func.attr.value
        if method == "cuda":
            return "`.cuda()`"
        if method == "pin_memory" and not call.args:
            return "`.pin_memory()`"
        if method == "to":
            device = _positional_or_keyword(call, 0, "device")
            if device is not None and _cuda_device(ctx, device.value):
                return f"`.to({ctx.code(device.value).strip()})`" if len(ctx.code(device.value)) < 30 else "`.to(cuda)`"
    for arg in call.args:
        if arg.keyword is None:
            continue
        if arg.keyword.value == "device" and _cuda_device(ctx, arg.value):
            return f"`device={ctx.code(arg.value).strip()}`" if len(ctx.code(arg.value)) < 30 else "`device=cuda`"
        if (
            arg.keyword.value == "pin_memory"
            and qualified is not None
            and qualified.startswith("torch.")
            and not qualified.startswith("torch.utils.data")
            and ctx.literal(arg.value) is True
        ):
            return "`pin_memory=True`"
    return None


def _collate_lambdas(ctx) -> Set[int]:
    """Lambdas passed as ``collate_fn`` to a DataLoader whose ``num_workers`` is not a literal 0."""
    found = set()
    for bound in ctx.dataloader_calls():
        expr = bound.expr("collate_fn")
        if isinstance(expr, cst.Lambda) and ctx.value(bound, "num_workers") != 0:
            found.add(id(expr))
    return found


def _workers_possible(loaders: List[dict]) -> bool:
    """Some loader may run workers (``num_workers`` not a literal 0)."""
    return any(facts.get("num_workers") != 0 for facts in loaders)


def _cuda_context(ctx, node, collate_lambdas: Set[int]) -> Optional[Tuple[str, str]]:
    """("sample" | "init" | "collate", where) for a node in code that runs in workers or builds a dataset."""
    for ancestor in ctx.ancestors(node):
        if id(ancestor) in collate_lambdas:
            return "collate", "a `collate_fn` lambda"
    func = ctx.enclosing_function(node)
    while func is not None:
        owner = ctx.method_class(func)
        dataset = owner is not None and ctx.class_kind(owner)
        name = func.name.value
        if ctx.per_sample_mode(func) or (dataset and name in ENTRY_METHODS):
            if dataset:
                loaders = ctx.view.loaders_over(ctx.qualname_of_def(owner))
                if loaders and not _workers_possible(loaders):
                    return None  # every DataLoader over it loads in the main process
            label = ctx.per_sample_label(func) or (owner.name.value if owner is not None else name)
            return "sample", f"`{name}` of `{label}`"
        if dataset and name == "__init__":
            loaders = ctx.view.loaders_over(ctx.qualname_of_def(owner))
            if loaders and not _workers_possible(loaders):
                return None
            return "init", f"`{owner.name.value}.__init__`"
        loaders = ctx.view.collate_loaders(ctx.qualname_of_def(func))
        if loaders:
            if not _workers_possible(loaders):
                return None
            return "collate", f"`{name}` is the `collate_fn` of a DataLoader"
        func = ctx.enclosing_function(func)
    return None


class CudaInDataset(Rule):
    """
    ## What it does
    Flags CUDA work in code that runs in DataLoader worker processes: `.cuda()`,
    `.to("cuda")`/`.to(torch.device("cuda"))`, a `device="cuda"` argument,
    `torch.cuda.*` calls that initialise CUDA, and `.pin_memory()`, inside
    per-sample dataset code (`__getitem__`, `__iter__` and what they call), in a
    function used as a DataLoader's `collate_fn`, and (at warning level) in a
    dataset's `__init__`.

    Not reported: `torch.cuda.is_available()`, `device_count()`,
    `manual_seed*()` and the other queries that do not initialise CUDA; device
    values that are not literals (`.to(self.device)`: unknown is not wrong);
    datasets or collate functions whose every DataLoader has `num_workers=0`;
    and test code (a `tests/` directory, `test_*.py`), whose CUDA datasets are
    there to exercise CUDA in workers (under `spawn`).

    ## Why is this bad?
    DataLoader workers are forked from the main process (the Linux default).
    Once the main process has initialised CUDA (the model is on the GPU, or a
    previous epoch moved a batch there), CUDA work in a forked worker fails with
    `RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA
    with multiprocessing, you must use the 'spawn' start method`
    (torch/cuda/__init__.py). With `spawn` each worker creates its own CUDA
    context (hundreds of MiB of GPU memory each) and the batches are sent back
    through CUDA IPC. A dataset that moves data to the GPU in `__init__`
    initialises CUDA in the main process before the workers fork, and its CUDA
    tensors cannot be used in them. (GPU only: a CPU-only torch fails earlier
    with `AssertionError: Torch not compiled with CUDA enabled`.)

    ## Example
    ```python
    class Features(Dataset):
        def __getitem__(self, idx):
            return self.data[idx].cuda()

    loader = DataLoader(Features(), batch_size=32, num_workers=4)
    ```

    ## Use instead
    ```python
    class Features(Dataset):
        def __getitem__(self, idx):
            return self.data[idx]

    loader = DataLoader(Features(), batch_size=32, num_workers=4, pin_memory=True)
    for batch in loader:
        batch = batch.cuda(non_blocking=True)
    ```

    ## References
    - `../shared/PITFALLS.md` MP-1
    - pytorch/pytorch#40403, #2971, #77159
    - PyTorch docs, "Multiprocessing best practices": CUDA in subprocesses
    """

    code = "DSL204"
    name = "cuda-in-dataset"
    symptom = Symptom("cuda_fork", "Cannot re-initialize CUDA in forked subprocess (fork workers after CUDA init)", gpu=True)
    level = ERROR
    summary = "CUDA is used in dataset code or a `collate_fn`, which run in forked DataLoader workers"
    help = (
        "Return CPU tensors from the dataset and move each batch to the GPU in the training loop "
        "(`pin_memory=True` + `.cuda(non_blocking=True)`)"
    )

    valid = (
        # queries that do not initialise CUDA; unknown devices; CPU code
        """
        import torch
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, device):
                self.device = device
                self.use_cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0

            def __getitem__(self, idx):
                torch.cuda.manual_seed(idx)
                x = torch.zeros(3, device="cpu")
                return x.to(self.device), x.to(torch.float16)
        """,
        # the training loop moves batches; non-dataset code; loaders that never fork workers
        """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class D(Dataset):
            def __getitem__(self, idx):
                return self.data[idx].cuda()

        def collate(batch):
            return torch.stack(batch).to("cuda")

        def train(model, ds):
            loader = DataLoader(D(), batch_size=4, num_workers=0)
            other = DataLoader(ds, collate_fn=collate)
            for batch in loader:
                model(batch.cuda(non_blocking=True))
        """,
        # pinning or CUDA setup in __init__ (main process) without CUDA data
        """
        import torch
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, data):
                torch.cuda.set_device(0)
                self.data = torch.as_tensor(data).pin_memory()
                self.cpu = torch.as_tensor(data).to("cpu")

            def __getitem__(self, idx):
                return self.data[idx]
        """,
        # a custom batch's pin_memory (called by the DataLoader's pin thread in the main process)
        """
        import torch
        from torch.utils.data import DataLoader

        class Batch:
            def __init__(self, data):
                self.inp = torch.stack(data)

            def pin_memory(self):
                self.inp = self.inp.pin_memory()
                return self

        def collate(batch):
            return Batch(batch)

        loader = DataLoader(list(range(8)), collate_fn=collate, num_workers=2, pin_memory=True)
        """,
    )
    invalid = (
        """
        import torch
        from torch.utils.data import Dataset

        DEVICE = torch.device("cuda")

        class D(Dataset):
            def __init__(self, data):
                self.data = torch.as_tensor(data).cuda()  # expect: DSL204

            def __getitem__(self, idx):
                x = self.data[idx].to("cuda:0", non_blocking=True)  # expect: DSL204
                y = torch.zeros(3, device="cuda")  # expect: DSL204
                z = x.to(DEVICE)  # expect: DSL204
                torch.cuda.synchronize()  # expect: DSL204
                return x.pin_memory(), y, z  # expect: DSL204
        """,
        # collate_fn in another file, an iterable dataset, a lazily built CUDA model
        {
            "collate.py": """
                import torch

                def to_gpu(batch):
                    return torch.stack(batch).cuda()  # expect: DSL204
            """,
            "train.py": """
                import torch
                import torch.utils.data as tud
                from collate import to_gpu

                class Stream(tud.IterableDataset):
                    def __iter__(self):
                        for x in self.items:
                            yield torch.tensor(x, device=torch.device("cuda"))  # expect: DSL204

                loader = tud.DataLoader(Stream(), collate_fn=to_gpu, num_workers=4)
                fast = tud.DataLoader(Stream(), collate_fn=lambda b: [x.cuda() for x in b], num_workers=2)  # expect: DSL204
            """,
        },
        # __getitem__ in a base class file, the CUDA helper in the subclass file
        {
            "base.py": """
                from torch.utils.data import Dataset

                class Base(Dataset):
                    def __getitem__(self, idx):
                        return self.prepare(self.items[idx])
            """,
            "gpu.py": """
                from base import Base

                class Gpu(Base):
                    def prepare(self, item):
                        if self.model is None:
                            self.model = self.build()
                        return item.to(device="cuda")  # expect: DSL204
            """,
        },
    )

    def check(self, ctx):
        lambdas = _collate_lambdas(ctx)
        cuda_imports = any(
            target.startswith("torch.cuda") for targets in ctx.names.imports.values() for target in targets
        )
        seen_statements: Set[int] = set()
        for call in ctx.nodes(cst.Call):
            if not _may_touch_cuda(call, cuda_imports):
                continue
            what = _cuda_use(ctx, call)
            if what is None:
                continue
            context = _cuda_context(ctx, call, lambdas)
            if context is None or is_test_code(ctx, call):
                continue  # a test's dataset that uses CUDA is there to exercise it (under spawn)
            statement = _statement(ctx, call)
            if statement is not None:
                if id(statement) in seen_statements:
                    continue  # one finding per statement
                seen_statements.add(id(statement))
            kind, where = context
            if kind == "init" and not _puts_data_on_cuda(what):
                continue  # pinning or a CUDA query in the main process: workers may never touch CUDA
            if kind == "init":
                yield self.report(
                    call,
                    f"{what} in {where}: building the dataset initialises CUDA in the main process and puts "
                    f"CUDA data on it; forked DataLoader workers that use it fail with {FORK_ERROR}",
                    level=WARNING,
                )
            else:
                yield self.report(
                    call,
                    f"{what} in code that runs in DataLoader workers ({where}): with fork workers after the "
                    f"main process initialised CUDA this raises {FORK_ERROR}",
                )


def _puts_data_on_cuda(what: str) -> bool:
    return what.startswith(("`.cuda()", "`.to(", "`device="))


def _may_touch_cuda(call: cst.Call, cuda_imports: bool) -> bool:
    """Cheap syntactic pre-check before any name resolution."""
    func = call.func
    if isinstance(func, cst.Attribute):
        if func.attr.value in CUDA_TAILS:
            return True
        inner = func.value
        while isinstance(inner, cst.Attribute):
            if inner.attr.value == "cuda":
                return True
            inner = inner.value
        if cuda_imports and isinstance(inner, cst.Name):
            return True
    elif isinstance(func, cst.Name) and cuda_imports:
        return True
    return any(arg.keyword is not None and arg.keyword.value in ("device", "pin_memory") for arg in call.args)


def _statement(ctx, node):
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return ancestor
    return None
