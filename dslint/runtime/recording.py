"""The recording dataset wrapper: one JSON line per sample, written by whichever process
produced it (a DataLoader worker, or the main process with ``num_workers=0``).

``wrap`` puts a dataset in ``RecordingDataset`` (map-style) or ``RecordingIterable``;
``Measure`` chooses what a record holds (descriptor count, ResourceWarnings seen so far,
``__getitem__`` time, a hash of the sample, the index, RNG-state digests, the dataset's
scalar attributes, USS every K samples, handles at worker start). Each process appends
to ``<dir>/<pid>.jsonl`` synchronously, so nothing is lost when a worker exits;
``Recorder`` reads the files back incrementally.

Imports torch: used only in probe processes (``dslint.runtime.instrument.Session`` wraps).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
import warnings
from typing import Callable, Dict, List, Optional

import numpy as np
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from dslint.runtime.snapshots import digest, fd_count, handles_in, open_files, rng_digests, scalar_state, uss_bytes


@dataclasses.dataclass
class Measure:
    """What the wrapper records per sample."""

    fds: bool = False
    warnings: bool = False
    time: bool = False
    hash: bool = False
    index: bool = False
    rng: bool = False
    attrs: bool = False
    uss_every: int = 0
    handles: bool = False
    #: catch exceptions from the dataset, record them, and yield None instead
    catch: bool = False
    #: write only the first record and every ``uss_every``-th (large datasets, memory probe)
    sparse: bool = False


# ------------------------------------------------------------- recording wrapper


class _WorkerState:
    def __init__(self, rec_dir: str, pid: int):
        self.pid = pid
        self.n = 0
        self.rw = 0
        self.rw_first = ""
        self.fd = os.open(os.path.join(rec_dir, f"{pid}.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.last_rng: Dict[str, str] = {}

    def write(self, record: dict) -> None:
        os.write(self.fd, (json.dumps(record, default=str) + "\n").encode())


class _Recording:
    """The recording logic shared by the map-style and iterable wrappers."""

    _dslint_wrapped = True

    def _dslint_setup(self, inner, rec_dir: str, measure: Measure):
        self.inner = inner
        self._dslint_dir = rec_dir
        self._dslint_measure = measure
        self._dslint_state = None

    def __getattr__(self, name):
        # delegate user attributes (``loader.dataset.classes``); never dunders (pickling)
        if name.startswith("__") or name in ("inner", "_dslint_state", "_dslint_dir", "_dslint_measure"):
            raise AttributeError(name)
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def __setattr__(self, name, value):
        # ``loader.dataset.epoch = 3`` in a training loop must reach the real dataset
        if name == "inner" or name.startswith("_dslint") or "inner" not in self.__dict__:
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_dslint_state"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _state(self) -> _WorkerState:
        pid = os.getpid()
        st = self._dslint_state
        if st is None or st.pid != pid:
            st = self._dslint_state = _WorkerState(self._dslint_dir, pid)
            m = self._dslint_measure
            if m.warnings:
                _count_resource_warnings(st)
            st.first = {}
            if m.fds:
                st.first["fd0"] = fd_count()
                st.first["files0"] = len(open_files())
                try:
                    import resource

                    st.first["nofile"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
                except Exception:
                    pass
            if m.handles:
                st.first["handles"] = handles_in(self.inner)
            if m.uss_every:
                st.first["uss0"] = uss_bytes()
        return st

    def _before(self, st: _WorkerState) -> dict:
        m = self._dslint_measure
        info = get_worker_info()
        record = {"pid": st.pid, "wid": info.id if info is not None else -1, "n": st.n}
        if st.n == 0 and st.first:
            record.update(st.first)
        if m.attrs:
            record["attrs"] = scalar_state(self.inner)
        if m.fds:
            record["fd_in"] = fd_count()
        return record

    def _after(self, st: _WorkerState, record: dict, sample, t0: float, error: Optional[BaseException]) -> None:
        m = self._dslint_measure
        if m.time:
            record["t"] = time.perf_counter() - t0
        if m.rng:  # the state each sample left behind: equal states mean equal draws
            record["rng"] = rng_digests(self.inner)
        if error is not None:
            record["err"] = f"{type(error).__name__}: {error}"[:300]
        elif m.hash:
            try:
                record["h"] = digest(sample)
            except Exception as exc:  # noqa: BLE001
                record["h"] = f"unhashable:{type(exc).__name__}"
        if m.fds:
            record["fd"] = fd_count()
        if m.warnings:
            record["rw"] = st.rw
            if st.rw and st.rw_first:
                record["rwmsg"] = st.rw_first
        due = bool(m.uss_every) and (st.n + 1) % m.uss_every == 0
        if due:
            record["uss"] = uss_bytes()
        st.n += 1
        if not m.sparse or due or st.n == 1:
            st.write(record)

    def _produce(self, fn: Callable, index=None):
        st = self._state()
        m = self._dslint_measure
        if m.sparse and st.n and (st.n + 1) % max(1, m.uss_every) and not m.catch:
            sample = fn()  # fast path: nothing to record for this sample
            st.n += 1
            return sample
        record = self._before(st)
        if self._dslint_measure.index and index is not None:
            record["idx"] = index if isinstance(index, (int, str)) else repr(index)
        t0 = time.perf_counter()
        try:
            sample = fn()
        except StopIteration:
            raise
        except Exception as exc:
            if not self._dslint_measure.catch:
                record["err"] = f"{type(exc).__name__}: {exc}"[:300]
                st.n += 1
                st.write(record)
                raise
            self._after(st, record, None, t0, exc)
            return None
        self._after(st, record, sample, t0, None)
        return sample


class RecordingDataset(_Recording, Dataset):
    def __init__(self, inner, rec_dir: str, measure: Measure):
        self._dslint_setup(inner, rec_dir, measure)

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, index):
        if isinstance(index, (np.integer,)):
            index = int(index)
        return self._produce(lambda: self.inner[index], index)

    def __getitems__(self, indices):
        """Batched fetch (torch uses it when present): per-sample records, or in sparse mode
        one pass over the batch with a record only when a USS reading is due."""
        many = getattr(self.inner, "__getitems__", None)
        m = self._dslint_measure
        if not m.sparse:
            return [self.__getitem__(i) for i in indices]
        st = self._state()
        if st.n == 0:
            st.write({"pid": st.pid, "wid": _worker_id(), "n": 0, **st.first})
        samples = many(indices) if callable(many) else [self.inner[i] for i in indices]
        before = st.n
        st.n += len(indices)
        if m.uss_every and st.n // m.uss_every > before // m.uss_every:
            st.write({"pid": st.pid, "wid": _worker_id(), "n": st.n, "uss": uss_bytes()})
        return samples


def _worker_id() -> int:
    info = get_worker_info()
    return info.id if info is not None else -1


class RecordingIterable(_Recording, IterableDataset):
    def __init__(self, inner, rec_dir: str, measure: Measure):
        self._dslint_setup(inner, rec_dir, measure)

    def __len__(self):
        return len(self.inner)

    def __iter__(self):
        iterator = iter(self.inner)
        while True:
            try:
                sample = self._produce(iterator.__next__)
            except StopIteration:
                return
            yield sample


def wrap(dataset, rec_dir: str, measure: Measure):
    if getattr(dataset, "_dslint_wrapped", False):
        return dataset
    if isinstance(dataset, IterableDataset):
        return RecordingIterable(dataset, rec_dir, measure)
    return RecordingDataset(dataset, rec_dir, measure)


def _count_resource_warnings(st: _WorkerState) -> None:
    warnings.simplefilter("always", ResourceWarning)
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if isinstance(category, type) and issubclass(category, ResourceWarning):
            st.rw += 1
            if not st.rw_first:
                st.rw_first = f"ResourceWarning: {message}"
            return None
        return original(message, category, filename, lineno, file, line)

    warnings.showwarning = show


# ------------------------------------------------------------------- records


class Recorder:
    """Reads the per-process JSONL files incrementally."""

    def __init__(self, directory: Optional[str] = None):
        self.dir = directory or tempfile.mkdtemp(prefix="dslint-rec-")
        self._offsets: Dict[str, int] = {}

    def drain(self) -> List[dict]:
        out: List[dict] = []
        try:
            names = sorted(os.listdir(self.dir))
        except OSError:
            return out
        for name in names:
            path = os.path.join(self.dir, name)
            start = self._offsets.get(name, 0)
            try:
                with open(path, "rb") as handle:
                    handle.seek(start)
                    data = handle.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1
            self._offsets[name] = start + end
            for line in data[:end].splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                out.append(record)
        return out

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
