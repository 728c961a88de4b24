"""One setting of ``dslint bench``, measured in an isolated child process (``bench_config``).

The steps (``SettingRun``): build the target afresh and take its loader keywords
(``target_loader``), load the model step (``load_model_step``), cut the dataset so every
epoch ends as a real one does (``epoch_loader``), fetch the warm-up batches, measure each
epoch (``SettingRun.epoch``), and summarise the figures into the setting's row.

No torch at import: the child imports it.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from typing import Any, Dict, List, Optional

from dslint.runtime.common import BenchSettings, CommandError, MiB, one_line
from dslint.runtime.isolate import phase, progress
from dslint.runtime.target import Maker, TargetError, load_step, raised_message

#: the DataLoader settings a benchmark varies, in the order they are shown
GRID_KEYS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")
DEFAULT_BATCH_SIZE = 32


def label(config: Dict[str, Any]) -> str:
    """A setting's name: ``num_workers=2, persistent_workers=True``."""
    return ", ".join(f"{k}={config[k]}" for k in GRID_KEYS if k in config)


def bench_config(settings: BenchSettings, config: Dict[str, Any]) -> dict:
    """Measure one setting in this (isolated child) process."""
    try:
        return SettingRun(settings, config).measure()
    except CommandError as exc:
        return {"error": str(exc)}


# ------------------------------------------------------------------ building


def target_loader(settings: BenchSettings):
    """(dataset, DataLoader keywords, batch size) of a freshly built target."""
    maker = Maker(settings.spec, settings.kwargs, settings.tmp)
    value = maker.raw_checked()
    dataset, kw, batch_size = own_loader(settings, value)
    if kw is None:
        kw = maker.loader_kwargs()
        if settings.batch_size is not None:
            kw["batch_size"] = settings.batch_size
        elif "batch_size" not in kw and "batch_sampler" not in kw:
            kw["batch_size"] = DEFAULT_BATCH_SIZE
        batch_size = kw.get("batch_size", 1)
        if kw.get("batch_sampler") is not None:
            batch_size = getattr(kw["batch_sampler"], "batch_size", None)
    return dataset, kw, batch_size


def own_loader(settings: BenchSettings, value):
    """(dataset, keywords, batch size) of a DataLoader target (``--batch-size`` applied);
    (value, None, None) for a dataset."""
    from torch.utils.data import BatchSampler, DataLoader, IterableDataset

    from dslint.runtime.instrument import loader_kwargs_of

    if isinstance(value, DataLoader):
        dataset = value.dataset
        kw = loader_kwargs_of(value)
        batch_size = value.batch_size
        if settings.batch_size is not None:
            if isinstance(dataset, IterableDataset) or kw.get("batch_sampler") is None:
                kw["batch_size"] = settings.batch_size
            elif type(kw["batch_sampler"]) is BatchSampler:
                bs = kw["batch_sampler"]
                kw["batch_sampler"] = BatchSampler(bs.sampler, settings.batch_size, bs.drop_last)
            else:
                raise CommandError("--batch-size cannot change a custom batch_sampler; drop --batch-size")
            batch_size = settings.batch_size
        return dataset, kw, batch_size
    return value, None, None


def load_model_step(settings: BenchSettings):
    """``--model-step``'s ``step(batch)``, or None."""
    if settings.model_step is None:
        return None
    try:
        step, _ = load_step(settings.model_step)
    except TargetError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise CommandError(raised_message(f"--model-step {settings.model_step.text}", exc, settings.model_step)) from None
    return step


def epoch_loader(settings: BenchSettings, dataset, kw: dict, batch_size: Optional[int], workers: int):
    """(the loader, the most batches an epoch may give): epochs of ``batches`` batches that end
    as epochs do (a loop cut short leaves prefetched work behind, which the next epoch of
    persistent workers has to drain first)."""
    from torch.utils.data import DataLoader, IterableDataset

    from dslint.runtime import limit
    from dslint.runtime.instrument import quiet_warnings

    cap = settings.batches * (batch_size or 1)
    most = settings.batches
    if isinstance(dataset, IterableDataset):
        cap = -(-cap // max(1, workers))  # per worker
        most += workers  # each worker may end on a partial batch
    with quiet_warnings():
        loader = limit.limited(DataLoader(dataset, **kw), first=cap)
    return loader, most


# ------------------------------------------------------------------ measuring


class SettingRun:
    """The measurement of one setting: warm-up, epochs, and the row they make."""

    def __init__(self, settings: BenchSettings, config: Dict[str, Any]):
        self.settings = settings
        self.config = config
        self.name = label(config)
        self.done = 0
        self.epochs: List[dict] = []
        self.intervals: List[float] = []
        self.waits: List[float] = []
        self.steps: List[float] = []
        self.h2ds: List[float] = []
        self.warmed = 0  # warm-up batches the loader gave (fewer than asked: a short dataset)

    def measure(self) -> dict:
        from dslint.runtime.instrument import apply_overrides

        settings = self.settings
        phase(f"{self.name}: building", settings.timeout)
        dataset, kw, self.batch_size = target_loader(settings)
        self.step = load_model_step(settings)
        self.cuda = settings.device == "cuda"
        kw = apply_overrides(kw, self.config)
        self.workers = int(kw.get("num_workers") or 0)
        self.loader, self.most = epoch_loader(settings, dataset, kw, self.batch_size, self.workers)
        self.total = settings.warmup + settings.epochs * settings.batches
        monitor = MemoryMonitor() if self.workers else None
        try:
            if monitor:
                monitor.__enter__()
            self.warm_up()
            for epoch in range(settings.epochs):
                self.epoch(epoch, monitor)
        finally:
            if monitor:
                monitor.__exit__()
        return self.row(monitor)

    def advance(self) -> None:
        self.done += 1
        progress(f"{self.done}/{self.total}")

    def consume(self, batch) -> tuple:
        """(host-to-device ms, model step s) of one batch (None where not measured)."""
        h2d = None
        if self.cuda:
            import torch

            from dslint.runtime.instrument import to_cuda

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            batch = to_cuda(batch)
            end.record()
            end.synchronize()
            h2d = start.elapsed_time(end)
        step_s = None
        if self.step is not None:
            s0 = time.perf_counter()
            try:
                self.step(batch)
            except Exception as exc:  # noqa: BLE001
                spec = self.settings.model_step
                raise CommandError(raised_message(f"--model-step {spec.text}", exc, spec)) from None
            if self.cuda:
                torch.cuda.synchronize()  # imported above: the copy ran first
            step_s = time.perf_counter() - s0
        return h2d, step_s

    def warm_up(self) -> None:
        phase(f"{self.name}: warm-up", self.settings.timeout)
        with loader_errors("during the warm-up"):
            iterator = iter(self.loader)
            for _ in range(self.settings.warmup):
                try:
                    batch, _ = fetch(iterator)
                except StopIteration:
                    break
                self.consume(batch)
                self.warmed += 1
                self.advance()
            del iterator

    def epoch(self, epoch: int, monitor: Optional["MemoryMonitor"]) -> None:
        import gc

        settings = self.settings
        phase(f"{self.name}: epoch {epoch + 1}/{settings.epochs}", settings.timeout)
        gc.collect()
        samples = 0
        n = 0
        first = None
        done_at: List[float] = []
        with loader_errors(f"in epoch {epoch + 1}"):
            start = time.perf_counter()
            iterator = iter(self.loader)
            while n < self.most:
                try:
                    batch, wait = fetch(iterator)
                except StopIteration:
                    break
                arrived = time.perf_counter()
                h2d, step_s = self.consume(batch)
                now = time.perf_counter()
                samples += samples_in(batch, self.batch_size)
                if n == 0:
                    first = arrived - start
                    if monitor and not monitor.peak:
                        # the workers are alive now; a short epoch may end before the monitor's
                        # first reading (the reading's own time is not the epoch's)
                        t0 = time.perf_counter()
                        monitor.sample()
                        start += time.perf_counter() - t0
                done_at.append(now)
                self.waits.append(wait if n else arrived - start)
                if step_s is not None:
                    self.steps.append(step_s)
                if h2d is not None:
                    self.h2ds.append(h2d)
                n += 1
                self.advance()
            seconds = time.perf_counter() - start
            if monitor:
                monitor.sample()
            del iterator
        if n == 0:
            raise CommandError(f"the loader yielded no batches in epoch {epoch + 1} (an exhausted iterable dataset?)")
        self.intervals.extend(windows(done_at, max(1, self.workers)))
        self.epochs.append({"batches": n, "samples": samples, "seconds": seconds, "first_batch_s": first,
                            "rate": samples / seconds if seconds else 0.0})

    def row(self, monitor: Optional["MemoryMonitor"]) -> dict:
        epochs, loader = self.epochs, self.loader
        intervals = self.intervals or [e["seconds"] / e["batches"] for e in epochs]
        row: Dict[str, Any] = {
            "config": self.config,
            "label": self.name,
            "settings": {"batch_size": self.batch_size, "num_workers": loader.num_workers,
                         "prefetch_factor": loader.prefetch_factor if loader.num_workers else None,
                         "persistent_workers": loader.persistent_workers if loader.num_workers else None,
                         "pin_memory": loader.pin_memory},
            "ms_median": statistics.median(intervals) * 1e3,
            "ms_p90": quantile(intervals, 0.9) * 1e3,
            "samples_per_s": statistics.median(e["rate"] for e in epochs),
            "epoch_rates": [round(e["rate"], 1) for e in epochs],
            "first_batch_ms": statistics.median(e["first_batch_s"] for e in epochs) * 1e3,
            # None where no worker was seen (n/a), never a 0 that was not measured
            "workers_mib": (monitor.peak / MiB) if monitor and monitor.peak else None,
            "worker_peak_mib": (monitor.peak_each / MiB) if monitor and monitor.peak_each else None,
            "warmup_batches": self.warmed,
            "batches": sum(e["batches"] for e in epochs),
            "samples": sum(e["samples"] for e in epochs),
            "epochs": len(epochs),
        }
        if self.steps:
            busy = sum(self.waits) + sum(self.steps) + sum(h / 1e3 for h in self.h2ds)
            row["wait_fraction"] = sum(self.waits) / busy if busy else 0.0
            row["step_ms"] = statistics.median(self.steps) * 1e3
        if self.h2ds:
            row["h2d_ms"] = statistics.median(self.h2ds)
        return row


@contextlib.contextmanager
def loader_errors(when: str):
    """What the loader raises (not the model step's CommandError) as ``the loader raised <when>: ...``."""
    try:
        yield
    except CommandError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise CommandError(f"the loader raised {when}: {one_line(f'{type(exc).__name__}: {exc}')}") from None


def fetch(iterator):
    """(the next batch, seconds waited for it)."""
    t0 = time.perf_counter()
    batch = next(iterator)
    return batch, time.perf_counter() - t0


def samples_in(batch, batch_size: Optional[int]) -> int:
    """How many samples a batch holds (its first tensor's length)."""
    if batch_size is None:
        return 1
    from dslint.runtime.gpu import tensor_leaves  # imports torch: only in the measuring child

    leaves = tensor_leaves(batch)
    for leaf in leaves:
        if leaf.dim() > 0:
            return int(leaf.shape[0])
    if isinstance(batch, (list, tuple)) and batch and not leaves:
        return len(batch)
    return batch_size


def windows(done_at: List[float], width: int) -> List[float]:
    """Time per batch over sliding windows of ``width`` consecutive batches (the first batch of the
    epoch is its latency, not counted): N workers deliver in bursts of about N batches, so the gap
    between two arrivals says little; N arrivals apart it is the loader's pace."""
    if len(done_at) < 2:
        return []
    width = min(width, len(done_at) - 1)
    return [(done_at[i] - done_at[i - width]) / width for i in range(width, len(done_at))]


def quantile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class MemoryMonitor:
    """Peak of the summed USS of this process's children (the DataLoader workers)."""

    def __init__(self, interval: float = 0.2):
        import psutil

        self.psutil = psutil
        self.me = psutil.Process()
        self.interval = interval
        self.peak = 0
        self.peak_each = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="dslint-memory", daemon=True)

    def sample(self) -> None:
        total = 0
        each = 0
        try:
            children = self.me.children(recursive=True)
        except self.psutil.Error:
            return
        for child in children:
            try:
                uss = child.memory_full_info().uss
            except (self.psutil.Error, OSError):
                continue
            total += uss
            each = max(each, uss)
        self.peak = max(self.peak, total)
        self.peak_each = max(self.peak_each, each)

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> "MemoryMonitor":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
