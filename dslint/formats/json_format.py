"""A JSON array in ruff's shape (rows and columns 1-based).

``cell`` is null outside notebooks; in a notebook it is the cell's number (1-based,
among all cells) and every location (the finding's, its fix edits', ``noqa_row``) is
within that cell, as in ruff.
"""

from __future__ import annotations

import json
import os

from dslint.formats import cell_of, rule_url


def location(row_col) -> dict:
    return {"row": row_col[0], "column": row_col[1]}


def as_object(diagnostic, env) -> dict:
    fix = None
    if diagnostic.fix is not None:
        fix = {
            "applicability": diagnostic.fix.applicability,
            "message": diagnostic.fix.message,
            "edits": [
                {"content": e.content, "location": location(e.start), "end_location": location(e.end)}
                for e in diagnostic.fix.edits
            ],
        }
    return {
        "cell": cell_of(diagnostic),
        "code": diagnostic.code,
        "name": diagnostic.name,
        "message": diagnostic.message,
        "severity": diagnostic.level,
        "filename": os.path.abspath(diagnostic.path),
        "location": location(diagnostic.start),
        "end_location": location(diagnostic.end),
        "fix": fix,
        "noqa_row": diagnostic.noqa_row,
        "url": rule_url(diagnostic.code, env),
        "help": diagnostic.help,
    }


def render(diagnostics, env) -> str:
    return json.dumps([as_object(d, env) for d in diagnostics], indent=2) + "\n"
