"""What a check hands back for a notebook: its text and its findings.

The engine checks a notebook's joined code, so its findings, fixes and ``# noqa`` rows
are positions in that code; they stay so in the ``Outcome`` (baselines fingerprint the
joined lines, ``--add-noqa`` edits them, ``--fix`` maps each fix to its cell). Two
types carry the notebook along:

- ``NotebookText``: the joined code (a ``str``) that knows its notebook. Encoding it
  gives the notebook file, with the cells' sources taken from the text, so whatever
  writes a checked file back (``encode(text, ...)``) writes a notebook, not Python.
- ``NotebookFinding``: a finding that knows its notebook; ``in_cells()`` is the same
  finding with positions, fix edits and code frame in the cell's own lines and the
  cell's number in ``cell``: what the output formats print.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from dslint.notebooks import Notebook, locate
from dslint.report import Finding, Fix, TextEdit


class NotebookText(str):
    """The joined code of a notebook's code cells; ``encode()`` gives the notebook file."""

    notebook: Notebook

    def __new__(cls, code: str, notebook: Notebook) -> "NotebookText":
        text = super().__new__(cls, code)
        text.notebook = notebook
        return text

    def replaced(self, code: str) -> "NotebookText":
        """New joined code (of the same lines) for the same notebook."""
        return NotebookText(code, self.notebook)

    def as_notebook(self) -> Notebook:
        if str.__eq__(self, self.notebook.code):
            return self.notebook
        return self.notebook.from_code(str(self))

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:  # type: ignore[override]
        return self.as_notebook().dump()


@dataclass
class NotebookFinding(Finding):
    """A finding in a notebook, positioned in its joined code (see the module)."""

    notebook: Optional[Notebook] = field(default=None, compare=False, repr=False)
    #: set on the copy ``in_cells()`` makes: the 1-based cell its positions are in
    cell: Optional[int] = None

    @classmethod
    def of(cls, finding: Finding, notebook: Notebook) -> "NotebookFinding":
        values = {f.name: getattr(finding, f.name) for f in dataclasses.fields(Finding)}
        return cls(**values, notebook=notebook)

    def in_cells(self) -> Finding:
        notebook = self.notebook
        if notebook is None or self.cell is not None:
            return self
        cell, start = locate(notebook, self.start)
        if cell is None:
            return self
        _, end = locate(notebook, self.end, within=cell)

        def row(joined: int) -> Optional[int]:
            local = joined - cell.first_row + 1
            return local if 1 <= local <= cell.rows else None

        frame = []
        for entry in self.source_lines:
            number, _, _ = entry.partition("\t")
            local = row(int(number)) if number.isdigit() else None
            if local is not None:
                frame.append(f"{local}\t{cell.original_line(local).rstrip(chr(13) + chr(10))}")
        fix = self.fix
        if fix is not None:
            edits = []
            for edit in fix.edits:
                _, a = locate(notebook, edit.start, within=cell)
                _, b = locate(notebook, edit.end, within=cell)
                edits.append(TextEdit(edit.content, a, b))
            fix = Fix(fix.applicability, fix.message, tuple(edits))
        noqa_row = row(self.noqa_row) if self.noqa_row is not None else None
        also = tuple(r for r in (row(r) for r in self.also_noqa) if r is not None)
        return dataclasses.replace(self, start=start, end=end, fix=fix, noqa_row=noqa_row, also_noqa=also,
                                   source_lines=frame, cell=cell.number)


def shown(diagnostic: Finding) -> Finding:
    """The finding as the formats print it (a notebook's: within its cell)."""
    in_cells = getattr(diagnostic, "in_cells", None)
    return in_cells() if in_cells is not None else diagnostic


def attach(result, notebooks: Dict[str, Notebook]) -> None:
    """Give a check result's notebook texts and findings their notebook (in place)."""
    if not notebooks:
        return
    for path, notebook in notebooks.items():
        if path in result.texts:
            result.texts[path] = NotebookText(result.texts[path], notebook)
    result.diagnostics = [
        NotebookFinding.of(d, notebooks[d.path]) if d.path in notebooks and not isinstance(d, NotebookFinding) else d
        for d in result.diagnostics
    ]


def cell_diff(path: str, before: Notebook, after: Notebook) -> List[str]:
    """A unified diff of the cells a fix changed, one per cell (``a/PATH:cell N``)."""
    import difflib

    from dslint.source import split_lines

    out: List[str] = []
    new = {cell.number: cell for cell in after.cells}
    for cell in before.cells:
        other = new.get(cell.number)
        if other is None or other.source == cell.source:
            continue
        out.extend(
            difflib.unified_diff(
                split_lines(cell.text, keepends=True),
                split_lines(other.text, keepends=True),
                fromfile=f"a/{path}:cell {cell.number}",
                tofile=f"b/{path}:cell {cell.number}",
            )
        )
    return out
