"""``--statistics``: one row per rule, in ruff's shape.

Text (``full``, ``concise``): ``COUNT<TAB>CODE<TAB>[*] name``, counts right-aligned and
codes left-aligned to their widest, ``[*]`` for a rule with a fix ``--fix`` would apply
and ``[ ]`` for the others (no marker column when nothing is fixable). JSON: an array of
``{"code", "name", "count", "fixable", "fixable_count"}``. Rows by count, most first,
then by code.
"""

from __future__ import annotations

import json
from collections import Counter

from dslint.formats import fixable

#: the --output-format values --statistics supports (as ruff: the text ones and json)
SUPPORTED = ("full", "concise", "json")


def rows(diagnostics, env) -> list:
    counts = Counter(d.code for d in diagnostics)
    fixes = Counter(d.code for d in diagnostics if fixable(d, env))
    names = {d.code: d.name for d in diagnostics}
    ordered = sorted(counts, key=lambda code: (-counts[code], code))
    return [
        {"code": code, "name": names[code], "count": counts[code], "fixable": fixes[code] > 0, "fixable_count": fixes[code]}
        for code in ordered
    ]


def render(diagnostics, env, fmt: str) -> str:
    table = rows(diagnostics, env)
    if fmt == "json":
        return json.dumps(table, indent=2) + "\n"
    if not table:
        return ""
    count_width = max(len(str(r["count"])) for r in table)
    code_width = max(len(r["code"]) for r in table)
    any_fixable = any(r["fixable"] for r in table)
    out = []
    for r in table:
        mark = ("[*] " if r["fixable"] else "[ ] ") if any_fixable else ""
        out.append(f"{str(r['count']).rjust(count_width)}\t{r['code'].ljust(code_width)}\t{mark}{r['name']}\n")
    return "".join(out)
