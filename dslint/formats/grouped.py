"""ruff's ``grouped`` text: each file's name, then its findings as ``row:col CODE message``."""

from __future__ import annotations

from typing import Dict, List

from dslint.formats import fixable


def render(diagnostics, env) -> str:
    by_path: Dict[str, List] = {}
    for d in diagnostics:
        by_path.setdefault(d.path, []).append(d)
    chunks = []
    for path, items in by_path.items():
        row_width = max(len(str(d.row)) for d in items)
        col_width = max(len(str(d.column)) for d in items)
        lines = [f"{path}:"]
        for d in items:
            mark = "[*] " if fixable(d, env) else ""
            lines.append(f"  {str(d.row).rjust(row_width)}:{str(d.column).ljust(col_width)} {d.code} {mark}{d.message}")
        chunks.append("\n".join(lines) + "\n\n")
    return "".join(chunks)
