"""DSL304 len-of-iterable-dataset: ``len()`` of an IterableDataset (or its DataLoader)
whose class defines no ``__len__`` raises ``TypeError``."""

from __future__ import annotations

import libcst as cst

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.iterable._common import iterable_class_of, len_guarded, probed_length_uses, truth_tested


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
    receives its users' loaders): a `len(x)`, or a truth test of a loader `x`,
    that runs *before* the same function probes `x` for a length on the same
    path — `hasattr(x, "__len__")`, `isinstance(x, Sized)`, `len(x)` under
    `except TypeError`, `isinstance(x.dataset, IterableDataset)`, or a call of a
    function (of this file, or a module-level one of the project) that probes
    its parameter so. The function itself says `x` may have no length; the
    earlier call raises the `TypeError` the probe exists to avoid. A loop
    variable stands for its collection (`[... for dl in loaders if dl]`, then
    `for dl in loaders: if not has_len(dl)`). A truth test counts only when the
    probe shows a loader (a parameter annotated `DataLoader`, or `x.dataset`):
    an object without `__len__` is simply true. Uses after the probe, in the
    other branch of its `if`, or under the probe's own test are not judged (a
    flag set from the probe may guard them); a value nothing probes stays
    silent, whatever its name.

    Not reported: classes with a base outside the project that may define
    `__len__`, DataPipes, and calls guarded by `try: ... except TypeError` or a
    `hasattr(x, "__len__")` / `isinstance(x, Sized)` test.

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

        def steps(ds):
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
                return sized(loaders)
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
        from torch.utils.data import DataLoader

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
        """,
    )

    def check(self, ctx):
        for use, probe, _loader in probed_length_uses(ctx):
            is_len = isinstance(use, cst.Call) and ctx.call_name(use) == "builtins.len"
            what = "`len()` of" if is_len else "testing the truth of"
            yield self.report(
                use,
                f"{what} `{ctx.code(use.args[0].value if is_len else use)}` runs before line "
                f"{ctx.line(probe)} probes it for a length (`{ctx.code(probe)}`): when it has none (a loader over an "
                "IterableDataset without `__len__`), this raises `TypeError: object ... has no len()` first",
            )
        for call in ctx.calls_to("builtins.len"):
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                continue
            found = iterable_class_of(ctx, call.args[0].value)
            if found is None:
                continue
            class_name, through_loader = found
            if len_guarded(ctx, call):
                continue
            error = f"`TypeError: object of type '{class_name.rsplit('.', 1)[-1]}' has no len()`"
            if through_loader:
                message = (
                    f"`len()` of a DataLoader over the IterableDataset `{class_name}` asks the dataset, which "
                    f"defines no `__len__`: it raises {error}"
                )
            else:
                message = f"`{class_name}` is an IterableDataset that defines no `__len__`: `len()` raises {error}"
            yield self.report(call, message)
        for tested in truth_tested(ctx):
            found = iterable_class_of(ctx, tested)
            if found is None or not found[1] or len_guarded(ctx, tested):
                continue
            error = f"`TypeError: object of type '{found[0].rsplit('.', 1)[-1]}' has no len()`"
            yield self.report(
                tested,
                f"testing the truth of a DataLoader over the IterableDataset `{found[0]}` calls `DataLoader.__len__`, "
                f"which asks the dataset; it defines no `__len__`, so this raises {error} (test `is not None` instead)",
            )

