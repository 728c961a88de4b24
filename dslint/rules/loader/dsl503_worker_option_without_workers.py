"""DSL503: a worker-only DataLoader option while ``num_workers`` is 0."""

from __future__ import annotations

from typing import List, Tuple

from dslint.edits import remove_args
from dslint.report import FixSpec
from dslint.rules.base import Invalid, Rule, Symptom
from dslint.rules.loader._common import loader_calls, not_none, truthy
from dslint.semantics.calls import UNKNOWN


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
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64, persistent_workers=True)  # expect: DSL503
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64)  # expect: DSL503
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            WORKERS = 0
            loader = DataLoader(ds, num_workers=WORKERS, prefetch_factor=2)  # expect: DSL503
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader
            WORKERS = 0
            loader = DataLoader(ds, num_workers=WORKERS)  # expect: DSL503
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, timeout=10)  # expect: DSL503
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds)  # expect: DSL503
            """,
        ),
    )

    def check(self, ctx):
        for bound in loader_calls(ctx):
            workers = ctx.value(bound, "num_workers")
            if workers is UNKNOWN or workers is None or workers != 0:
                continue
            problems: List[Tuple[str, str, str]] = []
            if not_none(ctx, bound, "prefetch_factor"):
                problems.append(("prefetch_factor", "prefetch_factor", "`ValueError: prefetch_factor option could only be specified in multiprocessing`"))
            if truthy(ctx.value(bound, "persistent_workers")):
                problems.append(("persistent_workers=True", "persistent_workers", "`ValueError: persistent_workers option needs num_workers > 0`"))
            if not_none(ctx, bound, "multiprocessing_context"):
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
