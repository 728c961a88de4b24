"""DSL504: ``shuffle``, ``sampler`` or ``batch_sampler`` on a loader over an IterableDataset."""

from __future__ import annotations

from dslint.rules.base import Rule, Symptom
from dslint.rules.loader._common import loader_calls, not_none, over_iterable
from dslint.semantics.calls import UNKNOWN


class IterableWithShuffleOrSampler(Rule):
    """
    ## What it does
    Flags a `DataLoader` over an `IterableDataset` (a project class deriving from
    it, however imported) given `shuffle` (anything but `False`/`None`), a
    `sampler` or a `batch_sampler`.

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
    )

    def check(self, ctx):
        for bound in loader_calls(ctx):
            if not over_iterable(ctx, bound):
                continue
            shuffle = ctx.value(bound, "shuffle")
            if bound.passed("shuffle") and shuffle is not UNKNOWN and shuffle not in (False, None):
                option = f"shuffle option, but got shuffle={shuffle}"
            elif not_none(ctx, bound, "sampler"):
                option = "sampler option"
            elif not_none(ctx, bound, "batch_sampler"):
                option = "batch_sampler option"
            else:
                continue
            yield self.report(
                bound.call,
                f"an IterableDataset has no indices to shuffle or sample: the DataLoader raises "
                f"`ValueError: DataLoader with IterableDataset: expected unspecified {option}`",
            )
