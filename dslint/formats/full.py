"""The default: the concise line, a code frame with a caret under the range, and help."""

from __future__ import annotations

from dslint.formats import concise


def _style(text: str, env, **kwargs) -> str:
    if not env.color:
        return text
    import click

    return click.style(text, **kwargs)


def frame(diagnostic, env) -> list:
    rows = []
    for entry in diagnostic.source_lines:
        number, _, text = entry.partition("\t")
        rows.append((int(number), text.expandtabs(4) if "\t" in text else text, text))
    if not rows:
        return []
    width = len(str(rows[-1][0]))
    pad = " " * width
    out = [f"{pad} |"]
    srow, scol = diagnostic.start
    erow, ecol = diagnostic.end
    for number, shown, raw in rows:
        out.append(f"{str(number).rjust(width)} | {shown}")
        if number == srow:
            # columns are characters of the raw line; tabs widen to 4
            prefix = raw[: scol - 1].expandtabs(4)
            end = ecol if erow == srow else len(raw) + 1
            length = max(1, len(raw[scol - 1 : end - 1].expandtabs(4)))
            carets = _style("^" * length, env, fg="red" if diagnostic.level == "error" else "yellow", bold=True)
            out.append(f"{pad} | {' ' * len(prefix)}{carets} {diagnostic.code}")
            break
    out.append(f"{pad} |")
    if diagnostic.help:
        out.append(f"{pad} = help: {diagnostic.help}")
    return out


def render(diagnostics, env) -> str:
    chunks = []
    for diagnostic in diagnostics:
        head = concise.line(diagnostic, env)
        if env.color:
            head = head.replace(diagnostic.code, _style(diagnostic.code, env, fg="red", bold=True), 1)
        chunks.append("\n".join([head, *frame(diagnostic, env)]) + "\n")
    return "\n".join(chunks)
