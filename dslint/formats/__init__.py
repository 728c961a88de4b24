"""Output formats: one module each, all with ``render(diagnostics, env) -> str``.

The machine formats (``MACHINE``) print the report alone on stdout; every summary,
warning and error goes to stderr, so the output can be piped or uploaded as is.
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
    module = importlib.import_module(f"dslint.formats.{FORMATS[name]}")
    return module.render(diagnostics, env)


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
