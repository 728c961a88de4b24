"""Fuzzing the linter core (decode, parse, summaries, every rule, suppressions).

Two sources of input: programs generated from Python's grammar (hypothesmith), and
the fixture sources (fixtures/*/bad.py, good.py) mutated by text and byte edits:
spans deleted, duplicated or moved, brackets, colons, quotes, indentation, line
endings and odd characters inserted, bytes flipped. For each input:

* no exception escapes the engine, and no rule reports an internal error;
* every reported location (start, end, and each fix edit) lies inside the file;
* a fix applied to a file Python compiles leaves a file Python compiles.

The CI bound is ``FUZZ_EXAMPLES`` examples per test (a few seconds each); a
longer local run: ``DSLINT_FUZZ_EXAMPLES=5000 pytest tests/test_fuzz.py -s``
(it prints how many cases ran).
"""

from __future__ import annotations

import ast
import os
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

hypothesmith = pytest.importorskip("hypothesmith")
# hypothesmith compiles what it generates; its SyntaxWarnings are about that code
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

from dslint.config import build_settings  # noqa: E402
from dslint.engine import Engine, FileInput  # noqa: E402
from dslint.fixes import apply_fixes  # noqa: E402
from dslint.source import line_starts  # noqa: E402
from tests.conftest import FIXTURES  # noqa: E402

FUZZ_EXAMPLES = int(os.environ.get("DSLINT_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    derandomize=not os.environ.get("DSLINT_FUZZ_EXAMPLES"),  # CI: the same cases every run
    database=None,
)
SOURCES = sorted(FIXTURES.glob("*/bad.py")) + sorted(FIXTURES.glob("*/good.py"))
TEXTS = [path.read_text() for path in SOURCES]
CASES: Counter = Counter()
OUTCOMES: Counter = Counter()

_ENGINES: dict = {}


def _engine(prefilter: bool) -> Engine:
    if prefilter not in _ENGINES:
        config = build_settings(["."], isolated=True, overrides={"preview": True, "select": ["ALL"]}, cwd=Path.cwd())
        _ENGINES[prefilter] = Engine(config, use_prefilter=prefilter, jobs=1, cache=None)
    return _ENGINES[prefilter]


def _inside(text: str, position, what: str) -> None:
    row, column = position
    starts = line_starts(text)
    assert 1 <= row <= len(starts), f"{what}: row {row} outside 1..{len(starts)}"
    end_of_row = starts[row] if row < len(starts) else len(text)
    line = text[starts[row - 1] : end_of_row].rstrip("\r\n")
    assert 1 <= column <= len(line) + 1, f"{what}: column {column} outside 1..{len(line) + 1} on row {row}"


def lint(data: bytes, prefilter: bool = False, kind: str = "") -> None:
    """The property: run the core over one file and check what comes out."""
    CASES[kind] += 1
    path = "fuzzed.py"
    result = _engine(prefilter).check([FileInput(path, os.path.abspath(path), data=data)])
    assert result.internal_errors == [], result.internal_errors
    text = result.texts.get(path)
    codes = {d.code for d in result.diagnostics}
    outcome = "undecodable" if text is None else "syntax error" if "DSL000" in codes else "analysed"
    OUTCOMES[outcome] += 1
    if kind != "fixture":  # event() only inside a hypothesis test
        event(outcome)
    for d in result.diagnostics:
        assert d.path == path
        if text is None:  # not decodable: only the file-level DSL002
            assert d.code == "DSL002" and d.start == (1, 1), d
            continue
        _inside(text, d.start, f"{d.code} start")
        _inside(text, d.end, f"{d.code} end")
        assert d.start <= d.end, d
        if d.fix is not None:
            for edit in d.fix.edits:
                _inside(text, edit.start, f"{d.code} fix edit start")
                _inside(text, edit.end, f"{d.code} fix edit end")
                assert edit.start <= edit.end, d.fix
    if text is None:
        return
    fixes = [d.fix for d in result.diagnostics if d.fix is not None]
    if fixes and _compiles(text):
        fixed, _ = apply_fixes(text, fixes)
        assert _compiles(fixed), f"fixes broke the file:\n{fixed}"


def _compiles(text: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings of generated code
        try:
            compile(text, "fuzzed.py", "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


# ------------------------------------------------------------------ generated programs


@FUZZ
@given(source=hypothesmith.from_grammar())
def test_generated_programs(source):
    lint(source.encode("utf-8", "surrogatepass"), kind="grammar")


@FUZZ
@given(source=hypothesmith.from_grammar(), fixture=st.sampled_from(TEXTS), data=st.data())
def test_generated_code_spliced_into_fixtures(source, fixture, data):
    """Generated statements between a fixture's lines: the dataset code around
    them keeps every rule busy."""
    lines = fixture.splitlines(keepends=True)
    at = data.draw(st.integers(0, len(lines)), label="line")
    spliced = "".join(lines[:at]) + source + ("\n" if not source.endswith("\n") else "") + "".join(lines[at:])
    lint(spliced.encode("utf-8", "surrogatepass"), kind="spliced")


# ------------------------------------------------------------------ mutated fixtures

INSERTS = [
    "(", ")", "[", "]", "{", "}", ":", ",", ".", "=", "\n", "\r", "\r\n", "\t", " ", "    ", "\x0c", "\\\n",
    "#", "# noqa", "# noqa: DSL501", "# dslint: noqa", "'", '"', '"""', "'''", "lambda: ", "yield ", "await ",
    "async ", "return ", "del ", "global x\n", "with open(p) as f:\n    ", "self.", "*", "**", "@", "->", "...",
    "not ", "if ", "else ", "for x in ", "\u2028", "\x85", "é", "\ufeff", "\x00", "\udcff",
]


LINE_OPS = ["delete line", "duplicate line", "swap lines", "line from another fixture"]
TEXT_OPS = ["delete", "duplicate", "insert", "move", "indent", "dedent", "truncate"]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        a = draw(st.integers(0, n))
        b = draw(st.integers(a, min(n, a + 80)))
        op = draw(st.sampled_from(LINE_OPS + TEXT_OPS))
        if op in LINE_OPS:  # whole lines: the result often still parses, so the rules run
            lines = text.splitlines(keepends=True) or [""]
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if op == "delete line":
                del lines[i]
            elif op == "duplicate line":
                lines.insert(j, lines[i])
            elif op == "swap lines":
                lines[i], lines[j] = lines[j], lines[i]
            elif op == "line from another fixture":
                other = draw(st.sampled_from(TEXTS)).splitlines(keepends=True) or [""]
                lines.insert(i, draw(st.sampled_from(other)))
            text = "".join(lines)
        elif op == "delete":
            text = text[:a] + text[b:]
        elif op == "duplicate":
            text = text[:b] + text[a:b] + text[b:]
        elif op == "insert":
            text = text[:a] + draw(st.sampled_from(INSERTS)) + text[a:]
        elif op == "move":
            piece, rest = text[a:b], text[:a] + text[b:]
            at = draw(st.integers(0, len(rest)))
            text = rest[:at] + piece + rest[at:]
        elif op == "indent":
            text = text[:a] + text[a:b].replace("\n", "\n    ") + text[b:]
        elif op == "dedent":
            text = text[:a] + text[a:b].replace("\n    ", "\n") + text[b:]
        elif op == "truncate":
            text = text[:b]
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 7)) == 0 and data:  # sometimes flip bytes too (decode errors, stray UTF-8)
        raw = bytearray(data)
        for _ in range(draw(st.integers(1, 3))):
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
        data = bytes(raw)
    return data


@FUZZ
@given(data=mutated(), prefilter=st.booleans())
def test_mutated_fixtures(data, prefilter):
    lint(data, prefilter=prefilter, kind="mutated")


def test_every_fixture_as_is():
    for text in TEXTS:
        lint(text.encode(), kind="fixture")


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    total = sum(CASES.values())
    print(f"\nfuzz cases run: {total} ({', '.join(f'{k} {v}' for k, v in sorted(CASES.items()))}); "
          f"outcomes: {', '.join(f'{k} {v}' for k, v in sorted(OUTCOMES.items()))}")
