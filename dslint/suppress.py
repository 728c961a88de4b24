"""Suppression comments.

* ``# noqa`` / ``# noqa: DSL101, DSL501`` on the reported line;
* ``# dslint: ignore[DSL101]`` on its own line covers the next logical line;
* ``# dslint: noqa`` (whole file), ``# dslint: noqa: DSL401`` and
  ``# dslint: file-ignore[DSL401]`` (those codes in the whole file).

Comments are read from the token stream, so a ``# noqa`` inside a string is just
text. Only files that have findings (or DSL noqa comments) are tokenized.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Dict, Optional, Set, Tuple

_NOQA = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(r"^#\s*dslint\s*:\s*noqa(?:\s*:\s*(?P<codes>[A-Z0-9,\s]+))?\s*$", re.IGNORECASE)
_FILE_IGNORE = re.compile(r"^#\s*dslint\s*:\s*file-ignore\[(?P<codes>[A-Z0-9,\s]+)\]\s*$", re.IGNORECASE)
_NEXT_LINE = re.compile(r"^#\s*dslint\s*:\s*ignore\[(?P<codes>[A-Z0-9,\s]+)\]\s*$", re.IGNORECASE)
_CODE = re.compile(r"[A-Z]+[0-9]+")

ALL = "*"


def _codes(text: Optional[str]) -> Set[str]:
    if not text:
        return {ALL}
    return set(_CODE.findall(text.upper()))


@dataclass
class LineNoqa:
    row: int
    codes: Set[str]  # {ALL} for a bare ``# noqa``
    start: Tuple[int, int]  # (row, col 1-based) of the ``#``
    end: Tuple[int, int]
    comment: str
    match_span: Tuple[int, int]  # where the noqa directive sits within the comment
    line_text: str = ""
    used: Set[str] = field(default_factory=set)


@dataclass
class Suppressions:
    file_codes: Set[str] = field(default_factory=set)  # {ALL} for the whole file
    lines: Dict[int, LineNoqa] = field(default_factory=dict)
    next_line: Dict[int, Set[str]] = field(default_factory=dict)

    def suppresses(self, code: str, row: int) -> bool:
        if ALL in self.file_codes or code in self.file_codes:
            return True
        covered = self.next_line.get(row)
        if covered and (ALL in covered or code in covered):
            return True
        noqa = self.lines.get(row)
        if noqa is not None and (ALL in noqa.codes or code in noqa.codes):
            noqa.used.add(code)
            return True
        return False


    def suppresses_any(self, code: str, rows) -> bool:
        """Whether a directive on the first of ``rows`` that has one for ``code`` (or a
        file-wide one) suppresses it; that directive is marked used."""
        return any(self.suppresses(code, row) for row in rows)


_SKIP = (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER)


def parse(text: str) -> Suppressions:
    result = Suppressions()
    pending: Set[str] = set()  # codes of a ``dslint: ignore[...]`` waiting for its line
    active: Set[str] = set()  # codes covering the current logical line
    if "\r" in text:
        # tokenize splits lines at \n only; Python (and the reported rows) also end
        # a line at a lone \r. Same rows and columns once every ending is \n.
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return result
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            comment = tok.string
            whole_line = tok.line[: tok.start[1]].strip() == ""
            if whole_line:
                m = _FILE_NOQA.match(comment) or _FILE_IGNORE.match(comment)
                if m:
                    result.file_codes |= _codes(m.group("codes"))
                    continue
                m = _NEXT_LINE.match(comment)
                if m:
                    pending |= _codes(m.group("codes"))
                    continue
            m = _NOQA.search(comment)
            if m:
                row = tok.start[0]
                result.lines[row] = LineNoqa(
                    row=row,
                    codes=_codes(m.group("codes")),
                    start=(row, tok.start[1] + 1),
                    end=(tok.end[0], tok.end[1] + 1),
                    comment=comment,
                    match_span=m.span(),
                    line_text=tok.line,
                )
        elif tok.type == tokenize.NEWLINE:
            active = set()  # the logical line a ``dslint: ignore`` covered has ended
        elif tok.type not in _SKIP:
            if pending:
                active, pending = active | pending, set()
            if active:
                for row in range(tok.start[0], tok.end[0] + 1):
                    result.next_line.setdefault(row, set()).update(active)
    return result
