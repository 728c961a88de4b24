"""DSL303 iterable-without-worker-sharding: every DataLoader worker replays the whole stream of an IterableDataset that does not shard by worker."""

from __future__ import annotations

from dslint.rules.base import ERROR, WARNING, Rule, Symptom
from dslint.rules.iterable._common import inherited_iter_bases, iterable_classes, literal_workers, sharding_message
from dslint.semantics.classes import constructions_of, methods
from dslint.semantics.libraries import consumed_by_pipeline
from dslint.semantics.loops import is_test_code
from dslint.semantics.sharding import construction_worker_info, shards_or_unknown


class IterableWithoutWorkerSharding(Rule):
    """
    ## What it does
    Flags the `__iter__` of an `IterableDataset` subclass that replays its data source without ever
    consulting `torch.utils.data.get_worker_info()` - not in `__iter__`, not in any function or method
    it reaches (across files), not in a property it reads - when no DataLoader over the class has a
    `worker_init_fn` that shards it. An `__iter__` that an `IterableDataset` inherits from a plain class
    of the project (`class TorchLines(Lines, IterableDataset)`, in any file) is judged, and reported,
    where it is defined.

    Reading the worker info does not count as sharding when all the iteration does with it is seed a
    random generator (`np.random.seed(info.seed)`, `default_rng(info.id)`), log it or test it for None:
    every worker then still replays the whole stream, in its own random order. Nor when only construction
    reads it (`__init__`, or a method only `__init__` runs): the object is built in the main process, where
    `get_worker_info()` is None, and each worker gets a copy of that split; reported at that read (or the call in `__init__`).

    It reports at warning level, and at error level when a DataLoader over the class has a literal `num_workers` above 1.

    ## When it does not fire
    - Every DataLoader known to be built over the class (a method's `DataLoader(self)` too) has `num_workers` 0 or 1.
    - Wrappers that iterate another dataset or reader (an attribute named or annotated like a dataset, reader or
      stream, or built from a dataset class), also through a stage applied to it (`self.fn(iter(self.source))`) or
      a `__next__` taking each item from it (`return next(self.source)`, or `x = next(self.it)` with `self.it = iter(self.source)`,
      then returning what it makes of `x`, or `return self.sampler.get_next(self.rng)` where a project class defines that method of the object handed in); DataPipes and `ChainDataset` subclasses.
    - Streams from libraries that shard for you (webdataset, Hugging Face `datasets`, torchdata, MosaicML
      streaming, litdata, lhotse; also their method chains, `wds.WebDataset(urls).shuffle(64)`), and classes this
      file hands to a webdataset pipeline (`wds.DataPipeline(Shards(urls), wds.split_by_worker, ...)`, or stages).
    - A `worker_init_fn` that cannot be followed (a bound method, a lambda), an `__iter__` calling methods the project does not
      define, or whose stream a project method of an object handed in makes (`self.task.stream()`) or a project factory returns
      as an object of a class with its own `__iter__` (`self.parser = make_parser(kind)`): that class shards, or not, itself;
      so do objects the code never names (`zip(*[getattr(self, n) for n in self.names])`).
    - Random or endless generators (`while True: yield torch.randn(...)`; `for _ in range(n): yield self.buf.sample(8)`
      when the held object's project class draws in that method or what it calls), and bare counters: no data to duplicate. Test code (`tests/`, `test_*.py`) replays fixed streams on purpose.

    ## Why is this bad?
    Every DataLoader worker gets a copy of the dataset and calls `iter()` on it.
    Without sharding, each worker replays the whole stream. Measured on torch 2.13: with 2 workers an
    epoch of 100 samples delivered 200 items (100 unique), with 4 workers 400. Training silently sees
    every sample N times per epoch, and validation metrics are computed over duplicates. torch's own
    warning (`Length of IterableDataset ... was reported to be ...`) fires only for datasets with
    `__len__` and misses it entirely when `batch_size > 1`, because it compares batches with samples.

    ## Example
    ```python
    class Lines(IterableDataset):
        def __init__(self, path):
            self.path = path

        def __iter__(self):
            with open(self.path) as f:
                for line in f:
                    yield parse(line)
    ```

    ## Use instead
    ```python
    class Lines(IterableDataset):
        def __init__(self, path):
            self.path = path

        def __iter__(self):
            info = get_worker_info()
            workers, worker = (info.num_workers, info.id) if info else (1, 0)
            with open(self.path) as f:
                for i, line in enumerate(f):
                    if i % workers == worker:
                        yield parse(line)
    ```

    ## References
    - PyTorch docs: `torch.utils.data.IterableDataset` (the `worker_init_fn` and in-`__iter__` sharding examples), `get_worker_info`
    - pytorch/pytorch#30599, huggingface/datasets#3423
    - [evidence: IT-2](../docs/evidence.md#it-2), [W4](../docs/evidence.md#w4)
    """

    code = "DSL303"
    name = "iterable-without-worker-sharding"
    symptom = Symptom("duplicates", "every sample arrives once per worker")
    level = WARNING
    summary = "An IterableDataset does not shard by worker, so every worker yields every sample"
    help = (
        "Split the stream by `torch.utils.data.get_worker_info()` in `__iter__` (or in a `worker_init_fn`), "
        "e.g. keep item i when `i % info.num_workers == info.id`"
    )

    valid = (
        """
        from torch.utils.data import IterableDataset, get_worker_info

        class Sharded(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                info = get_worker_info()
                n, k = (info.num_workers, info.id) if info else (1, 0)
                for f in self.files[k::n]:
                    yield f
        """,
        {
            "shard.py": """
            import math
            import torch

            def worker_init_fn(worker_id):
                info = torch.utils.data.get_worker_info()
                ds = info.dataset
                per = math.ceil(len(ds.files) / info.num_workers)
                ds.files = ds.files[worker_id * per : (worker_id + 1) * per]
            """,
            "stream.py": """
            from torch.utils.data import IterableDataset as ID

            class Files(ID):
                def __init__(self, files):
                    self.files = files

                def __iter__(self):
                    for f in self.files:
                        yield f
            """,
            "train.py": """
            from torch.utils.data import DataLoader
            from shard import worker_init_fn
            from stream import Files

            loader = DataLoader(Files(["a", "b"]), num_workers=4, worker_init_fn=worker_init_fn)
            """,
        },
        """
        import torch
        from torch.utils.data import IterableDataset

        class Noise(IterableDataset):
            def __iter__(self):
                while True:
                    yield torch.randn(3)
        """,
        """
        from torch.utils.data import IterableDataset

        class Shuffled(IterableDataset):
            def __init__(self, dataset, buffer=100):
                self.dataset = dataset
                self.buffer = buffer

            def __iter__(self):
                for x in self.dataset:
                    yield x
        """,
        """
        from torch.utils.data import IterableDataset

        class Abstract(IterableDataset):
            def __iter__(self):
                for item in self.items():
                    yield item
        """,
        """
        import webdataset as wds
        from torch.utils.data import DataLoader, IterableDataset

        class ShardUrls(IterableDataset):
            def __init__(self, urls):
                self.urls = urls

            def __iter__(self):
                for url in self.urls:
                    yield dict(url=url)

        def make_pipeline(urls):
            stages = [ShardUrls(urls)]
            stages.extend([wds.split_by_node, wds.split_by_worker, wds.tarfile_to_samples()])
            return wds.DataPipeline(*stages)

        class Trainer:
            def shard(self, worker_id):
                ...

            def loader(self, files):
                return DataLoader(ShardUrls(files), num_workers=4, worker_init_fn=self.shard)
        """,
        """
        import numpy as np
        from torch.utils.data import IterableDataset, get_worker_info

        class SeedAndShard(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                info = get_worker_info()
                np.random.seed(info.seed % 2**32 if info else 0)
                shard = (info.id, info.num_workers) if info is not None else (0, 1)
                for i, f in enumerate(self.files):
                    if i % shard[1] == shard[0]:
                        yield f
        """,
    )
    invalid = (
        {
            "lines.py": """
            class Lines:
                def __iter__(self):  # expect: DSL303
                    with open(self.path) as f:
                        yield from f
            """,
            "torch_lines.py": """
            from torch.utils.data import IterableDataset
            from lines import Lines

            class TorchLines(Lines, IterableDataset):
                pass
            """,
        },
        """
        from torch.utils.data import IterableDataset

        class Lines(IterableDataset):
            def __init__(self, path):
                self.path = path

            def __iter__(self):  # expect: DSL303
                with open(self.path) as f:
                    for line in f:
                        yield line
        """,
        """
        import torch.utils.data as tud

        class Files(tud.IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):  # expect: DSL303
                return iter(self.files)

        def seed_only(worker_id):
            import random
            random.seed(worker_id)

        loader = tud.DataLoader(Files(["a"]), batch_size=8, num_workers=4, worker_init_fn=seed_only)
        """,
        """
        import numpy as np
        import torch
        from torch.utils.data import IterableDataset

        class SeedOnly(IterableDataset):
            def __init__(self, paths):
                self.paths = paths
            def __iter__(self):  # expect: DSL303
                info = torch.utils.data.get_worker_info()
                if info is not None:
                    np.random.seed(info.seed % 2**32)
                np.random.shuffle(self.paths)  # reordering the index draws no new samples
                for i in range(len(self.paths)):
                    yield self.paths[i]
        """,
    )

    def check(self, ctx):
        judged = [(cls, methods(cls).get("__iter__"), None) for cls in iterable_classes(ctx)]
        for cls, iter_func, heirs in judged + inherited_iter_bases(ctx):
            if iter_func is None or is_test_code(ctx, cls):
                continue  # test fixtures replay fixed streams on purpose, and their tests assert what arrives
            qual = ctx.qualname_of_def(cls)
            loaders = ctx.view.loaders_over(qual) if heirs is None else [f for h in heirs for f in h["loaders"]]
            literal = literal_workers(loaders)
            if literal is None:
                continue  # every DataLoader over it has 0 or 1 workers
            if shards_or_unknown(ctx, cls, qual, iter_func, loaders):
                continue
            if any(consumed_by_pipeline(ctx, call) for call in constructions_of(ctx, cls)):
                continue  # a source of a webdataset pipeline: its stages split by worker (or not)
            many, at = sorted({w for w in literal if w > 1}), construction_worker_info(ctx, cls)
            message = sharding_message(ctx, cls, heirs, many, at)  # (at that read in ``__init__``: the fix goes there)
            yield self.report(at or iter_func, message, level=ERROR if many else WARNING, end_node=None if at else iter_func.name)
