"""What a sample, a dataset and this process hold, read without changing them.

- ``digest``: a content hash of a sample (tensors, arrays, images, containers);
- ``walk``: the dataset and what it holds, a few levels deep; from it the RNG objects
  (``rng_objects``, ``rng_digests`` of their states and the global ones), the scalar
  attributes (``scalar_state``) and the open handles (``handles_in``);
- ``fd_count``, ``open_files``, ``uss_bytes``: this process's descriptors and private memory.

Imports torch and numpy: used only in probe processes.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import os
import pickle
import random
import sqlite3
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch


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
