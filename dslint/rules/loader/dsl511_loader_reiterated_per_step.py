"""DSL511: ``next(iter(loader))`` inside a loop restarts the loader on every step."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.loader._common import is_int
from dslint.semantics.loops import loader_loops
from dslint.semantics.module_calls import positional_args
from dslint.semantics.project import ITERABLE


class LoaderReiteratedPerStep(Rule):
    """
    ## What it does
    Flags `next(iter(loader))` that runs on every iteration of a loop (not
    under an `if` or `except` in that loop), where `loader` is a known
    `DataLoader` created outside the loop. It reports when the loader has
    workers (a literal `num_workers > 0`) or a fixed order (no shuffle, no
    sampler).

    Not flagged: a single-process, shuffled loader (each call draws a random
    batch, and there are no workers to restart), a loader built anew in the
    same loop, calls under a condition (`if step % 100 == 0:`).

    ## Why is this bad?
    `iter(loader)` creates a new iterator each time: with workers it starts
    the worker processes, fills their prefetch queues, and shuts them down
    again after one batch (measured 16x slower over 20 steps). And the new
    iterator starts the epoch over: with `shuffle=False` it returns the same
    first batch every time, so the model trains on one batch.

    ## Example
    ```python
    for step in range(steps):
        x, y = next(iter(loader))
        train_step(x, y)
    ```

    ## Use instead
    Keep one iterator, and start a new one only when it is exhausted:
    ```python
    batches = iter(loader)
    for step in range(steps):
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            x, y = next(batches)
        train_step(x, y)
    ```

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    """

    code = "DSL511"
    name = "loader-reiterated-per-step"
    symptom = Symptom("loop_cost", "workers re-forked every step; always the first batch", exclusive=True)
    level = ERROR
    summary = "`next(iter(loader))` inside a loop restarts the loader on every step"
    help = "Create the iterator once (`batches = iter(loader)`) and call `next(batches)` in the loop"

    valid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)
        batches = iter(loader)
        for step in range(100):
            batch = next(batches)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)
        sample = next(iter(loader))  # once, not in a loop
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, shuffle=True)  # no workers, a random batch each time
        for step in range(100):
            batch = next(iter(loader))
        """,
        """
        from torch.utils.data import DataLoader
        val_loader = DataLoader(ds, num_workers=4)
        for step in range(100):
            if step % 50 == 0:
                show(next(iter(val_loader)))
        """,
        """
        from torch.utils.data import DataLoader
        for step in range(100):
            loader = DataLoader(shard(step), num_workers=2)
            batch = next(iter(loader))
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=4)
        batches = iter(loader)
        for step in range(100):
            try:
                batch = next(batches)
            except StopIteration:  # once per epoch, not per step
                batch = next(iter(loader))
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4)
        for step in range(1000):
            x, y = next(iter(loader))  # expect: DSL511
        """,
        """
        import torch.utils.data as tud

        class GAN:
            def __init__(self, ds):
                self.loader = tud.DataLoader(ds, batch_size=64)

            def sample(self):
                return next(iter(self.loader))  # expect: DSL511

            def train(self):
                while True:
                    real = self.sample()
        """,
    )

    def check(self, ctx):
        index = loader_loops(ctx)
        if not index.loaders:
            return
        for call in ctx.calls_to("builtins.next"):
            args = positional_args(call)
            if not args or not isinstance(args[0], cst.Call) or ctx.call_name(args[0]) != "builtins.iter":
                continue
            inner = positional_args(args[0])
            if len(inner) != 1 or len(args[0].args) != 1:
                continue
            refs = index.resolve_loader(inner[0])
            if not refs or any(r.loader is not refs[0].loader for r in refs):
                continue
            ref = refs[0]
            found = index.step_loop(call)
            if found is None:
                continue
            loop, calls = found
            if index.inside(ref.origin, loop.body):
                continue
            origin_func = ctx.enclosing_function(ref.origin)
            helpers = [ctx.enclosing_function(n) for n in (call, *calls[:-1])] if calls else []
            if origin_func is not None and origin_func in helpers:
                continue  # a new loader per call
            message = self._message(ctx, ref.loader)
            if message:
                yield self.report(call, message)

    @staticmethod
    def _message(ctx, loader) -> Optional[str]:
        bound = loader.bound
        workers = ctx.value(bound, "num_workers")
        fixed = (
            ctx.value(bound, "shuffle") in (None, False, 0)
            and ctx.value(bound, "sampler") is None
            and ctx.value(bound, "batch_sampler") is None
            and ctx.dataset_kind(bound.expr("dataset")) != ITERABLE
        )
        first = "returns the same first batch every time (the loader does not shuffle)"
        if is_int(workers) and workers > 0:
            text = (
                f"`next(iter(loader))` in a loop starts a new iterator on every step: the {workers} worker "
                "processes are started and shut down again for each batch (measured 16x slower over 20 steps)"
            )
            return text + (f", and it {first}" if fixed else "")
        if fixed:
            return f"`next(iter(loader))` in a loop restarts the loader on every step: it {first}"
        return None
