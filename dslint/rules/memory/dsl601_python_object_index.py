"""DSL601 python-object-index: a per-sample list or dict of Python objects built in ``__init__``."""

from __future__ import annotations

from dslint.rules.base import WARNING, Rule, Symptom
from dslint.rules.memory._common import index_message, python_object_indexes


class PythonObjectIndex(Rule):
    """
    ## What it does
    Flags a per-sample index of Python objects, a list or dict of strings or tuples
    (file paths, `(path, label)` pairs, parsed annotations), that a dataset's
    `__init__` builds (`[... for ...]`, `list(...)`, `sorted(glob(...))`,
    `os.listdir(...)`, `json.load(...)`, `.tolist()`, or `[]`/`{}` filled in a loop,
    also by a method `__init__` calls, with strings, tuples, small lists or parsed
    records, also `self.items += json.load(f)`) and that per-sample code indexes (`self.items[idx]`). Records that a
    project helper (in any file, or a method of the class) builds from a parsed file
    (`json`/`yaml`/`pickle`/`mmengine.load` content) or from such an index count too,
    unless the helper builds numpy, torch or pandas objects.

    The index must scale with the data (a listing, a file, a loop over a collection
    of a size the project does not show). A preview rule (`--preview`).

    ## Why is this bad?
    Forked workers share the parent's memory copy-on-write, but merely *reading* a
    Python object writes its reference count, which dirties the page it lives on.
    Indexing a list of millions of `str`/`tuple` objects therefore copies, page by
    page, the whole index into every worker ("copy-on-read", pytorch#13246).
    Measured on torch 2.13 with 2 workers over 2M path strings: each worker's
    private memory (USS) grew to 293 MiB with a shuffled list of `str`, against
    27 MiB for the same paths in a numpy bytes array. With many workers this is
    workers x dataset size of RAM, until
    `DataLoader worker (pid ...) is killed by signal: Killed.`

    ## When it does not fire
    - A fixed collection: a comprehension or a filling loop over fewer than
      10,000 items by every size the project shows: a literal list, `range(6)`,
      a constant, `self.classes` assigned a literal, a parameter whose default
      (and this file's calls) is a literal list, `range(n)` with `n`'s default.
      A value the project does not show, or a list grown later, counts as large.
    - A clearly small split: every file the index is read from is an
      evaluation/test file, by every name its path can have (`"coco_val.json"`,
      `{"val": "a_val.json", "test": "a_test.json"}[split]`, `os.path.join(root,
      "test_list.txt")`); a `train` name, or a name that depends on a value the
      project does not show, counts as large.
    - No forked worker can hold the dataset: every DataLoader over it has
      `num_workers=0` or a `spawn`/`forkserver` context, or it is a script's own
      dataset (`if __name__ == "__main__":`, no DataLoader here or over it).
    - The index is numpy/torch/pandas data, or holds arrays, or is never indexed per sample with a changing
      index (a read behind a once-per-key guard, `if self.files[k] is None:`, runs once per key).

    ## Example
    ```python
    class Files(Dataset):
        def __init__(self, root):
            self.paths = sorted(glob.glob(f"{root}/*.jpg"))

        def __getitem__(self, i):
            return load(self.paths[i])
    ```

    ## Use instead
    ```python
    class Files(Dataset):
        def __init__(self, root):
            # one numpy buffer: no per-item reference counts to write
            self.paths = np.array(sorted(glob.glob(f"{root}/*.jpg")), dtype=np.bytes_)

        def __getitem__(self, i):
            return load(self.paths[i].decode())
    ```
    Pandas/Arrow string columns or numpy offsets into one bytes buffer work too.

    ## References
    - pytorch/pytorch#13246 ("DataLoader memory usage keeps increasing")
    - Yuxin Wu, "Demystify RAM Usage in Multi-Process Data Loaders" (blog post, 2022)
    """

    code = "DSL601"
    name = "python-object-index"
    symptom = Symptom("worker_memory", "worker private memory grows toward a full copy of the index")
    level = WARNING
    preview = True
    summary = "A per-sample list/dict of Python objects built in `__init__` is copied into every worker"
    help = "Keep the index in numpy arrays (`np.array(paths, dtype=np.bytes_)`, integer label arrays) or an Arrow/pandas column instead of a list of Python objects"  # noqa: E501

    valid = (
        # fixed collections: a literal, an attribute, a parameter default, range(n) of a default
        """
        from torch.utils.data import Dataset

        class Labels(Dataset):
            def __init__(self, x, views=("front", "back"), n=12):
                self.x = x
                self.classes = ["cat", "dog"]
                self.names = [f"{c}.png" for c in self.classes]
                self.views = [f"cam_{v}.png" for v in views]
                self.steps = [f"step_{i}" for i in range(n)]

            def __getitem__(self, i):
                return self.x[i], self.names[i % 2], self.views[i % 2], self.steps[i % 12]
        """,
        # evaluation/test split files
        """
        import json
        import os
        from torch.utils.data import Dataset

        class Eval(Dataset):
            def __init__(self, root, split):
                names = {"val": "caps_val.json", "test": "caps_test.json"}
                self.annotation = json.load(open(os.path.join(root, names[split])))
                with open(os.path.join(root, "test_list.txt")) as f:
                    self.ids = [line.strip() for line in f]

            def __getitem__(self, i):
                return self.annotation[i], self.ids[i]
        """,
        # a numpy bytes array; a constant index; arrays, not strings
        """
        import glob, json
        import numpy as np
        from torch.utils.data import Dataset

        class FirstOnly(Dataset):
            def __init__(self, root, files, anns):
                self.packed = np.array(sorted(glob.glob(root + "/*.jpg")), dtype=np.bytes_)
                self.paths = sorted(glob.glob(root + "/*.jpg"))
                self.arrays = [np.load(f) for f in files]  # not strings: unknown size per page
                self.boxes = {}
                for a in json.loads(anns):
                    self.boxes[a["id"]] = np.array(a["bbox"])  # records of arrays: payload apart

            def __getitem__(self, i):
                return self.packed[i].decode(), self.paths[0], self.arrays[i], self.boxes[i]
        """,
        # a small fixed collection, and a helper that packs a parsed file into arrays
        """
        import pickle
        import numpy as np
        from torch.utils.data import Dataset

        def pack(payload):
            return np.array([r["file"] for r in payload["records"]], dtype=np.bytes_)

        class Small(Dataset):
            def __init__(self, path):
                self.views = [f"cam_{i}.png" for i in range(6)]
                self.splits = []
                for name in ("train", "val"):
                    self.splits.append(name + ".txt")
                with open(path, "rb") as f:
                    data = pickle.load(f)
                self.files = pack(data)

            def __getitem__(self, i):
                return self.views[i % 6], self.splits[i % 2], self.files[i]
        """,
        """
        import os
        import torch
        from torch.utils.data import Dataset

        class Converted(Dataset):
            def __init__(self, root, size):
                self.names = os.listdir(root)
                self.names = np.array(self.names)
                self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]  # tensors: payload apart
                self.rows = []
                self._load(size)

            def _load(self, size):  # run by __init__: rows of tensors, payload apart
                self.feats = {}
                for k in range(size):
                    self.rows.append([torch.rand(20), torch.rand(1)])
                    self.feats[k] = torch.rand(3)

            def __getitem__(self, i):
                return self.names[i], self.data[i], self.rows[i], self.feats[i]
        """,
    )
    invalid = (
        """
        import glob
        from torch.utils.data import Dataset

        class Files(Dataset):
            def __init__(self, root):
                self.paths = sorted(glob.glob(root + "/*.jpg"))  # expect: DSL601

            def __getitem__(self, i):
                return self.paths[i]
        """,
        """
        import json
        from collections import defaultdict
        import os
        from torch.utils.data import Dataset

        class Annotated(Dataset):
            def __init__(self, root):
                with open(os.path.join(root, "ann.json")) as f:
                    self.anns = json.load(f)  # expect: DSL601
                self.samples = []  # expect: DSL601
                self.by_id = {}  # expect: DSL601
                self.groups = defaultdict(list)  # expect: DSL601
                for a in self.anns:
                    self.samples.append((os.path.join(root, a["file"]), a["label"]))
                    self.by_id[a["id"]] = json.loads(a["meta"])
                    self.groups[a["image"]].append(a)
                self.rows = []  # expect: DSL601
                self._index(root)

            def _index(self, root):  # run by __init__: filled before the fork
                for k, name in enumerate(os.listdir(root)):
                    self.rows.append([k, 0] + list(name))

            def __getitem__(self, idx):
                path, label = self.samples[idx]
                return path, label, self.anns[idx]["box"], self.rows[idx], self.by_id[idx], self.groups[path]
        """,
        {
            "base.py": """
                from torch.utils.data import Dataset

                class Base(Dataset):
                    def __getitem__(self, i):
                        return self.load(i)
                """,
            "lines.py": """
                from base import Base

                class Lines(Base):
                    def __init__(self, path):
                        with open(path) as f:
                            self.lines = [line.strip() for line in f]  # expect: DSL601

                    def load(self, i):
                        return self.lines[i]
                """,
        },
        # records project helpers build from a parsed annotation file
        """
        import pickle
        from torch.utils.data import Dataset

        def load_infos(payload):
            return [normalize(s) for s in payload["data_list"]]

        class Frames(Dataset):
            def __init__(self, ann_file):
                with open(ann_file, "rb") as f:
                    data = pickle.load(f)
                self.infos = load_infos(data)
                self.infos = self.keep_complete(self.infos)  # expect: DSL601

            def keep_complete(self, infos):
                return [i for i in infos if i.get("images")]

            def __getitem__(self, index):
                return self.infos[index]["lidar_path"]
        """,
        # a training file, a name that depends on an unknown split, an unknown size
        """
        import json
        import os
        from torch.utils.data import Dataset

        class Captions(Dataset):
            def __init__(self, root, split, n, extra):
                names = {"train": "caps_train.json", "val": "caps_val.json"}
                self.annotation = json.load(open(os.path.join(root, names[split])))  # expect: DSL601
                with open(os.path.join(root, split + "_list.txt")) as f:
                    self.ids = [line.strip() for line in f]  # expect: DSL601
                self.steps = [f"step_{i}" for i in range(n)]  # expect: DSL601
                self.parts = ["a", "b"]
                self.parts.extend(extra)  # grown: its size is not the literal's
                self.files = [f"{p}.png" for p in self.parts]  # expect: DSL601

            def __getitem__(self, i):
                return self.annotation[i], self.ids[i], self.steps[i], self.files[i]
        """,
        """
        import pandas as pd
        from torch.utils.data import Dataset

        class Table(Dataset):
            def __init__(self, csv):
                df = pd.read_csv(csv)
                self.files = df["file"].tolist()  # expect: DSL601

            def __getitem__(self, i):
                return self.files[i]
        """,
    )

    def check(self, ctx):
        for value, attr, what in python_object_indexes(ctx):
            yield self.report(value, index_message(attr, what))
