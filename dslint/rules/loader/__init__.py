"""DataLoader rules: arguments torch rejects at construction or at the first
``iter()`` (DSL501-504, DSL509), and how the loops over a loader use it (the
sampler's epoch, picklable worker callables, worker processes, pinned memory,
state hidden from persistent workers, re-iterating per step: DSL505-508, DSL510,
DSL511). Every rule evaluates literals only and stays silent on what it cannot
know: a non-literal argument, ``**kwargs``, a loader that crosses into another
module or is wrapped by a framework.
"""
