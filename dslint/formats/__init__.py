"""Output formats: one module each, all with ``render(diagnostics, env) -> str``."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from dslint.report import Finding

FORMATS = {
    "full": "full",
    "concise": "concise",
    "json": "json_format",
    "json-lines": "json_lines",
    "github": "github",
    "sarif": "sarif",
}


@dataclass
class Env:
    """What a format may need besides the diagnostics."""

    root: str
    color: bool = False
    show_fixes: bool = True
    rules: Dict[str, type] = field(default_factory=dict)
    unsafe_fixes: bool = False


def render(name: str, diagnostics: List[Finding], env: Env) -> str:
    module = importlib.import_module(f"dslint.formats.{FORMATS[name]}")
    return module.render(diagnostics, env)


def fixable(diagnostic: Finding, env: Optional[Env]) -> bool:
    if diagnostic.fix is None:
        return False
    return diagnostic.fix.applicability == "safe" or bool(env and env.unsafe_fixes)
