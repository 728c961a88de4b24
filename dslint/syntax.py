"""DSL000: what Python itself rejects, and the gate before libcst's parser.

Files with a long logical line (or very large files) are first checked by CPython's
own parser, which rejects nesting it could not run in milliseconds; libcst's native
parser takes time cubic in the nesting depth and overflows even a big stack on them.
``syntax_finding`` turns a rejection into the DSL000 finding, with CPython's own
message and position where CPython rejects the file too.
"""

from __future__ import annotations

import ast
import re
import sys
import warnings
from typing import List, Optional

import libcst as cst

from dslint.report import ERROR, Finding
from dslint.rules.base import all_rules
from dslint.source import split_lines

# Files with a long logical line (or very large files) are first checked by
# CPython's own parser, which rejects nesting it could not run (>200 brackets,
# operator chains past its recursion limit) in milliseconds; libcst's native parser
# takes time cubic in the nesting depth and overflows even a big stack on them.
# Deep nesting needs a long logical line: a long physical line, a long bracketed
# region spanning lines, or a long run of backslash continuations.
GATE_LINE_LENGTH = 1000
GATE_LOGICAL_LENGTH = 4000
GATE_FILE_SIZE = 512 * 1024
# Deep nesting on short lines: CPython refuses 200 nested brackets ("too many nested
# parentheses"), an ``elif`` chain of ~3,000 (its recursion limit while compiling) and 20
# nested loop/try/with blocks ("too many statically nested blocks", which only a full
# compile reports); libcst accepts all three. Half CPython's limits, so CPython decides.
GATE_BRACKET_DEPTH = 100
GATE_ELIF_CHAIN = 1000
GATE_BLOCK_DEPTH = 10
# CPython's default: the gate judges a file as ``python file.py`` would, not under
# the analysis thread's raised limit (which lets ast construction nest 3x deeper).
PYTHON_RECURSION_LIMIT = 1000

# Brackets, continuation backslashes, and the comments and strings to skip over.
_LOGICAL_SCAN = re.compile(
    r"""[()\[\]{}]
    | \\(?:\r\n|\r|\n)
    | \#[^\r\n]*
    | '''(?:[^'\\]|\\.|'(?!''))*(?:'''|\Z)
    | \"\"\"(?:[^"\\]|\\.|"(?!""))*(?:\"\"\"|\Z)
    | '(?:[^'\\\r\n]|\\.)*'?
    | "(?:[^"\\\r\n]|\\.)*"?
    """,
    re.VERBOSE | re.DOTALL,
)
_NEWLINE = re.compile(r"\r\n|\r|\n")



def describe_error(err: BaseException) -> str:
    detail = str(err).strip()
    return f"{type(err).__name__}: {detail}" if detail else type(err).__name__


def context_lines(lines: List[str], start: int, end: int) -> List[str]:
    """The reported rows, with up to two rows of context before them."""
    first = max(1, start - 2)
    last = min(len(lines), max(start, min(end, start + 4)))
    return [f"{row}\t{lines[row - 1]}" for row in range(first, last + 1)] if lines else []


def syntax_finding(path: str, text: str, exc: Exception) -> Finding:
    """The DSL000 finding for a file the parser (or Python) rejected with ``exc``."""
    row, col, message = 1, 1, f"syntax error: {exc}"
    # Prefer CPython's own message and position when it also rejects the file.
    try:
        if isinstance(exc, SyntaxError) and _is_limit(exc):
            raise exc  # the gate's verdict, from CPython itself (a full compile for nested blocks)
        _python_compile(path, text)
    except SyntaxError as err:
        row = err.lineno or 1
        col = err.offset or 1
        message = f"syntax error: {err.msg}"
    except (RecursionError, MemoryError) as err:
        row = _line_of(text, _long_logical_line(text))
        message = f"syntax error: nesting too deep for Python to compile ({describe_error(err)})"
    except (ValueError, TypeError) as err:
        message = f"syntax error: {err}"
    else:
        if isinstance(exc, cst.ParserSyntaxError):
            row, col = exc.raw_line, exc.raw_column + 1
            message = f"cannot analyse: dslint's parser (libcst) rejects this file, although Python accepts it ({exc.message})"
        elif isinstance(exc, (RecursionError, MemoryError)):
            row = _line_of(text, _long_logical_line(text))
            message = f"cannot analyse: nesting too deep for dslint ({describe_error(exc)}), although Python accepts it"
        else:
            message = f"cannot analyse: dslint's parser (libcst) rejects this file, although Python accepts it ({describe_error(exc)})"
    lines = split_lines(text)
    row = max(1, min(row, len(lines) or 1))
    line = lines[row - 1] if lines else ""
    col = max(1, min(col, len(line) + 1))
    rule = all_rules()["DSL000"]
    return Finding(
        code="DSL000",
        name=rule.name,
        message=message,
        path=path,
        start=(row, col),
        end=(row, col),
        level=ERROR,
        help=None,
        source_lines=context_lines(lines, row, row),
    )


def python2_indentation(path: str, text: str) -> Optional[str]:
    """The text as Python 2 reads its indentation, for a file Python 3 rejects only for
    mixing tabs and spaces (TabError), or None.

    Python 2 expands a tab in the indentation to the next multiple of 8 columns and
    accepts any mix; Python 3 refuses a mix whose meaning depends on the tab width.
    Code written for Python 2 (``from __future__ import print_function`` era data
    loaders) often has such lines. Expanding the leading whitespace of every line gives
    the program Python 2 ran, with the same rows; its findings are reported beside the
    DSL000 (and without fixes: the columns are those of the expanded text).
    """
    if "\t" not in text:
        return None
    try:
        _python_compile(path, text)
    except TabError:
        pass
    except (SyntaxError, RecursionError, MemoryError, ValueError, TypeError):
        return None
    else:
        return None
    expanded = expand_indentation(text)
    try:
        _python_compile(path, expanded)
    except (SyntaxError, RecursionError, MemoryError, ValueError, TypeError):
        return None
    return expanded


_ASYNC_KEYWORD = re.compile(r"(?<=[(,])(\s*)async(?=\s*=(?!=))")


def python36_async_keywords(path: str, text: str) -> Optional[str]:
    """The text with ``async`` as a keyword argument's name (``x.cuda(async=True)``, the spelling
    of ``non_blocking`` before torch 0.4) renamed ``asyn_``, for a file that Python 3.7+ rejects
    only for that (``async`` became a keyword), or None. Code of that era is otherwise Python 3;
    the renamed text keeps every row and column, and its findings are reported beside the DSL000
    (without fixes, like ``python2_indentation``'s)."""
    if "async" not in text or _ASYNC_KEYWORD.search(text) is None:
        return None
    renamed = _ASYNC_KEYWORD.sub(lambda m: m.group(1) + "asyn_", text)
    try:
        _python_compile(path, renamed)
    except (SyntaxError, RecursionError, MemoryError, ValueError, TypeError):
        return None
    return renamed


def expand_indentation(text: str) -> str:
    """Every tab in the leading whitespace of a line moved to the next multiple of 8 columns
    (the width CPython's tokenizer gives it): the same rows and the same blocks."""
    rows = []
    for row in text.splitlines(keepends=True):
        body = row.lstrip(" \t")
        indent = row[: len(row) - len(body)]
        rows.append(indent.expandtabs(8) + body if "\t" in indent else row)
    return "".join(rows)


def accepted_tab_indentation(path: str, text: str) -> Optional[str]:
    """The text with its indentation's tabs expanded, for a file that Python 3 accepts but
    libcst's tokenizer does not (a mix of tabs and spaces that means the same at every tab
    width, which CPython allows): the blocks CPython reads, with the same rows. None when
    the indentation has no tab, or Python rejects the file."""
    if "\t" not in text:
        return None
    try:
        _python_compile(path, text)
    except (SyntaxError, RecursionError, MemoryError, ValueError, TypeError):
        return None
    expanded = expand_indentation(text)
    return expanded if expanded != text else None


def too_large_finding(path: str, size: int, limit: int) -> Finding:
    """DSL000 for a file over ``max-file-size``: not parsed at all (libcst needs ~650 bytes of
    memory per byte of dataset code, CPython's parser ~150)."""
    rule = all_rules()["DSL000"]
    return Finding(
        code="DSL000",
        name=rule.name,
        message=(f"cannot analyse: the file is {_size(size)}, over `max-file-size` ({_size(limit)}); "
                 f"parsing takes hundreds of times a file's size in memory: exclude it, or raise `max-file-size` in "
                 f"[tool.dslint]"),
        path=path,
        start=(1, 1),
        end=(1, 1),
        level=ERROR,
        help=None,
    )


def _size(size: int) -> str:
    """``637 bytes``, ``12.3 KiB``, ``20.0 MiB``."""
    if size < 1024:
        return f"{size:,} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def _python_compile(path: str, text: str, *, full: bool = False) -> None:
    """CPython's parser over ``text``, under CPython's default recursion limit (``full``:
    the compiler too, whose own limits a parse alone does not check)."""
    old_limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(PYTHON_RECURSION_LIMIT)
    except RecursionError:  # already deeper than that: keep the current limit
        pass
    try:
        # The parser warns about the checked code (on 3.12+ `SyntaxWarning: invalid
        # escape sequence`), which is not dslint's to print on the user's stderr.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", 0 if full else ast.PyCF_ONLY_AST, dont_inherit=True)
    finally:
        sys.setrecursionlimit(old_limit)


def _long_logical_line(text: str) -> Optional[int]:
    """Offset where a logical line long enough (or brackets deep enough) to hide deep
    nesting starts, or None.

    A linear text scan (strings and comments skipped, brackets counted), a small
    fraction of a parse; an unbalanced bracket only makes the gate run needlessly.
    """
    few_brackets = len(text) < GATE_LOGICAL_LENGTH and sum(map(text.count, "([{")) < GATE_BRACKET_DEPTH
    if len(text) < GATE_LINE_LENGTH and few_brackets:
        return None
    if len(text) >= GATE_LINE_LENGTH and any(len(line) >= GATE_LINE_LENGTH for line in _NEWLINE.split(text)):
        for match in re.finditer(r"[^\r\n]+", text):
            if match.end() - match.start() >= GATE_LINE_LENGTH:
                return match.start()
    if few_brackets:
        return None
    depth = 0
    start = 0
    continued_start = continued_end = -1
    for match in _LOGICAL_SCAN.finditer(text):
        first = match.group()[0]
        if first in "([{":
            if not depth:
                start = match.start()
            depth += 1
            if depth >= GATE_BRACKET_DEPTH:
                return start
        elif first in ")]}":
            if depth:
                depth -= 1
                if not depth and match.end() - start >= GATE_LOGICAL_LENGTH:
                    return start
        elif first == "\\":
            here = match.start()
            if continued_end < 0 or _NEWLINE.search(text, continued_end, here):
                continued_start = here  # a new run of continuation lines
            elif here - continued_start >= GATE_LOGICAL_LENGTH:
                return continued_start
            continued_end = match.end()
    if depth and len(text) - start >= GATE_LOGICAL_LENGTH:
        return start
    return None


def _line_of(text: str, offset: Optional[int]) -> int:
    if not offset:
        return 1
    return len(_NEWLINE.findall(text, 0, offset)) + 1


_LIMIT_ERRORS = ("too many nested", "too many statically nested", "too many levels of indentation")

# the statements that open a block CPython's compiler counts (loops, try and its handlers, with)
_BLOCK_STATEMENT = re.compile(r"^([ \t]*)(?:async[ \t]+)?(?:for|while|with|try|except|finally)\b", re.MULTILINE)


def _is_limit(err: SyntaxError) -> bool:
    return any(marker in (err.msg or "") for marker in _LIMIT_ERRORS)


def _deep_blocks(text: str) -> bool:
    """Whether block statements nest ``GATE_BLOCK_DEPTH`` deep (by indentation; functions are
    not told apart, so this may only make the gate run needlessly)."""
    matches = _BLOCK_STATEMENT.findall(text)
    if len(matches) < GATE_BLOCK_DEPTH:
        return False
    stack: List[int] = []
    for indent in matches:
        width = len(indent.expandtabs(8))
        while stack and stack[-1] >= width:
            stack.pop()
        stack.append(width)
        if len(stack) >= GATE_BLOCK_DEPTH:
            return True
    return False


def gate(path: str, text: str) -> Optional[Exception]:
    """CPython's verdict on files whose shape could overflow libcst's native parser, or whose
    nesting CPython refuses although libcst accepts it."""
    full = _deep_blocks(text)
    if (len(text) < GATE_FILE_SIZE and not full and text.count("elif") < GATE_ELIF_CHAIN
            and _long_logical_line(text) is None):
        return None
    try:
        _python_compile(path, text, full=full)
    except (RecursionError, MemoryError) as err:
        return err
    except SyntaxError as err:
        if _is_limit(err):
            return err
    except (ValueError, TypeError):
        return None
    return None
