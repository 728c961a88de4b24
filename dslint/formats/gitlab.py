"""GitLab Code Quality: a JSON array of issues (``artifacts:reports:codequality``).

Each issue has the fields GitLab documents: ``description``, ``check_name``,
``fingerprint``, ``severity`` (``major`` for an error, ``minor`` for a warning) and
``location.path`` (relative to ``$CI_PROJECT_DIR``, else to the current directory) with
``location.lines.begin``. The fingerprint hashes the file, the code, the message and the
text of the reported line, not its number, so a finding keeps its fingerprint when
lines above it move and GitLab does not report it as new; identical findings in one
file are told apart by their order.

In a notebook, ``location.lines`` are the lines within the cell, and the cell is in the
description (``DSL101: message (cell 7)``): GitLab's format has no field for it.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Dict, Tuple

from dslint.formats import cell_of

SEVERITY = {"error": "major", "warning": "minor"}


def _path(path: str) -> str:
    base = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(absolute, base)
    except ValueError:  # another drive
        return absolute.replace(os.sep, "/")
    return (absolute if rel.startswith("..") else rel).replace(os.sep, "/")


def _line_text(diagnostic) -> str:
    for entry in diagnostic.source_lines:
        number, _, text = entry.partition("\t")
        if number == str(diagnostic.row):
            return " ".join(text.split())
    return ""


def render(diagnostics, env) -> str:
    seen: Dict[Tuple[str, ...], int] = {}
    issues = []
    for d in diagnostics:
        path = _path(d.path)
        key = (path, d.code, d.message, _line_text(d))
        occurrence = seen[key] = seen.get(key, -1) + 1
        digest = hashlib.sha256("\0".join([*key, str(occurrence)]).encode("utf-8", "surrogatepass")).hexdigest()
        cell = cell_of(d)
        issues.append(
            {
                "description": f"{d.code}: {d.message}" + (f" (cell {cell})" if cell is not None else ""),
                "check_name": d.code,
                "fingerprint": digest[:32],
                "severity": SEVERITY.get(d.level, "major"),
                "location": {"path": path, "lines": {"begin": d.start[0], "end": d.end[0]}},
            }
        )
    return json.dumps(issues, indent=2) + "\n"
