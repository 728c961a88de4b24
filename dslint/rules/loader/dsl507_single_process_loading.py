"""DSL507: a training DataLoader that loads every batch in the main process."""

from __future__ import annotations

from typing import Optional

from dslint.rules.base import WARNING, Rule, Symptom
from dslint.rules.loader._common import (
    fresh_iterator_advances, literal_zero, loads_samples, rejected_at_construction, short, worker_options_set,
)
from dslint.semantics.batches import evaluation_named, evaluation_only, evaluation_split, training_step
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.epochs import distributed_shuffles
from dslint.semantics.loops import DISTRIBUTED_SAMPLER, EVALUATION_HOOKS, RANDOM_SAMPLERS, loader_loops
from dslint.semantics.sample_caches import caches_samples
from dslint.semantics.values import possible_arg
from dslint.semantics.worker_counts import capped_at_zero


class SingleProcessLoading(Rule):
    """
    ## What it does
    Flags a *training* `DataLoader` whose `num_workers` is absent, a literal `0` or `min(..., 0)`. A training loader is one that is
    shuffled (a truthy literal `shuffle`, or a `shuffle` a call of its function turns on: `shuffle=is_train`), samples with `RandomSampler`, `DistributedSampler` or
    `WeightedRandomSampler`, is returned by a `train_dataloader` method, or is
    iterated in a loop that calls `.backward()` or `optimizer.step()` (directly
    or in a helper of the same module).

    The dataset must be an instance of a map-style dataset class dslint knows
    (a `Dataset` subclass of the project, however imported, or a torchvision
    dataset), since only per-sample loading work is worth moving to workers.

    ## When it does not fire
    Evaluation and inference loaders (a `DistributedSampler` with `shuffle=False` shards evaluation; a loader built
    in or returned by `val_dataloader`, `test_dataloader` or `predict_dataloader` is one even when it shuffles, so
    is a loader over a test split, built with `train=False` or `split="test"`/`"val"` (written so, or every value the
    code shows: `get_loader(args, "val")`), one kept as or built over a name that says evaluation (`test_loader`,
    `DataLoader(val_set)`, also through a local name bound once to a `Subset` of one) whose loops do not train, and one this file only evaluates (under `torch.no_grad()`/
    `inference_mode()` or after `model.eval()`; also by `next(it)` over an iterator it keeps, `it = iter(loader)`), peeks at (`next(iter(loader))` outside any loop, or once per epoch beside the training loop over another loader) or only prints, tallies or writes out as image files
    (its loop calls builtins, numpy, `os.path`, `.numpy()`, `append` on its own lists, `cv2.imwrite`...; also a loop over a name each arm of an `if` binds to its own loader), and hands to no other module); a non-literal `num_workers` or
    `**kwargs`; a dataset that cannot be told statically; data already in memory (a `TensorDataset`, a tensor, a
    `range` or list, a `Subset` of those, torchvision's MNIST (and variants), CIFAR, SVHN or USPS with no transform or conversions only (`ToTensor`, `Normalize`), a project dataset class, in any file or function, whose `__getitem__` only indexes (what it runs under `if self.transform:` aside, when this construction leaves that `None`): it
    calls builtins, tensor/array constructors and type tests (`torch.is_tensor(idx)`), copies (`copy.deepcopy`), fills its own lists and dicts (`append`, `update`), random draws (an error it raises is no work), its own methods, `super()` or project helpers that
    do no more; a pandas `.loc`/`.iloc` or a mask over a column is work), where indexing is cheaper than sending batches between processes; a dataset whose `__getitem__` keeps each sample it loads in a dict on `self` and reads it back (`if i in self.cache: ...`, `self.cache[i] = image`): the main process keeps that cache across epochs, while each worker would fill its own; a dataset whose `__getitem__` puts samples on the GPU (`.cuda()`, itself or in what it calls: forked workers could not run it, see DSL204); `IterableDataset`s (adding
    workers needs sharding first, see DSL303); loaders built inside dataset code (they run in the outer loader's workers); test
    code (a `tests/` directory, `test_*.py`, a `test_*` function, the `__main__` block of a module whose dataset class
    another file constructs, and a function only that block calls), whose loaders are not training runs; and loaders
    that already set a worker-only option (DSL503 reports those). A `.backward()` under an `if` (a helper shared by training and validation) does not count.

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
    - Single- and multi-process data loading (the PyTorch documentation, `torch.utils.data`)
    - Performance tuning guide (the PyTorch tutorials)
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
        again = DataLoader(ImageFolder(root), shuffle=True, **loader_kwargs)
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
            train_loader = DataLoader(MNIST("data", transform=aug), num_workers=4)
            val_loader = DataLoader(MNIST("data", transform=aug, train=False))  # the backward() is for training only
            for epoch in range(3):
                run_epoch(model, train_loader, optimizer, True)
                run_epoch(model, val_loader, optimizer, False)
        """,
        {
            "memory.py": """
            from torch.utils.data import Dataset

            class Pairs(Dataset):
                def __init__(self, rows):
                    self.rows = rows

                def __getitem__(self, i):
                    return self.rows[i]
            """,
            "train.py": """
            from torch.utils.data import DataLoader
            from memory import Pairs

            loader = DataLoader(Pairs(rows), batch_size=32, shuffle=True)  # in memory, in another file
            """,
        },
        """
        import torch
        from torch.utils.data import DataLoader
        from torchvision.datasets import MNIST

        def accuracy(model, loader):
            model.eval()
            with torch.no_grad():
                return sum((model(x).argmax(1) == y).sum() for x, y in loader)

        def main(model):
            test_loader = DataLoader(MNIST("data", transform=aug, train=False), batch_size=64, shuffle=True)  # a test split
            val_loader = DataLoader(MNIST("data", transform=aug), batch_size=64, shuffle=True)  # kept under an evaluation name
            held_out = DataLoader(MNIST("data", transform=aug), batch_size=64, shuffle=True)
            sample = next(iter(held_out))  # a look at one batch
            return accuracy(model, held_out)  # only evaluated
        """,
        {
            "tests/test_training.py": """
            from torch.utils.data import DataLoader
            from torchvision.datasets import MNIST

            def test_one_epoch():
                loader = DataLoader(MNIST("data", transform=aug), shuffle=True)  # a test, not a training run
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
            zero = literal_zero(ctx.value(bound, "num_workers")) or capped_at_zero(ctx, bound.expr("num_workers"))
            if not zero or worker_options_set(ctx, bound) or rejected_at_construction(ctx, bound):
                continue
            if not loads_samples(ctx, index, bound) or caches_samples(ctx, index, bound.expr("dataset")):
                continue  # (a dataset caching each sample it loads keeps that cache only in one process)
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
    def _training(ctx, index, loader, hooks, evaluation) -> Optional[str]:
        in_eval_hook = loader.function is not None and loader.function.name.value in EVALUATION_HOOKS
        if loader not in hooks and (in_eval_hook or loader in evaluation):
            return None  # a validation, test or predict loader, even when it shuffles
        shuffle = ctx.value(loader.bound, "shuffle")
        shuffled = "`shuffle=True`" if shuffle is not UNKNOWN and shuffle else None
        can = possible_arg(ctx, loader.bound, "shuffle").can_be(lambda v: v is True) if shuffle is UNKNOWN else None
        shuffled = shuffled or (f"`shuffle` is True as {can.origin}" if can is not None else None)
        for call in index.sampler_calls(loader, RANDOM_SAMPLERS):
            if shuffled or (ctx.call_name(call) == DISTRIBUTED_SAMPLER and not distributed_shuffles(ctx, call)):
                continue  # an evaluation shard
            shuffled = f"sampled by `{short(ctx.call_name(call))}`"
        if shuffled and (loader in hooks or not (
            evaluation_split(ctx, index, loader.bound.expr("dataset"))  # a test split
            or evaluation_named(ctx, loader.bound)  # kept as, or built over, `test_loader`/`val_set`
            or evaluation_only(ctx, index, loader, fresh_iterator_advances(ctx))  # only evaluated or peeked at
        )):
            return shuffled
        if loader in hooks or (loader.function is not None and loader.function.name.value == "train_dataloader"):
            return "returned by `train_dataloader`"
        for loop in index.loops_of(loader):
            step = training_step(ctx, index, loop.loop)
            if step:
                return f"its loop calls `{step}`"
        return None
