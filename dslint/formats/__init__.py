"""Output formats: one module each, all with ``render(diagnostics, env) -> str``.

The machine formats (``MACHINE``) print the report alone on stdout; every summary,
warning and error goes to stderr, so the output can be piped or uploaded as is.

A finding in a notebook is rendered within its cell (``render`` maps it first): its
rows are the lines of that cell and ``cell`` holds the cell's number, which the text
formats print as ruff does (``nb.ipynb:cell 7:3:5``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from dslint.report import Finding

FORMATS = {
    "full": "full",
    "concise": "concise",
    "grouped": "grouped",
    "json": "json_format",
    "json-lines": "json_lines",
    "github": "github",
    "gitlab": "gitlab",
    "sarif": "sarif",
}

#: formats read by programs (CI annotations, code scanning, code quality reports)
MACHINE = ("json", "json-lines", "github", "gitlab", "sarif")


@dataclass
class Env:
    """What a format may need besides the diagnostics."""

    root: str
    color: bool = False
    show_fixes: bool = True
    rules: Dict[str, type] = field(default_factory=dict)
    unsafe_fixes: bool = False
    #: ``[tool.dslint] docs-url``: the template of a rule page's absolute URL
    docs_url: Optional[str] = None


def render(name: str, diagnostics: List[Finding], env: Env) -> str:
    from dslint.notebook_findings import shown

    module = importlib.import_module(f"dslint.formats.{FORMATS[name]}")
    return module.render([shown(d) for d in diagnostics], env)


def cell_of(diagnostic: Finding) -> Optional[int]:
    """The notebook cell (1-based) a finding's rows are in; None outside notebooks."""
    return getattr(diagnostic, "cell", None)


def place(diagnostic: Finding) -> str:
    """``row:col``, or ``cell N:row:col`` in a notebook (as ruff prints it)."""
    cell = cell_of(diagnostic)
    where = f"{diagnostic.row}:{diagnostic.column}"
    return where if cell is None else f"cell {cell}:{where}"


def fixable(diagnostic: Finding, env: Optional[Env]) -> bool:
    if diagnostic.fix is None:
        return False
    return diagnostic.fix.applicability == "safe" or bool(env and env.unsafe_fixes)


def rule_url(code: str, env: Env) -> Optional[str]:
    """The absolute URL of the page of rule ``code`` (None for an unknown code)."""
    rule = env.rules.get(code)
    if rule is None:
        return None
    from dslint.docs import DEFAULT_DOCS_URL, rule_url as page_url

    return page_url(rule, env.docs_url or DEFAULT_DOCS_URL)
