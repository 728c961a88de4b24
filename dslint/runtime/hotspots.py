"""Where one sample's time goes (``dslint probe``'s per-sample check, DSL201/DSL202).

Samples are produced in this process (as with ``num_workers=0``), one at a time, with

- an audit hook (``sys.addaudithook``) counting, per sample, directory scans
  (``os.listdir``, ``os.scandir`` -- which ``os.walk``, ``pathlib`` and ``glob`` use --
  and ``glob.glob``) and file opens (``open``, ``sqlite3.connect``) with their paths;
- the bytes the sample read (``rchar`` of ``/proc/self/io``, Linux);
- a sampling profiler: a thread that looks at the main thread's stack every
  millisecond and charges the innermost line of the user's own code (not the standard
  library, site-packages or dslint).

Audit hooks cannot be removed: run this only in an isolated child process
(``dslint.runtime.isolate``). Imports torch (through the probes).
"""

from __future__ import annotations

import linecache
import math
import os
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from typing import Any, Dict, List, Optional

from dslint.runtime.common import fmt_number, shorten
from dslint.runtime.isolate import progress
from dslint.runtime.probes import Figure, build, dataset_of
from dslint.runtime.target import TargetSpec, is_user_file, relative_path

SCAN_EVENTS = ("os.listdir", "os.scandir", "glob.glob", "glob.glob/2")
OPEN_EVENTS = ("open", "sqlite3.connect", "sqlite3.connect/handle")


class _Recorder:
    def __init__(self):
        self.current: Optional[list] = None

    def hook(self, event: str, args) -> None:
        current = self.current
        if current is None:
            return
        if event in SCAN_EVENTS:
            current.append(("scan", event, _path(args[0] if args else ".")))
        elif event == "open" and args:
            path = _path(args[0])
            if path is not None:
                current.append(("open", event, path))
        elif event == "sqlite3.connect" and args:
            path = _path(args[0])
            if path is not None:
                current.append(("open", event, path))


def _path(value) -> Optional[str]:
    if isinstance(value, int) or value is None:
        return None
    try:
        value = os.fspath(value)
    except TypeError:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if value in ("", ":memory:"):
        return value or "."
    return os.path.abspath(value)


def _rchar() -> Optional[int]:
    try:
        with open("/proc/self/io", "rb") as handle:
            for line in handle:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


_RECORDER: Optional[_Recorder] = None


def per_sample_calls(make, *, samples: int = 24, budget: float = 3.0, interval: float = 0.001,
                     spec: Optional[TargetSpec] = None) -> Figure:
    """Directory scans, file opens, bytes read and the hottest user line, per sample."""
    global _RECORDER
    target = build(make)
    dataset = dataset_of(target)
    if _RECORDER is None:
        _RECORDER = _Recorder()
        sys.addaudithook(_RECORDER.hook)
    recorder = _RECORDER
    main_id = threading.get_ident()
    hits: Counter = Counter()
    ticks = [0]
    stop = threading.Event()
    user_cache: Dict[str, bool] = {}

    def sampler() -> None:
        while not stop.is_set():
            time.sleep(interval)
            if recorder.current is None:
                continue
            frame = sys._current_frames().get(main_id)
            chosen = None
            while frame is not None:
                filename = frame.f_code.co_filename
                user = user_cache.get(filename)
                if user is None:
                    user = user_cache[filename] = is_user_file(filename, spec)
                if user:
                    chosen = (filename, frame.f_lineno, frame.f_code.co_name)
                    break
                frame = frame.f_back
            if recorder.current is None:  # the sample ended while we looked
                continue
            ticks[0] += 1
            hits[chosen] += 1

    per_sample: List[dict] = []
    thread = threading.Thread(target=sampler, name="dslint-sampler", daemon=True)
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(interval / 2)
    thread.start()
    start = time.perf_counter()
    try:
        iterator = None
        try:
            size = len(dataset)
        except TypeError:
            size = None
        mapped = size is not None and not _is_iterable(dataset)
        count = min(samples, size) if mapped else samples
        for n in range(count):
            index = None
            if mapped:
                index = n * size // count
            elif iterator is None:
                iterator = iter(dataset)
            events: list = []
            before = _rchar()
            t0 = time.perf_counter()
            recorder.current = events
            try:
                if index is not None:
                    dataset[index]
                else:
                    try:
                        next(iterator)
                    except StopIteration:
                        recorder.current = None
                        break
            finally:
                recorder.current = None
            seconds = time.perf_counter() - t0
            after = _rchar()
            per_sample.append({"t": seconds, "events": events,
                               "read": (after - before) if before is not None and after is not None else None})
            progress(f"per-sample calls: {n + 1} samples")
            if n >= 1 and time.perf_counter() - start > budget:
                break
    finally:
        stop.set()
        thread.join(timeout=1)
        sys.setswitchinterval(old_interval)
    return summarize(per_sample, hits, ticks[0])


def _is_iterable(dataset) -> bool:
    from torch.utils.data import IterableDataset

    return isinstance(dataset, IterableDataset)


def summarize(per_sample: List[dict], hits: Counter, ticks: int) -> Figure:
    m = len(per_sample)
    if not m:
        return Figure("no samples were produced", False, {"samples": 0})
    need = max(2, math.ceil(0.5 * m))
    scans: Dict[tuple, set] = defaultdict(set)
    opens: Dict[str, set] = defaultdict(set)
    scan_total = open_total = 0
    for n, record in enumerate(per_sample):
        for kind, event, path in record["events"]:
            if kind == "scan":
                scans[(event, path)].add(n)
                scan_total += 1
            else:
                if path and os.path.isdir(path):
                    continue
                opens[path].add(n)
                open_total += 1
    reads = [r["read"] for r in per_sample if r["read"] is not None]
    read_per_sample = statistics.median(reads) if reads else None
    median = statistics.median(r["t"] for r in per_sample)
    repeated_scans = []
    for (event, path), where in sorted(scans.items(), key=lambda kv: -len(kv[1])):
        if len(where) >= need:
            entry = {"event": event, "path": path, "samples": len(where)}
            if event in ("os.listdir", "os.scandir") and os.path.isdir(path):
                try:
                    entry["entries"] = len(os.listdir(path))
                except OSError:
                    pass
            repeated_scans.append(entry)
    repeated_reads = []
    for path, where in sorted(opens.items(), key=lambda kv: -len(kv[1])):
        if len(where) < need or not path or not os.path.isfile(path):
            continue
        try:
            size = os.path.getsize(path)
        except OSError:
            continue
        whole = size >= 4096 and (read_per_sample >= 0.5 * size if read_per_sample is not None else size >= 65536)
        repeated_reads.append({"path": path, "samples": len(where), "size": size, "whole_file": whole})
    lines = []
    for key, count in hits.most_common(3):
        if key is None:
            lines.append({"file": None, "line": None, "function": None, "code": "", "share": count / ticks})
            continue
        filename, lineno, name = key
        lines.append({"file": relative_path(filename), "line": lineno, "function": name,
                      "code": _code(linecache.getline(filename, lineno)), "share": round(count / ticks, 3)})
    data: Dict[str, Any] = {
        "samples": m, "median_s": median, "scans_per_sample": scan_total / m, "opens_per_sample": open_total / m,
        "read_per_sample": read_per_sample, "repeated_scans": repeated_scans, "repeated_reads": repeated_reads,
        "hot_lines": lines, "profile_ticks": ticks,
    }
    text = f"{fmt_number(median * 1e3)} ms/sample (median of {m}, in one process); per sample {scan_total / m:.1f} directory scans, {open_total / m:.1f} file opens"
    if read_per_sample is not None:
        text += f", {_size(read_per_sample)} read"
    top = next((line for line in lines if line["file"]), None)
    if top and ticks >= 5:
        text += f"; hottest line {top['file']}:{top['line']} `{shorten(top['code'], 60)}` ({top['share']:.0%} of the time)"
    data["hot_line"] = top
    symptom = bool(repeated_scans) or any(r["whole_file"] for r in repeated_reads)
    return Figure(text, symptom, data)


def _code(line: str) -> str:
    """The source line without a trailing comment (``# expect: ...``, ``# noqa``)."""
    line = line.strip()
    cut = line.find("  #")
    return line[:cut].rstrip() if cut > 0 else line


def _size(n: float) -> str:
    if n >= 1024 * 1024:
        return f"{n / 1024 / 1024:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.0f} KiB"
    return f"{n:.0f} B"
