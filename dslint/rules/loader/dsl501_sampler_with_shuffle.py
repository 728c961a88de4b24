"""DSL501: a DataLoader given both ``sampler`` and a truthy ``shuffle``."""

from __future__ import annotations

import libcst as cst

from dslint.edits import remove_args, replace
from dslint.report import FixSpec
from dslint.rules.base import Invalid, Rule, Symptom
from dslint.rules.loader._common import (
    always_set, given, line_of, literal_option, loader_calls, over_iterable, shuffled_with_supplied_sampler, truthy, where,
)
from dslint.semantics.builder_args import builder_calls
from dslint.semantics.loops import loader_loops
from dslint.semantics.values import possible


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

    When the sampler can be `None` on some path (a conditional expression, a
    branch that assigns `None`, a parameter or an attribute that nothing
    shows), torch raises only when the sampler is set; without it the loader
    shuffles, and the message says so.

    Options handed through `**kwargs` count when the code itself shows that
    a `sampler` can be among them: `shuffle=True` passed next to `**d`
    (to a `DataLoader`, or to a function of the file that hands `shuffle`
    and its own `**kwargs` to one without removing `sampler` on that path)
    where the code pops, reads or tests the `"sampler"` key of `d`, of a copy
    of it, or of that function's `**kwargs` elsewhere. There is no fix for
    this form.

    A function that passes its own `shuffle` and `sampler` parameters to the
    `DataLoader` is judged call by call: a call of it (in this file, or in a
    function of another file) that passes a sampler and leaves `shuffle` at a
    true default (or passes `True`) builds a loader that raises. No fix: the
    change belongs at the call or in the function's default.

    ## When it does not fire
    - A sampler that is literally `None`, or a `shuffle` that is false on every path.
    - An iterable dataset (DSL504 reports `shuffle`/`sampler` there).
    - A `**d` that nothing shows carrying a sampler: unknown is not wrong.
    - A function whose callers never pass a sampler with a true `shuffle`
      (or pass them through `*args`/`**kwargs`, or call it only at module
      level of another file, which is not summarised).

    ## Fix safety
    When the sampler is set on every path (each value the code can give it is
    a constructed object), the fix removes the `shuffle` keyword argument, or
    passes a positional `shuffle` as `False` (removing it would shift the
    later positional arguments). It is safe: the sampler alone decides the
    order whatever `shuffle` says, and the current code cannot run at all.

    When the sampler can be `None`, removing `shuffle` would stop the runs
    without a sampler from shuffling. The fix passes `shuffle=(sampler is
    None)` instead, which keeps every path that runs today as it is and
    turns the failing one into the sampler's order. It is safe when the
    sampler is a plain name, unsafe for an attribute (read twice), and there
    is no fix for any other expression or a non-literal `shuffle`.
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
        """
        import copy
        from torch.utils.data import DataLoader

        class Data:
            def __init__(self, **options):
                self.options = options
                self.options.pop("sampler", None)  # removed from the dict itself, not looked for

            def make(self, ds, **kwargs):
                kwargs.pop("sampler", None)  # on every path: a caller's sampler never arrives
                return DataLoader(ds, **kwargs)

            def train(self):
                return self.make(self.train_set, shuffle=True, **self.options)

            def plain(self, **extra):  # nothing shows a sampler in `extra`
                return DataLoader(self.train_set, shuffle=True, **extra)

            def direct(self):
                return DataLoader(self.train_set, shuffle=True, **self.options)

        def guarded(ds, **options):
            if "sampler" in options:  # handled before the call
                return DataLoader(ds, **options)
            return DataLoader(ds, shuffle=True, **options)

        def helper(ds, **kwargs):
            if kwargs.get("sampler") is not None:
                return DataLoader(ds, **kwargs)
            return DataLoader(ds, batch_size=4, **kwargs)

        def caller(ds, **options):
            options.pop("sampler", None)
            return helper(ds, shuffle=True, **options)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def create_loader(ds, batch_size, sampler=None, shuffle=True):
            return DataLoader(ds, batch_size=batch_size, sampler=sampler, shuffle=shuffle)

        def main(ds):  # no call gives a sampler and keeps shuffling
            return (create_loader(ds, 8), create_loader(ds, 8, None),
                    create_loader(ds, 8, DistributedSampler(ds), shuffle=False))
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def create_loader(ds, batch_size, sampler=None, shuffle=True):
            return DataLoader(ds, batch_size=batch_size, sampler=sampler, shuffle=shuffle)  # expect: DSL501

        def main(ds, distributed):
            sampler = DistributedSampler(ds) if distributed else None
            return create_loader(ds, 8, sampler)  # shuffle keeps its default
        """,
        """
        import copy
        from torch.utils.data import DataLoader

        class Data:
            def __init__(self, **options):
                self.options = options

            def make(self, ds, **kwargs):
                if self.whole:
                    kwargs.pop("sampler", None)
                    return DataLoader([ds], **kwargs)
                return DataLoader(ds, batch_size=32, **kwargs)

            def train(self):
                return self.make(self.train_set, shuffle=True, **self.options)  # expect: DSL501

            def val(self):
                options = copy.copy(self.options)
                options.pop("sampler", None)
                return self.make(self.val_set, shuffle=False, **options)
        """,
        """
        from torch.utils.data import DataLoader, RandomSampler
        options = {"batch_size": 8, "shuffle": True}
        loader = DataLoader(ds, sampler=RandomSampler(ds), **options)  # expect: DSL501
        """,
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
            loader = DL(ds, 8, sampler is None, sampler)  # expect: DSL501
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader, DistributedSampler

            def make(ds, distributed):
                sampler = DistributedSampler(ds) if distributed else None
                return DataLoader(ds, batch_size=8, shuffle=True, sampler=sampler)  # expect: DSL501
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader, DistributedSampler

            def make(ds, distributed):
                sampler = DistributedSampler(ds) if distributed else None
                return DataLoader(ds, batch_size=8, shuffle=(sampler is None), sampler=sampler)  # expect: DSL501
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader, RandomSampler
            loader = DataLoader(ds, 8, True, RandomSampler(ds))  # expect: DSL501
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader, RandomSampler
            loader = DataLoader(ds, 8, False, RandomSampler(ds))  # expect: DSL501
            """,
        ),
    )

    def check(self, ctx):
        error = "`ValueError: sampler option is mutually exclusive with shuffle`"
        for call, star, shown, callee in shuffled_with_supplied_sampler(ctx):
            through = f" by `{callee.name.value}`" if callee is not None else ""
            yield self.report(
                call,
                f"`shuffle=True` is passed with `**{ctx.code(star).strip()}`, which can hold a `sampler` (the code "
                f"looks for one on line {line_of(ctx, shown)}): the DataLoader built{through} then raises {error}",
            )
        index = loader_loops(ctx)
        error = "`ValueError: sampler option is mutually exclusive with shuffle`"
        for bound in loader_calls(ctx):
            if not truthy(literal_option(ctx, bound, "shuffle")):
                caller = _caller_with_sampler(ctx, bound)
                if caller is not None and not over_iterable(ctx, bound):
                    yield self.report(
                        bound.call,
                        f"{caller} passes a `sampler` to this function and leaves `shuffle` true (`shuffle="
                        f"{ctx.code(bound.expr('shuffle')).strip()}`): the DataLoader built for that call raises {error}",
                    )
                continue
            if not given(ctx, bound, "sampler"):
                continue
            if over_iterable(ctx, bound):
                continue  # DSL504 reports the iterable-dataset form
            shuffle = bound.arg("shuffle")
            if shuffle is None:  # both come from a ``**`` dict: no edit to offer here
                yield self.report(bound.call, f"`sampler` and `shuffle=True` (from `**` options) are mutually exclusive: the DataLoader raises {error}")
                continue
            if always_set(index, bound, "sampler"):
                fix = FixSpec("safe", "Remove `shuffle`", remove_args(bound.call, [shuffle]))
                if shuffle.keyword is None:  # positional: keep the later arguments where they are
                    fix = FixSpec("safe", "Pass `shuffle` as `False`", [replace(shuffle.value, "False")])
                yield self.report(bound.call, f"`sampler` and `shuffle=True` are mutually exclusive: the DataLoader raises {error}", fix=fix)
                continue
            sampler = bound.expr("sampler")
            none = possible(ctx, sampler).can_be(lambda v: v is None)
            when = f" (it is None {where(ctx, sampler, none)})" if none is not None else ""
            fix = None
            if ctx.literal(shuffle.value) is True and isinstance(sampler, (cst.Name, cst.Attribute)):
                text = f"{ctx.code(sampler).strip()} is None"
                edit = [replace(shuffle.value, f"({text})" if shuffle.keyword is not None else text)]
                safety = "safe" if isinstance(sampler, cst.Name) else "unsafe"
                fix = FixSpec(safety, f"Shuffle only without a sampler: `shuffle={text}`", edit)
            yield self.report(
                bound.call,
                f"`sampler` and `shuffle=True` are mutually exclusive: the DataLoader raises {error} whenever "
                f"`sampler` is not None{when}; without a sampler the loader shuffles",
                fix=fix,
            )


def _caller_with_sampler(ctx, bound):
    """Where a call of the function building ``bound`` from its own ``shuffle`` and ``sampler``
    parameters passes a sampler (not ``None``) while ``shuffle`` stays true (``builder_args``)."""
    for where, values in builder_calls(ctx, bound, ("shuffle", "sampler")):
        if values["shuffle"] is True and values["sampler"] not in (None, False):
            return where
    return None
