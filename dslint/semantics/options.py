"""Command-line options: what ``args.<dest>`` can be, from this file's argparse calls.

``add_argument(..., default=, choices=, action="store_true"/"store_false",
dest=)`` and ``set_defaults(dest=...)``. A default is possible, never complete: the
user may pass another value, unless ``choices`` limits it.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from dslint.semantics.calls import UNKNOWN, literal_value
from dslint.semantics.possible import NOTHING, Possible, Value


def option_values(ctx, dest: str) -> Possible:
    """What ``args.<dest>`` can be, from this file's ``add_argument`` calls: the default
    (``None`` when none is given, ``False`` for ``store_true``), ``set_defaults``, and the
    ``choices``. Never complete unless ``choices`` limit it."""
    return ctx.memo(("values.option", dest), lambda: _option_values(ctx, dest))


def _option_values(ctx, dest: str) -> Possible:
    out: List[Value] = []
    complete = True
    found = False
    for call in ctx.nodes(cst.Call):
        func = call.func
        if not isinstance(func, cst.Attribute):
            continue
        method = func.attr.value
        if method == "set_defaults":
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == dest:
                    value = literal_value(arg.value, ctx.module_constant)
                    if value is not UNKNOWN:
                        out.append(Value(value, f"`set_defaults({dest}=...)`"))
            continue
        if method != "add_argument" or _option_dest(call) != dest:
            continue
        found = True
        flag = _option_flag(call)
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        action = literal_value(keywords["action"]) if "action" in keywords else None
        if "default" in keywords:
            default = literal_value(keywords["default"], ctx.module_constant)
            if default is UNKNOWN:
                complete = False
            else:
                out.append(Value(default, f"the default of `{flag}`"))
        elif action == "store_true":
            out.append(Value(False, f"the default of `{flag}`"))
        elif action == "store_false":
            out.append(Value(True, f"the default of `{flag}`"))
        elif flag.startswith("-") and not _required(keywords):
            out.append(Value(None, f"the default of `{flag}` (none given)"))
        if action in ("store_true", "store_false"):
            out.append(Value(action == "store_true", f"`{flag}` given"))
            continue
        choices = literal_value(keywords["choices"], ctx.module_constant) if "choices" in keywords else UNKNOWN
        if isinstance(choices, (list, tuple)):
            out.extend(Value(c, f"a choice of `{flag}`") for c in choices)
        else:
            complete = False  # the user passes any value
    if not found:
        return NOTHING
    return Possible(tuple(out), complete)


def _option_dest(call: cst.Call) -> Optional[str]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dest":
            value = literal_value(arg.value)
            return value if isinstance(value, str) else None
    names = [literal_value(a.value) for a in call.args if a.keyword is None and not a.star]
    names = [n for n in names if isinstance(n, str)]
    if not names:
        return None
    longs = [n for n in names if n.startswith("--")]
    chosen = longs[0] if longs else names[0]
    return chosen.lstrip("-").replace("-", "_") or None


def _option_flag(call: cst.Call) -> str:
    names = [literal_value(a.value) for a in call.args if a.keyword is None and not a.star]
    names = [n for n in names if isinstance(n, str)]
    longs = [n for n in names if n.startswith("--")]
    return (longs or names or ["?"])[0]


def _required(keywords: Dict[str, cst.CSTNode]) -> bool:
    return "required" in keywords and literal_value(keywords["required"]) is True
