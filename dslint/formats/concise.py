"""``path:row:col: CODE [*] message``, one line per finding (``path:cell N:row:col`` in a notebook)."""

from __future__ import annotations

from dslint.formats import fixable, place


def line(diagnostic, env) -> str:
    mark = " [*]" if fixable(diagnostic, env) else ""
    return f"{diagnostic.path}:{place(diagnostic)}: {diagnostic.code}{mark} {diagnostic.message}"


def render(diagnostics, env) -> str:
    return "".join(line(d, env) + "\n" for d in diagnostics)
