"""DSL502: ``batch_sampler`` combined with the options it decides itself."""

from __future__ import annotations

from typing import List

from dslint.rules.base import Rule, Symptom
from dslint.rules.loader._common import is_int, loader_calls, not_none, over_iterable, truthy
from dslint.semantics.calls import UNKNOWN


class BatchSamplerConflict(Rule):
    """
    ## What it does
    Flags a `DataLoader` given a `batch_sampler` together with `batch_size` other
    than 1 (`None` included), a truthy `shuffle`, a `sampler`, or a truthy
    `drop_last`.

    ## Why is this bad?
    A batch sampler already decides the batches, their size, order and whether
    the last one is dropped. torch refuses the combination at construction:
    `ValueError: batch_sampler option is mutually exclusive with batch_size,
    shuffle, sampler, and drop_last`. Note that `batch_size=None` fails too,
    since only the default `1` is accepted.

    ## Example
    ```python
    loader = DataLoader(ds, batch_sampler=BatchSampler(RandomSampler(ds), 32, False), batch_size=32)
    ```

    ## Use instead
    ```python
    loader = DataLoader(ds, batch_sampler=BatchSampler(RandomSampler(ds), 32, False))
    ```
    """

    code = "DSL502"
    name = "batch-sampler-conflict"
    symptom = Symptom("exception", "ValueError at construction")
    summary = "`batch_sampler` combined with `batch_size`, `shuffle`, `sampler` or `drop_last`"
    help = "Pass only `batch_sampler`; configure batch size, order and `drop_last` in the batch sampler"

    valid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_sampler=bs, num_workers=2)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_sampler=bs, batch_size=1, shuffle=False, drop_last=False)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_sampler=bs, **cfg)
        """,
    )
    invalid = (
        """
        import torch.utils.data as tud
        loader = tud.DataLoader(ds, batch_size=32, batch_sampler=bs)  # expect: DSL502
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=None, batch_sampler=bs)  # expect: DSL502
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_sampler=bs, drop_last=True)  # expect: DSL502
        """,
    )

    def check(self, ctx):
        for bound in loader_calls(ctx):
            if not not_none(ctx, bound, "batch_sampler") or over_iterable(ctx, bound):
                continue
            conflicts: List[str] = []
            if bound.passed("batch_size"):
                size = ctx.value(bound, "batch_size")
                if size is not UNKNOWN and not (is_int(size) and size == 1):
                    conflicts.append(f"batch_size={size!r}")
            shuffle = ctx.value(bound, "shuffle")
            if truthy(shuffle):
                conflicts.append(f"shuffle={shuffle!r}")
            if not_none(ctx, bound, "sampler"):
                conflicts.append("sampler")
            drop_last = ctx.value(bound, "drop_last")
            if truthy(drop_last):
                conflicts.append(f"drop_last={drop_last!r}")
            if conflicts:
                yield self.report(
                    bound.call,
                    f"`batch_sampler` cannot be combined with {', '.join(f'`{c}`' for c in conflicts)}: the "
                    "DataLoader raises `ValueError: batch_sampler option is mutually exclusive with "
                    "batch_size, shuffle, sampler, and drop_last`",
                )
