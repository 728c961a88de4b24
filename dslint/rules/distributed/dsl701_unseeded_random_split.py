"""DSL701: ``random_split`` on the global RNG where every rank (or every hook) draws its own split."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.distributed._common import per_rank_splits, stage_resplits
from dslint.semantics.distributed import line_of
from dslint.semantics.loops import loader_loops
from dslint.semantics.random_splits import random_splits, split_pairs
from dslint.semantics.sampler_seeds import per_rank_seeds


class UnseededRandomSplit(Rule):
    """
    ## What it does
    Flags `torch.utils.data.random_split(...)` without `generator=` in two forms:

    - **per rank**: the split runs once per process of a DDP job, because the
      file is the script each rank runs (it calls `init_process_group` or
      `deepspeed.initialize`, reads `LOCAL_RANK`/`RANK` from the launcher's
      environment, builds an `accelerate.Accelerator`, or calls a project
      function in any file that calls `init_process_group`) and nothing in it
      seeds the global RNG the same way on every rank; or because a DDP
      script of another file (it starts its distributed state as above) calls
      the split's function, up to four calls deep, and seeds the global RNG per
      rank only (`torch.manual_seed(args.seed + rank)`, or a project helper that
      adds the rank for what it is passed: `seed_all(seed, accelerator=acc)`
      with `seed += accelerator.process_index`); or because it sits in a
      method of a `LightningDataModule`/`LightningModule` (Lightning calls
      `setup`, the `*_dataloader` hooks and `__init__` on every rank) whose
      class stores a seed (`self.seed = seed`) that the split ignores;
    - **per-rank sampler seed**: a `DistributedSampler` that may shuffle, given a `seed` that names the rank
      (`seed=args.seed + rank`, or a name bound to `int(time.time()) * dist.get_rank()`): each rank draws its own
      permutation and takes its slice of it, so the slices overlap and other samples go unseen every epoch;
    - **two draws**: two unseeded splits of the same dataset (the same value, or the same constructor with the same
      arguments but transforms) with the same lengths, one keeping the training part and the other the validation
      part (typically one in `train_dataloader`, one in `val_dataloader`); or one split in the `setup` hook of a
      Lightning datamodule or module that keeps a test part on `self` (`self.data_test`) with no guard (no `if`
      around it, no early `return`): Lightning calls `setup` per stage, so `trainer.test` splits anew.

    ## Why is this bad?
    Without a generator, `random_split` draws the permutation from torch's global RNG, which every process seeds
    from the OS at start-up. Each rank therefore splits differently: measured with 2 gloo ranks and 64 samples split
    48/16, 11 of the 16 samples rank 0 validated on were training samples on rank 1 (22 of the 64 samples were
    validation on one rank and training on the other; the figure varies from run to run, it is 0 only with a shared
    seed). Validation accuracy is measured partly on training data, and no error is raised. Two separate draws in
    one process overlap the same way: each call consumes the RNG and permutes anew.

    ## Example
    ```python
    class MNISTData(LightningDataModule):
        def __init__(self, root, seed=42):
            super().__init__()
            self.root, self.seed = root, seed

        def setup(self, stage):
            full = MNIST(self.root, train=True)
            self.train, self.val = random_split(full, [55000, 5000])
    ```

    ## Use instead
    ```python
    class MNISTData(LightningDataModule):
        def __init__(self, root, seed=42):
            super().__init__()
            self.root, self.seed = root, seed

        def setup(self, stage):
            full = MNIST(self.root, train=True)
            generator = torch.Generator().manual_seed(self.seed)  # the same seed on every rank
            self.train, self.val = random_split(full, [55000, 5000], generator=generator)
    ```

    ## When it does not fire
    - `generator=` is passed (a fresh `torch.Generator()` starts from the same
      seed in every process), or hidden in `*args`/`**kwargs`;
    - the file seeds torch's global RNG with a seed that does not name the rank
      (`torch.manual_seed(args.seed)`, `seed_everything(42)`, a project helper
      calling them without what makes it add the rank, `utils.set_seed(...)`
      of a file not analysed, Lightning's CLI): every rank draws the same split;
    - a Lightning datamodule without a seed of its own (its training script, not seen, usually seeds), and a file
      that only shows DDP through a `DistributedDataParallel` wrapper or a `DistributedSampler`;
    - the split runs on one rank only (`if rank == 0:`), or in `prepare_data`;
    - files without any sign of a process group and outside Lightning hooks, and test code; a script of another
      file that seeds nothing (a helper it calls may seed), or seeds once without the rank (a seed-named function
      whose result is passed on, `start_seed=resolve_seed(cfg)`, returns a seed: it is not counted);
    - for a sampler seed: `shuffle=False`, or a seed varying only with the clock or a draw (maybe the same on all ranks);
    - for two draws: a seed set in the same function before each call, or calls over different datasets or
      lengths; a `setup` split under an `if` (the stage, or whether it was split already).
    """

    code = "DSL701"
    name = "unseeded-random-split"
    symptom = Symptom("dist_split", "samples one rank validates on are training samples on another rank")
    level = ERROR
    summary = "`random_split` without a seeded `generator` splits differently on every rank (or in every hook)"
    help = ("Pass `generator=torch.Generator().manual_seed(SEED)` with the same seed on every rank, or split once "
            "and keep both subsets")

    valid = (
        """
        import time
        import torch.distributed as dist
        from torch.utils.data import DistributedSampler
        def sampler(ds, args):
            rank = dist.get_rank()
            return (DistributedSampler(ds, rank=rank, seed=args.seed), DistributedSampler(ds, seed=int(time.time())),
                    DistributedSampler(ds, shuffle=False, seed=args.seed + rank))
        """,
        {
            "data.py": """
            from torch.utils.data import random_split
            def build(full):
                return random_split(full, [0.9, 0.1])
            """,
            "train.py": """
            import torch
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            from data import build
            def main(args, full):
                dist.init_process_group("nccl")
                torch.manual_seed(args.seed)  # the same seed on every rank
                train, val = build(full)
            """,
        },
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import random_split
        def main(ds):
            dist.init_process_group("gloo")
            g = torch.Generator().manual_seed(0)
            train, val = random_split(ds, [0.8, 0.2], generator=g)
        """,
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import random_split
        def main(args, ds):
            dist.init_process_group("gloo")
            torch.manual_seed(args.seed)  # the same seed on every rank
            train, val = random_split(ds, [0.8, 0.2])
        """,
        """
        from torch.utils.data import random_split
        def main(ds):  # a single-process script: one split per run
            train, val = random_split(ds, [0.8, 0.2])
        """,
        """
        import torch.distributed as dist
        from torch.utils.data import random_split
        def main(ds):
            dist.init_process_group("gloo")
            if dist.get_rank() == 0:
                train, val = random_split(ds, [0.8, 0.2])
        """,
        """
        import pytorch_lightning as pl
        from torch.utils.data import random_split
        class Data(pl.LightningDataModule):
            def prepare_data(self):  # one process only
                self.parts = random_split(self.full, [0.9, 0.1])
        """,
        """
        import pytorch_lightning as pl
        from torch.utils.data import random_split
        class Data(pl.LightningDataModule):
            def setup(self, stage):  # the training script seeds (or not): not seen from here
                self.train, self.val = random_split(self.full, [0.9, 0.1])
        """,
        """
        import torch.distributed as dist
        from torch.utils.data import random_split
        from utils import set_seed
        def main(args, ds):
            dist.init_process_group("nccl")
            set_seed(args.seed)  # a helper of a file not analysed, named for what it does
            train, val = random_split(ds, [0.8, 0.2])
        """,
        """
        from torch.utils.data import random_split
        class Data:
            def train_data(self):
                return random_split(self.full, [9, 1])[0]
            def test_data(self):
                return random_split(self.other, [9, 1])[1]
        """,
    )
    invalid = (
        """
        import time
        import torch.distributed as dist
        from torch.utils.data import DistributedSampler
        def sampler(ds, base_seed):
            seed = int(time.time()) % (2**31) * dist.get_rank()
            first = DistributedSampler(ds, shuffle=True, seed=seed)  # expect: DSL701
            return first, DistributedSampler(ds, seed=base_seed + dist.get_rank())  # expect: DSL701
        """,
        {
            "data.py": """
            from torch.utils.data import random_split
            def build(full):
                return random_split(full, [0.9, 0.1])  # expect: DSL701
            """,
            "train.py": """
            import torch
            import torch.distributed as dist
            from torch.utils.data import DataLoader
            from data import build
            def main(args, full):
                dist.init_process_group("nccl")
                torch.manual_seed(args.seed + dist.get_rank())  # a different seed per rank
                train, val = build(full)
            """,
        },
        """
        import torch.distributed as dist
        from torch.utils.data import random_split
        def setup_ddp():
            dist.init_process_group("nccl")
        def main(ds):
            setup_ddp()
            train, val = random_split(ds, [0.8, 0.2])  # expect: DSL701
        """,
        """
        import os
        import torch
        from torch.utils.data import random_split
        def main(args, ds):
            rank = int(os.environ["RANK"])
            torch.manual_seed(args.seed + rank)  # a different seed per rank
            train, val = random_split(ds, [0.8, 0.2])  # expect: DSL701
        """,
        """
        from lightning.pytorch import LightningDataModule
        from torch.utils.data import random_split
        class Data(LightningDataModule):
            def __init__(self, full, seed: int = 42):
                super().__init__()
                self.full = full
                self.seed = seed
            def setup(self, stage):
                self.train, self.val = random_split(self.full, [55000, 5000])  # expect: DSL701
        """,
        {
            "base.py": """
            import pytorch_lightning as pl
            class Base(pl.LightningDataModule):
                pass
            """,
            "data.py": """
            from torch.utils.data import random_split
            from base import Base
            class Data(Base):
                def __init__(self, full, split_seed=0):
                    super().__init__()
                    self.full, self.split_seed = full, split_seed
                def setup(self, stage=None):
                    parts = random_split(self.full, [0.9, 0.1])  # expect: DSL701
                    self.train, self.val = parts
            """,
        },
        """
        from torchvision.datasets import MNIST
        from torch.utils.data import DataLoader, random_split
        class Data:
            def train_loader(self):
                full = MNIST(self.root, train=True, transform=self.train_tf)
                part, _ = random_split(full, [len(full) - self.n_val, self.n_val])  # expect: DSL701
                return DataLoader(part, shuffle=True)
            def val_loader(self):
                full = MNIST(self.root, train=True, transform=self.val_tf)
                _, part = random_split(full, [len(full) - self.n_val, self.n_val])
                return DataLoader(part)
        """,
    )

    def check(self, ctx):
        calls, reported = random_splits(ctx), set()
        index = loader_loops(ctx) if calls else None
        for first, second, kept in split_pairs(ctx, index, calls) if calls else ():
            reported.update((id(first), id(second)))
            yield self.report(first, f"this `random_split` and the one at line {line_of(ctx, second)} split the same "
                              f"dataset with two separate draws of torch's global RNG: the {kept[0]} part kept here "
                              f"and the {kept[1]} part kept there overlap, so samples are validated on that were also "
                              "trained on")
        for call, message in per_rank_splits(ctx, index, calls, reported) if calls else ():
            reported.add(id(call))
            yield self.report(call, message)
        for call, seed in per_rank_seeds(ctx, index or loader_loops(ctx)):
            yield self.report(call, f"this `DistributedSampler` shuffles with a seed that names the rank "
                              f"(`{ctx.code(seed).strip()}`): each rank draws its own permutation and takes its slice "
                              "of it, so the slices overlap and other samples are seen by no rank in an epoch; the "
                              "seed must be the same on every rank")
        for call in stage_resplits(ctx, calls, reported):
            yield self.report(call, "Lightning calls `setup` once per stage (fit, validate, test, predict) and this "
                              "unguarded `random_split` keeps a new draw of torch's global RNG each time: the part "
                              "`trainer.test` holds out after `trainer.fit` is not the one fit held out, so it "
                              "tests on samples it trained on")
