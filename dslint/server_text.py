"""Text and positions for ``dslint server``: dslint's rows and columns to LSP's.

dslint counts rows from 1 and columns from 1 in characters (code points); LSP
counts both from 0, and columns in the code units of the negotiated position
encoding (UTF-16 unless the client offers UTF-8 or UTF-32). Lines end at ``\\n``,
``\\r\\n`` or ``\\r`` in both (``dslint.source.split_lines``); a form feed or
U+2028 inside a line is an ordinary character for both, unlike ``str.splitlines``.
"""

from __future__ import annotations

import bisect
from typing import List, Optional, Sequence, Tuple

from lsprotocol import types as lsp

from dslint.fixes import dominant_newline
from dslint.report import Finding, TextEdit
from dslint.server_incremental import common_affixes
from dslint.source import line_starts, split_lines

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def units(text: str, encoding: str) -> int:
    """The length of ``text`` in the code units of ``encoding``."""
    if encoding == UTF32 or text.isascii():
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def column_of(line: str, character: int, encoding: str) -> int:
    """The character index in ``line`` of an LSP column (clamped to the line)."""
    if encoding == UTF32 or line.isascii():
        return min(character, len(line))
    count = 0
    for index, ch in enumerate(line):
        if count >= character:
            return index
        count += units(ch, encoding)
    return len(line)


class Lines:
    """A text's lines, for converting positions both ways."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.rows = split_lines(text)
        self.starts = line_starts(text)

    def line(self, index: int) -> str:
        return self.rows[index] if 0 <= index < len(self.rows) else ""

    def position(self, row: int, column: int, encoding: str) -> lsp.Position:
        """LSP position of a dslint (1-based row, 1-based column)."""
        line = self.line(row - 1)
        return lsp.Position(line=max(row - 1, 0), character=units(line[: max(column - 1, 0)], encoding))

    def range(self, start: Tuple[int, int], end: Tuple[int, int], encoding: str) -> lsp.Range:
        return lsp.Range(start=self.position(*start, encoding), end=self.position(*end, encoding))

    def offset(self, position: lsp.Position, encoding: str) -> int:
        """The offset in the text of an LSP position (clamped to the text)."""
        if position.line >= len(self.starts):
            return len(self.text)
        begin = self.starts[position.line]
        line = self.line(position.line)
        return begin + column_of(line, position.character, encoding)

    def position_at(self, offset: int, encoding: str) -> lsp.Position:
        index = bisect.bisect_right(self.starts, offset) - 1
        begin = self.starts[index]
        return lsp.Position(line=index, character=units(self.text[begin:offset], encoding))


def apply_change(text: str, change, encoding: str) -> str:
    """A ``didChange`` content change applied to ``text``."""
    if getattr(change, "range", None) is None:
        return change.text
    lines = Lines(text)
    start = lines.offset(change.range.start, encoding)
    end = lines.offset(change.range.end, encoding)
    return text[:start] + change.text + text[max(start, end):]


def replacement(old: str, new: str, encoding: str) -> Optional[lsp.TextEdit]:
    """One edit turning ``old`` into ``new``: the changed middle, as small as it gets."""
    if old == new:
        return None
    prefix, suffix = common_affixes(old, new)
    lines = Lines(old)
    return lsp.TextEdit(
        range=lsp.Range(start=lines.position_at(prefix, encoding), end=lines.position_at(len(old) - suffix, encoding)),
        new_text=new[prefix : len(new) - suffix],
    )


def fix_edits(text: str, edits: Sequence[TextEdit], encoding: str) -> List[lsp.TextEdit]:
    """A fix's edits as LSP edits, with the file's own newline (as ``apply_fixes`` writes them)."""
    lines = Lines(text)
    newline = dominant_newline(text)
    out = []
    for edit in edits:
        content = edit.content.replace("\n", newline) if newline != "\n" else edit.content
        out.append(lsp.TextEdit(range=lines.range(edit.start, edit.end, encoding), new_text=content))
    return out


def severity(finding: Finding) -> lsp.DiagnosticSeverity:
    return lsp.DiagnosticSeverity.Error if finding.level == "error" else lsp.DiagnosticSeverity.Warning


def before(a: lsp.Position, b: lsp.Position) -> bool:
    return (a.line, a.character) < (b.line, b.character)


def overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    """Ranges touching or overlapping (an empty range at a finding's edge counts)."""
    return not before(a.end, b.start) and not before(b.end, a.start)
