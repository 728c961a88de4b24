"""DSL703: an iterable stream under DDP that is split by worker (or by nothing) but not by rank."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.distributed._common import every_use_guarded, handed_to_framework, hf_stream, rank_blind_stream, stream_classes
from dslint.semantics.distributed import ddp_marker, line_of, rank_dependent
from dslint.semantics.loops import is_test_code, loader_loops
from dslint.semantics.project import ITERABLE


class IterableWithoutRankSharding(Rule):
    """
    ## What it does
    Flags a `DataLoader`, in a file that runs once per rank under DDP (it calls
    `init_process_group`, wraps a model in `DistributedDataParallel`, reads
    `LOCAL_RANK`/`RANK` from the launcher's environment, or calls a project
    function in any file that calls `init_process_group`), over a stream that
    no rank takes a share of:

    - an `IterableDataset` class of this file that splits its stream by
      DataLoader worker (`torch.utils.data.get_worker_info()`, also in a helper
      of any file) but never names a rank or a world size (no `get_rank()`,
      `rank`/`world_size`/`num_replicas` attribute or argument, no launcher
      environment read);
    - a Hugging Face streaming dataset (`load_dataset(..., streaming=True)`,
      also when `streaming=` only can be True, or `.to_iterable_dataset()`,
      through `.map`/`.filter`/`.shuffle`/column edits) that is never passed
      through `datasets.distributed.split_dataset_by_node` or `.shard(...)`.

    A stream that splits by nothing at all is DSL303's (the worker axis): this
    rule only takes the streams that already split by worker, so one defect
    gives one finding.

    ## Why is this bad?
    A `DistributedSampler` cannot be used with an `IterableDataset`: each rank
    iterates its own copy of the stream, and unless the stream itself skips
    what other ranks take, every rank yields the same samples. Measured with 2
    gloo ranks, a stream of 64 samples split by worker (2 workers per rank):
    each rank received all 64, so 64 samples were trained on twice per epoch
    (0 with the rank in the split). An N-GPU run trains N times on the same
    data while reporting N times the throughput.

    ## Example
    ```python
    class Shards(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            k, n = (info.id, info.num_workers) if info else (0, 1)
            for path in self.files[k::n]:
                yield from read(path)
    ```

    ## Use instead
    ```python
    class Shards(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            k, n = (info.id, info.num_workers) if info else (0, 1)
            rank, world = dist.get_rank(), dist.get_world_size()
            for path in self.files[rank * n + k :: world * n]:
                yield from read(path)
    ```
    For Hugging Face streams: `split_dataset_by_node(ds, rank=rank, world_size=world_size)`.

    ## When it does not fire
    - the class, or the expression that builds the dataset, names a rank or a
      world size anywhere (`Shards(files[rank::world])`), or has a base class
      whose code is not known here (a library stream may split by node
      itself), or is defined in another file;
    - `streaming=` cannot be True, or a path goes through
      `split_dataset_by_node`/`.shard(...)`;
    - the loader is prepared by `accelerate`/Fabric (which shard iterable
      loaders), or used on one rank only; files without a sign of a process
      group; test code.

    Possible and unknown values: `streaming=` counts when it *can* be True
    (`True if flag else False`, an argparse default); a value nothing in the
    project shows (a parameter nobody passes) stays silent.
    """

    code = "DSL703"
    name = "iterable-without-rank-sharding"
    symptom = Symptom("dist_stream", "every rank yields the same samples of the stream")
    level = ERROR
    summary = "An iterable stream under DDP is not split by rank, so every rank yields the same samples"
    help = ("Split the stream by rank as well as by worker (`rank * num_workers + worker_id` of "
            "`world_size * num_workers`), or use `datasets.distributed.split_dataset_by_node` for Hugging Face streams")

    valid = (
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, IterableDataset, get_worker_info

        class Shards(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                info = get_worker_info()
                k, n = (info.id, info.num_workers) if info else (0, 1)
                rank, world = dist.get_rank(), dist.get_world_size()
                yield from self.files[rank * n + k :: world * n]

        def main(files):
            dist.init_process_group("nccl")
            loader = DataLoader(Shards(files), num_workers=4)
        """,
        """
        import torch.distributed as dist
        from datasets import load_dataset
        from datasets.distributed import split_dataset_by_node
        from torch.utils.data import DataLoader

        def main():
            dist.init_process_group("nccl")
            ds = load_dataset("c4", split="train", streaming=True)
            ds = split_dataset_by_node(ds, rank=dist.get_rank(), world_size=dist.get_world_size())
            loader = DataLoader(ds, batch_size=8)
        """,
        """
        from torch.utils.data import DataLoader, IterableDataset, get_worker_info

        class Shards(IterableDataset):
            def __iter__(self):
                info = get_worker_info()
                yield from self.files[info.id :: info.num_workers]

        loader = DataLoader(Shards(), num_workers=4)  # one process: no ranks
        """,
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, IterableDataset, get_worker_info

        class Shards(IterableDataset):
            def __init__(self, files):
                self.files = files
                self.rank, self.world_size = dist.get_rank(), dist.get_world_size()  # read in the main process

            def __iter__(self):
                info = get_worker_info()
                n = self.world_size * info.num_workers
                yield from self.files[self.rank * info.num_workers + info.id :: n]

        def main(files):
            dist.init_process_group("nccl")
            loader = DataLoader(Shards(files), num_workers=4)
        """,
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, IterableDataset, get_worker_info

        class Shards(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                info = get_worker_info()
                yield from self.files[info.id :: info.num_workers]

        def main(files):
            dist.init_process_group("nccl")
            rank, world = dist.get_rank(), dist.get_world_size()
            loader = DataLoader(Shards(files[rank::world]), num_workers=4)
        """,
        """
        import torch.distributed as dist
        from datasets import load_dataset
        from torch.utils.data import DataLoader

        def main():
            dist.init_process_group("nccl")
            ds = load_dataset("imdb", split="train")  # map-style: not a stream
            loader = DataLoader(ds, batch_size=8)
        """,
    )
    invalid = (
        """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, IterableDataset, get_worker_info

        class Shards(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                info = get_worker_info()
                k, n = (info.id, info.num_workers) if info else (0, 1)
                for path in self.files[k::n]:
                    yield path

        def main(files):
            dist.init_process_group("nccl")
            loader = DataLoader(Shards(files), batch_size=8, num_workers=4)  # expect: DSL703
        """,
        """
        import os
        from datasets import load_dataset
        from torch.utils.data import DataLoader

        def main(stream):
            ddp = int(os.environ.get("RANK", -1)) != -1
            ds = load_dataset("org/galaxies", split="train", streaming=(True if stream else False))
            ds = ds.map(preprocess).remove_columns("image")
            loader = iter(DataLoader(ds, batch_size=16))  # expect: DSL703
        """,
    )

    def check(self, ctx):
        if not ctx.dataloader_calls():
            return
        index = loader_loops(ctx)
        for loader in index.loaders:
            dataset = loader.bound.expr("dataset")
            if dataset is None or is_test_code(ctx, loader.call):
                continue
            found = self.unsplit_stream(ctx, index, dataset)
            if found is None or rank_dependent(ctx, index, dataset, shards=True):
                continue
            marker = ddp_marker(ctx)  # asked last: the other facts are cheaper and rarely all hold
            if marker is None or every_use_guarded(ctx, index, loader) or handed_to_framework(ctx, index, loader):
                continue
            where = f"the file runs once per rank ({marker.what}, line {line_of(ctx, marker.node)})"
            yield self.report(loader.call, found.replace("{where}", where) + ": every rank yields the same samples, so "
                              "each is processed once per rank (trained on world-size times per epoch)")

    @staticmethod
    def unsplit_stream(ctx, index, dataset):
        """The finding's first words when the dataset is a stream no rank takes a share of, else None."""
        stream = hf_stream(ctx, index, dataset)
        if stream is not None and stream[0] == "stream":
            return (f"this DataLoader iterates a Hugging Face streaming dataset (line {line_of(ctx, stream[1])}) that is "
                    "never split by node (`split_dataset_by_node`) while {where}")
        for cls in stream_classes(ctx, index, dataset):
            if ctx.class_kind(cls) == ITERABLE and rank_blind_stream(ctx, cls) is not None:
                return f"`{cls.name.value}` splits its stream by DataLoader worker but not by rank, and {{where}}"
        return None
