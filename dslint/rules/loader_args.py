"""DSL501-504, DSL509: DataLoader and sampler arguments that torch rejects.

Every check evaluates only literals (and module constants assigned once to a
literal). A non-literal argument, or a parameter that ``*args``/``**kwargs`` could
supply, is unknown, and an unknown is never reported.
"""

from __future__ import annotations

from typing import List, Tuple

import libcst as cst

from dslint.edits import remove_args, replace
from dslint.report import FixSpec
from dslint.rules.base import ERROR, Rule, Symptom
from dslint.semantics.calls import UNKNOWN, Signature
from dslint.semantics.names import dotted_parts
from dslint.semantics.project import ITERABLE
from dslint.semantics.walk import iter_subtree

VALID_START_METHODS = ("fork", "spawn", "forkserver")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _not_none(ctx, bound, name) -> bool:
    """Passed, and not the literal ``None``."""
    arg = bound.arg(name)
    return arg is not None and ctx.literal(arg.value) is not None


def _truthy(value) -> bool:
    return value is not UNKNOWN and bool(value)


def _iterable(ctx, bound) -> bool:
    return ctx.dataset_kind(bound.expr("dataset")) == ITERABLE


_RAISES_CONTEXTS = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "raises"})
_CAUGHT = frozenset({"ValueError", "TypeError", "AssertionError"})  # what torch raises; not a catch-all


def expects_error(ctx, node) -> bool:
    """The code expects the call to raise: inside ``with self.assertRaises(...)``/``pytest.raises(...)``
    or in the body of a ``try`` with a handler for the exception type torch raises (a bare
    ``except:`` or ``except Exception`` is a catch-all, not an expectation)."""
    previous = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.With) and previous is ancestor.body:
            for item in ancestor.items:
                expr = item.item
                if isinstance(expr, cst.Call):
                    parts = dotted_parts(expr.func)
                    if parts and parts[-1] in _RAISES_CONTEXTS:
                        return True
        if isinstance(ancestor, cst.Try) and previous is ancestor.body:
            for handler in ancestor.handlers:
                if handler.type is None:
                    continue
                names = [dotted_parts(n) for n in iter_subtree(handler.type) if isinstance(n, (cst.Name, cst.Attribute))]
                if any(parts and parts[-1] in _CAUGHT for parts in names):
                    return True
        previous = ancestor
    return False


def _loader_calls(ctx):
    """The module's DataLoader calls, less those the code expects to fail (a test of the error)."""
    return [bound for bound in ctx.dataloader_calls() if not expects_error(ctx, bound.call)]


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
    fix_availability = "always"
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
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds), shuffle=True)  # expect: DSL501
        """,
        """
        from torch.utils.data.dataloader import DataLoader as DL
        loader = DL(ds, 8, True, sampler)  # expect: DSL501
        """,
    )

    def check(self, ctx):
        for bound in _loader_calls(ctx):
            if not _not_none(ctx, bound, "sampler") or not _truthy(ctx.value(bound, "shuffle")):
                continue
            if _iterable(ctx, bound):
                continue  # DSL504 reports the iterable-dataset form
            fix = FixSpec("safe", "Remove `shuffle`", remove_args(bound.call, [bound.arg("shuffle")]))
            yield self.report(
                bound.call,
                "`sampler` and `shuffle=True` are mutually exclusive: the DataLoader raises "
                "`ValueError: sampler option is mutually exclusive with shuffle`",
                fix=fix,
            )


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
        for bound in _loader_calls(ctx):
            if not _not_none(ctx, bound, "batch_sampler") or _iterable(ctx, bound):
                continue
            conflicts: List[str] = []
            if bound.passed("batch_size"):
                size = ctx.value(bound, "batch_size")
                if size is not UNKNOWN and not (_is_int(size) and size == 1):
                    conflicts.append(f"batch_size={size!r}")
            shuffle = ctx.value(bound, "shuffle")
            if _truthy(shuffle):
                conflicts.append(f"shuffle={shuffle!r}")
            if _not_none(ctx, bound, "sampler"):
                conflicts.append("sampler")
            drop_last = ctx.value(bound, "drop_last")
            if _truthy(drop_last):
                conflicts.append(f"drop_last={drop_last!r}")
            if conflicts:
                yield self.report(
                    bound.call,
                    f"`batch_sampler` cannot be combined with {', '.join(f'`{c}`' for c in conflicts)}: the "
                    "DataLoader raises `ValueError: batch_sampler option is mutually exclusive with "
                    "batch_size, shuffle, sampler, and drop_last`",
                )


class WorkerOptionWithoutWorkers(Rule):
    """
    ## What it does
    Flags `prefetch_factor`, `persistent_workers=True`, `timeout > 0` or
    `multiprocessing_context` on a `DataLoader` whose `num_workers` is absent or
    a literal `0`.

    ## Why is this bad?
    These options only mean something for worker processes, and torch rejects
    them without workers:

    - `prefetch_factor`: `ValueError: prefetch_factor option could only be
      specified in multiprocessing.let num_workers > 0 to enable multiprocessing,
      otherwise set prefetch_factor to None.`
    - `persistent_workers=True`: `ValueError: persistent_workers option needs
      num_workers > 0`
    - `multiprocessing_context`: `ValueError: multiprocessing_context can only be
      used with multi-process loading (num_workers > 0), but got num_workers=0`
    - `timeout > 0`: no error at construction, but
      `AssertionError: _SingleProcessDataLoaderIter requires timeout == 0` at the
      first `iter()`, i.e. when training starts.

    Often `num_workers` was meant to be set and was forgotten.

    ## Example
    ```python
    loader = DataLoader(ds, batch_size=64, persistent_workers=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(ds, batch_size=64, num_workers=4, persistent_workers=True)
    ```

    ## Fix safety
    The fix removes the worker-only options, which makes the loader run, in the
    main process. It is unsafe: the author may have meant to add workers instead
    (`num_workers=4`), which the fix cannot know.
    """

    code = "DSL503"
    name = "worker-option-without-workers"
    symptom = Symptom("exception", "ValueError at construction, or AssertionError at first iter()")
    summary = "A worker-only DataLoader option is set while `num_workers` is 0"
    fix_availability = "always"
    help = "Set `num_workers > 0`, or remove the worker-only options"

    valid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4, prefetch_factor=4, persistent_workers=True, timeout=30)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=args.workers, persistent_workers=True)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, prefetch_factor=None, persistent_workers=False, timeout=0)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, persistent_workers=True, **loader_kwargs)
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, persistent_workers=True)  # expect: DSL503
        """,
        """
        from torch.utils.data import DataLoader
        WORKERS = 0
        loader = DataLoader(ds, num_workers=WORKERS, prefetch_factor=2)  # expect: DSL503
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, timeout=10)  # expect: DSL503
        """,
    )

    def check(self, ctx):
        for bound in _loader_calls(ctx):
            workers = ctx.value(bound, "num_workers")
            if workers is UNKNOWN or workers is None or workers != 0:
                continue
            problems: List[Tuple[str, str, str]] = []
            if _not_none(ctx, bound, "prefetch_factor"):
                problems.append(("prefetch_factor", "prefetch_factor", "`ValueError: prefetch_factor option could only be specified in multiprocessing`"))
            if _truthy(ctx.value(bound, "persistent_workers")):
                problems.append(("persistent_workers=True", "persistent_workers", "`ValueError: persistent_workers option needs num_workers > 0`"))
            if _not_none(ctx, bound, "multiprocessing_context"):
                problems.append(("multiprocessing_context", "multiprocessing_context", "`ValueError: multiprocessing_context can only be used with multi-process loading`"))
            timeout = ctx.value(bound, "timeout")
            if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
                problems.append((f"timeout={timeout!r}", "timeout", "`AssertionError: _SingleProcessDataLoaderIter requires timeout == 0` at the first `iter()`"))
            if problems:
                doomed = [bound.arg(p[1]) for p in problems]
                fix = FixSpec(
                    "unsafe",
                    f"Remove {', '.join(f'`{p[1]}`' for p in problems)}",
                    remove_args(bound.call, doomed),
                )
                names = " and ".join(f"`{p[0]}`" for p in problems)
                yield self.report(
                    bound.call,
                    f"{names} need{'s' if len(problems) == 1 else ''} worker processes but `num_workers` is 0: "
                    f"the DataLoader raises {problems[0][2]}",
                    fix=fix,
                )


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
        for bound in _loader_calls(ctx):
            if not _iterable(ctx, bound):
                continue
            shuffle = ctx.value(bound, "shuffle")
            if bound.passed("shuffle") and shuffle is not UNKNOWN and shuffle not in (False, None):
                option = f"shuffle option, but got shuffle={shuffle}"
            elif _not_none(ctx, bound, "sampler"):
                option = "sampler option"
            elif _not_none(ctx, bound, "batch_sampler"):
                option = "batch_sampler option"
            else:
                continue
            yield self.report(
                bound.call,
                f"an IterableDataset has no indices to shuffle or sample: the DataLoader raises "
                f"`ValueError: DataLoader with IterableDataset: expected unspecified {option}`",
            )


RANDOM_SAMPLER = Signature(("data_source", "replacement", "num_samples", "generator"), (), {"replacement": False, "num_samples": None})
WEIGHTED_SAMPLER = Signature(("weights", "num_samples", "replacement", "generator"), (), {"replacement": True})
DISTRIBUTED_SAMPLER = Signature(
    ("dataset", "num_replicas", "rank", "shuffle", "seed", "drop_last"), (), {"num_replicas": None, "rank": None}
)
CONCAT_DATASET = Signature(("datasets",))


class InvalidLoaderLiteral(Rule):
    """
    ## What it does
    Flags literal `DataLoader` and sampler arguments that torch rejects, each
    with the exact error torch raises:

    | argument | torch raises |
    |---|---|
    | `num_workers < 0` | `ValueError: num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.` |
    | `num_workers` a float | `TypeError: 'float' object cannot be interpreted as an integer` at the first `iter()` |
    | `timeout < 0` | `ValueError: timeout option should be non-negative` |
    | `prefetch_factor < 0` (with workers) | `ValueError: prefetch_factor option should be non-negative` |
    | `prefetch_factor=0` (with workers) | `AssertionError: prefetch_factor must be greater than 0 for MultiProcessingDataLoaderIter` at the first `iter()` |
    | `batch_size` 0, negative, a bool or a float | `ValueError: batch_size should be a positive integer value, but got batch_size=0` |
    | `drop_last` not a bool | `ValueError: drop_last should be a boolean value, but got drop_last=1` |
    | `batch_size=None` with `drop_last=True` | `ValueError: batch_size=None option disables auto-batching and is mutually exclusive with drop_last` |
    | `multiprocessing_context` an unknown start method | `ValueError: multiprocessing_context option should specify a valid start method in ['fork', 'spawn', 'forkserver'], but got multiprocessing_context='bogus'` |
    | `multiprocessing_context` neither a string nor a context | `TypeError: multiprocessing_context option should be a valid context object or a string specifying the start method, but got multiprocessing_context=123` |
    | `RandomSampler(replacement=)` not a bool | `TypeError: replacement should be a boolean value, but got replacement=1` |
    | `RandomSampler(num_samples=)` not positive | `ValueError: num_samples should be a positive integer value, but got num_samples=0` |
    | `WeightedRandomSampler` `num_samples` not a positive int, `replacement` not a bool | `ValueError` with the same messages |
    | `WeightedRandomSampler` weights not 1-D | `ValueError: weights should be a 1d sequence but given weights have shape (1, 2)` |
    | `DistributedSampler` rank outside `[0, num_replicas-1]` | `ValueError: Invalid rank 2, rank should be in the interval [0, 1]` |
    | `ConcatDataset([])` | `AssertionError: datasets should not be an empty iterable` |

    The conflicts between options have their own rules (DSL501-DSL504).
    Calls the code expects to fail are not reported (here and in DSL501-DSL504):
    inside `with pytest.raises(...)`/`self.assertRaises(...)`, or in a `try`
    with an `except` for `ValueError`, `TypeError` or `AssertionError`.

    ## Fix safety
    Where the intent is unambiguous the fix is safe: `drop_last=1`/`0` and
    `replacement=1`/`0` become `True`/`False`, and an integral float
    `num_workers=2.0` becomes `2`. Every other case needs a decision (what batch
    size did you mean?), so it has no fix.

    ## Why is this bad?
    Each of these fails every time the line runs; two of them (`num_workers`
    as a float, `prefetch_factor=0`) only when iteration starts, after the
    model and data have been set up.

    ## Example
    ```python
    loader = DataLoader(ds, batch_size=32, drop_last=1, num_workers=4, prefetch_factor=0)
    ```

    ## Use instead
    ```python
    loader = DataLoader(ds, batch_size=32, drop_last=True, num_workers=4, prefetch_factor=2)
    ```
    """

    code = "DSL509"
    name = "invalid-loader-literal"
    symptom = Symptom("exception", "the exact ValueError/TypeError/AssertionError, some at first iter()")
    summary = "A literal DataLoader or sampler argument that torch rejects"
    fix_availability = "sometimes"
    help = "Use a value torch accepts (see the table in `dslint rule DSL509`)"

    valid = (
        """
        import pytest
        from torch.utils.data import DataLoader, RandomSampler

        def test_rejects_bad_values(ds):
            with pytest.raises(ValueError):
                DataLoader(ds, num_workers=-1)  # the test expects the error
            with pytest.raises(TypeError):
                RandomSampler(ds, replacement=0)
        """,
        """
        import unittest
        from torch.utils.data import DistributedSampler

        class T(unittest.TestCase):
            def test_rank(self):
                with self.assertRaisesRegex(ValueError, "Invalid rank"):
                    DistributedSampler(range(10), 3, 3)
        """,
        """
        from torch.utils.data import DataLoader, RandomSampler, DistributedSampler
        loader = DataLoader(ds, batch_size=32, drop_last=True, num_workers=4, prefetch_factor=2, timeout=5.0)
        s = RandomSampler(ds, replacement=True, num_samples=100)
        d = DistributedSampler(ds, num_replicas=2, rank=1)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=None, num_workers=args.n, multiprocessing_context="spawn")
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        a = DataLoader(ds, num_workers=-1)  # expect: DSL509
        b = DataLoader(ds, batch_size=0)  # expect: DSL509
        c = DataLoader(ds, drop_last=1)  # expect: DSL509
        d = DataLoader(ds, num_workers=2, prefetch_factor=0)  # expect: DSL509
        e = DataLoader(ds, num_workers=2.0)  # expect: DSL509
        f = DataLoader(ds, batch_size=None, drop_last=True)  # expect: DSL509
        g = DataLoader(ds, num_workers=2, multiprocessing_context="threads")  # expect: DSL509
        """,
        """
        import torch.utils.data as tud
        s = tud.RandomSampler(ds, replacement=1)  # expect: DSL509
        w = tud.WeightedRandomSampler([[0.5, 0.5]], 2)  # expect: DSL509
        d = tud.DistributedSampler(ds, num_replicas=2, rank=2)  # expect: DSL509
        c = tud.ConcatDataset([])  # expect: DSL509
        """,
    )

    def check(self, ctx):
        for bound in _loader_calls(ctx):
            for problem in self._loader_problems(ctx, bound):
                message, fix = problem if isinstance(problem, tuple) else (problem, None)
                yield self.report(bound.call, message, fix=fix)
        checks = (
            ("torch.utils.data.RandomSampler", RANDOM_SAMPLER, self._random_sampler),
            ("torch.utils.data.WeightedRandomSampler", WEIGHTED_SAMPLER, self._weighted_sampler),
            ("torch.utils.data.DistributedSampler", DISTRIBUTED_SAMPLER, self._distributed_sampler),
            ("torch.utils.data.ConcatDataset", CONCAT_DATASET, self._concat),
        )
        for name, signature, method in checks:
            for call in ctx.calls_to(name):
                if expects_error(ctx, call):
                    continue
                problem = method(ctx, ctx.bind(call, signature))
                if problem:
                    message, fix = problem if isinstance(problem, tuple) else (problem, None)
                    yield self.report(call, message, fix=fix)

    @staticmethod
    def _loader_problems(ctx, bound):
        value = lambda name: ctx.value(bound, name)  # noqa: E731
        workers = value("num_workers")
        if _is_int(workers) and workers < 0:
            yield (
                f"`num_workers={workers}` is negative: the DataLoader raises `ValueError: num_workers option "
                "should be non-negative; use num_workers=0 to disable multiprocessing.`"
            )
        if isinstance(workers, float):
            yield (
                f"`num_workers={workers!r}` is a float: the first `iter()` raises `TypeError: 'float' object "
                "cannot be interpreted as an integer`",
                _literal_fix(bound, "num_workers", str(int(workers))) if workers.is_integer() and workers >= 0 else None,
            )
        timeout = value("timeout")
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout < 0:
            yield f"`timeout={timeout!r}` is negative: the DataLoader raises `ValueError: timeout option should be non-negative`"
        has_workers = _is_int(workers) and workers > 0 or workers is True
        prefetch = value("prefetch_factor")
        if has_workers and _is_int(prefetch) and prefetch < 0:
            yield f"`prefetch_factor={prefetch}` is negative: the DataLoader raises `ValueError: prefetch_factor option should be non-negative`"
        if has_workers and _is_int(prefetch) and prefetch == 0:
            yield (
                "`prefetch_factor=0` with workers: the first `iter()` raises `AssertionError: prefetch_factor "
                "must be greater than 0 for MultiProcessingDataLoaderIter`"
            )
        batch_sampler = value("batch_sampler")
        batch_size = value("batch_size")
        drop_last = value("drop_last")
        if batch_sampler is None and bound.passed("batch_size") and batch_size is not UNKNOWN and batch_size is not None:
            if not _is_int(batch_size) or batch_size <= 0:
                yield (
                    f"`batch_size={batch_size!r}` is not a positive integer: the DataLoader raises `ValueError: "
                    f"batch_size should be a positive integer value, but got batch_size={batch_size}`"
                )
        if batch_sampler is None and batch_size is None and _truthy(drop_last):
            yield (
                "`batch_size=None` with `drop_last=True`: the DataLoader raises `ValueError: batch_size=None "
                "option disables auto-batching and is mutually exclusive with drop_last`"
            )
        if (
            batch_sampler is None
            and batch_size is not None
            and bound.passed("drop_last")
            and drop_last is not UNKNOWN
            and not isinstance(drop_last, bool)
        ):
            yield (
                f"`drop_last={drop_last!r}` is not a bool: the DataLoader raises `ValueError: drop_last should be "
                f"a boolean value, but got drop_last={drop_last}`",
                _bool_fix(bound, "drop_last", drop_last),
            )
        context = value("multiprocessing_context")
        if bound.passed("multiprocessing_context") and context is not UNKNOWN and context is not None:
            if workers is UNKNOWN or workers != 0:  # with 0 workers DSL503 reports it
                if isinstance(context, str) and context not in VALID_START_METHODS:
                    yield (
                        f"`multiprocessing_context={context!r}` is not a start method: the DataLoader raises "
                        "`ValueError: multiprocessing_context option should specify a valid start method in "
                        f"['fork', 'spawn', 'forkserver'], but got multiprocessing_context={context!r}`"
                    )
                if not isinstance(context, str):
                    yield (
                        f"`multiprocessing_context={context!r}` is neither a start method nor a context: the "
                        "DataLoader raises `TypeError: multiprocessing_context option should be a valid context "
                        "object or a string specifying the start method`"
                    )

    @staticmethod
    def _random_sampler(ctx, bound):
        replacement = ctx.value(bound, "replacement")
        if replacement is not UNKNOWN and not isinstance(replacement, bool):
            return (
                f"`replacement={replacement!r}` is not a bool: `RandomSampler` raises `TypeError: replacement "
                f"should be a boolean value, but got replacement={replacement}`",
                _bool_fix(bound, "replacement", replacement),
            )
        num_samples = ctx.value(bound, "num_samples")
        if num_samples is not UNKNOWN and num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            return (
                f"`num_samples={num_samples!r}` is not a positive integer: `RandomSampler` raises `ValueError: "
                f"num_samples should be a positive integer value, but got num_samples={num_samples}`"
            )
        return None

    @staticmethod
    def _weighted_sampler(ctx, bound):
        num_samples = ctx.value(bound, "num_samples")
        if bound.passed("num_samples") and num_samples is not UNKNOWN and (not _is_int(num_samples) or num_samples <= 0):
            return (
                f"`num_samples={num_samples!r}` is not a positive integer: `WeightedRandomSampler` raises "
                f"`ValueError: num_samples should be a positive integer value, but got num_samples={num_samples}`"
            )
        replacement = ctx.value(bound, "replacement")
        if replacement is not UNKNOWN and not isinstance(replacement, bool):
            return (
                f"`replacement={replacement!r}` is not a bool: `WeightedRandomSampler` raises `ValueError: "
                f"replacement should be a boolean value, but got replacement={replacement}`",
                _bool_fix(bound, "replacement", replacement),
            )
        weights = ctx.literal(bound.expr("weights")) if bound.passed("weights") else UNKNOWN
        if isinstance(weights, (list, tuple)) and weights and all(isinstance(w, (list, tuple)) for w in weights):
            return (
                "the weights are not 1-D: `WeightedRandomSampler` raises `ValueError: weights should be a 1d "
                "sequence but given weights have shape ...`"
            )
        return None

    @staticmethod
    def _distributed_sampler(ctx, bound):
        rank = ctx.value(bound, "rank")
        replicas = ctx.value(bound, "num_replicas")
        if not _is_int(rank):
            return None
        if rank < 0 or (_is_int(replicas) and rank >= replicas):
            upper = f"{replicas - 1}" if _is_int(replicas) else "num_replicas - 1"
            return (
                f"`rank={rank}` is outside the replicas: `DistributedSampler` raises `ValueError: Invalid rank "
                f"{rank}, rank should be in the interval [0, {upper}]`"
            )
        return None

    @staticmethod
    def _concat(ctx, bound):
        datasets = ctx.literal(bound.expr("datasets")) if bound.passed("datasets") else UNKNOWN
        if isinstance(datasets, (list, tuple)) and not datasets:
            return "`ConcatDataset` of nothing: it raises `AssertionError: datasets should not be an empty iterable`"
        return None


def _literal_fix(bound, name: str, text: str):
    arg = bound.arg(name)
    if arg is None:
        return None
    return FixSpec("safe", f"Use `{name}={text}`", [replace(arg.value, text)])


def _bool_fix(bound, name: str, value):
    """``1``/``0`` (the only unambiguous spellings) become ``True``/``False``."""
    if type(value) is not int or value not in (0, 1):
        return None
    return _literal_fix(bound, name, "True" if value else "False")
