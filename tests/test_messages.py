"""Every message is true: each rule's message, rendered on its own fixture, names only what
that fixture has.

For every ``fixtures/<CODE>-<name>/bad.py``, ``dslint check --select CODE --output-format
json`` (the real CLI, a subprocess) gives the messages, and each claim in them is checked
against the fixture's source:

- an attribute it names (``self.x``, or `.x` assigned) occurs in the file;
- a class it names (``bad.Name``, ``Name.__iter__``) is defined in the file;
- an argument it names with a value (`num_workers=...`) is passed in the file, as a
  keyword or as a ``LOADER`` entry, with that value (a condition, "unless
  `persistent_workers=True`", is not a claim about the file);
- every number is a number literal of the file, or a documented constant: a figure the
  rule's own page (``rules/<CODE>.md``) states, such as a measured slow-down.

Text quoted from an exception (`ValueError: ...`) is torch's or Python's, not a claim
about the file, and is left out.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path
from typing import List, Set

import pytest

from tests.conftest import FIXTURES, REPO, run_cli

FOLDERS = sorted(p for p in FIXTURES.iterdir() if p.is_dir() and re.match(r"DSL\d{3}-", p.name))

# `ValueError: sampler option is mutually exclusive ...`: an exception's own text
QUOTED_EXCEPTION = re.compile(r"`[A-Z]\w*(?:Error|Exception|Warning)\b[^`]*`")
ATTRIBUTE = re.compile(r"\bself\.(\w+)|`\.(\w+)`")
CLASS = re.compile(r"\bbad\.([A-Z]\w*)|`([A-Z]\w*)\.__\w+__`")
# `num_workers=2`, unless a condition ("unless `persistent_workers=True`"): a claim about the file
ARGUMENT = re.compile(r"(?<!unless )(?<!\bif )(?<!when )(?<!\bor )`(\w+)=([^`]+)`")
# 10,000 / 3.14 / 20k / 2M, with an optional "x" (a ratio): not part of a name (DSL101, x86_64)
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)([kM])?(?=x\b|[^\w]|$)")


LINE_REFERENCE = re.compile(r"\bline (\d+)\b")


def numbers_in(text: str) -> Set[float]:
    out = set()
    for digits, scale in NUMBER.findall(text):
        value = float(digits.replace(",", ""))
        out.add(value * {"k": 1e3, "M": 1e6}.get(scale, 1))
    return out


def literals_of(source: str) -> Set[float]:
    """The number literals of the code (not of its comments or strings)."""
    out = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NUMBER:
            try:
                value = ast.literal_eval(token.string)
            except ValueError:
                continue
            if isinstance(value, (int, float)):
                out.add(float(value))
    return out


def passed(source: str, name: str, value: str) -> bool:
    """``name=value`` as a keyword argument, or ``"name": value`` in a dict (``LOADER``)."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":  # either quote
        value = "[\"']" + re.escape(value[1:-1]) + "[\"']"
    else:
        value = re.escape(value)
    return bool(re.search(rf"\b{name}\s*=\s*{value}(?![\w.])", source)
                or re.search(rf"[\"']{name}[\"']\s*:\s*{value}(?![\w.])", source))


def untrue_claims(message: str, source: str, documented: Set[float]) -> List[str]:
    """What ``message`` says about the file that the file does not have."""
    text = QUOTED_EXCEPTION.sub("`<exception>`", message)
    problems = []
    for own, assigned in ATTRIBUTE.findall(text):
        pattern = rf"\bself\.{own}\b" if own else rf"\.{assigned}\b"
        if not re.search(pattern, source):
            problems.append(f"attribute `{'self' if own else ''}.{own or assigned}` is not in the file")
    for qualified, dunder_owner in CLASS.findall(text):
        name = qualified or dunder_owner
        if not re.search(rf"^\s*class {name}\b", source, re.MULTILINE):
            problems.append(f"class `{name}` is not defined in the file")
    # "line 27": a reference to a line of the file, which must exist and hold code
    lines = source.splitlines()
    for row in LINE_REFERENCE.findall(text):
        if not (1 <= int(row) <= len(lines)) or not lines[int(row) - 1].strip():
            problems.append(f"line {row} is not a line of code of the file")
    text = LINE_REFERENCE.sub("line <n>", text)
    literals = literals_of(source)
    for name, value in ARGUMENT.findall(text):
        if not passed(source, name, value):
            problems.append(f"argument `{name}={value}` is not passed in the file")
    for number in sorted(numbers_in(text)):
        if number not in literals and number not in documented:
            problems.append(f"number {number:g} is neither a literal of the file nor on the rule's page")
    return problems


def check_messages(folder: Path) -> List[dict]:
    code = folder.name.split("-")[0]
    run = run_cli("check", "--isolated", "--no-cache", "--preview", "--select", code, "--output-format", "json",
                  "bad.py", cwd=folder)
    assert run.returncode == 1, (folder.name, run.stdout, run.stderr)
    findings = json.loads(run.stdout)
    assert findings and {f["code"] for f in findings} == {code}, findings
    return findings


# Untrue messages of rules this test does not own, reported to their owners: strict, so the
# fix turns the case into an XPASS failure and the entry must go.
REPORTED: dict = {}
CASES = [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=REPORTED[p.name])) if p.name in REPORTED else p
         for p in FOLDERS]


@pytest.mark.parametrize("folder", CASES, ids=[p.name for p in FOLDERS])
def test_every_message_names_only_what_its_fixture_has(folder):
    code = folder.name.split("-")[0]
    source = (folder / "bad.py").read_text(encoding="utf-8")
    documented = numbers_in((REPO / "rules" / f"{code}.md").read_text(encoding="utf-8"))
    problems = {}
    for finding in check_messages(folder):
        found = untrue_claims(finding["message"], source, documented)
        if found:
            problems[f"{code} line {finding['location']['row']}: {finding['message']}"] = found
    assert not problems, json.dumps(problems, indent=2)


# ---------------------------------------------------------------- the checker itself


def test_the_claims_checker_catches_what_a_file_does_not_have():
    source = "LOADER = {'num_workers': 2}\nclass D:\n    def f(self):\n        self.rows = [1, 20]\nx = DataLoader(d, timeout=30)\n"
    documented = {48000.0}
    assert untrue_claims("`self.rows` of `bad.D` with `num_workers=2`, `timeout=30`: 20 rows, ~48,000x slower",
                         source, documented) == []
    assert untrue_claims("`ValueError: use num_workers=0 (got 7)` for `self.rows`", source, documented) == []
    assert untrue_claims("fails unless `persistent_workers=True`", source, documented) == []
    assert untrue_claims("`x=\"a\"` then `y='b'`", "f(x='a', y=\"b\")", documented) == []
    assert untrue_claims("`self.cols` of `bad.E` with `num_workers=4`: 200 rows", source, documented) == [
        "attribute `self.cols` is not in the file",
        "class `E` is not defined in the file",
        "argument `num_workers=4` is not passed in the file",
        "number 4 is neither a literal of the file nor on the rule's page",
        "number 200 is neither a literal of the file nor on the rule's page",
    ]
