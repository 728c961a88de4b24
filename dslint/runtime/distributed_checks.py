"""Runtime evidence of the DSL7xx rules on a real ``torch.distributed`` process group.

``run_ranks`` starts ``world`` ranks with ``torch.multiprocessing`` (spawn: each rank is
a fresh interpreter, as under ``torchrun``, so each seeds its own global RNG), on
loopback (``distributed.free_port``, gloo bound to ``lo``; nccl when every rank has its
own GPU: ``distributed.backend_for``). Every rank imports the fixture module, runs the
probe's measurement for bad.py and then good.py, and writes what it saw to a JSON file;
the parent compares the ranks. The measurements (symptoms, not code shapes):

- ``dist_split`` (DSL701): ``build(root)`` returns ``(train, validation)``; each rank
  hashes the samples of both; counted: samples that are validation on one rank (or in
  one part) and training on another;
- ``dist_overlap`` (DSL702): one epoch over the loader ``build(root)`` returns (samples
  recorded, by a hash of their content, in the process that produced them); counted:
  samples that more than one rank saw;
- ``dist_stream`` (DSL703): the same over an iterable stream (with its workers);
  counted: samples that more than one rank received;
- ``dist_padding`` (DSL704): the module's evaluation loop (``LOOP``, else one epoch)
  over the loader; counted: samples evaluated, distinct, evaluated twice, and the
  loop's gathered result.
"""

from __future__ import annotations

import json
import os
import traceback
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, Sequence

import torch

from dslint.runtime import fixtures
from dslint.runtime.common import shorten
from dslint.runtime.distributed import join_group, spawn_ranks
from dslint.runtime.fixture_case import Case, SideError, judge
from dslint.runtime.isolate import phase
from dslint.runtime.probes import Figure

WORLD = 2


# ------------------------------------------------------------------ inside a rank


def _identity(sample) -> str:
    from dslint.runtime.snapshots import digest

    return digest(sample)


def _measure_split(module, build, root: Path) -> dict:
    parts = build(root)
    if not (isinstance(parts, (tuple, list)) and len(parts) == 2):
        raise TypeError("a dist_split fixture's build(root) returns (train, validation)")
    train, val = parts
    return {"train": [_identity(train[i]) for i in range(len(train))],
            "val": [_identity(val[i]) for i in range(len(val))]}


def _measure_epoch(module, build, root: Path, *, run_loop: bool) -> dict:
    """Samples produced in one pass (the module's own loop when ``run_loop`` and it has one)."""
    from torch.utils.data import DataLoader

    from dslint.runtime.instrument import Session
    from dslint.runtime.recording import Measure

    result = None
    with Session(Measure(hash=True), cuda=False) as session:
        target = build(root)
        loader = target if isinstance(target, DataLoader) else DataLoader(target, **fixtures.loader_kwargs(module, build))
        loop = fixtures.find_loop(module) if run_loop else None
        bound = fixtures.bind_loop(loop, {"loader": loader, "dataset": loader.dataset, "epochs": 1, "root": root}) if loop else None
        if bound is not None:
            result = bound()
        else:
            for _batch in loader:
                pass
    records = [r for it in session.iterations for r in it.records]
    errors = [r["err"] for r in records if "err" in r]
    if errors:
        raise RuntimeError(errors[0])
    seen = [r.get("h", "") for r in records]  # by content: a Subset's indices are its own
    return {"seen": seen, "result": result if isinstance(result, (int, float)) else None,
            "loop": loop.__name__ if bound is not None else None}


MEASURES: Dict[str, Callable[..., dict]] = {
    "dist_split": _measure_split,
    "dist_overlap": lambda module, build, root: _measure_epoch(module, build, root, run_loop=False),
    "dist_stream": lambda module, build, root: _measure_epoch(module, build, root, run_loop=False),
    "dist_padding": lambda module, build, root: _measure_epoch(module, build, root, run_loop=True),
}


def rank_main(rank: int, world: int, port: int, spec: Dict[str, Any], out_dir: str, backend: str) -> None:
    import multiprocessing

    import torch.distributed as dist

    # A spawned child inherits "spawn" as its default start method; a rank that torchrun
    # launches has the platform's (fork on Linux), which its DataLoader workers then use.
    if "fork" in multiprocessing.get_all_start_methods():
        multiprocessing.set_start_method("fork", force=True)

    join_group(rank, world, port, backend)
    results: Dict[str, Any] = {}
    try:
        for side in spec["sides"]:
            module = fixtures.load_side(Path(spec["dir"]), side)
            build = getattr(module, spec.get("builder", "build"), None) or module.build
            root = Path(spec["root"]) / f"{side}-rank{rank}"
            root.mkdir(parents=True, exist_ok=True)
            try:
                results[side] = MEASURES[spec["probe"]](module, build, root)
            except Exception as exc:  # noqa: BLE001 - reported as the side's error
                results[side] = {"error": shorten(f"{type(exc).__name__}: {exc}", 300), "tb": traceback.format_exc()[-2000:]}
            dist.barrier()
    finally:
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as handle:
            json.dump(results, handle)
        dist.destroy_process_group()


# ------------------------------------------------------------------ the parent


def run_ranks(spec: Dict[str, Any], *, world: int = WORLD, timeout: float = 90.0) -> Dict[str, Any]:
    """{side: [each rank's measurement], "backend": ..., "world": ...} (spawned ranks, loopback only)."""
    backend, ranks = spawn_ranks(rank_main, (spec,), world, timeout)
    out: Dict[str, Any] = {"backend": backend, "world": world}
    for side in spec["sides"]:
        out[side] = [r.get(side, {}) for r in ranks]
    return out


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def split_figure(ranks: Sequence[dict]) -> Figure:
    """Samples held out for validation on one rank (or in one part) and trained on elsewhere."""
    trains = [set(r["train"]) for r in ranks]
    vals = [set(r["val"]) for r in ranks]
    leaked = set()
    for i, val in enumerate(vals):
        for j, train in enumerate(trains):
            leaked |= val & train
    same = len({tuple(sorted(v)) for v in vals}) == 1
    per_pair = len(vals[0] & trains[1]) if len(ranks) > 1 else 0
    text = (f"{_plural(len(leaked), 'sample')} of {len(vals[0] | trains[0])} are validation on one rank and training on "
            f"another (rank 0 validates on {len(vals[0])}, {per_pair} of them are rank 1's training samples)"
            if not same or leaked else f"every rank holds out the same {len(vals[0])} samples; 0 of them are trained on")
    return Figure(text, bool(leaked), {"leaked": len(leaked), "val": len(vals[0]), "same_split": same})


def overlap_figure(ranks: Sequence[dict], what: str) -> Figure:
    """Samples that more than one rank saw in the epoch."""
    sets = [set(r["seen"]) for r in ranks]
    counts = Counter(s for seen in sets for s in seen)
    shared = sum(1 for n in counts.values() if n > 1)
    per_rank = ", ".join(f"rank {i}: {len(r['seen'])}" for i, r in enumerate(ranks))
    text = f"{_plural(shared, 'sample')} of {len(counts)} {what} by more than one rank in one epoch ({per_rank})"
    return Figure(text, shared > 0, {"shared": shared, "distinct": len(counts), "per_rank": [len(r["seen"]) for r in ranks]})


def padding_figure(ranks: Sequence[dict]) -> Figure:
    """Samples evaluated across the ranks, distinct, twice; and the loop's gathered result."""
    total = sum(len(r["seen"]) for r in ranks)
    counts = Counter(s for r in ranks for s in r["seen"])
    twice = sum(n - 1 for n in counts.values() if n > 1)
    text = f"{_plural(total, 'sample')} evaluated for {len(counts)} distinct, {twice} of them twice"
    gathered = ranks[0].get("result")
    if gathered is not None:
        text += f"; the gathered count is {gathered:g} (its loop `{ranks[0].get('loop')}`)"
    return Figure(text, twice > 0, {"evaluated": total, "distinct": len(counts), "twice": twice, "gathered": gathered})


FIGURES: Dict[str, Callable[[Sequence[dict]], Figure]] = {
    "dist_split": split_figure,
    "dist_overlap": lambda ranks: overlap_figure(ranks, "were seen"),
    "dist_stream": lambda ranks: overlap_figure(ranks, "were received"),
    "dist_padding": padding_figure,
}
WHAT = {
    "dist_split": "validation samples trained on by another rank",
    "dist_overlap": "samples iterated by several ranks",
    "dist_stream": "stream samples received by several ranks",
    "dist_padding": "padded duplicates in the gathered evaluation",
}


def run_case(case: Case, probe: str) -> dict:
    """One fixture case measured on ``WORLD`` spawned ranks: bad.py and good.py in the same group."""
    phase(f"{case.label}: {WORLD} ranks", case.limit + 30)
    spec = {"dir": str(case.pair.directory), "builder": case.name, "sides": ["bad", "good"], "probe": probe,
            "root": str(case.new_root("ranks"))}
    try:
        measured = run_ranks(spec, timeout=case.limit + 25)
    except Exception as exc:  # noqa: BLE001
        raise SideError("ranks", shorten(f"{type(exc).__name__}: {exc}", 400), traceback.format_exc()) from None
    figs = {}
    for side in ("bad", "good"):
        failed = next((r for r in measured[side] if "error" in r or not r), None)
        if failed is not None:
            raise SideError(side, failed.get("error", "a rank wrote no result"), failed.get("tb", ""))
        figs[side] = FIGURES[probe](measured[side])
    out = judge(figs, WHAT[probe])
    where = f"{'GPU' if case.cuda else 'CPU'}, torch {torch.__version__.split('+')[0]}"
    out["where"] = f"{where}, {measured['world']} ranks ({measured['backend']})"
    return out


RUNNERS: Dict[str, Callable[[Case], dict]] = {
    probe: (lambda case, p=probe: run_case(case, p)) for probe in FIGURES
}
