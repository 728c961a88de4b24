"""DistributedSampler orders on a real ``torch.distributed`` process group.

``distributed_orders`` starts ``world`` ranks with ``torch.multiprocessing``
(spawn), on loopback only (TCP store on 127.0.0.1, gloo bound to ``lo``), gloo on
CPU (nccl when every rank has its own GPU). Each rank imports the module under
test, builds its loader, runs its epoch loop (the module's own loop when it has
one, so its ``set_epoch`` calls, or their absence, are what is measured) and
records the index order of every ``DistributedSampler.__iter__``.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_for(world: int) -> str:
    from dslint.runtime.instrument import cuda_available

    if cuda_available() and torch.distributed.is_nccl_available() and torch.cuda.device_count() >= world:
        return "nccl"
    return "gloo"


def _rank_main(rank: int, world: int, port: int, source: Dict[str, Any], sides: Sequence[str], epochs: int,
               root: str, out_dir: str, backend: str) -> None:
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from dslint.runtime import fixtures
    from dslint.runtime.instrument import Session
    from dslint.runtime.recording import Measure

    join_group(rank, world, port, backend)
    results: Dict[str, Any] = {}
    try:
        for side in sides:
            module = fixtures.load_side(Path(source["dir"]), side)
            build = getattr(module, source.get("builder", "build"), None) or module.build
            side_root = Path(root) / f"{side}-rank{rank}"
            side_root.mkdir(parents=True, exist_ok=True)
            n_epochs = max(epochs, fixtures.epochs(module, epochs))
            with Session(Measure()) as session:
                target = build(side_root)
                if isinstance(target, DataLoader):
                    loader, dataset = target, target.dataset
                else:
                    dataset = target
                    loader = DataLoader(target, **fixtures.loader_kwargs(module, build))
                loop = fixtures.find_loop(module)
                bound = None
                if loop is not None:
                    bound = fixtures.bind_loop(loop, {"loader": loader, "dataset": dataset, "epochs": n_epochs,
                                                      "root": side_root, "sampler": loader.sampler})
                if bound is not None:
                    bound()
                else:
                    for _ in range(n_epochs):
                        for _batch in loader:
                            pass
            results[side] = {
                "orders": [o["indices"] for o in session.sampler_orders],
                "epoch_attr": [o["epoch"] for o in session.sampler_orders],
                "loop": loop.__name__ if bound is not None else None,
                "rank": dist.get_rank(),
                "world": dist.get_world_size(),
            }
            dist.barrier()
    finally:
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as handle:
            json.dump(results, handle)
        dist.destroy_process_group()


def distributed_orders(source: Dict[str, Any], sides: Sequence[str], *, epochs: int = 3, world: int = 2,
                       timeout: float = 90.0, root: Optional[str] = None) -> Dict[str, Any]:
    """{side: {"ranks": [{"orders": [[...], ...], "loop": name}, ...]}, "backend": ..., "world": ...}"""
    root = root or tempfile.mkdtemp(prefix="dslint-dist-data-")
    backend, ranks = spawn_ranks(_rank_main, (source, list(sides), epochs, root), world, timeout)
    out: Dict[str, Any] = {"backend": backend, "world": world}
    for side in sides:
        out[side] = {"ranks": [r.get(side, {}) for r in ranks]}
    return out


def summarize(side: Dict[str, Any]):
    """(text, symptom, data) for one side: does each rank's order repeat across epochs?"""
    from dslint.runtime.probes import Figure

    parts = []
    repeated_any = False
    data = {"ranks": []}
    for r in side["ranks"]:
        orders = [tuple(o) for o in r.get("orders", [])]
        distinct = len(set(orders))
        repeats = sum(1 for a, b in zip(orders, orders[1:]) if a == b)
        repeated_any = repeated_any or repeats > 0
        head = list(orders[0][:5]) if orders else []
        part = f"rank {r.get('rank')}: {distinct} distinct order{'s' if distinct != 1 else ''} in {len(orders)} epochs"
        if distinct == 1 and len(orders) > 1:
            part += f" ({head} ... every epoch)"
        parts.append(part)
        data["ranks"].append({"rank": r.get("rank"), "epochs": len(orders), "distinct": distinct, "repeats": repeats,
                              "first": head, "loop": r.get("loop")})
    loop = next((r.get("loop") for r in side["ranks"] if r.get("loop")), None)
    text = "; ".join(parts) + (f" (its loop `{loop}`)" if loop else " (no epoch loop in the module: iterated without set_epoch)")
    return Figure(text, repeated_any, data)


def spawn_ranks(target, args: tuple, world: int, timeout: float) -> Tuple[str, List[Dict[str, Any]]]:
    """Run ``target(rank, world, port, *args, out_dir, backend)`` in ``world`` spawned
    processes (a TCP store on loopback), kill them after ``timeout`` seconds, and return
    the backend and each rank's ``out_dir/rank<N>.json``."""
    import torch.multiprocessing as mp

    backend = backend_for(world)
    port = free_port()
    out_dir = tempfile.mkdtemp(prefix="dslint-dist-")
    context = mp.start_processes(target, args=(world, port, *args, out_dir, backend), nprocs=world, join=False,
                                 start_method="spawn")
    deadline = time.monotonic() + timeout
    try:
        while not context.join(timeout=0.5):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {world} ranks did not finish within {timeout:.0f} s")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join(5)
    ranks: List[Dict[str, Any]] = []
    for rank in range(world):
        with open(os.path.join(out_dir, f"rank{rank}.json")) as handle:
            ranks.append(json.load(handle))
    return backend, ranks


def join_group(rank: int, world: int, port: int, backend: str) -> None:
    """Join the process group as ``rank``: a TCP store on loopback, gloo bound to ``lo``
    where the machine has it, one GPU per rank for nccl."""
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if os.path.isdir("/sys/class/net/lo"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
