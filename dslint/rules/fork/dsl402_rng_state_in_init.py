"""DSL402 rng-state-in-init: a random generator created in a dataset's ``__init__`` and copied into every worker."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.fork._common import mixin_rngs, rng_message, rngs_in_init


class RngStateInInit(Rule):
    """
    ## What it does
    Flags a random generator object (`np.random.default_rng`, `np.random.RandomState`, `np.random.Generator`,
    `random.Random`, `torch.Generator`) that a dataset's `__init__` creates and keeps on `self`, when per-sample code
    draws from it and nothing in the project reseeds or replaces it per worker.

    The generator may be created directly, picked by a conditional (`rng if rng is not None else
    np.random.default_rng()`, `rng or random.Random()`), or returned by a factory of this file that `__init__` calls (a
    function or method whose every `return` hands back a new generator), or held in what a project function (any file,
    or a method of a held object of known class) returns: every `return` hands back a generator it creates or a class
    construction (capitalised, or picked by `getattr(module, name)`) given one (argument, local, `**d` entry), through
    returns and wrappers (`Compose([self.make(c) for c in cfg])`); the object is taken to draw from it. Methods
    `__init__` calls on `self` (at any depth, none called per sample or on another object) count as `__init__`; so do
    aliases (`self.gen = self.rng`). A base class that is not a dataset (a mixin, in any file) is reported at its
    creation when a dataset of the project runs its `__init__` (inherited, `super().__init__()`, `Base.__init__(self)`)
    and draws from the attribute per sample, no class of its MRO reassigning it (`self.rng = parent.rng` only shares a
    generator); or when a dataset's `__init__` keeps an instance of such a class (`self.t = Jitter()`) that per-sample
    code calls (`self.t(x)`) and nothing replaces.

    ## When it does not fire
    - Global RNG use (`np.random.rand()`, `random.random()`, `torch.rand()`): torch >= 1.9 reseeds them per worker;
      datasets of an evaluation split (`ValidationDataset`, `TestSet`): the same draws keep evaluation reproducible.
    - A generator reseeded per worker, per epoch or per index: `get_worker_info()`/`os.getpid()` in the dataset, a
      `worker_init_fn` or another method (`set_epoch`; `__setstate__` only with spawn/forkserver) that reassigns it, `self.rng.seed(self.seed + i)`.
    - A generator handed to a plain function (it may use it up and return data), a factory that may return anything
      else, generators given to torch's samplers and loaders (they draw in the main process), and one drawn only once a
      sample failed (a replacement index after `if data is not None: return data`, or in an `except`).

    ## Why is this bad?
    torch reseeds only the global generators in each worker. A generator *object* made in `__init__` is copied into
    every forked worker with the same state: all workers draw the same numbers, and every epoch again (workers restart
    from the parent's copy). Measured on torch 2.13, 2 workers, 64 samples: 32 of 64 augmentations duplicated per epoch,
    64 of 64 equal to the previous epoch's; with `persistent_workers=True` duplicates remain (epochs differ).

    ## Example
    ```python
    class Augmented(Dataset):
        def __init__(self, data, seed=0):
            self.data = data
            self.rng = np.random.default_rng(seed)

        def __getitem__(self, i):
            return self.data[i] + self.rng.normal(size=self.data[i].shape)
    ```

    ## Use instead
    ```python
    class Augmented(Dataset):
        def __init__(self, data):
            self.data = data

        def __getitem__(self, i):
            # the global RNGs are reseeded per worker and per epoch by torch
            return self.data[i] + np.random.normal(size=self.data[i].shape)
    ```
    or create the generator in each worker from `get_worker_info().seed`.

    ## References
    - PyTorch docs, "Randomness in multi-process data loading"; pytorch/pytorch#5059, PR#56488
    """

    code = "DSL402"
    name = "rng-state-in-init"
    symptom = Symptom("rng", "random draws duplicated across workers and repeated every epoch")
    level = ERROR
    summary = "A random generator created in a dataset's `__init__` gives every worker the same random stream"
    help = "Draw from the global `np.random`/`random`/`torch` RNGs (torch reseeds them per worker and epoch), or create the generator in the worker from `torch.utils.data.get_worker_info().seed`"  # noqa: E501

    valid = (
        """
        import numpy as np
        import torch
        from torch.utils.data import Dataset, RandomSampler, get_worker_info
        class GlobalRng(Dataset):
            def __getitem__(self, i): return np.random.rand()  # reseeded per worker since torch 1.9
        class Reseeded(Dataset):
            def __init__(self): self.rng = np.random.default_rng(0)
            def __getitem__(self, i):
                info = get_worker_info()
                if info is not None and not getattr(self, "_seeded", False):
                    self.rng = np.random.default_rng(info.seed)
                    self._seeded = True
                return self.rng.random()
        class PerIndex(Dataset):
            def __init__(self, seed):
                self.seed = seed
                self.rng = np.random.RandomState(seed)
            def __getitem__(self, i):
                self.rng.seed(self.seed + i)  # deterministic per index
                return self.rng.rand()
        def make_state(seed):
            if seed is None:
                return None
            return np.random.RandomState(seed)
        class MaybeFactory(Dataset):
            def __init__(self, seed=None): self.rng = make_state(seed)  # may return None: not followed
            def __getitem__(self, i): return self.rng.rand() if self.rng else i
        class Epochs(Dataset):
            def __init__(self): self.rng = np.random.default_rng(0)
            def set_epoch(self, epoch): self.rng = np.random.default_rng(epoch)
            def __getitem__(self, i): return self.rng.random()
        class Seeded(Dataset):
            def __init__(self, seed):
                self.reseed(seed)
            def reseed(self, seed):  # also run by another method: not construction only
                self.rng = np.random.default_rng(seed)
            def set_epoch(self, epoch):
                self.reseed(epoch)
            def __getitem__(self, i): return self.rng.random()
        def shuffle(items, rng): return [items[k] for k in rng.permutation(len(items))]
        def shuffled(items): return shuffle(items, np.random.RandomState(0))  # a function uses the generator up
        def order(items): return RandomSampler(items, generator=torch.Generator())
        class Items(Dataset):
            def __init__(self, items):
                self.items = shuffled(items)  # data, not an object holding the generator
                self.order = order(items)  # a sampler: it draws in the main process
            def __getitem__(self, i): return self.items[i] + len(self.order)
        """,
        """
        import random
        import torch
        from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info
        class Jitter(Dataset):
            def __init__(self): self.rng = random.Random(0)
            def __getitem__(self, i): return self.rng.random()
        def worker_init_fn(worker_id):
            torch.utils.data.get_worker_info().dataset.rng.seed(torch.initial_seed())
        loader = DataLoader(Jitter(), num_workers=2, worker_init_fn=worker_init_fn)
        class Shuffled(IterableDataset):
            def __init__(self, items, seed):
                self.items = items
                self.g = torch.Generator().manual_seed(seed)
            def __iter__(self):
                order = torch.randperm(len(self.items), generator=self.g)  # once per epoch, same in all workers
                info = get_worker_info()
                for k in order[info.id :: info.num_workers]:
                    yield self.items[k]
        """,
        {
            "seeding.py": """
                import numpy as np
                class Seedable:  # a mixin, not a dataset
                    def __init__(self, seed=None): self.rng = np.random.default_rng(seed)
                """,
            "noise.py": """
                import numpy as np
                from torch.utils.data import Dataset, get_worker_info
                from seeding import Seedable
                class Noise(Dataset, Seedable):
                    def __getitem__(self, i): return self.rng.normal()
                def reseed(worker_id):  # a worker_init_fn: each worker replaces the inherited copy
                    info = get_worker_info()
                    info.dataset.rng = np.random.default_rng(info.seed)
                """,
            "aug.py": """
                import random
                from torch.utils.data import Dataset, get_worker_info
                class Jitter:  # a transform the dataset holds
                    def __init__(self, seed=0): self.gen = random.Random(seed)
                    def __call__(self, x): return x + self.gen.random()
                class Items(Dataset):
                    def __init__(self): self.jitter = Jitter()
                    def __getitem__(self, i): return self.jitter(i)
                def worker_init_fn(worker_id):  # each worker makes its own transform
                    get_worker_info().dataset.jitter = Jitter(get_worker_info().seed)
                """,
        },
    )
    invalid = (
        """
        import numpy as np
        import torch
        from torch.utils.data import Dataset, IterableDataset
        class Seeded(Dataset):
            def __init__(self, seed=None):
                self._setup(seed)
            def _setup(self, seed):
                self.np_rng = np.random.default_rng(seed)  # expect: DSL402
                self.random_generator = self.np_rng
            def __getitem__(self, i): return self.random_generator.random()
        class Augmented(Dataset):
            def __init__(self, data, seed=0):
                self.data = data
                self.rng = np.random.default_rng(seed)  # expect: DSL402
            def __getitem__(self, i): return self.data[i] + self.rng.normal()
        class Noisy(IterableDataset):
            def __init__(self, n):
                self.n = n
                self.g = torch.Generator().manual_seed(1)  # expect: DSL402
            def __iter__(self):
                for i in range(self.n):
                    yield torch.randn(3, generator=self.g)
        def make_state(seed): return np.random.RandomState(seed)
        class Factory(Dataset):
            def __init__(self, seed=0, rng=None):
                self.state = make_state(seed)  # expect: DSL402
                self.rng = rng if rng is not None else np.random.default_rng(seed)  # expect: DSL402
                self.other = self._make(seed)  # expect: DSL402
            def _make(self, seed):
                generator = np.random.default_rng(seed)
                return generator
            def __getitem__(self, i): return self.state.rand() + self.rng.random() + self.other.random()
        """,
        """
        from numpy.random import default_rng
        import random as r
        import torch.utils.data as tud
        class Two(tud.Dataset):
            def __init__(self):
                self.np_rng = default_rng()  # expect: DSL402
                self.py_rng = r.Random(0)  # expect: DSL402
            def __getitem__(self, i): return self.augment(i)
            def augment(self, i): return i + self.np_rng.random() + self.py_rng.random()
        """,
        {
            "base.py": """
                from torch.utils.data import Dataset
                class Base(Dataset):
                    def __getitem__(self, i): return self.transform(i)
                """,
            "aug.py": """
                import numpy.random as npr
                from base import Base
                class Aug(Base):
                    def __init__(self):
                        self.state = npr.RandomState(0)  # expect: DSL402
                    def transform(self, i): return i * self.state.uniform()
                """,
        },
        {
            "seeding.py": """
                import numpy as np
                class Seedable:  # a mixin, not a dataset
                    def __init__(self, seed=None, rng=None):
                        self.reset(seed, rng)
                    def reset(self, seed, rng):
                        self.rng = rng if rng is not None else np.random.default_rng(seed)  # expect: DSL402
                    def share(self, parent):
                        self.rng = parent.rng  # shares another object's generator: no new one
                """,
            "noise.py": """
                from torch.utils.data import Dataset
                from seeding import Seedable
                class Noise(Dataset, Seedable):
                    def __init__(self, n, **kwargs):
                        super().__init__(**kwargs)
                    def __getitem__(self, i): return self.rng.normal()
                """,
            "aug.py": """
                import random
                from torch.utils.data import Dataset
                class Jitter:  # a transform the dataset holds and calls per sample
                    def __init__(self):
                        self.gen = random.Random(0)  # expect: DSL402
                    def __call__(self, x): return x + self.gen.random()
                class Items(Dataset):
                    def __init__(self): self.jitter = Jitter()
                    def __getitem__(self, i): return self.jitter(i)
                """,
        },
        {
            "augs.py": """
                import importlib
                import numpy as np
                from torchvision.transforms import Compose
                class Flip:
                    def __init__(self, random_state, **kwargs): self.random_state = random_state
                    def __call__(self, x): return x[::-1] if self.random_state.rand() < 0.5 else x
                class Builder:  # the augmentations a config names, each given its own RandomState
                    def pick(self, name): return getattr(importlib.import_module("augs"), name)
                    def one(self, name):
                        params = {"p": 0.5, "random_state": np.random.RandomState(0)}
                        cls = self.pick(name)
                        return cls(**params)
                    def build(self, names): return Compose([self.one(n) for n in names])
                def make_builder(cfg): return Builder()
                """,
            "data.py": """
                from torch.utils.data import Dataset
                from augs import make_builder
                class Volumes(Dataset):
                    def __init__(self, items, cfg):
                        self.builder = make_builder(cfg)
                        self.augment = self.builder.build(cfg["augs"])  # expect: DSL402
                    def __getitem__(self, i): return self.augment(i)
                """,
        },
    )
    def check(self, ctx):
        for call, attr, heirs in (*rngs_in_init(ctx), *mixin_rngs(ctx)):
            yield self.report(call, rng_message(ctx, call, attr, heirs))
