"""DSL702: a training DataLoader in a DDP script that every rank iterates in full."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.distributed._common import (
    every_use_guarded,
    factory_trained,
    handed_to_framework,
    dropped_sampler_message,
    map_style,
    per_rank_work,
    sampler_kinds,
)
from dslint.semantics.ddp_paths import on_rank_path, overridden_sharding
from dslint.semantics.distributed import ddp_marker, line_of, rank_dependent
from dslint.semantics.dropped_samplers import dropped_distributed_sampler
from dslint.semantics.loops import is_test_code, loader_loops


class DdpLoaderWithoutDistributedSampler(Rule):
    """
    ## What it does
    Flags a `DataLoader` over a map-style dataset, with no sampler, a `RandomSampler` or a `SequentialSampler`
    (or a `WeightedRandomSampler`/`SubsetRandomSampler` whose weights or indices are not cut per rank), in a file
    that runs once per rank under DDP (it calls `init_process_group`, wraps a model in
    `DistributedDataParallel`/FSDP, builds a `DistributedSampler` for another loader or a project subclass of
    these, reads `LOCAL_RANK`/`RANK` from the launcher's environment, or calls a project function in any file that
    calls `init_process_group`), or in a method overriding a project method (any file) that builds a
    `DistributedSampler` (a trainer subclass's `_setup_data`), when the loader (or a `StatefulDataLoader`) does
    per-rank work:

    - it shuffles (`shuffle=True`, also as the default of an argparse option or a config field, or a random
      sampler): a training loader;
    - a loop over it in this file (or in a same-file helper it is passed to) calls `.backward()`;
    - a loop over it saves results under a name that holds the rank
      (`torch.save(out, f"part_{rank}_{i}.pt")`): the work is meant to be split.

    A loader factory counts too: a function (no DDP sign in its file) returning the loader, built on every call,
    alone or in a tuple, when a DDP file (not an `Accelerator`/`Fabric` script) trains on it: a loop calling
    `.backward()` over a name assigned once from a call not given the rank or world size.

    Also flagged, in any file: a loader that does not get the `DistributedSampler` its function builds for its
    dataset (its name rebound before the loader reads it, or picked away by a test it was built to serve both
    ways: `s = DistributedSampler(ds, shuffle=train)`, `sampler=s if train else None`).

    The dataset counts as map-style when it is a known `Dataset` subclass (in any file), a torchvision dataset,
    `TensorDataset`/`Subset`, or when the loader shuffles (an `IterableDataset` cannot).

    ## Why is this bad?
    Without a `DistributedSampler` every rank iterates the whole dataset. Measured with 2 gloo ranks on 64
    samples: both ranks saw all 64 indices in one epoch (64 of 64 shared), against 0 shared with a
    `DistributedSampler`. Each epoch then trains on every sample once per rank (the epoch is world-size times
    longer than it looks, and with the same seed on every rank the ranks compute identical gradients), and
    offline processing does the same work once per rank and writes every result world-size times.

    ## Example
    ```python
    dist.init_process_group("nccl")
    model = DistributedDataParallel(model.cuda(), device_ids=[local_rank])
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    sampler = DistributedSampler(train_set)  # shuffles; call sampler.set_epoch(epoch)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
    ```

    ## When it does not fire
    - the sampler may be a `DistributedSampler` (`DistributedSampler(ds) if
      args.distributed else None`), a project or library sampler, a
      `batch_sampler`, or is unknown (a `**` dict the file does not show in full, a value from another
      file; one built without either key on every path, `kw = {"num_workers": 1} if cuda else {}`, gives none);
    - the dataset is an `IterableDataset` (DSL703), or its kind is unknown and the loader does not shuffle;
    - the dataset expression names the rank or the world size (`Subset(ds, range(rank, n, world_size))`,
      `Shard(files, rank=rank)`), or builds a project class whose `__init__` reads the world size (also
      through a factory or a parameter): it is already cut per rank;
    - the loader is passed to `accelerator.prepare`, `trainer.fit`, `fabric.setup_dataloaders` or `deepspeed.initialize`,
      which shard it, or built in a Lightning hook; in a script building an `Accelerator` or a `Fabric`, a loader no
      loop of the file iterates as it is (it may be prepared where this file cannot follow it);
    - the loader is built, or every loop over it runs, on one rank only (not in the `else` of `if rank == 0:`; with no
      loop over it in the file, every read of it: `if is_main_process(): validation(model, loader)`), or
      in an `if`/`else` arm whose other arm sets up DDP (`if args.distributed: ... DistributedSampler(ds)`);
    - the file's DDP sign is off the loader's path (its function, same-file callers, functions looping over it),
      and nothing per-rank is on it (DDP, FSDP, a `DistributedSampler`, the rank or world size, a `self.x` its
      class set from one of these): a `_train_plain` beside a `_train_ddp` trains one model per process;
    - evaluation loaders that do not shuffle and whose loops neither train nor write per-rank output (evaluating
      the full set on every rank is wasteful but correct), shuffled ones only evaluated or looked at (one batch,
      then `break`, or one batch each epoch beside the training loop over another loader); and test code.

    Possible and unknown values: `shuffle` counts when it *can* be True (a literal, an argparse option whose default
    is True, a config field, a parameter some caller in the file passes True for); a `shuffle` nothing in the
    project shows stays silent, and so does a sampler whose value cannot be followed.
    """

    code = "DSL702"
    name = "ddp-loader-without-distributed-sampler"
    symptom = Symptom("dist_overlap", "every rank iterates every sample of the epoch")
    level = ERROR
    summary = "A training DataLoader in a DDP script has no `DistributedSampler`, so every rank iterates the whole dataset"
    help = "Pass `sampler=DistributedSampler(dataset)` (and call `sampler.set_epoch(epoch)` every epoch), or prepare the loader with your framework"

    valid = (
        {
            "data.py": """
            from torch.utils.data import DataLoader
            def make_loader(train_set):
                return DataLoader(train_set, batch_size=8, shuffle=True)
            """,
            "train.py": """
            from accelerate import Accelerator
            from torch.utils.data import TensorDataset
            from data import make_loader
            def main(model, x, y):
                accelerator = Accelerator()
                loader = accelerator.prepare(make_loader(TensorDataset(x, y)))  # accelerate shards it
                for xb, yb in loader:
                    accelerator.backward(model(xb).sum())
            """,
        },
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        def main(ds, args):
            dist.init_process_group("nccl")
            sampler = DistributedSampler(ds) if args.distributed else None
            loader = DataLoader(ds, sampler=sampler, shuffle=sampler is None)
        """,
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        def main(ds, model):
            dist.init_process_group("nccl")
            val_loader = DataLoader(ds, batch_size=64)
            with torch.no_grad():
                for x, y in val_loader:  # the full set on every rank: wasteful, correct
                    model(x)
        """,
        """
        from torch.utils.data import DataLoader
        def main(ds):  # no process group: one process
            loader = DataLoader(ds, shuffle=True)
        """,
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, Subset
        def main(ds):
            dist.init_process_group("nccl")
            rank, world_size = dist.get_rank(), dist.get_world_size()
            mine = Subset(ds, range(rank, len(ds), world_size))
            loader = DataLoader(mine, shuffle=True)
        """,
        """
        from accelerate import Accelerator
        from torch.utils.data import DataLoader
        def main(ds, model):
            accelerator = Accelerator()
            loader = DataLoader(ds, shuffle=True)
            model, loader = accelerator.prepare(model, loader)
        """,
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        def main(ds):
            dist.init_process_group("nccl")
            if dist.get_rank() == 0:
                loader = DataLoader(ds, shuffle=True)
        """,
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        def main(ds, kwargs):
            dist.init_process_group("nccl")
            loader = DataLoader(ds, **kwargs)  # the sampler may be in there
        """,
    )
    invalid = (
        {
            "data.py": """
            from torch.utils.data import DataLoader
            def make_loaders(train_set, val_set):
                train = DataLoader(train_set, batch_size=8, shuffle=True)  # expect: DSL702
                return train, DataLoader(val_set, batch_size=8)
            """,
            "train.py": """
            import torch.distributed as dist
            from torch.utils.data import TensorDataset
            from data import make_loaders
            def main(model, x, y):
                dist.init_process_group("nccl")
                train_loader, val_loader = make_loaders(TensorDataset(x, y), TensorDataset(x, y))
                for xb, yb in train_loader:
                    model(xb).sum().backward()
            """,
        },
        """
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader

        def main(train_set, model, opt):
            dist.init_process_group("nccl")
            model = DDP(model)
            loader = DataLoader(train_set, batch_size=64, shuffle=True)  # expect: DSL702
            for x, y in loader:
                model(x).sum().backward()
                opt.step()
        """,
        """
        import argparse
        import os
        from torch.utils.data import DataLoader

        parser = argparse.ArgumentParser()
        parser.add_argument("--shuffle", type=bool, default=True)

        def make_loader(ds, args):
            return DataLoader(ds, batch_size=8, shuffle=args.shuffle)  # expect: DSL702

        def main(ds):
            args = parser.parse_args()
            local_rank = int(os.environ["LOCAL_RANK"])
            loader = make_loader(ds, args)
        """,
        {
            "clips.py": """
            from torch.utils.data import Dataset

            class Clips(Dataset):
                def __init__(self, root):
                    self.files = sorted(root.glob("*.wav"))

                def __len__(self):
                    return len(self.files)

                def __getitem__(self, i):
                    return load(self.files[i])
            """,
            "extract.py": """
            import torch
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            from clips import Clips

            @torch.inference_mode()
            def main(root, encoder):
                dist.init_process_group("nccl")
                rank = dist.get_rank()
                loader = DataLoader(Clips(root), batch_size=16, shuffle=False)  # expect: DSL702
                for i, batch in enumerate(loader):
                    torch.save(encoder(batch), f"latents/r{rank}_{i:05d}.pt")
            """,
        },
    )

    def check(self, ctx):
        if not ctx.dataloader_calls():
            return
        index = loader_loops(ctx)
        for loader in index.loaders:
            if loader.framework_driven or is_test_code(ctx, loader.call):
                continue
            dropped = dropped_distributed_sampler(ctx, index, loader)
            if dropped is not None and not every_use_guarded(ctx, index, loader):
                yield self.report(loader.call, dropped_sampler_message(ctx, dropped))
                continue
            samplers = sampler_kinds(ctx, index, loader)
            if samplers is None or not samplers <= {"none", "random", "sequential"}:
                continue
            if not map_style(ctx, index, loader, samplers):
                continue
            why = per_rank_work(ctx, index, loader, samplers)
            if rank_dependent(ctx, index, loader.bound.expr("dataset"), shards=True):
                continue
            marker = ddp_marker(ctx) or overridden_sharding(ctx, loader)  # asked last: the others are cheaper
            if marker is not None and why is not None:
                if marker.kind == "framework" and not index.loops_of(loader):
                    continue  # accelerate/Fabric scripts prepare their loaders: only a loop seen here tells otherwise
                if not on_rank_path(ctx, index, loader, marker):
                    continue  # the file's DDP code is on another path: this one trains on one process
                where = marker.what if marker.kind == "override" else \
                    f"the file runs once per rank ({marker.what}, line {line_of(ctx, marker.node)})"
            else:
                trained = factory_trained(ctx, loader) if marker is None else None
                if trained is None:
                    continue
                why = why or "each epoch trains on every sample once per rank"
                where = f"`{trained[0]}` trains on the loader `{trained[2]}` returns, once per rank ({trained[1]})"
            if every_use_guarded(ctx, index, loader) or handed_to_framework(ctx, index, loader):
                continue
            yield self.report(
                loader.call,
                f"this DataLoader has no `DistributedSampler` although {where}: every rank iterates the whole "
                f"dataset, so {why}",
            )

