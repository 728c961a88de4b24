"""DSL403 worker-seed-from-worker-id: a ``worker_init_fn`` that seeds only from the worker id."""

from __future__ import annotations

from typing import Set

import libcst as cst

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.fork._common import function_target, seed_message
from dslint.semantics.seeding import (
    fixed_seedings, lambda_seedings, loader_persistence, loader_repeats, local_worker_init, positional_params, worker_invariant,
)
from dslint.semantics.worker_numpy import unseeded_numpy_loaders


class WorkerSeedFromWorkerId(Rule):
    """
    ## What it does
    Flags a function used as a DataLoader `worker_init_fn` (in this file or, through
    the project's DataLoader calls, in another one; also through a local or parameter the
    loader's function assigns it to: `if debug: init = debugging_init`, or `init =
    partial(seed_worker, seed=s) if s is not None else None`) that seeds an RNG
    (`np.random.seed`, `random.seed`, `torch.manual_seed`, a global
    `np.random.default_rng(...)`...) only from `worker_id`, constants and its other
    parameters (bound with `functools.partial` or by their defaults when the loader is built:
    `num_workers * rank + worker_id + seed`), not from `torch.initial_seed()` or
    `get_worker_info().seed`. The finding points at the first such seeding, where the seed is chosen.

    Also flagged, with or without `persistent_workers=True`: a `worker_init_fn`
    whose seed does not depend on the worker id at all - only on constants,
    its other parameters (bound with `functools.partial` or by their defaults,
    so fixed in the parent) and globals (`args.seed`; not when a value the code
    shows for one is `None`, which draws fresh entropy), e.g.
    `np.random.seed(rank + seed)`: every worker then draws the same numbers.

    ## When it does not fire
    - A seed that also depends on anything else: an epoch, an unknown value, or, beside the worker id, a
      global that is not a constant.
    - A `worker_init_fn` used only with `persistent_workers=True` (streams continue across epochs), also
      when that is the default of the loader builder's parameter (`def build(ds, seed, persistent_workers=True)`)
      and the builder never rebinds it.
    - The missing-`worker_init_fn` form (see Preview): on torch >= 1.9 (or no pin), in test code
      and test splits, on evaluation-only loaders, and over a dataset that reseeds numpy itself per sample (`np.random.seed(index)`).

    ## Preview
    With `--preview`, if the project pins or caps torch below 1.9 (`requirements*.txt`,
    `setup.py`/`.cfg`, `pyproject.toml`, conda `environment*.yml`; none asks >=1.9), also a
    DataLoader (or a project subclass leaving it to callers) with no `worker_init_fn` on any path,
    workers not 0 on every path (unknown: possibly more), whose dataset draws from numpy's global
    RNG (`np.random.rand`..., not a `Generator`) per sample: in its class, a project function it
    reaches, or a project function named like a callable it was handed (`self.augment(x)`). A
    dataset chosen at run time counts for a loader that may shuffle or samples, when a dataset class
    that draws is among those the loader's file names (defines or imports; any project class when it
    names none) and takes every keyword the construction passes (`data_dict[args.data](root=r, win=w)`).
    Off by default: a pin that old is mostly a stale declaration next to
    install notes for a newer torch, and on public repositories reviewers judged every such
    finding true but not worth a change.

    ## Why is this bad?
    torch already gives each worker its own seed, `base_seed + worker_id`, where
    `base_seed` is drawn anew every epoch. Reseeding from `worker_id` alone throws
    that away: each worker gets a different stream (no duplicates within an epoch),
    but the same worker gets the same stream every epoch. Measured on torch 2.13
    with 2 workers and `np.random.seed(worker_id)`: 0 duplicates within an epoch,
    and 64 of 64 random values identical from one epoch to the next, so every epoch
    sees the same augmentations.

    ## Example
    ```python
    def worker_init_fn(worker_id):
        np.random.seed(worker_id)

    loader = DataLoader(ds, num_workers=4, worker_init_fn=worker_init_fn)
    ```

    ## Use instead
    ```python
    def worker_init_fn(worker_id):
        np.random.seed(torch.initial_seed() % 2**32)  # differs per worker and per epoch
    ```

    ## References
    - PyTorch docs, "Reproducibility: DataLoader" (`seed_worker`)
    - pytorch/pytorch#5059; xingyizhou/CenterNet#233; torch 1.9 seeds numpy per worker
    """

    code = "DSL403"
    name = "worker-seed-from-worker-id"
    symptom = Symptom("rng", "identical random streams every epoch")
    level = ERROR
    summary = "A `worker_init_fn` seeds from `worker_id` only, so every epoch repeats the same random streams"
    help = "Seed from `torch.initial_seed() % 2**32` (or `get_worker_info().seed`), which torch varies per worker and per epoch"

    valid = (
        """
        import numpy as np
        import random
        import torch
        from torch.utils.data import DataLoader

        def seed_worker(worker_id):
            worker_seed = torch.initial_seed() % 2**32
            np.random.seed(worker_seed)
            random.seed(worker_seed)

        loader = DataLoader(ds, num_workers=2, worker_init_fn=seed_worker)
        """,
        """
        import numpy as np
        from torch.utils.data import DataLoader, get_worker_info

        def init(worker_id):
            np.random.seed(get_worker_info().seed % 2**32)

        loader = DataLoader(ds, num_workers=2, worker_init_fn=init)
        """,
        """
        from functools import partial
        import numpy as np
        from torch.utils.data import DataLoader

        def init(worker_id):
            np.random.seed(worker_id)

        loader = DataLoader(ds, num_workers=2, persistent_workers=True, worker_init_fn=init)

        def build(ds, workers, seed, persistent_workers=True):  # the builder's default keeps them
            init = partial(seeded, seed=seed)
            return DataLoader(ds, num_workers=workers, worker_init_fn=init, persistent_workers=persistent_workers)

        def seeded(worker_id, seed):
            np.random.seed(worker_id + seed)

        def build_plain(ds, workers, persistent_workers=True):
            return DataLoader(ds, num_workers=workers, worker_init_fn=lambda i: np.random.seed(i), persistent_workers=persistent_workers)
        """,
        """
        import numpy as np

        def not_a_worker_init_fn(worker_id):
            np.random.seed(worker_id)
        """,
        """
        import numpy as np
        from torch.utils.data import DataLoader

        def init(worker_id):
            np.random.seed(np.random.get_state()[1][0] + worker_id)

        loader = DataLoader(ds, num_workers=2, worker_init_fn=init)
        """,
        {"requirements.txt": "torch>=1.9\n", "a.py": """
            import numpy as np
            from torch.utils.data import DataLoader, Dataset
            class Jitter(Dataset):
                def __getitem__(self, i):
                    return np.random.rand(3)
            loader = DataLoader(Jitter(), shuffle=True, num_workers=4)  # torch>=1.9 seeds numpy itself
            """},
        {"environment.yml": "dependencies:\n  - pytorch=1.8.1\n", "a.py": """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader, Dataset
            class Own(Dataset):
                def __getitem__(self, i):
                    return np.random.default_rng(i).random(3)  # a Generator, not the global state
            class Jitter(Dataset):
                def __getitem__(self, i):
                    return np.random.rand(3)
            a = DataLoader(Own(), shuffle=True, num_workers=4)
            b = DataLoader(Jitter(), num_workers=4, worker_init_fn=lambda w: np.random.seed(torch.initial_seed() % 2**32))
            def predict(dataset, n):  # chosen at run time, not a training loader
                return DataLoader(dataset, shuffle=False, num_workers=n)
            """},
    )
    invalid = (
        """
        import numpy as np
        from torch.utils.data import DataLoader

        def worker_init_fn(worker_id):
            np.random.seed(worker_id)  # expect: DSL403

        loader = DataLoader(ds, batch_size=8, num_workers=4, worker_init_fn=worker_init_fn)
        """,
        """
        import random as rnd
        from numpy.random import seed as np_seed
        import torch
        import torch.utils.data as tud

        BASE = 1234

        def init_worker(wid):
            s = BASE + wid
            np_seed(s)  # expect: DSL403
            rnd.seed(s)
            torch.manual_seed(s)

        loader = tud.DataLoader(ds, num_workers=2, worker_init_fn=init_worker)
        """,
        {
            "utils/seeding.py": """
                import numpy as np

                def worker_init(worker_id):
                    np.random.seed(42 + worker_id)  # expect: DSL403
                """,
            "utils/__init__.py": "",
            "train.py": """
                from torch.utils.data import DataLoader
                from utils.seeding import worker_init
                loader = DataLoader(ds, num_workers=8, worker_init_fn=worker_init)
                """,
        },
        """
        import numpy as np
        from torch.utils.data import DataLoader, get_worker_info

        def init(worker_id):
            info = get_worker_info()
            info.dataset.rng = np.random.default_rng(info.id)  # expect: DSL403

        loader = DataLoader(ds, num_workers=2, worker_init_fn=init)
        """,
        """
        import random
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, num_workers=2, worker_init_fn=lambda i: random.seed(i))  # expect: DSL403
        """,
        """
        from functools import partial
        import numpy as np
        from torch.utils.data import DataLoader

        def init(worker_id, rank, seed):
            worker_seed = rank + seed
            np.random.seed(worker_seed)  # expect: DSL403

        loader = DataLoader(ds, num_workers=4, persistent_workers=True, worker_init_fn=partial(init, rank=0, seed=7))
        """,
        """
        import functools
        import numpy as np
        from torch.utils.data import DataLoader

        def init(worker_id, base_seed):
            np.random.seed(base_seed + worker_id)  # expect: DSL403 (base_seed: bound once, when the loader is built)

        def build(ds, seed=None):
            init_fn = functools.partial(init, base_seed=seed) if seed is not None else None
            return DataLoader(ds, num_workers=2, worker_init_fn=init_fn)
        """,
    )

    def check(self, ctx):
        reported: Set[int] = set()
        # functions of this file that a DataLoader anywhere in the project uses
        for func in ctx.nodes(cst.FunctionDef):
            if ctx.enclosing_function(func) is not None or ctx.method_class(func) is not None:
                continue
            params = positional_params(func)
            seedings = fixed_seedings(ctx, func, params[0]) if params else None
            if not seedings:
                continue
            same = worker_invariant(ctx, func, params[0], seedings)
            users = ctx.view.worker_init_loaders(ctx.qualname_of_def(func))
            if not users or not any(loader_repeats(facts, same) for facts in users):
                continue
            reported.add(id(func))
            yield self.report(seedings[0][1], seed_message(ctx, seedings, params[0], func, same))
        # lambdas and methods passed in this file
        for bound in ctx.dataloader_calls():
            arg = bound.arg("worker_init_fn")
            if arg is None:
                continue
            target = function_target(ctx, arg.value)
            func, offset = local_worker_init(ctx, target)
            if func is None or id(func) in reported:
                continue
            params = positional_params(func)
            if len(params) <= offset or isinstance(arg.value, cst.Call):
                continue  # (partial(...) of a lambda or method: arguments unknown)
            persistent = loader_persistence(ctx, bound)
            workers = ctx.value(bound, "num_workers")
            finder = lambda_seedings if isinstance(func, cst.Lambda) else fixed_seedings
            seedings = finder(ctx, func, params[offset])
            if not seedings:
                continue
            same = worker_invariant(ctx, func, params[offset], seedings)
            if not loader_repeats({"persistent_workers": persistent, "num_workers": workers}, same):
                continue
            reported.add(id(func))
            yield self.report(seedings[0][1], seed_message(ctx, seedings, params[offset], func, same))
        # torch < 1.9: no worker_init_fn at all, and the dataset draws from numpy's global RNG
        for call, message in unseeded_numpy_loaders(ctx) if self.preview_forms else ():
            yield self.report(call, message, end_node=call.func)
