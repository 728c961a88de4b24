"""The JSON text of a notebook: where each cell's ``source`` is, and how to rewrite it.

A fix must change a notebook's file only inside the sources it fixes: outputs,
metadata, cell ids, key order, indentation and the trailing newline stay byte for
byte. So the file is never re-serialised: the text span of each cell's ``source``
value is found, and only the spans of changed cells are replaced, by a value written
in the style of the one it replaces (a string stays a string; a list of lines keeps
its indentation, its separators and the exact text of every line it keeps).
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import Callable, Dict, Iterator, List, Optional, Tuple

_WS = re.compile(r"[ \t\n\r]*")
_SCAN = json.JSONDecoder().scan_once

Span = Tuple[int, int]


class JSONShapeError(ValueError):
    """The text is JSON, but not shaped as this scanner expects (never for valid JSON
    that ``json.loads`` accepts as an object with a ``cells`` list)."""


def _ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()


def _value_end(text: str, i: int) -> int:
    try:
        return _SCAN(text, i)[1]
    except StopIteration as exc:
        raise JSONShapeError(f"no JSON value at offset {i}") from exc


def _members(text: str, i: int, scanners: Optional[Dict[str, Callable[[int], int]]] = None) -> Iterator[Tuple[str, int, int]]:
    """(key, value start, value end) of each member of the object starting at
    ``text[i]``. ``scanners[key](start)`` scans that key's value instead (returning its end)."""
    if text[i : i + 1] != "{":
        raise JSONShapeError(f"expected an object at offset {i}")
    i = _ws(text, i + 1)
    if text[i : i + 1] == "}":
        return
    while True:
        if text[i : i + 1] != '"':
            raise JSONShapeError(f"expected a key at offset {i}")
        key, i = scanstring(text, i + 1)
        i = _ws(text, i)
        if text[i : i + 1] != ":":
            raise JSONShapeError(f"expected ':' at offset {i}")
        start = _ws(text, i + 1)
        scanner = scanners.get(key) if scanners else None
        end = scanner(start) if scanner is not None else _value_end(text, start)
        yield key, start, end
        i = _ws(text, end)
        if text[i : i + 1] == ",":
            i = _ws(text, i + 1)
            continue
        if text[i : i + 1] == "}":
            return
        raise JSONShapeError(f"expected ',' or '}}' at offset {i}")


def elements(text: str, i: int) -> Tuple[List[Span], int]:
    """The spans of the elements of the array starting at ``text[i]``, and its end."""
    if text[i : i + 1] != "[":
        raise JSONShapeError(f"expected an array at offset {i}")
    spans: List[Span] = []
    i = _ws(text, i + 1)
    if text[i : i + 1] == "]":
        return spans, i + 1
    while True:
        end = _value_end(text, i)
        spans.append((i, end))
        i = _ws(text, end)
        if text[i : i + 1] == ",":
            i = _ws(text, i + 1)
            continue
        if text[i : i + 1] == "]":
            return spans, i + 1
        raise JSONShapeError(f"expected ',' or ']' at offset {i}")


def source_spans(text: str) -> List[Optional[Span]]:
    """For every cell of the notebook ``text`` (in order), the span of its ``source``
    value (None for a cell without one). ``text`` must be valid JSON."""
    out: List[Optional[Span]] = []

    def cells(start: int) -> int:
        out.clear()
        spans, end = elements(text, start)
        for cell_start, _ in spans:
            span = None
            if text[cell_start] == "{":
                for key, a, b in _members(text, cell_start):
                    if key == "source":
                        span = (a, b)
            out.append(span)
        return end

    for _ in _members(text, _ws(text, 0), {"cells": cells}):
        pass
    return out


# ------------------------------------------------------------------- writing


def string_style(raw: str) -> bool:
    """``ensure_ascii`` for new strings: True only when the file escapes non-ASCII text
    (it has ``\\u`` escapes and no raw non-ASCII character); nbformat writes it raw."""
    return raw.isascii() and "\\u" in raw


def line_indent(text: str, offset: int) -> str:
    """The whitespace that starts the line ``offset`` is on."""
    line_start = text.rfind("\n", 0, offset) + 1
    match = re.match(r"[ \t]*", text[line_start:offset])
    return match.group(0) if match else ""


def indent_unit(text: str) -> str:
    """One level of indentation in this file (nbformat writes one space)."""
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else " "


def encode_source(raw: str, span: Span, new: str, ensure_ascii: bool) -> str:
    """The text of a ``source`` value holding ``new``, in the style of ``raw[span]``."""
    old = raw[span[0] : span[1]]
    if old.startswith('"'):
        return json.dumps(new, ensure_ascii=ensure_ascii)
    lines = new.splitlines(keepends=True)  # nbformat's own split
    if not lines:
        return "[]"
    items, _ = elements(raw, span[0])
    known: Dict[str, str] = {}
    for a, b in items:
        value = json.loads(raw[a:b])
        known.setdefault(value, raw[a:b])
    tokens = [known.get(line) or json.dumps(line, ensure_ascii=ensure_ascii) for line in lines]
    if items:
        prefix = raw[span[0] + 1 : items[0][0]]
        suffix = raw[items[-1][1] : span[1] - 1]
        sep = raw[items[0][1] : items[1][0]] if len(items) > 1 else "," + prefix
    elif "\n" in raw[: span[0]]:
        indent = line_indent(raw, span[0])
        prefix, suffix = "\n" + indent + indent_unit(raw), "\n" + indent
        sep = "," + prefix
    else:
        prefix, suffix, sep = "", "", ", "
    return "[" + prefix + sep.join(tokens) + suffix + "]"


def replace_spans(raw: str, replacements: Dict[Span, str]) -> str:
    out = []
    position = 0
    for (a, b), content in sorted(replacements.items()):
        out.append(raw[position:a])
        out.append(content)
        position = b
    out.append(raw[position:])
    return "".join(out)
