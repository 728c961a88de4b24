"""DSL510: dataset state changed per epoch while persistent workers keep their old copy."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.loader._common import literal_zero
from dslint.semantics.epoch_changes import change_of, is_loader_dataset, method_changes
from dslint.semantics.epoch_hooks import hidden_set_epochs
from dslint.semantics.epochs import epoch_blocks, persistent_workers
from dslint.semantics.loops import loader_loops
from dslint.semantics.scopes import is_none


class StateHiddenFromPersistentWorkers(Rule):
    """
    ## What it does
    Flags `dataset.set_epoch(...)`, `dataset.<attr> = ...` and `dataset.<method>(...)` inside the epoch loop (or a
    helper it calls) when the dataset belongs to a `DataLoader` created once, before that loop, with
    `persistent_workers=True`: a literal, the value it certainly takes on that loader's path (a factory's argument
    or parameter default, a `**kwargs` entry), or the default of a command-line option (the default configuration
    loses the change); other possible values and unknown ones stay silent. The dataset is the object passed as
    `dataset` (followed through names, `self` attributes and helper parameters) or `loader.dataset`. A method counts
    when its class is defined in this file and the method (or a method it calls on `self`) assigns a `self`
    attribute that `__getitem__`/`__iter__` (or what they call) reads, outside a lazy `if self.x is None:`; a method
    of a class defined elsewhere is not followed.

    A dataset's own `set_epoch` is flagged at its assignments to per-sample state when the project imports
    accelerate's `Accelerator` and calls a `prepare` (its prepared loaders call `dataset.set_epoch(epoch)` every epoch
    when the sampler has none) and a DataLoader over the class (or a project function's result whose every `return`
    constructs it) has no `shuffle` or `sampler` and keeps its workers by default: `True`, or a config lookup's
    default (`cfg.get(k, True)`), also as a `**dict` entry, set unconditionally or only when it has workers.

    ## When it does not fire
    Loaders without `persistent_workers=True` (each epoch starts new workers from the current dataset), loaders
    created inside the epoch loop, and changes to other objects.

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
    - `DataLoader(persistent_workers=...)` (the PyTorch documentation, `torch.utils.data`)
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
        from torch.utils.data import DataLoader, Dataset

        class Table(Dataset):
            def __init__(self, rows):
                self.rows, self._index = rows, None
            def summary(self):
                if self._index is None:  # a cache of the main process, not per-sample state
                    self._index = build(self.rows)
                self.queried = True
                return self._index
            def __getitem__(self, i):
                return self.rows[i]

        data = Table(rows)
        loader = DataLoader(data, num_workers=2, persistent_workers=True)
        for epoch in range(3):
            print(data.summary())
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
        """
        from torch.utils.data import DataLoader
        def build(ds, persistent=True):
            return DataLoader(ds, num_workers=2, persistent_workers=persistent)
        loader = build(ds, persistent=False)  # this loader's workers restart every epoch
        other = DataLoader(ds, num_workers=2, persistent_workers=args.persistent)  # unknown
        for epoch in range(3):
            ds.set_epoch(epoch)
            for batch in zip(loader, other):
                step(batch)
        """,
        """
        from accelerate import Accelerator
        from torch.utils.data import DataLoader, Dataset
        class Mixture(Dataset):
            def __init__(self, parts): self.parts, self.epoch = parts, 0
            def set_epoch(self, epoch): self.epoch = epoch
            def __getitem__(self, i): return self.parts[hash((self.epoch, i)) % len(self.parts)]
        acc = Accelerator()
        shuffled = acc.prepare(DataLoader(Mixture(parts), shuffle=True, num_workers=2, persistent_workers=True))  # sampler
        chosen = acc.prepare(DataLoader(Mixture(parts), num_workers=2, persistent_workers=cfg.persistent))  # unknown
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
        from torch.utils.data import DataLoader, Dataset

        class Curriculum(Dataset):
            def __init__(self, items):
                self.items, self.level = items, 0
            def harder(self):
                self.level += 1
            def __getitem__(self, i):
                return self.items[i][: self.level + 1]

        def main(items):
            data = Curriculum(items)
            loader = DataLoader(data, num_workers=2, persistent_workers=True)
            for epoch in range(5):
                for batch in loader:
                    step(batch)
                data.harder()  # expect: DSL510
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
        """
        from torch.utils.data import DataLoader

        def build(ds, workers=4, persistent=True):
            return DataLoader(ds, num_workers=workers, persistent_workers=persistent)
        ds = Shards(files)
        loader = build(ds)
        for epoch in range(3):
            ds.set_epoch(epoch)  # expect: DSL510
            for batch in loader:
                step(batch)
        """,
        """
        import argparse
        from torch.utils.data import DataLoader
        parser = argparse.ArgumentParser()
        parser.add_argument("--restart-workers", dest="persistent", action="store_false")
        args = parser.parse_args()
        ds = Shards(files)
        loader = DataLoader(ds, num_workers=2, persistent_workers=args.persistent)  # by default True
        for epoch in range(3):
            ds.epoch = epoch  # expect: DSL510
            for batch in loader:
                step(batch)
        """,
        {
            "data.py": """
                from torch.utils.data import Dataset
                class Mixture(Dataset):
                    def __init__(self, parts): self.parts, self.epoch = parts, 0
                    def set_epoch(self, epoch): self.epoch = epoch  # expect: DSL510
                    def __getitem__(self, i): return self.parts[hash((self.epoch, i)) % len(self.parts)]
                def build_dataset(cfg): return Mixture(cfg["parts"])
                """,
            "train.py": """
                from accelerate import Accelerator
                from torch.utils.data import DataLoader
                from data import build_dataset
                def make_loader(cfg):
                    workers = int(cfg.get("num_workers", 4))
                    kwargs = {"batch_size": 8, "num_workers": workers}
                    if workers > 0:
                        kwargs["persistent_workers"] = bool(cfg.get("persistent_workers", True))
                    return Accelerator().prepare(DataLoader(build_dataset(cfg), **kwargs))  # set_epoch every epoch
                """,
        },
    )

    def check(self, ctx):
        for node, attr, files in hidden_set_epochs(ctx):
            yield self.report(node, f"`set_epoch` changes `self.{attr}` (read per sample) in the main process only: "
                f"accelerate's prepared loader calls it every epoch, but the DataLoader over this dataset (in `{files[0]}`) "
                "keeps its workers (`persistent_workers=True` by default), which keep the copy made at the first epoch "
                "(measured: workers saw epochs [0, 0, 0] while the main process set 0, 1, 2)")
        index = loader_loops(ctx)
        reported = set()
        for loop in index.loops:
            loader = loop.loader
            bound = loader.bound
            if not persistent_workers(ctx, index, loop):
                continue
            if literal_zero(ctx.value(bound, "num_workers")):
                continue  # DSL503
            epoch = index.epoch(loop)
            if epoch is None:
                continue
            dataset_expr = bound.expr("dataset")
            dataset = index.value_nodes(dataset_expr) if dataset_expr is not None else None
            if dataset is not None and (len(dataset) != 1 or is_none(dataset[0])):
                dataset = None
            for block, stack in epoch_blocks(index, loop):
                for node in index.body_nodes(block):
                    found = change_of(node)
                    if found is None or id(found[0]) in reported:
                        continue
                    report_node, receiver, what = found
                    if not is_loader_dataset(index, loader, dataset, receiver, stack):
                        continue
                    if what.endswith("()`"):
                        changed = method_changes(ctx, dataset, report_node.func.attr.value)
                        if not changed:
                            continue
                        what = f"{what} (it sets {', '.join(f'`self.{a}`' for a in changed)}, read per sample)"
                    reported.add(id(report_node))
                    yield self.report(
                        report_node,
                        f"{what} changes the dataset in the main process only: with `persistent_workers=True` "
                        "the workers keep the copy they made at the first epoch and never see it (measured: "
                        "workers saw epochs [0, 0, 0] while the main process set 0, 1, 2)",
                    )
