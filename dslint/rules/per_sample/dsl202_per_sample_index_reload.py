"""DSL202 per-sample-index-reload: a file that is the same for every sample is read
and parsed again for every sample (the readers: ``dslint.semantics.file_reads``)."""

from __future__ import annotations

from dslint.rules.base import WARNING, Rule
from dslint.rules.per_sample._common import TIME_RATIO, candidates, outermost, reader_display, reload_cost, where
from dslint.semantics import dataflow as df
from dslint.semantics.file_reads import READER_TAILS, READERS, reads_fixed_file, reads_shared_file_record, rereads_fixed_lines


class PerSampleIndexReload(Rule):
    """
    ## What it does
    Flags reads and parses of a file that is the same for every sample, done in
    per-sample code: `json.load` (and `json.loads(open(p).read())`), `pd.read_*`,
    `yaml.load`/`safe_load`/`full_load`, `pickle.load`, `np.load`/`np.loadtxt`/
    `np.genfromtxt` and `torch.load` of a fixed path, `csv.reader`/`DictReader`
    iterated over a whole file, and `.readlines()` of a fixed file opened per sample.

    A per-sample path is reported when the sample is addressed as a (file,
    record) pair and the read takes only that record: `path, row =
    self.items[idx]` then `np.load(path)["x"][row]` (also through the parameters
    of a helper called once in the file). The pair exists because many samples
    share the file, so each of them loads all the records.

    ## When it does not fire
    - Other reads whose path depends on the sample (`torch.load(self.files[idx])`,
      a record position drawn at random or constant).
    - A handle opened once and read incrementally; memory maps
      (`np.load(p, mmap_mode="r")`, `torch.load(p, mmap=True)`); in-memory
      buffers (`np.load(io.BytesIO(blob))`, also filled by `write`): no file.
    - Loads in `__init__`, lazy once-per-worker loads (`if self.df is None:`, or
      after an early `if self.loaded: return`) and `lru_cache`d helpers.
    - Reads in an `except` handler (loading the item failed), and the `__getitem__` of a dataset
      whose `__len__` returns `1` (a one-sample demo reads its file once, as `__init__` would).

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
    - [evidence: PERF-1](../docs/evidence.md#perf-1) (measured per-item and per-epoch ratios)
    """

    code = "DSL202"
    name = "per-sample-index-reload"
    symptom = TIME_RATIO
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
        # per-sample files: a fixed field, a random record, a memory map, a helper called twice
        """
        import random
        import numpy as np
        from torch.utils.data import Dataset

        class Clips(Dataset):
            def __getitem__(self, idx):
                path, row = self.items[idx]
                a = np.load(self.files[idx])["x"][self.channel]
                b = np.load(self.files[idx])[random.randrange(8)]
                c = np.load(path, mmap_mode="r")[row]
                return a, b, c, self.load(path, row), self.load(self.other[idx], 0)

            def load(self, path, row):
                return np.load(path)[row]
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
        # the sample is a (file, record) pair: each item loads every record of its file
        """
        import numpy as np
        import pandas as pd
        import torch
        from torch.utils.data import Dataset

        class Rows(Dataset):
            def __getitem__(self, idx):
                path, row = self.index[idx]
                entry = self.entries[idx]
                meta = torch.load(entry["file"])  # expect: DSL202
                return self.features(path, row), meta[entry["pos"]]

            def features(self, path, row):
                return np.load(path.replace("_x", "_y"))["data"][row]  # expect: DSL202

        class Table(Dataset):
            def __getitem__(self, idx):
                rec = self.records[idx]
                return pd.read_csv(rec.table).iloc[rec.row]  # expect: DSL202
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
        for call in candidates(ctx, READER_TAILS):
            qualified = ctx.call_name(call)
            if qualified not in READERS or not df.per_item(ctx, call):
                continue
            if reads_fixed_file(ctx, call, qualified):
                what = "reads and parses the same file again for every sample"
            elif reads_shared_file_record(ctx, call, qualified):
                what = "loads a whole file that many samples share only to take this sample's record"
            else:
                continue
            found.append((call, f"`{reader_display(qualified)}` {what} ({where(ctx, call)}): {reload_cost(qualified)}"))
        for call in candidates(ctx, ("readlines",)):
            if rereads_fixed_lines(ctx, call):
                found.append((call, f"`.readlines()` reads every line of the same file again for every sample "
                                    f"({where(ctx, call)}): {reload_cost('builtins.open')}"))
        for node, message in outermost(ctx, found):
            yield self.report(node, message)
