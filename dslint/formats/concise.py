"""``path:row:col: CODE [*] message``, one line per finding."""

from __future__ import annotations

from dslint.formats import fixable


def line(diagnostic, env) -> str:
    mark = " [*]" if fixable(diagnostic, env) else ""
    return f"{diagnostic.path}:{diagnostic.row}:{diagnostic.column}: {diagnostic.code}{mark} {diagnostic.message}"


def render(diagnostics, env) -> str:
    return "".join(line(d, env) + "\n" for d in diagnostics)
