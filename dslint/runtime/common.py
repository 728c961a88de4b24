"""What the three drivers (``verify``, ``probe_cmd``, ``bench``) share: settings, the one
error type, verdicts, and the pieces of their output (markdown tables, JSON, numbers,
one-line messages, the target's description lines).

A leaf: imports nothing from dslint and no torch.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

MiB = 1024 * 1024

#: the attribute dslint.runtime.limit's wrappers keep the dataset in; reports drop it
INNER = "_dslint_inner"

# ``dslint verify``'s verdicts (one per rule)
CONFIRMED = "confirmed"
NOT_REPRODUCED = "not reproduced"
SKIPPED_GPU = "skipped: needs GPU"

#: ``dslint probe``'s verdict on a finding
CONFIRMED_AT_RUNTIME = "confirmed at runtime"


class CommandError(Exception):
    """A one-line, user-facing reason ``dslint probe``/``dslint bench`` cannot run or finish (exit 2)."""


@dataclass
class TargetSettings:
    """What describing and building a TARGET needs (``dslint probe`` and ``dslint bench`` add their own)."""

    #: ``dslint.runtime.target.TargetSpec``
    spec: Any
    kwargs: Dict[str, Any] = field(default_factory=dict)
    timeout: float = 60.0
    tmp: str = ""


@dataclass
class ProbeSettings(TargetSettings):
    """``dslint probe``'s options."""

    workers: int = 2
    epochs: int = 2
    samples: int = 512
    parallel: int = 1
    select: Optional[List[str]] = None
    ignore: List[str] = field(default_factory=list)


@dataclass
class BenchSettings(TargetSettings):
    """``dslint bench``'s options."""

    batches: int = 40
    batch_size: Optional[int] = None
    epochs: int = 3
    warmup: int = 5
    grid: Optional[Dict[str, list]] = None
    device: str = "cpu"
    #: ``--model-step``, a ``TargetSpec`` too
    model_step: Any = None
    timeout: float = 120.0
    cpus: int = 1


def wanted(code: str, select: Optional[Sequence[str]], ignore: Sequence[str] = ()) -> bool:
    """Whether ``--select``/``--ignore`` (normalized codes, prefixes or ``ALL``) keep ``code``: as
    ``dslint check``, the most specific selector wins and, at equal specificity, ``--ignore``."""

    def specificity(selector: str) -> int:
        if selector == "ALL":
            return 0
        return len(selector) if code.startswith(selector) else -1

    best_select = max((specificity(s) for s in select), default=-1) if select else 0
    best_ignore = max((specificity(s) for s in ignore), default=-1)
    return best_select >= 0 and best_select > best_ignore


def warm_up(modules: Sequence[str]) -> None:
    """Import ``modules`` here, so the children forked from this process start with them."""
    for name in modules:
        importlib.import_module(name)


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# ------------------------------------------------------------------ text


def fmt_number(n: float) -> str:
    """A figure with about three significant digits: ``1,234``, ``12.3``, ``1.23``, ``0.12``."""
    if n >= 100:
        return f"{n:,.0f}"
    if n >= 10:
        return f"{n:.1f}"
    if n >= 1:
        return f"{n:.2f}"
    return f"{n:.2g}"


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def one_line(text: str, limit: int = 300) -> str:
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


def outcome_error(outcome, timeout: float) -> str:
    """One line for an isolated child that failed (``dslint.runtime.isolate.Outcome``)."""
    if outcome.kind == "timeout":
        return f"{outcome.error} (--timeout {timeout:g} s): the dataset hangs or is too slow; its workers were killed"
    if outcome.kind == "died":
        return f"{outcome.error}: the dataset crashed the process"
    return one_line(outcome.error or "failed")


def clean_path(text):
    """Attribute paths without the wrapper: ``dataset._dslint_inner.file`` -> ``dataset.file``."""
    if isinstance(text, str):
        return text.replace("." + INNER, "")
    if isinstance(text, dict):
        return {clean_path(k): clean_path(v) for k, v in text.items()}
    if isinstance(text, list):
        return [clean_path(v) for v in text]
    if isinstance(text, tuple):
        return tuple(clean_path(v) for v in text)
    return text


# ------------------------------------------------------------------ output


def cell(text: str) -> str:
    """A markdown table cell: one line, ``|`` escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    """The lines of a markdown table (cells as given: escape them with ``cell``)."""
    lines = [f"| {' | '.join(header)} |", "|" + "---|" * len(header)]
    lines += [f"| {' | '.join(row)} |" for row in rows]
    return lines


def to_json(data) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


def target_lines(t: dict) -> List[str]:
    """``target: ...`` and ``loader: ...`` for a described target (``describe.describe_target``)."""
    kind = "an iterable" if t["style"] == "iterable" else "a map-style"
    size = f" of {t['length']:,} samples" if t.get("length") is not None else " (no len())"
    made = f"{t['call']} \u2192 " if t["target_kind"] in ("class", "factory") else ""
    what = f"a DataLoader over {t['class']}, {kind} Dataset{size}" if t["returns"] == "DataLoader" else \
        f"{t['class']}, {kind} Dataset{size}"
    loader = t["loader"] + (f" ({t['loader_source']})" if t.get("loader_source") else "")
    return [f"target: {made}{what}", f"loader: {loader}"]


def target_notes(t: dict) -> List[str]:
    """What the measurements had to change about a described target."""
    lines = []
    if t.get("fork_override"):
        lines.append(f"note: with its own start method {t.get('multiprocessing_context')!r} the loader cannot start its "
                     f"workers (see DSL506), so the other checks used 'fork'")
    if t.get("shared_instance"):
        lines.append("note: the instance cannot be copied, so the checks share it (state one check consumes is gone for the next)")
    return lines
