"""Is a random generator kept on ``self`` reseeded after construction (DSL402)?

``reseeded_or_retried`` also accepts a generator drawn from only on a failure path
(``retries.on_failure_path``): once per failed sample, not once per sample.

``self.rng.seed(...)``/``manual_seed``/``set_state``... in a method that is not
construction code, or ``<anything>.<attr>.seed(...)`` anywhere in the file (a
``worker_init_fn`` reseeding ``dataset.rng``). Other files' reseeding comes from the
summaries (``summary.reseeded_attrs``, asked through ``rng_heirs``).
"""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.instance_state import AttrUse, per_sample_loads
from dslint.semantics.retries import on_failure_path
from dslint.semantics.summary import RESEED_METHODS


def reseeded(ctx, init: cst.FunctionDef, attr: str, uses: List[AttrUse], construction=()) -> bool:
    """Reseeded outside ``init`` and the ``construction`` functions (which run before the fork)."""
    before_fork = (init, *construction)
    for use in uses:
        parent = ctx.parent(use.node)
        if isinstance(parent, cst.Attribute) and parent.value is use.node and parent.attr.value in RESEED_METHODS:
            if use.method.name.value != "__init__" and not any(use.method is f for f in before_fork):
                return True
    for node in ctx.nodes(cst.Attribute):
        if node.attr.value not in RESEED_METHODS:
            continue
        owner = node.value
        if isinstance(owner, cst.Attribute) and owner.attr.value == attr:
            if not any(ctx.enclosing_function(node) is f for f in before_fork):
                return True
    return False


def reseeded_or_retried(ctx, init: cst.FunctionDef, attr: str, uses: List[AttrUse]) -> bool:
    """``reseeded``, or drawn from per sample only on a failure path (a replacement index after
    the sample's own load failed: ``retries.on_failure_path``), not once per sample."""
    drawn = per_sample_loads(ctx, uses)
    return reseeded(ctx, init, attr, uses) or (bool(drawn) and all(on_failure_path(ctx, u.node) for u in drawn))
