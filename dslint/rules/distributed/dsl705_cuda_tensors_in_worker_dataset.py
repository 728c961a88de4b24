"""DSL705: a DataLoader with forked workers over a dataset whose tensors already live on the GPU."""

from __future__ import annotations

import libcst as cst

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.distributed._common import cuda_held, forks_workers
from dslint.semantics.cuda import cuda_construction
from dslint.semantics.distributed import line_of
from dslint.semantics.loops import is_test_code, loader_loops


PAIRS = """
    from torch.utils.data import Dataset

    class Pairs(Dataset):
        def __init__(self, x, y, scale=None):
            self.x, self.y = x, y
            self.total = len(x) * (scale or 1)
        def __len__(self):
            return len(self.x)
        def __getitem__(self, i):
            return self.x[i], self.y[i]
"""


class CudaTensorsInWorkerDataset(Rule):
    """
    ## What it does
    Flags a `DataLoader` whose `num_workers` can be above 0 (a literal, a
    default, an argparse option's default, a config field) and that forks its
    workers (no `multiprocessing_context`, or `"fork"`, and no
    `set_start_method("spawn")` in the file), over a dataset that holds CUDA
    tensors:

    - a `TensorDataset` of tensors made on the GPU (`.cuda()`, `.to("cuda")`,
      `device="cuda"`, also through names and same-file functions);
    - an instance of a dataset class of this file whose `__init__` stores a
      CUDA tensor on `self` (`self.x = x.cuda()`);
    - an instance of a project class of any file built here with a tensor
      put on the GPU (`Pairs(x.to(device), y)`, a name bound to one) that its
      `__init__` keeps on `self`, itself or through `super().__init__`.

    It reports the loader (DSL204 reports CUDA work inside dataset code
    itself, and warns on the `__init__` line).

    ## Why is this bad?
    Making the tensors initialises CUDA in the main process. The DataLoader
    then forks its workers, and the first worker that indexes a CUDA tensor
    fails with `RuntimeError: Cannot re-initialize CUDA in forked subprocess.
    To use CUDA with multiprocessing, you must use the 'spawn' start method`
    (torch/cuda/__init__.py). With `spawn` it works but every worker creates
    its own CUDA context, and indexing GPU tensors in workers gains nothing
    over `num_workers=0`. The measured figure needs a GPU: `dslint verify`
    reports it as pending (skipped) on CPU-only machines, and records the
    figure of a GPU run below when there has been one.

    ## Example
    ```python
    features = torch.from_numpy(np.load(path)).cuda()
    labels = torch.from_numpy(np.load(labels_path)).cuda()
    loader = DataLoader(TensorDataset(features, labels), batch_size=256, num_workers=4)
    ```

    ## Use instead
    ```python
    features = torch.from_numpy(np.load(path))
    labels = torch.from_numpy(np.load(labels_path))
    loader = DataLoader(TensorDataset(features, labels), batch_size=256, num_workers=4, pin_memory=True)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    ```
    (Or keep the tensors on the GPU and use `num_workers=0`: indexing them is
    already fast.)

    ## When it does not fire
    - `num_workers` is 0 on every path, or unknown (nothing in the project
      shows a value: a parameter nobody passes, `**kwargs` from elsewhere);
    - `multiprocessing_context` is given and is not `"fork"`, or the file sets
      the start method to `spawn`/`forkserver`;
    - a device that is not known to be CUDA (`.to(device)` with `device` from
      the command line) or a tensor whose origin cannot be followed; an
      argument the class's `__init__` does not keep; test code;
    - an object that `obj.cuda()` moves whose class (built directly, by `Cls.load(...)` or by a
      factory) is a project class with its own `cuda` method and no `nn.Module`: that method decides
      what moves (a wrapper moving only its inner network); also a project class whose file is not
      analysed.

    Possible and unknown values: `num_workers` counts when it *can* be above
    0 (an argparse option whose default is 8 counts as 8); a value nothing in
    the project shows stays silent. `multiprocessing_context` must be `None`
    or `"fork"` on every path.
    """

    code = "DSL705"
    name = "cuda-tensors-in-worker-dataset"
    symptom = Symptom("cuda_fork", "Cannot re-initialize CUDA in forked subprocess (CUDA tensors indexed in fork workers)",
                      gpu=True)
    level = ERROR
    summary = "A DataLoader forks workers over a dataset of CUDA tensors, which fail to re-initialize CUDA"
    help = "Keep the dataset's tensors on the CPU and move each batch in the loop (`pin_memory=True`), or use `num_workers=0`"

    valid = (
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        x = torch.randn(100, 8)
        loader = DataLoader(TensorDataset(x), num_workers=4, pin_memory=True)
        """,
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        x = torch.randn(100, 8).cuda()
        loader = DataLoader(TensorDataset(x), batch_size=32)  # no workers
        """,
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        x = torch.randn(100, 8).cuda()
        loader = DataLoader(TensorDataset(x), num_workers=2, multiprocessing_context="spawn")
        """,
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def main(device, workers):
            x = torch.randn(100, 8).to(device)  # the device is not known
            loader = DataLoader(TensorDataset(x), num_workers=workers)
        """,
        # a class of another file given CPU tensors or ones on a device from the command line, or CUDA
        # tensors without workers or that it does not keep
        {
            "pairs.py": PAIRS,
            "train.py": """
                import argparse
                import torch
                from torch.utils.data import DataLoader
                from pairs import Pairs

                parser = argparse.ArgumentParser()
                parser.add_argument("--device", default="cuda")

                def main(x, y, workers=4):
                    args = parser.parse_args()
                    xs = torch.as_tensor(x).cuda()
                    cpu = DataLoader(Pairs(torch.as_tensor(x), y), num_workers=workers)
                    chosen = DataLoader(Pairs(torch.as_tensor(x).to(args.device), y), num_workers=workers)
                    kept_out = DataLoader(Pairs(y, y, scale=xs.cuda()), num_workers=workers)
                    return cpu, chosen, kept_out, DataLoader(Pairs(xs, y), batch_size=8)
            """,
        },
        # a dataset that hands a CUDA tensor to a class (of a namespace package) that keeps only
        # numbers made from it, or uses the GPU in ``__init__`` and keeps what it brings back
        {
            "geometry/grid.py": """
                class Grid:
                    def __init__(self, centre, size):
                        centre = centre.cpu().numpy()
                        self.low, self.size = float(centre[0]) - size, size
            """,
            "scenes.py": """
                import torch
                from torch.utils.data import DataLoader, Dataset
                import geometry.grid

                class Scenes(Dataset):
                    def __init__(self, items, encoder):
                        self.grid = geometry.grid.Grid(torch.zeros(3).cuda(), size=4)
                        self.items = [encoder(x.cuda()).cpu() for x in items]
                    def __getitem__(self, i):
                        return self.items[i]

                loader = DataLoader(Scenes([1, 2], None), num_workers=2)
            """,
        },
    )
    invalid = (
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def main(path):
            feats = torch.load(path).cuda()
            labels = torch.zeros(len(feats), dtype=torch.long, device="cuda")
            ds = TensorDataset(feats, labels)
            return DataLoader(ds, batch_size=256, num_workers=4)  # expect: DSL705
        """,
        """
        import argparse
        import torch
        from torch.utils.data import DataLoader, Dataset

        parser = argparse.ArgumentParser()
        parser.add_argument("--workers", type=int, default=8)

        class Embeddings(Dataset):
            def __init__(self, table):
                self.table = torch.as_tensor(table).to("cuda")

            def __len__(self):
                return len(self.table)

            def __getitem__(self, i):
                return self.table[i]

        def main(table):
            args = parser.parse_args()
            return DataLoader(Embeddings(table), num_workers=args.workers)  # expect: DSL705
        """,
        {
            "pairs.py": PAIRS,
            "train.py": """
                import torch
                from torch.utils.data import DataLoader
                from pairs import Pairs

                device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

                def main(x, y, workers=4):
                    xs = torch.as_tensor(x).to(device)
                    return DataLoader(Pairs(xs, y), batch_size=8, num_workers=workers)  # expect: DSL705
            """,
        },
    )

    def check(self, ctx):
        if not ctx.dataloader_calls():
            return
        index = loader_loops(ctx)
        for loader in index.loaders:
            if is_test_code(ctx, loader.call):
                continue
            workers = forks_workers(ctx, loader)
            if workers is None:
                continue
            dataset = loader.bound.expr("dataset")
            held = cuda_held(ctx, index, dataset) or self.constructed_with_cuda(ctx, index, dataset)
            if held is None:
                continue
            what, node = held
            yield self.report(
                loader.call,
                f"this DataLoader forks {workers} over a dataset whose tensors are on the GPU ({what}, line "
                f"{line_of(ctx, node)}): the first worker that indexes one fails with `RuntimeError: Cannot "
                "re-initialize CUDA in forked subprocess`",
            )

    @staticmethod
    def constructed_with_cuda(ctx, index, dataset):
        """A project dataset (of any file) built here with a CUDA tensor its ``__init__`` keeps."""
        for value in index.values(dataset) if dataset is not None else ():
            if isinstance(value.node, cst.Call):
                found = cuda_construction(ctx, value.node)
                if found is not None:
                    return found
        return None
