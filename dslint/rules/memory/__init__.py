"""Memory that forked DataLoader workers copy without writing to it (DSL6xx, preview):
Python objects a dataset builds in ``__init__`` and reads per sample, whose reference
counts turn the copy-on-write sharing of the parent's pages into a copy per worker.
"""
