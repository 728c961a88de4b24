"""The runtime companion: ``dslint verify`` (and the probes ``dslint probe`` reuses).

Layout:

- ``isolate``      run a callable in a forked child with phase time limits; the
                   child's process group is killed afterwards (no worker outlives it)
- ``instrument``   the recording dataset wrapper, the loader/sampler hooks
                   (``Session``), sample hashing, fd/RNG/attribute snapshots
- ``probes``       the reusable probes: fd growth, samples per epoch, duplicates,
                   integrity, per-sample time, exceptions, pickling, worker memory,
                   RNG streams, worker-visible state, throughput, loop costs
- ``distributed``  DistributedSampler orders on a real 2-rank process group
- ``gpu``          CUDA-only measurements (fork after CUDA init, pinned vs pageable)
- ``fixtures``     loading ``fixtures/<CODE>-<name>/{bad,good}.py`` pairs
- each rule class's ``symptom`` names the probe that measures it (``dslint.rules.base.Symptom``)
- ``verify``       the ``dslint verify`` driver
- ``target``       ``dslint probe``/``bench`` targets: ``module:attr`` or ``file.py:attr``
                   imported and turned into a dataset or loader factory
- ``limit``        the ``--samples`` cap on a user's dataset
- ``hotspots``     audit-hook counts (directory scans, file opens) and a sampling
                   profile of ``__getitem__``
- ``probe``        the ``dslint probe`` driver: the probes above on a user's dataset
- ``bench``        the ``dslint bench`` driver: the loader-settings sweep
- ``commands``     registers verify, probe and bench with the CLI

Nothing here imports torch at import time except ``instrument``/``probes``/``gpu``/
``distributed``, which are only imported inside probe processes.
"""
