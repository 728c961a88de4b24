"""Every rule's embedded valid/invalid cases (Fixit style), run through the engine.

An invalid case marks each line that must be reported with ``# expect: CODE``;
the findings of that rule must be exactly those lines. A valid case must give the
rule nothing. Cases are one file or a dict of files (cross-file subclasses).
"""

from __future__ import annotations

import pytest

from dslint.rules.base import all_rules
from tests.conftest import check_tree, expected_markers, write_files

CASES = []
for _code, _rule in all_rules().items():
    for _i, _case in enumerate(_rule.valid):
        CASES.append(pytest.param(_code, "valid", _case, id=f"{_code}-valid-{_i}"))
    for _i, _case in enumerate(_rule.invalid):
        CASES.append(pytest.param(_code, "invalid", _case, id=f"{_code}-invalid-{_i}"))


@pytest.mark.parametrize("code,kind,case", CASES)
def test_rule_case(tmp_path, code, kind, case):
    write_files(tmp_path, case)
    outcome = check_tree(tmp_path, select=[code])
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
