"""``dslint verify``: run every fixture pair through its probe and print one row per rule.

The parent (this module) imports torch only to let the probe children it forks
start warm; it never initialises CUDA (a child checks whether CUDA is there). Each
rule runs in its own isolated child (``isolate.run_many``) with per-phase time
limits; its process group is killed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from dslint.runtime import fixtures
from dslint.runtime.common import CONFIRMED, NOT_REPRODUCED, SKIPPED_GPU, cell, table, to_json, wanted, warm_up
from dslint.runtime.isolate import Outcome, run_isolated, run_many
from dslint.rules.base import all_rules


@dataclass
class Row:
    code: str
    name: str
    symptom: str
    bad: str
    good: str
    verdict: str
    where: str
    note: str = ""
    seconds: float = 0.0
    cases: List[dict] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.verdict == NOT_REPRODUCED or self.verdict.startswith("error")


def _environment() -> dict:
    """CUDA availability (and the device name), asked in a child so this process never touches CUDA."""

    def probe():
        from dslint.runtime.instrument import cuda_available

        cuda = cuda_available()
        name = ""
        if cuda:
            import torch

            name = torch.cuda.get_device_name(0)
        import torch

        return {"cuda": cuda, "device": name, "torch": torch.__version__.split("+")[0]}

    outcome = run_isolated(probe, limit=120)
    if not outcome.ok:
        return {"cuda": False, "device": "", "torch": "?", "error": outcome.error}
    return outcome.value


def _aggregate(code: str, name: str, cases: List[dict], seconds: float) -> Row:
    spec = all_rules()[code].symptom
    multi = len(cases) > 1

    def join(key: str) -> str:
        if not multi:
            return cases[0].get(key, "") if cases else ""
        return "; ".join(f"{c.get('label') or c.get('case')}: {c.get(key, '')}" for c in cases if c.get(key))

    verdicts = [c.get("verdict", "") for c in cases]
    errors = [v for v in verdicts if v.startswith("error")]
    if not cases:
        verdict = "error: no fixture pair (bad.py + good.py) found"
    elif errors:
        first = next(c for c in cases if c.get("verdict", "").startswith("error"))
        verdict = errors[0] if not multi else f"error: {first.get('label') or first.get('case')}: {errors[0][len('error: '):]}"
    elif any(v == NOT_REPRODUCED for v in verdicts):
        verdict = NOT_REPRODUCED
    else:
        verdict = CONFIRMED
    notes = [f"{c.get('label') or c.get('case')}: {c['note']}" if multi else c["note"]
             for c in cases if c.get("note") and not c.get("verdict", "").startswith("error")]
    where = cases[0].get("where", "") if cases else ""
    return Row(code, name, spec.text, join("bad"), join("good"), verdict, where, "; ".join(notes), round(seconds, 2), cases)


def verify(paths: List[str], *, limit: float = 30.0, parallel: int = 1, select: Optional[List[str]] = None,
           workers: int = 2, on_event: Optional[Callable[[str, str, str], None]] = None,
           ignore: Sequence[str] = ()) -> List[Row]:
    rules = fixtures.discover(paths)
    rules = {c: r for c, r in rules.items() if wanted(c, select, ignore)}
    warm_up(("torch", "dslint.runtime.evidence", "dslint.runtime.gpu", "dslint.runtime.distributed"))

    catalog = all_rules()
    names = {code: rule.name for code, rule in catalog.items()}
    for code, rule in rules.items():
        rule.name = names.get(code, rule.name)
    env = _environment()
    rows: Dict[str, Row] = {}
    tmp = tempfile.mkdtemp(prefix="dslint-verify-")
    base_where = (f"GPU ({env['device']})" if env["cuda"] else "CPU") + f", torch {env.get('torch', '?')}, {workers} workers"
    jobs = []
    try:
        for code, rule in rules.items():
            spec = catalog[code].symptom if code in catalog else None
            if spec is None:
                rows[code] = Row(code, rule.name, "", "", "", f"error: {code} names no runtime symptom (its rule class's `symptom`)", base_where)
                continue
            if spec.gpu and not env["cuda"]:
                rows[code] = Row(code, rule.name, spec.text, "not measured: no CUDA device", "not measured: no CUDA device",
                                 SKIPPED_GPU, base_where)
                continue
            if not rule.pairs:
                rows[code] = Row(code, rule.name, spec.text, "", "", "error: no fixture pair (bad.py + good.py) found", base_where)
                continue
            from dslint.runtime.evidence import run_rule

            pairs = [{"code": p.code, "name": p.name, "directory": str(p.directory.resolve()), "form": p.form,
                      "folder_label": p.folder_label} for p in rule.pairs]
            settings = {"cuda": env["cuda"], "limit": limit, "tmp": tmp, "workers": workers}
            jobs.append({
                "code": code, "name": rule.name, "fn": run_rule, "args": (code, pairs, settings), "limit": limit,
                "log_path": os.path.join(tmp, f"{code}.log"), "exclusive": spec.exclusive,
                "on_event": (lambda kind, text, c=code: on_event(c, kind, text)) if on_event else None,
            })

        def done(job: dict, outcome: Outcome) -> None:
            code = job["code"]
            if outcome.ok:
                rows[code] = _aggregate(code, job["name"], outcome.value["cases"], outcome.seconds)
            else:
                row = Row(code, job["name"], all_rules()[code].symptom.text, "", "", f"error: {outcome.error}", base_where,
                          seconds=round(outcome.seconds, 2))
                row.note = (outcome.traceback or outcome.log_tail)[-3000:]
                rows[code] = row
            if on_event:
                on_event(code, "done", rows[code].verdict)

        run_many(jobs, parallel=parallel, on_done=done)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [rows[c] for c in sorted(rows)]


# ------------------------------------------------------------------ output


def render_text(rows: List[Row]) -> str:
    cells = []
    for row in rows:
        verdict = row.verdict + (f" ({row.note})" if row.note and row.verdict == NOT_REPRODUCED else "")
        cells.append([row.code, cell(row.bad), cell(row.good), cell(verdict)])
    return "\n".join(table(("code", "bad (symptom measured)", "good", "verdict"), cells)) + "\n"


def render_json(rows: List[Row]) -> str:
    return to_json([asdict(r) for r in rows])


def summary(rows: List[Row], seconds: float) -> str:
    counts: Dict[str, int] = {}
    for row in rows:
        key = "error" if row.verdict.startswith("error") else row.verdict
        counts[key] = counts.get(key, 0) + 1
    parts = [f"{n} {k}" for k, n in sorted(counts.items())]
    return f"{len(rows)} rules: {', '.join(parts)} in {seconds:.1f} s"


def write_evidence(rows: List[Row], path: Optional[Path] = None) -> Path:
    """Merge the rows into ``dslint/evidence.json`` (rows of the other platform, CPU or GPU, are kept)."""
    from dslint.docs import EVIDENCE_FILE

    path = path or EVIDENCE_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    for row in rows:
        platform = row.where.split(",")[0].split(" ")[0]  # CPU | GPU
        entries = []
        if row.cases and row.verdict != SKIPPED_GPU:
            multi = len(row.cases) > 1
            for case in row.cases:
                where = case.get("where") or row.where
                if multi:
                    label = str(case.get("label") or case.get("case") or "")
                    if label.startswith(row.code):
                        label = label[len(row.code):].strip()
                    where += f" · {label or case.get('case')}"
                entries.append({"where": where, "bad": case.get("bad", ""), "good": case.get("good", ""),
                                "verdict": case.get("verdict", "")})
        else:
            entries.append({"where": row.where, "bad": row.bad, "good": row.good, "verdict": row.verdict})
        old = data.get(row.code, {}).get("rows", [])
        kept = [r for r in old if not str(r.get("where", "")).startswith(platform)]
        data[row.code] = {"rows": kept + entries}
    path.write_text(json.dumps(dict(sorted(data.items())), indent=2, ensure_ascii=False) + "\n")
    return path
