"""A fix must not hide a defect that remains: after ``--fix --unsafe-fixes``, a second
``check`` still reports every finding of another rule that the fix did not address.

Run over every fixture ``bad.py`` and every rule case with an ``expected_replacement``,
each checked with every rule, through the real CLI.
"""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from dslint.rules.base import all_rules, as_invalid
from tests.conftest import FIXTURES, run_cli


def _codes(tmp_path, name):
    run = run_cli("check", "--no-cache", "--isolated", "--select", "ALL", "--preview", "--output-format", "json",
                  "--exit-zero", name, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    return sorted({(d["code"], d["message"], d["fix"] is not None) for d in json.loads(run.stdout)})


# `__iter__` returns `self` (DSL301, fixed by making `__iter__` a generator that draws
# from `next(self)`) and nothing shards the stream by worker (DSL303, no fix): the
# fixed generator still replays the whole stream in every worker.
SELF_ITERATOR = """\
from torch.utils.data import IterableDataset


class Counter(IterableDataset):
    def __init__(self, n):
        self.n = n
        self.i = 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i
"""


def _sources():
    yield pytest.param(SELF_ITERATOR, id="self-iterator-without-sharding")
    for bad in sorted(FIXTURES.glob("DSL*/**/bad.py")):
        yield pytest.param(bad.read_text(), id=str(bad.parent.relative_to(FIXTURES)))
    for code, rule in all_rules().items():
        for i, case in enumerate(rule.invalid):
            case = as_invalid(case)
            if case.expected_replacement is not None and isinstance(case.code, str):
                yield pytest.param(textwrap.dedent(case.code).lstrip("\n"), id=f"{code}-invalid-{i}")


@pytest.mark.parametrize("source", list(_sources()))
def test_fixing_leaves_every_other_finding_reported(tmp_path, source):
    (tmp_path / "example.py").write_text(source)
    before = _codes(tmp_path, "example.py")
    if not before:
        pytest.skip("nothing reported")
    fixed = run_cli("check", "--no-cache", "--isolated", "--select", "ALL", "--preview", "--fix", "--unsafe-fixes",
                    "--exit-zero", "-q", "example.py", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    after = {(code, message) for code, message, _ in _codes(tmp_path, "example.py")}
    # a finding that offered no fix was not addressed by the fixes: it must remain
    missing = [(code, message) for code, message, fixable in before if not fixable and (code, message) not in after]
    assert not missing, f"findings lost by fixing the others: {missing}"
