"""``dslint bench TARGET``: the data-loading-only benchmark of a user's dataset or loader.

Sweeps DataLoader settings and measures each one in its own isolated child process
(``dslint.runtime.isolate``: a time limit per setting, the process group -- workers
included -- killed afterwards), on a freshly built dataset, so a cache one setting
fills in the main process never speeds up the next. Per setting: a warm-up of a few
batches (not measured), then ``epochs`` epochs of ``batches`` batches each: the dataset is cut
to its first ``batches x batch_size`` samples (an iterable one: that many divided by the
workers, per worker), so every epoch ends the way a real one does.

Default sweep: ``num_workers`` over 0, 1, 2, 4, ... up to the CPU count (the other
settings as the loader has them), then, at the best ``num_workers``, the other
combinations of ``prefetch_factor`` (2, 4) and ``persistent_workers`` -- and
``pin_memory`` when batches go to CUDA (on a CPU-only run pinning changes nothing).
``--grid KEY=V1,V2`` replaces it by the full product of the given values.

Reported per setting: ms/batch (median and p90 over sliding windows of
``num_workers`` consecutive batches after each epoch's first: workers deliver in bursts), samples/s (the median epoch: samples over the epoch's wall time, start-up
included), first-batch latency (``iter()`` to the first batch, median over epochs),
peak memory of the worker processes (the sum of their USS, sampled every 0.2 s),
and with ``--model-step`` the share of each iteration spent waiting for data, with
``--device cuda`` the host-to-device copy per batch (CUDA events).

No torch at import: the parent imports it in ``run``.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from dslint.runtime.isolate import Outcome, phase, progress, run_many
from dslint.runtime.target import Maker, TargetError, TargetSpec, load_attr, load_step

GRID_KEYS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory")
DEFAULT_BATCH_SIZE = 32
MiB = 1024 * 1024


class BenchError(Exception):
    """The benchmark cannot run or finish (exit 2); the message is one line."""


@dataclass
class BenchSettings:
    spec: TargetSpec
    kwargs: Dict[str, Any] = field(default_factory=dict)
    batches: int = 40
    batch_size: Optional[int] = None
    epochs: int = 3
    warmup: int = 5
    grid: Optional[Dict[str, list]] = None
    device: str = "cpu"
    model_step: Optional[TargetSpec] = None
    timeout: float = 120.0
    tmp: str = ""
    cpus: int = 1


# ====================================================================== grid


def parse_grid(values: List[str]) -> Dict[str, list]:
    """``["num_workers=0,2,4", "persistent_workers=true,false"]`` -> {key: [values]}."""
    grid: Dict[str, list] = {}
    for value in values:
        for item in value.replace(";", " ").split():
            if "=" not in item:
                raise BenchError(f"--grid expects KEY=V1,V2 with KEY one of {', '.join(GRID_KEYS)}; got {item!r}")
            key, raw = item.split("=", 1)
            key = key.strip().replace("-", "_")
            if key not in GRID_KEYS:
                raise BenchError(f"--grid: unknown setting {key!r} (one of {', '.join(GRID_KEYS)})")
            out = []
            for v in raw.split(","):
                v = v.strip()
                if not v:
                    continue
                if key in ("persistent_workers", "pin_memory"):
                    if v.lower() not in ("true", "false", "1", "0", "yes", "no"):
                        raise BenchError(f"--grid {key}: {v!r} is not true or false")
                    out.append(v.lower() in ("true", "1", "yes"))
                else:
                    try:
                        number = int(v)
                    except ValueError:
                        raise BenchError(f"--grid {key}: {v!r} is not an integer") from None
                    if number < (0 if key == "num_workers" else 1):
                        raise BenchError(f"--grid {key}: {number} is out of range")
                    out.append(number)
            if not out:
                raise BenchError(f"--grid {key}: no values")
            grid[key] = list(dict.fromkeys(grid.get(key, []) + out))
    return grid


def worker_counts(cpus: int) -> List[int]:
    """0, 1, 2, 4, 8, ... up to the CPU count (which is included)."""
    counts = [0, 1]
    n = 2
    while n <= cpus:
        counts.append(n)
        n *= 2
    if cpus > 1 and counts[-1] != cpus:
        counts.append(cpus)
    return counts


def normalize(config: Dict[str, Any]) -> Dict[str, Any]:
    """Worker-only settings mean nothing at num_workers=0: drop them (torch rejects some)."""
    out = dict(config)
    if out.get("num_workers") == 0:
        out.pop("prefetch_factor", None)
        out.pop("persistent_workers", None)
    return out


def grid_configs(grid: Dict[str, list]) -> List[Dict[str, Any]]:
    keys = [k for k in GRID_KEYS if k in grid]
    configs: List[Dict[str, Any]] = []
    for values in itertools.product(*(grid[k] for k in keys)):
        config = normalize(dict(zip(keys, values)))
        config.setdefault("num_workers", None)
        if config not in configs:
            configs.append(config)
    if not any(c.get("num_workers") == 0 for c in configs):
        base = {k: v for k, v in configs[0].items() if k == "pin_memory"} if configs else {}
        configs.insert(0, {"num_workers": 0, **base})
    return [{k: v for k, v in c.items() if v is not None} for c in configs]


def label(config: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={config[k]}" for k in GRID_KEYS if k in config)


# ====================================================================== child side


def _samples_in(batch, batch_size: Optional[int]) -> int:
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


class _MemoryMonitor:
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

    def __enter__(self) -> "_MemoryMonitor":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=2)


def _base_loader(settings: BenchSettings, value):
    """(dataset, DataLoader keywords, batch size, where the settings come from)."""
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
                raise BenchError("--batch-size cannot change a custom batch_sampler; drop --batch-size")
            batch_size = settings.batch_size
        return dataset, kw, batch_size
    return value, None, None


def bench_config(settings: BenchSettings, config: Dict[str, Any]) -> dict:
    """Measure one setting in this (isolated child) process."""
    try:
        return _bench_config(settings, config)
    except (TargetError, BenchError) as exc:
        return {"error": str(exc)}


def _bench_config(settings: BenchSettings, config: Dict[str, Any]) -> dict:
    import gc

    import torch
    from torch.utils.data import DataLoader, IterableDataset

    from dslint.runtime import limit
    from dslint.runtime.instrument import apply_overrides, quiet_warnings, to_cuda
    from dslint.runtime.probe import _one_line, _raised

    name = label(config)
    phase(f"{name}: building", settings.timeout)
    maker = Maker(settings.spec, settings.kwargs, settings.tmp)
    try:
        value = maker.raw()
    except TargetError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise BenchError(_raised(maker.call_text(), exc, settings.spec)) from None
    dataset, kw, batch_size = _base_loader(settings, value)
    if kw is None:
        kw = maker.loader_kwargs()
        if settings.batch_size is not None:
            kw["batch_size"] = settings.batch_size
        elif "batch_size" not in kw and "batch_sampler" not in kw:
            kw["batch_size"] = DEFAULT_BATCH_SIZE
        batch_size = kw.get("batch_size", 1)
        if kw.get("batch_sampler") is not None:
            batch_size = getattr(kw["batch_sampler"], "batch_size", None)
    step = None
    if settings.model_step is not None:
        try:
            step, _ = load_step(settings.model_step)
        except TargetError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise BenchError(_raised(f"--model-step {settings.model_step.text}", exc, settings.model_step)) from None
    cuda = settings.device == "cuda"
    kw = apply_overrides(kw, config)
    workers = int(kw.get("num_workers") or 0)
    # epochs of ``batches`` batches that end as epochs do (a loop cut short leaves prefetched
    # work behind, which the next epoch of persistent workers has to drain first)
    cap = settings.batches * (batch_size or 1)
    most = settings.batches
    if isinstance(dataset, IterableDataset):
        cap = -(-cap // max(1, workers))  # per worker
        most += workers  # each worker may end on a partial batch
    with quiet_warnings():
        loader = limit.limited(DataLoader(dataset, **kw), first=cap)
    total = settings.warmup + settings.epochs * settings.batches
    done = [0]

    def advance() -> None:
        done[0] += 1
        progress(f"{done[0]}/{total}")

    def fetch(iterator):
        t0 = time.perf_counter()
        batch = next(iterator)
        return batch, time.perf_counter() - t0

    def consume(batch) -> tuple:
        h2d = None
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            batch = to_cuda(batch)
            end.record()
            end.synchronize()
            h2d = start.elapsed_time(end)
        step_s = None
        if step is not None:
            s0 = time.perf_counter()
            try:
                step(batch)
            except Exception as exc:  # noqa: BLE001
                raise BenchError(_raised(f"--model-step {settings.model_step.text}", exc, settings.model_step)) from None
            if cuda:
                torch.cuda.synchronize()
            step_s = time.perf_counter() - s0
        return h2d, step_s

    epochs: List[dict] = []
    intervals: List[float] = []
    waits: List[float] = []
    steps: List[float] = []
    h2ds: List[float] = []
    monitor = _MemoryMonitor() if workers else None
    try:
        if monitor:
            monitor.__enter__()
        phase(f"{name}: warm-up", settings.timeout)
        try:
            iterator = iter(loader)
            for _ in range(settings.warmup):
                try:
                    batch, _ = fetch(iterator)
                except StopIteration:
                    break
                consume(batch)
                advance()
            del iterator
        except BenchError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise BenchError(f"the loader raised during the warm-up: {_one_line(f'{type(exc).__name__}: {exc}')}") from None
        for epoch in range(settings.epochs):
            phase(f"{name}: epoch {epoch + 1}/{settings.epochs}", settings.timeout)
            gc.collect()
            samples = 0
            n = 0
            first = None
            done_at: List[float] = []
            try:
                start = time.perf_counter()
                iterator = iter(loader)
                while n < most:
                    try:
                        batch, wait = fetch(iterator)
                    except StopIteration:
                        break
                    arrived = time.perf_counter()
                    h2d, step_s = consume(batch)
                    now = time.perf_counter()
                    samples += _samples_in(batch, batch_size)
                    if n == 0:
                        first = arrived - start
                    done_at.append(now)
                    waits.append(wait if n else arrived - start)
                    if step_s is not None:
                        steps.append(step_s)
                    if h2d is not None:
                        h2ds.append(h2d)
                    n += 1
                    advance()
                seconds = time.perf_counter() - start
                if monitor:
                    monitor.sample()
                del iterator
            except BenchError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise BenchError(f"the loader raised in epoch {epoch + 1}: {_one_line(f'{type(exc).__name__}: {exc}')}") from None
            if n == 0:
                raise BenchError(f"the loader yielded no batches in epoch {epoch + 1} (an exhausted iterable dataset?)")
            intervals.extend(_windows(done_at, max(1, workers)))
            epochs.append({"batches": n, "samples": samples, "seconds": seconds, "first_batch_s": first,
                           "rate": samples / seconds if seconds else 0.0})
    finally:
        if monitor:
            monitor.__exit__()
    if not intervals:
        intervals = [e["seconds"] / e["batches"] for e in epochs]
    row: Dict[str, Any] = {
        "config": config,
        "label": name,
        "settings": {"batch_size": batch_size, "num_workers": loader.num_workers,
                     "prefetch_factor": loader.prefetch_factor if loader.num_workers else None,
                     "persistent_workers": loader.persistent_workers if loader.num_workers else None,
                     "pin_memory": loader.pin_memory},
        "ms_median": statistics.median(intervals) * 1e3,
        "ms_p90": _quantile(intervals, 0.9) * 1e3,
        "samples_per_s": statistics.median(e["rate"] for e in epochs),
        "epoch_rates": [round(e["rate"], 1) for e in epochs],
        "first_batch_ms": statistics.median(e["first_batch_s"] for e in epochs) * 1e3,
        "workers_mib": (monitor.peak / MiB) if monitor else None,
        "worker_peak_mib": (monitor.peak_each / MiB) if monitor else None,
        "batches": sum(e["batches"] for e in epochs),
        "samples": sum(e["samples"] for e in epochs),
        "epochs": len(epochs),
    }
    if steps:
        busy = sum(waits) + sum(steps) + sum(h / 1e3 for h in h2ds)
        row["wait_fraction"] = sum(waits) / busy if busy else 0.0
        row["step_ms"] = statistics.median(steps) * 1e3
    if h2ds:
        row["h2d_ms"] = statistics.median(h2ds)
    return row


def _windows(done_at: List[float], width: int) -> List[float]:
    """Time per batch over sliding windows of ``width`` consecutive batches (the first batch of the
    epoch is its latency, not counted): N workers deliver in bursts of about N batches, so the gap
    between two arrivals says little; N arrivals apart it is the loader's pace."""
    if len(done_at) < 2:
        return []
    width = min(width, len(done_at) - 1)
    return [(done_at[i] - done_at[i - width]) / width for i in range(width, len(done_at))]


def _quantile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# ====================================================================== parent side


@dataclass
class BenchReport:
    target: dict
    settings: dict
    rows: List[dict]
    best: dict
    baseline: dict
    seconds: float = 0.0

    @property
    def speedup(self) -> float:
        return self.best["samples_per_s"] / self.baseline["samples_per_s"] if self.baseline.get("samples_per_s") else 0.0


def _key(row: dict) -> tuple:
    return tuple(sorted(row["config"].items()))


def run(settings: BenchSettings, *, on_event: Optional[Callable[[str, float, str], None]] = None) -> BenchReport:
    """Describe the target, then measure every setting, one at a time."""
    from dslint.runtime import probe

    probe._warm()
    start = time.monotonic()
    outcomes: Dict[str, Outcome] = {}

    def done(job: dict, outcome: Outcome) -> None:
        outcomes[job["name"]] = outcome

    describe_settings = probe.Settings(settings.spec, settings.kwargs, timeout=settings.timeout, tmp=settings.tmp)
    if on_event:
        on_event("loading", 0.0, f"importing and building {settings.spec.text}")
    run_many([{"name": "target", "fn": probe.describe_target, "args": (describe_settings,), "limit": settings.timeout,
               "log_path": os.path.join(settings.tmp, "target.log")}], on_done=done)
    outcome = outcomes["target"]
    if not outcome.ok:
        raise BenchError(probe._outcome_error(outcome, settings.timeout))
    info = outcome.value
    if "error" in info:
        raise BenchError(info["error"])
    if settings.device == "cuda" and not info.get("cuda"):
        raise BenchError("--device cuda: no CUDA device here (torch.cuda.is_available() is False); "
                         "run without --device to measure loading alone")
    if settings.model_step is not None:
        _check_step(settings)

    rows: List[dict] = []
    measured: Dict[tuple, dict] = {}
    if settings.grid:
        plan = grid_configs(settings.grid)
        staged = False
    else:
        counts = worker_counts(settings.cpus)
        plan = [{"num_workers": w} for w in counts]
        staged = True
    planned_total = len(plan) + (3 + (4 if settings.device == "cuda" else 0) if staged else 0)

    def measure(config: Dict[str, Any]) -> dict:
        index = len(rows)
        name = label(config)

        def event(kind: str, text: str) -> None:
            if on_event is None or kind != "progress":
                return
            try:
                got, total = (int(x) for x in text.split("/"))
            except ValueError:
                return
            on_event(name, (index + got / max(1, total)) / max(planned_total, index + 1), f"{index + 1}/{planned_total} {name}")

        if on_event:
            on_event(name, index / max(planned_total, index + 1), f"{index + 1}/{planned_total} {name}")
        outcomes.clear()
        run_many([{"name": name, "fn": bench_config, "args": (settings, config),
                   "limit": settings.timeout, "exclusive": True,
                   "log_path": os.path.join(settings.tmp, f"config-{index}.log"), "on_event": event}], on_done=done)
        outcome = outcomes[name]
        if not outcome.ok:
            raise BenchError(f"{name}: {probe._outcome_error(outcome, settings.timeout)}")
        if "error" in outcome.value:
            raise BenchError(f"{name}: {outcome.value['error']}")
        row = outcome.value
        row["seconds"] = round(outcome.seconds, 2)
        rows.append(row)
        measured[_key(row)] = row
        return row

    for config in plan:
        measure(config)
    if staged:
        with_workers = [r for r in rows if r["config"].get("num_workers")]
        if with_workers:
            top = max(with_workers, key=lambda r: r["samples_per_s"])
            workers = top["config"]["num_workers"]
            own = top["settings"]
            pins = [False, True] if settings.device == "cuda" else [None]
            for prefetch, persistent, pin in itertools.product((2, 4), (False, True), pins):
                config = {"num_workers": workers, "prefetch_factor": prefetch, "persistent_workers": persistent}
                if pin is not None:
                    config["pin_memory"] = pin
                if own.get("prefetch_factor") == prefetch and bool(own.get("persistent_workers")) == persistent and \
                        (pin is None or bool(own.get("pin_memory")) == pin):
                    continue  # that is the stage-1 row
                measure(config)
    baseline = next((r for r in rows if r["config"].get("num_workers") == 0), rows[0])
    best = max(rows, key=lambda r: r["samples_per_s"])
    if on_event:
        on_event("done", 1.0, "")
    view = {"batches": settings.batches, "epochs": settings.epochs, "warmup": settings.warmup, "device": settings.device,
            "batch_size": rows[0]["settings"].get("batch_size") if rows else None, "grid": settings.grid,
            "model_step": settings.model_step.text if settings.model_step else None, "cpus": settings.cpus,
            "batch_size_source": _batch_source(settings, info)}
    return BenchReport(info, view, rows, best, baseline, round(time.monotonic() - start, 2))


def _batch_source(settings: BenchSettings, info: dict) -> str:
    if settings.batch_size is not None:
        return "--batch-size"
    if info.get("returns") == "DataLoader":
        return "the loader's"
    if "batch_size=" in info.get("loader", "") and info.get("loader_source"):
        return info["loader_source"]
    return "dslint bench's default; --batch-size to change"


def _check_step(settings: BenchSettings) -> None:
    """Import the model step in a child first: a clear error before any measurement."""
    from dslint.runtime import probe

    def resolve(spec: TargetSpec) -> dict:
        try:
            _, text = load_step(spec, load_attr(spec))
        except TargetError as exc:
            return {"error": str(exc)}
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            return {"error": probe._raised(f"--model-step {spec.text}", exc, spec)}
        return {"label": text}

    outcomes: Dict[str, Outcome] = {}
    run_many([{"name": "step", "fn": resolve, "args": (settings.model_step,), "limit": settings.timeout,
               "log_path": os.path.join(settings.tmp, "step.log")}], on_done=lambda job, o: outcomes.update(step=o))
    outcome = outcomes["step"]
    if not outcome.ok:
        raise BenchError(f"--model-step {settings.model_step.text}: {probe._outcome_error(outcome, settings.timeout)}")
    if "error" in outcome.value:
        raise BenchError(outcome.value["error"])


# ====================================================================== output


def _num(value: Optional[float], digits: int = 1) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _setting(row: dict, key: str) -> str:
    if row["config"].get("num_workers", row["settings"].get("num_workers")) == 0 and key in ("prefetch_factor", "persistent_workers"):
        return "-"
    value = row["settings"].get(key)
    return "-" if value is None else str(value)


def render_text(report: BenchReport) -> str:
    from dslint.runtime.probe import header as probe_header

    t = report.target
    s = report.settings
    lines = [f"dslint bench {t['target']}"]
    lines += [line for line in _header(report, probe_header) if line]
    lines.append("")
    wait = any("wait_fraction" in r for r in report.rows)
    h2d = any("h2d_ms" in r for r in report.rows)
    columns = ["num_workers", "prefetch_factor", "persistent_workers", "pin_memory", "ms/batch median", "ms/batch p90",
               "samples/s", "first batch ms", "workers' peak MiB"]
    if h2d:
        columns.append("H2D ms/batch")
    if wait:
        columns.append("waiting for data")
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * len(columns))
    for row in report.rows:
        cells = [str(row["settings"].get("num_workers")), _setting(row, "prefetch_factor"), _setting(row, "persistent_workers"),
                 _setting(row, "pin_memory"), _num(row["ms_median"]), _num(row["ms_p90"]), _num(row["samples_per_s"], 0),
                 _num(row["first_batch_ms"], 0), _num(row["workers_mib"], 0)]
        if h2d:
            cells.append(_num(row.get("h2d_ms"), 2))
        if wait:
            cells.append(f"{row['wait_fraction']:.0%}" if "wait_fraction" in row else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(recommendation(report))
    return "\n".join(lines) + "\n"


def _header(report: BenchReport, probe_header) -> List[str]:
    from dslint.runtime.probe import Report

    fake = Report(report.target, {"workers": 0, "epochs": 0, "samples": 0}, [])
    head = probe_header(fake)
    s = report.settings
    bs = s.get("batch_size")
    measured = (f"measured: batch_size={bs} ({s['batch_size_source']}); a {s['warmup']}-batch warm-up, then {s['epochs']} "
                f"epochs of at most {s['batches']} batches per setting, each setting in a fresh process; "
                f"{'batches copied to CUDA; ' if s['device'] == 'cuda' else ''}"
                f"{'model step ' + s['model_step'] + '; ' if s.get('model_step') else ''}"
                f"{s['cpus']} CPUs")
    return [head[0], head[1], measured] + head[3:]


def recommendation(report: BenchReport) -> str:
    best, base = report.best, report.baseline
    text = f"best: {best['label']}: {_num(best['samples_per_s'], 0)} samples/s"
    if best is base:
        text += " (no setting with workers was faster than num_workers=0 here)"
    else:
        text += f", {report.speedup:.2f}x num_workers=0 ({_num(base['samples_per_s'], 0)} samples/s)"
    if "wait_fraction" in best:
        text += f"; the model step waits for data {best['wait_fraction']:.0%} of the time"
        if best is not base and "wait_fraction" in base:
            text += f" (num_workers=0: {base['wait_fraction']:.0%})"
    return text


def render_json(report: BenchReport) -> str:
    data = {
        "target": report.target,
        "settings": report.settings,
        "rows": report.rows,
        "best": {"config": report.best["config"], "label": report.best["label"],
                 "samples_per_s": report.best["samples_per_s"], "speedup": round(report.speedup, 3)},
        "baseline": {"config": report.baseline["config"], "samples_per_s": report.baseline["samples_per_s"]},
        "recommendation": recommendation(report),
        "seconds": report.seconds,
    }
    return json.dumps(data, indent=2, default=str) + "\n"


def plot(report: BenchReport, path: str) -> None:
    """samples/s against num_workers, one line per combination of the other settings."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: Dict[str, List[tuple]] = {}
    base = report.baseline
    with_workers = [r for r in report.rows if r["config"].get("num_workers") != 0]
    varied = [k for k in ("prefetch_factor", "persistent_workers", "pin_memory")
              if len({r["settings"].get(k) for r in with_workers}) > 1]
    for row in with_workers:
        name = ", ".join(f"{k}={row['settings'].get(k)}" for k in varied) or "samples/s"
        series.setdefault(name, []).append((row["settings"]["num_workers"], row["samples_per_s"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in sorted(series.items()):
        points = sorted(set(points))
        if base:
            points = [(0, base["samples_per_s"])] + points
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    if not series and base:
        ax.plot([0], [base["samples_per_s"]], marker="o", label="num_workers=0")
    best = report.best
    ax.plot([best["settings"]["num_workers"]], [best["samples_per_s"]], marker="*", markersize=16, color="gold",
            markeredgecolor="black", linestyle="none", label=f"best ({report.speedup:.2f}x num_workers=0)")
    ax.set_xticks(sorted({r["settings"]["num_workers"] for r in report.rows}))
    ax.set_xlabel("num_workers")
    ax.set_ylabel("samples/s")
    ax.set_title(f"dslint bench {report.target['target']}", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
