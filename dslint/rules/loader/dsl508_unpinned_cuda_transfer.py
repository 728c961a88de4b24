"""DSL508: batches copied to the GPU from a DataLoader without ``pin_memory=True``."""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from dslint.rules.base import WARNING, Rule, Symptom
from dslint.rules.loader._common import literal_zero
from dslint.semantics.batches import BatchViews
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.loops import loader_loops
from dslint.semantics.module_calls import positional_args
from dslint.semantics.scopes import names_used


class UnpinnedCudaTransfer(Rule):
    """
    ## What it does
    Flags a `DataLoader` whose batches are moved to the GPU inside the loop
    over it (`.cuda()`, `.to("cuda")`, `.to(device)` with `device` a literal
    CUDA device, or any `.to(..., non_blocking=True)`) while its `pin_memory`
    is absent or a literal `False`.

    The batch is followed through the loop body in order: names bound to it,
    its items and slices, methods called on it, unpacking and loops over it.

    This is an opt-in rule: it runs only with `--preview` (or `preview = true`).

    ## When it does not fire
    - `pin_memory` that is not a literal (such as `torch.cuda.is_available()`).
    - A loader without workers (`num_workers` absent or `0`): there `pin_memory=True` pins each batch
      in the training process itself, one more host copy per step, which costs about what the faster
      transfer saves (and `non_blocking=True` then only overlaps the copy with the next step's GPU work).
    - `.to(device)` where the device is not known to be CUDA and `non_blocking`
      is not set.
    - Loops that pin the batch themselves (`.pin_memory()`), and tensors the
      main process makes from the batch (`preprocess(x)`, `torch.stack(x)`,
      `x / 255`), which `pin_memory=True` would not pin either.

    ## Why is this bad?
    Without `pin_memory=True` the batch lives in pageable host memory. The
    CUDA copy then goes through a staging buffer: it cannot overlap with
    compute (`non_blocking=True` does nothing) and is slower than a copy from
    pinned memory. With `pin_memory=True` the loader's pin thread pins each
    batch while the previous step runs. The effect shows only on a GPU
    (`dslint verify` measures the host-to-device time where one is present).

    How much that costs depends on the size of a batch in bytes, which the
    code rarely shows: for small batches (point clouds, tabular rows, token
    ids) the pageable copy is a small fraction of the step, and turning on
    pinning is a tweak rather than a fix. On public repositories, reviewers
    judged none of the findings of this rule worth a change, so it is kept
    out of the default set; enable it when tuning the input pipeline of a
    job whose batches are large (images, video, audio).

    ## Example
    ```python
    loader = DataLoader(ds, batch_size=256, num_workers=8)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(ds, batch_size=256, num_workers=8, pin_memory=True)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    ```

    ## References
    - Memory pinning (the PyTorch documentation, `torch.utils.data`)
    - A guide on good usage of `non_blocking` and `pin_memory()` (the PyTorch tutorials)
    """

    code = "DSL508"
    name = "unpinned-cuda-transfer"
    symptom = Symptom("h2d", "host-to-device copy time, pageable vs pinned", gpu=True, exclusive=True)
    level = WARNING
    preview = True
    summary = "Batches are copied to the GPU from a DataLoader without `pin_memory=True`"
    help = "Pass `pin_memory=True` to the DataLoader"

    valid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        """,
        """
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, pin_memory=torch.cuda.is_available())
        for x in loader:
            x = x.to("cuda")
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds)
        for x in loader:
            x = x.to(device)  # the device is not known to be CUDA
            model.cuda()
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, num_workers=0)  # pinned in this process: no gain
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64, num_workers=4)  # expect: DSL508
        for images, labels in loader:
            images = images.cuda(non_blocking=True)
            labels = labels.cuda(non_blocking=True)
        """,
        """
        import torch
        import torch.utils.data as tud

        DEVICE = torch.device("cuda:0")

        def train_epoch(model, loader):
            for batch in loader:
                batch = {k: v.to(DEVICE) for k, v in batch.items()}
                model(**batch)

        def main(ds):
            loader = tud.DataLoader(ds, batch_size=8, num_workers=2, pin_memory=False)  # expect: DSL508
            for epoch in range(3):
                train_epoch(model, loader)
        """,
    )

    def check(self, ctx):
        index = loader_loops(ctx)
        reported = set()
        for loop in index.loops:
            loader = loop.loader
            if id(loader.call) in reported:
                continue
            pin = ctx.value(loader.bound, "pin_memory")
            if pin is UNKNOWN or pin or literal_zero(ctx.value(loader.bound, "num_workers")):
                continue
            transfer = self._transfer(ctx, index, loop)
            if transfer is None:
                continue
            reported.add(id(loader.call))
            text, asynchronous = transfer
            consequence = (
                "so `non_blocking=True` does nothing: the copy cannot overlap with compute, and it is slower "
                "than from pinned memory"
                if asynchronous
                else "so the copy is synchronous and slower than from pinned memory"
            )
            yield self.report(
                loader.call,
                f"batches of this DataLoader are copied to the GPU (`{text}`) but `pin_memory` is off: the "
                f"copy comes from pageable host memory, {consequence}",
            )

    def _transfer(self, ctx, index, loop) -> Optional[Tuple[str, bool]]:
        """The first `.cuda()`/`.to(cuda)` of (a view of) the loader's batch in the loop body.

        The body is followed in execution order. A name holds the batch after
        ``x = batch``, ``x = batch["image"]``, ``x = batch.squeeze()``, unpacking and
        loops over it; a name rebound to anything else (``x = preprocess(x)``,
        ``x = torch.stack(x)``, ``x = x / 255``) holds a new tensor made in the main
        process, which `pin_memory=True` would not pin either.
        """
        for node in index.body_nodes(loop.loop.body):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "pin_memory":
                return None
        walker = _BatchTransfers(self, ctx, index, set(names_used(loop.loop.target)))
        walker.visit(loop.loop.body)
        return walker.found

    def _to_cuda(self, ctx, index, call) -> bool:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "non_blocking":
                value = ctx.literal(arg.value)
                if value is not UNKNOWN and value:
                    return True
        args = positional_args(call)
        device = args[0] if args else None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                device = arg.value
        if device is None:
            return False
        nodes = index.value_nodes(device)
        return bool(nodes) and all(self._cuda_device(ctx, n) for n in nodes)

    @staticmethod
    def _cuda_device(ctx, node) -> bool:
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
            value = node.evaluated_value
            return isinstance(value, str) and value.startswith("cuda")
        if isinstance(node, cst.Call) and ctx.call_name(node) == "torch.device":
            args = positional_args(node)
            value = ctx.literal(args[0]) if args else UNKNOWN
            return isinstance(value, str) and value.startswith("cuda")
        return False


class _BatchTransfers(BatchViews):
    """The first ``.cuda()``/``.to(cuda)`` of (a view of) the batch goes to ``found``."""

    def __init__(self, rule, ctx, index, tainted) -> None:
        super().__init__(ctx, index, tainted)
        self.rule = rule

    def on_call(self, call, tainted) -> None:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to"):
            return
        if not self.derived(func.value, tainted):
            return
        if func.attr.value == "cuda" or self.rule._to_cuda(self.ctx, self.index, call):
            found = self.ctx.code(call).strip()
            self.found = (found if len(found) <= 60 else f".{func.attr.value}(...)", _non_blocking(self.ctx, call))


def _non_blocking(ctx, call) -> bool:
    """The copy asks to be asynchronous: ``non_blocking=True`` (``.cuda(non_blocking=True)``,
    ``.to(device, non_blocking=True)``; also ``.cuda(device, True)``)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value in ("non_blocking", "async"):
            value = ctx.literal(arg.value)
            return value is UNKNOWN or bool(value)
    args = positional_args(call)
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "cuda" and len(args) >= 2:
        value = ctx.literal(args[1])
        return value is UNKNOWN or bool(value)
    return False
