"""DSL502: ``batch_sampler`` combined with the options it decides itself."""

from __future__ import annotations

from dslint.rules.base import Rule, Symptom
from dslint.rules.loader._common import (
    always_set, forced_over_open_spec, forced_with_supplied_key, given, is_int, kwargs_entry, line_of, literal_option, loader_calls,
    over_iterable, truthy, where,
)
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.count_branches import branches_on
from dslint.semantics.loops import loader_loops
from dslint.semantics.forwarding import switch
from dslint.semantics.values import possible, possible_arg


class BatchSamplerConflict(Rule):
    """
    ## What it does
    Flags a `DataLoader` (or a DataLoader subclass's `super().__init__`) given a
    `batch_sampler` together with `batch_size` other than 1 (`None` included), a
    truthy `shuffle`, a `sampler`, or a truthy `drop_last`.

    Literal values count as written. When the batch sampler is set on every
    path (each value the code can give it is a constructed object, never
    `None` or unknown), an option counts when it *can* conflict: an argparse
    option whose default is 64 counts as 64, a parameter's default or a value
    this file's calls pass counts, and a `bool` parameter forwarded unchanged
    (`drop_last=drop_last` with `drop_last: bool = False`) counts as possibly
    `True`, since the caller chooses.

    Options handed through `**kwargs` count when the code itself shows that
    a `batch_sampler` can be among them: `batch_size` (other than 1),
    `shuffle=True` or `drop_last=True` written next to `**d` (for a
    `DataLoader`, or for a function of the file that hands them and its own
    `**kwargs` to one without removing `batch_sampler` on that path) where
    the code pops, reads or tests the `"batch_sampler"` key of `d`, of a copy
    of it, or of that function's `**kwargs` elsewhere, and not before the call
    in its own function (a guard).

    A loader built only from `**params` counts too when `params` takes the entries of a
    mapping the code cannot list (`params = merge(spec, params)`, `params.update(spec)`,
    `{**spec, ...}`) that the code shows to be a loader specification (it reads or tests
    its `dataset`, `sampler` or `batch_sampler` entry: it carries the loader's own objects,
    so it can carry a batch sampler), and every path then sets in `params` a `batch_size`
    that can be other than 1, or a `shuffle`/`drop_last` that can be true (a value seen, or
    a test the code computes such as `name == "train"`).

    ## When it does not fire
    - An option whose values nothing in the project shows, or one the code branches on
      before the call or inside it (`batch_size if batches is None else 1`).
    - A batch sampler that can be `None` or unknown, with options that are not literals; a `sampler` or
      `batch_sampler` read under a test that it is `None` (`if self.batch_sampler is None and self.sampler is None:`).
    - A `**d` that nothing shows carrying a batch sampler; a `params` whose
      `batch_sampler` entry the code looks for before the call.

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

        def build(ds, **options):
            if "batch_sampler" in options:  # the code handles it before the call
                return DataLoader(ds, **options)
            return DataLoader(ds, batch_size=32, shuffle=True, **options)

        def plain(ds, **options):  # nothing shows a batch sampler in `options`
            return DataLoader(ds, batch_size=32, drop_last=True, **options)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_sampler=bs, batch_size=1, shuffle=False, drop_last=False)
        """,
        """
        from torch.utils.data import DataLoader

        class Loaders:
            def build(self, ds):
                if self.batch_sampler is None and self.sampler is None:  # both are None in this branch
                    return DataLoader(ds, sampler=self.sampler, batch_sampler=self.batch_sampler)
                return DataLoader(ds, batch_sampler=self.batch_sampler)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_sampler=bs, **cfg)
        """,
        """
        from torch.utils.data import BatchSampler, DataLoader, RandomSampler

        def make(ds, batch_size=32, drop_last=False, bucketed=False):
            batches = BatchSampler(RandomSampler(ds), batch_size, drop_last) if bucketed else None
            return DataLoader(  # the batch sampler can be None: then the options are the loader's
                ds, batch_sampler=batches, batch_size=batch_size if batches is None else 1, drop_last=drop_last
            )

        def from_spec(spec, split):  # nothing shows `spec` carrying loader objects
            params = dict(spec)
            params["shuffle"] = split == "train"
            return DataLoader(**params)

        def guarded(spec, split):
            assert "dataset" in spec
            params = {**spec, "shuffle": split == "train"}
            if "batch_sampler" in params:  # the code looks for a batch sampler first
                raise ValueError("give a batch_sampler without shuffle")
            return DataLoader(**params)

        class Loader(DataLoader):  # forwards both: passing both is the caller's choice
            def __init__(self, dataset, sampler=None, batch_sampler=None):
                super().__init__(dataset, sampler=sampler, batch_sampler=batch_sampler)
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader

        class Loaders:
            def __init__(self, **options):
                self.options = options

            def evaluation(self, ds):
                options = dict(self.options)
                options.pop("batch_sampler", None)
                return DataLoader(ds, **options)

            def training(self, ds):
                return DataLoader(ds, batch_size=64, drop_last=True, **self.options)  # expect: DSL502
        """,
        """
        from torch.utils.data import DataLoader

        def loaders(specs, batch_size):
            out = {}
            for split, spec in specs.items():
                assert "dataset" in spec  # a specification of the loader's own objects
                params = merge({"batch_size": batch_size}, spec)
                params["shuffle"] = split == "train" and params.get("sampler") is None
                out[split] = DataLoader(**params)  # expect: DSL502
            return out
        """,
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
        """
        from torch.utils.data import DataLoader
        options = dict(batch_size=32, drop_last=True, batch_sampler=buckets)
        loader = DataLoader(ds, **options)  # expect: DSL502
        """,
        """
        import argparse
        from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

        parser = argparse.ArgumentParser()
        parser.add_argument("--batch-size", type=int, default=64)
        args = parser.parse_args()
        batches = BatchSampler(SequentialSampler(ds), args.batch_size, drop_last=False)
        loader = DataLoader(ds, batch_sampler=batches, batch_size=args.batch_size)  # expect: DSL502
        """,
        """
        import torch.utils.data as tud

        class PoissonLoader(tud.DataLoader):
            def __init__(self, dataset, rate: float, drop_last: bool = False, distributed: bool = False):
                if distributed:
                    batches = ShardedPoisson(len(dataset), rate)
                else:
                    batches = Poisson(len(dataset), rate)
                super().__init__(dataset, batch_sampler=batches, drop_last=drop_last)  # expect: DSL502
        """,
    )

    def check(self, ctx):
        for call, star, shown, callee, names in forced_with_supplied_key(ctx, "batch_sampler", _forced):
            through = f" by `{callee.name.value}`" if callee is not None else ""
            yield self.report(
                call,
                f"{', '.join(f'`{n}`' for n in names)} {'is' if len(names) == 1 else 'are'} passed with "
                f"`**{ctx.code(star).strip()}`, which can hold a `batch_sampler` (the code looks for one on line "
                f"{line_of(ctx, shown)}): the DataLoader built{through} then raises `ValueError: batch_sampler option "
                "is mutually exclusive with batch_size, shuffle, sampler, and drop_last`",
            )
        index = loader_loops(ctx)
        for bound in loader_calls(ctx):
            if over_iterable(ctx, bound):
                continue
            found = None if given(ctx, bound, "batch_sampler") else forced_over_open_spec(ctx, bound)
            if found is not None:
                spec, options = found
                yield self.report(
                    bound.call,
                    f"`{spec.holder.value}` takes the entries of `{ctx.code(spec.source).strip()}`, a loader "
                    f"specification that can hold a `batch_sampler` (line {line_of(ctx, spec.evidence)} reads its "
                    f"`{spec.key}`), and every path sets {', '.join(f'`{n}`, which {why}' for n, why in options)}: "
                    "with a batch sampler the DataLoader raises `ValueError: batch_sampler option is mutually "
                    "exclusive with batch_size, shuffle, sampler, and drop_last`",
                )
            if not given(ctx, bound, "batch_sampler"):
                continue
            conflicts = list(self._literal_conflicts(ctx, bound))
            if not conflicts and always_set(index, bound, "batch_sampler"):
                conflicts = list(self._possible_conflicts(ctx, index, bound))
            if conflicts:
                yield self.report(
                    bound.call,
                    f"`batch_sampler` cannot be combined with {', '.join(conflicts)}: the "
                    f"DataLoader {'raises' if all('can be' not in c for c in conflicts) else 'then raises'} "
                    "`ValueError: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                    "and drop_last`",
                )

    @staticmethod
    def _literal_conflicts(ctx, bound):
        if bound.passed("batch_size") or kwargs_entry(ctx, bound, "batch_size") is not None:
            size = literal_option(ctx, bound, "batch_size")
            if size is not UNKNOWN and not (is_int(size) and size == 1):
                yield f"`batch_size={size!r}`"
        shuffle = literal_option(ctx, bound, "shuffle")
        if truthy(shuffle):
            yield f"`shuffle={shuffle!r}`"
        if given(ctx, bound, "sampler") and possible(ctx, bound.expr("sampler")).can_be(lambda v: v is None) is None:
            yield "`sampler`"  # a sampler that can be None (a parameter defaulting to None) is the caller's choice
        drop_last = literal_option(ctx, bound, "drop_last")
        if truthy(drop_last):
            yield f"`drop_last={drop_last!r}`"

    @staticmethod
    def _possible_conflicts(ctx, index, bound):
        """With the batch sampler set on every path: options that can conflict on some path
        (values.py, and a ``bool`` parameter forwarded unchanged), unless the code branches on them first."""
        checks = (
            ("batch_size", lambda v: v is None or not (is_int(v) and v == 1)),
            ("shuffle", lambda v: v is not None and bool(v)),
            ("drop_last", lambda v: bool(v)),
        )
        for name, conflicts in checks:
            expr = bound.expr(name)
            found = possible_arg(ctx, bound, name) | switch(ctx, expr)
            value = found.can_be(conflicts)
            if value is None or (expr is not None and branches_on(ctx, index, bound.call, expr)):
                continue
            yield f"`{name}`, which can be `{value.value!r}` {where(ctx, expr, value)}"


def _forced(ctx, named):
    """The options a call writes that conflict with a batch sampler: a literal ``batch_size``
    other than 1, ``shuffle=True``, ``drop_last=True``."""
    out = []
    size = named.get("batch_size")
    if size is not None and ctx.literal(size.value) is not UNKNOWN and not (is_int(ctx.literal(size.value)) and ctx.literal(size.value) == 1):
        out.append("batch_size")
    for name in ("shuffle", "drop_last"):
        if name in named and ctx.literal(named[name].value) is True:
            out.append(name)
    return out
