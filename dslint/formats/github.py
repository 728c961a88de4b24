"""GitHub Actions workflow commands: one annotation per finding.

In a notebook, ``line``/``endLine`` are the lines within the cell and the message
starts with ``path:cell N:row:col`` (GitHub has no field for a cell), as ruff does.
"""

from __future__ import annotations

from dslint.formats import place


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(diagnostics, env) -> str:
    out = []
    for d in diagnostics:
        command = "warning" if d.level == "warning" else "error"
        props = ",".join(
            [
                f"file={_prop(d.path)}",
                f"line={d.start[0]}",
                f"col={d.start[1]}",
                f"endLine={d.end[0]}",
                f"endColumn={d.end[1]}",
                f"title={_prop(f'dslint ({d.code})')}",
            ]
        )
        out.append(f"::{command} {props}::{_data(f'{d.path}:{place(d)}: {d.code} {d.message}')}\n")
    return "".join(out)
