"""DSL505: a ``DistributedSampler`` iterated over epochs without ``set_epoch``."""

from __future__ import annotations

from dslint.rules.base import ERROR, Invalid, Rule, Symptom
from dslint.rules.loader._common import set_epoch_fix, set_epoch_message
from dslint.semantics.epochs import samplers_without_epoch
from dslint.semantics.loops import loader_loops


class DistributedSamplerWithoutSetEpoch(Rule):
    """
    ## What it does
    Flags a `DistributedSampler` passed as `sampler=` (or as the `"sampler"` entry of the `**` dict) to a `DataLoader`
    (or to PyG's or MONAI's loader, which hand it to torch's) iterated inside an epoch loop (an outer `for`/`while`, also around a call of the helper that holds the batch loop), when nothing in the module calls `set_epoch` on the sampler or on `loader.sampler`. The loop may iterate
    the loader on one branch only (bound to it under `if distributed:`, to another `DataLoader(...)` otherwise; no
    fix), be a training loop (`.backward()`) of `self.m(loader)` where `self` is a static method's parameter, or call
    `iter(loader)` (a `next()` stream rebuilt on `StopIteration`; no fix). Several `DistributedSampler` calls for one
    `sampler=` (one per branch) are reported at the loader; a branch may build a torch sampler instead
    (`DistributedSampler(ds) if ddp else RandomSampler(ds)`, `make = DistributedSampler if ddp else RandomSampler`).
    Also flagged, when no file of the project names `set_epoch` nor imports a library whose trainers call it
    (Lightning, Accelerate, Ignite...): the loader handed to project code whose result an epoch loop iterates
    (`batches = Prefetcher(loader)`), to a class or function that re-iterates it every epoch itself (`Trainer(m,
    loader)`, `fit(m, loader, n)`, or its epoch loop hands it to a training helper of its module or class: `one_epoch(m, loader)`; a dict holding it counts for the entry they re-iterate,
    `self.loaders["train"]`), in the epoch loop to a function of another module that iterates it (`train_one_epoch(m,
    loader)`), returned by a function whose result another file re-iterates (or hands, in a loop, to a function that
    trains on it: `loader = build(cfg)`, `for e in ...: train(m, loader)`), or by a method (itself, or in a returned
    dict or list) that a file calls on an object annotated with (or made by) its class or a base (`self.experiment:
    Experiment`; of an unknown class: silent) and re-iterates every epoch, or kept on `self` by a wrapper whose `__iter__`
    iterates it, when an epoch loop (any file) re-iterates an instance (`b = (A if c else Batches)(...)`, a subclass). So is
    one made anew in each pass of an outer loop over data bound before it: it starts at epoch 0 again (no fix).
    ## When it does not fire
    A `shuffle` certainly false (`shuffle=False`; one read from a configuration counts: where true, the order repeats),
    a sampler made anew each pass over new data (`for shard in shards: data = load(shard)`) or with a seed of its own
    (`seed=epoch`), evaluation (`no_grad()`/`inference_mode()`; a function that calls `model.eval()`, never `.train()`,
    and makes no training step, also one handing the loader to a prefetcher), loaders built in a Lightning `*_dataloader`
    hook or wrapped by a framework (they call `set_epoch`), and those handed to another module's function in the epoch loop.

    ## Why is this bad?
    `DistributedSampler` shuffles with the seed `seed + epoch`; only `set_epoch` changes its epoch. Without it every epoch visits the samples in one identical order on every rank (measured: `[12, 9, 11, 13, 2, 15, 4, 7]` each epoch).

    ## Example
    ```python
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        for batch in loader: train_step(batch)
    ```

    ## Use instead
    ```python
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader: train_step(batch)
    ```

    ## Fix safety
    When the epoch loop is `for <name> in range(...)` and the sampler (or the loader) has one name there, the fix inserts
    `<sampler>.set_epoch(<name>)` first in the epoch loop. It is unsafe: it changes the sample order (the point), and the
    loop variable may not count epochs as the user expects (when resuming).

    ## References
    - `DistributedSampler` (the PyTorch documentation, `torch.utils.data`): "calling the `set_epoch()` method at the beginning of each epoch before creating the DataLoader iterator is necessary to make shuffling work properly"
    """

    code = "DSL505"
    name = "distributed-sampler-without-set-epoch"
    symptom = Symptom("distributed", "each rank's order is identical every epoch")
    level = ERROR
    summary = "`DistributedSampler` iterated over epochs without `set_epoch`"
    help = "Call `sampler.set_epoch(epoch)` at the start of every epoch, before iterating the loader"

    valid = (
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler
        sampler = DistributedSampler(ds) if hvd else DistributedSampler(ds, num_replicas=n)  # either gets it
        loader = DataLoader(ds, batch_size=8, sampler=sampler)
        for epoch in range(10):
            sampler.set_epoch(epoch)
            for batch in loader: step(batch)
        def main(ds):
            loader = DataLoader(ds, sampler=DistributedSampler(ds))
            for epoch in range(10):
                loader.sampler.set_epoch(epoch)
                for batch in loader: step(batch)
        """,
        """
        import torch
        from torch.utils.data import DataLoader, DistributedSampler
        loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
        ordered = False
        other = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=ordered))  # certainly false
        params = {"dataset": ds}
        params["sampler"] = DistributedSampler(ds)  # a sampler written into the `**` dict
        once = DataLoader(**params)
        val_loader = DataLoader(ds, sampler=DistributedSampler(ds))
        for batch in once: step(batch)  # iterated once: no epochs
        for epoch in range(10):
            for batch in zip(loader, other): step(batch)
            with torch.no_grad():  # evaluation
                for batch in val_loader: evaluate(batch)
        def branches(args, ds, make_loader):  # `make_loader` is unknown: so is the loop's loader
            loader = DataLoader(ds, sampler=DistributedSampler(ds)) if args.distributed else make_loader(ds)
            for epoch in range(10):
                for batch in loader: step(batch)
        for shard in shards:  # a new dataset, sampler and loader each time: each iterated once
            data = load(shard)
            part = DataLoader(data, sampler=DistributedSampler(data))
            for batch in part: step(batch)
        class Sharded:
            def get_loaders(self): return {"train": DataLoader(self.ds, sampler=DistributedSampler(self.ds))}
        class Runner:  # nothing says which class `self.experiment` is: its `get_loaders` is unknown
            def __init__(self, experiment): self.experiment = experiment
            def run(self, epochs):
                loaders = self.experiment.get_loaders()
                for epoch in range(epochs):
                    for loader in loaders.values():
                        for batch in loader: self.step(batch)
        def once(loaders):  # one pass over the "train" entry of the dict it is handed: no epochs
            for batch in loaders["train"]: step(batch)
        once(dict(train=DataLoader(ds, sampler=DistributedSampler(ds))))
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler
        import pytorch_lightning as pl
        class Model(pl.LightningModule):
            def train_dataloader(self): return DataLoader(self.ds, sampler=DistributedSampler(self.ds))
        def main(accelerator, ds):
            loader = DataLoader(ds, sampler=DistributedSampler(ds))
            model, loader = accelerator.prepare(model, loader)
            for epoch in range(3):
                for batch in loader: step(batch)
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler
        from engine import train_one_epoch
        def main(ds):
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, sampler=sampler)
            for epoch in range(3): train_one_epoch(model, loader, sampler, epoch)  # may call set_epoch
        """,
        """
        from torch.utils.data import DataLoader, DistributedSampler
        def run_epoch(loader, sampler, epoch):
            sampler.set_epoch(epoch)
            for batch in loader: step(batch)
        def main(ds):
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, sampler=sampler)
            for epoch in range(3): run_epoch(loader, sampler, epoch)
        class Prefetcher:  # the project names set_epoch: it may reach the sampler
            def __init__(self, loader): self.loader = loader
            def __iter__(self): return (b.cuda() for b in self.loader)
            def set_epoch(self, epoch): self.loader.sampler.set_epoch(epoch)
        loader = DataLoader(ds, sampler=DistributedSampler(ds))
        batches = Prefetcher(loader)
        for epoch in range(3):
            for batch in batches: step(batch)
        """,
    )
    invalid = (
        Invalid(
            """
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler as DS
            sampler = DS(ds)  # expect: DSL505
            loader = DataLoader(ds, batch_size=8, sampler=sampler)
            for epoch in range(10):
                for batch in loader: step(batch)
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler as DS
            sampler = DS(ds)  # expect: DSL505
            loader = DataLoader(ds, batch_size=8, sampler=sampler)
            for epoch in range(10):
                sampler.set_epoch(epoch)
                for batch in loader: step(batch)
            """,
        ),
        """
        import torch.utils.data as tud
        def train_one_epoch(model, loader, optimizer):
            for images, labels in loader:
                model(images, labels).backward()
                optimizer.step()
        def main(args):
            train_set = make_dataset(args)
            sampler = tud.DistributedSampler(train_set) if args.distributed else None  # expect: DSL505
            train_loader = tud.DataLoader(train_set, batch_size=32, sampler=sampler, shuffle=sampler is None)
            for epoch in range(args.epochs):
                train_one_epoch(model, train_loader, optimizer)
        from torch.utils.data import DataLoader, DistributedSampler
        class Trainer:
            def __init__(self, ds):
                self.loader = DataLoader(ds, sampler=DistributedSampler(ds), num_workers=4)  # expect: DSL505
            def train_epoch(self):
                for batch in self.loader: self.step(batch)
            def fit(self, epochs):
                for epoch in range(epochs): self.train_epoch()
        def build(ds):
            sampler = DistributedSampler(ds)  # expect: DSL505
            return DataLoader(ds, sampler=sampler)
        def main(ds):
            loader = build(ds)
            step = 0
            while step < 1000:
                for batch in loader: step += 1
        class Experiment:
            def get_loaders(self): ...
        class Sharded(Experiment):
            def get_loaders(self):
                loaders = {}
                for name, ds in self.datasets.items():
                    params = {"dataset": ds, "batch_size": 32}
                    params["sampler"] = DistributedSampler(ds)  # expect: DSL505
                    loaders[name] = DataLoader(**params)
                return loaders
        class Looper:  # keeps the dict it is handed; every pass of `run` re-iterates its "train" entry
            def __init__(self, loaders): self.loaders = loaders
            def run(self):
                while True:
                    for batch in enumerate(self.loaders["train"]): self.step(batch)
        loaders = {"dev": DataLoader(ds, sampler=DistributedSampler(ds))}  # never re-iterated: silent
        loaders["train"] = DataLoader(ds, sampler=DistributedSampler(ds))  # expect: DSL505
        Looper(loaders).run()
        class Runner:  # the loaders come from a method of the class the object is annotated with
            def __init__(self, experiment: Experiment): self.experiment = experiment
            def run_loader(self, loader):
                for batch in loader: self.step(batch)
            def run(self, epochs):
                loaders = self.experiment.get_loaders()
                for epoch in range(epochs):
                    for name in loaders: self.run_loader(loaders[name])
        sampler = DistributedSampler(ds) if distributed else None  # expect: DSL505
        loader = DataLoader(ds, shuffle=True, sampler=sampler)  # DSL501 reports the shuffle
        for epoch in range(3):
            for batch in loader: step(batch)
        def main(args, ds):  # the loop iterates the loader of the branch that ran
            if args.distributed:  # a `shuffle` read from a configuration may be true
                sampler = DistributedSampler(ds, shuffle=args.config["shuffle"])  # expect: DSL505
                loader = DataLoader(ds, sampler=sampler)
            else: loader = DataLoader(ds, shuffle=True)
            for epoch in range(10 ** 6):
                for i, batch in enumerate(loader): step(batch)
        class Worker:  # a static method handed the instance as `self` (`mp.spawn(w._run, args=(w, ds))`)
            @staticmethod
            def _run(rank, self, ds):
                loader = DataLoader(ds, sampler=DistributedSampler(ds))  # expect: DSL505
                scored = DataLoader(ds, sampler=DistributedSampler(ds))  # its loop does not train
                for epoch in self.epochs:
                    self._train(loader)
                    self._score(scored)
            def _train(self, loader):
                for batch in loader: self.model(batch).backward()
            def _score(self, loader):
                for batch in loader: self.model(batch)
        either = DistributedSampler(ds, num_replicas=hvd.size()) if hvd else DistributedSampler(ds)  # per branch
        batches_of = DataLoader(ds, sampler=either)  # expect: DSL505
        for epoch in range(3):
            for batch in batches_of: step(batch)
        class Prefetcher:  # project code, and no file of the project names set_epoch
            def __init__(self, loader): self.loader = loader
            def __iter__(self): return (b.cuda() for b in self.loader)
        batches = Prefetcher(DataLoader(ds, sampler=DistributedSampler(ds)))  # expect: DSL505
        for epoch in range(3):
            for batch in batches: step(batch)
        """,
        Invalid(
            """
            from torch.utils.data import DataLoader, DistributedSampler
            train_sampler = DistributedSampler(train_ds)  # expect: DSL505
            val_sampler = DistributedSampler(val_ds, shuffle=False)
            train_loader = DataLoader(train_ds, sampler=train_sampler)
            val_loader = DataLoader(val_ds, sampler=val_sampler)
            for epoch in range(3):
                val_sampler.set_epoch(epoch)
                for batch in train_loader: step(batch)
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader, DistributedSampler
            train_sampler = DistributedSampler(train_ds)  # expect: DSL505
            val_sampler = DistributedSampler(val_ds, shuffle=False)
            train_loader = DataLoader(train_ds, sampler=train_sampler)
            val_loader = DataLoader(val_ds, sampler=val_sampler)
            for epoch in range(3):
                train_sampler.set_epoch(epoch)
                val_sampler.set_epoch(epoch)
                for batch in train_loader: step(batch)
            """,
        ),
    )

    def check(self, ctx):
        index = loader_loops(ctx)
        for loader, sampler, loops in samplers_without_epoch(ctx, index):
            yield self.report(sampler, set_epoch_message(loader, sampler), fix=set_epoch_fix(ctx, index, loader, sampler, loops))
