"""Measurements that need CUDA (run only when ``torch.cuda.is_available()``).

- ``cuda_fork``: CUDA initialised in the parent, then a fork-worker DataLoader over
  the dataset; a dataset (or collate_fn) that touches CUDA in the worker fails with
  ``RuntimeError: Cannot re-initialize CUDA in forked subprocess`` (DSL204).
- ``h2d_copy``: host-to-device copy time of the loader's batches, timed with CUDA
  events, with the loader's own ``pin_memory`` setting (DSL508: pinned vs pageable).
"""

from __future__ import annotations

import statistics
from typing import Optional

import torch
from torch.utils.data import DataLoader

from dslint.runtime.common import fmt_number, shorten
from dslint.runtime.instrument import apply_overrides, loader_kwargs_of, quiet_warnings, to_cuda
from dslint.runtime.isolate import progress
from dslint.runtime.probes import Figure, build

REINIT = "Cannot re-initialize CUDA in forked subprocess"


def device_name() -> str:
    try:
        return torch.cuda.get_device_name(0)
    except Exception:  # pragma: no cover
        return "CUDA"


def cuda_fork(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, epochs: int = 1) -> Figure:
    """Initialise CUDA in this (parent) process, then iterate with forked workers."""
    torch.zeros(1, device="cuda")  # the parent has initialised CUDA, as a training script has
    assert torch.cuda.is_initialized()
    with quiet_warnings():
        target = build(make)
    kwargs = loader_kwargs_of(target) if isinstance(target, DataLoader) else dict(loader_kwargs or {})
    dataset = target.dataset if isinstance(target, DataLoader) else target
    n = max(workers, kwargs.get("num_workers") or 0)
    kwargs = apply_overrides(kwargs, {"num_workers": n, "multiprocessing_context": "fork", "pin_memory": True})
    batches = 0
    on_gpu = 0
    try:
        loader = DataLoader(dataset, **kwargs)
        for epoch in range(epochs):
            for batch in loader:
                batches += 1
                leaves = tensor_leaves(batch)
                on_gpu += sum(1 for t in leaves if t.device.type == "cuda")
                to_cuda(batch)
                progress(f"cuda fork: {batches} batches")
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the measurement
        message = f"{type(exc).__name__}: {exc}"
        key = next((line.strip() for line in str(exc).splitlines() if REINIT in line), None)
        shown = key or shorten(message, 150)
        return Figure(f"{shown} (CUDA initialised in the parent, {n} fork workers)", REINIT in message,
                      {"exception": message, "batches": batches})
    text = f"{batches} batches from {n} fork workers after CUDA init in the parent, moved with pin_memory + non_blocking"
    if on_gpu:
        text += f"; {on_gpu} tensors arrived already on the GPU"
    return Figure(text, False, {"batches": batches, "on_gpu": on_gpu})


def tensor_leaves(batch) -> list:
    """Every tensor in a batch (nested dicts, lists and tuples)."""
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, dict):
        return [t for v in batch.values() for t in tensor_leaves(v)]
    if isinstance(batch, (list, tuple)):
        return [t for v in batch for t in tensor_leaves(v)]
    return []


def h2d_copy(make, loader_kwargs: Optional[dict] = None, *, epochs: int = 2, max_batches: int = 50) -> Figure:
    """Host-to-device time per batch with the loader's own pin_memory setting (CUDA events)."""
    with quiet_warnings():
        target = build(make)
    loader = target if isinstance(target, DataLoader) else DataLoader(target, **(loader_kwargs or {}))
    times = []
    nbytes = 0
    pinned = 0
    total = 0
    warm = True
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            if i >= max_batches:
                break
            leaves = tensor_leaves(batch)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for t in leaves:
                t.to("cuda", non_blocking=True)
            end.record()
            end.synchronize()
            if warm:  # the first copy pays for context/allocator setup
                warm = False
                continue
            times.append(start.elapsed_time(end))
            nbytes += sum(t.numel() * t.element_size() for t in leaves)
            pinned += sum(1 for t in leaves if t.is_pinned())
            total += len(leaves)
            progress(f"h2d: {len(times)} batches")
    if not times:
        return Figure("no batches were copied", False, {})
    median = statistics.median(times)
    gbps = nbytes / (sum(times) / 1000) / 1e9 if sum(times) else 0.0
    kind = "pinned" if pinned == total else ("pageable" if pinned == 0 else f"{pinned}/{total} pinned")
    text = f"{fmt_number(median)} ms/batch H2D ({kind}, {gbps:.1f} GB/s, {len(times)} batches)"
    return Figure(text, pinned < total, {"median_ms": median, "gbps": gbps, "pinned": pinned, "tensors": total,
                                         "batches": len(times)})
