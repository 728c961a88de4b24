"""What the per-sample callers of a function pass it.

A helper that per-sample code calls (``to_tensor(x, device="cpu")`` in ``__getitem__``) runs in
the DataLoader workers with the arguments those calls give it: a parameter's default is used
there only when some such call leaves the argument out. The summaries record, per call, the
literal value of each argument it passes (``call_facts.passed_arguments``: ``[literal]``, or
``"?"`` for any other expression); this tables, for every function the project index reaches
from per-sample code, the arguments of the per-sample calls that reach it.

A function no per-sample call reaches (an entry method: the DataLoader calls ``__getitem__``),
or one reached through a call whose arguments were not recorded, is not known: None.

API: ``sample_call_table(index)`` (built once per index) and
``parameter_arguments(table, key, param, position)``.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from dslint.semantics.alternatives import callees

Key = Tuple[str, str]
DEFAULT = "default"  # a call that leaves the parameter out

# How a function runs per sample (also ``regions.WHOLE``/``regions.LOOP``; defined here, for
# ``project``, so that the index, which a warm run builds from cached summaries, needs no libcst).
WHOLE = "whole"
LOOP = "loop"
ENTRY_POINTS = (("__getitem__", WHOLE), ("__getitems__", WHOLE), ("__iter__", None), ("__next__", WHOLE))
#: the methods through which a DataLoader reads a dataset's samples (the names of ``ENTRY_POINTS``)
ENTRY_METHODS = tuple(name for name, _ in ENTRY_POINTS)


def sample_call_table(index) -> Dict[Key, Optional[List[list]]]:
    """key -> the recorded arguments of every per-sample call of the function (None: unknown)."""
    table: Dict[Key, Optional[List[list]]] = {}
    for func, (mode, _) in index.per_sample.items():
        facts = index.function_facts(func)
        if facts is None:
            continue
        owner = (func[0], func[1].rpartition(".")[0])
        mro = index.mro(owner) if owner[1] in index.summaries[owner[0]]["classes"] else []
        passed = facts.get("call_args")
        for position, (kind, target, in_loop) in enumerate(facts["calls"]):
            if not (mode == WHOLE or (mode == LOOP and in_loop)):
                continue
            arguments = passed[position] if passed is not None and position < len(passed) else "?"
            for callee in callees(index, kind, target, mro, owner, func[0]):
                if callee not in index.per_sample:
                    continue
                sites = table.setdefault(callee, [])
                if sites is None or arguments == "?":
                    table[callee] = None
                else:
                    sites.append(arguments if arguments is not None else [[], {}])
    return table


def parameter_arguments(table, key: Key, param: str, position: Optional[int]) -> Optional[list]:
    """What the per-sample calls of function ``key`` give its parameter ``param`` (at ``position``
    among the positional parameters a call fills, ``self`` not counted): a list of ``[literal]``,
    ``"?"`` and ``DEFAULT``; None when the callers are not all known."""
    sites = table.get(key)
    if not sites:
        return None
    found = []
    for positional, keywords in sites:
        if param in keywords:
            found.append(keywords[param])
        elif positional is None or "**" in keywords:
            found.append("?")  # (behind a ``*args`` or ``**kwargs``: it may be there)
        elif position is not None and position < len(positional):
            found.append(positional[position])
        else:
            found.append(DEFAULT)
    return found
