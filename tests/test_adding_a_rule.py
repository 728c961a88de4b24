"""Adding a rule touches three things: the rule file, its fixture pair and its page.

A copy of the package gets a throwaway rule file and nothing else in ``dslint/``; the
real CLI (in a subprocess, on that copy) must then list it, document it, report it
on its fixture's bad.py and not on good.py, and generate its page.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

from tests.conftest import REPO

RULE = '''
import libcst as cst

from dslint.rules.base import WARNING, Invalid, Rule, Symptom


class SleepInGetitem(Rule):
    """
    ## What it does
    Flags `time.sleep` in per-sample code.

    ## Why is this bad?
    Every sample waits, in every worker.

    ## Example
    ```python
    def __getitem__(self, i):
        time.sleep(0.1)
    ```

    ## Use instead
    ```python
    def __getitem__(self, i):
        return self.items[i]
    ```
    """

    code = "DSL299"
    name = "sleep-in-getitem"
    level = WARNING
    summary = "`time.sleep` in per-sample code"
    help = "Do not sleep per sample"
    symptom = Symptom("time_ratio", "per-sample time, bad / good", exclusive=True)
    valid = ("""
        import time
        time.sleep(1)
        """,)
    invalid = (Invalid("""
        import time
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                time.sleep(0.1)  # expect: DSL299
                return i
        """),)

    def check(self, ctx):
        for call in ctx.calls_to("time.sleep"):
            if ctx.is_per_sample(call):
                yield self.report(call, "`time.sleep` runs for every sample")
'''

BAD = '''
import time
from torch.utils.data import Dataset


class Slow(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(0.01)  # expect: DSL299
        return i


def build(root):
    return Slow()
'''

GOOD = '''
from torch.utils.data import Dataset


class Fast(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i


def build(root):
    return Fast()
'''


def _run(copy, *args):
    env = dict(os.environ, PYTHONPATH=str(copy), NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "dslint", *args], cwd=copy, capture_output=True, text=True, env=env,
                          timeout=300)


def test_a_new_rule_needs_its_file_its_fixture_pair_and_its_page_only(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "dslint", copy / "dslint", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "rules", copy / "rules")
    before = {p.relative_to(copy) for p in (copy / "dslint").rglob("*") if p.is_file()}

    # 1. the rule file
    (copy / "dslint" / "rules" / "per_sample" / "dsl299_sleep_in_getitem.py").write_text(textwrap.dedent(RULE))
    # 2. the fixture pair
    pair = copy / "fixtures" / "DSL299-sleep-in-getitem"
    pair.mkdir(parents=True)
    (pair / "bad.py").write_text(BAD)
    (pair / "good.py").write_text(GOOD)
    # 3. the page, generated
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    docs = subprocess.run([sys.executable, "-m", "dslint.docs"], cwd=copy, capture_output=True, text=True, env=env,
                          timeout=300)
    assert docs.returncode == 0, docs.stderr
    page = (copy / "rules" / "DSL299.md").read_text()
    assert page.startswith("# sleep-in-getitem (DSL299)") and "Every sample waits" in page
    assert "DSL299" in (copy / "rules" / "README.md").read_text()

    after = {p.relative_to(copy) for p in (copy / "dslint").rglob("*") if p.is_file()}
    assert {p.as_posix() for p in after - before} == {"dslint/rules/per_sample/dsl299_sleep_in_getitem.py"}

    listed = _run(copy, "rules", "--output-format", "json")
    rule = next(r for r in json.loads(listed.stdout) if r["code"] == "DSL299")
    assert rule["name"] == "sleep-in-getitem" and rule["fix_availability"] == "never"
    assert "Flags `time.sleep`" in _run(copy, "rule", "DSL299").stdout

    bad = _run(copy, "check", "--no-cache", "--select", "DSL299", "--output-format", "concise", str(pair / "bad.py"))
    assert bad.returncode == 1 and "bad.py:11:9: DSL299 `time.sleep` runs for every sample" in bad.stdout
    good = _run(copy, "check", "--no-cache", "--select", "DSL299", str(pair / "good.py"))
    assert good.returncode == 0, good.stdout
