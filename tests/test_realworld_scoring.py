"""The real-defect scorer (``bench/realworld/run.py``): a finding matches a manifest entry of its code
and file within the slack, or with ``--span`` anywhere in the same simple statement."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run_module():
    spec = importlib.util.spec_from_file_location("realworld_run", ROOT / "bench" / "realworld" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_same_statement_matches_only_with_span(tmp_path):
    run = _run_module()
    (tmp_path / "train.py").write_text(textwrap.dedent("""\
        from torch.utils.data import DataLoader

        loader = DataLoader(
            dataset,
            batch_size=4,
            num_workers=2,
            pin_memory=True,
            collate_fn=lambda batch: batch,
        )
        other = DataLoader(dataset)
        """))
    finding = {"code": "DSL506", "path": "train.py", "line": 8}
    call_line = {"code": "DSL506", "path": "train.py", "line": 3}
    next_statement = {"code": "DSL506", "path": "train.py", "line": 10}
    assert not run.near(finding, call_line, 3)
    assert run.near(finding, call_line, 3, tmp_path)
    assert not run.near(finding, next_statement, 1, tmp_path)
    assert run.near(finding, dict(call_line, line=6), 3)
    assert not run.near(finding, dict(call_line, code="DSL503"), 3, tmp_path)
