"""DSL505-508, DSL510, DSL511: how a DataLoader is used by the loops over it.

The loop facts (which loader a ``for`` iterates, the epoch loop around it, the
sampler, the calls in the loop) come from ``dslint.semantics.loops``. Every rule
stays silent when a fact is unknown: a non-literal argument, ``**kwargs``, a
loader that crosses into another module or is wrapped by a framework.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.report import FixSpec, NodeEdit
from dslint.rules.base import ERROR, WARNING, Rule, Symptom
from dslint.semantics.calls import UNKNOWN, BoundCall
from dslint.semantics.loops import (
    DISTRIBUTED_SAMPLER,
    DISTRIBUTED_SAMPLER_SIGNATURE,
    EVALUATION_HOOKS,
    RANDOM_SAMPLERS,
    is_none,
    loader_loops,
    names_used,
    positional_args,
)
from dslint.semantics.names import dotted_parts
from dslint.semantics.project import ITERABLE, MAP

TENSOR_DATASET = "torch.utils.data.TensorDataset"
_PARTIAL = frozenset({"functools.partial"})
_SET_START_METHOD = frozenset({"multiprocessing.set_start_method", "torch.multiprocessing.set_start_method"})


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _literal_zero(value) -> bool:
    return _is_int(value) and value == 0


def _short(name: Optional[str]) -> str:
    return (name or "").rsplit(".", 1)[-1]


def _is_local(ctx, node: cst.CSTNode) -> bool:
    """Defined inside a function (so pickle cannot find it by name)."""
    return any(isinstance(a, (cst.FunctionDef, cst.Lambda)) for a in ctx.ancestors(node))


def _indentation(ctx, block: cst.IndentedBlock) -> str:
    parts = []
    for node in (block, *ctx.ancestors(block)):
        if isinstance(node, cst.IndentedBlock):
            parts.append(node.indent if node.indent is not None else ctx.module.default_indent)
    return "".join(reversed(parts))


# --------------------------------------------------------------------------- DSL505


class DistributedSamplerWithoutSetEpoch(Rule):
    """
    ## What it does
    Flags a `DistributedSampler` passed as `sampler=` to a `DataLoader` that is
    iterated inside an epoch loop (an outer `for`/`while`, also around a call of
    the helper that holds the batch loop), when nothing in the module calls
    `set_epoch` on the sampler or on `loader.sampler`.

    Not flagged: `DistributedSampler(..., shuffle=False)`, a sampler or loader
    made anew on every iteration of the outer loop (each is iterated once), evaluation loops
    (under `torch.no_grad()`/`torch.inference_mode()`), loaders built in a
    Lightning `*_dataloader` hook or wrapped by a framework (Lightning and
    Accelerate call `set_epoch` themselves), and loaders or samplers handed to a
    function of another module inside the epoch loop (it may call `set_epoch`).

    ## Why is this bad?
    `DistributedSampler` shuffles with the seed `seed + epoch`, and its epoch
    only changes when `set_epoch` is called. Without it the epoch stays 0, so
    every epoch visits the samples in the identical order on every rank
    (measured: `[12, 9, 11, 13, 2, 15, 4, 7]` in all three epochs). Nothing fails;
    the model just sees a fixed order.

    ## Example
    ```python
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        for batch in loader:
            train_step(batch)
    ```

    ## Use instead
    ```python
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            train_step(batch)
    ```

    ## Fix safety
    When the epoch loop is `for <name> in range(...)` and the sampler (or the
    loader) has one unambiguous name there, the fix inserts
    `<sampler>.set_epoch(<name>)` as the first statement of the epoch loop. It
    is unsafe: it changes the order in which samples are visited (which is the
    point), and the loop variable may not count epochs from the value the user
    expects (for example when resuming, where the epoch should come from the
    checkpoint).

    ## References
    - [`DistributedSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler):
      "calling the `set_epoch()` method at the beginning of each epoch before
      creating the DataLoader iterator is necessary to make shuffling work
      properly across multiple epochs."
    """

    code = "DSL505"
    name = "distributed-sampler-without-set-epoch"
    symptom = Symptom("distributed", "each rank's order is identical every epoch")
    level = ERROR
    fix_availability = "sometimes"
    summary = "`DistributedSampler` iterated over epochs without `set_epoch`"
    help = "Call `sampler.set_epoch(epoch)` at the start of every epoch, before iterating the loader"

    valid = (
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=8, sampler=sampler)
        for epoch in range(10):
            sampler.set_epoch(epoch)
            for batch in loader:
                step(batch)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def main(ds):
            loader = DataLoader(ds, sampler=DistributedSampler(ds))
            for epoch in range(10):
                loader.sampler.set_epoch(epoch)
                for batch in loader:
                    step(batch)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        sampler = DistributedSampler(ds, shuffle=False)
        loader = DataLoader(ds, sampler=sampler)
        for epoch in range(10):
            for batch in loader:
                step(batch)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, sampler=sampler)
        for batch in loader:  # iterated once: no epochs
            step(batch)
        """,
        """
        import torch
        from torch.utils.data import DataLoader, DistributedSampler

        val_loader = DataLoader(ds, sampler=DistributedSampler(ds))
        for epoch in range(10):
            with torch.no_grad():
                for batch in val_loader:
                    evaluate(batch)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler
        import pytorch_lightning as pl

        class Model(pl.LightningModule):
            def train_dataloader(self):
                return DataLoader(self.ds, sampler=DistributedSampler(self.ds))
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def main(accelerator, ds):
            loader = DataLoader(ds, sampler=DistributedSampler(ds))
            model, loader = accelerator.prepare(model, loader)
            for epoch in range(3):
                for batch in loader:
                    step(batch)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler
        from engine import train_one_epoch

        def main(ds):
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, sampler=sampler)
            for epoch in range(3):
                train_one_epoch(model, loader, sampler, epoch)  # may call set_epoch
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def run_epoch(loader, sampler, epoch):
            sampler.set_epoch(epoch)
            for batch in loader:
                step(batch)

        def main(ds):
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, sampler=sampler)
            for epoch in range(3):
                run_epoch(loader, sampler, epoch)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        for shard in shards:  # a new dataset, sampler and loader each time: each iterated once
            data = load(shard)
            loader = DataLoader(data, sampler=DistributedSampler(data))
            for batch in loader:
                step(batch)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        sampler = DistributedSampler(ds, shuffle=args.shuffle)  # unknown is not wrong
        loader = DataLoader(ds, sampler=sampler)
        for epoch in range(3):
            for batch in loader:
                step(batch)
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler as DS

        sampler = DS(ds)  # expect: DSL505
        loader = DataLoader(ds, batch_size=8, sampler=sampler)
        for epoch in range(10):
            for batch in loader:
                step(batch)
        """,
        """
        import torch.utils.data as tud

        def train_one_epoch(model, loader, optimizer):
            for images, labels in loader:
                loss = model(images, labels)
                loss.backward()
                optimizer.step()

        def main(args):
            train_set = make_dataset(args)
            sampler = tud.DistributedSampler(train_set) if args.distributed else None  # expect: DSL505
            train_loader = tud.DataLoader(train_set, batch_size=32, sampler=sampler, shuffle=sampler is None)
            for epoch in range(args.epochs):
                train_one_epoch(model, train_loader, optimizer)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        class Trainer:
            def __init__(self, ds):
                self.loader = DataLoader(ds, sampler=DistributedSampler(ds), num_workers=4)  # expect: DSL505

            def train_epoch(self):
                for batch in self.loader:
                    self.step(batch)

            def fit(self, epochs):
                for epoch in range(epochs):
                    self.train_epoch()
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def build(ds):
            sampler = DistributedSampler(ds)  # expect: DSL505
            return DataLoader(ds, sampler=sampler)

        def main(ds):
            loader = build(ds)
            step = 0
            while step < 1000:
                for batch in loader:
                    step += 1
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        train_sampler = DistributedSampler(train_ds)  # expect: DSL505
        val_sampler = DistributedSampler(val_ds, shuffle=False)
        train_loader = DataLoader(train_ds, sampler=train_sampler)
        val_loader = DataLoader(val_ds, sampler=val_sampler)
        for epoch in range(3):
            val_sampler.set_epoch(epoch)
            for batch in train_loader:
                step(batch)
        """,
    )

    def check(self, ctx):
        index = loader_loops(ctx)
        reported = set()
        for loader in index.loaders:
            if loader.framework_driven:
                continue
            shuffle = ctx.value(loader.bound, "shuffle")
            if shuffle is not UNKNOWN and shuffle:
                continue  # DSL501 reports sampler + shuffle=True (a working loader has a false shuffle)
            values = index.sampler_values(loader)
            if not values or any(v.node is None for v in values):
                continue
            samplers = []
            for value in values:
                node = value.node
                if isinstance(node, cst.Call) and ctx.call_name(node) == DISTRIBUTED_SAMPLER:
                    if node not in samplers:
                        samplers.append(node)
                elif not is_none(node):
                    samplers = []
                    break
            if len(samplers) != 1 or id(samplers[0]) in reported:
                continue
            sampler = samplers[0]
            sampler_shuffle = ctx.value(BoundCall(sampler, DISTRIBUTED_SAMPLER_SIGNATURE), "shuffle")
            if sampler_shuffle is UNKNOWN or not sampler_shuffle:
                continue
            loops = [
                loop
                for loop in index.loops_of(loader)
                if index.epoch(loop) is not None and not index.is_eval(loop)
            ]
            loops = [loop for loop in loops if index.in_epoch(loop, sampler) is None]  # one sampler per iteration
            if not loops:
                continue
            if self._set_epoch_called(ctx, index, loader, sampler):
                continue
            if any(self._escapes(ctx, index, loop, (sampler, loader.call)) for loop in loops):
                continue
            reported.add(id(sampler))
            fix = self._fix(ctx, index, loader, sampler, loops) if all(v.node is sampler for v in values) else None
            yield self.report(
                sampler,
                "this `DistributedSampler` is never given the epoch (no `set_epoch` call): it shuffles with "
                "`seed + epoch` and the epoch stays 0, so every epoch visits the samples in the identical order",
                fix=fix,
            )

    @staticmethod
    def _set_epoch_called(ctx, index, loader, sampler) -> bool:
        """Some ``X.set_epoch(...)`` in the module may reach this sampler (unknown receivers count)."""
        for call in ctx.nodes(cst.Call):
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value != "set_epoch":
                continue
            receiver = func.value
            if isinstance(receiver, cst.Attribute) and receiver.attr.value in ("sampler", "batch_sampler"):
                nodes = [v.node for v in index.values(receiver.value)]
                if any(n is None or n is loader.call or index.loader_of_call(n) is None for n in nodes):
                    return True
                continue
            for value in index.values(receiver):
                node = value.node
                if node is None or node is sampler or node is loader.call:
                    return True
                if is_none(node) or index.loader_of_call(node) is not None:
                    continue
                if isinstance(node, cst.Call):
                    name = ctx.call_name(node) or ""
                    if name.startswith("torch.utils.data.") and name.endswith("Sampler"):
                        continue
                    if ctx.dataset_kind(node) is not None:
                        continue
                return True
        return False

    @staticmethod
    def _escapes(ctx, index, loop, objects) -> bool:
        """Inside the epoch loop, the loader or sampler is handed to code of another module."""
        epoch = index.epoch(loop)
        regions = [(epoch.body, ())] + [(f.body, stack) for f, stack in index.epoch_functions(loop)]
        for block, stack in regions:
            for node in index.body_nodes(block):
                if not isinstance(node, cst.Call) or index.wrapper_kind(node) or index.call_target(node):
                    continue
                if (ctx.call_name(node) or "").startswith(("builtins.", "torch.utils.data.")):
                    continue  # neither Python's builtins nor torch's data API call `set_epoch`
                for arg in node.args:
                    if any(v.node is o for v in index.values(arg.value, stack=stack) for o in objects):
                        return True
        return False

    def _fix(self, ctx, index, loader, sampler, loops) -> Optional[FixSpec]:
        for loop in loops:
            epoch = index.epoch(loop)
            if not isinstance(epoch, cst.For) or not isinstance(epoch.target, cst.Name) or epoch.target.value == "_":
                continue
            if not self._counts(ctx, index, epoch.iter):
                continue
            body = epoch.body
            if not isinstance(body, cst.IndentedBlock) or not body.body:
                continue
            first = body.body[0]
            receiver = self._receiver(ctx, index, loader, sampler, loop, epoch, first)
            if receiver is None:
                continue
            statement = f"{receiver}.set_epoch({epoch.target.value})"
            return FixSpec(
                applicability="unsafe",
                message=f"Insert `{statement}` at the start of the epoch loop",
                edits=[NodeEdit(start=first, end=first, end_at_start=True, content=statement + "\n" + _indentation(ctx, body))],
            )
        return None

    @staticmethod
    def _counts(ctx, index, expr) -> bool:
        """``range(...)``, ``trange(...)`` or ``tqdm(range(...))``: the loop variable counts epochs."""
        if not isinstance(expr, cst.Call):
            return False
        name = ctx.call_name(expr) or ""
        if name == "builtins.range" or (name.startswith("tqdm") and name.endswith(".trange")):
            return True
        args = positional_args(expr)
        return index.wrapper_kind(expr) == "single" and bool(args) and DistributedSamplerWithoutSetEpoch._counts(ctx, index, args[0])

    @staticmethod
    def _receiver(ctx, index, loader, sampler, loop, epoch, first) -> Optional[str]:
        """A name for the sampler (or the loader's ``.sampler``) that is bound before the epoch loop."""
        candidates = [(loader.bound.expr("sampler"), sampler, "")]
        loader_exprs = [loop.iterable] if not loop.epoch_calls else [a.value for a in loop.epoch_calls[-1].args]
        candidates.extend((expr, loader.call, ".sampler") for expr in loader_exprs)
        for expr, target, suffix in candidates:
            parts = dotted_parts(expr) if expr is not None else None
            if not parts or len(parts) > 2:
                continue
            found = index.values_at(parts, first)
            if found is None:
                continue
            bindings, values = found
            if any(b.kind not in ("value", "param") or index.inside(b.node, epoch) for b in bindings):
                continue
            if values and all(v.node is target for v in values):
                return ".".join(parts) + suffix
        return None


# --------------------------------------------------------------------------- DSL506


class UnpicklableWorkerCallable(Rule):
    """
    ## What it does
    Flags a `DataLoader` with workers (`num_workers` passed and not a literal
    0) whose `collate_fn` or `worker_init_fn` is a lambda, a function defined
    inside another function, or an instance of a class defined inside a
    function (also through `functools.partial`), or whose `dataset` is an
    instance of a class defined inside a function.

    Not flagged: module-level functions and classes, `functools.partial` of a
    module-level function, bound methods, `num_workers` absent or `0`, and an
    explicit `multiprocessing_context="fork"`.

    ## Why is this bad?
    With the `spawn` or `forkserver` start method, each worker receives the
    dataset, `collate_fn` and `worker_init_fn` by pickling, and pickle stores a
    function by its importable name. A lambda or a local object has none, so
    starting the workers fails:

    - a lambda or nested function or class inside a function:
      `AttributeError: Can't pickle local object 'make_loader.<locals>.<lambda>'`
      (or `'make_loader.<locals>.collate'`)
    - a lambda at module level: `_pickle.PicklingError: Can't pickle
      <function <lambda> at 0x...>: attribute lookup <lambda> on __main__ failed`

    (both after torch's warning `Got pickle error when attempting to start a
    worker Process`). `spawn` is the default on macOS and Windows, and
    `forkserver` is the Linux default from Python 3.14, so code that works with
    `fork` on Linux today fails there.

    ## Example
    ```python
    def make_loader(ds):
        def collate(batch):
            return pad(batch)
        return DataLoader(ds, num_workers=4, collate_fn=collate)
    ```

    ## Use instead
    Move the function (or class) to module level; bind its options with
    `functools.partial`:
    ```python
    def collate(batch, pad_value=0):
        return pad(batch, pad_value)

    def make_loader(ds):
        return DataLoader(ds, num_workers=4, collate_fn=functools.partial(collate, pad_value=0))
    ```

    ## References
    - [Platform-specific behaviors of multi-process data loading](https://pytorch.org/docs/stable/data.html#platform-specific-behaviors)
    - [What can be pickled](https://docs.python.org/3/library/pickle.html#what-can-be-pickled-and-unpickled)
    """

    code = "DSL506"
    name = "unpicklable-worker-callable"
    symptom = Symptom("pickling", "PicklingError / Can't pickle local object under spawn/forkserver")
    level = ERROR
    summary = "A lambda or local function/class given to a DataLoader with workers"
    help = "Define the function or class at module level (bind options with `functools.partial`)"

    valid = (
        """
        import functools
        from torch.utils.data import DataLoader

        def collate(batch, pad=0):
            return batch

        loader = DataLoader(ds, num_workers=4, collate_fn=functools.partial(collate, pad=1))
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, collate_fn=lambda b: b)  # no workers: nothing is pickled
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=0, collate_fn=lambda b: b)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, collate_fn=lambda b: b, multiprocessing_context="fork")
        """,
        """
        from torch.utils.data import DataLoader

        class Collator:
            def __call__(self, batch):
                return batch

        def make(ds):
            return DataLoader(ds, num_workers=4, collate_fn=Collator())
        """,
        """
        from torch.utils.data import DataLoader

        def make(ds, collate, **kw):
            return DataLoader(ds, collate_fn=lambda b: collate(b), **kw)  # workers unknown
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=lambda batch: batch)  # expect: DSL506
        """,
        """
        import functools
        import torch.utils.data as tud

        def make_loader(ds, workers):
            def collate(batch, pad):
                return batch

            return tud.DataLoader(  # expect: DSL506
                ds,
                num_workers=workers,
                collate_fn=functools.partial(collate, pad=0),
            )
        """,
        """
        import numpy as np
        from torch.utils.data import DataLoader, Dataset

        def main(paths):
            class Local(Dataset):
                def __getitem__(self, i):
                    return paths[i]

                def __len__(self):
                    return len(paths)

            ds = Local()
            seed = lambda wid: np.random.seed(wid)
            return DataLoader(ds, num_workers=4, worker_init_fn=seed)  # expect: DSL506
        """,
    )

    def check(self, ctx):
        if self._fork_everywhere(ctx):
            return
        index = loader_loops(ctx)
        for loader in index.loaders:
            bound = loader.bound
            if not bound.passed("num_workers"):
                continue
            workers = ctx.value(bound, "num_workers")
            if workers is not UNKNOWN and (_literal_zero(workers) or workers is None or workers is False):
                continue
            if self._fork_context(ctx, index, bound):
                continue
            problems = []
            for param in ("collate_fn", "worker_init_fn"):
                problem = self._unpicklable(ctx, index, bound.expr(param))
                if problem:
                    problems.append((f"`{param}`", problem))
            dataset = self._local_instance(ctx, index, bound.expr("dataset"))
            if dataset:
                problems.append(("the dataset", dataset))
            if not problems:
                continue
            what = "; ".join(f"{param} is {problem[0]}" for param, problem in problems)
            error = problems[0][1][1]
            yield self.report(
                bound.call,
                f"{what}, which cannot be pickled: with the spawn or forkserver start method (the default on "
                f"macOS and Windows, and on Linux from Python 3.14) starting the workers fails with `{error}`",
            )

    @staticmethod
    def _fork_everywhere(ctx) -> bool:
        for call in ctx.calls_to(*_SET_START_METHOD):
            args = positional_args(call)
            if args and ctx.literal(args[0]) == "fork":
                return True
        return False

    @staticmethod
    def _fork_context(ctx, index, bound) -> bool:
        expr = bound.expr("multiprocessing_context")
        if expr is None:
            return False
        if ctx.literal(expr) == "fork":
            return True
        for value in index.values(expr):
            node = value.node
            if isinstance(node, cst.Call) and _short(ctx.call_name(node)) == "get_context":
                args = positional_args(node)
                if args and ctx.literal(args[0]) == "fork":
                    return True
        return False

    def _unpicklable(self, ctx, index, expr, _depth: int = 0):
        """(description, error) when every value of ``expr`` is an unpicklable callable."""
        if expr is None or _depth > 3:
            return None
        nodes = index.value_nodes(expr)
        if not nodes:
            return None
        found = []
        for node in nodes:
            problem = None
            if isinstance(node, cst.Lambda):
                owner = ctx.enclosing_function(node, through_lambdas=False)
                if owner is not None:
                    error = f"AttributeError: Can't pickle local object '{ctx.qualname_of_def(owner)}.<locals>.<lambda>'"
                else:
                    error = "_pickle.PicklingError: Can't pickle <function <lambda> ...>: attribute lookup <lambda> failed"
                problem = ("a lambda", error)
            elif isinstance(node, cst.FunctionDef) and _is_local(ctx, node):
                qual = ctx.qualname_of_def(node)
                problem = (f"the nested function `{node.name.value}`", f"AttributeError: Can't pickle local object '{qual}'")
            elif isinstance(node, cst.Call):
                if ctx.call_name(node) in _PARTIAL:
                    args = positional_args(node)
                    inner = self._unpicklable(ctx, index, args[0], _depth + 1) if args else None
                    if inner:
                        problem = (f"`functools.partial` of {inner[0]}", inner[1])
                else:
                    problem = self._local_instance(ctx, index, node)
            if problem is None:
                return None
            found.append(problem)
        return found[0]

    @staticmethod
    def _local_instance(ctx, index, expr):
        """(description, error) when ``expr`` is always an instance of a class defined in a function."""
        if expr is None:
            return None
        nodes = index.value_nodes(expr)
        if not nodes:
            return None
        found = None
        for node in nodes:
            if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Name):
                return None
            _, bindings = index.name_bindings(node.func.value, node)
            if not bindings or len(bindings) != 1 or not isinstance(bindings[0].node, cst.ClassDef):
                return None
            cls = bindings[0].node
            if not _is_local(ctx, cls):
                return None
            found = found or (
                f"an instance of the local class `{cls.name.value}`",
                f"AttributeError: Can't pickle local object '{ctx.qualname_of_def(cls)}'",
            )
        return found


# --------------------------------------------------------------------------- DSL507


class SingleProcessLoading(Rule):
    """
    ## What it does
    Flags a *training* `DataLoader` whose `num_workers` is absent or a literal
    `0`. A training loader is one that is shuffled (a truthy literal
    `shuffle`), samples with `RandomSampler`, `DistributedSampler` or
    `WeightedRandomSampler`, is returned by a `train_dataloader` method, or is
    iterated in a loop that calls `.backward()` or `optimizer.step()` (directly
    or in a helper of the same module).

    The dataset must be an instance of a map-style dataset class dslint knows
    (a `Dataset` subclass of the project, however imported, or a torchvision
    dataset), since only per-sample loading work is worth moving to workers.

    Not flagged: evaluation and inference loaders (a `DistributedSampler`
    with `shuffle=False` shards evaluation; a loader built in or returned by
    `val_dataloader`, `test_dataloader` or `predict_dataloader` is one even
    when it shuffles), a non-literal `num_workers` or
    `**kwargs`; a dataset that cannot be told statically; data already in
    memory (a `TensorDataset`, a tensor, a `range` or list, a `Subset` of
    those, a dataset class of the file whose `__getitem__` only indexes),
    where indexing is cheaper than sending batches between processes;
    `IterableDataset`s (adding workers needs sharding first, see DSL303); loaders built inside dataset code (they run in the outer
    loader's workers); test code (a `tests/` directory, `test_*.py`, a
    `test_*` function), whose loaders are not training runs; and loaders that
    already set a worker-only option (DSL503 reports those). A `.backward()`
    under an `if` (a helper shared by training and validation) does not make
    a loader a training loader.

    ## Why is this bad?
    With no workers the main process reads, decodes, augments and collates
    every batch itself, between training steps, so the model (and the GPU)
    waits for data at every step. `dslint bench module:factory` measures the
    throughput of this loader against the best `num_workers` on your machine.

    ## Example
    ```python
    loader = DataLoader(ImageFolder(root, transform), batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(
        ImageFolder(root, transform), batch_size=64, shuffle=True,
        num_workers=8, persistent_workers=True,
    )
    ```

    ## References
    - [Single- and multi-process data loading](https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading)
    - [Performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html#enable-async-data-loading-and-augmentation)
    """

    code = "DSL507"
    name = "single-process-loading"
    symptom = Symptom("throughput", "samples/s with num_workers=0 against the best num_workers", exclusive=True)
    level = WARNING
    summary = "Training DataLoader loads every batch in the main process (`num_workers=0`)"
    help = "Set `num_workers` (and `persistent_workers=True`); `dslint bench` finds the best value"

    valid = (
        """
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        loader = DataLoader(ImageFolder(root), batch_size=64, shuffle=True, num_workers=8)
        """,
        """
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        val_loader = DataLoader(ImageFolder(root), batch_size=64)  # evaluation: not shuffled, no training loop
        for batch in val_loader:
            predict(batch)
        """,
        """
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        loader = DataLoader(ImageFolder(root), batch_size=64, shuffle=True, num_workers=args.workers)
        """,
        """
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        loader = DataLoader(ImageFolder(root), shuffle=True, **loader_kwargs)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(dataset, shuffle=True)  # the dataset is unknown: it may be a tensor
        """,
        """
        import torch
        from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

        class RandomData(Dataset):
            def __init__(self, n):
                self.data = torch.randn(n, 32)

            def __getitem__(self, i):
                return self.data[i]

            def __len__(self):
                return len(self.data)

        a = DataLoader(TensorDataset(torch.randn(100, 3), torch.randn(100)), batch_size=10, shuffle=True)
        b = DataLoader(Subset(RandomData(64), range(32)), shuffle=True)
        c = DataLoader(range(1000), batch_size=64, shuffle=True)
        """,
        """
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder
        loader = DataLoader(ImageFolder(root), shuffle=True, persistent_workers=True)  # DSL503's finding
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler
        from torchvision.datasets import ImageFolder
        ds = ImageFolder(root)
        shards = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))  # evaluation shards
        """,
        """
        from torch.utils.data import DataLoader
        from torchvision.datasets import MNIST

        def run_epoch(model, loader, optimizer, train):
            for x, y in loader:
                loss = model(x, y)
                if train:
                    loss.backward()
                    optimizer.step()

        def main():
            train_loader = DataLoader(MNIST("data"), num_workers=4)
            val_loader = DataLoader(MNIST("data", train=False))  # the backward() is for training only
            for epoch in range(3):
                run_epoch(model, train_loader, optimizer, True)
                run_epoch(model, val_loader, optimizer, False)
        """,
        {
            "tests/test_training.py": """
            from torch.utils.data import DataLoader
            from torchvision.datasets import MNIST

            def test_one_epoch():
                loader = DataLoader(MNIST("data"), shuffle=True)  # a test, not a training run
            """,
        },
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder as Folder
        loader = DataLoader(Folder("images/train"), batch_size=64, shuffle=True)  # expect: DSL507
        """,
        {
            "frames.py": """
            from torch.utils.data import Dataset

            class Frames(Dataset):
                def __getitem__(self, i):
                    return decode(self.paths[i])
            """,
            "train.py": """
            import torch.utils.data as tud
            from frames import Frames

            def train(model, loader, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    model.loss(x, y).backward()
                    optimizer.step()

            def main(paths):
                ds = Frames(paths)
                loader = tud.DataLoader(ds, batch_size=32, num_workers=0)  # expect: DSL507
                for epoch in range(10):
                    train(model, loader, optimizer)
            """,
        },
        """
        from PIL import Image
        from torch.utils.data import DataLoader, Dataset, WeightedRandomSampler

        class Photos(Dataset):
            def __init__(self, paths):
                self.paths = paths

            def __getitem__(self, i):
                with Image.open(self.paths[i]) as image:
                    return image.convert("RGB")

        class Data:
            def setup(self):
                self.train_set = Photos(self.paths)

            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=32)  # expect: DSL507

            def sampled(self):
                sampler = WeightedRandomSampler(self.weights, len(self.weights))
                return DataLoader(self.train_set, sampler=sampler)  # expect: DSL507
        """,
    )

    def check(self, ctx):
        index = loader_loops(ctx)
        hooks = index.training_hook_loaders()
        evaluation = index.evaluation_hook_loaders()
        for loader in index.loaders:
            bound = loader.bound
            if not _literal_zero(ctx.value(bound, "num_workers")):
                continue
            if self._worker_options(ctx, bound) or self._rejected(ctx, bound):
                continue
            if not self._loads_samples(ctx, index, bound):
                continue
            if index.is_test_code(bound.call) or ctx.in_dataset_code(bound.call):
                continue  # a test's throughput is not a training run; a loader inside a dataset runs in its workers
            reason = self._training(ctx, index, loader, hooks, evaluation)
            if reason is None:
                continue
            yield self.report(
                bound.call,
                f"this training DataLoader ({reason}) has no workers: the main process loads and collates "
                "every batch between training steps, so the model waits for data at every step "
                "(`dslint bench` measures the throughput against the best `num_workers`)",
            )

    @staticmethod
    def _rejected(ctx, bound) -> bool:
        """torch refuses the loader at construction (DSL501/DSL502 report it): no batch is ever loaded."""
        shuffle = ctx.value(bound, "shuffle")
        sampler = ctx.value(bound, "sampler")
        batch_sampler = ctx.value(bound, "batch_sampler")
        shuffled = shuffle is not UNKNOWN and bool(shuffle)
        return shuffled and (sampler is UNKNOWN or sampler is not None or batch_sampler is UNKNOWN or batch_sampler is not None)

    @staticmethod
    def _worker_options(ctx, bound) -> bool:
        for name in ("prefetch_factor", "multiprocessing_context", "persistent_workers", "timeout"):
            value = ctx.value(bound, name)
            if value is UNKNOWN or value:
                return True
        return False

    @staticmethod
    def _loads_samples(ctx, index, bound) -> bool:
        """The dataset is always an instance of a known map-style dataset class whose data is not
        already in memory (unknown datasets, iterable datasets and in-memory data are left alone)."""
        expr = bound.expr("dataset")
        if expr is None or index.in_memory(expr):
            return False
        nodes = index.value_nodes(expr)
        return bool(nodes) and all(isinstance(n, cst.Call) and ctx.dataset_kind(n) == MAP for n in nodes)

    @staticmethod
    def _training(ctx, index, loader, hooks, evaluation) -> Optional[str]:
        in_eval_hook = loader.function is not None and loader.function.name.value in EVALUATION_HOOKS
        if loader not in hooks and (in_eval_hook or loader in evaluation):
            return None  # a validation, test or predict loader, even when it shuffles
        shuffle = ctx.value(loader.bound, "shuffle")
        if shuffle is not UNKNOWN and shuffle:
            return "`shuffle=True`"
        for call in index.sampler_calls(loader, RANDOM_SAMPLERS):
            if ctx.call_name(call) == DISTRIBUTED_SAMPLER:
                sampler_shuffle = ctx.value(BoundCall(call, DISTRIBUTED_SAMPLER_SIGNATURE), "shuffle")
                if sampler_shuffle is UNKNOWN or not sampler_shuffle:
                    continue  # an evaluation shard
            return f"sampled by `{_short(ctx.call_name(call))}`"
        if loader in hooks or (loader.function is not None and loader.function.name.value == "train_dataloader"):
            return "returned by `train_dataloader`"
        for loop in index.loops_of(loader):
            step = training_step(ctx, index, loop.loop)
            if step:
                return f"its loop calls `{step}`"
        return None


def training_step(ctx, index, loop) -> Optional[str]:
    """``.backward()`` or ``optimizer.step()`` in the loop body or a same-module helper it calls."""
    for call in index.loop_calls(loop, unconditional=True):
        func = call.func
        if not isinstance(func, cst.Attribute):
            continue
        if func.attr.value == "backward":
            return ".backward()"
        if func.attr.value == "step" and _is_optimizer(ctx, index, func.value):
            return f"{ctx.code(func.value).strip()}.step()"
    return None


def _is_optimizer(ctx, index, expr) -> bool:
    parts = dotted_parts(expr)
    if parts and ("optim" in parts[-1].lower() or parts[-1] in ("opt", "optimiser")):
        return True
    nodes = index.value_nodes(expr) or []
    return any(
        isinstance(n, cst.Call)
        and (ctx.call_name(n) or "").startswith("torch.optim.")
        and "lr_scheduler" not in (ctx.call_name(n) or "")
        for n in nodes
    )


# --------------------------------------------------------------------------- DSL508


class UnpinnedCudaTransfer(Rule):
    """
    ## What it does
    Flags a `DataLoader` whose batches are moved to the GPU inside the loop
    over it (`.cuda()`, `.to("cuda")`, `.to(device)` with `device` a literal
    CUDA device, or any `.to(..., non_blocking=True)`) while its `pin_memory`
    is absent or a literal `False`.

    The batch is followed through the loop body in order: names bound to it,
    its items and slices, methods called on it, unpacking and loops over it.

    Not flagged: `pin_memory` that is not a literal (such as
    `torch.cuda.is_available()`), `.to(device)` where the device is not known
    to be CUDA and `non_blocking` is not set, loops that pin the batch
    themselves (`.pin_memory()`), and tensors the main process makes from the
    batch (`preprocess(x)`, `torch.stack(x)`, `x / 255`), which
    `pin_memory=True` would not pin either.

    ## Why is this bad?
    Without `pin_memory=True` the batch lives in pageable host memory. The
    CUDA copy then goes through a staging buffer: it cannot overlap with
    compute (`non_blocking=True` does nothing) and is slower than a copy from
    pinned memory. With `pin_memory=True` the loader's pin thread pins each
    batch while the previous step runs. The effect shows only on a GPU
    (`dslint verify` measures the host-to-device time where one is present).

    ## Example
    ```python
    loader = DataLoader(ds, batch_size=256, num_workers=8)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(ds, batch_size=256, num_workers=8, pin_memory=True)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    ```

    ## References
    - [Memory pinning](https://pytorch.org/docs/stable/data.html#memory-pinning)
    - [A guide on good usage of `non_blocking` and `pin_memory()`](https://pytorch.org/tutorials/intermediate/pinmem_nonblock.html)
    """

    code = "DSL508"
    name = "unpinned-cuda-transfer"
    symptom = Symptom("h2d", "host-to-device copy time, pageable vs pinned", gpu=True, exclusive=True)
    level = WARNING
    summary = "Batches are copied to the GPU from a DataLoader without `pin_memory=True`"
    help = "Pass `pin_memory=True` to the DataLoader"

    valid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        """,
        """
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, pin_memory=torch.cuda.is_available())
        for x in loader:
            x = x.to("cuda")
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds)
        for x in loader:
            x = x.to(device)  # the device is not known to be CUDA
            model.cuda()
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, num_workers=4)  # expect: DSL508
        for images, labels in loader:
            images = images.cuda(non_blocking=True)
            labels = labels.cuda(non_blocking=True)
        """,
        """
        import torch
        import torch.utils.data as tud

        DEVICE = torch.device("cuda:0")

        def train_epoch(model, loader):
            for batch in loader:
                batch = {k: v.to(DEVICE) for k, v in batch.items()}
                model(**batch)

        def main(ds):
            loader = tud.DataLoader(ds, batch_size=8, pin_memory=False)  # expect: DSL508
            for epoch in range(3):
                train_epoch(model, loader)
        """,
    )

    def check(self, ctx):
        index = loader_loops(ctx)
        reported = set()
        for loop in index.loops:
            loader = loop.loader
            if id(loader.call) in reported:
                continue
            pin = ctx.value(loader.bound, "pin_memory")
            if pin is UNKNOWN or pin:
                continue
            transfer = self._transfer(ctx, index, loop)
            if transfer is None:
                continue
            reported.add(id(loader.call))
            yield self.report(
                loader.call,
                f"batches of this DataLoader are copied to the GPU (`{transfer}`) but `pin_memory` is off: the "
                "copy comes from pageable host memory, so it cannot be asynchronous (`non_blocking=True` does "
                "nothing) and is slower than from pinned memory",
            )

    def _transfer(self, ctx, index, loop) -> Optional[str]:
        """The first `.cuda()`/`.to(cuda)` of (a view of) the loader's batch in the loop body.

        The body is followed in execution order. A name holds the batch after
        ``x = batch``, ``x = batch["image"]``, ``x = batch.squeeze()``, unpacking and
        loops over it; a name rebound to anything else (``x = preprocess(x)``,
        ``x = torch.stack(x)``, ``x = x / 255``) holds a new tensor made in the main
        process, which `pin_memory=True` would not pin either.
        """
        for node in index.body_nodes(loop.loop.body):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "pin_memory":
                return None
        walker = _BatchTransfers(self, ctx, index, set(names_used(loop.loop.target)))
        walker.visit(loop.loop.body)
        return walker.found

    def _to_cuda(self, ctx, index, call) -> bool:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "non_blocking":
                value = ctx.literal(arg.value)
                if value is not UNKNOWN and value:
                    return True
        args = positional_args(call)
        device = args[0] if args else None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                device = arg.value
        if device is None:
            return False
        nodes = index.value_nodes(device)
        return bool(nodes) and all(self._cuda_device(ctx, n) for n in nodes)

    @staticmethod
    def _cuda_device(ctx, node) -> bool:
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
            value = node.evaluated_value
            return isinstance(value, str) and value.startswith("cuda")
        if isinstance(node, cst.Call) and ctx.call_name(node) == "torch.device":
            args = positional_args(node)
            value = ctx.literal(args[0]) if args else UNKNOWN
            return isinstance(value, str) and value.startswith("cuda")
        return False


_TRANSPARENT_CALLS = frozenset({"enumerate", "zip", "iter", "list", "tuple", "reversed", "sorted", "next"})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


class _BatchTransfers:
    """Follows which names hold the batch (or a view of it) through a loop body, in order."""

    def __init__(self, rule, ctx, index, tainted) -> None:
        self.rule = rule
        self.ctx = ctx
        self.index = index
        self.tainted = tainted
        self.found: Optional[str] = None

    # what holds the batch
    def derived(self, expr, tainted=None) -> bool:
        tainted = self.tainted if tainted is None else tainted
        if isinstance(expr, cst.Name):
            return expr.value in tainted
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return self.derived(expr.value, tainted)
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute):
                return self.derived(expr.func.value, tainted)  # a method of the batch: .float(), .items()
            if isinstance(expr.func, cst.Name) and expr.func.value in _TRANSPARENT_CALLS:
                return any(self.derived(arg.value, tainted) for arg in expr.args)
            return False  # preprocess(x), torch.stack(x): a new tensor
        if isinstance(expr, (cst.Tuple, cst.List)):
            return any(self.derived(e.value, tainted) for e in expr.elements)
        if isinstance(expr, cst.IfExp):
            return self.derived(expr.body, tainted) and self.derived(expr.orelse, tainted)
        if isinstance(expr, _COMPREHENSIONS):
            local = set(tainted)
            comp = expr.for_in
            while comp is not None:
                self._bind_iter(comp.target, comp.iter, local)
                comp = comp.inner_for_in
            elt = expr.value if isinstance(expr, cst.DictComp) else expr.elt
            return self.derived(elt, local)
        return False

    def _bind(self, target, value, tainted) -> None:
        if isinstance(target, cst.Name):
            if self.derived(value, tainted):
                tainted.add(target.value)
            else:
                tainted.discard(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if (
                isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == len(elements)
                and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements))
            ):
                for sub, val in zip(elements, [e.value for e in value.elements]):
                    self._bind(sub, val, tainted)
            else:
                keep = self.derived(value, tainted)
                for name in names_used(target):
                    (tainted.add if keep else tainted.discard)(name)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, value, tainted)

    def _bind_iter(self, target, iterable, tainted) -> None:
        keep = self.derived(iterable, tainted)
        for name in names_used(target):
            (tainted.add if keep else tainted.discard)(name)

    # execution order
    def visit(self, node, tainted=None, depth: int = 0) -> None:
        tainted = self.tainted if tainted is None else tainted
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) or depth > 150:
            return  # nested scopes are not the loop body; absurdly deep expressions are left alone
        if isinstance(node, cst.Assign):
            self.visit(node.value, tainted, depth + 1)
            for target in node.targets:
                self._bind(target.target, node.value, tainted)
            return
        if isinstance(node, (cst.AnnAssign, cst.NamedExpr)):
            if node.value is not None:
                self.visit(node.value, tainted, depth + 1)
                self._bind(node.target, node.value, tainted)
            return
        if isinstance(node, cst.AugAssign):
            self.visit(node.value, tainted, depth + 1)
            return
        if isinstance(node, cst.For):
            self.visit(node.iter, tainted, depth + 1)
            self._bind_iter(node.target, node.iter, tainted)
            self.visit(node.body, tainted, depth + 1)
            if node.orelse is not None:
                self.visit(node.orelse, tainted, depth + 1)
            return
        if isinstance(node, _COMPREHENSIONS):
            local = set(tainted)
            comp = node.for_in
            while comp is not None:
                self.visit(comp.iter, local, depth + 1)
                self._bind_iter(comp.target, comp.iter, local)
                for cond in comp.ifs:
                    self.visit(cond, local, depth + 1)
                comp = comp.inner_for_in
            if isinstance(node, cst.DictComp):
                self.visit(node.key, local, depth + 1)
                self.visit(node.value, local, depth + 1)
            else:
                self.visit(node.elt, local, depth + 1)
            return
        for child in node.children:
            self.visit(child, tainted, depth + 1)
        if isinstance(node, cst.Call) and self.found is None:
            self._check(node, tainted)

    def _check(self, call, tainted) -> None:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to"):
            return
        if not self.derived(func.value, tainted):
            return
        if func.attr.value == "cuda" or self.rule._to_cuda(self.ctx, self.index, call):
            found = self.ctx.code(call).strip()
            self.found = found if len(found) <= 60 else f".{func.attr.value}(...)"


# --------------------------------------------------------------------------- DSL510


class StateHiddenFromPersistentWorkers(Rule):
    """
    ## What it does
    Flags `dataset.set_epoch(...)` and `dataset.<attr> = ...` inside the epoch
    loop (or a helper it calls) when the dataset belongs to a `DataLoader`
    created once, before that loop, with a literal `persistent_workers=True`.
    The dataset is the object passed as `dataset` (followed through names,
    `self` attributes and helper parameters) or `loader.dataset`.

    Not flagged: loaders without `persistent_workers=True` (each epoch starts
    new workers from the current dataset), loaders created inside the epoch
    loop, and changes to other objects.

    ## Why is this bad?
    Each worker process holds its own copy of the dataset, made when the
    workers start. Persistent workers start once, at the first epoch, and keep
    that copy: a change made later in the main process never reaches them.
    Measured: the main process set `ds.epoch` to 0, 1, 2, and the persistent
    workers saw epochs `[0, 0, 0]` (non-persistent workers saw `[0, 1, 2]`).
    Epoch-dependent augmentation, curriculum or resampling silently stays at
    epoch 0.

    ## Example
    ```python
    loader = DataLoader(ds, num_workers=4, persistent_workers=True)
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            ...
    ```

    ## Use instead
    Pass per-epoch state through the sampler (its indices are sent to the
    workers every epoch), through shared memory, or drop `persistent_workers`:
    ```python
    loader = DataLoader(ds, num_workers=4)  # workers restart and copy the dataset every epoch
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            ...
    ```

    ## References
    - [`DataLoader(persistent_workers=...)`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    """

    code = "DSL510"
    name = "state-hidden-from-persistent-workers"
    symptom = Symptom("worker_state", "persistent workers keep epoch 0's dataset state")
    level = ERROR
    summary = "Dataset state changed per epoch while persistent workers keep their old copy"
    help = "Drop `persistent_workers=True`, or pass per-epoch state through the sampler or shared memory"

    valid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2)
        for epoch in range(3):
            ds.set_epoch(epoch)
            for batch in loader:
                step(batch)
        """,
        """
        from torch.utils.data import DataLoader
        for epoch in range(3):
            ds.epoch = epoch
            loader = DataLoader(ds, num_workers=2, persistent_workers=True)  # new workers every epoch
            for batch in loader:
                step(batch)
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, persistent_workers=True)
        for epoch in range(3):
            loader.sampler.set_epoch(epoch)
            other.epoch = epoch
            for batch in loader:
                step(batch)
        """,
        """
        from torch.utils.data import DataLoader
        ds = Shards(files)
        ds.epoch = 0  # before the workers start: they copy it
        loader = DataLoader(ds, num_workers=2, persistent_workers=True)
        for epoch in range(3):
            for batch in loader:
                step(batch)
        """,
        """
        from torch.utils.data import DataLoader

        def run_epoch(loader, dataset, epoch):
            dataset.set_epoch(epoch)  # `dataset` is not known to be the loader's dataset
            for batch in loader:
                step(batch)

        def main(a, b):
            loader = DataLoader(a, num_workers=2, persistent_workers=True)
            for epoch in range(3):
                run_epoch(loader, b, epoch)
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        ds = Shards(files)
        loader = DataLoader(ds, batch_size=8, num_workers=2, persistent_workers=True)
        for epoch in range(3):
            ds.set_epoch(epoch)  # expect: DSL510
            for batch in loader:
                step(batch)
        """,
        """
        import torch.utils.data as tud

        def run_epoch(loader, epoch):
            loader.dataset.epoch = epoch  # expect: DSL510
            for batch in loader:
                step(batch)

        def main(files):
            loader = tud.DataLoader(Shards(files), num_workers=4, persistent_workers=True)
            for epoch in range(10):
                run_epoch(loader, epoch)
        """,
    )

    def check(self, ctx):
        index = loader_loops(ctx)
        reported = set()
        for loop in index.loops:
            loader = loop.loader
            bound = loader.bound
            persistent = ctx.value(bound, "persistent_workers")
            if persistent is UNKNOWN or persistent is not True:
                continue
            if _literal_zero(ctx.value(bound, "num_workers")):
                continue  # DSL503
            epoch = index.epoch(loop)
            if epoch is None:
                continue
            dataset_expr = bound.expr("dataset")
            dataset = index.value_nodes(dataset_expr) if dataset_expr is not None else None
            if dataset is not None and (len(dataset) != 1 or is_none(dataset[0])):
                dataset = None
            regions = [(epoch.body, ())] + [(f.body, stack) for f, stack in index.epoch_functions(loop)]
            for block, stack in regions:
                for node in index.body_nodes(block):
                    found = self._change(node)
                    if found is None or id(found[0]) in reported:
                        continue
                    report_node, receiver, what = found
                    if not self._is_dataset(index, loader, dataset, receiver, stack):
                        continue
                    reported.add(id(report_node))
                    yield self.report(
                        report_node,
                        f"{what} changes the dataset in the main process only: with `persistent_workers=True` "
                        "the workers keep the copy they made at the first epoch and never see it (measured: "
                        "workers saw epochs [0, 0, 0] while the main process set 0, 1, 2)",
                    )

    @staticmethod
    def _change(node):
        """(node to report, receiver, description) for ``X.set_epoch(...)`` or ``X.attr = ...``."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "set_epoch":
            return node, node.func.value, "`set_epoch`"
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, cst.Attribute):
                return node, target.value, f"assigning `.{target.attr.value}`"
        return None

    @staticmethod
    def _is_dataset(index, loader, dataset, receiver, stack) -> bool:
        if isinstance(receiver, cst.Attribute) and receiver.attr.value == "dataset":
            if index.is_loader(receiver.value, loader, stack=stack):
                return True
        if dataset is None:
            return False
        return index.value_nodes(receiver, stack=stack) == dataset


# --------------------------------------------------------------------------- DSL511


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
        if _is_int(workers) and workers > 0:
            text = (
                f"`next(iter(loader))` in a loop starts a new iterator on every step: the {workers} worker "
                "processes are started and shut down again for each batch (measured 16x slower over 20 steps)"
            )
            return text + (f", and it {first}" if fixed else "")
        if fixed:
            return f"`next(iter(loader))` in a loop restarts the loader on every step: it {first}"
        return None
