"""Phase 2 of ``function_values``: is a project function handed to another that calls it with workers?

``handed_to_worker_calls(index, key)``: some call of the project (summary fact ``function_args``)
hands the function ``key`` (``(path, qualname)``) to a function that calls that parameter with a
worker count (summary fact ``worker_params``): ``make_loaders(cfg, get_csc_loader)`` where
``make_loaders`` calls ``get_loader_fn(path, num_workers=cfg.workers)``. The pairs are indexed
once per project index, by the last name of the function handed.
"""

from __future__ import annotations

from typing import List

from dslint.semantics.modules import canonical

__all__ = ["handed_to_worker_calls"]


def handed_to_worker_calls(index, key) -> bool:
    """See the module docstring (``index`` is the ``ProjectIndex``)."""
    table = getattr(index, "_handed_by_tail", None)
    if table is None:  # {last name of the function handed: [(path, callee, where, function)]}
        table = {}
        for path, summary in index.summaries.items():
            for callee, where, handed in summary.get("function_args", ()):
                table.setdefault(handed.rsplit(".", 1)[-1], []).append((path, callee, where, handed))
        index._handed_by_tail = table
    receivers = None
    for path, callee, where, handed in table.get(key[1].rsplit(".", 1)[-1], ()):
        if index.locate(canonical(handed), path, table="functions") != key:
            continue
        if receivers is None:
            receivers = _worker_receivers(index)
        located = index.locate(canonical(callee), path, table="functions")
        if any(located == receiver and where in (name, position) for receiver, name, position in receivers):
            return True
    return False


def _worker_receivers(index) -> List[tuple]:
    """(function key, parameter, position) for each ``worker_params`` fact of the project."""
    return [((path, qual), name, position) for path, summary in index.summaries.items()
            for qual, name, position in summary.get("worker_params", ())]
