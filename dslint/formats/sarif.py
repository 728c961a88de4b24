"""SARIF 2.1.0 for code scanning: every rule with its docs, results with locations.

In a notebook, a result's ``region`` holds the lines and columns within the cell, and
the cell's number (1-based, among all cells) is the location's ``properties.cell``
(SARIF has no notion of cells; a property bag is its place for tool-specific data).
"""

from __future__ import annotations

import json
import os
from pathlib import PurePosixPath

from dslint import __version__
from dslint.formats import cell_of, rule_url

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str, root: str) -> str:
    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(absolute, root)
    except ValueError:
        rel = absolute
    if rel.startswith(".."):
        return PurePosixPath(absolute).as_uri() if os.path.isabs(absolute) else absolute
    return rel.replace(os.sep, "/")


def render(diagnostics, env) -> str:
    rules = list(env.rules.values())
    order = {rule.code: i for i, rule in enumerate(rules)}
    descriptors = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.docs()},
            "helpUri": rule_url(rule.code, env),
            "help": {"text": rule.help or rule.summary, "markdown": rule.docs()},
            "defaultConfiguration": {"level": rule.level},
            "properties": {"preview": rule.preview, "fixable": rule.fix_availability},
        }
        for rule in rules
    ]
    results = []
    for d in diagnostics:
        location = {
            "physicalLocation": {
                "artifactLocation": {"uri": _uri(d.path, env.root), "uriBaseId": "%SRCROOT%"},
                "region": {
                    "startLine": d.start[0],
                    "startColumn": d.start[1],
                    "endLine": d.end[0],
                    "endColumn": d.end[1],
                },
            }
        }
        if cell_of(d) is not None:
            location["properties"] = {"cell": cell_of(d)}
        result = {
            "ruleId": d.code,
            "level": "warning" if d.level == "warning" else "error",
            "message": {"text": d.message},
            "locations": [location],
        }
        if d.code in order:
            result["ruleIndex"] = order[d.code]
        results.append(result)
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "dslint", "version": __version__, "semanticVersion": __version__, "rules": descriptors}},
                "originalUriBaseIds": {"%SRCROOT%": {"uri": PurePosixPath(os.path.abspath(env.root)).as_uri() + "/"}},
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
