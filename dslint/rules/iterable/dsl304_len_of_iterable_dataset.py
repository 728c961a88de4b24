"""DSL304 len-of-iterable-dataset: ``len()`` of an IterableDataset (or its DataLoader)
whose class defines no ``__len__`` raises ``TypeError``."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.iterable._common import len_findings


class LenOfIterableDataset(Rule):
    """
    ## What it does
    Flags `len(x)` where `x` is an instance of an `IterableDataset` subclass
    (constructed right there, or a name bound once to such a construction), or a
    `DataLoader` over one, when neither the class nor any of its bases in the
    project defines `__len__`.

    Also flagged: `len()` of a Hugging Face streaming dataset (or of a
    DataLoader over one): `load_dataset(..., split=..., streaming=True)`,
    `IterableDataset.from_generator(...)`, `ds.to_iterable_dataset()`, and what
    `split_dataset_by_node` and the dataset's `map`/`filter`/`shuffle`/`shard`/
    `take`... make of one, through every assignment of a local name; a
    `self.m()` method of the class that returns one DataLoader construction
    (e.g. a Lightning `train_dataloader` hook); and a truth test of such a
    DataLoader (`if loader:`, `not loader`, `loader or ...`, `bool(loader)`),
    since `bool()` calls `DataLoader.__len__`. A `streaming` value that is not
    certainly `True` (an unresolved parameter, an option that may be false)
    stays silent.

    Also flagged, for values whose class cannot be seen (framework code that
    receives its users' loaders): `len(x)`, or a truth test of a loader `x`,
    that runs *before* the same function probes `x` for a length on the same
    path: `hasattr(x, "__len__")`, `isinstance(x, Sized)`, `len(x)` under
    `except TypeError`, `isinstance(x.dataset, IterableDataset)`, or a call of a
    function that probes its parameter so (of the project, or Hugging Face's
    `transformers.trainer_utils.has_length`, which guards). The function says
    `x` may have no length; the earlier call raises first. A loop variable
    stands for its collection (`[... for dl in loaders if dl]`, then `for dl in
    loaders: if not has_len(dl)`). And `len(obj.x)` where `obj` is a parameter
    annotated with a project class whose own methods (or its bases') probe
    `self.x` so, in a function that does not probe it itself. A truth test
    counts only when the probe shows a loader (a parameter annotated
    `DataLoader`, or `x.dataset`): an object without `__len__` is simply true.
    Uses after the probe, in the other branch of its `if`, or under its test
    are not judged (a flag set from the probe may guard them); a value nothing
    probes stays silent, whatever its name. Also `len(x)` in the false branch
    of `if isinstance(x, IterableDataset):` when `x` is a DataLoader (a
    parameter or class attribute annotated so, or built here): it never is one.

    ## When it does not fire
    Classes with a base outside the project that may define `__len__`,
    DataPipes, and calls guarded by `try: ... except TypeError` or a
    `hasattr(x, "__len__")` / `isinstance(x, Sized)` test, also a comprehension's
    condition (`[len(x) for x in xs if hasattr(x, "__len__")]`: it runs first).
    `self` of a class that (or a base of which, in any file) defines `__len__`:
    its `len(self)` under `except TypeError` guards something else.

    ## Why is this bad?
    An `IterableDataset` has no length unless its class defines `__len__`, and
    `DataLoader.__len__` for an iterable dataset asks the dataset. Both raise
    `TypeError: object of type 'Stream' has no len()` every time the line runs,
    typically when a learning-rate schedule or a progress bar is set up after
    the model and data are already loaded.

    ## Example
    ```python
    stream = Stream(paths)
    loader = DataLoader(stream, batch_size=32, num_workers=4)
    total_steps = epochs * len(loader)
    ```

    ## Use instead
    ```python
    class Stream(IterableDataset):
        ...
        def __len__(self):
            return self.num_samples  # the number of samples one epoch yields

    # or count the steps without asking the stream
    total_steps = epochs * math.ceil(num_samples / 32)
    ```

    ## References
    - PyTorch docs: `torch.utils.data.IterableDataset` (`__len__` is optional),
      "NOTE [ IterableDataset and __len__ ]" in `torch/utils/data/dataloader.py`
    - [evidence: A26](../docs/evidence.md#a26)
    """

    code = "DSL304"
    name = "len-of-iterable-dataset"
    symptom = Symptom("exception_len", "TypeError: object of type ... has no len()")
    level = ERROR
    summary = "`len()` of an IterableDataset (or its DataLoader) that defines no `__len__`"
    help = "Define `__len__` on the dataset class, or compute the number of steps without `len()`"

    valid = (
        """
        from torch.utils.data import DataLoader, IterableDataset

        class Sized(IterableDataset):
            def __init__(self, n):
                self.n = n

            def __iter__(self):
                yield from range(self.n)

            def __len__(self):
                return self.n

        print(len(Sized(3)), len(DataLoader(Sized(3))))
        """,
        """
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield 1

        def steps(ds, loader: DataLoader):
            k = 0 if isinstance(ds, IterableDataset) else len(ds)  # a dataset: the test can hold
            return len(ds)  # unknown argument

        loader = DataLoader(Stream())
        try:
            n = len(loader)
        except TypeError:
            n = None
        m = len(loader) if hasattr(loader.dataset, "__len__") else None
        """,
        """
        import some_library
        from torch.utils.data import IterableDataset

        class Mixed(IterableDataset, some_library.SizedMixin):
            def __iter__(self):
                yield 1

        n = len(Mixed())
        """,
        {
            "base.py": """
            from torch.utils.data import IterableDataset

            class Base(IterableDataset):
                def __len__(self):
                    return 10
            """,
            "use.py": """
            from base import Base

            class Child(Base):
                def __iter__(self):
                    yield 1

            n = len(Child())
            """,
        },
        """
        from datasets import load_dataset
        from torch.utils.data import DataLoader

        def size(streaming):
            ds = load_dataset("corpus", split="train", streaming=streaming)  # unknown
            table = load_dataset("corpus", split="train")  # map-style: has a length
            loader = DataLoader(ds)
            if loader is not None:
                return len(table)
        """,
        {
            "probes.py": """
            def sized(obj):
                try:
                    return len(obj) >= 0
                except TypeError:
                    return False
            """,
            "trainer.py": """
            from probes import sized

            def count(loaders, flag):
                total = 0 if all(sized(dl) for dl in loaders) else None
                if total is not None:
                    total = sum(len(dl) for dl in loaders)  # after the probe: a flag guards it
                for dl in loaders:
                    if dl:  # nothing shows a loader: an object without __len__ is true
                        pass
                if flag:
                    return len(loaders)  # this path never reaches the probe
                n = len(loaders) if isinstance(loaders, list) else 0  # narrowed: a list
                return n, sized(loaders)

            class Loop:
                def setup(self):
                    self.total = sized(self.loader)

            def report(loop: Loop):
                return len(loop.loader) if sized(loop.loader) else bool(loop.loader)  # guarded; not a loader
            """,
        },
    )
    invalid = (
        """
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield 1

        ds = Stream()
        loader = DataLoader(ds, batch_size=4)
        a = len(ds)  # expect: DSL304
        b = len(loader)  # expect: DSL304
        c = len(DataLoader(Stream()))  # expect: DSL304
        """,
        {
            "stream.py": """
            import torch.utils.data as tud

            class Base(tud.IterableDataset):
                pass

            class Stream(Base):
                def __iter__(self):
                    yield 1
            """,
            "train.py": """
            from torch.utils.data.dataloader import DataLoader as DL
            from stream import Stream as S

            def main():
                loader = DL(S(), num_workers=2)
                total = 10 * len(  # expect: DSL304
                    loader
                )
            """,
        },
        """
        from datasets import load_dataset
        from datasets.distributed import split_dataset_by_node
        from torch.utils.data import DataLoader, IterableDataset

        def build(rank, world):
            ds = load_dataset("corpus", split="train", streaming=True)
            ds = split_dataset_by_node(ds, rank=rank, world_size=world)
            ds = ds.shuffle(seed=0).map(str.lower)
            loader = DataLoader(ds, batch_size=8)
            steps = len(loader)  # expect: DSL304
            return steps, len(ds)  # expect: DSL304

        class Stream(IterableDataset):
            def __iter__(self):
                yield 1

        class Module:
            def train_dataloader(self):
                return DataLoader(Stream(), batch_size=4)

            def steps(self):
                loader = self.train_dataloader()
                if not loader:  # expect: DSL304
                    return 0
                return 10 * len(self.train_dataloader())  # expect: DSL304
        """,
        """
        from typing import List
        from torch.utils.data import DataLoader, IterableDataset

        def has_len(loader: DataLoader) -> bool:
            try:
                return len(loader) > 0
            except TypeError:
                return False

        def reset(self, loaders: List[DataLoader], limit):
            loaders = [wrap(dl) for dl in loaders if dl]  # expect: DSL304
            steps = limit * len(self.train_loader)  # expect: DSL304
            if not hasattr(self.train_loader.dataset, "__len__"):
                steps = limit
            for dl in loaders:
                if not has_len(dl):
                    return float("inf"), steps
            return sum(len(dl) for dl in loaders), steps

        class Fitter:
            def setup(self):
                self.steps = len(self.loader) if has_len(self.loader) else None

        def on_epoch(fitter: "Fitter"):
            return len(fitter.loader)  # expect: DSL304

        def batches(loader: DataLoader):
            return 0 if isinstance(loader, IterableDataset) else len(loader)  # expect: DSL304
        """,
    )

    def check(self, ctx):
        for node, message in len_findings(ctx):
            yield self.report(node, message)
