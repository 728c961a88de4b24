"""Every rule's embedded valid/invalid cases (Fixit style), run through the engine.

An invalid case marks each line that must be reported with ``# expect: CODE``;
the findings of that rule must be exactly those lines. A valid case must give the
rule nothing. Cases are one file or a dict of files (cross-file subclasses).
An ``Invalid`` case with ``expected_replacement`` must be fixed (safe and unsafe
fixes of that rule, to a fixed point) into exactly that code; one without it must
offer no fix.
"""

from __future__ import annotations

import pytest

import os
import textwrap

from dslint.rules.base import all_rules, as_invalid, as_valid
from tests.conftest import check_tree, expected_markers, write_files

CASES = []
FIXES = []
for _code, _rule in all_rules().items():
    for _i, _case in enumerate(_rule.valid):
        _case = as_valid(_case)
        CASES.append(pytest.param(_code, "valid", _case.code, _case.preview, id=f"{_code}-valid-{_i}"))
    for _i, _case in enumerate(_rule.invalid):
        _case = as_invalid(_case)
        CASES.append(pytest.param(_code, "invalid", _case.code, _case.preview, id=f"{_code}-invalid-{_i}"))
        FIXES.append(pytest.param(_code, _case, id=f"{_code}-invalid-{_i}"))


def _files(case) -> dict:
    files = {"example.py": case} if isinstance(case, str) else case
    return {name: textwrap.dedent(text).lstrip("\n") for name, text in files.items()}


@pytest.mark.parametrize("code,case", FIXES)
def test_rule_case_fix(tmp_path, code, case):
    from dslint import api
    from dslint.config import build_settings

    write_files(tmp_path, case.code)
    settings = build_settings([str(tmp_path)], isolated=True, overrides={"preview": case.preview, "select": [code]}, cwd=tmp_path)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        state = api.fix(["."], settings, api.CheckOptions(use_cache=False), unsafe=True)
    finally:
        os.chdir(cwd)
    assert not state.errors
    got = {os.path.relpath(path, ".").replace("\\", "/"): text for path, text in state.results.items()}
    if case.expected_replacement is None:
        assert got == {}, f"{code} fixed a case that has no expected_replacement: {got}"
        return
    before = _files(case.code)
    expected = {name: text for name, text in _files(case.expected_replacement).items() if before.get(name) != text}
    assert got == expected


@pytest.mark.parametrize("code,kind,case,preview", CASES)
def test_rule_case(tmp_path, code, kind, case, preview):
    run_case(tmp_path, code, kind, case, preview)


def run_case(tmp_path, code, kind, case, preview=True):
    """One case: a valid one gives ``code`` nothing, an invalid one exactly its ``# expect`` lines."""
    write_files(tmp_path, case)
    outcome = check_tree(tmp_path, select=[code], preview=preview)
    assert not outcome.result.internal_errors
    got = {(d.path.replace("\\", "/"), d.row, d.code) for d in outcome.diagnostics if d.code == code}
    expected = {m for m in expected_markers(tmp_path) if m[2] == code}
    if kind == "valid":
        assert got == set(), f"{code} reported on a valid case: {got}"
    else:
        assert expected, "an invalid case must mark at least one line with # expect"
        assert got == expected


def test_every_rule_has_cases():
    for code, rule in all_rules().items():
        if rule.engine_rule:
            continue
        assert rule.valid and rule.invalid, f"{code} needs valid and invalid cases"


def test_every_rule_is_documented():
    for code, rule in all_rules().items():
        docs = rule.docs()
        assert "## What it does" in docs and "## Why is this bad?" in docs, code
        if not rule.engine_rule:
            assert "## Example" in docs and "## Use instead" in docs, code
        assert rule.summary and rule.name and rule.help, code


def test_fix_availability_is_derived_from_the_cases():
    for code, rule in all_rules().items():
        if rule.engine_rule:
            continue
        assert not rule.fix_availability_set_by_hand, f"{code} sets fix_availability by hand; give its cases expected_replacement"
