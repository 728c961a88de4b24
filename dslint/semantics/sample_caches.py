"""Datasets that keep what they load in memory, per sample: a summary fact (``sample_caches``).

A ``__getitem__`` that stores each loaded sample in a dict on ``self`` and reads it back when it is there

    if idx in self.cache:
        return self.cache[idx]
    image = decode(self.paths[idx])
    self.cache[idx] = image

loads every sample once in the process that runs it. With no workers that is the main process, which
keeps the cache from one epoch to the next; each worker would fill its own copy (again every epoch,
unless the workers persist), so the author's single process is the design, not an oversight (DSL507).

API: ``sample_caches(buckets, self_param, parent)`` (phase 1, per method); ``caches_samples(ctx, index, expr)``:
the attribute every dataset the expression may hold caches its samples in, through the summaries.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from dslint.semantics.calls import UNKNOWN, literal_value


def sample_caches(buckets: dict, self_param: Optional[str], parent: dict) -> List[str]:
    """The attributes ``a`` of ``self`` that the method both writes an entry of under a computed key
    (``self.a[key] = value``) and reads one of (``self.a[key]``, ``key in self.a``, ``self.a.get(key)``)."""
    if not self_param:
        return []
    written, read = set(), set()
    for node in buckets.get(cst.Attribute, ()):
        if not (type(node.value) is cst.Name and node.value.value == self_param):
            continue
        up = parent.get(id(node))
        if type(up) is cst.Subscript and up.value is node:
            key = up.slice[0].slice.value if len(up.slice) == 1 and type(up.slice[0].slice) is cst.Index else None
            if key is None or literal_value(key) is not UNKNOWN:
                continue  # (a fixed key: one entry, not one per sample)
            (written if type(parent.get(id(up))) is cst.AssignTarget else read).add(node.attr.value)
        elif type(up) is cst.ComparisonTarget and type(up.operator) in (cst.In, cst.NotIn):
            read.add(node.attr.value)
        elif type(up) is cst.Attribute and up.attr.value == "get":
            read.add(node.attr.value)
    return sorted(written & read)


def caches_samples(ctx, index, expr) -> Optional[str]:
    """``self.<attr>``: every dataset ``expr`` may hold is an instance of a project class (any file) whose
    ``__getitem__`` caches its samples there (``sample_caches``); else None."""
    nodes = index.value_nodes(expr) if expr is not None else None
    found = None
    for node in nodes or ():
        name = ctx.call_name(node) if isinstance(node, cst.Call) else None
        facts = ctx.view.method_facts(name, "__getitem__") if name and "." in name else None
        caches = (facts or {}).get("sample_caches")
        if not caches:
            return None
        found = found or f"self.{caches[0]}"
    return found


__all__ = ["caches_samples", "sample_caches"]
