"""``dslint check fixtures/`` reports exactly the ``# expect:`` lines, and nothing in good.py."""

from __future__ import annotations

import json

from tests.conftest import FIXTURES, expected_markers, run_cli


def test_fixtures_match_expectations():
    run = run_cli("check", "fixtures", "--preview", "--output-format", "json", "--no-cache", cwd=FIXTURES.parent)
    assert run.returncode == 1, run.stderr
    findings = json.loads(run.stdout)
    got = set()
    for f in findings:
        rel = f["filename"].split("/fixtures/", 1)[1]
        got.add((rel, f["location"]["row"], f["code"]))
    expected = expected_markers(FIXTURES)
    assert {g for g in got if g[0].endswith("good.py")} == set()
    missing = expected - got
    unexpected = got - expected
    assert not missing and not unexpected, f"missing={sorted(missing)} unexpected={sorted(unexpected)}"


def test_every_rule_has_a_fixture_pair():
    from dslint.rules.base import all_rules

    for code, rule in all_rules().items():
        if rule.engine_rule:
            continue
        pairs = [d for d in FIXTURES.iterdir() if d.is_dir() and d.name.startswith(code + "-")]
        assert pairs, f"{code} has no fixtures/{code}-<name>/"
        for folder in pairs:
            assert (folder / "bad.py").is_file() and (folder / "good.py").is_file(), folder
            bad = (folder / "bad.py").read_text()
            assert f"# expect: {code}" in bad or f"{code}" in bad, f"{folder}/bad.py marks no {code} line"
            assert "def build" in bad and "def build" in (folder / "good.py").read_text(), folder
