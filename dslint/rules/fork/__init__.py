"""State that forked DataLoader workers inherit from the parent (DSL401-403):
everything a dataset's ``__init__`` creates is copied into every worker at fork, so
an open file keeps one shared offset and an RNG object one shared state, and a
``worker_init_fn`` that seeds from the worker id alone gives every epoch the same
random streams; the rules stay silent wherever the project visibly re-creates the
state per worker (lazy opening, ``get_worker_info()``, ``os.getpid()`` checks, a
``worker_init_fn`` that reassigns the attribute) or where the facts are unknown.
"""
