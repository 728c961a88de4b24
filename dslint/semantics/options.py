"""Command-line options: what ``args.<dest>`` can be, from this file's argparse calls.

``add_argument(..., default=, choices=, action="store_true"/"store_false",
dest=)`` and ``set_defaults(dest=...)``. A default is possible, never complete: the
user may pass another value, unless ``choices`` limits it.

``handed_option_values(ctx, dest)``: ``args.<dest>`` of a namespace handed to a function
(``def build(args)``, ``self.args = args``). This file's options when it defines ``dest``;
else the project's: every other file that defines ``dest`` (summary entry ``options``,
``file_options``) when they all agree on its values, each named with its file
(``the default of `--num_workers` in `run.py```). Files that disagree, or none: nothing
known, as before.
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


def handed_option_values(ctx, dest: str) -> Possible:
    """See the module docstring."""
    own = option_values(ctx, dest)
    if own is not NOTHING:
        return own
    files = ctx.view.project_option(dest)  # [[path, complete, [[value, origin], ...]], ...]
    if not files or len({repr(sorted(repr(value) for value, _ in f[2])) for f in files}) > 1:
        return NOTHING  # defined in no other file, or differently in different files: unknown
    values = tuple(Value(value, f"{origin} in `{path}`") for path, _, pairs in files for value, origin in pairs)
    return Possible(values, all(complete for _, complete, _ in files))


def file_options(tree, names) -> Dict[str, list]:
    """Phase 1 (summary entry ``options``): ``{dest: [complete, [[value, origin], ...]]}`` for
    every option this file's ``add_argument`` calls define (values JSON can hold)."""

    def constant(name: cst.Name):
        values = names.assigns.get(name.value)
        return values[0] if values and len(values) == 1 and name.value not in names.imports else None

    out: Dict[str, list] = {}
    calls = tree.nodes(cst.Call)
    for call in calls:
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument":
            dest = _option_dest(call)
            if dest and dest not in out:
                found = _values(calls, constant, dest)
                plain = [v for v in found.values if v.value is None or isinstance(v.value, (bool, int, float, str))]
                out[dest] = [found.complete and len(plain) == len(found.values), [[v.value, v.origin] for v in plain]]
    return out


def _option_values(ctx, dest: str) -> Possible:
    return _values(ctx.nodes(cst.Call), ctx.module_constant, dest)


def _values(calls, constant, dest: str) -> Possible:
    out: List[Value] = []
    complete = True
    found = False
    for call in calls:
        func = call.func
        if not isinstance(func, cst.Attribute):
            continue
        method = func.attr.value
        if method == "set_defaults":
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == dest:
                    value = literal_value(arg.value, constant)
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
            default = literal_value(keywords["default"], constant)
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
        choices = literal_value(keywords["choices"], constant) if "choices" in keywords else UNKNOWN
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
