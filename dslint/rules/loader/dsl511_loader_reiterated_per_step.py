"""DSL511: ``next(iter(loader))`` inside a loop restarts the loader on every step."""

from __future__ import annotations

from typing import Optional

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.loader._common import fresh_iterator_advances, is_int
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.loops import loader_loops
from dslint.semantics.names import dotted_parts
from dslint.semantics.values import possible_arg
from dslint.semantics.project import ITERABLE
from dslint.semantics.step_guards import invariant_step_loop, length_walk, paired_walk


class LoaderReiteratedPerStep(Rule):
    """
    ## What it does
    Flags `next(iter(loader))` that runs on every iteration of a loop (not under an `except`, nor
    an `if` whose outcome can change from step to step: a guard testing only names or attributes
    the loop never binds, like `if aux_loader is not None:`, takes the same branch every step; a
    helper called behind it counts), where `loader` is a known
    `DataLoader` created outside the loop. It reports when the loader has
    workers (`num_workers > 0` for certain: a literal, a constant, or the entry
    of a `**kwargs` dict the file builds; a possible value, such as an argparse
    default, is not enough) or a fixed order (no shuffle, no sampler).

    Also flagged, whatever the loader (even one that nothing in the file
    shows, such as a parameter): a loop whose trip count comes from the
    loader's length (`for _ in range(len(loader))`, `range(n)` with `n`
    assigned from `len(loader) * ratio`, `while i < len(loader.dataset)`).
    The code means to walk the loader once, and a new iterator per step
    never does. So does a loop over the batches of another known loader (`for x in loader_a:
    y = next(iter(loader_b))`, through the callers' arguments too): it pairs the two, and a new
    iterator each step never walks `loader_b` (its values must be the file's loaders or None, or
    each of the two a parameter annotated `DataLoader`, such as `Optional[DataLoader]`).

    The shapes that take the first item of a new iterator are
    `next(iter(loader))`, `iter(loader).next()` (the old iterator API),
    `iter(loader).__next__()` and `next(loader.__iter__())`; `for` and
    `while` loops both count.

    ## When it does not fire
    A single-process, shuffled loader in a loop not sized by the loader nor
    walking another one (each call draws a random batch, and there are no
    workers to restart), a loader built anew in the same loop, calls under a
    condition that depends on the step (`if step % 100 == 0:`, a flag the
    loop sets, a test that calls a function).

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
    - `torch.utils.data.DataLoader` (the PyTorch documentation, `torch.utils.data`)
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
        other = DataLoader(ds, **dict(shuffle=True, num_workers=args.workers))  # workers may be 0
        for step in range(100):
            batch = next(iter(loader))
            more = next(iter(other))
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
        """
        from torch.utils.data import DataLoader

        def probe(loader: DataLoader, steps):
            for _ in range(steps):  # an unknown loader, a loop not sized by it: nothing to tell
                show(next(iter(loader)))

        def shards(loader, files):
            for i in range(len(loader)):
                loader = reload(files[i])  # a new loader every step
                first = next(iter(loader))
        def fit(model, ds, extra, steps, show, items, aux: DataLoader):
            loader = DataLoader(ds, batch_size=8, shuffle=True)
            fixed = DataLoader(extra, batch_size=8)
            warm = True
            for x in loader:
                if warm:  # the loop sets the flag: not every step
                    model(next(iter(fixed)))
                    warm = False
                if show(x):  # a test the step decides
                    model(next(iter(fixed)))
            for step in range(steps):  # not a walk of a loader: a random batch each step
                model(next(iter(loader)))
            for x in items:  # no known loader: the loop walks nothing known
                model(next(iter(aux)))
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=4)
        options = {"batch_size": 32, "shuffle": True}
        options["num_workers"] = 4
        other = DataLoader(ds, **options)
        for step in range(1000):
            x, y = next(iter(loader))  # expect: DSL511
            z = next(iter(other))  # expect: DSL511
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
        """
        import torch
        from torch.utils.data import DataLoader

        def embed(model, ds, size=64):
            loader = DataLoader(ds, batch_size=size)
            done = 0
            while done + size <= len(loader.dataset):
                batch = iter(loader).next()  # expect: DSL511
                done += size
        """,
        """
        import math
        from torch.utils.data import DataLoader

        def cache(loader: DataLoader, ratio: float):
            count = math.ceil(len(loader) * ratio)
            batches = []
            for _ in range(count):
                batches.append(next(iter(loader)))  # expect: DSL511
            return batches
        """,
        """
        from torch.utils.data import DataLoader

        class Trainer:
            def run_epoch(self, loader, aux_loader=None):
                for x in loader:
                    if aux_loader is not None:  # the same outcome on every step
                        self.step(x, next(iter(aux_loader)))  # expect: DSL511
                    if self.fixed is not None:  # a helper called behind such a guard
                        self.step(x, self.extra())
            def extra(self):
                return next(iter(self.fixed))  # expect: DSL511
            def fit(self, data, aux, epochs):
                self.fixed = DataLoader(aux, batch_size=32)
                loader = DataLoader(data, batch_size=32, shuffle=True)
                aux_loader = DataLoader(aux, batch_size=32, shuffle=True) if aux is not None else None
                for epoch in range(epochs):
                    self.run_epoch(loader, aux_loader)
        def pair(loader: DataLoader, aux: DataLoader):  # declared loaders, no caller in the file
            for x in loader:
                y = next(iter(aux))  # expect: DSL511
        """,
        """
        from torch.utils.data import DataLoader, SubsetRandomSampler

        queue = DataLoader(ds, batch_size=64, sampler=SubsetRandomSampler(indices))
        for step in range(len(queue)):
            x, y = next(iter(queue))  # expect: DSL511
        """,
    )

    def check(self, ctx):
        index = loader_loops(ctx)
        for call, target in fresh_iterator_advances(ctx):
            found = invariant_step_loop(ctx, index, call)
            if found is None:
                continue
            loop, calls = found
            walks = None if calls else length_walk(ctx, index, loop, target) or paired_walk(ctx, index, loop, target)
            refs = index.resolve_loader(target)
            message = None
            if refs and all(r.loader is refs[0].loader for r in refs):
                ref = refs[0]
                if index.inside(ref.origin, loop.body):
                    continue
                origin_func = ctx.enclosing_function(ref.origin)
                helpers = [ctx.enclosing_function(n) for n in (call, *calls[:-1])] if calls else []
                if origin_func is not None and origin_func in helpers:
                    continue  # a new loader per call
                message = self._message(ctx, ref.loader)
            elif not walks or self._rebound_in(index, target, loop):
                continue
            if message is None and walks:
                message = (
                    f"`next(iter(...))` in a loop that runs {walks} starts a new iterator on every step, so the "
                    "loop never walks the loader: a loader in a fixed order returns its first batch every time, "
                    "and a shuffled one draws each batch afresh (some samples come twice, others never)"
                )
            if message:
                yield self.report(call, message)

    @staticmethod
    def _rebound_in(index, target, loop) -> bool:
        """The name the loader is read from is bound inside the loop (a new loader each step)."""
        parts = dotted_parts(target)
        if not parts:
            return True
        _, found = index.name_bindings(parts[0], target)
        return found is None or any(index.inside(b.node, loop) for b in found)

    @staticmethod
    def _message(ctx, loader) -> Optional[str]:
        bound = loader.bound
        def value(name):  # a literal, else the one value ``**kwargs`` dicts certainly give
            found = ctx.value(bound, name)
            return possible_arg(ctx, bound, name).known if found is UNKNOWN else found

        workers = value("num_workers")
        fixed = (
            value("shuffle") in (None, False, 0)
            and value("sampler") is None
            and value("batch_sampler") is None
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
