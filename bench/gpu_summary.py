"""Summarise one ``bench/gpu_check.sh`` run: DIR/results.json and DIR/summary.txt.

    python bench/gpu_summary.py DIR [--dry-run]

Reads what the steps left in DIR (``<step>.json`` output, ``<step>.status`` exit code
and seconds, ``machine.json``) and writes one JSON with, per rule, the symptom on
``bad``, its absence on ``good`` and the verdict, and per bench the samples/s of every
setting with pinned against pageable memory side by side. Exit 0 when every step ran
and every measured rule was confirmed; 1 otherwise (the files are written either way).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

STEPS = ("verify", "bench_dsl508_bad", "bench_dsl508_good", "bench_dsl507_bad")


def load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def bench_rows(data) -> list:
    rows = []
    for row in (data or {}).get("rows", []):
        settings = row.get("settings", {})
        rows.append({
            "num_workers": settings.get("num_workers"),
            "pin_memory": settings.get("pin_memory"),
            "samples_per_s": row.get("samples_per_s"),
            "ms_median": row.get("ms_median"),
        })
    return rows


def pinning_gain(rows: list) -> dict:
    """samples/s pinned / pageable, per num_workers, where both were measured."""
    by = {(r["num_workers"], bool(r["pin_memory"])): r["samples_per_s"] for r in rows if r["samples_per_s"]}
    return {str(n): round(by[(n, True)] / by[(n, False)], 3)
            for (n, pinned) in sorted(by, key=str) if pinned and (n, False) in by}


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    dry = "--dry-run" in args
    out = Path(next(a for a in args if not a.startswith("--")))
    results = {"dry_run": dry, "machine": load(out / "machine.json"), "steps": {}, "rules": {}, "bench": {}}
    ok = True
    for step in STEPS:
        status = load(out / f"{step}.status") or {"rc": None, "seconds": None}
        results["steps"][step] = status
        ok = ok and status.get("rc") == 0
    for row in load(out / "verify.json") or []:
        results["rules"][row["code"]] = {k: row.get(k) for k in ("verdict", "bad", "good", "where", "note")}
        measured = not str(row.get("verdict", "")).startswith("skipped")
        if measured and row.get("verdict") != "confirmed":
            ok = False
        if not dry and not measured:
            ok = False  # on a GPU machine nothing may be skipped
    for step in STEPS[1:]:
        rows = bench_rows(load(out / f"{step}.json"))
        results["bench"][step] = {"rows": rows, "pinned_over_pageable": pinning_gain(rows)}
    results["ok"] = ok
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")

    machine = results["machine"] or {}
    lines = [f"gpu_check {'(dry run, CPU) ' if dry else ''}on {machine.get('device') or 'CPU'}, torch {machine.get('torch')}, "
             f"CUDA {machine.get('cuda')}, {machine.get('gpus')} GPU(s)", ""]
    lines.append("| rule | verdict | bad | good |")
    lines.append("|---|---|---|---|")
    for code, row in sorted(results["rules"].items()):
        lines.append(f"| {code} | {row['verdict']} | {row['bad']} | {row['good']} |")
    lines.append("")
    for step, bench in results["bench"].items():
        cells = ", ".join(f"w={r['num_workers']} pin={r['pin_memory']}: {r['samples_per_s'] or 0:.0f}/s" for r in bench["rows"])
        lines.append(f"{step}: {cells or 'no rows'}; pinned/pageable {bench['pinned_over_pageable'] or 'n/a'}")
    for step, status in results["steps"].items():
        if status.get("rc") != 0:
            lines.append(f"step {step} failed: exit {status.get('rc')} (see {step}.log)")
    lines.append(f"overall: {'ok' if ok else 'FAILED'}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
