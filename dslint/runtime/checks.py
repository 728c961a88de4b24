"""The checks of ``dslint probe``: each measures a user's dataset with the reusable probes
(``dslint.runtime.probes``, ``worker_probes``, ``hotspots``) in an isolated child process
and reports, as findings, only the problems it measured ("confirmed at runtime"), each
message stating the consequence with the figure.

``CHECKS`` is the registry (the parent plans from it, the child runs ``run_check``). A
check names the runtime symptoms it measures (``Check.measures``: ``Symptom.probe`` names);
the codes it confirms are those of the rules with those symptoms (``Check.codes``):

| check | measures (probe) | codes |
|---|---|---|
| descriptors | fd_growth, resource_warnings (``probes.fd_growth``) | DSL103; ResourceWarnings: DSL101 for images, DSL102 when a descriptor stays open between samples, else DSL104 |
| epochs | epoch_counts (iterable datasets) | DSL301 (``iter(ds) is ds``), else DSL302 |
| duplicates | duplicates (iterable datasets) | DSL303 |
| pickling | pickling (``worker_probes.find_unpicklable`` + a real spawn epoch) | DSL506 |
| handles | integrity (``snapshots.handles_in`` + ``worker_probes.integrity``) | DSL401 |
| rng | rng (``worker_probes.rng_streams``) | DSL402 (RNG held by the dataset), DSL403 (a worker_init_fn's global seed) |
| memory | worker_memory (``worker_probes.worker_memory``) | DSL601 |
| hotspots | time_ratio (``hotspots.per_sample_calls``: audit hook + sampling profile) | DSL201, DSL202 |

No torch at import: the check functions import the probes when they run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from dslint.runtime.common import MiB, ProbeSettings, clean_path, fmt_number, one_line, shorten
from dslint.runtime.isolate import phase
from dslint.runtime.target import Maker


class CheckContext:
    """What a check measures: the target (``maker``; ``limited`` to ``--samples``), its loader
    keywords and the description the parent got (``info``, from ``describe.describe_target``)."""

    def __init__(self, settings: ProbeSettings, info: dict):
        self.settings = settings
        self.info = info
        overrides = {"multiprocessing_context": "fork"} if info.get("fork_override") else None
        self.maker = Maker(settings.spec, settings.kwargs, settings.tmp, overrides=overrides)
        self.kw = self.maker.loader_kwargs()
        self.limited = self.maker.variant(limit=settings.samples)
        self.workers = settings.workers
        self.epochs = max(2, settings.epochs)


def figure_dict(fig) -> dict:
    """A probe's ``Figure`` as plain data, attribute paths without the limit wrapper."""
    return clean_path(fig.to_dict())


def _check_descriptors(ctx: CheckContext) -> dict:
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
        count = f"{d['resource_warnings']} ResourceWarnings in {d['num_workers']} workers over {d['samples']} samples ({shorten(warning, 90)})"
        held = retained_descriptors(d)
        if _IMAGE_FILE.search(warning):
            # Pillow closes a single-frame file when it loads it: an image file that warns was never
            # loaded, or is of a multi-frame format (DSL101's forms)
            findings.append({"code": "DSL101", "message": (
                f"{count}: images are opened and never closed; a multi-frame file (GIF, APNG, TIFF) or an image "
                f"that is never loaded keeps its descriptor open until the image is freed")})
        elif held:
            findings.append({"code": "DSL102", "message": (
                f"{count}, and a worker keeps {held} descriptor{'s' if held != 1 else ''} open between samples: "
                f"a handle opened per sample outlives its sample (kept by the dataset) and is closed only when "
                f"a later sample replaces it")})
        else:
            findings.append({"code": "DSL104", "message": (
                f"{count}: files are opened and never closed, but nothing stays open between samples: each one "
                f"is closed when its object is dropped (only a ResourceWarning, under CPython's reference counting)")})
    return {"figure": figure_dict(fig), "findings": findings}


def retained_descriptors(data: dict) -> int:
    """Descriptors a worker's samples left open, at most (``fd_growth``'s per-sample deltas
    summed): a handle kept between samples (DSL102) leaves one or a few, a handle dropped with
    its sample (DSL104) none; growth with every sample is DSL103's slope."""
    return max((round(w.get("slope", 0) * w.get("samples", 0)) for w in data.get("workers", [])), default=0)


_IMAGE_FILE = re.compile(r"name='[^']*\.(?:gif|png|apng|tiff?|webp|jpe?g|bmp|ico|mpo)'", re.IGNORECASE)


def _check_epochs(ctx: CheckContext) -> dict:
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
    return {"figure": figure_dict(fig), "findings": findings}


def _check_duplicates(ctx: CheckContext) -> dict:
    from dslint.runtime import probes

    fig = probes.duplicates(ctx.limited, ctx.kw, workers=ctx.workers, epochs=1, cap=ctx.settings.samples)
    findings = []
    if fig.symptom and ctx.info.get("own_workers") == 0:
        # as the static rule: a stream only ever read with num_workers=0 never meets a second worker
        fig.text += "; not reported: its own loader uses num_workers=0"
    elif fig.symptom:
        d = fig.data
        multi, single = d["workers"]["epochs"][0], d["single"]["epochs"][0]
        evidence = {
            "count": f"{multi['samples']} samples per epoch where num_workers=0 delivers {single['samples']}",
            "order": "each worker delivers the stream's samples in the same order from its start",
            "content": f"{multi['samples']} samples, {multi['distinct']} distinct; all {single['samples']} distinct "
                       f"with num_workers=0",
        }[d["basis"]]
        findings.append({"code": "DSL303", "message": (
            f"with {d['workers']['num_workers']} workers every sample arrives {d['factor']:.1f} times per epoch "
            f"({evidence}): each worker replays the whole stream because __iter__ never splits it by get_worker_info()")})
    elif fig.data.get("basis") is None:
        return {"figure": figure_dict(fig), "findings": findings,
                "result": "cannot tell: identical content in a stream cut at --samples"}
    return {"figure": figure_dict(fig), "findings": findings}


def _handle_paths(dataset) -> List[str]:
    from dslint.runtime.snapshots import handles_in

    return [h for h in handles_in(dataset) if "mmap)" not in h and "memmap)" not in h]


#: pickling errors of open files, connections and cursors: the handle checks' business (DSL401, DSL302)
_HANDLE_ERROR = re.compile(r"cannot pickle '(?:_io\.\w+|sqlite3\.\w+|socket|_socket\.socket|Environment|"
                           r"Transaction|Cursor|\w*Connection|\w*File\w*)' object")


def _check_pickling(ctx: CheckContext) -> dict:
    from torch.utils.data import DataLoader

    from dslint.runtime import worker_probes
    from dslint.runtime.instrument import loader_kwargs_of
    from dslint.runtime.probes import Figure
    from dslint.runtime.worker_probes import find_unpicklable

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
        return {"figure": figure_dict(fig), "findings": findings}
    if not others:
        # it does not pickle, but the cause is an open handle: not "ok", and not DSL506's to report
        first = failures[0]
        fig = Figure(f"{shorten(first['error'], 100)} at {first['path']}: an open handle (the handles and epochs checks: "
                     f"DSL401, DSL302)",
                     False, {"failures": failures})
        return {"figure": figure_dict(fig), "findings": findings,
                "result": "not DSL506: an open handle (see DSL401, DSL302)"}
    fig = worker_probes.pickling(ctx.limited, ctx.kw, context=context, workers=ctx.workers)
    run = fig.data.get("run", {})
    fig.data["failures"] = failures
    if not run.get("ok", True):
        first = others[0]
        where = (f"with its own multiprocessing_context={own!r}" if own in ("spawn", "forkserver") else
                 "under spawn or forkserver (the default on macOS and Windows, and on Linux from Python 3.14)")
        measured = one_line(run.get("exception", ""))
        same = measured.strip() == first["error"].strip()
        findings.append({"code": "DSL506", "message": (
            f"{shorten(first['error'], 140)} at {first['path']}: {where} the DataLoader fails before its first batch"
            + ("" if same else f" (a real {context} DataLoader raised: {shorten(measured, 160)})"))})
        return {"figure": figure_dict(fig), "findings": findings}
    # pickle refuses a part, yet a real spawn DataLoader ran: not confirmed, and not "ok" either
    return {"figure": figure_dict(fig), "findings": findings,
            "result": f"not confirmed: {others[0]['path']} does not pickle, but a real {context} DataLoader ran"}


def _check_handles(ctx: CheckContext) -> dict:
    from dslint.runtime import worker_probes

    fig = worker_probes.integrity(ctx.limited, ctx.kw, workers=ctx.workers, reads=4000, budget=4.0)
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
            message += f"; under spawn or forkserver: {shorten(pickle.get('error', ''), 90)}"
        findings.append({"code": "DSL401", "message": message})
    return {"figure": figure_dict(fig), "findings": findings}


def _check_rng(ctx: CheckContext) -> dict:
    from dslint.runtime import worker_probes

    fig = worker_probes.rng_streams(ctx.limited, ctx.kw, workers=ctx.workers, epochs=ctx.epochs)
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
    return {"figure": figure_dict(fig), "findings": findings}


def _check_memory(ctx: CheckContext) -> dict:
    from dslint.runtime import worker_probes

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
        kw["collate_fn"] = worker_probes.count_collate
        kw.pop("batch_sampler", None)
        kw["drop_last"] = False
    every = None if ctx.info.get("style") == "map" else 4
    fig = worker_probes.worker_memory(maker, kw, workers=ctx.workers, epochs=1, persistent=True, uss_every=every)
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
    return {"figure": figure_dict(fig), "findings": findings}


def _check_hotspots(ctx: CheckContext) -> dict:
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
            f"every sample scans the same directory again, {fmt_number(ms)} ms per sample{at}")})
    whole = [r for r in d.get("repeated_reads", []) if r["whole_file"]]
    if whole:
        r = whole[0]
        read = d.get("read_per_sample")
        findings.append({"code": "DSL202", "message": (
            f"{_rel_path(r['path'])} ({r['size'] / 1024:,.0f} KiB) is opened in {r['samples']} of {d['samples']} samples"
            + (f" and {read / 1024:,.0f} KiB are read per sample" if read is not None else "")
            + f": every sample re-loads a file that does not change, {fmt_number(ms)} ms per sample{at}")})
    return {"figure": figure_dict(fig), "findings": findings}


def _rel_path(path: str) -> str:
    name = os.path.basename(path.rstrip("/")) or path
    parent = os.path.basename(os.path.dirname(path.rstrip("/")))
    return f"{parent}/{name}" if parent else name


# ====================================================================== the registry


@dataclass(frozen=True)
class Check:
    name: str
    title: str
    #: the runtime symptoms it measures (``Symptom.probe`` of the rules it confirms)
    measures: tuple
    run: Callable[[CheckContext], dict]
    kinds: tuple = ("map", "iterable")
    exclusive: bool = False
    #: the codes as listed, where that is not every rule of ``measures`` in code order: a subset
    #: (the others need a good.py to compare with) or another order (the primary code first)
    listed: Optional[tuple] = None

    @property
    def codes(self) -> tuple:
        """The codes this check confirms, from the rules whose symptom it measures."""
        measured = measured_codes(self.measures)
        if self.listed is None:
            return tuple(measured)
        stray = [code for code in self.listed if code not in measured]
        if stray:
            raise ValueError(f"check {self.name} lists {', '.join(stray)}, whose symptom is not one of {self.measures}")
        return self.listed


def measured_codes(probes: Sequence[str]) -> List[str]:
    """Codes of the rules whose runtime symptom is measured by one of ``probes``, probe by probe."""
    from dslint.rules.base import all_rules

    rules = all_rules()
    return [code for probe in probes for code in sorted(rules)
            if rules[code].symptom is not None and rules[code].symptom.probe == probe]


CHECKS = (
    Check("descriptors", "descriptors per sample", ("fd_growth", "resource_warnings"), _check_descriptors),
    Check("epochs", "samples per epoch", ("epoch_counts",), _check_epochs, kinds=("iterable",)),
    Check("duplicates", "duplicates across workers", ("duplicates",), _check_duplicates, kinds=("iterable",)),
    Check("pickling", "pickling (spawn/forkserver)", ("pickling",), _check_pickling),
    Check("handles", "handles inherited through fork", ("integrity",), _check_handles),
    Check("rng", "random streams", ("rng",), _check_rng),
    Check("memory", "worker private memory", ("worker_memory",), _check_memory),
    # DSL203 (per-sample setup) is judged only against a fixed good.py: not confirmable here
    Check("hotspots", "per-sample calls and profile", ("time_ratio",), _check_hotspots, exclusive=True,
          listed=("DSL201", "DSL202")),
)

NOT_APPLICABLE = {
    "epochs": "map-style dataset: its sampler gives every epoch all indices again",
    "duplicates": "map-style dataset: the sampler hands each index to one worker",
}


def check_named(name: str) -> Check:
    return next(c for c in CHECKS if c.name == name)


def run_check(name: str, settings: ProbeSettings, info: dict) -> dict:
    """One check in this (isolated child) process: plain data for the parent."""
    ctx = CheckContext(settings, info)
    check = check_named(name)
    phase(check.title, settings.timeout)
    return clean_path(check.run(ctx))
