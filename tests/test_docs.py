"""The generated rule reference in rules/ matches the rule classes."""

from __future__ import annotations

from dslint.docs import generate
from dslint.rules.base import all_rules
from tests.conftest import FIXTURES, REPO


def test_rules_folder_is_up_to_date():
    rules_dir = REPO / "rules"
    pages = generate(rules_dir, FIXTURES)
    stale = []
    for path, content in pages.items():
        if not path.exists() or path.read_text() != content:
            stale.append(path.name)
    extra = sorted(p.name for p in rules_dir.glob("*.md") if p not in pages)
    assert not stale and not extra, (
        f"rules/ drifted from the rule classes (stale: {stale}, extra: {extra}); run `python -m dslint.docs`"
    )


def test_index_lists_every_rule():
    index = (REPO / "rules" / "README.md").read_text()
    for code, rule in all_rules().items():
        assert f"[{code}]({code}.md) | {rule.name} |" in index


def test_rule_pages_link_their_fixtures():
    for code, rule in all_rules().items():
        if rule.engine_rule:
            continue
        page = (REPO / "rules" / f"{code}.md").read_text()
        assert f"fixtures/{code}-" in page, code


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    blocks = [b.split("```", 1)[0].strip() for b in readme.split("```bash")[1:3]]
    assert "dslint check fixtures/" in blocks[0]
    assert "pytest" in blocks[1]
    assert blocks[1] in ci, "the test command in the README and .ci/run must be the same"
