"""The IterableDataset protocol (DSL301-DSL304). An IterableDataset is iterated once per
epoch: the DataLoader calls ``iter()`` on it (in every worker process, or in the main
process with ``num_workers=0``) and drains the result. These rules flag the ways that
goes wrong, each measured on torch 2.13: ``__iter__`` returning ``self`` (DSL301) or
draining an iterator made once in ``__init__`` (DSL302), so later epochs are empty; no
sharding by worker, so every worker replays the whole stream (DSL303); and ``len()`` of
one that has no ``__len__`` (DSL304). They decide from the class bodies of the checked
file and the project index (``ctx.view``); what cannot be seen is unknown, and unknown
is never reported.
"""
