"""Incremental parsing and positions for ``dslint server`` (installed only there).

A keystroke changes one place of a file, yet ``check_file.parse_file`` parses the
whole text with libcst (~100 ms for 1,000 lines) and ``positions.node_ranges``
regenerates the whole module's code to locate a reported node (~40 ms, once per
fix and once per file with findings). In the server both are replaced
(``install``) by versions that work per top-level statement:

- ``parse_module(text)``: when a recently parsed text shares most of its prefix and
  suffix with ``text``, the top-level statements lying wholly in the unchanged
  prefix and suffix are reused (libcst nodes are immutable) and only the text
  between them is parsed. The result is used only when it regenerates exactly the
  new text under the module's newline and indentation (checked piece by piece)
  and its statement boundaries are the ones a full parse finds (below); otherwise
  the whole text is parsed, as before.
- ``node_ranges(module, nodes)``: regenerates only the top-level statements that
  hold a requested node, each as a one-statement module shifted to its row (top-
  level statements start at column 0).

Boundaries are safe when a full parse would put the same lines into the same
statements: the text between the reused statements must not start with an
indented line (it would belong to the block before it: the chunk fails to parse
or is widened), and comment lines next to a boundary that carry indentation widen
the chunk (libcst gives such lines to the block above). Files without a trailing
newline, or whose detected newline or indentation changes, are parsed whole.
``tests/test_server.py`` checks the results against full parses over many edits.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence, Tuple

import libcst as cst

from dslint import check_file, positions
from dslint.semantics.walk import iter_subtree
from dslint.semantics.walk import parse_module as full_parse

MIN_CHARS = 2000  # smaller texts parse fast enough whole
KEEP = 8  # recently parsed texts kept as starting points (their trees stay in memory)
MAX_WIDEN = 4  # times the chunk may grow by a statement at a doubtful boundary

_NEWLINE = re.compile(r"\r\n|\r|\n")


class Layout:
    """A parsed text and where each of its top-level statements lies in it."""

    __slots__ = ("text", "module", "_lens", "_rows", "_ids", "header_len", "footer_len")

    def __init__(self, text: str, module: cst.Module) -> None:
        self.text = text
        self.module = module
        self._lens: Optional[List[Tuple[int, int]]] = None  # (chars, newlines) per statement
        self._rows: Optional[List[int]] = None
        self._ids: Dict[int, frozenset] = {}
        self.header_len = self.footer_len = 0

    def _measure(self) -> bool:
        if self._lens is not None:
            return bool(self._lens) or not self.module.body
        m = self.module
        self.header_len = sum(len(m.code_for_node(line)) for line in m.header)
        self.footer_len = sum(len(m.code_for_node(line)) for line in m.footer)
        self._lens = [_measure(m, s) for s in m.body]
        if not m.has_trailing_newline or self.header_len + sum(n for n, _ in self._lens) + self.footer_len != len(self.text):
            self._lens = []  # not measurable: no incremental work on this text
            return not m.body
        return True

    def usable(self) -> bool:
        return self._measure() and bool(self.module.body)

    def lens(self) -> List[Tuple[int, int]]:
        self._measure()
        return self._lens or []

    def rows(self) -> List[int]:
        if self._rows is None:
            row = 1 + _newlines(self.text[: self.header_len])
            rows = []
            for _, newlines in self.lens():
                rows.append(row)
                row += newlines
            self._rows = rows
        return self._rows

    def ids(self, index: int) -> frozenset:
        found = self._ids.get(index)
        if found is None:
            found = self._ids[index] = frozenset(id(n) for n in iter_subtree(self.module.body[index]))
        return found


def _newlines(text: str) -> int:
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def _measure(module: cst.Module, node: cst.CSTNode) -> Tuple[int, int]:
    code = module.code_for_node(node)
    return len(code), _newlines(code)


class IncrementalParser:
    def __init__(self) -> None:
        self.recent: "OrderedDict[int, Layout]" = OrderedDict()  # id(module) -> layout
        self.stats = {"full": 0, "incremental": 0, "fallback": 0}

    # ------------------------------------------------------------------ parsing
    def parse(self, text: str) -> cst.Module:
        base = self._closest(text) if len(text) >= MIN_CHARS else None
        module = None
        if base is not None:
            try:
                module, layout = self._reparse(base, text)
            except Exception:  # a syntax error in the chunk, or a boundary we cannot trust
                module = None
            if module is None:
                self.stats["fallback"] += 1
            else:
                self.stats["incremental"] += 1
                self._remember(layout)
                return module
        module = full_parse(text)  # raises on a syntax error, as check_file expects
        self.stats["full"] += 1
        if len(text) >= MIN_CHARS:
            self._remember(Layout(text, module))
        return module

    def _remember(self, layout: Layout) -> None:
        self.recent[id(layout.module)] = layout
        self.recent.move_to_end(id(layout.module))
        while len(self.recent) > KEEP:
            self.recent.popitem(last=False)

    def _closest(self, text: str) -> Optional[Layout]:
        best, best_same = None, len(text) // 2  # at least half of the text unchanged
        for layout in reversed(self.recent.values()):
            p, s = common_affixes(layout.text, text)
            if p + s > best_same:
                best, best_same = layout, p + s
        return best

    def _reparse(self, old: Layout, text: str):
        if text == old.text:
            return old.module, old
        if not old.usable() or _detect(text) != (old.module.default_newline, old.module.default_indent):
            return None, None
        lens = old.lens()
        n = len(lens)
        p, s = common_affixes(old.text, text)
        starts = []
        offset = old.header_len
        for chars, _ in lens:
            starts.append(offset)
            offset += chars
        # k: statements wholly in the unchanged prefix; m: the first of those wholly in
        # the unchanged suffix (n: the chunk runs to the end, footer included)
        k = 0 if p < old.header_len else sum(1 for a, (chars, _) in zip(starts, lens) if a + chars <= p)
        cut = len(old.text) - s
        m = n if offset < cut else next((j for j in range(k, n) if starts[j] >= cut), n)
        for _ in range(MAX_WIDEN):
            result = self._try(old, text, k, m, starts)
            if result == "widen-start" and k > 0:
                k -= 1
            elif result == "widen-end" and m < n:
                m += 1
            elif isinstance(result, tuple):
                return result
            else:
                return None, None
        return None, None

    def _try(self, old: Layout, text: str, k: int, m: int, starts: List[int]):
        """Parse the text between statement k and statement m (old numbering) of the new
        text and splice it in; a Layout, or why not ("widen-start"/"widen-end"/None)."""
        module = old.module
        body = module.body
        n = len(body)
        lens = old.lens()
        cs = 0 if k == 0 else starts[k] if k < n else old.header_len + sum(chars for chars, _ in lens)
        ce = len(text) - (len(old.text) - starts[m] if m < n else 0)
        if ce < cs:
            return None
        if m < n and any(line.whitespace.value for line in body[m].leading_lines):
            return "widen-end"  # indented lines there may belong to the block the chunk ends with
        chunk = full_parse(text[cs:ce])
        if not chunk.body:
            return None
        mid = list(chunk.body)
        header: Sequence[cst.EmptyLine] = module.header
        if k == 0:
            header = chunk.header
        elif chunk.header:  # lines above the chunk's first statement are its leading lines
            if any(line.whitespace.value for line in chunk.header):
                return "widen-start"  # indented lines there may belong to the block before
            mid[0] = mid[0].with_changes(leading_lines=(*chunk.header, *mid[0].leading_lines))
        # lines below the chunk's last statement lead the next statement (or end the file)
        moved = chunk.footer if m < n else ()
        final = cst.Module(
            body=(),
            header=header,
            footer=chunk.footer if m == n else module.footer,
            encoding=module.encoding,
            default_indent=module.default_indent,
            default_newline=module.default_newline,
            has_trailing_newline=chunk.has_trailing_newline if m == n else True,
        )
        # the chunk's code in the final module's configuration must be the chunk's text
        codes = [final.code_for_node(stmt) for stmt in mid]
        moved_code = "".join(final.code_for_node(line) for line in moved)
        header_code = "".join(final.code_for_node(line) for line in header) if k == 0 else ""
        footer_code = "".join(final.code_for_node(line) for line in final.footer) if m == n else ""
        if header_code + "".join(codes) + moved_code + footer_code != text[cs:ce]:
            return None
        suffix = list(body[m:])
        suffix_lens = list(lens[m:])
        if moved:
            suffix[0] = suffix[0].with_changes(leading_lines=(*moved, *suffix[0].leading_lines))
            suffix_lens[0] = (suffix_lens[0][0] + len(moved_code), suffix_lens[0][1] + _newlines(moved_code))
        new_module = final.with_changes(body=(*body[:k], *mid, *suffix))
        layout = Layout(text, new_module)
        layout.header_len = old.header_len if k > 0 else len(header_code)
        layout.footer_len = old.footer_len if m < n else len(footer_code)
        layout._lens = [*lens[:k], *((len(c), _newlines(c)) for c in codes), *suffix_lens]
        if layout.header_len + sum(c for c, _ in layout._lens) + layout.footer_len != len(text):
            return None
        for i in range(k):  # the reused statements keep their node ids
            if i in old._ids:
                layout._ids[i] = old._ids[i]
        shift = len(mid) - (m - k)
        for j in range(m + (1 if moved else 0), n):
            if j in old._ids:
                layout._ids[j + shift] = old._ids[j]
        return new_module, layout

    # ------------------------------------------------------------------ positions
    def node_ranges(self, module: cst.Module, nodes: Sequence[cst.CSTNode]):
        layout = self.recent.get(id(module))
        nodes = list(nodes)
        if layout is None or layout.module is not module or not layout.usable():
            return original_node_ranges(module, nodes)
        targets = {id(node): node for node in nodes}
        wanted = set(targets)
        per_statement: Dict[int, List[cst.CSTNode]] = {}
        for index in range(len(module.body)):
            if not wanted:
                break
            hit = wanted & layout.ids(index)
            if hit:
                per_statement[index] = [targets[i] for i in hit]
                wanted -= hit
        if wanted:  # a node outside the statements (header, footer, the module itself)
            return original_node_ranges(module, nodes)
        rows = layout.rows()
        found = {}
        for index, hits in per_statement.items():
            alone = cst.Module(
                body=(module.body[index],),
                default_indent=module.default_indent,
                default_newline=module.default_newline,
            )
            shift = rows[index] - 1
            for key, ((r1, c1), (r2, c2)) in original_node_ranges(alone, hits).items():
                found[key] = ((r1 + shift, c1), (r2 + shift, c2))
        return found


def common_affixes(a: str, b: str) -> Tuple[int, int]:
    """Lengths of the common prefix and suffix of ``a`` and ``b`` (not overlapping)."""
    limit = min(len(a), len(b))
    lo, hi = 0, limit
    while lo < hi:  # binary search on slices: C-speed comparisons
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    p = lo
    lo, hi = 0, limit - p
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return p, lo


def _detect(text: str) -> Tuple[str, str]:
    """The newline and indentation libcst's parser detects: the first newline, and the
    first INDENT token's indentation (four spaces when there is none)."""
    match = _NEWLINE.search(text)
    newline = match.group(0) if match else "\n"
    indent = "    "
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.INDENT:
                indent = token.string
                break
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return newline, indent


original_node_ranges = positions.node_ranges
_INSTALLED: Optional[IncrementalParser] = None


def install() -> IncrementalParser:
    """Route check_file's parse and every node_ranges through one IncrementalParser."""
    global _INSTALLED
    if _INSTALLED is None:
        parser = IncrementalParser()
        check_file.parse_module = parser.parse
        check_file.node_ranges = parser.node_ranges
        positions.node_ranges = parser.node_ranges
        _INSTALLED = parser
    return _INSTALLED
