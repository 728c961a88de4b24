"""DSL304 len-of-iterable-dataset: ``len()`` of an IterableDataset (or its DataLoader)
whose class defines no ``__len__`` raises ``TypeError``."""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.iterable._common import is_datapipe_or_chain, len_guarded, method_loader, truth_tested
from dslint.semantics.bindings import class_ref
from dslint.semantics.calls import DATALOADER, BoundCall
from dslint.semantics.libraries import hf_iterable
from dslint.semantics.project import ITERABLE


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
    )

    def check(self, ctx):
        for call in ctx.calls_to("builtins.len"):
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                continue
            found = self._iterable_class(ctx, call.args[0].value)
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
            found = self._iterable_class(ctx, tested)
            if found is None or not found[1] or len_guarded(ctx, tested):
                continue
            error = f"`TypeError: object of type '{found[0].rsplit('.', 1)[-1]}' has no len()`"
            yield self.report(
                tested,
                f"testing the truth of a DataLoader over the IterableDataset `{found[0]}` calls `DataLoader.__len__`, "
                f"which asks the dataset; it defines no `__len__`, so this raises {error} (test `is not None` instead)",
            )

    @staticmethod
    def _iterable_class(ctx, expr, depth: int = 0) -> Optional[Tuple[str, bool]]:
        through_loader = False
        value = expr
        if isinstance(value, cst.Name):
            assigned = ctx.single_assignment(value)
            if isinstance(assigned, cst.Call) and (ctx.is_dataloader_call(assigned) or method_loader(ctx, assigned)):
                value = assigned
        returned = method_loader(ctx, value) if depth == 0 else None
        if returned is not None:
            # self.train_dataloader(): a method of the class that returns one DataLoader
            found = LenOfIterableDataset._iterable_class(ctx, returned, depth + 1)
            return (found[0], True) if found else None
        if isinstance(value, cst.Call) and ctx.is_dataloader_call(value):
            bound = BoundCall(value, DATALOADER)
            value = bound.expr("dataset")
            through_loader = True
            if value is None:
                return None
        if hf_iterable(ctx, value):
            return "datasets.IterableDataset", through_loader  # Hugging Face's streaming dataset
        ref = class_ref(ctx.tree, ctx.names, value)
        if ref is None:
            return None
        if ref[0] == "local":
            qualified = f"{ctx.names.modname}.{ctx.qualname_of_def(ref[1])}"
            name = ref[1].name.value
        else:
            qualified = ref[1]
            name = qualified.rsplit(".", 1)[-1]
        answer = ctx.view.class_method(qualified, "__len__")
        if not answer or answer.get("kind") != ITERABLE or answer.get("defined") is not False:
            return None
        if ref[0] == "local" and is_datapipe_or_chain(ctx, ref[1]):
            return None
        return name, through_loader
