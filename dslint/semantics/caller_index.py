"""Every summarised call of a project function, with what it passes (index phase, no libcst).

The summaries record, for every call in a function or method of any file, its target and the
literal value of each argument (``call_facts.passed_arguments``: ``[literal]`` or ``"?"``).
Calls at module level are not summarised. ``builder_args`` reads them through
``View.caller_arguments`` to judge a loader builder's options call by call.

API: ``project_call_arguments(index, key)``; ``project_call_arguments(index, key, table="classes")``
for the constructions of a project class (``kept_elsewhere.unloaded``).
"""

from __future__ import annotations

from typing import List, Tuple

Key = Tuple[str, str]

__all__ = ["project_call_arguments"]


def project_call_arguments(index, key: Key, table: str = "functions") -> List[list]:
    """``[path, caller, positional or None, keywords]`` for each summarised call that
    locates to the function (``table="classes"``: the class) ``key`` (see the module docstring);
    with ``table="classes"`` also a call whose arguments are not recorded, as ``[path, caller, None, {"**": "?"}]``."""
    calls = getattr(index, "_builder_call_table", None)
    if calls is None:
        calls = index._builder_call_table = {}
        for path, summary in index.summaries.items():
            bodies = list(summary["functions"].items())
            bodies += [(f"{c}.{m}", f) for c, cls in summary["classes"].items() for m, f in cls["methods"].items()]
            for qual, facts in bodies:
                passed = facts.get("call_args") or []
                for position, (kind, target, _) in enumerate(facts["calls"]):
                    if kind == "func":
                        args = passed[position] if position < len(passed) else "?"
                        calls.setdefault(target.rsplit(".", 1)[-1], []).append((path, qual, target, args))
    found = []
    for path, qual, target, args in calls.get(key[1].rsplit(".", 1)[-1], ()):
        if (args == "?" and table == "functions") or index.locate(target, path, table=table) != key:
            continue
        if args == "?":
            found.append([path, qual, None, {"**": "?"}])
            continue
        positional, keywords = args if args is not None else ([], {})
        found.append([path, qual, positional, keywords])
    return found
