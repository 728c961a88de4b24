"""DSL501: a DataLoader given both ``sampler`` and a truthy ``shuffle``."""

from __future__ import annotations

from dslint.edits import remove_args
from dslint.report import FixSpec
from dslint.rules.base import Invalid, Rule, Symptom
from dslint.rules.loader._common import loader_calls, not_none, over_iterable, truthy


class SamplerWithShuffle(Rule):
    """
    ## What it does
    Flags a `DataLoader` over a map-style dataset given both a `sampler` and a
    truthy `shuffle`.

    ## Why is this bad?
    The sampler decides the order, so the two are contradictory, and torch
    refuses the combination at construction:
    `ValueError: sampler option is mutually exclusive with shuffle`.

    ## Example
    ```python
    loader = DataLoader(ds, sampler=DistributedSampler(ds), shuffle=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=True))
    ```

    ## Fix safety
    The fix removes the `shuffle` argument. It is safe: the sampler alone decides
    the order whatever `shuffle` says, and the current code cannot run at all.
    """

    code = "DSL501"
    name = "sampler-with-shuffle"
    symptom = Symptom("exception", "ValueError at construction")
    summary = "`DataLoader` is given both `sampler` and `shuffle=True`"
    help = "Remove `shuffle=True`: the sampler decides the order (shuffle inside the sampler instead)"

    valid = (
        """
        from torch.utils.data import DataLoader
        try:
            loader = DataLoader(ds, sampler=sampler, shuffle=True)
        except ValueError:  # the code expects torch to refuse it
            loader = DataLoader(ds, sampler=sampler)
        """,
        """
        from torch.utils.data import DataLoader, RandomSampler
        loader = DataLoader(ds, sampler=RandomSampler(ds))
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, sampler=sampler, shuffle=args.shuffle)  # unknown is not wrong
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, sampler=None, shuffle=True)
        """,
    )
    invalid = (
        Invalid(
            """
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler
            loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds), shuffle=True)  # expect: DSL501
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler
            loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))  # expect: DSL501
            """,
        ),
        Invalid(
            """
            from torch.utils.data.dataloader import DataLoader as DL
            loader = DL(ds, 8, True, sampler)  # expect: DSL501
            """,
            expected_replacement="""
            from torch.utils.data.dataloader import DataLoader as DL
            loader = DL(ds, 8, sampler)  # expect: DSL501
            """,
        ),
    )

    def check(self, ctx):
        for bound in loader_calls(ctx):
            if not not_none(ctx, bound, "sampler") or not truthy(ctx.value(bound, "shuffle")):
                continue
            if over_iterable(ctx, bound):
                continue  # DSL504 reports the iterable-dataset form
            fix = FixSpec("safe", "Remove `shuffle`", remove_args(bound.call, [bound.arg("shuffle")]))
            yield self.report(
                bound.call,
                "`sampler` and `shuffle=True` are mutually exclusive: the DataLoader raises "
                "`ValueError: sampler option is mutually exclusive with shuffle`",
                fix=fix,
            )
