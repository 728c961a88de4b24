"""The first step of ``dslint probe`` and ``dslint bench``: describe the TARGET.

``describe_target`` runs in an isolated child: it imports the target, builds it and
fetches its first samples, so a module that fails to import, a factory that raises, a
dataset whose first sample raises or hangs gives one clear line (``CommandError``) and
exit 2 before any measurement. ``describe_in_child`` is the parent's side of it.

No torch at import (the child imports it).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional

from dslint.runtime.common import CommandError, TargetSettings, cpu_count, outcome_error, warm_up
from dslint.runtime.isolate import Outcome, phase, progress, run_many
from dslint.runtime.target import Maker, TargetError, raised_message

#: what the parent imports before forking the children (they start warm)
CHILD_MODULES = ("torch", "dslint.runtime.hotspots", "dslint.runtime.instrument", "dslint.runtime.limit",
                 "dslint.runtime.probes", "dslint.runtime.worker_probes")


def describe_in_child(settings: TargetSettings, *, on_event: Optional[Callable[[str, str], None]] = None,
                      on_done: Optional[Callable[[Dict[str, Any], Outcome], None]] = None) -> dict:
    """The target's description, from an isolated child; raises CommandError when the target
    cannot be imported, built or sampled (or hangs doing so)."""
    outcomes: Dict[str, Outcome] = {}

    def done(job: dict, outcome: Outcome) -> None:
        outcomes[job["name"]] = outcome
        if on_done is not None:
            on_done(job, outcome)

    run_many([{"name": "target", "fn": describe_target, "args": (settings,), "limit": settings.timeout,
               "log_path": os.path.join(settings.tmp, "target.log"), "on_event": on_event}], on_done=done)
    outcome = outcomes["target"]
    if not outcome.ok:
        raise CommandError(outcome_error(outcome, settings.timeout))
    info = outcome.value
    if "error" in info:
        raise CommandError(info["error"])
    return info


def warm_parent() -> None:
    """Import torch and the probes here, so the children forked from this process start warm."""
    warm_up(CHILD_MODULES)


# ====================================================================== child side


def describe_target(settings: TargetSettings) -> dict:
    """Import, build, fetch the first samples; plain data for the parent, or {"error": ...}."""
    try:
        return describe(settings)
    except CommandError as exc:
        return {"error": str(exc)}


def describe(settings: TargetSettings) -> dict:
    import torch

    from dslint.runtime import instrument, snapshots

    spec = settings.spec
    phase("importing the target", settings.timeout)
    try:
        maker = Maker(spec, settings.kwargs, settings.tmp)
    except TargetError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module raised
        raise CommandError(raised_message(f"importing {spec.text.rsplit(':', 1)[0]}", exc, spec)) from None
    phase(f"building {maker.call_text()}", settings.timeout)
    value = maker.raw_checked()
    loader = loader_view(maker, value)
    dataset = loader.pop("dataset")
    init_fn = loader.pop("init_fn")
    context = loader["multiprocessing_context"]
    handles = snapshots.handles_in(dataset)
    unpicklable = unpicklable_parts(dataset, loader.pop("collate_fn"), init_fn) if context in ("spawn", "forkserver") else []
    phase("fetching the first samples", settings.timeout)
    first = first_samples(maker, dataset, loader["style"], loader["length"])
    return {
        "target": spec.text,
        "call": maker.call_text(),
        "target_kind": maker.kind,
        "returns": loader["returns"],
        "class": type(dataset).__qualname__,
        "style": loader["style"],
        "length": loader["length"],
        "loader": loader["loader"],
        "loader_source": loader["loader_source"],
        "has_worker_init_fn": init_fn is not None,
        # num_workers of the target's own loader (or LOADER); None when unknown
        "own_workers": loader["own_workers"],
        "multiprocessing_context": context,
        "handles": handles,
        "returns_self": first["returns_self"],
        # the loader's own start method cannot start its workers: the other checks use fork
        "fork_override": bool(unpicklable),
        "per_sample_s": min(first["times"][1:] or first["times"]),
        "sample_bytes": first["sample_bytes"],
        "shared_instance": maker.shared_instance,
        "cuda": instrument.cuda_available(),
        "torch": torch.__version__.split("+")[0],
        "cpus": cpu_count(),
    }


def loader_view(maker: Maker, value) -> dict:
    """What the target's loader (its own, or a returned dataset's ``LOADER``) is made of."""
    from torch.utils.data import DataLoader, IterableDataset

    is_loader = isinstance(value, DataLoader)
    dataset = value.dataset if is_loader else value
    try:
        length: Optional[int] = len(dataset)
    except Exception:  # noqa: BLE001 - an IterableDataset without __len__
        length = None
    kw = maker.loader_kwargs()
    if is_loader:
        view = {"loader": loader_text(value), "loader_source": "its own settings", "init_fn": value.worker_init_fn,
                "context": value.multiprocessing_context, "own_workers": value.num_workers,
                "collate_fn": value.collate_fn}
    else:
        view = {"loader": ", ".join(f"{k}={v!r}" for k, v in kw.items()) or "DataLoader defaults (batch_size=1)",
                "loader_source": maker.loader_source(), "init_fn": kw.get("worker_init_fn"),
                "context": kw.get("multiprocessing_context"),
                "own_workers": kw.get("num_workers") if isinstance(kw.get("num_workers"), int) else None,
                "collate_fn": kw.get("collate_fn")}
    context = view.pop("context")
    if context is not None and not isinstance(context, str):
        context = context.get_start_method() if hasattr(context, "get_start_method") else str(context)
    if context is None:
        import multiprocessing

        context = multiprocessing.get_start_method(allow_none=True)  # set by the user's module, if at all
    view.update(dataset=dataset, returns="DataLoader" if is_loader else "Dataset", length=length,
                style="iterable" if isinstance(dataset, IterableDataset) else "map", multiprocessing_context=context)
    return view


def first_samples(maker: Maker, dataset, style: str, length: Optional[int]) -> dict:
    """Up to 5 samples (2 s at most): their times, the largest one's size, whether ``iter()`` is the dataset."""
    spec = maker.spec
    returns_self = False
    first_times: List[float] = []
    sample_bytes = 0
    if style == "map":
        if length == 0:
            raise CommandError(f"{maker.call_text()} gave an empty dataset (len() is 0): nothing to probe")
        for i in range(min(5, length or 0)):
            t0 = time.perf_counter()
            try:
                sample = dataset[i]
            except Exception as exc:  # noqa: BLE001
                raise CommandError(raised_message(f"dataset[{i}]", exc, spec)) from None
            first_times.append(time.perf_counter() - t0)
            sample_bytes = max(sample_bytes, nbytes(sample))
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
                sample_bytes = max(sample_bytes, nbytes(sample))
                progress(f"sample {i + 1}")
                if sum(first_times) > 2:
                    break
        except Exception as exc:  # noqa: BLE001
            raise CommandError(raised_message(f"sample {len(first_times)} of iter(dataset)", exc, spec)) from None
        if not first_times:
            raise CommandError(f"{maker.call_text()} gave an iterable dataset that yields no samples: nothing to probe")
    return {"times": first_times, "sample_bytes": sample_bytes, "returns_self": returns_self}


def loader_text(loader) -> str:
    """A DataLoader's settings, those that differ from the defaults or matter to the checks."""
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


def nbytes(sample, depth: int = 0) -> int:
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
        return sum(nbytes(v, depth + 1) for v in sample.values())
    if isinstance(sample, (list, tuple)):
        return sum(nbytes(v, depth + 1) for v in sample)
    try:
        return sys.getsizeof(sample)
    except TypeError:
        return 0


def unpicklable_parts(dataset, collate_fn, init_fn) -> List[str]:
    """Which of the dataset, collate_fn and worker_init_fn spawn/forkserver workers could not unpickle."""
    from dslint.runtime.worker_probes import find_unpicklable

    failed = []
    for name, part in (("dataset", dataset), ("collate_fn", collate_fn), ("worker_init_fn", init_fn)):
        if part is not None and find_unpicklable(part, name) is not None:
            failed.append(name)
    return failed
