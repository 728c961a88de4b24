"""DSL509: literal DataLoader and sampler arguments that torch rejects."""

from __future__ import annotations

from dslint.edits import replace
from dslint.report import FixSpec
from dslint.rules.base import Invalid, Rule, Symptom
from dslint.rules.loader._common import expects_error, is_int, loader_calls, truthy
from dslint.semantics.calls import UNKNOWN, Signature
from dslint.semantics.loops import DISTRIBUTED_SAMPLER_SIGNATURE, RANDOM_SAMPLER_SIGNATURE, WEIGHTED_SAMPLER_SIGNATURE

VALID_START_METHODS = ("fork", "spawn", "forkserver")
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

    ## When it does not fire
    - Values that are not literals: this rule checks what is written.
    - Calls the code expects to fail (here and in DSL501-DSL504): inside
      `with pytest.raises(...)`/`self.assertRaises(...)`, or in a `try` with
      an `except` for `ValueError`, `TypeError` or `AssertionError`.

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
        Invalid(
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
            expected_replacement="""
            from torch.utils.data import DataLoader
            a = DataLoader(ds, num_workers=-1)  # expect: DSL509
            b = DataLoader(ds, batch_size=0)  # expect: DSL509
            c = DataLoader(ds, drop_last=True)  # expect: DSL509
            d = DataLoader(ds, num_workers=2, prefetch_factor=0)  # expect: DSL509
            e = DataLoader(ds, num_workers=2)  # expect: DSL509
            f = DataLoader(ds, batch_size=None, drop_last=True)  # expect: DSL509
            g = DataLoader(ds, num_workers=2, multiprocessing_context="threads")  # expect: DSL509
            """,
        ),
        Invalid(
            """
            import torch.utils.data as tud
            s = tud.RandomSampler(ds, replacement=1)  # expect: DSL509
            w = tud.WeightedRandomSampler([[0.5, 0.5]], 2)  # expect: DSL509
            d = tud.DistributedSampler(ds, num_replicas=2, rank=2)  # expect: DSL509
            c = tud.ConcatDataset([])  # expect: DSL509
            """,
            expected_replacement="""
            import torch.utils.data as tud
            s = tud.RandomSampler(ds, replacement=True)  # expect: DSL509
            w = tud.WeightedRandomSampler([[0.5, 0.5]], 2)  # expect: DSL509
            d = tud.DistributedSampler(ds, num_replicas=2, rank=2)  # expect: DSL509
            c = tud.ConcatDataset([])  # expect: DSL509
            """,
        ),
        """
        from torch.utils.data import ConcatDataset, DataLoader
        parts = ConcatDataset([])  # expect: DSL509
        loader = DataLoader(parts, batch_size=-4)  # expect: DSL509
        """,
    )

    def check(self, ctx):
        found = [(bound.call, problem) for bound in loader_calls(ctx) for problem in self._loader_problems(ctx, bound)]
        for name, signature, method in (
            ("torch.utils.data.RandomSampler", RANDOM_SAMPLER_SIGNATURE, self._random_sampler),
            ("torch.utils.data.WeightedRandomSampler", WEIGHTED_SAMPLER_SIGNATURE, self._weighted_sampler),
            ("torch.utils.data.DistributedSampler", DISTRIBUTED_SAMPLER_SIGNATURE, self._distributed_sampler),
            ("torch.utils.data.ConcatDataset", CONCAT_DATASET, self._concat),
        ):
            found.extend((call, method(ctx, ctx.bind(call, signature))) for call in ctx.calls_to(name) if not expects_error(ctx, call))
        for node, problem in found:
            if problem:
                message, fix = problem if isinstance(problem, tuple) else (problem, None)
                yield self.report(node, message, fix=fix)

    @staticmethod
    def _loader_problems(ctx, bound):
        value = lambda name: ctx.value(bound, name)  # noqa: E731
        workers = value("num_workers")
        if is_int(workers) and workers < 0:
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
        has_workers = is_int(workers) and workers > 0 or workers is True
        prefetch = value("prefetch_factor")
        if has_workers and is_int(prefetch) and prefetch < 0:
            yield f"`prefetch_factor={prefetch}` is negative: the DataLoader raises `ValueError: prefetch_factor option should be non-negative`"
        if has_workers and is_int(prefetch) and prefetch == 0:
            yield (
                "`prefetch_factor=0` with workers: the first `iter()` raises `AssertionError: prefetch_factor "
                "must be greater than 0 for MultiProcessingDataLoaderIter`"
            )
        batch_sampler = value("batch_sampler")
        batch_size = value("batch_size")
        drop_last = value("drop_last")
        if batch_sampler is None and bound.passed("batch_size") and batch_size is not UNKNOWN and batch_size is not None:
            if not is_int(batch_size) or batch_size <= 0:
                yield (
                    f"`batch_size={batch_size!r}` is not a positive integer: the DataLoader raises `ValueError: "
                    f"batch_size should be a positive integer value, but got batch_size={batch_size}`"
                )
        if batch_sampler is None and batch_size is None and truthy(drop_last):
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
            yield _not_bool(bound, "drop_last", drop_last, "the DataLoader", "ValueError")
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
            return _not_bool(bound, "replacement", replacement, "`RandomSampler`", "TypeError")
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
        if bound.passed("num_samples") and num_samples is not UNKNOWN and (not is_int(num_samples) or num_samples <= 0):
            return (
                f"`num_samples={num_samples!r}` is not a positive integer: `WeightedRandomSampler` raises "
                f"`ValueError: num_samples should be a positive integer value, but got num_samples={num_samples}`"
            )
        replacement = ctx.value(bound, "replacement")
        if replacement is not UNKNOWN and not isinstance(replacement, bool):
            return _not_bool(bound, "replacement", replacement, "`WeightedRandomSampler`", "ValueError")
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
        if is_int(rank) and (rank < 0 or (is_int(replicas) and rank >= replicas)):
            upper = f"{replicas - 1}" if is_int(replicas) else "num_replicas - 1"
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


def _not_bool(bound, name: str, value, raiser: str, error: str):
    """(message, fix) for ``name=value`` that is not a bool; ``1``/``0`` (the only unambiguous
    spellings) become ``True``/``False``."""
    fix = _literal_fix(bound, name, "True" if value else "False") if type(value) is int and value in (0, 1) else None
    message = f"`{name}={value!r}` is not a bool: {raiser} raises `{error}: {name} should be a boolean value, but got {name}={value}`"
    return message, fix
