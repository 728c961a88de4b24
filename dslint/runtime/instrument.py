"""The one entry point of every probe: ``Session`` instruments the DataLoaders it sees.

While a ``Session`` is active:

- every ``DataLoader`` constructed (by a probe, or by the code under test, e.g. a
  fixture's ``build()`` or its training loop) gets its dataset wrapped in a
  recording dataset (``dslint.runtime.recording``), and the session's loader
  ``overrides`` applied (``num_workers=2``, ``persistent_workers=True``, ``pin_memory`` on CUDA ...);
- every ``iter(loader)`` marks the start of an *iteration* (an epoch, or one
  ``next(iter(loader))`` step): the records produced since the last mark are
  assigned to the previous iteration and the parent's dataset state is snapshotted;
- every ``DistributedSampler.__iter__`` records the index order it produced.

Also here: rebuilding a loader's keywords (``loader_kwargs_of``, ``apply_overrides``),
moving batches to CUDA, and whether CUDA is usable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import time
import warnings
from typing import Any, Callable, Dict, List, Optional

import torch
from torch.utils.data import DataLoader, IterableDataset

from dslint.runtime.recording import Measure, Recorder, wrap
from dslint.runtime.snapshots import scalar_state

try:  # pragma: no cover - import guard
    from torch.utils.data.distributed import DistributedSampler
except Exception:  # pragma: no cover
    DistributedSampler = None

WORKER_ONLY = ("prefetch_factor", "persistent_workers", "timeout", "multiprocessing_context")


# --------------------------------------------------------------- loader cloning


def loader_kwargs_of(loader: DataLoader) -> Dict[str, Any]:
    """Constructor keywords that rebuild ``loader`` (over the same or a wrapped dataset)."""
    kw: Dict[str, Any] = {
        "num_workers": loader.num_workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": loader.pin_memory,
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "prefetch_factor": loader.prefetch_factor,
        "persistent_workers": loader.persistent_workers,
    }
    if hasattr(loader, "in_order"):
        kw["in_order"] = loader.in_order
    if isinstance(loader.dataset, IterableDataset):
        kw.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:
        kw["batch_sampler"] = loader.batch_sampler
    else:
        kw.update(batch_size=None, sampler=loader.sampler)
    return kw


def apply_overrides(kwargs: Dict[str, Any], overrides: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Loader keywords with ``overrides`` applied, dropping worker-only options at 0 workers."""
    overrides = overrides or {}
    kw = dict(kwargs)
    for key, value in overrides.items():
        kw[key] = value
    if "num_workers" in overrides and not overrides["num_workers"]:
        for key in WORKER_ONLY:
            if key in kw and key not in overrides:
                if key == "timeout":
                    kw[key] = 0
                elif key == "persistent_workers":
                    kw[key] = False
                else:
                    kw[key] = None
    return kw


# --------------------------------------------------------------------- session


@dataclasses.dataclass
class Iteration:
    """One ``iter(loader)``: an epoch, or one step of ``next(iter(loader))``."""

    index: int
    loader_id: int
    parent_state: Dict[str, str]
    started: float
    records: List[dict] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    # pids of the worker processes this iterator runs (started now, or kept by persistent workers)
    worker_pids: List[int] = dataclasses.field(default_factory=list)


_DL_SIGNATURE = None


def _bind_loader_args(args, kwargs) -> inspect.BoundArguments:
    global _DL_SIGNATURE
    if _DL_SIGNATURE is None:
        _DL_SIGNATURE = inspect.signature(_ORIGINAL["init"])
    return _DL_SIGNATURE.bind(None, *args, **kwargs)


_ORIGINAL: Dict[str, Any] = {"init": DataLoader.__init__, "iter": DataLoader.__iter__,
                             "dsiter": DistributedSampler.__iter__ if DistributedSampler is not None else None}
_ACTIVE: List["Session"] = []


def _patched_init(self, *args, **kwargs):
    session = _ACTIVE[-1] if _ACTIVE else None
    if session is None or not session.wrap_loaders:
        return _ORIGINAL["init"](self, *args, **kwargs)
    bound = _bind_loader_args(args, kwargs)
    arguments = dict(bound.arguments)
    arguments.pop(next(iter(bound.signature.parameters)))  # self
    extra = arguments.pop("kwargs", None)
    if extra:
        arguments.update(extra)
    dataset = arguments.pop("dataset")
    arguments = session.adjust(arguments)
    _ORIGINAL["init"](self, session.wrap(dataset), **arguments)
    session.loaders.append(self)


def _patched_iter(self):
    session = _ACTIVE[-1] if _ACTIVE else None
    if session is not None:
        session.mark(self)
    iterator = _ORIGINAL["iter"](self)
    if session is not None and session.iterations:
        session.iterations[-1].worker_pids = [w.pid for w in getattr(iterator, "_workers", ()) if w.pid is not None]
    return iterator


def _patched_dsiter(self):
    indices = list(_ORIGINAL["dsiter"](self))
    session = _ACTIVE[-1] if _ACTIVE else None
    if session is not None:
        session.sampler_orders.append({"sampler": id(self), "epoch": getattr(self, "epoch", None), "rank": getattr(self, "rank", None),
                                       "indices": [int(i) for i in indices]})
    return iter(indices)


class Session:
    """Instrument every DataLoader built and iterated while active (see the module doc)."""

    def __init__(self, measure: Optional[Measure] = None, *, overrides: Optional[Dict[str, Any]] = None,
                 wrap_loaders: bool = True, cuda: Optional[bool] = None):
        self.measure = measure or Measure()
        self.overrides = dict(overrides or {})
        self.wrap_loaders = wrap_loaders
        self.recorder = Recorder()
        self.loaders: List[DataLoader] = []
        self.iterations: List[Iteration] = []
        self.sampler_orders: List[dict] = []
        self.cuda = cuda_available() if cuda is None else cuda
        if self.cuda and "pin_memory" not in self.overrides:
            self.overrides["pin_memory"] = True

    # -- patches -------------------------------------------------------------------
    def __enter__(self) -> "Session":
        _ACTIVE.append(self)
        DataLoader.__init__ = _patched_init
        DataLoader.__iter__ = _patched_iter
        if DistributedSampler is not None:
            DistributedSampler.__iter__ = _patched_dsiter
        return self

    def __exit__(self, *exc) -> None:
        self.finish()
        _ACTIVE.remove(self)
        if not _ACTIVE:
            DataLoader.__init__ = _ORIGINAL["init"]
            DataLoader.__iter__ = _ORIGINAL["iter"]
            if DistributedSampler is not None:
                DistributedSampler.__iter__ = _ORIGINAL["dsiter"]
        self.recorder.cleanup()

    def adjust(self, arguments: Dict[str, Any]) -> Dict[str, Any]:
        return apply_overrides(arguments, self.overrides)

    def wrap(self, dataset):
        return wrap(dataset, self.recorder.dir, self.measure)

    def loader(self, target, loader_kwargs: Optional[Dict[str, Any]] = None, **overrides) -> DataLoader:
        """A DataLoader over ``target`` (a dataset, or a loader to rebuild) with the session's instrumentation."""
        if isinstance(target, DataLoader):
            kwargs = loader_kwargs_of(target)
            dataset = target.dataset
            if getattr(dataset, "_dslint_wrapped", False):
                dataset = dataset.inner
        else:
            kwargs = dict(loader_kwargs or {})
            dataset = target
        kwargs = apply_overrides(kwargs, overrides)
        saved = self.overrides
        self.overrides = {**self.overrides, **overrides}
        try:
            return DataLoader(dataset, **kwargs)
        finally:
            self.overrides = saved

    def mark(self, loader) -> None:
        """A new iteration of ``loader`` starts."""
        now = time.perf_counter()
        self._close_current(now)
        dataset = loader.dataset
        inner = dataset.inner if getattr(dataset, "_dslint_wrapped", False) else dataset
        state = scalar_state(inner) if self.measure.attrs else {}
        self.iterations.append(Iteration(len(self.iterations), id(loader), state, now))

    def _close_current(self, now: float) -> None:
        records = self.recorder.drain()
        if self.iterations:
            current = self.iterations[-1]
            current.records.extend(records)
            if not current.seconds:
                current.seconds = now - current.started
        elif records:
            self.iterations.append(Iteration(0, 0, {}, now, records))

    def finish(self) -> None:
        self._close_current(time.perf_counter())

    def end_iteration(self) -> Iteration:
        """Close the current iteration now (a probe-owned loop finished an epoch)."""
        now = time.perf_counter()
        records = self.recorder.drain()
        current = self.iterations[-1]
        current.records.extend(records)
        current.seconds = now - current.started
        return current

    def epochs(self, loader: DataLoader, epochs: int, *, label: str = "", on_epoch: Optional[Callable[[int], None]] = None,
               max_batches: Optional[int] = None) -> List[Iteration]:
        """Iterate ``loader`` for ``epochs`` epochs (batches to CUDA when available), each cut
        short after ``max_batches`` batches when given."""
        from dslint.runtime.isolate import progress

        out = []
        for epoch in range(epochs):
            if on_epoch is not None:
                on_epoch(epoch)
            batches = 0
            for batch in loader:
                batches += 1
                if self.cuda:
                    to_cuda(batch)
                progress(f"{label}epoch {epoch + 1}, {batches} batches")
                if max_batches is not None and batches >= max_batches:
                    break
            if self.cuda:
                torch.cuda.synchronize()
            out.append(self.end_iteration())
        return out


def to_cuda(batch):
    if isinstance(batch, torch.Tensor):
        return batch.to("cuda", non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_cuda(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_cuda(v) for v in batch) if not hasattr(batch, "_fields") else type(batch)(*(to_cuda(v) for v in batch))
    return batch


_CUDA: Optional[bool] = None


def cuda_available() -> bool:
    """Whether CUDA can be used (cached; ``DSLINT_NO_CUDA=1`` forces CPU)."""
    global _CUDA
    if _CUDA is None:
        _CUDA = os.environ.get("DSLINT_NO_CUDA") != "1" and torch.cuda.is_available()
    return _CUDA


@contextlib.contextmanager
def quiet_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield
