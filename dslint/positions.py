"""Source ranges for the few nodes that are reported.

libcst's PositionProvider records a range for every node of the file, which costs
~13x a parse. Findings are rare, so dslint regenerates the code once for a file with
findings and records ranges only for the requested nodes (the same syntactic ranges
PositionProvider gives). Files without findings pay nothing.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState

Range = Tuple[Tuple[int, int], Tuple[int, int]]  # ((row, col0), (row, col0)), rows 1-based


@dataclass(frozen=False)
class _TargetedState(CodegenState):
    targets: set = field(default_factory=set)
    found: Dict[int, Range] = field(default_factory=dict)
    _line: int = 1
    _column: int = 0
    _consumed: int = 0
    _starts: List = field(default_factory=list)

    def _position(self) -> Tuple[int, int]:
        tokens = self.tokens
        line, column = self._line, self._column
        for i in range(self._consumed, len(tokens)):
            token = tokens[i]
            newlines = token.count("\n") + token.count("\r") - token.count("\r\n")
            if newlines:
                line += newlines
                last = max(token.rfind("\n"), token.rfind("\r"))
                column = len(token) - last - 1
            else:
                column += len(token)
        self._consumed = len(tokens)
        self._line, self._column = line, column
        return line, column

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.targets:
            self._starts.append(self._position())

    def after_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.targets:
            start = self._starts.pop()
            if key not in self.found:
                self.found[key] = (start, self._position())

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        key = id(node)
        if key not in self.targets:
            yield
            return
        # Compound statements end where their body's syntax ends: track it too.
        for extra in (start_node, end_node):
            if extra is not None:
                self.targets.add(id(extra))
        start = self._position()
        try:
            yield
        finally:
            end = self._position()
            if start_node is not None and id(start_node) in self.found:
                start = self.found[id(start_node)][0]
            if end_node is not None and id(end_node) in self.found:
                end = self.found[id(end_node)][1]
            self.found[key] = (start, end)


def node_ranges(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> Dict[int, Range]:
    """Syntactic ranges (row 1-based, column 0-based) of ``nodes`` in ``module``."""
    targets = {id(n) for n in nodes}
    if not targets:
        return {}
    state = _TargetedState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        targets=targets,
    )
    module._codegen(state)
    return state.found


def form_feed_shifts(text: str, regenerated: str) -> Dict[int, int]:
    """Rows whose leading form feeds libcst drops when it regenerates the code (its
    columns then run short of the file's): {row: number of form feeds to add back}."""
    shifts: Dict[int, int] = {}
    if "\x0c" not in text:
        return shifts
    from dslint.source import split_lines

    ours, theirs = split_lines(text), split_lines(regenerated)
    if len(ours) != len(theirs):
        return shifts
    for row, (line, regen) in enumerate(zip(ours, theirs), start=1):
        if "\x0c" not in line or line == regen:
            continue
        stripped = line.lstrip(" \t\x0c")
        lead = line[: len(line) - len(stripped)]
        if lead.replace("\x0c", "") + stripped == regen:
            shifts[row] = lead.count("\x0c")
    return shifts


def shift_ranges(ranges: Dict[int, Range], shifts: Dict[int, int]) -> Dict[int, Range]:
    """``ranges`` with the columns of the rows in ``shifts`` moved right."""
    if not shifts:
        return ranges
    return {key: ((srow, scol + shifts.get(srow, 0)), (erow, ecol + shifts.get(erow, 0)))
            for key, ((srow, scol), (erow, ecol)) in ranges.items()}
