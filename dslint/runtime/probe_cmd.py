"""``dslint probe TARGET``: ``dslint verify``'s probes on a user's own dataset.

The target is imported and built in an isolated child first (``describe.describe_in_child``):
a module that fails to import, a factory that raises, a dataset whose first sample raises
or hangs gives one clear line and exit 2. Then every check of ``checks.CHECKS`` runs in its
own isolated child (``dslint.runtime.isolate``: phase time limits, the process group,
DataLoader workers included, killed afterwards), with real worker processes.

A finding is reported only when the symptom was measured here ("confirmed at
runtime"); its message states the consequence with the figure.
No torch at import: the parent imports it in ``run`` (so the children it forks start warm).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from dslint.runtime.checks import CHECKS, NOT_APPLICABLE, Check, check_named, run_check
from dslint.runtime.common import (
    CONFIRMED_AT_RUNTIME,
    ProbeSettings,
    cell,
    clean_path,
    outcome_error,
    table,
    target_lines,
    target_notes,
    to_json,
    wanted,
)
from dslint.runtime.describe import describe_in_child, warm_parent
from dslint.runtime.isolate import Outcome, run_many


@dataclass
class Row:
    check: str
    title: str
    codes: List[str]
    measured: str
    result: str
    findings: List[dict] = field(default_factory=list)
    data: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    log_tail: str = ""

    @property
    def error(self) -> bool:
        return self.result.startswith("error")


@dataclass
class Report:
    target: dict
    settings: dict
    rows: List[Row]
    seconds: float = 0.0

    @property
    def findings(self) -> List[dict]:
        return [f for row in self.rows for f in row.findings]

    @property
    def errors(self) -> List[Row]:
        return [r for r in self.rows if r.error]

    @property
    def exit_code(self) -> int:
        return 2 if self.errors else (1 if self.findings else 0)


def selected(check: Check, select: Optional[List[str]], ignore: Sequence[str] = ()) -> bool:
    """Whether ``--select``/``--ignore`` keep one of the codes ``check`` confirms."""
    return any(wanted(code, select, ignore) for code in check.codes)


def run(settings: ProbeSettings, *, on_event: Optional[Callable[[str, str, str], None]] = None) -> Report:
    """Describe the target, then run every applicable check; raises CommandError when the target
    cannot be imported, built or sampled (or hangs doing so)."""
    warm_parent()
    start = time.monotonic()
    result: Dict[str, Outcome] = {}

    def done(job: dict, outcome: Outcome) -> None:
        result[job["name"]] = outcome
        if on_event:
            on_event(job["name"], "done", "ok" if outcome.ok else (outcome.error or "failed"))

    def event(name: str):
        return (lambda kind, text: on_event(name, kind, text)) if on_event else None

    info = describe_in_child(settings, on_event=event("target"), on_done=done)
    rows: Dict[str, Row] = {}
    jobs = []
    for check in CHECKS:
        if not selected(check, settings.select, settings.ignore):
            continue
        if info["style"] not in check.kinds:
            rows[check.name] = Row(check.name, check.title, list(check.codes), NOT_APPLICABLE.get(check.name, "-"), "n/a")
            continue
        if check.name == "handles" and not [h for h in info["handles"] if "mmap)" not in h]:
            rows[check.name] = Row(check.name, check.title, list(check.codes),
                                   "no open file, connection or archive in the dataset when the workers fork", "ok")
            continue
        jobs.append({"name": check.name, "fn": run_check, "args": (check.name, settings, info),
                     "limit": settings.timeout, "exclusive": check.exclusive,
                     "log_path": os.path.join(settings.tmp, f"{check.name}.log"), "on_event": event(check.name)})
    result.clear()
    run_many(jobs, parallel=settings.parallel, on_done=done)
    for job in jobs:
        check = check_named(job["name"])
        rows[check.name] = check_row(check, result.get(check.name), settings.timeout)
    merge_iterator_handle(rows)
    for row in rows.values():  # a check confirms several codes: only the selected ones are reported
        dropped = [f["code"] for f in row.findings if not wanted(f["code"], settings.select, settings.ignore)]
        if dropped:
            row.findings = [f for f in row.findings if f["code"] not in dropped]
            row.result = (", ".join(f["code"] for f in row.findings) + f" {CONFIRMED_AT_RUNTIME}; " if row.findings else "") \
                + f"{', '.join(dropped)} measured, not selected"
    names = rule_names()
    for row in rows.values():
        for finding in row.findings:
            finding.setdefault("name", names.get(finding["code"], ""))
    ordered = [rows[c.name] for c in CHECKS if c.name in rows]
    settings_view = {"workers": settings.workers, "epochs": max(2, settings.epochs), "samples": settings.samples,
                     "timeout": settings.timeout, "kwargs": settings.kwargs}
    return Report(info, settings_view, ordered, round(time.monotonic() - start, 2))


def check_row(check: Check, outcome: Optional[Outcome], timeout: float) -> Row:
    """A check's row from its child's outcome."""
    if outcome is None:  # pragma: no cover - run_many reports every job
        return Row(check.name, check.title, list(check.codes), "", "error: not run")
    if not outcome.ok:
        return Row(check.name, check.title, list(check.codes), "", f"error: {outcome_error(outcome, timeout)}",
                   seconds=round(outcome.seconds, 2), log_tail=(outcome.traceback or outcome.log_tail)[-3000:])
    value = outcome.value
    findings = value["findings"]
    figure = value["figure"]
    # a check that measured something short of a finding says so (never "ok" beside an error)
    verdict = ", ".join(f["code"] for f in findings) + f" {CONFIRMED_AT_RUNTIME}" if findings else value.get("result", "ok")
    return Row(check.name, check.title, list(check.codes), figure["text"], verdict, findings,
               figure.get("data", {}), round(outcome.seconds, 2))


def merge_iterator_handle(rows: Dict[str, Row]) -> None:
    """One defect, one finding: an open file used as the iterator of an iterable dataset is the
    DSL302 state (its later epochs come back empty); the handle finding joins that one."""
    epochs, handles = rows.get("epochs"), rows.get("handles")
    if not epochs or not handles:
        return
    state = next((f for f in epochs.findings if f["code"] == "DSL302"), None)
    held = next((f for f in handles.findings if f["code"] == "DSL401"), None)
    if state is None or held is None or handles.data.get("wrong"):
        return
    names = ", ".join(clean_path(handles.data.get("handles_at_start", [])[:2])) or "the handle"
    state["message"] += (f"; the state is {names}, open when the workers fork, so the workers share its offset and "
                         f"split its items between them; under spawn or forkserver it cannot be pickled")
    handles.findings = [f for f in handles.findings if f is not held]
    handles.result = "ok (the open iterator of DSL302)" if not handles.findings else handles.result


def rule_names() -> Dict[str, str]:
    try:
        from dslint.rules.base import all_rules

        return {code: rule.name for code, rule in all_rules().items()}
    except Exception:  # noqa: BLE001 - names are cosmetic
        return {}


# ====================================================================== output


def header(report: Report) -> List[str]:
    t = report.target
    s = report.settings
    where = f"{'CUDA' if t.get('cuda') else 'CPU'}, torch {t.get('torch', '?')}, {t.get('cpus', '?')} CPUs"
    probed = f"probed: {s['workers']} worker processes, {s['epochs']} epochs of at most {s['samples']:,} samples; {where}"
    return target_lines(t) + [probed] + target_notes(t)


def render_text(report: Report) -> str:
    rows = [[row.title, ", ".join(row.codes), cell(row.measured) or "-", cell(row.result)] for row in report.rows]
    lines = [f"dslint probe {report.target['target']}", *header(report), "",
             *table(("check", "codes", "measured", "result"), rows)]
    findings = report.findings
    if findings:
        lines.append("")
        for f in findings:
            lines.append(f"{f['code']} {f.get('name', '')}: {CONFIRMED_AT_RUNTIME}".replace("  ", " "))
            lines.append(f"  {f['message']}")
    lines.append("")
    lines.append(summary(report))
    return "\n".join(lines) + "\n"


def summary(report: Report) -> str:
    n = len(report.findings)
    errors = report.errors
    if n:
        text = f"{n} problem{'s' if n != 1 else ''} confirmed"
    else:
        text = "no problem confirmed by the checks that ran" if errors else "no runtime problems found"
    if errors:
        text += f"; {len(errors)} check{'s' if len(errors) != 1 else ''} could not run ({', '.join(r.check for r in errors)})"
    undecided = [r.check for r in report.rows if r.result.startswith("cannot tell")]
    if undecided:
        text += f"; {len(undecided)} check{'s' if len(undecided) != 1 else ''} could not decide ({', '.join(undecided)})"
    return text


def render_json(report: Report) -> str:
    return to_json({
        "target": report.target,
        "settings": report.settings,
        "checks": [asdict(r) for r in report.rows],
        "findings": report.findings,
        "problems": len(report.findings),
        "errors": [{"check": r.check, "error": r.result[len("error: "):]} for r in report.errors],
        "summary": summary(report),
        "seconds": report.seconds,
    })
