"""Rule code -> the probe that measures its runtime symptom (DESIGN.md's rule catalog).

This is the one place that maps codes to probes; ``dslint.runtime.evidence`` holds
the probe runners named here. No torch at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional


@dataclass(frozen=True)
class Spec:
    #: a runner in ``dslint.runtime.evidence.RUNNERS``
    probe: str
    #: the symptom the catalog names, shown in ``dslint verify --output-format json``
    symptom: str
    #: needs CUDA; on CPU-only machines the row is ``skipped: needs GPU``
    gpu: bool = False
    #: timing-sensitive: run alone, not beside another rule's probe
    exclusive: bool = False


TABLE: Dict[str, Spec] = {
    "DSL101": Spec("resource_warnings", "multi-frame images stay open until GC: ResourceWarning in workers"),
    "DSL102": Spec("resource_warnings", "ResourceWarning in workers; descriptor held until GC"),
    "DSL103": Spec("fd_growth", "+1 descriptor per sample in each worker, until EMFILE"),
    "DSL201": Spec("time_ratio", "per-sample time, bad / good", exclusive=True),
    "DSL202": Spec("time_ratio", "per-sample time, bad / good", exclusive=True),
    "DSL203": Spec("time_ratio", "per-sample time, bad / good", exclusive=True),
    "DSL204": Spec("cuda_fork", "Cannot re-initialize CUDA in forked subprocess (fork workers after CUDA init)", gpu=True),
    "DSL301": Spec("epoch_counts", "second epoch yields 0 samples (num_workers=0 or persistent workers)"),
    "DSL302": Spec("epoch_counts", "second epoch yields 0 (or fewer) samples"),
    "DSL303": Spec("duplicates", "every sample arrives once per worker"),
    "DSL304": Spec("exception_len", "TypeError: object of type ... has no len()"),
    "DSL401": Spec("integrity", "shared file offset across forked workers: wrong records; spawn: cannot pickle"),
    "DSL402": Spec("rng", "random draws duplicated across workers and repeated every epoch"),
    "DSL403": Spec("rng", "identical random streams every epoch"),
    "DSL501": Spec("exception", "ValueError at construction"),
    "DSL502": Spec("exception", "ValueError at construction"),
    "DSL503": Spec("exception", "ValueError at construction, or AssertionError at first iter()"),
    "DSL504": Spec("exception", "ValueError at construction"),
    "DSL505": Spec("distributed", "each rank's order is identical every epoch"),
    "DSL506": Spec("pickling", "PicklingError / Can't pickle local object under spawn/forkserver"),
    "DSL507": Spec("throughput", "samples/s with num_workers=0 against the best num_workers", exclusive=True),
    "DSL508": Spec("h2d", "host-to-device copy time, pageable vs pinned", gpu=True, exclusive=True),
    "DSL509": Spec("exception", "the exact ValueError/TypeError/AssertionError, some at first iter()"),
    "DSL510": Spec("worker_state", "persistent workers keep epoch 0's dataset state"),
    "DSL511": Spec("loop_cost", "workers re-forked every step; always the first batch", exclusive=True),
    "DSL601": Spec("worker_memory", "worker private memory grows toward a full copy of the index"),
}


def spec_for(code: str) -> Optional[Spec]:
    return TABLE.get(code)
