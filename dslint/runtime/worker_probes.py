"""Reusable probes of what the DataLoader's workers get from the parent process: the
records read through handles inherited by fork (``integrity``), what spawn and forkserver
workers must unpickle (``find_unpicklable``, ``pickling``), the private memory workers
accumulate (``worker_memory``), the random streams they draw (``rng_streams``) and the
dataset state they see epoch after epoch (``worker_state``).

Same contract as ``dslint.runtime.probes``: ``make`` and ``loader_kwargs`` in, a ``Figure`` out.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.utils.data import DataLoader, IterableDataset, RandomSampler

from dslint.runtime.common import MiB, shorten
from dslint.runtime.instrument import Session, apply_overrides, loader_kwargs_of, quiet_warnings
from dslint.runtime.isolate import phase, progress
from dslint.runtime.probes import Figure, build, by_pid, dataset_of, worker_count
from dslint.runtime.recording import Measure
from dslint.runtime.snapshots import digest, uss_bytes


# ------------------------------------------------------------------- integrity


def count_collate(batch):
    """A collate_fn that keeps only the batch's length (the samples themselves are not needed)."""
    return len(batch) if isinstance(batch, list) else 1


def integrity(make, loader_kwargs: Optional[dict] = None, *, workers: int = 2, reads: int = 20000,
              budget: float = 8.0, batch_size: int = 64) -> Figure:
    """Samples read in N forked workers against the same samples read in one process.

    Catches records corrupted by a file offset shared across forked workers (a handle
    opened in ``__init__``), decoder errors, handles present in the dataset at worker
    start, and whether the dataset pickles (spawn/forkserver).
    """
    with quiet_warnings():
        pickled = pickle_check(dataset_of(build(make)))  # untouched, as a DataLoader would pickle it
        reference_target = dataset_of(build(make))
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
        target = dataset_of(build(make))
        n = worker_count(loader_kwargs, target, workers)
        if iterable:
            loader = session.loader(target, {}, num_workers=n, batch_size=batch_size, collate_fn=count_collate)
            epochs = max(1, min(20, reads // max(1, reference_size)))
        else:
            sampler = RandomSampler(range(reference_size), replacement=True, num_samples=reads,
                                    generator=torch.Generator().manual_seed(0))
            loader = session.loader(target, {}, num_workers=n, batch_size=batch_size, sampler=sampler,
                                    collate_fn=count_collate)
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
                examples.append(f"index {record.get('idx')}: {shorten(record['err'], 80)}")
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
    return Figure(f"{shorten(error, 110)} at {path}", True, {"ok": False, "path": path, "error": error})


def pickling(make, loader_kwargs: Optional[dict] = None, *, context: str = "spawn", workers: int = 2) -> Figure:
    """What spawn/forkserver workers need pickled (dataset, collate_fn, worker_init_fn), the path that fails,
    and a real ``DataLoader(multiprocessing_context=context)`` epoch."""
    with quiet_warnings():
        target = build(make)
    kwargs = loader_kwargs_of(target) if isinstance(target, DataLoader) else dict(loader_kwargs or {})
    dataset = dataset_of(target)
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
        text = f"{context}: {shorten(run['exception'], 120)}"
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
        target = build(make)
        gc.collect()
        footprint = max(0, uss_bytes() - before)
        dataset = dataset_of(target)
        try:
            size = len(dataset)
        except TypeError:
            size = 1000
        n = worker_count(loader_kwargs, target, workers)
        session.measure.uss_every = uss_every or max(1, size // (n * 8))
        overrides = {"num_workers": n}
        if persistent:
            overrides["persistent_workers"] = True
        loader = session.loader(target, loader_kwargs, **overrides)
        its = session.epochs(loader, epochs, label="worker memory: ")
    per = []
    for pid, series in by_pid([r for it in its for r in it.records]).items():
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
        target = build(make)
        n = worker_count(loader_kwargs, target, workers)
        loader = session.loader(target, loader_kwargs, num_workers=n)
        its = session.epochs(loader, epochs, label="rng: ")
    drawn = set()
    for it in its:
        for series in by_pid(it.records).values():
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
        target = build(make)
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
