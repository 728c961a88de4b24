"""Reusable runtime probes: each runs a dataset (or loader) through a real
``torch.utils.data.DataLoader`` with worker processes and returns a ``Figure``.

A probe takes ``make``: a zero-argument callable returning a Dataset or a DataLoader
(called inside the probe, once per configuration, so state consumed by one
configuration never leaks into the next), or the object itself; and
``loader_kwargs``: the DataLoader keywords (ignored when ``make`` gives a loader,
whose own settings are used).

``Figure.symptom`` is the probe's own judgement on one dataset (what ``dslint
probe`` reports); ``dslint verify`` compares the figures of a bad/good pair
(each rule class's ``symptom``). ``Figure.data`` holds the raw numbers.

The probes of what workers inherit from the parent (integrity, pickling, memory, RNG
streams, dataset state) are in ``dslint.runtime.worker_probes``.

Probes never time themselves out: run them through ``dslint.runtime.isolate`` for
time limits and worker cleanup.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils.data import DataLoader

from dslint.runtime.common import fmt_number, shorten
from dslint.runtime.instrument import Session, apply_overrides, loader_kwargs_of, quiet_warnings
from dslint.runtime.isolate import progress
from dslint.runtime.recording import Measure


@dataclass
class Figure:
    text: str
    symptom: bool
    data: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"text": self.text, "symptom": self.symptom, "data": self.data}


def build(make):
    """``make()`` when it is a zero-argument callable, else ``make`` itself (a Dataset or DataLoader)."""
    return make() if callable(make) and not isinstance(make, (DataLoader, torch.utils.data.Dataset)) else make


def dataset_of(obj):
    """The dataset of a DataLoader, or ``obj`` itself."""
    return obj.dataset if isinstance(obj, DataLoader) else obj


def worker_count(loader_kwargs: Optional[dict], target, at_least: int) -> int:
    """The loader's own num_workers, at least ``at_least``."""
    current = target.num_workers if isinstance(target, DataLoader) else (loader_kwargs or {}).get("num_workers", 0)
    return max(at_least, current or 0)


def by_pid(records: List[dict]) -> Dict[int, List[dict]]:
    """Records per process, each series in sample order."""
    out: Dict[int, List[dict]] = defaultdict(list)
    for record in records:
        out[record["pid"]].append(record)
    for series in out.values():
        series.sort(key=lambda r: r["n"])
    return out


def _errors(records: List[dict]) -> List[str]:
    return [r["err"] for r in records if "err" in r]


def slope(points: Sequence[Tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    if len(points) < 2:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    den = sum((x - mx) ** 2 for x, _ in points)
    if den == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / den


# ------------------------------------------------------------------ descriptors


def fd_growth(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, epochs: int = 2) -> Figure:
    """Descriptors per worker over samples (slope from /proc/self/fd) and ResourceWarnings in workers."""
    with Session(Measure(fds=True, warnings=True)) as session:
        target = build(make)
        n = worker_count(loader_kwargs, target, workers)
        loader = session.loader(target, loader_kwargs, num_workers=n)
        its = session.epochs(loader, epochs, label="fd-growth: ")
    records = [r for it in its for r in it.records]
    per = []
    warned = 0
    message = ""
    for pid, series in by_pid(records).items():
        first = series[0]
        points = [(r["n"], r["fd"]) for r in series if "fd" in r]
        # descriptors still open when __getitem__ returns, minus those open when it was called:
        # immune to the IPC descriptors the worker loop opens between samples
        deltas = [r["fd"] - r["fd_in"] for r in series if "fd" in r and "fd_in" in r]
        per.append({
            "pid": pid, "samples": len(series), "slope": sum(deltas) / len(deltas) if deltas else slope(points),
            "trend": slope(points),
            "fd_start": first.get("fd0", points[0][1] if points else -1), "fd_end": points[-1][1] if points else -1,
            "files_at_start": first.get("files0", 0), "nofile": first.get("nofile"),
        })
        warned += max((r.get("rw", 0) for r in series), default=0)
        message = message or next((r["rwmsg"] for r in series if r.get("rwmsg")), "")
    if not per:
        return Figure("no samples were produced", False, {"samples": 0})
    worst = max(per, key=lambda w: w["slope"])
    samples = len(records)
    held = max(w["files_at_start"] for w in per)
    data = {
        "slope": round(worst["slope"], 3), "slopes": [round(w["slope"], 3) for w in per], "workers": per,
        "resource_warnings": warned, "resource_warning": message, "samples": samples, "num_workers": n,
        "files_at_start": held, "epochs": epochs,
    }
    text = f"{worst['slope']:+.2f} fd/sample per worker (fds {worst['fd_start']}\u2192{worst['fd_end']} over {worst['samples']} samples)"
    if worst["slope"] >= 0.5 and worst.get("nofile"):
        left = (worst["nofile"] - worst["fd_end"]) / worst["slope"]
        text += f", EMFILE after ~{left:,.0f} more samples at ulimit -n {worst['nofile']}"
        data["samples_to_emfile"] = int(left)
    text += f"; {warned} ResourceWarning{'s' if warned != 1 else ''} in workers"
    if message:
        text += f" ({shorten(strip_dirs(message), 90)})"
    if held >= 16:
        text += f"; {held} regular files open in each worker at start"
    return Figure(text, worst["slope"] >= 0.5 or warned > 0 or held >= 16, data)


def strip_dirs(message: str) -> str:
    """``name='/tmp/x/frame_3.gif'`` -> ``name='frame_3.gif'`` (temporary paths change every run)."""
    import re

    return re.sub(r"name='(?:[^']*/)?([^'/]*)'", r"name='\1'", message)


# --------------------------------------------------------------- epoch counts


DEFAULT_EPOCH_CONFIGS = (
    ("as configured", {}),
    ("num_workers=0", {"num_workers": 0}),
    ("2 persistent workers", {"num_workers": 2, "persistent_workers": True}),
)


def _config_key(target, loader_kwargs, overrides) -> tuple:
    kw = loader_kwargs_of(target) if isinstance(target, DataLoader) else dict(loader_kwargs or {})
    kw = apply_overrides(kw, overrides)
    workers = kw.get("num_workers", 0) or 0
    return (workers, bool(kw.get("persistent_workers")) and workers > 0)


def _config_label(key: tuple) -> str:
    workers, persistent = key
    if not workers:
        return "num_workers=0"
    return f"{workers} {'persistent ' if persistent else ''}workers"


def epoch_counts(make, loader_kwargs: Optional[dict] = None, *, epochs: int = 3,
                 configs: Sequence[Tuple[str, dict]] = DEFAULT_EPOCH_CONFIGS) -> Figure:
    """Samples per epoch across epochs, per loader configuration (0 workers, persistent workers ...)."""
    results = []
    seen = set()
    for _, overrides in configs:
        with Session(Measure()) as session:
            target = build(make)
            key = _config_key(target, loader_kwargs, overrides)
            if key in seen:
                continue
            seen.add(key)
            loader = session.loader(target, loader_kwargs, **overrides)
            its = session.epochs(loader, epochs, label=f"{_config_label(key)}: ")
        counts = [len(it.records) for it in its]
        errors = sorted(set(e for it in its for e in _errors(it.records)))
        short = counts[0] > 0 and any(c < counts[0] for c in counts[1:])
        results.append({"config": _config_label(key), "counts": counts, "short": short, "errors": errors})
    text = "; ".join(f"{'/'.join(str(c) for c in r['counts'])} ({r['config']})" for r in results)
    return Figure(f"samples per epoch {text}", any(r["short"] for r in results), {"configs": results, "epochs": epochs})


# ------------------------------------------------------------------ duplicates


def duplicates(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, epochs: int = 2,
               cap: Optional[int] = None) -> Figure:
    """Samples per epoch with N workers against num_workers=0, duplicates told apart from
    identical content.

    A duplicate is the same element of the stream delivered twice, judged by identity, never
    by value alone: samples equal in value (constant tensors, a padded record) are *identical
    content*, counted apart and never taken for duplicates. The evidence, in order:

    - ``count``: a stream read to its end (fewer samples than ``cap``, the per-worker limit):
      N workers that each replay it deliver N times the samples of ``num_workers=0``;
    - ``order``: a stream cut at ``cap``: every worker's k-th sample is the stream's k-th
      (compared position by position, on a stretch of the stream whose samples differ);
    - ``content``: a stream cut at ``cap`` whose samples all differ: equal values are then the
      same sample, and samples/distinct is the number of copies.

    Otherwise (a cut stream with identical content in it) duplicates cannot be told from
    identical content: ``basis`` is None and nothing is reported."""
    out: Dict[str, Any] = {}
    streams: Dict[str, List[List[str]]] = {}
    for label, overrides in (("single", {"num_workers": 0}), ("workers", None)):
        with Session(Measure(hash=True)) as session:
            target = build(make)
            if overrides is None:
                overrides = {"num_workers": worker_count(loader_kwargs, target, workers)}
            loader = session.loader(target, loader_kwargs, **overrides)
            its = session.epochs(loader, epochs, label=f"duplicates ({label}): ")
        per_epoch = []
        for i, it in enumerate(its):
            records = [r for r in it.records if "h" in r]
            hashes = [r["h"] for r in records]
            per_epoch.append({"samples": len(hashes), "distinct": len(set(hashes)),
                              "max_copies": max(Counter(hashes).values(), default=0)})
            if i == 0:  # each process's samples in the order it produced them
                by_process: Dict[int, List[dict]] = defaultdict(list)
                for r in records:
                    by_process[r.get("pid", 0)].append(r)
                streams[label] = [[r["h"] for r in sorted(rs, key=lambda r: r.get("n", 0))] for rs in by_process.values()]
        out[label] = {"num_workers": overrides["num_workers"], "epochs": per_epoch}
    single, multi = out["single"]["epochs"][0], out["workers"]["epochs"][0]
    n = out["workers"]["num_workers"]
    identical = single["samples"] - single["distinct"]
    complete = cap is None or single["samples"] < cap
    stream = streams.get("single", [[]])[0] if streams.get("single") else []
    replaying = [s for s in streams.get("workers", []) if len(s) >= 2 and s == stream[: len(s)]
                 and len(set(s)) >= 2]
    factor: Optional[float] = None
    basis: Optional[str] = None
    if complete:
        basis, factor = "count", (multi["samples"] / single["samples"] if single["samples"] else 0.0)
    elif len(replaying) >= 2:
        basis, factor = "order", float(len(replaying))
    elif not identical:
        basis, factor = "content", (multi["samples"] / multi["distinct"] if multi["distinct"] else 0.0)
    copies = f" ({factor:.1f}x)" if factor is not None else ""
    text = (f"{n} workers: {multi['samples']} samples/epoch, {multi['distinct']} distinct{copies}; "
            f"num_workers=0: {single['samples']} samples, {single['distinct']} distinct")
    if basis == "order":
        text += f"; {len(replaying)} workers each replay the stream from its start, sample by sample"
    if identical:
        text += (f"; {identical} of the {single['samples']} samples with num_workers=0 repeat another's content "
                 f"(identical values, not duplicates)")
    if basis is None:
        text += f"; the stream is cut at {cap:,} samples per worker, so duplicates cannot be told from identical content"
    out.update(factor=round(factor, 3) if factor is not None else None, basis=basis, identical=identical, cap=cap)
    return Figure(text, factor is not None and factor >= 1.5, out)


# ------------------------------------------------------------------ timing


def sample_time(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, epochs: int = 2,
                max_samples: Optional[int] = 48) -> Figure:
    """Time inside ``__getitem__``/``__next__`` per sample (median, in the workers) and epoch wall time.

    Each epoch stops after about ``max_samples`` samples (None: whole epochs).
    """
    with Session(Measure(time=True)) as session:
        target = build(make)
        n = worker_count(loader_kwargs, target, workers)
        loader = session.loader(target, loader_kwargs, num_workers=n)
        max_batches = None
        if max_samples:
            per_batch = loader.batch_size or getattr(loader.batch_sampler, "batch_size", None) or 1
            max_batches = max(1, -(-max_samples // per_batch))
        its = session.epochs(loader, epochs, label="sample time: ", max_batches=max_batches)
    times = [r["t"] for it in its for r in it.records if "t" in r]
    if not times:
        return Figure("no samples were produced", False, {"samples": 0})
    median = statistics.median(times)
    epoch_s = [round(it.seconds, 4) for it in its]
    text = f"{fmt_number(median * 1e6)} \u00b5s/sample (median of {len(times)}, {n} workers)"
    return Figure(text, False, {"median_s": median, "mean_s": sum(times) / len(times), "samples": len(times),
                                "epoch_s": epoch_s, "num_workers": n})


def own_and_best(rows: List[dict]) -> Tuple[dict, dict, float]:
    """Throughput rows: (the loader's own setting, the fastest, how much faster that is)."""
    own = next(r for r in rows if r["own"])
    best = max(rows, key=lambda r: r["rate"])
    return own, best, best["rate"] / own["rate"] if own["rate"] else 0.0


def ratio(bad: Figure, good: Figure, key: str = "median_s") -> float:
    b, g = bad.data.get(key), good.data.get(key)
    if not b or not g:
        return float("inf") if b and not g else 0.0
    return b / g


def throughput(make, loader_kwargs: Optional[dict] = None, *, worker_counts: Sequence[int] = (0, 2), epochs: int = 2) -> Figure:
    """Samples/s with the loader's own settings and with each ``num_workers`` in ``worker_counts``
    (the best epoch's rate; worker start-up counts in every epoch without persistent workers)."""
    rows = []
    # worker settings are tried with persistent workers: the best epoch then measures loading, not start-up
    configs: List[Tuple[str, Optional[dict]]] = [("as configured", None)] + [
        (f"num_workers={w}", {"num_workers": w, "persistent_workers": True} if w else {"num_workers": 0}) for w in worker_counts]
    seen = set()
    for label, overrides in configs:
        with Session(Measure()) as session:
            target = build(make)
            key = _config_key(target, loader_kwargs, overrides or {})
            if key in seen:
                continue
            seen.add(key)
            loader = session.loader(target, loader_kwargs, **(overrides or {}))
            its = session.epochs(loader, epochs, label=f"throughput {_config_label(key)}: ")
        samples = sum(len(it.records) for it in its)
        seconds = sum(it.seconds for it in its)
        # the best epoch: on a shared machine the slowest epochs measure the neighbours, not the loader
        rates = [len(it.records) / it.seconds for it in its if it.seconds]
        rows.append({"config": _config_label(key), "own": overrides is None, "num_workers": key[0],
                     "samples": samples, "seconds": round(seconds, 4), "mean_rate": samples / seconds if seconds else 0.0,
                     "epoch_rates": [round(r, 1) for r in rates], "rate": max(rates, default=0.0)})
    own, best, speedup = own_and_best(rows)
    text = f"{fmt_number(own['rate'])} samples/s ({own['config']}, best of {epochs} epochs)"
    if best is not own:
        text += f"; best {fmt_number(best['rate'])} samples/s with {best['config']} ({speedup:.2f}x)"
    return Figure(text, speedup >= 1.3, {"rows": rows, "rate": own["rate"], "best": best["config"], "speedup": round(speedup, 3)})


# ------------------------------------------------------------------ exceptions


def exception_at(make, loader_kwargs: Optional[dict] = None, *, epochs: int = 2, call_len: bool = False) -> Figure:
    """The exception (type and message) at construction, ``len()``, or the first ``iter()``/epochs."""
    stage = "construction"
    try:
        with quiet_warnings():
            obj = build(make)
            if call_len:
                stage = "len()"
                len(obj)
            stage = "iteration"
            loader = obj if isinstance(obj, DataLoader) else DataLoader(obj, **(loader_kwargs or {}))
            batches = 0
            for epoch in range(epochs):
                for _ in loader:
                    batches += 1
                    progress(f"epoch {epoch + 1}, {batches} batches")
    except Exception as exc:  # noqa: BLE001 - that is the measurement
        message = f"{type(exc).__name__}: {exc}"
        return Figure(f"{shorten(message, 160)} (at {stage})", True,
                      {"stage": stage, "type": type(exc).__name__, "message": str(exc), "exception": message})
    return Figure(f"no exception: {batches} batches over {epochs} epoch{'s' if epochs != 1 else ''}", False, {"batches": batches, "epochs": epochs})


# ------------------------------------------------------------------ loop cost


def loop_cost(loop: Callable[[], Any]) -> Figure:
    """Run a training loop (a zero-argument callable that builds and iterates loaders) and count
    ``iter()`` calls, worker processes started, wall time and the indices each iteration fetched."""
    with Session(Measure(index=True)) as session:
        start = time.perf_counter()
        loop()
        seconds = time.perf_counter() - start
    its = [it for it in session.iterations]
    pids = {r["pid"] for it in its for r in it.records}
    # every worker process the iterators ran (their pids, read from the iterator when it
    # starts), and those that produced a sample before the iterator was dropped
    worker_pids = {pid for it in its for pid in it.worker_pids}
    worker_pids |= {r["pid"] for it in its for r in it.records if r.get("wid", -1) >= 0}
    # where each iteration started reading (the first index it fetched; prefetching means the
    # rest of what it fetched depends on when the iterator was dropped)
    starts = [min((r["idx"] for r in it.records if isinstance(r.get("idx"), int)), default=None) for it in its]
    distinct = len(set(starts))
    text = (f"{len(its)} iter() call{'s' if len(its) != 1 else ''}, {len(worker_pids)} worker processes started, "
            f"{fmt_number(seconds)} s")
    if len(its) > 1 and distinct == 1 and starts[0] is not None:
        text += f"; every iteration started again at index {starts[0]}"
    return Figure(text, len(its) > 1 and len(worker_pids) > len(its), {
        "iterations": len(its), "worker_processes": len(worker_pids), "processes": len(pids), "seconds": seconds,
        "distinct_starts": distinct, "samples": sum(len(it.records) for it in its)})
