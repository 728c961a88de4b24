"""The shared leaf types: what a rule reports and what a check produces.

Everything may import this module; it imports nothing of dslint (and libcst only
for annotations).

- What a rule returns: ``Report`` (a node, a message, an optional ``FixSpec`` made
  of ``NodeEdit``s: edits anchored to libcst nodes).
- What a check produces: ``Finding`` (with a ``Fix`` made of ``TextEdit``s), plain
  data, JSON-serialisable through ``to_dict``/``from_dict``, so that results can
  cross process boundaries and live in the cache. Rows are 1-based; columns are
  1-based character offsets, as in ruff.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Optional

if TYPE_CHECKING:  # annotations only: the leaf types must not import libcst
    import libcst as cst

ERROR = "error"
WARNING = "warning"

SAFE = "safe"
UNSAFE = "unsafe"


@dataclass(frozen=True)
class TextEdit:
    """Replace the text between two (row, column) locations with ``content``."""

    content: str
    start: tuple[int, int]
    end: tuple[int, int]

    def to_dict(self) -> dict:
        return {"content": self.content, "start": list(self.start), "end": list(self.end)}

    @classmethod
    def from_dict(cls, d: dict) -> "TextEdit":
        return cls(d["content"], tuple(d["start"]), tuple(d["end"]))


@dataclass(frozen=True)
class Fix:
    applicability: str  # SAFE or UNSAFE
    message: str
    edits: tuple[TextEdit, ...]

    def to_dict(self) -> dict:
        return {
            "applicability": self.applicability,
            "message": self.message,
            "edits": [e.to_dict() for e in self.edits],
        }

    @classmethod
    def from_dict(cls, d: Optional[dict]) -> Optional["Fix"]:
        if d is None:
            return None
        return cls(d["applicability"], d["message"], tuple(TextEdit.from_dict(e) for e in d["edits"]))


@dataclass
class Finding:
    code: str
    name: str
    message: str
    path: str
    start: tuple[int, int]
    end: tuple[int, int]
    level: str = ERROR
    help: Optional[str] = None
    fix: Optional[Fix] = None
    noqa_row: Optional[int] = None
    #: other rows whose ``# noqa`` also suppresses this finding (the rest of the reported
    #: node, the first row of its statement)
    also_noqa: tuple = ()
    # Filled in after the check: the source line(s) for code frames.
    source_lines: list[str] = field(default_factory=list, compare=False, repr=False)

    @property
    def row(self) -> int:
        return self.start[0]

    @property
    def column(self) -> int:
        return self.start[1]

    def sort_key(self):
        return (self.path, self.start, self.code)

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "path": self.path,
            "start": list(self.start),
            "end": list(self.end),
            "level": self.level,
            "help": self.help,
            "fix": self.fix.to_dict() if self.fix else None,
            "noqa_row": self.noqa_row,
            "also_noqa": list(self.also_noqa),
            "source_lines": self.source_lines,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Finding":
        return cls(
            code=d["code"],
            name=d["name"],
            message=d["message"],
            path=d["path"],
            start=tuple(d["start"]),
            end=tuple(d["end"]),
            level=d["level"],
            help=d.get("help"),
            fix=Fix.from_dict(d.get("fix")),
            noqa_row=d.get("noqa_row"),
            also_noqa=tuple(d.get("also_noqa", ())),
            source_lines=list(d.get("source_lines", ())),
        )


# ----------------------------------------------------------------- what a rule returns


@dataclass
class NodeEdit:
    """Replace the source from the start of ``start`` to the end of ``end`` (nodes).

    ``start_at_end``/``end_at_start`` select the other side of a node, so an edit
    can also cover the gap between two nodes (e.g. an argument and its comma).
    """

    start: cst.CSTNode
    end: Optional[cst.CSTNode] = None
    content: str = ""
    start_at_end: bool = False
    end_at_start: bool = False


@dataclass
class FixSpec:
    applicability: str  # SAFE | UNSAFE
    message: str
    edits: List[NodeEdit] = field(default_factory=list)


@dataclass
class Report:
    node: cst.CSTNode
    message: str
    level: Optional[str] = None
    help: Optional[str] = None
    fix: Optional[FixSpec] = None
    end_node: Optional[cst.CSTNode] = None  # report the range node..end_node
