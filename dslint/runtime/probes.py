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
from torch.utils.data import DataLoader, IterableDataset, RandomSampler

from dslint.runtime.instrument import (
    Iteration,
    Measure,
    Session,
    digest,
    loader_kwargs_of,
    apply_overrides,
    handles_in,
    quiet_warnings,
    uss_bytes,
)
from dslint.runtime.isolate import phase, progress

MiB = 1024 * 1024


@dataclass
class Figure:
    text: str
    symptom: bool
    data: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"text": self.text, "symptom": self.symptom, "data": self.data}


def _make(make):
    return make() if callable(make) and not isinstance(make, (DataLoader, torch.utils.data.Dataset)) else make


def _dataset_of(obj):
    return obj.dataset if isinstance(obj, DataLoader) else obj


def _workers(loader_kwargs: Optional[dict], target, at_least: int) -> int:
    current = target.num_workers if isinstance(target, DataLoader) else (loader_kwargs or {}).get("num_workers", 0)
    return max(at_least, current or 0)


def _fmt(n: float) -> str:
    if n >= 100:
        return f"{n:,.0f}"
    if n >= 10:
        return f"{n:.1f}"
    if n >= 1:
        return f"{n:.2f}"
    return f"{n:.2g}"


def _by_pid(records: List[dict]) -> Dict[int, List[dict]]:
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
        target = _make(make)
        n = _workers(loader_kwargs, target, workers)
        loader = session.loader(target, loader_kwargs, num_workers=n)
        its = session.epochs(loader, epochs, label="fd-growth: ")
    records = [r for it in its for r in it.records]
    per = []
    warned = 0
    message = ""
    for pid, series in _by_pid(records).items():
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
        text += f" ({_short(strip_dirs(message), 90)})"
    if held >= 16:
        text += f"; {held} regular files open in each worker at start"
    return Figure(text, worst["slope"] >= 0.5 or warned > 0 or held >= 16, data)


def strip_dirs(message: str) -> str:
    """``name='/tmp/x/frame_3.gif'`` -> ``name='frame_3.gif'`` (temporary paths change every run)."""
    import re

    return re.sub(r"name='(?:[^']*/)?([^'/]*)'", r"name='\1'", message)


def _short(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


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
            target = _make(make)
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


def duplicates(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, epochs: int = 2) -> Figure:
    """Samples per epoch and distinct samples (hash of each) with N workers, against num_workers=0."""
    out = {}
    for label, overrides in (("single", {"num_workers": 0}), ("workers", None)):
        with Session(Measure(hash=True)) as session:
            target = _make(make)
            if overrides is None:
                overrides = {"num_workers": _workers(loader_kwargs, target, workers)}
            loader = session.loader(target, loader_kwargs, **overrides)
            its = session.epochs(loader, epochs, label=f"duplicates ({label}): ")
        per_epoch = []
        for it in its:
            hashes = [r.get("h") for r in it.records if "h" in r]
            per_epoch.append({"samples": len(hashes), "distinct": len(set(hashes)),
                              "max_copies": max(Counter(hashes).values(), default=0)})
        out[label] = {"num_workers": overrides["num_workers"], "epochs": per_epoch}
    single, multi = out["single"]["epochs"][0], out["workers"]["epochs"][0]
    base = single["samples"] / single["distinct"] if single["distinct"] else 1.0
    factor = multi["samples"] / multi["distinct"] if multi["distinct"] else 0.0
    excess = factor / base if base else factor
    n = out["workers"]["num_workers"]
    text = (f"{n} workers: {multi['samples']} samples/epoch, {multi['distinct']} distinct ({factor:.1f}x); "
            f"num_workers=0: {single['samples']} samples, {single['distinct']} distinct")
    out["factor"] = round(factor, 3)
    out["excess"] = round(excess, 3)
    return Figure(text, excess >= 1.5, out)


# ------------------------------------------------------------------- integrity


def _identity_collate(batch):
    return len(batch) if isinstance(batch, list) else 1


def integrity(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, reads: int = 20000,
              budget: float = 8.0, batch_size: int = 64) -> Figure:
    """Samples read in N forked workers against the same samples read in one process.

    Catches records corrupted by a file offset shared across forked workers (a handle
    opened in ``__init__``), decoder errors, handles present in the dataset at worker
    start, and whether the dataset pickles (spawn/forkserver).
    """
    with quiet_warnings():
        pickled = pickle_check(_dataset_of(_make(make)))  # untouched, as a DataLoader would pickle it
        reference_target = _dataset_of(_make(make))
    iterable = isinstance(reference_target, IterableDataset)
    phase_start = time.perf_counter()
    unstable = 0
    if iterable:
        reference = Counter(digest(x) for x in reference_target)
        reference_size = sum(reference.values())
        per_sample = (time.perf_counter() - phase_start) / max(1, reference_size)
    else:
        size = len(reference_target)
        first = [digest(reference_target[i]) for i in range(size)]
        per_sample = (time.perf_counter() - phase_start) / max(1, size)
        second = [digest(reference_target[i]) for i in range(size)]
        reference = {i: h for i, (h, h2) in enumerate(zip(first, second)) if h == h2}
        unstable = size - len(reference)
        reference_size = size
    reads = int(min(reads, max(2000, budget / max(per_sample * 1.5, 1e-6))))
    with Session(Measure(hash=True, index=True, catch=True, handles=True)) as session:
        target = _dataset_of(_make(make))
        n = _workers(loader_kwargs, target, workers)
        if iterable:
            loader = session.loader(target, {}, num_workers=n, batch_size=batch_size, collate_fn=_identity_collate)
            epochs = max(1, min(20, reads // max(1, reference_size)))
        else:
            sampler = RandomSampler(range(reference_size), replacement=True, num_samples=reads,
                                    generator=torch.Generator().manual_seed(0))
            loader = session.loader(target, {}, num_workers=n, batch_size=batch_size, sampler=sampler,
                                    collate_fn=_identity_collate)
            epochs = 1
        its = session.epochs(loader, epochs, label="integrity: ")
    records = [r for it in its for r in it.records]
    wrong = errors = checked = 0
    examples: List[str] = []
    error_kinds: Counter = Counter()
    for record in records:
        if "err" in record:
            errors += 1
            error_kinds[record["err"].split(":")[0]] += 1
            if len(examples) < 3:
                examples.append(f"index {record.get('idx')}: {_short(record['err'], 80)}")
            continue
        if iterable:
            checked += 1
            if record.get("h") not in reference:
                wrong += 1
        else:
            expected = reference.get(record.get("idx"))
            if expected is None:
                continue
            checked += 1
            if record.get("h") != expected:
                wrong += 1
                if len(examples) < 3:
                    examples.append(f"index {record.get('idx')} came back different")
    at_start = sorted(set(h for r in records for h in r.get("handles", [])))
    text = f"{wrong} wrong and {errors} failed of {checked + errors:,} reads in {n} forked workers"
    if error_kinds:
        text += f" ({', '.join(f'{k} x{v}' for k, v in error_kinds.most_common(2))})"
    if at_start:
        text += f"; held at worker start: {', '.join(at_start[:3])}"
    text += f"; spawn/forkserver: {pickled.text}"
    data = {"wrong": wrong, "errors": errors, "reads": checked + errors, "num_workers": n, "unstable_indices": unstable,
            "examples": examples, "handles_at_start": at_start, "pickle": pickled.data}
    return Figure(text, wrong > 0 or errors > 0 or pickled.symptom, data)


# ------------------------------------------------------------------ timing


def sample_time(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, epochs: int = 2,
                max_samples: Optional[int] = 48) -> Figure:
    """Time inside ``__getitem__``/``__next__`` per sample (median, in the workers) and epoch wall time.

    Each epoch stops after about ``max_samples`` samples (None: whole epochs).
    """
    with Session(Measure(time=True)) as session:
        target = _make(make)
        n = _workers(loader_kwargs, target, workers)
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
    text = f"{_fmt(median * 1e6)} \u00b5s/sample (median of {len(times)}, {n} workers)"
    return Figure(text, False, {"median_s": median, "mean_s": sum(times) / len(times), "samples": len(times),
                                "epoch_s": epoch_s, "num_workers": n})


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
            target = _make(make)
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
    own = next(r for r in rows if r["own"])
    best = max(rows, key=lambda r: r["rate"])
    speedup = best["rate"] / own["rate"] if own["rate"] else 0.0
    text = f"{_fmt(own['rate'])} samples/s ({own['config']}, best of {epochs} epochs)"
    if best is not own:
        text += f"; best {_fmt(best['rate'])} samples/s with {best['config']} ({speedup:.2f}x)"
    return Figure(text, speedup >= 1.3, {"rows": rows, "rate": own["rate"], "best": best["config"], "speedup": round(speedup, 3)})


# ------------------------------------------------------------------ exceptions


def exception_at(make, loader_kwargs: Optional[dict] = None, *, epochs: int = 2, call_len: bool = False) -> Figure:
    """The exception (type and message) at construction, ``len()``, or the first ``iter()``/epochs."""
    stage = "construction"
    try:
        with quiet_warnings():
            obj = _make(make)
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
        return Figure(f"{_short(message, 160)} (at {stage})", True,
                      {"stage": stage, "type": type(exc).__name__, "message": str(exc), "exception": message})
    return Figure(f"no exception: {batches} batches over {epochs} epoch{'s' if epochs != 1 else ''}", False, {"batches": batches, "epochs": epochs})


# ------------------------------------------------------------------ pickling


def find_unpicklable(obj, path: str = "obj", depth: int = 0) -> Optional[Tuple[str, str]]:
    """(attribute path, error) of the innermost object that fails to pickle, or None."""
    from multiprocessing.reduction import ForkingPickler

    try:
        ForkingPickler.dumps(obj)
        return None
    except Exception as exc:  # noqa: BLE001
        error = f"{type(exc).__name__}: {exc}"
    if depth < 6:
        children: List[Tuple[str, Any]] = []
        if isinstance(obj, dict):
            children = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
        elif isinstance(obj, (list, tuple, set)):
            children = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
        else:
            import functools

            if isinstance(obj, functools.partial):
                children = [(f"{path}.func", obj.func)] + [(f"{path}.args[{i}]", a) for i, a in enumerate(obj.args)]
            state = getattr(obj, "__dict__", None)
            if isinstance(state, dict):
                children += [(f"{path}.{k}", v) for k, v in state.items()]
        for child_path, child in children:
            found = find_unpicklable(child, child_path, depth + 1)
            if found is not None:
                return found
    return path, error


def pickle_check(obj, name: str = "dataset") -> Figure:
    found = find_unpicklable(obj, name)
    if found is None:
        return Figure("pickles", False, {"ok": True})
    path, error = found
    return Figure(f"{_short(error, 110)} at {path}", True, {"ok": False, "path": path, "error": error})


def pickling(make, loader_kwargs: Optional[dict] = None, *, context: str = "spawn", workers: int = 2) -> Figure:
    """What spawn/forkserver workers need pickled (dataset, collate_fn, worker_init_fn), the path that fails,
    and a real ``DataLoader(multiprocessing_context=context)`` epoch."""
    with quiet_warnings():
        target = _make(make)
    kwargs = loader_kwargs_of(target) if isinstance(target, DataLoader) else dict(loader_kwargs or {})
    dataset = _dataset_of(target)
    parts = {"dataset": dataset, "collate_fn": kwargs.get("collate_fn"), "worker_init_fn": kwargs.get("worker_init_fn")}
    failures = []
    for name, part in parts.items():
        if part is None:
            continue
        found = find_unpicklable(part, name)
        if found is not None:
            failures.append({"path": found[0], "error": found[1]})
    n = max(workers, kwargs.get("num_workers") or 0)
    kwargs = apply_overrides(kwargs, {"num_workers": n, "multiprocessing_context": context})
    run: Dict[str, Any]
    phase(f"pickling: a {context} DataLoader epoch", 60)
    try:
        with quiet_warnings():
            loader = DataLoader(dataset, **kwargs)
            batches = 0
            for _ in loader:
                batches += 1
                progress(f"{context}: {batches} batches")
        run = {"ok": True, "batches": batches}
    except Exception as exc:  # noqa: BLE001
        run = {"ok": False, "exception": f"{type(exc).__name__}: {exc}"}
    if run["ok"]:
        text = f"{context}: {run['batches']} batches from {n} workers"
    else:
        text = f"{context}: {_short(run['exception'], 120)}"
    if failures:
        text += f"; fails to pickle: {failures[0]['path']}"
    else:
        text += "; dataset, collate_fn and worker_init_fn pickle (forkserver too)"
    return Figure(text, bool(failures) or not run["ok"], {"context": context, "run": run, "failures": failures, "num_workers": n})


# ------------------------------------------------------------------ memory


def worker_memory(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, epochs: int = 2,
                  persistent: bool = True, uss_every: Optional[int] = None) -> Figure:
    """Worker private memory (USS) from start to the end of ``epochs``, against the dataset's size in the parent.

    USS is read every ``uss_every`` samples per worker (default: about 8 readings per worker and epoch)."""
    import gc

    gc.collect()
    before = uss_bytes()
    with Session(Measure(uss_every=1, sparse=True)) as session:
        target = _make(make)
        gc.collect()
        footprint = max(0, uss_bytes() - before)
        dataset = _dataset_of(target)
        try:
            size = len(dataset)
        except TypeError:
            size = 1000
        n = _workers(loader_kwargs, target, workers)
        session.measure.uss_every = uss_every or max(1, size // (n * 8))
        overrides = {"num_workers": n}
        if persistent:
            overrides["persistent_workers"] = True
        loader = session.loader(target, loader_kwargs, **overrides)
        its = session.epochs(loader, epochs, label="worker memory: ")
    per = []
    for pid, series in _by_pid([r for it in its for r in it.records]).items():
        start = series[0].get("uss0", -1)
        values = [r["uss"] for r in series if "uss" in r]
        if start < 0 or not values:
            continue
        per.append({"pid": pid, "start": start, "end": values[-1], "peak": max(values), "growth": max(values) - start})
    if not per:
        return Figure("no worker memory samples", False, {})
    worst = max(per, key=lambda w: w["growth"])
    growth = worst["growth"] / MiB
    fp = footprint / MiB
    text = (f"worker USS {worst['start'] / MiB:.0f}\u2192{worst['peak'] / MiB:.0f} MiB (+{growth:.0f} MiB) over {epochs} epoch{'s' if epochs != 1 else ''}; "
            f"the dataset holds {fp:.0f} MiB in the parent")
    symptom = growth >= 16 and growth >= 0.5 * fp
    return Figure(text, symptom, {"growth_mib": round(growth, 1), "footprint_mib": round(fp, 1), "workers": per,
                                  "num_workers": n, "epochs": epochs})


# ------------------------------------------------------------------ RNG streams


def rng_streams(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, epochs: int = 2) -> Figure:
    """RNG state before each sample, per source (global random/numpy/torch, RNG objects in the dataset).

    Counts samples that drew from the same state as a sample in another worker of the
    same epoch (duplicated augmentations) and states repeated from epoch 1 (identical
    streams every epoch). Only sources that are actually drawn from are counted.
    """
    with Session(Measure(rng=True)) as session:
        target = _make(make)
        n = _workers(loader_kwargs, target, workers)
        loader = session.loader(target, loader_kwargs, num_workers=n)
        its = session.epochs(loader, epochs, label="rng: ")
    drawn = set()
    for it in its:
        for series in _by_pid(it.records).values():
            for a, b in zip(series, series[1:]):
                for source, value in a.get("rng", {}).items():
                    if b.get("rng", {}).get(source) != value:
                        drawn.add(source)
    results = []
    for source in sorted(drawn):
        first = {r["rng"].get(source) for r in its[0].records if "rng" in r}
        shared = repeated = total = 0
        for e, it in enumerate(its):
            states = [(r["pid"], r["rng"].get(source)) for r in it.records if "rng" in r]
            total += len(states)
            owners: Dict[str, set] = defaultdict(set)
            for pid, state in states:
                owners[state].add(pid)
            counts = Counter(state for _, state in states)
            shared += sum(c - 1 for s, c in counts.items() if len(owners[s]) > 1)
            if e > 0:
                repeated += sum(1 for _, s in states if s in first)
        later = total - len(its[0].records)
        results.append({"source": source, "shared": shared, "repeated": repeated, "samples": total, "later": later})
    if not results:
        return Figure(f"no RNG drawn per sample ({n} workers)", False, {"sources": [], "num_workers": n})
    worst = max(results, key=lambda r: (r["shared"] + r["repeated"], r["source"] != "torch"))
    text = (f"{worst['source']}: {worst['shared']}/{worst['samples']} samples drew the same random state as another "
            f"worker's; {worst['repeated']}/{worst['later']} states of epochs 2+ repeat epoch 1 ({n} workers)")
    return Figure(text, worst["shared"] > 0 or worst["repeated"] > 0,
                  {"sources": results, "num_workers": n, "epochs": len(its)})


# ------------------------------------------------------------------ worker-visible state


def default_epoch_loop(dataset, loader, epochs: int):
    """A training loop that tells the dataset the epoch (``set_epoch`` when it has one)."""
    for epoch in range(epochs):
        if hasattr(dataset, "set_epoch"):
            dataset.set_epoch(epoch)
        for _ in loader:
            progress(f"epoch {epoch + 1}")


def worker_state(make, loader_kwargs: Optional[dict] = None, *, epochs: int = 3,
                 loop: Optional[Callable[[Any, Any, int], Any]] = None, workers: int = 2) -> Figure:
    """Parent-side dataset attributes at each epoch start against what the workers saw.

    ``loop(dataset, loader, epochs)`` is the training loop (default: ``set_epoch`` then iterate).
    """
    with Session(Measure(attrs=True)) as session:
        target = _make(make)
        if isinstance(target, DataLoader):
            loader = target
            dataset = target.dataset.inner if getattr(target.dataset, "_dslint_wrapped", False) else target.dataset
        else:
            dataset = target
            kw = dict(loader_kwargs or {})
            if not kw.get("num_workers"):
                kw["num_workers"] = workers
            loader = session.loader(target, kw)
        (loop or default_epoch_loop)(dataset, loader, epochs)
    its = [it for it in session.iterations if it.records]
    keys = sorted({k for it in its for k in it.parent_state})
    driven = [k for k in keys if len({it.parent_state.get(k) for it in its}) > 1]
    if not driven:
        return Figure(f"the loop changed no dataset attribute over {len(its)} epochs", False,
                      {"epochs": len(its), "driven": []})
    stale = 0
    rows = []
    for key in driven:
        parent = [it.parent_state.get(key) for it in its]
        seen = []
        for it in its:
            values = Counter(r.get("attrs", {}).get(key) for r in it.records)
            seen.append(values.most_common(1)[0][0] if values else None)
        stale += sum(1 for p, s in zip(parent, seen) if p != s)
        rows.append({"attr": key, "parent": parent, "workers": seen})
    first = rows[0]
    name = first["attr"].split(".", 1)[1] if "." in first["attr"] else first["attr"]
    persistent = bool(getattr(loader, "persistent_workers", False))
    text = (f"parent {name} = {', '.join(map(str, first['parent']))}; workers saw {', '.join(map(str, first['workers']))}"
            f" ({loader.num_workers} {'persistent ' if persistent else ''}workers)")
    return Figure(text, stale > 0, {"attrs": rows, "stale_epochs": stale, "epochs": len(its)})


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
            f"{_fmt(seconds)} s")
    if len(its) > 1 and distinct == 1 and starts[0] is not None:
        text += f"; every iteration started again at index {starts[0]}"
    return Figure(text, len(its) > 1 and len(worker_pids) > len(its), {
        "iterations": len(its), "worker_processes": len(worker_pids), "processes": len(pids), "seconds": seconds,
        "distinct_starts": distinct, "samples": sum(len(it.records) for it in its)})
