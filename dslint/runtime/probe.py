"""``dslint probe TARGET``: ``dslint verify``'s probes on a user's own dataset.

The target is imported and built in an isolated child first (``describe_target``): a
module that fails to import, a factory that raises, a dataset whose first sample
raises or hangs gives one clear line and exit 2. Then every check runs in its own
isolated child (``dslint.runtime.isolate``: phase time limits, the process group,
DataLoader workers included, killed afterwards), through the reusable probes of
``dslint.runtime.probes`` with real worker processes:

| check | probe | codes |
|---|---|---|
| descriptors | ``probes.fd_growth`` | DSL103 (DSL102 for ResourceWarnings alone) |
| epochs | ``probes.epoch_counts`` (iterable datasets) | DSL301 (``iter(ds) is ds``), else DSL302 |
| duplicates | ``probes.duplicates`` (iterable datasets) | DSL303 |
| pickling | ``probes.find_unpicklable`` + a real spawn epoch (``probes.pickling``) | DSL506 |
| handles | ``instrument.handles_in`` + ``probes.integrity`` | DSL401 |
| rng | ``probes.rng_streams`` | DSL402 (RNG held by the dataset), DSL403 (a worker_init_fn's global seed) |
| memory | ``probes.worker_memory`` | DSL601 |
| hotspots | ``hotspots.per_sample_calls`` (audit hook + sampling profile) | DSL201, DSL202 |

A finding is reported only when the symptom was measured here ("confirmed at
runtime"); its message states the consequence with the figure.
No torch at import: the parent imports it in ``run`` (so the children it forks start warm).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional

from dslint.runtime.isolate import Outcome, phase, progress, run_many
from dslint.runtime.target import Maker, TargetError, TargetSpec, clean_path, user_location

CONFIRMED = "confirmed at runtime"
MiB = 1024 * 1024


class ProbeError(Exception):
    """The target could not be probed (exit 2); the message is one line."""


@dataclass
class Settings:
    spec: TargetSpec
    kwargs: Dict[str, Any] = field(default_factory=dict)
    workers: int = 2
    epochs: int = 2
    samples: int = 512
    timeout: float = 60.0
    tmp: str = ""
    parallel: int = 1
    select: Optional[List[str]] = None


@dataclass(frozen=True)
class Check:
    name: str
    title: str
    codes: tuple
    kinds: tuple = ("map", "iterable")
    exclusive: bool = False


NOT_APPLICABLE = {
    "epochs": "map-style dataset: its sampler gives every epoch all indices again",
    "duplicates": "map-style dataset: the sampler hands each index to one worker",
}

CHECKS = (
    Check("descriptors", "descriptors per sample", ("DSL103", "DSL102", "DSL101")),
    Check("epochs", "samples per epoch", ("DSL301", "DSL302"), kinds=("iterable",)),
    Check("duplicates", "duplicates across workers", ("DSL303",), kinds=("iterable",)),
    Check("pickling", "pickling (spawn/forkserver)", ("DSL506",)),
    Check("handles", "handles inherited through fork", ("DSL401",)),
    Check("rng", "random streams", ("DSL402", "DSL403")),
    Check("memory", "worker private memory", ("DSL601",)),
    Check("hotspots", "per-sample calls and profile", ("DSL201", "DSL202"), exclusive=True),
)


# ====================================================================== child side


def _one_line(text: str, limit: int = 300) -> str:
    """A worker's re-raised exception (``Caught X in DataLoader worker process 0. Original
    Traceback ...``) as ``X in DataLoader worker process 0: X: message``; else the first line."""
    text = str(text).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    if "Original Traceback" in text and len(lines) > 1:
        head = lines[0].rstrip(".").replace("Caught ", "", 1)
        out = f"{head}: {lines[-1].strip()}"
    else:
        out = lines[0].strip()
    return out if len(out) <= limit else out[: limit - 1] + "\u2026"


def _raised(what: str, exc: BaseException, spec: TargetSpec) -> str:
    where = user_location(exc.__traceback__, spec)
    if isinstance(exc, SystemExit):
        return (f"{what} called sys.exit({exc.code!r})" + (f" ({where})" if where else "")
                + ": code at the top level of the module runs on import; put it under `if __name__ == \"__main__\":`")
    message = _one_line(f"{type(exc).__name__}: {exc}")
    return f"{what} raised {message}" + (f" ({where})" if where else "")


def _loader_text(loader) -> str:
    parts = [f"batch_size={loader.batch_size}"]
    sampler = getattr(loader, "sampler", None)
    if sampler is not None and type(sampler).__name__ != "SequentialSampler" and type(sampler).__name__ != "_InfiniteConstantSampler":
        parts.append(f"sampler={type(sampler).__name__}")
    parts.append(f"num_workers={loader.num_workers}")
    if loader.num_workers:
        parts.append(f"prefetch_factor={loader.prefetch_factor}")
        parts.append(f"persistent_workers={loader.persistent_workers}")
    parts.append(f"pin_memory={loader.pin_memory}")
    from torch.utils.data._utils.collate import default_collate

    if loader.collate_fn is not None and loader.collate_fn is not default_collate and getattr(loader.collate_fn, "__name__", "") != "default_convert":
        parts.append(f"collate_fn={getattr(loader.collate_fn, '__qualname__', type(loader.collate_fn).__name__)}")
    if loader.worker_init_fn is not None:
        parts.append(f"worker_init_fn={getattr(loader.worker_init_fn, '__qualname__', '?')}")
    ctx = loader.multiprocessing_context
    if ctx is not None:
        parts.append(f"multiprocessing_context={ctx.get_start_method() if hasattr(ctx, 'get_start_method') else ctx!r}")
    return ", ".join(parts)


def describe_target(settings: Settings) -> dict:
    """Import, build, fetch the first samples; plain data for the parent, or {"error": ...}."""
    try:
        return _describe(settings)
    except ProbeError as exc:
        return {"error": str(exc)}
    except TargetError as exc:
        return {"error": str(exc)}


def _describe(settings: Settings) -> dict:
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    from dslint.runtime import instrument

    spec = settings.spec
    phase("importing the target", settings.timeout)
    try:
        maker = Maker(spec, settings.kwargs, settings.tmp)
    except TargetError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module raised
        raise ProbeError(_raised(f"importing {spec.text.rsplit(':', 1)[0]}", exc, spec)) from None
    phase(f"building {maker.call_text()}", settings.timeout)
    try:
        value = maker.raw()
    except TargetError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise ProbeError(_raised(maker.call_text(), exc, spec)) from None
    is_loader = isinstance(value, DataLoader)
    dataset = value.dataset if is_loader else value
    style = "iterable" if isinstance(dataset, IterableDataset) else "map"
    try:
        length: Optional[int] = len(dataset)
    except Exception:  # noqa: BLE001 - an IterableDataset without __len__
        length = None
    kw = maker.loader_kwargs()
    if is_loader:
        loader_text = _loader_text(value)
        source = "its own settings"
        init_fn = value.worker_init_fn
        context = value.multiprocessing_context
        own_workers: Optional[int] = value.num_workers
    else:
        loader_text = ", ".join(f"{k}={v!r}" for k, v in kw.items()) or "DataLoader defaults (batch_size=1)"
        source = maker.loader_source()
        init_fn = kw.get("worker_init_fn")
        context = kw.get("multiprocessing_context")
        own_workers = kw.get("num_workers") if isinstance(kw.get("num_workers"), int) else None
    if context is not None and not isinstance(context, str):
        context = context.get_start_method() if hasattr(context, "get_start_method") else str(context)
    if context is None:
        import multiprocessing

        context = multiprocessing.get_start_method(allow_none=True)  # set by the user's module, if at all
    handles = instrument.handles_in(dataset)
    unpicklable = _unpicklable_parts(dataset, value.collate_fn if is_loader else kw.get("collate_fn"),
                                     init_fn) if context in ("spawn", "forkserver") else []
    returns_self = False
    first_times: List[float] = []
    phase("fetching the first samples", settings.timeout)
    sample_bytes = 0
    if style == "map":
        if length == 0:
            raise ProbeError(f"{maker.call_text()} gave an empty dataset (len() is 0): nothing to probe")
        for i in range(min(5, length or 0)):
            t0 = time.perf_counter()
            try:
                sample = dataset[i]
            except Exception as exc:  # noqa: BLE001
                raise ProbeError(_raised(f"dataset[{i}]", exc, spec)) from None
            first_times.append(time.perf_counter() - t0)
            sample_bytes = max(sample_bytes, _nbytes(sample))
            progress(f"sample {i + 1}")
            if sum(first_times) > 2:
                break
    else:
        try:
            iterator = iter(dataset)
            returns_self = iterator is dataset
            for i in range(5):
                t0 = time.perf_counter()
                try:
                    sample = next(iterator)
                except StopIteration:
                    break
                first_times.append(time.perf_counter() - t0)
                sample_bytes = max(sample_bytes, _nbytes(sample))
                progress(f"sample {i + 1}")
                if sum(first_times) > 2:
                    break
        except Exception as exc:  # noqa: BLE001
            raise ProbeError(_raised(f"sample {len(first_times)} of iter(dataset)", exc, spec)) from None
        if not first_times:
            raise ProbeError(f"{maker.call_text()} gave an iterable dataset that yields no samples: nothing to probe")
    per_sample = min(first_times[1:] or first_times)
    return {
        "target": spec.text,
        "call": maker.call_text(),
        "target_kind": maker.kind,
        "returns": "DataLoader" if is_loader else "Dataset",
        "class": type(dataset).__qualname__,
        "style": style,
        "length": length,
        "loader": loader_text,
        "loader_source": source,
        "has_worker_init_fn": init_fn is not None,
        # num_workers of the target's own loader (or LOADER); None when unknown
        "own_workers": own_workers,
        "multiprocessing_context": context,
        "handles": handles,
        "returns_self": returns_self,
        # the loader's own start method cannot start its workers: the other checks use fork
        "fork_override": bool(unpicklable),
        "per_sample_s": per_sample,
        "sample_bytes": sample_bytes,
        "shared_instance": maker.shared_instance,
        "cuda": instrument.cuda_available(),
        "torch": torch.__version__.split("+")[0],
        "cpus": _cpus(),
    }


def _nbytes(sample, depth: int = 0) -> int:
    """About how many bytes a sample holds (tensors, arrays, images, bytes, containers)."""
    import sys

    if depth > 8:
        return 0
    if hasattr(sample, "element_size") and hasattr(sample, "numel"):
        return int(sample.element_size() * sample.numel())
    if hasattr(sample, "nbytes") and isinstance(getattr(sample, "nbytes"), int):
        return int(sample.nbytes)
    if hasattr(sample, "size") and hasattr(sample, "mode") and hasattr(sample, "getbands"):  # PIL image
        width, height = sample.size
        return int(width * height * len(sample.getbands()))
    if isinstance(sample, dict):
        return sum(_nbytes(v, depth + 1) for v in sample.values())
    if isinstance(sample, (list, tuple)):
        return sum(_nbytes(v, depth + 1) for v in sample)
    try:
        return sys.getsizeof(sample)
    except TypeError:
        return 0


def _unpicklable_parts(dataset, collate_fn, init_fn) -> List[str]:
    from dslint.runtime.probes import find_unpicklable

    failed = []
    for name, part in (("dataset", dataset), ("collate_fn", collate_fn), ("worker_init_fn", init_fn)):
        if part is not None and find_unpicklable(part, name) is not None:
            failed.append(name)
    return failed


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class _Ctx:
    def __init__(self, settings: Settings, info: dict):
        self.settings = settings
        self.info = info
        overrides = {"multiprocessing_context": "fork"} if info.get("fork_override") else None
        self.maker = Maker(settings.spec, settings.kwargs, settings.tmp, overrides=overrides)
        self.kw = self.maker.loader_kwargs()
        self.limited = self.maker.variant(limit=settings.samples)
        self.workers = settings.workers
        self.epochs = max(2, settings.epochs)


def _figure(fig) -> dict:
    return clean_path(fig.to_dict())


def run_check(name: str, settings: Settings, info: dict) -> dict:
    """One check in this (isolated child) process: plain data for the parent."""
    ctx = _Ctx(settings, info)
    check = next(c for c in CHECKS if c.name == name)
    phase(check.title, settings.timeout)
    return clean_path(CHILD_RUNNERS[name](ctx))


def _check_descriptors(ctx: _Ctx) -> dict:
    from dslint.runtime import probes

    fig = probes.fd_growth(ctx.limited, ctx.kw, workers=ctx.workers, epochs=ctx.epochs)
    d = fig.data
    findings = []
    if d.get("slope", 0) >= 0.5:
        worst = max(d["workers"], key=lambda w: w["slope"])
        message = (f"each worker keeps {d['slope']:.2f} more open descriptor{'s' if round(d['slope'], 2) != 1 else ''} per sample "
                   f"({worst['fd_start']}\u2192{worst['fd_end']} over {worst['samples']} samples in one worker): "
                   f"a long epoch ends in OSError: [Errno 24] Too many open files")
        if d.get("samples_to_emfile") is not None and worst.get("nofile"):
            message += f", after ~{d['samples_to_emfile']:,} more samples per worker at ulimit -n {worst['nofile']}"
        findings.append({"code": "DSL103", "message": message})
    elif d.get("files_at_start", 0) >= 16:
        findings.append({"code": "DSL103", "message": (
            f"{d['files_at_start']} regular files are open in each worker before its first sample (opened for every "
            f"file when the dataset was built): every worker holds them all, and a larger dataset ends in "
            f"OSError: [Errno 24] Too many open files")})
    elif d.get("resource_warnings", 0) > 0:
        from dslint.runtime.probes import strip_dirs

        warning = strip_dirs(d.get("resource_warning", ""))
        count = f"{d['resource_warnings']} ResourceWarnings in {d['num_workers']} workers over {d['samples']} samples ({_short(warning, 90)})"
        if _IMAGE_FILE.search(warning):
            findings.append({"code": "DSL101", "message": (
                f"{count}: images are opened and never closed; a multi-frame file (GIF, APNG, TIFF) keeps its "
                f"descriptor open until garbage collection frees the image")})
        else:
            findings.append({"code": "DSL102", "message": (
                f"{count}: files are opened and never closed; each descriptor stays open until garbage collection "
                f"frees its object")})
    return {"figure": _figure(fig), "findings": findings}


_IMAGE_FILE = re.compile(r"name='[^']*\.(?:gif|png|apng|tiff?|webp|jpe?g|bmp|ico|mpo)'", re.IGNORECASE)


def _check_epochs(ctx: _Ctx) -> dict:
    from dslint.runtime import probes

    fig = probes.epoch_counts(ctx.limited, ctx.kw, epochs=ctx.epochs)
    short = [c for c in fig.data["configs"] if c["short"]]
    findings = []
    if short:
        shown = "; ".join(f"{'/'.join(map(str, c['counts']))} samples per epoch with {c['config']}" for c in short)
        if ctx.info.get("returns_self"):
            findings.append({"code": "DSL301", "message": (
                f"{shown}: __iter__ returns the dataset itself, so the iterator the first epoch exhausted is handed "
                f"out again and every later epoch is {'empty' if all(c['counts'][1] == 0 for c in short) else 'short'}, "
                f"without an error")})
        else:
            findings.append({"code": "DSL302", "message": (
                f"{shown}: iterator state made once (e.g. in __init__) is used up by the first epoch, so later epochs "
                f"are {'empty' if all(c['counts'][1] == 0 for c in short) else 'short'}, without an error")})
    return {"figure": _figure(fig), "findings": findings}


def _check_duplicates(ctx: _Ctx) -> dict:
    from dslint.runtime import probes

    fig = probes.duplicates(ctx.limited, ctx.kw, workers=ctx.workers, epochs=1)
    findings = []
    if fig.symptom and ctx.info.get("own_workers") == 0:
        # as the static rule: a stream only ever read with num_workers=0 never meets a second worker
        fig.text += "; not reported: its own loader uses num_workers=0"
    elif fig.symptom:
        d = fig.data
        multi, single = d["workers"]["epochs"][0], d["single"]["epochs"][0]
        findings.append({"code": "DSL303", "message": (
            f"with {d['workers']['num_workers']} workers every sample arrives {d['factor']:.1f} times per epoch "
            f"({multi['samples']} samples, {multi['distinct']} distinct; {single['samples']} with num_workers=0): "
            f"each worker replays the whole stream because __iter__ never splits it by get_worker_info()")})
    return {"figure": _figure(fig), "findings": findings}


def _handle_paths(dataset) -> List[str]:
    from dslint.runtime.instrument import handles_in

    return [h for h in handles_in(dataset) if "mmap)" not in h and "memmap)" not in h]


#: pickling errors of open files, connections and cursors: the handle checks' business (DSL401, DSL302)
_HANDLE_ERROR = re.compile(r"cannot pickle '(?:_io\.\w+|sqlite3\.\w+|socket|_socket\.socket|Environment|"
                           r"Transaction|Cursor|\w*Connection|\w*File\w*)' object")


def _check_pickling(ctx: _Ctx) -> dict:
    from torch.utils.data import DataLoader

    from dslint.runtime import probes
    from dslint.runtime.instrument import loader_kwargs_of
    from dslint.runtime.probes import Figure, find_unpicklable

    value = ctx.maker.raw()
    is_loader = isinstance(value, DataLoader)
    kw = loader_kwargs_of(value) if is_loader else dict(ctx.kw)
    dataset = value.dataset if is_loader else value
    handles = [h.split(" (")[0] for h in _handle_paths(dataset)]
    failures = []
    for part_name, part in (("dataset", dataset), ("collate_fn", kw.get("collate_fn")), ("worker_init_fn", kw.get("worker_init_fn"))):
        if part is None:
            continue
        found = find_unpicklable(part, part_name)
        if found is not None:
            failures.append({"path": found[0], "error": found[1],
                             "handle": any(found[0] == h or found[0].startswith(h + ".") for h in handles)
                             or bool(_HANDLE_ERROR.search(found[1]))})
    own = ctx.info.get("multiprocessing_context")
    context = own if own in ("spawn", "forkserver") else "spawn"
    others = [f for f in failures if not f["handle"]]
    findings = []
    if not failures:
        fig = Figure("dataset, collate_fn and worker_init_fn pickle (what spawn and forkserver workers receive)", False,
                     {"failures": []})
        return {"figure": _figure(fig), "findings": findings}
    if not others:
        first = failures[0]
        fig = Figure(f"{_short(first['error'], 100)} at {first['path']}: an open handle (the handles and epochs checks: "
                     f"DSL401, DSL302)",
                     False, {"failures": failures})
        return {"figure": _figure(fig), "findings": findings}
    fig = probes.pickling(ctx.limited, ctx.kw, context=context, workers=ctx.workers)
    run = fig.data.get("run", {})
    fig.data["failures"] = failures
    if not run.get("ok", True):
        first = others[0]
        where = (f"with its own multiprocessing_context={own!r}" if own in ("spawn", "forkserver") else
                 "under spawn or forkserver (the default on macOS and Windows, and on Linux from Python 3.14)")
        measured = _one_line(run.get("exception", ""))
        same = measured.strip() == first["error"].strip()
        findings.append({"code": "DSL506", "message": (
            f"{_short(first['error'], 140)} at {first['path']}: {where} the DataLoader fails before its first batch"
            + ("" if same else f" (a real {context} DataLoader raised: {_short(measured, 160)})"))})
    return {"figure": _figure(fig), "findings": findings}


def _check_handles(ctx: _Ctx) -> dict:
    from dslint.runtime import probes

    fig = probes.integrity(ctx.limited, ctx.kw, workers=ctx.workers, reads=4000, budget=4.0)
    d = fig.data
    held = [h for h in d.get("handles_at_start", []) if "mmap)" not in h and "memmap)" not in h]
    findings = []
    if held or d.get("wrong"):
        what = ", ".join(clean_path(held[:3])) or "a handle"
        measured = (f"{d.get('wrong', 0)} wrong and {d.get('errors', 0)} failed of {d.get('reads', 0):,} reads measured "
                    f"here{'; the race is timing-dependent' if not d.get('wrong') and not d.get('errors') else ''}")
        if held and all("(Connection)" in h for h in held):
            consequence = ("SQLite does not support a connection carried across fork: workers sharing it can read "
                           "corrupted pages (sqlite3.DatabaseError: database disk image is malformed)")
        else:
            consequence = ("every worker shares one file offset, so one worker's seek() moves the position another is "
                           "reading from and a sample can come back as another record's bytes")
        message = f"{what} {'is' if len(held) == 1 else 'are'} open when the workers fork: {consequence} ({measured})"
        pickle = d.get("pickle") or {}
        if pickle.get("ok") is False:
            message += f"; under spawn or forkserver: {_short(pickle.get('error', ''), 90)}"
        findings.append({"code": "DSL401", "message": message})
    return {"figure": _figure(fig), "findings": findings}


def _check_rng(ctx: _Ctx) -> dict:
    from dslint.runtime import probes

    fig = probes.rng_streams(ctx.limited, ctx.kw, workers=ctx.workers, epochs=ctx.epochs)
    findings = []
    by_code: Dict[str, dict] = {}
    for source in fig.data.get("sources", []):
        if not (source["shared"] or source["repeated"]):
            continue
        held = source["source"].startswith("dataset")
        code = "DSL402" if held or not ctx.info.get("has_worker_init_fn") else "DSL403"
        best = by_code.get(code)
        if best is None or source["shared"] + source["repeated"] > best["shared"] + best["repeated"]:
            by_code[code] = source
    for code, s in sorted(by_code.items()):
        name = clean_path(s["source"])
        parts = []
        if s["shared"]:
            parts.append(f"{s['shared']}/{s['samples']} samples drew the same random state as a sample in another worker "
                         f"(augmentations duplicated across workers)")
        if s["repeated"]:
            parts.append(f"{s['repeated']}/{s['later']} states of the later epochs repeat epoch 1 (the same "
                         f"augmentations every epoch)")
        if code == "DSL402":
            why = (f"{name} is created before the workers fork and never reseeded per worker" if name.startswith("dataset")
                   else f"the global {name} generator is reseeded with fixed values")
        else:
            why = f"the worker_init_fn reseeds {name} from the worker id or constants, discarding torch's per-epoch seed"
        findings.append({"code": code, "message": f"{why}: {'; '.join(parts)}"})
    return {"figure": _figure(fig), "findings": findings}


def _check_memory(ctx: _Ctx) -> dict:
    from dslint.runtime import probes

    length = ctx.info.get("length")
    per_sample = max(ctx.info.get("per_sample_s") or 0.0, 1e-7)
    spread = None
    samples = length
    if ctx.info.get("style") == "map" and length:
        budget = 8.0 * ctx.workers  # worker-seconds
        if per_sample * length > budget:
            spread = max(ctx.settings.samples, int(budget / per_sample))
            samples = min(spread, length)
            if spread >= length:
                spread = None
        maker = ctx.maker.variant(spread=spread)
    else:
        maker = ctx.limited
        samples = None
    kw = dict(ctx.kw)
    if ctx.info.get("returns") == "Dataset" and ctx.info.get("style") == "map":
        # the batches' contents do not matter here: batches counted, not collated, as big as
        # keeps about 4 MiB of samples in flight (a batch being filled is private memory too)
        kw["batch_size"] = max(1, min(256, (4 * MiB) // max(1, ctx.info.get("sample_bytes") or 1)))
        kw["collate_fn"] = probes._identity_collate
        kw.pop("batch_sampler", None)
        kw["drop_last"] = False
    every = None if ctx.info.get("style") == "map" else 4
    fig = probes.worker_memory(maker, kw, workers=ctx.workers, epochs=1, persistent=True, uss_every=every)
    fig.data["samples"] = samples
    fig.data["spread"] = spread is not None
    if samples:
        fig.text += f" ({samples:,} samples{' spread over the whole dataset' if spread else ''})"
    findings = []
    d = fig.data
    # copy-on-read copies what the parent holds: growth beyond twice that is the worker's own
    # allocations (e.g. a file parsed per sample), and a dataset under 16 MiB has little to copy
    copy_on_read = fig.symptom and d.get("footprint_mib", 0) >= 16 and d.get("growth_mib", 0) <= 2 * d["footprint_mib"]
    if fig.symptom and not copy_on_read:
        fig.text += ("; not copy-on-read: the dataset holds under 16 MiB" if d.get("footprint_mib", 0) < 16 else
                     "; not copy-on-read: more than twice what the dataset holds, the worker's own allocations")
    if copy_on_read:
        findings.append({"code": "DSL601", "message": (
            f"each worker's private memory grew by {d['growth_mib']:.0f} MiB while the dataset holds "
            f"{d['footprint_mib']:.0f} MiB in the parent: reading Python objects writes their reference counts, which "
            f"copies the pages they live on into every worker (copy-on-read), so memory grows toward "
            f"workers \u00d7 dataset size until the kernel kills a worker")})
    return {"figure": _figure(fig), "findings": findings}


def _check_hotspots(ctx: _Ctx) -> dict:
    from dslint.runtime import hotspots

    fig = hotspots.per_sample_calls(ctx.maker, samples=24, budget=3.0, spec=ctx.settings.spec)
    d = fig.data
    findings = []
    ms = d.get("median_s", 0) * 1e3
    top = d.get("hot_line")
    at = f"; hottest line {top['file']}:{top['line']} ({top['share']:.0%} of the time)" if top and d.get("profile_ticks", 0) >= 5 else ""
    if d.get("repeated_scans"):
        scan = d["repeated_scans"][0]
        entries = f", {scan['entries']:,} entries" if scan.get("entries") is not None else ""
        findings.append({"code": "DSL201", "message": (
            f"{scan['event']}({_rel_path(scan['path'])}{entries}) runs in {scan['samples']} of {d['samples']} samples: "
            f"every sample scans the same directory again, {_ms(ms)} ms per sample{at}")})
    whole = [r for r in d.get("repeated_reads", []) if r["whole_file"]]
    if whole:
        r = whole[0]
        read = d.get("read_per_sample")
        findings.append({"code": "DSL202", "message": (
            f"{_rel_path(r['path'])} ({r['size'] / 1024:,.0f} KiB) is opened in {r['samples']} of {d['samples']} samples"
            + (f" and {read / 1024:,.0f} KiB are read per sample" if read is not None else "")
            + f": every sample re-loads a file that does not change, {_ms(ms)} ms per sample{at}")})
    return {"figure": _figure(fig), "findings": findings}


def _ms(value: float) -> str:
    from dslint.runtime.probes import _fmt

    return _fmt(value)


def _rel_path(path: str) -> str:
    name = os.path.basename(path.rstrip("/")) or path
    parent = os.path.basename(os.path.dirname(path.rstrip("/")))
    return f"{parent}/{name}" if parent else name


def _short(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


CHILD_RUNNERS: Dict[str, Callable[[_Ctx], dict]] = {
    "descriptors": _check_descriptors,
    "epochs": _check_epochs,
    "duplicates": _check_duplicates,
    "pickling": _check_pickling,
    "handles": _check_handles,
    "rng": _check_rng,
    "memory": _check_memory,
    "hotspots": _check_hotspots,
}


# ====================================================================== parent side


@dataclass
class Row:
    check: str
    title: str
    codes: List[str]
    measured: str
    result: str
    findings: List[dict] = field(default_factory=list)
    data: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    log_tail: str = ""

    @property
    def error(self) -> bool:
        return self.result.startswith("error")


@dataclass
class Report:
    target: dict
    settings: dict
    rows: List[Row]
    seconds: float = 0.0

    @property
    def findings(self) -> List[dict]:
        return [f for row in self.rows for f in row.findings]

    @property
    def errors(self) -> List[Row]:
        return [r for r in self.rows if r.error]

    @property
    def exit_code(self) -> int:
        return 2 if self.errors else (1 if self.findings else 0)


def _selected(check: Check, select: Optional[List[str]]) -> bool:
    if not select:
        return True
    return any(code.startswith(s) for code in check.codes for s in select)


def _outcome_error(outcome: Outcome, timeout: float) -> str:
    if outcome.kind == "timeout":
        return f"{outcome.error} (--timeout {timeout:g} s): the dataset hangs or is too slow; its workers were killed"
    if outcome.kind == "died":
        return f"{outcome.error}: the dataset crashed the process"
    return _one_line(outcome.error or "failed")


def _warm() -> None:
    """Import torch and the probes here, so the children forked from this process start warm."""
    import torch  # noqa: F401

    import dslint.runtime.hotspots  # noqa: F401
    import dslint.runtime.instrument  # noqa: F401
    import dslint.runtime.limit  # noqa: F401
    import dslint.runtime.probes  # noqa: F401


def run(settings: Settings, *, on_event: Optional[Callable[[str, str, str], None]] = None) -> Report:
    """Describe the target, then run every applicable check; raises ProbeError when the target
    cannot be imported, built or sampled (or hangs doing so)."""
    _warm()
    start = time.monotonic()
    log_dir = settings.tmp
    result: Dict[str, Outcome] = {}

    def done(job: dict, outcome: Outcome) -> None:
        result[job["name"]] = outcome
        if on_event:
            on_event(job["name"], "done", "ok" if outcome.ok else (outcome.error or "failed"))

    def event(name: str):
        return (lambda kind, text: on_event(name, kind, text)) if on_event else None

    run_many([{"name": "target", "fn": describe_target, "args": (settings,), "limit": settings.timeout,
               "log_path": os.path.join(log_dir, "target.log"), "on_event": event("target")}], on_done=done)
    outcome = result["target"]
    if not outcome.ok:
        raise ProbeError(_outcome_error(outcome, settings.timeout))
    info = outcome.value
    if "error" in info:
        raise ProbeError(info["error"])
    rows: Dict[str, Row] = {}
    jobs = []
    for check in CHECKS:
        if not _selected(check, settings.select):
            continue
        if info["style"] not in check.kinds:
            rows[check.name] = Row(check.name, check.title, list(check.codes), NOT_APPLICABLE.get(check.name, "-"), "n/a")
            continue
        if check.name == "handles" and not [h for h in info["handles"] if "mmap)" not in h]:
            rows[check.name] = Row(check.name, check.title, list(check.codes),
                                   "no open file, connection or archive in the dataset when the workers fork", "ok")
            continue
        jobs.append({"name": check.name, "fn": run_check, "args": (check.name, settings, info),
                     "limit": settings.timeout, "exclusive": check.exclusive,
                     "log_path": os.path.join(log_dir, f"{check.name}.log"), "on_event": event(check.name)})
    result.clear()
    run_many(jobs, parallel=settings.parallel, on_done=done)
    for job in jobs:
        check = next(c for c in CHECKS if c.name == job["name"])
        outcome = result.get(check.name)
        if outcome is None:  # pragma: no cover - run_many reports every job
            rows[check.name] = Row(check.name, check.title, list(check.codes), "", "error: not run")
            continue
        if not outcome.ok:
            rows[check.name] = Row(check.name, check.title, list(check.codes), "",
                                   f"error: {_outcome_error(outcome, settings.timeout)}", seconds=round(outcome.seconds, 2),
                                   log_tail=(outcome.traceback or outcome.log_tail)[-3000:])
            continue
        value = outcome.value
        findings = value["findings"]
        figure = value["figure"]
        verdict = ", ".join(f["code"] for f in findings) + f" {CONFIRMED}" if findings else "ok"
        rows[check.name] = Row(check.name, check.title, list(check.codes), figure["text"], verdict, findings,
                               figure.get("data", {}), round(outcome.seconds, 2))
    _merge_iterator_handle(rows)
    names = _rule_names()
    for row in rows.values():
        for finding in row.findings:
            finding.setdefault("name", names.get(finding["code"], ""))
    ordered = [rows[c.name] for c in CHECKS if c.name in rows]
    settings_view = {"workers": settings.workers, "epochs": max(2, settings.epochs), "samples": settings.samples,
                     "timeout": settings.timeout, "kwargs": settings.kwargs}
    return Report(info, settings_view, ordered, round(time.monotonic() - start, 2))


def _merge_iterator_handle(rows: Dict[str, Row]) -> None:
    """One defect, one finding: an open file used as the iterator of an iterable dataset is the
    DSL302 state (its later epochs come back empty); the handle finding joins that one."""
    epochs, handles = rows.get("epochs"), rows.get("handles")
    if not epochs or not handles:
        return
    state = next((f for f in epochs.findings if f["code"] == "DSL302"), None)
    held = next((f for f in handles.findings if f["code"] == "DSL401"), None)
    if state is None or held is None or handles.data.get("wrong"):
        return
    names = ", ".join(clean_path(handles.data.get("handles_at_start", [])[:2])) or "the handle"
    state["message"] += (f"; the state is {names}, open when the workers fork, so the workers share its offset and "
                         f"split its items between them; under spawn or forkserver it cannot be pickled")
    handles.findings = [f for f in handles.findings if f is not held]
    handles.result = "ok (the open iterator of DSL302)" if not handles.findings else handles.result


def _rule_names() -> Dict[str, str]:
    try:
        from dslint.rules.base import all_rules

        return {code: rule.name for code, rule in all_rules().items()}
    except Exception:  # noqa: BLE001 - names are cosmetic
        return {}


# ====================================================================== output


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def header(report: Report) -> List[str]:
    t = report.target
    kind = "an iterable" if t["style"] == "iterable" else "a map-style"
    size = f" of {t['length']:,} samples" if t.get("length") is not None else " (no len())"
    made = f"{t['call']} \u2192 " if t["target_kind"] in ("class", "factory") else ""
    what = f"a DataLoader over {t['class']}, {kind} Dataset{size}" if t["returns"] == "DataLoader" else \
        f"{t['class']}, {kind} Dataset{size}"
    loader = t["loader"] + (f" ({t['loader_source']})" if t.get("loader_source") else "")
    s = report.settings
    where = f"{'CUDA' if t.get('cuda') else 'CPU'}, torch {t.get('torch', '?')}, {t.get('cpus', '?')} CPUs"
    lines = [
        f"target: {made}{what}",
        f"loader: {loader}",
        f"probed: {s['workers']} worker processes, {s['epochs']} epochs of at most {s['samples']:,} samples; {where}",
    ]
    if t.get("fork_override"):
        lines.append(f"note: with its own start method {t.get('multiprocessing_context')!r} the loader cannot start its "
                     f"workers (see DSL506), so the other checks used 'fork'")
    if t.get("shared_instance"):
        lines.append("note: the instance cannot be copied, so the checks share it (state one check consumes is gone for the next)")
    return lines


def render_text(report: Report) -> str:
    lines = [f"dslint probe {report.target['target']}", *header(report), "",
             "| check | codes | measured | result |", "|---|---|---|---|"]
    for row in report.rows:
        lines.append(f"| {row.title} | {', '.join(row.codes)} | {_cell(row.measured) or '-'} | {_cell(row.result)} |")
    findings = report.findings
    if findings:
        lines.append("")
        for f in findings:
            lines.append(f"{f['code']} {f.get('name', '')}: {CONFIRMED}".replace("  ", " "))
            lines.append(f"  {f['message']}")
    lines.append("")
    lines.append(summary(report))
    return "\n".join(lines) + "\n"


def summary(report: Report) -> str:
    n = len(report.findings)
    errors = report.errors
    if n:
        text = f"{n} problem{'s' if n != 1 else ''} confirmed"
    else:
        text = "no problem confirmed by the checks that ran" if errors else "no runtime problems found"
    if errors:
        text += f"; {len(errors)} check{'s' if len(errors) != 1 else ''} could not run ({', '.join(r.check for r in errors)})"
    return text


def render_json(report: Report) -> str:
    data = {
        "target": report.target,
        "settings": report.settings,
        "checks": [asdict(r) for r in report.rows],
        "findings": report.findings,
        "problems": len(report.findings),
        "errors": [{"check": r.check, "error": r.result[len("error: "):]} for r in report.errors],
        "summary": summary(report),
        "seconds": report.seconds,
    }
    return json.dumps(data, indent=2, default=str) + "\n"
