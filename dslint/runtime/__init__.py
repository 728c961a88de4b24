"""The runtime companion: ``dslint verify``, ``dslint probe`` and ``dslint bench``.

Layout, by role:

Drivers (the parent process of each command; no torch at import)

- ``commands``       registers verify, probe and bench with the CLI
- ``common``         what the drivers share: settings, ``CommandError``, verdicts, tables,
                     JSON, number and message formatting, the target's description lines
- ``verify``         the ``dslint verify`` driver: one row per rule, from its fixture pairs
- ``probe_cmd``      the ``dslint probe`` driver: the checks on a user's dataset
- ``bench``          the ``dslint bench`` driver: the loader-settings sweep

What the drivers run in isolated children

- ``describe``       TARGET imported, built and sampled once (probe and bench start with it)
- ``evidence``       verify's runners, ``RUNNERS`` keyed by probe name (a rule class's
                     ``symptom.probe``, ``dslint.rules.base.Symptom``), and ``run_rule``
- ``fixture_case``   one bad/good fixture pair of a rule, measured side by side
- ``checks``         probe's checks, ``CHECKS``; each confirms the codes of the rules whose
                     symptom it measures
- ``bench_measure``  one bench setting: warm-up, epochs, the row

Measurements (reusable; import torch)

- ``probes``         fd growth, samples per epoch, duplicates, per-sample time, throughput,
                     exceptions, loop costs
- ``worker_probes``  what workers inherit: integrity, pickling, worker memory, RNG streams,
                     worker-visible state
- ``hotspots``       audit-hook counts (directory scans, file opens) and a sampling
                     profile of ``__getitem__``
- ``distributed``    DistributedSampler orders on a real 2-rank process group
- ``gpu``            CUDA-only measurements (fork after CUDA init, pinned vs pageable)

Infrastructure

- ``isolate``        run a callable in a forked child with phase time limits; the
                     child's process group is killed afterwards (no worker outlives it)
- ``instrument``     ``Session``: the loader/sampler hooks, loader keywords, CUDA helpers
- ``recording``      the recording dataset wrapper (``Measure`` chooses what it records)
- ``snapshots``      sample hashing, fd/RNG/attribute/handle snapshots, USS
- ``fixtures``       loading ``fixtures/<CODE>-<name>/{bad,good}.py`` pairs
- ``target``         ``dslint probe``/``bench`` targets: ``module:attr`` or ``file.py:attr``
                     imported and turned into a dataset or loader factory
- ``limit``          the ``--samples`` cap on a user's dataset

Only the measurements, ``instrument``/``recording``/``snapshots``, ``limit`` and
``evidence`` import torch at import time, and they are imported only inside probe
processes (or by a driver warming itself up before it forks them).
"""
