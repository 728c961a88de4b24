"""GitHub Actions workflow commands: one annotation per finding."""

from __future__ import annotations


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
        out.append(f"::{command} {props}::{_data(f'{d.path}:{d.row}:{d.column}: {d.code} {d.message}')}\n")
    return "".join(out)
