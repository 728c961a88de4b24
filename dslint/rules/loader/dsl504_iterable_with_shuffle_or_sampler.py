"""DSL504: ``shuffle``, ``sampler`` or ``batch_sampler`` on a loader over an IterableDataset."""

from __future__ import annotations

from dslint.rules.base import Rule, Symptom
from dslint.rules.loader._common import certain_option, iterable_dataset, loader_calls, not_none, where
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.iterable_evidence import (
    annotated_iterable, caller_tested_iterable, datapipe_dataset, other_iterable, tested_iterable,
)
from dslint.semantics.loops import loader_loops
from dslint.semantics.values import possible


class IterableWithShuffleOrSampler(Rule):
    """
    ## What it does
    Flags a `DataLoader` over an `IterableDataset` (a project class deriving from it, however
    imported, or a library's iterable dataset: a Hugging Face `datasets.IterableDataset` from
    `load_dataset(..., streaming=True)` or `.to_iterable_dataset()`, a webdataset `WebDataset`
    pipeline, a torchdata `IterDataPipe`, or a project class deriving from one) given `shuffle`
    (anything but `False`/`None`), a `sampler` or a `batch_sampler` (for a DataPipe only a sampler:
    torch applies `shuffle` to its graph).

    The dataset is the value that reaches the call (an assignment in another branch does not count),
    iterable on every path. A `shuffle` that *can* be true counts: a conditional expression or an
    assignment that gives `True` on some path (the message names the condition).

    A dataset the function receives counts when its parameter's annotation allows an `IterableDataset`
    (`ds: IterableDataset`, `Union[Dataset, IterableDataset]`, `Dataset | IterableDataset`).

    A dataset the code itself tests with `if isinstance(x, IterableDataset):` counts too (the same
    name in the function, the same `self.x` in any method of the class, or the argument a caller in
    the file tests and passes to the parameter `x`), for a literal true `shuffle` or a sampler
    object, on a path the test does not narrow (its positive branch; after it when no branch of it ends
    in `return`/`raise`/...), and in the positive branch of `if isinstance(x, IterableDataset) and ...:`
    (also for a value made from `x` there: `prepare(x, ...)`).

    ## When it does not fire
    - An unknown `shuffle`; a dataset that may be map-style on some path.
    - A parameter unannotated, annotated plain `Dataset`, or described in a docstring only.
    - A function that rebinds the parameter or names `IterableDataset` in its
      body (an `isinstance` test may choose the options), unless the test is the `if
      isinstance(x, IterableDataset):` form above; that form is silent when the result is kept
      in a flag or combined by `or`/`not`, off the positive branch of an `and`, when a positive
      branch rebinds the value or raises, and for a name bound more than once.

    ## Why is this bad?
    An iterable dataset decides its own order; there are no indices to sample.
    torch raises at construction, e.g.
    `ValueError: DataLoader with IterableDataset: expected unspecified shuffle
    option, but got shuffle=True` (likewise for `sampler` and `batch_sampler`).

    ## Example
    ```python
    loader = DataLoader(ShardStream(urls), batch_size=32, shuffle=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(ShardStream(urls, shuffle_buffer=1000), batch_size=32)
    ```
    """

    code = "DSL504"
    name = "iterable-with-shuffle-or-sampler"
    symptom = Symptom("exception", "ValueError at construction")
    summary = "`shuffle`, `sampler` or `batch_sampler` on a DataLoader over an IterableDataset"
    help = "Remove the option and shuffle inside the IterableDataset (e.g. a shuffle buffer)"

    valid = (
        """
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield from range(3)

        loader = DataLoader(Stream(), batch_size=4, shuffle=False)
        """,
        {
            "stream.py": """
            from torch.utils.data import Dataset

            class NotIterable(Dataset):
                pass
            """,
            "train.py": """
            from torch.utils.data import DataLoader
            from stream import NotIterable

            loader = DataLoader(NotIterable(), shuffle=True)
            """,
        },
        """
        from datasets import load_dataset
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield from range(3)

        def make(streaming, table):
            if streaming:
                data = Stream()
                loader = DataLoader(data, shuffle=False)
            else:
                data = table  # the map-style table reaches this loader, the stream does not
                loader = DataLoader(data, shuffle=True)
            pages = DataLoader(load_dataset("text", split="train"), shuffle=True)  # not streaming: map-style
            return loader, pages
        """,
        """
        from typing import Union
        from torch.utils.data import DataLoader, Dataset, IterableDataset

        def make(train: Union[Dataset, IterableDataset], val: Dataset):
            shuffle = not isinstance(train, IterableDataset)  # the function tests it
            return DataLoader(train, shuffle=shuffle), DataLoader(val, shuffle=True)

        def plain(ds: Dataset, parts: "list[IterableDataset]"):  # nothing says `ds` can be iterable
            return DataLoader(ds, shuffle=True)
        """,
        """
        from torch.utils.data import DataLoader, IterableDataset

        def make(ds, batch_size):
            if isinstance(ds, IterableDataset):
                return DataLoader(ds, batch_size=batch_size)  # the paths part here
            return DataLoader(ds, batch_size=batch_size, shuffle=True), build(ds)

        def build(ds):
            return DataLoader(ds, shuffle=True)  # its caller parts the paths

        def other(ds, shuffle):
            if isinstance(ds, IterableDataset):
                print("streaming")
                loader = DataLoader(ds, shuffle=shuffle)  # only possibly set
            else:
                loader = DataLoader(ds, shuffle=True)  # the negative branch
            return loader

        def flagged(ds, world):
            streaming = isinstance(ds, IterableDataset)  # a flag may choose the path
            if streaming or isinstance(ds, IterableDataset) and world > 1:
                return None
            return DataLoader(prepare(ds), shuffle=True)
        class Data:
            def setup(self):
                if isinstance(self.train, IterableDataset):
                    raise ValueError("streams are not supported")

            def train_dataloader(self):
                return DataLoader(self.train, shuffle=True)  # the code rejects streams
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield from range(3)

        ds = Stream()
        loader = DataLoader(ds, batch_size=4, shuffle=True)  # expect: DSL504
        """,
        {
            "stream.py": """
            import torch.utils.data as tud

            class Base(tud.IterableDataset):
                pass
            """,
            "child.py": """
            from stream import Base

            class Shards(Base):
                def __iter__(self):
                    yield 1
            """,
            "train.py": """
            from torch.utils.data import DataLoader
            from child import Shards

            loader = DataLoader(Shards(), sampler=sampler)  # expect: DSL504
            """,
        },
        """
        from torch.utils.data import DataLoader, IterableDataset

        class Pairs(IterableDataset):
            def __iter__(self):
                yield from range(3)

        def make(strategy, table):
            if strategy == "fixed":
                data = table
                loader = DataLoader(data, batch_size=8)
            else:
                data = Pairs()
                shuffle = True if strategy == "unique" else False
                loader = DataLoader(data, batch_size=8, shuffle=shuffle)  # expect: DSL504
            return loader
        """,
        """
        import webdataset as wds
        from datasets import IterableDataset as Streamed, load_dataset
        from torch.utils.data import DataLoader, RandomSampler
        from torchdata.datapipes.iter import IterableWrapper

        shards = wds.WebDataset(urls).shuffle(1000).decode("pil")
        a = DataLoader(shards, batch_size=16, shuffle=True)  # expect: DSL504
        stream = load_dataset("c4", "en", split="train", streaming=True)
        b = DataLoader(stream.map(tokenize), sampler=sampler)  # expect: DSL504
        c = DataLoader(IterableWrapper(urls), shuffle=True), DataLoader(IterableWrapper(urls), sampler=RandomSampler(urls))  # expect: DSL504
        d = DataLoader(Streamed.from_generator(gen), shuffle=True)  # expect: DSL504

        class Shards(wds.DataPipeline):
            pass
        e = DataLoader(Shards(urls), shuffle=True)  # expect: DSL504
        """,
        """
        from typing import Optional, Union
        from torch.utils.data import DataLoader, Dataset, IterableDataset

        def loaders(train: Optional[Union[Dataset, IterableDataset]], batch_size: int = 8):
            return DataLoader(train, batch_size=batch_size, shuffle=True)  # expect: DSL504
        """,
        """
        from torch.utils.data import DataLoader, IterableDataset, RandomSampler

        def make(ds, batch_size):
            if isinstance(ds, IterableDataset):
                print("streaming")
            return DataLoader(ds, batch_size=batch_size, shuffle=True), build(ds)  # expect: DSL504

        def build(data, world):
            if isinstance(data, IterableDataset) and world == 1:
                return DataLoader(prepare(data), shuffle=True)  # expect: DSL504
            return DataLoader(data, sampler=RandomSampler(data))  # expect: DSL504

        class Data:
            def setup(self):
                if isinstance(self.train, IterableDataset):
                    self.steps = None

            def train_dataloader(self):
                return DataLoader(self.train, sampler=RandomSampler(self.train))  # expect: DSL504
        """,
    )

    def check(self, ctx):
        for bound in loader_calls(ctx):
            dataset = iterable_dataset(ctx, bound) or other_iterable(ctx, loader_loops(ctx), bound.expr("dataset"))
            annotated = None if dataset is not None else annotated_iterable(ctx, loader_loops(ctx), bound.expr("dataset"))
            tested = None
            if dataset is None and annotated is None:
                tested = tested_iterable(ctx, loader_loops(ctx), bound.call, bound.expr("dataset")) \
                    or caller_tested_iterable(ctx, loader_loops(ctx), bound.call, bound.expr("dataset"))
                if tested is None:
                    continue
            option = self._option(ctx, bound, not (dataset and datapipe_dataset(ctx, loader_loops(ctx), bound)))
            if option is None or tested is not None and (option[1] or not certain_option(ctx, bound, option[0])):
                continue
            text, when = option
            if tested is not None:
                passed = f" and passes it to this function on line {tested[2]}" if len(tested) > 2 else ""
                what = f"line {tested[1]} tests whether the dataset `{tested[0]}` is an IterableDataset{passed}; if so, it"
            elif annotated is not None:
                name, annotation, only = annotated
                what = (f"the dataset `{name}` is annotated `{annotation}`: "
                        + ("it is an IterableDataset and" if only else "when the caller passes an IterableDataset, it"))
            else:
                what = ("an IterableDataset" if dataset == "an IterableDataset"
                        else f"the dataset, {dataset} (an IterableDataset),")
            yield self.report(
                bound.call,
                f"{what} has no indices to shuffle or sample: the DataLoader raises "
                f"`ValueError: DataLoader with IterableDataset: expected unspecified {text}`"
                + (f" {when}" if when else ""),
            )

    @staticmethod
    def _option(ctx, bound, shuffles: bool = True):
        """(what torch names, when) for the first option set: a literal, or a value that can be
        set on some path (values.py); ``when`` is empty for a literal."""
        shuffle = ctx.value(bound, "shuffle") if shuffles else None
        if bound.passed("shuffle") and shuffle is not UNKNOWN and shuffle not in (False, None):
            return f"shuffle option, but got shuffle={shuffle}", ""
        if shuffles and bound.passed("shuffle") and shuffle is UNKNOWN:
            expr = bound.expr("shuffle")
            value = possible(ctx, expr).can_be(lambda v: v not in (False, None))
            if value is not None:
                return f"shuffle option, but got shuffle={value.value}", where(ctx, expr, value)
        if not_none(ctx, bound, "sampler"):
            return "sampler option", ""
        if not_none(ctx, bound, "batch_sampler"):
            return "batch_sampler option", ""
        return None
