"""ruff's ``grouped`` text: each file's name, then its findings as ``row:col CODE message``
(``cell N:row:col`` in a notebook)."""

from __future__ import annotations

from typing import Dict, List

from dslint.formats import fixable, place


def render(diagnostics, env) -> str:
    by_path: Dict[str, List] = {}
    for d in diagnostics:
        by_path.setdefault(d.path, []).append(d)
    chunks = []
    for path, items in by_path.items():
        heads = [place(d).rpartition(":")[0] for d in items]  # ``row`` or ``cell N:row``
        head_width = max(len(h) for h in heads)
        col_width = max(len(str(d.column)) for d in items)
        lines = [f"{path}:"]
        for d, head in zip(items, heads):
            mark = "[*] " if fixable(d, env) else ""
            lines.append(f"  {head.rjust(head_width)}:{str(d.column).ljust(col_width)} {d.code} {mark}{d.message}")
        chunks.append("\n".join(lines) + "\n\n")
    return "".join(chunks)
