"""Which ``__init__`` parameter of a project class receives an opened handle (``handle_flow``).

``handle_table(index, flow)`` (once per project index): ``{(class key, parameter): [kind,
origin]}``, following each ``handle_args`` fact from the construction of a class through the
``__init__`` methods of its MRO (``device_index.follow_argument``, with the stores, forwards and
positional parameters of ``device_flow``). Imports no libcst: a warm run replays it.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from dslint.semantics.device_index import follow_argument
from dslint.semantics.modules import canonical


def handle_table(index, flow) -> Dict[Tuple[tuple, str], List[str]]:
    """See the module docstring."""
    params: Dict[tuple, str] = {}
    for path, summary in index.summaries.items():
        for callee, slot, shown, kind in summary.get("handle_args", ()):
            cls = index.locate(canonical(callee), path)
            if cls is not None:
                follow_argument(index, cls, slot, kind, f"`{shown}` in {path}", *flow, {}, params)
    table: Dict[Tuple[tuple, str], List[str]] = {}
    for (owner, param, kind), origin in params.items():
        table.setdefault((owner, param), [kind, origin])
    return table
