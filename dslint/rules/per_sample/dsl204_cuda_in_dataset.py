"""DSL204 cuda-in-dataset: CUDA is used in dataset code or a ``collate_fn``, which run
in forked DataLoader workers (CUDA use and where code runs: ``dslint.semantics.cuda``)."""

from __future__ import annotations

from dslint.rules.base import ERROR, WARNING, Rule, Symptom
from dslint.rules.per_sample._common import KEPT_CUDA_INVALID, OBJECT_COLLATE_INVALID, OBJECT_COLLATE_VALID, \
    PINNED_BATCH_VALID, TEMPORARY_CUDA_VALID, cuda_message, cuda_sites


class CudaInDataset(Rule):
    """
    ## What it does
    Flags CUDA work in code that runs in DataLoader worker processes: `.cuda()`,
    `.to("cuda")`/`.to(torch.device("cuda"))`, a `device="cuda"` argument,
    `torch.cuda.*` calls that initialise CUDA, and `.pin_memory()`, inside
    per-sample dataset code (`__getitem__`, `__iter__` and what they call), in a
    function used as a DataLoader's `collate_fn`, and (at warning level) in a
    dataset's `__init__` when the CUDA data stays on the dataset: stored on
    `self` (also in a container it keeps, or a model moved in place there) or
    returned, directly or through local names.

    A `collate_fn` is a function a DataLoader in any file is given by name or
    as a bound method (`collate_fn=self.collate`, found along the class's
    bases), or one code installs on a loader it was handed (`loader.collate_fn
    = self.collate`: its worker count is the caller's, so it may be > 0; the
    object's own `self.collate_fn = ...` does not count). A method of another
    object counts when its class is known (`collate_fn=data.batch` for a
    parameter `data: Records`, `data = Records(...)`, or a parameter a call
    passes `Records(...)` at; also in a DataLoader subclass's
    `super().__init__`): the object may be any subclass, so each subclass's
    override runs as the collate, and so do the methods it calls on `self`
    (a base's wrapper calling the subclasses' `self.pack(...)`).

    ## When it does not fire
    `torch.cuda.is_available()`, `device_count()`, `manual_seed*()` and the other queries that
    do not initialise CUDA; device values nothing in the project shows (unknown is not wrong);
    a device that can be CUDA handed on to `super().__init__` or a project class (where it is
    used is reported); datasets or collate functions whose every DataLoader has
    `num_workers=0`, and projects none of whose loaders can start workers (no file names a
    worker count, `num_workers` or `dataloader_num_workers`, other than as `num_workers=0`, nor
    spreads a `**` dict into a DataLoader; a project that builds no DataLoader at all is a
    library whose users' loaders are not seen, and does not count); test code (`tests/`, `test_*.py`),
    whose CUDA datasets are there to exercise CUDA in workers (under `spawn`); and projects whose every
    `multiprocessing.set_start_method` (torch's too) sets `spawn`/`forkserver` (no forks). Nor on CUDA work in `__init__`
    whose result the dataset does not keep: brought back with `.cpu()`/`.numpy()`/`.item()` (also through a
    local name bound again first: `x = x.cuda()`, then `x = f(x).cpu()`), turned into a number, a model used
    there and deleted, or a tensor handed to a project class whose `__init__` keeps only what it makes from it, or stores in an attribute no other
    method of the class, its bases or subclasses (any file) reads, nor may (`f(self)`, a library
    base): `self.class_weights = w.cuda()` for the script's loss. Nor on a helper's device
    parameter whose every per-sample call (in any file) passes it: its `"cuda"` default, or the
    `DEVICE` of `device or DEVICE`, is then never used in the workers (calls from the main
    process do not count). Nor on code under a dataset option (`if self.vis:`, or a helper's
    `if vis:` handed `self.vis`) that `__init__` keeps from a parameter defaulting to
    `False`/`None`/`0` when every construction a DataLoader receives (or a project function
    that may build one is given) leaves it out: a demo that turns it on and indexes the
    dataset itself runs it in the main process.

    A model that a method of the dataset stores on such a device
    (`self.net = build().cuda()`), or that a construction hands to the
    `__init__` that keeps it (`Features(items, encoder.cuda())`), is reported
    where per-sample code runs it (`self.net(x)`, `self.net.encode(x)`).

    A device that *can* be CUDA counts: `"cuda" if torch.cuda.is_available()
    else "cpu"`, `self.device` when a method stores such a value (or a
    parameter whose default, or an argument this file passes, is `"cuda"`, or
    a parameter the function rebinds to such a value: `if device is None:
    device = "cuda" if torch.cuda.is_available() else "cpu"`), and an argparse
    option whose default is `"cuda"`. So does an `__init__` parameter, or
    `self.device` kept by an `__init__` (of the class or a base of another
    file, through `super().__init__(..., device=device)`), when a construction
    in the project passes such a device (`Lines(items, device=torch.device(
    "cuda" if ... else "cpu"))`, `args.device` of an option whose default is
    `"cuda"`), and a parameter of a function that a `functools.partial(f,
    device="cuda")` (or a collate lambda `lambda b: f(b, "cuda")`) binds.

    ## Why is this bad?
    DataLoader workers are forked from the main process (the Linux default).
    Once the main process has initialised CUDA (the model is on the GPU, or a
    previous epoch moved a batch there), CUDA work in a forked worker fails with
    `RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA
    with multiprocessing, you must use the 'spawn' start method`
    (torch/cuda/__init__.py). With `spawn` each worker creates its own CUDA
    context (hundreds of MiB of GPU memory each) and the batches are sent back
    through CUDA IPC. A dataset that moves data to the GPU in `__init__`
    initialises CUDA in the main process before the workers fork, and its CUDA
    tensors cannot be used in them. (GPU only: a CPU-only torch fails earlier
    with `AssertionError: Torch not compiled with CUDA enabled`.)

    ## Example
    ```python
    class Features(Dataset):
        def __getitem__(self, idx):
            return self.data[idx].cuda()

    loader = DataLoader(Features(), batch_size=32, num_workers=4)
    ```

    ## Use instead
    ```python
    class Features(Dataset):
        def __getitem__(self, idx):
            return self.data[idx]

    loader = DataLoader(Features(), batch_size=32, num_workers=4, pin_memory=True)
    for batch in loader:
        batch = batch.cuda(non_blocking=True)
    ```

    ## References
    - [evidence: MP-1](../docs/evidence.md#mp-1)
    - pytorch/pytorch#40403, #2971, #77159
    - PyTorch docs, "Multiprocessing best practices": CUDA in subprocesses
    """

    code = "DSL204"
    name = "cuda-in-dataset"
    symptom = Symptom("cuda_fork", "Cannot re-initialize CUDA in forked subprocess (fork workers after CUDA init)", gpu=True)
    level = ERROR
    summary = "CUDA is used in dataset code or a `collate_fn`, which run in forked DataLoader workers"
    help = (
        "Return CPU tensors from the dataset and move each batch to the GPU in the training loop "
        "(`pin_memory=True` + `.cuda(non_blocking=True)`)"
    )

    valid = (
        # queries that do not initialise CUDA; unknown or CPU-only devices; CPU code
        """
        import torch
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, device, cpu="cpu"):
                self.device = device
                self.cpu = cpu
                self.use_cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0

            def __getitem__(self, idx):
                torch.cuda.manual_seed(idx)
                x = torch.zeros(3, device="cpu")
                return x.to(self.device), x.to(torch.float16), x.to(self.cpu)
        """,
        # the training loop moves batches; non-dataset code; loaders that never fork workers
        """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class D(Dataset):
            def __getitem__(self, idx):
                return self.data[idx].cuda()

        def collate(batch):
            return torch.stack(batch).to("cuda")

        def train(model, ds):
            loader = DataLoader(D(), batch_size=4, num_workers=0)
            other = DataLoader(ds, collate_fn=collate)
            for batch in loader:
                model(batch.cuda(non_blocking=True))
        """,
        # pinning or CUDA setup in __init__ (main process) without CUDA data
        """
        import torch
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, data):
                torch.cuda.set_device(0)
                self.data = torch.as_tensor(data).pin_memory()
                self.cpu = torch.as_tensor(data).to("cpu")

            def __getitem__(self, idx):
                return self.data[idx]
        """,
        PINNED_BATCH_VALID,
        # a bound-method collate: unknown device, a loader without workers, the object's own attribute
        """
        import torch
        from torch.utils.data import DataLoader

        class Trainer:
            def __init__(self, device=None):
                self.device = device
                self.collate_fn = self.collate
            def collate(self, batch):
                return torch.stack(batch).to(self.device)
            def gpu_collate(self, batch):
                return torch.stack(batch).cuda()
            def loaders(self, ds, old):
                old.collate_fn = self.collate
                return DataLoader(ds, collate_fn=self.gpu_collate, num_workers=0)
        """,
        OBJECT_COLLATE_VALID, TEMPORARY_CUDA_VALID,
    )
    invalid = (
        # collates given as bound methods, or installed on a loader the caller built
        """
        import torch
        from torch.utils.data import DataLoader

        class Trainer:
            def __init__(self, device=None):
                if device is None:
                    device = "cuda" if torch.cuda.is_available() else "cpu"
                self.target = torch.device(device)
            def collate(self, batch):
                return torch.stack(batch).to(self.target)  # expect: DSL204
            def gpu_collate(self, batch):
                return torch.stack(batch).cuda()  # expect: DSL204
            def fit(self, ds, loaders):
                for loader in loaders:
                    loader.collate_fn = self.collate
                return DataLoader(ds, collate_fn=self.gpu_collate, num_workers=4)
        """,
        """
        import torch
        from torch.utils.data import Dataset

        DEVICE = torch.device("cuda")

        class D(Dataset):
            def __init__(self, data):
                self.data = torch.as_tensor(data).cuda()  # expect: DSL204
            def __getitem__(self, idx):
                x = self.data[idx].to("cuda:0", non_blocking=True)  # expect: DSL204
                y = torch.zeros(3, device="cuda")  # expect: DSL204
                z = x.to(DEVICE)  # expect: DSL204
                torch.cuda.synchronize()  # expect: DSL204
                return x.pin_memory(), y, z  # expect: DSL204
        """,
        # collate_fn in another file, an iterable dataset, a lazily built CUDA model
        {
            "collate.py": """
                import torch

                def to_gpu(batch):
                    return torch.stack(batch).cuda()  # expect: DSL204
            """,
            "train.py": """
                import torch
                import torch.utils.data as tud
                from collate import to_gpu

                class Stream(tud.IterableDataset):
                    def __iter__(self):
                        for x in self.items:
                            yield torch.tensor(x, device=torch.device("cuda"))  # expect: DSL204

                loader = tud.DataLoader(Stream(), collate_fn=to_gpu, num_workers=4)
                fast = tud.DataLoader(Stream(), collate_fn=lambda b: [x.cuda() for x in b], num_workers=2)  # expect: DSL204
            """,
        },
        # a device that can be CUDA: a conditional, a parameter's default, through self
        """
        import torch
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, data, device="cuda"):
                self.data = data
                self.device = device
                self.gpu = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            def __getitem__(self, idx):
                x = self.data[idx].to(self.device)  # expect: DSL204
                return x, torch.ones(2, device=self.gpu)  # expect: DSL204

        class Features(Dataset):
            def __init__(self, build, items):
                self.items = items
                self.net = build().eval().to(torch.device("cuda"))  # expect: DSL204
                self.cpu_net = build()
            def __getitem__(self, idx):
                with torch.no_grad():
                    return self.net.encode(self.items[idx]), self.cpu_net(self.items[idx])  # expect: DSL204
        """,
        # __getitem__ in a base class file, the CUDA helper in the subclass file
        {
            "base.py": """
                from torch.utils.data import Dataset

                class Base(Dataset):
                    def __getitem__(self, idx):
                        return self.prepare(self.items[idx])
            """,
            "gpu.py": """
                from base import Base

                class Gpu(Base):
                    def prepare(self, item):
                        if self.model is None:
                            self.model = self.build()
                        return item.to(device="cuda")  # expect: DSL204
            """,
        },
        OBJECT_COLLATE_INVALID, KEPT_CUDA_INVALID,
    )

    def check(self, ctx):
        for call, what, kind, where in cuda_sites(ctx):
            yield self.report(call, cuda_message(kind, what, where), level=WARNING if kind == "init" else ERROR)
