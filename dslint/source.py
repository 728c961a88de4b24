"""Reading checked files: bytes to text, honouring BOMs and PEP 263 cookies."""

from __future__ import annotations

import ast
import codecs
import io
import re
import tokenize
from dataclasses import dataclass
from typing import Optional


class SourceError(Exception):
    """A file that cannot be turned into Python source text."""


@dataclass
class Source:
    path: str
    text: str
    encoding: str
    has_bom: bool

    @property
    def lines(self) -> list[str]:
        return split_lines(self.text)


_NEWLINE = re.compile(r"\r\n|\r|\n")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """Lines as Python numbers them: only \\n, \\r\\n and \\r end a line.

    ``str.splitlines`` also splits at form feeds, \\x1c-\\x1e, \\x85 and U+2028/9,
    which Python source may contain, so its rows drift from the parser's.
    """
    if not keepends:
        lines = _NEWLINE.split(text)
        if lines[-1] == "":
            lines.pop()
        return lines
    out = []
    start = 0
    for match in _NEWLINE.finditer(text):
        out.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        out.append(text[start:])
    return out


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def _cookie(data: bytes) -> Optional[str]:
    """The encoding a PEP 263 cookie on the first two lines declares, if any."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    for line in data.splitlines()[:2]:
        match = _COOKIE.match(line)
        if match:
            return match.group(1).decode("ascii", "replace")
    return None


#: the header of a macOS AppleDouble file (RFC 1740): the companion ``._name`` that holds another
#: file's metadata when it was copied to a volume without resource forks (zip, tar, FAT, a share)
APPLE_DOUBLE_MAGIC = b"\x00\x05\x16\x07"


def is_apple_double(path: str, data: Optional[bytes]) -> bool:
    """``._name.py`` holding an AppleDouble header: metadata of ``name.py``, not Python source."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.startswith("._") and bool(data) and data.startswith(APPLE_DOUBLE_MAGIC)


def decode(data: bytes, path: str) -> Source:
    """Decode ``data`` as Python source, the way the interpreter would."""
    if b"\x00" in data:
        raise SourceError("binary file: contains NUL bytes, not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # bad cookie, or a BOM contradicting the cookie
        reason = exc.msg if hasattr(exc, "msg") else str(exc)
        cookie = _cookie(data)
        if reason.startswith("unknown encoding") and cookie:
            fallback = _as_utf8_python(data)
            if fallback is None:
                raise SourceError(f"cannot determine the encoding: the PEP 263 cookie declares `{cookie}`, which "
                                  "Python does not know, and the file is not Python source as UTF-8")
            return Source(path=path, text=fallback, encoding="utf-8", has_bom=data.startswith(codecs.BOM_UTF8))
        if reason.startswith("encoding problem") and cookie and data.startswith(codecs.BOM_UTF8):
            raise SourceError(f"cannot determine the encoding: a UTF-8 byte-order mark, but the PEP 263 cookie declares `{cookie}`")
        if not reason.startswith("invalid or missing encoding declaration"):
            raise SourceError(f"cannot determine the encoding: {reason}")
        # No cookie, and a first line that is not UTF-8: say which byte, below.
        encoding = "utf-8"
    has_bom = data.startswith(codecs.BOM_UTF8)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        declared = "declared " if encoding not in ("utf-8", "utf-8-sig") else ""
        row = len(re.findall(rb"\r\n|\r|\n", data[: exc.start])) + 1
        hint = "" if declared else "; declare the file's encoding with a PEP 263 cookie (`# -*- coding: latin-1 -*-`)"
        raise SourceError(
            f"cannot decode as {declared}{encoding}: {exc.reason} (byte 0x{data[exc.start]:02x} on line {row}){hint}"
        )
    except LookupError as exc:
        raise SourceError(f"cannot decode: {exc}")
    if text.startswith("\ufeff"):
        text = text[1:]
    return Source(path=path, text=text, encoding=encoding, has_bom=has_bom)


def _as_utf8_python(data: bytes) -> Optional[str]:
    """The text of a file whose cookie names a codec this Python lacks, read as UTF-8, when it
    compiles as Python. Such codecs are registered at start-up by packages (``future_fstrings``
    turns f-strings into ``.format`` calls for old interpreters) and take UTF-8 Python source,
    so the file is checked as what it is, the way ruff reads every file; a codec whose input
    is not Python (a template language) leaves a file that does not compile: None."""
    try:
        text = data.decode("utf-8-sig")
        compile(text, "<source>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (UnicodeDecodeError, SyntaxError, ValueError):
        return None
    return text


def encode(text: str, encoding: str, has_bom: bool) -> bytes:
    enc = "utf-8" if encoding == "utf-8-sig" else encoding
    data = text.encode(enc)
    if has_bom and not data.startswith(codecs.BOM_UTF8):
        data = codecs.BOM_UTF8 + data
    return data


def line_starts(text: str) -> list[int]:
    """Offsets of the start of every line (handling \\n, \\r\\n and \\r)."""
    starts = [0]
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            starts.append(i + 1)
        elif c == "\r":
            if i + 1 < n and text[i + 1] == "\n":
                i += 1
            starts.append(i + 1)
        i += 1
    return starts


def offset_of(starts: list[int], row: int, col: int) -> int:
    """Offset for a 1-based row and 1-based column."""
    return starts[row - 1] + col - 1


def location_of(starts: list[int], offset: int) -> tuple[int, int]:
    import bisect

    row = bisect.bisect_right(starts, offset)
    return row, offset - starts[row - 1] + 1


def first_line(text: Optional[str]) -> str:
    return (text or "").strip().splitlines()[0] if text and text.strip() else ""
