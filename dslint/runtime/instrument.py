"""Worker-side instrumentation shared by every probe.

``Session`` is the one entry point. While it is active:

- every ``DataLoader`` constructed (by a probe, or by the code under test, e.g. a
  fixture's ``build()`` or its training loop) gets its dataset wrapped in a
  recording dataset, and the session's loader ``overrides`` applied
  (``num_workers=2``, ``persistent_workers=True``, ``pin_memory`` on CUDA ...);
- every ``iter(loader)`` marks the start of an *iteration* (an epoch, or one
  ``next(iter(loader))`` step): the records produced since the last mark are
  assigned to the previous iteration and the parent's dataset state is snapshotted;
- every ``DistributedSampler.__iter__`` records the index order it produced.

The recording wrapper runs in the workers (or in the main process with
``num_workers=0``) and appends one JSON line per sample to ``<dir>/<pid>.jsonl``
(synchronously, so nothing is lost when a worker exits or is persistent). What a
record holds is chosen by ``Measure``: descriptor count (``/proc/self/fd``),
ResourceWarnings seen so far, ``__getitem__`` time, a hash of the sample, the index,
RNG-state digests taken *before* the sample was produced, a snapshot of the
dataset's scalar attributes, USS every K samples, handles present in the dataset
at worker start.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import io
import json
import os
import pickle
import random
import shutil
import sqlite3
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

try:  # pragma: no cover - import guard
    from torch.utils.data.distributed import DistributedSampler
except Exception:  # pragma: no cover
    DistributedSampler = None

WORKER_ONLY = ("prefetch_factor", "persistent_workers", "timeout", "multiprocessing_context")


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


# --------------------------------------------------------------------- hashing


def _feed(h, obj, depth: int = 0) -> None:
    if depth > 20:
        h.update(b"<deep>")
        return
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        try:
            h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        except Exception:
            h.update(repr(t.tolist()).encode())
    elif isinstance(obj, np.ndarray):
        h.update(f"A{obj.dtype}{obj.shape}".encode())
        if obj.dtype.hasobject:
            for item in obj.reshape(-1):
                _feed(h, item, depth + 1)
        else:
            h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, dict):
        h.update(b"D")
        for key in sorted(obj, key=repr):
            _feed(h, key, depth + 1)
            _feed(h, obj[key], depth + 1)
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{type(obj).__name__}{len(obj)}".encode())
        for item in obj:
            _feed(h, item, depth + 1)
    elif isinstance(obj, (str, bytes, int, float, bool, complex, type(None), np.generic)):
        h.update(repr(obj).encode())
    elif hasattr(obj, "tobytes") and hasattr(obj, "mode") and hasattr(obj, "size"):  # PIL image
        h.update(f"I{obj.mode}{obj.size}".encode())
        h.update(obj.tobytes())
    else:
        try:
            h.update(pickle.dumps(obj, protocol=4))
        except Exception:
            h.update(repr(obj).encode())


def digest(obj) -> str:
    """A content hash of a sample (tensors, arrays, images, containers, scalars)."""
    h = hashlib.blake2b(digest_size=10)
    _feed(h, obj)
    return h.hexdigest()


# ------------------------------------------------------------ what a dataset holds


def _children(obj) -> Iterator[tuple]:
    """(name, value) of an object's attributes / items, for walks."""
    if isinstance(obj, dict):
        for key, value in list(obj.items())[:64]:
            yield f"[{key!r}]", value
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj[:64]):
            yield f"[{i}]", value
    else:
        state = getattr(obj, "__dict__", None)
        if isinstance(state, dict):
            for key, value in list(state.items()):
                yield f".{key}", value


_LEAF = (str, bytes, int, float, bool, type(None), complex, np.ndarray, torch.Tensor)


def walk(root, name: str = "dataset", depth: int = 3) -> Iterator[tuple]:
    """(path, object) for the dataset and what it holds, a few levels deep."""
    seen = set()
    stack = [(name, root, 0)]
    while stack:
        path, obj, level = stack.pop(0)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield path, obj
        if level >= depth or isinstance(obj, _LEAF) or inspect.ismodule(obj) or inspect.isclass(obj) or callable(obj) and not hasattr(obj, "__dict__"):
            continue
        if isinstance(obj, (list, tuple)) and len(obj) > 64 and all(isinstance(x, _LEAF) for x in obj[:8]):
            continue
        for key, value in _children(obj):
            if isinstance(value, _LEAF) and not isinstance(value, (np.ndarray,)):
                continue
            stack.append((path + key, value, level + 1))


RNG_TYPES = (np.random.Generator, np.random.RandomState, random.Random, torch.Generator)


def rng_objects(dataset) -> Dict[str, Any]:
    """RNG objects held by the dataset (not the global ones)."""
    found = {}
    for path, obj in walk(dataset):
        if isinstance(obj, RNG_TYPES) and obj is not getattr(random, "_inst", None):
            found[path] = obj
    return found


def rng_state_digest(obj) -> str:
    h = hashlib.blake2b(digest_size=8)
    if obj is random:
        h.update(repr(random.getstate()).encode())
    elif obj is np.random:
        state = np.random.get_state()
        h.update(np.asarray(state[1]).tobytes() + repr(state[2:]).encode())
    elif obj is torch:
        h.update(torch.get_rng_state().numpy().tobytes())
    elif isinstance(obj, np.random.Generator):
        h.update(repr(obj.bit_generator.state).encode())
    elif isinstance(obj, np.random.RandomState):
        state = obj.get_state()
        h.update(np.asarray(state[1]).tobytes() + repr(state[2:]).encode())
    elif isinstance(obj, random.Random):
        h.update(repr(obj.getstate()).encode())
    elif isinstance(obj, torch.Generator):
        h.update(obj.get_state().numpy().tobytes())
    return h.hexdigest()


def rng_digests(dataset) -> Dict[str, str]:
    """Digests of the global RNGs and of RNG objects in the dataset; draws nothing."""
    out = {"random": rng_state_digest(random), "numpy.random": rng_state_digest(np.random), "torch": rng_state_digest(torch)}
    for path, obj in rng_objects(dataset).items():
        out[path] = rng_state_digest(obj)
    return out


def scalar_state(dataset) -> Dict[str, str]:
    """The dataset's scalar attributes (and ``.value`` of shared values), as reprs."""
    out = {}
    for path, obj in walk(dataset, depth=2):
        state = getattr(obj, "__dict__", None)
        if not isinstance(state, dict) or isinstance(obj, RNG_TYPES):
            continue
        for key, value in list(state.items()):
            if key.startswith("_dslint"):
                continue
            if isinstance(value, (int, float, str, bool, type(None))) and len(repr(value)) <= 80:
                out[f"{path}.{key}"] = repr(value)
            elif isinstance(value, tuple) and len(value) <= 8 and all(isinstance(v, (int, float, str, bool)) for v in value):
                out[f"{path}.{key}"] = repr(value)
            elif hasattr(value, "get_obj") and hasattr(value, "value"):  # multiprocessing.Value
                try:
                    out[f"{path}.{key}"] = repr(value.value)
                except Exception:
                    pass
    return out


HANDLE_TYPES: tuple = (io.IOBase, sqlite3.Connection)


def _handle_types() -> tuple:
    types = list(HANDLE_TYPES)
    import mmap
    import zipfile
    import tarfile

    types += [mmap.mmap, zipfile.ZipFile, tarfile.TarFile]
    try:  # optional
        import h5py  # type: ignore

        types.append(h5py.File)
    except Exception:
        pass
    return tuple(types)


def handles_in(dataset) -> List[str]:
    """Paths of open files / connections held by the dataset (e.g. made in ``__init__``)."""
    types = _handle_types()
    found = []
    for path, obj in walk(dataset):
        if isinstance(obj, types):
            closed = getattr(obj, "closed", False)
            if closed is True:
                continue
            found.append(f"{path} ({type(obj).__name__})")
        elif type(obj).__name__ in ("Environment",) and type(obj).__module__.startswith("lmdb"):
            found.append(f"{path} (lmdb.Environment)")
        elif isinstance(obj, np.memmap):
            found.append(f"{path} (numpy.memmap)")
    return found


def fd_count(ipc: bool = False) -> int:
    """Open descriptors of this process; without ``ipc``, not counting the kinds the DataLoader's
    own IPC opens and closes from its threads while samples are made (shared-memory segments
    in /dev/shm, sockets, pipes): what is left are files, the descriptors datasets leak."""
    try:
        names = os.listdir("/proc/self/fd")  # noqa: DSL201 (intended: the measurement)
    except OSError:  # pragma: no cover - not Linux
        return -1
    if ipc:
        return len(names)
    count = 0
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the listdir descriptor itself
        if not target.startswith(("/dev/shm/", "socket:", "pipe:")):
            count += 1
    return count


def open_files() -> List[str]:
    """Regular files this process has open (targets of /proc/self/fd)."""
    out = []
    try:
        names = os.listdir("/proc/self/fd")  # noqa: DSL201 (intended: the measurement)
    except OSError:  # pragma: no cover
        return out
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("/") and not target.startswith(("/dev/", "/proc/")) and not target.endswith(".jsonl"):
            out.append(target)
    return out


def uss_bytes(pid: Optional[int] = None) -> int:
    import psutil

    try:
        return int(psutil.Process(pid).memory_full_info().uss)
    except Exception:
        return -1


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
