"""DSL204 cuda-in-dataset: CUDA is used in dataset code or a ``collate_fn``, which run
in forked DataLoader workers (CUDA use and where code runs: ``dslint.semantics.cuda``)."""

from __future__ import annotations

from typing import Set

import libcst as cst

from dslint.rules.base import ERROR, WARNING, Rule, Symptom
from dslint.semantics.cuda import collate_lambdas, cuda_model_call, cuda_use, loading_context, may_touch_cuda
from dslint.semantics.loops import is_test_code

FORK_ERROR = (
    "`RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
    "you must use the 'spawn' start method`"
)


class CudaInDataset(Rule):
    """
    ## What it does
    Flags CUDA work in code that runs in DataLoader worker processes: `.cuda()`,
    `.to("cuda")`/`.to(torch.device("cuda"))`, a `device="cuda"` argument,
    `torch.cuda.*` calls that initialise CUDA, and `.pin_memory()`, inside
    per-sample dataset code (`__getitem__`, `__iter__` and what they call), in a
    function used as a DataLoader's `collate_fn`, and (at warning level) in a
    dataset's `__init__`.

    Not reported: `torch.cuda.is_available()`, `device_count()`,
    `manual_seed*()` and the other queries that do not initialise CUDA; device
    values nothing in the file shows (`.to(self.device)` for a `device`
    parameter without a default or a call: unknown is not wrong);
    datasets or collate functions whose every DataLoader has `num_workers=0`;
    and test code (a `tests/` directory, `test_*.py`), whose CUDA datasets are
    there to exercise CUDA in workers (under `spawn`).

    A model that a method of the dataset stores on such a device
    (`self.net = build().cuda()`) and that per-sample code runs
    (`self.net(x)`, `self.net.encode(x)`) is reported where it runs.

    A device that *can* be CUDA counts: `"cuda" if torch.cuda.is_available()
    else "cpu"`, `self.device` when a method stores such a value (or a
    parameter whose default, or an argument this file passes, is `"cuda"`), and
    an argparse option whose default is `"cuda"`.

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
        # a custom batch's pin_memory (called by the DataLoader's pin thread in the main process)
        """
        import torch
        from torch.utils.data import DataLoader

        class Batch:
            def __init__(self, data):
                self.inp = torch.stack(data)

            def pin_memory(self):
                self.inp = self.inp.pin_memory()
                return self

        def collate(batch):
            return Batch(batch)

        loader = DataLoader(list(range(8)), collate_fn=collate, num_workers=2, pin_memory=True)
        """,
    )
    invalid = (
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
    )

    def check(self, ctx):
        lambdas = collate_lambdas(ctx)
        cuda_imports = any(
            target.startswith("torch.cuda") for targets in ctx.names.imports.values() for target in targets
        )
        seen_statements: Set[int] = set()
        for call in ctx.nodes(cst.Call):
            what = cuda_use(ctx, call) if may_touch_cuda(call, cuda_imports) else None
            runs_model = what is None and isinstance(call.func, cst.Attribute) and ctx.is_per_sample(call)
            if runs_model:
                what = cuda_model_call(ctx, call)
            if what is None:
                continue
            context = loading_context(ctx, call, lambdas)
            if context is None or is_test_code(ctx, call) or (runs_model and context[0] != "sample"):
                continue  # a test's dataset that uses CUDA is there to exercise it (under spawn)
            statement = _statement(ctx, call)
            if statement is not None:
                if id(statement) in seen_statements:
                    continue  # one finding per statement
                seen_statements.add(id(statement))
            kind, where = context
            if kind == "init" and not _puts_data_on_cuda(what):
                continue  # pinning or a CUDA query in the main process: workers may never touch CUDA
            if kind == "init":
                yield self.report(
                    call,
                    f"{what} in {where}: building the dataset initialises CUDA in the main process and puts "
                    f"CUDA data on it; forked DataLoader workers that use it fail with {FORK_ERROR}",
                    level=WARNING,
                )
            else:
                yield self.report(
                    call,
                    f"{what} in code that runs in DataLoader workers ({where}): with fork workers after the "
                    f"main process initialised CUDA this raises {FORK_ERROR}",
                )


def _puts_data_on_cuda(what: str) -> bool:
    return what.startswith(("`.cuda()", "`.to(", "`device="))


def _statement(ctx, node):
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return ancestor
    return None
