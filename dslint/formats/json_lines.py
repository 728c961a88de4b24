"""One JSON object per line (same objects as ``json``)."""

from __future__ import annotations

import json

from dslint.formats.json_format import as_object


def render(diagnostics, env) -> str:
    return "".join(json.dumps(as_object(d, env)) + "\n" for d in diagnostics)
