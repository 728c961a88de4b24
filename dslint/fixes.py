"""Text edits for fixes, and applying them safely."""

from __future__ import annotations

import re
from typing import List, Sequence

from dslint.report import SAFE, Fix, TextEdit

_CODE = re.compile(r"[A-Z]+[0-9]+")


def remove_noqa_codes(noqa, unused: Sequence[str]) -> Fix:
    """Drop ``unused`` codes from a ``# noqa: ...`` comment (the whole comment if nothing is left)."""
    comment = noqa.comment
    start, end = noqa.match_span
    directive = comment[start:end]
    codes = [c for c in _CODE.findall(directive.split(":", 1)[1]) if c not in unused] if ":" in directive else []
    row = noqa.row
    col = noqa.start[1]  # 1-based column of '#'
    if codes:
        new_directive = directive.split(":", 1)[0] + ": " + ", ".join(codes)
        new_comment = comment[:start] + new_directive + comment[end:]
        edit = TextEdit(new_comment, (row, col), (row, col + len(comment)))
    else:
        rest = (comment[:start].rstrip("# ").strip() + " " + comment[end:].strip()).strip()
        if rest:
            rest = rest.lstrip("#").strip()
            edit = TextEdit("# " + rest, (row, col), (row, col + len(comment)))
        else:
            line = noqa.line_text.rstrip("\r\n")
            before = line[: col - 1]
            trimmed = before.rstrip()
            edit = TextEdit("", (row, len(trimmed) + 1), (row, col + len(comment)))
    plural = "s" if len(unused) > 1 else ""
    return Fix(SAFE, f"Remove unused `noqa` code{plural} {', '.join(unused)}", (edit,))


def apply_edits(text: str, edits: List[TextEdit]) -> str:
    """Apply non-overlapping edits (rows/columns 1-based) to ``text``."""
    from dslint.source import line_starts, offset_of

    starts = line_starts(text)
    spans = []
    for edit in edits:
        a = offset_of(starts, *edit.start)
        b = offset_of(starts, *edit.end)
        spans.append((a, b, edit.content))
    spans.sort()
    out = []
    position = 0
    for a, b, content in spans:
        if a < position:
            raise ValueError("overlapping edits")
        out.append(text[position:a])
        out.append(content)
        position = b
    out.append(text[position:])
    return "".join(out)


def dominant_newline(text: str) -> str:
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr = text.count("\r") - crlf
    if crlf > lf and crlf >= cr:
        return "\r\n"
    if cr > lf:
        return "\r"
    return "\n"


def _span(starts, edit: TextEdit):
    from dslint.source import offset_of

    return offset_of(starts, *edit.start), offset_of(starts, *edit.end)


def apply_fixes(text: str, fixes: Sequence[Fix]) -> tuple:
    """Apply as many non-overlapping fixes as possible, in source order.

    Returns (new text, number of fixes applied). Fixes that overlap one already
    taken wait for the next pass (the caller re-checks and calls again).
    """
    from dslint.source import line_starts

    starts = line_starts(text)
    newline = dominant_newline(text)
    taken: List[tuple] = []
    chosen: List[TextEdit] = []
    count = 0
    ordered = sorted(fixes, key=lambda f: min((_span(starts, e) for e in f.edits), default=(0, 0)))
    for fix in ordered:
        spans = [_span(starts, e) for e in fix.edits]
        if any(a > b for a, b in spans):
            continue
        if any(a < tb and ta < b or (a == b == ta == tb) for a, b in spans for ta, tb in taken):
            continue
        if any(a < b2 and a2 < b for i, (a, b) in enumerate(spans) for a2, b2 in spans[i + 1 :]):
            continue
        taken.extend(spans)
        for edit in fix.edits:
            content = edit.content.replace("\n", newline) if newline != "\n" else edit.content
            chosen.append(TextEdit(content, edit.start, edit.end))
        count += 1
    if not chosen:
        return text, 0
    return apply_edits(text, chosen), count


def add_noqa(text: str, codes_by_row: dict) -> tuple:
    """Add ``# noqa: CODES`` to each row, merging into an existing noqa comment.

    Returns (new text, rows changed, rows skipped). A row is skipped when a comment
    cannot end it: it ends inside a multi-line string, or continues with a backslash.
    A notebook's code (``NotebookText``) comes back as the same notebook's code, so
    that writing it writes the notebook.
    """
    import io
    import tokenize

    from dslint import suppress

    from dslint.source import split_lines

    sup = suppress.parse(text)
    blocked = set()
    # Rows as Python counts them: a lone \r ends a line (tokenize only splits at
    # \n), and form feeds, \x1c-\x1e, \x85, U+2028/9 do not (str.splitlines does).
    plain = text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
    try:
        for tok in tokenize.generate_tokens(io.StringIO(plain).readline):
            if tok.end[0] > tok.start[0] and tok.type not in (tokenize.NL, tokenize.NEWLINE):
                blocked.update(range(tok.start[0], tok.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return text, 0, len(codes_by_row)
    lines = split_lines(text, keepends=True)
    changed = skipped = 0
    for row, codes in sorted(codes_by_row.items()):
        if row < 1 or row > len(lines):
            skipped += 1
            continue
        raw = lines[row - 1]
        body = raw.rstrip("\r\n")
        ending = raw[len(body):]
        existing = sup.lines.get(row)
        if existing is not None:
            if suppress.ALL in existing.codes:
                continue
            missing = [c for c in sorted(codes) if c not in existing.codes]
            if not missing:
                continue
            start, end = existing.match_span
            directive = existing.comment[start:end]
            merged = ", ".join([*_CODE.findall(directive.split(":", 1)[1]), *missing]) if ":" in directive else ", ".join(missing)
            comment = existing.comment[:start] + "# noqa: " + merged + existing.comment[end:]
            col = existing.start[1] - 1
            body = body[:col] + comment + body[col + len(existing.comment):]
        else:
            if row in blocked or body.rstrip().endswith("\\"):
                skipped += 1
                continue
            body = body.rstrip() + "  # noqa: " + ", ".join(sorted(codes))
        lines[row - 1] = body + ending
        changed += 1
    new_text = "".join(lines)
    replaced = getattr(text, "replaced", None)  # a notebook's code stays its notebook's
    return (replaced(new_text) if replaced is not None else new_text), changed, skipped
