"""Baselines: adopt dslint on a legacy repository, gate only new findings.

``--write-baseline FILE`` records the current findings; ``--baseline FILE`` (or
``baseline = "FILE"`` in ``[tool.dslint]``) hides the findings it records. A
finding is matched by file, code and a fingerprint of the offending line's
normalised text (whitespace removed) with its two neighbours -- never by line
number, so edits elsewhere in the file do not break the match. When the
neighbours changed too, the offending line alone still matches (a second,
looser pass). Each entry matches one finding at most, so a second copy of a
baselined defect in the same file is reported.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from typing import Dict, List, Sequence

from dslint.source import split_lines

VERSION = 1


class BaselineError(Exception):
    pass


def _norm(line: str) -> str:
    return "".join(line.split())


def fingerprints(lines: Sequence[str], row: int, code: str) -> tuple:
    """(with neighbours, line only) fingerprints of the finding at 1-based ``row``."""

    def line(r: int) -> str:
        return _norm(lines[r - 1]) if 1 <= r <= len(lines) else ""

    context = "\n".join([code, line(row - 1), line(row), line(row + 1)])
    alone = "\n".join([code, line(row)])
    digest = lambda s: hashlib.sha1(s.encode("utf-8", "surrogatepass")).hexdigest()[:16]  # noqa: E731
    return digest(context), digest(alone)


def _key_path(path: str, root: str) -> str:
    return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")


def entries_for(diagnostics, texts: Dict[str, str], root: str) -> List[dict]:
    out = []
    for d in diagnostics:
        lines = split_lines(texts.get(d.path, ""))
        context, alone = fingerprints(lines, d.noqa_row or d.start[0], d.code)
        out.append(
            {
                "path": _key_path(d.path, root),
                "code": d.code,
                "fingerprint": context,
                "line_fingerprint": alone,
                "row": d.start[0],
                "message": d.message,
            }
        )
    return out


def write(path: str, diagnostics, texts: Dict[str, str], root: str) -> int:
    entries = entries_for(diagnostics, texts, root)
    entries.sort(key=lambda e: (e["path"], e["row"], e["code"]))
    data = {"version": VERSION, "tool": "dslint", "findings": entries}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
    return len(entries)


def load(path: str) -> List[dict]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise BaselineError(f"{path}: baseline file not found (create it with --write-baseline)")
    except (OSError, ValueError) as exc:
        raise BaselineError(f"{path}: not a dslint baseline ({exc})")
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("findings"), list):
        raise BaselineError(f"{path}: not a dslint baseline (version {VERSION} expected)")
    return data["findings"]


def filter_new(diagnostics, texts: Dict[str, str], root: str, baseline: List[dict]):
    """The diagnostics that the baseline does not account for."""
    pool_exact: Dict[tuple, int] = defaultdict(int)
    pool_line: Dict[tuple, int] = defaultdict(int)
    for entry in baseline:
        pool_exact[(entry["path"], entry["code"], entry["fingerprint"])] += 1
        pool_line[(entry["path"], entry["code"], entry["line_fingerprint"])] += 1
    current = entries_for(diagnostics, texts, root)
    matched = [False] * len(current)
    for i, entry in enumerate(current):  # exact context first
        key = (entry["path"], entry["code"], entry["fingerprint"])
        if pool_exact[key] > 0:
            pool_exact[key] -= 1
            pool_line[(entry["path"], entry["code"], entry["line_fingerprint"])] -= 1
            matched[i] = True
    for i, entry in enumerate(current):  # then the line alone
        if matched[i]:
            continue
        key = (entry["path"], entry["code"], entry["line_fingerprint"])
        if pool_line[key] > 0:
            pool_line[key] -= 1
            matched[i] = True
    return [d for d, hit in zip(diagnostics, matched) if not hit]
