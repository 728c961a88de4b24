"""Jupyter notebooks (``.ipynb``) checked as Python.

The engine sees a notebook as one module: the code cells joined in order (a Dataset
defined in cell 3 and the DataLoader of cell 7 are analysed together). Markdown and
raw cells are left out, and so is every cell of a notebook whose kernel language is
not Python. IPython syntax never becomes a syntax error: at the start of a statement,
a line magic (``%time``), a shell escape (``!ls``, ``files = !ls``), help (``obj?``,
``?obj``), a line magic written without its ``%`` that is not Python (``pip install x``,
``conda install y``: IPython's automagic) is masked as ``pass`` at its indentation; the first line of a Python cell
magic (``%%time``, ``%%capture``, ...) is blanked, and every line of any other cell
magic (``%%bash``, ``%%writefile``, ...). A masked line keeps its place, so rows map
back to cells one to one.

Cells are numbered as ruff numbers them: the 1-based position of the cell among all
the notebook's cells (markdown ones included), and a row is the line in that cell.

Writing back never re-serialises the JSON: only the changed cells' ``source`` values
are replaced (``notebook_json``), so outputs, metadata, ids and formatting stay.
"""

from __future__ import annotations

import bisect
import codecs
import json
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from dslint import notebook_json
from dslint.source import split_lines

SUFFIX = ".ipynb"

#: cell magics whose body is Python (as ruff): only their ``%%`` line is masked
PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})

_CELL_MAGIC = re.compile(r"[ \t]*%%(\w*)")
#: line magics IPython runs without their ``%`` (automagic, on by default) when the line is not Python
_AUTOMAGIC = re.compile(r"(pip|conda|mamba|cd|ls|pwd|mkdir|rmdir|cp|mv|rm|cat|env|load_ext|reload_ext|matplotlib|autoreload)[ \t]")
_ASSIGN_MAGIC = re.compile(r"[ \t]*[\w.\[\](),* \t]+=[ \t]*[%!]")
_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=]")


class NotebookError(Exception):
    """A file that is not a notebook dslint can read (reported as DSL002)."""


def is_notebook(path: str) -> bool:
    return path.lower().endswith(SUFFIX)


# ------------------------------------------------------------------- masking


def _close(body: str, i: int, quote: str) -> int:
    """The index after the ``quote`` that closes a string at ``body[i:]``, or -1."""
    n = len(body)
    while i < n:
        if body[i] == "\\":
            i += 2
            continue
        if body.startswith(quote, i):
            return i + len(quote)
        i += 1
    return -1


class _Scanner:
    """Just enough of Python's tokenizer to tell where statements start: brackets,
    strings (triple-quoted ones span lines), comments and backslash continuations."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: Optional[str] = None
        self.continued = False

    @property
    def at_statement(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> str:
        """Advance over one line; returns its characters outside strings and comments."""
        body = line.rstrip("\r\n")
        outside = []
        i, n = 0, len(body)
        self.continued = False
        while i < n:
            if self.quote is not None:
                j = _close(body, i, self.quote)
                if j < 0:
                    if len(self.quote) == 1 and not body.endswith("\\"):
                        self.quote = None  # an unterminated string: Python's error, not ours
                    return "".join(outside)
                self.quote, i = None, j
                continue
            c = body[i]
            if c == "#":
                break
            if c in "'\"":
                self.quote = c * 3 if body.startswith(c * 3, i) else c
                i += len(self.quote)
                continue
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(0, self.depth - 1)
            elif c == "\\" and i == n - 1:
                self.continued = True
            outside.append(c)
            i += 1
        return "".join(outside)


def _is_magic(line: str) -> bool:
    """A line (at the start of a statement) that IPython reads, not Python."""
    stripped = line.lstrip()
    if not stripped or stripped[0] == "#":
        return False
    if stripped[0] in "%!?" or _ASSIGN_MAGIC.match(line):
        return True
    if _AUTOMAGIC.match(stripped) and not _compiles(stripped):
        return True  # `pip install x`, `conda install y`: IPython runs a line magic without its `%` (automagic)
    return "?" in _Scanner().feed(line)  # help: `obj?`, `obj.attr??` (never Python outside a string)


def _compiles(line: str) -> bool:
    try:
        compile(line, "<cell>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


def mask(source: str) -> Tuple[List[str], Dict[int, str]]:
    """The lines of a cell as the engine sees them (each ending in a newline), and the
    original of every masked line (by 0-based index)."""
    lines = split_lines(source, keepends=True)
    if lines and not _ending(lines[-1]):
        lines[-1] += "\n"
    masked: Dict[int, str] = {}
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        match = _CELL_MAGIC.match(lines[first])
        if match:
            names = range(first, first + 1) if match.group(1) in PYTHON_CELL_MAGICS else range(len(lines))
            for i in names:
                masked[i], lines[i] = lines[i], _ending(lines[i])
    scanner = _Scanner()
    magic_indent: Optional[str] = None  # a magic continued with a backslash
    for i, line in enumerate(lines):
        if i in masked:
            continue
        if magic_indent is None and scanner.at_statement and _is_magic(line):
            magic_indent = line[: len(line) - len(line.lstrip())]
        if magic_indent is not None:
            masked[i], lines[i] = line, magic_indent + "pass" + _ending(line)
            magic_indent = magic_indent if line.rstrip("\r\n").endswith("\\") else None
            continue
        scanner.feed(line)
    return lines, masked


# ------------------------------------------------------------------- the notebook


@dataclass
class Cell:
    number: int  # 1-based position among all the notebook's cells
    source: str  # as written
    lines: List[str]  # as the engine sees them: masked, each ending in a newline
    masked: Dict[int, str]  # 0-based line -> the original line
    first_row: int = 1  # row of its first line in the joined code

    @property
    def rows(self) -> int:
        return len(self.lines)

    @property
    def last_row(self) -> int:
        return self.first_row + self.rows - 1

    @property
    def text(self) -> str:
        """The source as written, ending in a newline (what fixes apply to)."""
        return "".join(self.masked.get(i, line) for i, line in enumerate(self.lines))

    def source_from(self, text: str) -> str:
        """A new source from its text (``text``), without the newline the join added."""
        if self.source and not _ending(self.source) and text.endswith("\n"):
            return text[:-1]
        return text

    def original_line(self, row: int) -> str:
        """Line ``row`` (1-based, within the cell) as written."""
        return self.masked.get(row - 1, self.lines[row - 1])


def _language(doc: dict) -> Optional[str]:
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        return None
    for key, inner in (("language_info", "name"), ("kernelspec", "language")):
        table = metadata.get(key)
        if isinstance(table, dict) and isinstance(table.get(inner), str):
            return table[inner].lower()
    return None


def _source_text(cell: dict, number: int) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise NotebookError(f"cell {number}: `source` must be a string or a list of strings")


class Notebook:
    """A parsed notebook: its JSON text, its code cells and their joined code."""

    def __init__(self, raw: str, bom: bool = False) -> None:
        self.raw = raw
        self.bom = bom
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise NotebookError(f"not valid JSON ({exc})")
        except RecursionError:
            raise NotebookError("not a Jupyter notebook (JSON nested too deeply)")
        if not isinstance(doc, dict) or "nbformat" not in doc:
            raise NotebookError("not a Jupyter notebook (no `nbformat` key)")
        if doc.get("nbformat") != 4:
            raise NotebookError(f"nbformat {doc.get('nbformat')!r} is not supported (version 4 expected; "
                                "`jupyter nbconvert --to notebook --nbformat 4` upgrades it)")
        cells = doc.get("cells")
        if not isinstance(cells, list):
            raise NotebookError("not a Jupyter notebook (`cells` is not a list)")
        self.language = _language(doc)
        self.cells: List[Cell] = []
        self.spans: List[Optional[notebook_json.Span]] = []
        python = self.language in (None, "python", "python3")
        for number, cell in enumerate(cells, 1):
            if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
                raise NotebookError(f"cell {number} has no `cell_type`")
            if cell["cell_type"] == "code" and python:
                source = _source_text(cell, number)
                lines, masked = mask(source)
                self.cells.append(Cell(number, source, lines, masked))
        if self.cells:
            try:
                self.spans = notebook_json.source_spans(raw)
            except (notebook_json.JSONShapeError, RecursionError) as exc:  # not for what json.loads took
                raise NotebookError(f"cannot locate the cells' sources ({exc})")
        row = 1
        for cell in self.cells:
            cell.first_row = row
            row += cell.rows
        self._mask_cookie()
        self.code = "".join(line for cell in self.cells for line in cell.lines)
        self._starts = [cell.first_row for cell in self.cells if cell.rows]
        self._with_rows = [cell for cell in self.cells if cell.rows]

    @classmethod
    def from_bytes(cls, data: bytes) -> "Notebook":
        bom = data.startswith(codecs.BOM_UTF8)
        try:
            raw = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise NotebookError(f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})")
        return cls(raw, bom)

    def _mask_cookie(self) -> None:
        """A PEP 263 comment in the first two lines would make the engine decode the
        joined code (UTF-8) with another codec: it is masked (same length)."""
        seen = 0
        for cell in self.cells:
            for i, line in enumerate(cell.lines):
                if seen == 2:
                    return
                seen += 1
                if i not in cell.masked and _COOKIE.match(line):
                    cell.masked[i], cell.lines[i] = line, line.replace("coding", "codinG")

    # ---------------------------------------------------------------- positions
    def code_bytes(self) -> bytes:
        return self.code.encode("utf-8", "surrogatepass")

    def cell_at(self, row: int) -> Optional[Cell]:
        """The cell of a row of the joined code (rows past the end: the last cell)."""
        if not self._starts:
            return None
        return self._with_rows[max(0, bisect.bisect_right(self._starts, row) - 1)]

    def cell(self, number: int) -> Cell:
        return next(c for c in self.cells if c.number == number)

    # ---------------------------------------------------------------- writing
    def with_sources(self, sources: Dict[int, str]) -> "Notebook":
        """This notebook with new sources for some cells (by number): only their
        ``source`` values change in the file."""
        ensure_ascii = notebook_json.string_style(self.raw)
        replacements = {}
        for number, source in sources.items():
            span = self.spans[number - 1]
            if span is None or self.cell(number).source == source:
                continue
            replacements[span] = notebook_json.encode_source(self.raw, span, source, ensure_ascii)
        if not replacements:
            return self
        return Notebook(notebook_json.replace_spans(self.raw, replacements), self.bom)

    def dump(self) -> bytes:
        data = self.raw.encode("utf-8", "surrogatepass")
        return codecs.BOM_UTF8 + data if self.bom else data

    def from_code(self, code: str) -> "Notebook":
        """This notebook with its cells taken from new joined code of the same rows
        (``--add-noqa`` appends comments); masked lines keep their original."""
        lines = split_lines(code, keepends=True)
        if len(lines) != sum(cell.rows for cell in self.cells):
            raise ValueError("the joined code of a notebook changed its number of lines")
        sources = {}
        for cell in self.cells:
            mine = lines[cell.first_row - 1 : cell.last_row]
            text = "".join(cell.masked.get(i, line) for i, line in enumerate(mine))
            sources[cell.number] = cell.source_from(text)
        return self.with_sources(sources)

    def fixed(self, fixes: Sequence) -> Tuple["Notebook", int]:
        """The fixes applied to their cells' sources: (the new notebook, how many).

        A fix applies only when all its edits lie in one cell and none touches a masked
        line (a magic); the others are left for the user."""
        from dslint.fixes import apply_fixes
        from dslint.report import Fix

        by_cell: Dict[int, list] = {}
        for fix in fixes:
            cell = self._cell_of(fix.edits)
            if cell is None:
                continue
            edits = tuple(_shifted(edit, cell.first_row - 1) for edit in fix.edits)
            by_cell.setdefault(cell.number, []).append(Fix(fix.applicability, fix.message, edits))
        sources, count = {}, 0
        for number, cell_fixes in by_cell.items():
            cell = self.cell(number)
            new_text, applied = apply_fixes(cell.text, cell_fixes)
            if applied:
                sources[number] = cell.source_from(new_text)
                count += applied
        return (self.with_sources(sources), count) if count else (self, 0)

    def _cell_of(self, edits) -> Optional[Cell]:
        cells = set()
        for edit in edits:
            cell = self.cell_at(edit.start[0])
            if cell is None:
                return None
            end_row, end_col = edit.end
            if end_row > cell.last_row + 1 or (end_row == cell.last_row + 1 and end_col != 1):
                return None  # spans two cells
            for index in cell.masked:
                row = cell.first_row + index
                if edit.start < (row + 1, 1) and (row, 1) < edit.end:
                    return None  # would change a magic
            cells.add(cell.number)
        return self.cell(cells.pop()) if len(cells) == 1 else None


def _shifted(edit, rows: int):
    from dslint.report import TextEdit

    return TextEdit(edit.content, (edit.start[0] - rows, edit.start[1]), (edit.end[0] - rows, edit.end[1]))


def locate(notebook: Notebook, position: Tuple[int, int], within: Optional[Cell] = None) -> Tuple[Optional[Cell], Tuple[int, int]]:
    """(the cell, (row in the cell, column)) of a position in the joined code. With
    ``within``, a position past that cell is clamped to its end."""
    row, column = position
    cell = within or notebook.cell_at(row)
    if cell is None:
        return None, position
    local = row - cell.first_row + 1
    if local > cell.rows:
        return cell, (cell.rows + 1, 1)
    if local < 1:
        return cell, (1, 1)
    return cell, (local, column)

