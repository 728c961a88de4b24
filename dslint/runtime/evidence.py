"""Run one rule's fixture pairs through its probe and judge bad against good.

Runs inside an isolated child (``dslint.runtime.isolate``): imports torch and the
fixtures. ``run_rule`` returns plain data (the row and its cases) to the parent.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch
from torch.utils.data import DataLoader

from dslint.runtime import fixtures, probes
from dslint.runtime.isolate import describe, phase
from dslint.runtime.probes import Figure, _fmt, _short
from dslint.rules.base import all_rules

CONFIRMED = "confirmed"
NOT_REPRODUCED = "not reproduced"


class SideError(Exception):
    def __init__(self, side: str, message: str, tb: str = ""):
        super().__init__(f"{side}: {message}")
        self.side = side
        self.message = message
        self.tb = tb


@dataclass
class Case:
    code: str
    probe: str
    pair: fixtures.Pair
    name: str  # builder name
    bad_module: Any
    good_module: Any
    bad_builder: Callable
    good_builder: Callable
    tmp: str
    limit: float
    workers: int
    cuda: bool

    @property
    def label(self) -> str:
        parts = [self.code]
        if self.pair.folder_label or self.pair.form:
            parts.append(self.pair.label)
        if self.name != "build":
            parts.append(self.name)
        return " ".join(parts)

    def epochs(self) -> int:
        return max(fixtures.epochs(self.bad_module), fixtures.epochs(self.good_module))

    def module(self, side: str):
        return self.bad_module if side == "bad" else self.good_module

    def builder(self, side: str) -> Callable:
        return self.bad_builder if side == "bad" else self.good_builder

    def loader_kwargs(self, side: str) -> dict:
        return fixtures.loader_kwargs(self.module(side), self.builder(side))

    _counter = itertools.count()

    def new_root(self, side: str) -> Path:
        root = Path(self.tmp) / f"{self.code}-{side}-{next(Case._counter)}"
        root.mkdir(parents=True, exist_ok=True)
        return root

    def make(self, side: str) -> Callable[[], Any]:
        builder = self.builder(side)
        return lambda: builder(self.new_root(side))

    def measure(self, side: str, what: str, fn: Callable[[], Figure]) -> Figure:
        phase(f"{self.label} {side}: {what}", self.limit)
        try:
            return fn()
        except SideError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported as the row's error
            raise SideError(side, _short(describe(exc), 300), traceback.format_exc()) from None


def _result(bad: Figure, good: Figure, verdict: str, note: str = "", bad_text: Optional[str] = None,
            good_text: Optional[str] = None) -> dict:
    return {"bad": bad_text or bad.text, "good": good_text or good.text, "verdict": verdict, "note": note,
            "data": {"bad": bad.data, "good": good.data}}


def _pair_verdict(bad_symptom: bool, good_symptom: bool, what: str) -> tuple:
    if bad_symptom and not good_symptom:
        return CONFIRMED, ""
    if not bad_symptom:
        return NOT_REPRODUCED, f"bad.py does not show {what}"
    return NOT_REPRODUCED, f"good.py shows {what} too"


# ------------------------------------------------------------------ runners


def run_resource_warnings(case: Case) -> dict:
    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "descriptors and ResourceWarnings",
                                  lambda s=side: probes.fd_growth(case.make(s), case.loader_kwargs(s), workers=case.workers,
                                                                  epochs=case.epochs()))
    bad, good = figs["bad"], figs["good"]
    verdict, note = _pair_verdict(bad.data.get("resource_warnings", 0) > 0,
                                  good.data.get("resource_warnings", 0) > 0 or good.data.get("slope", 0) >= 0.5,
                                  "ResourceWarnings (an unclosed file)")
    return _result(bad, good, verdict, note, _warning_text(bad), _warning_text(good))


def _warning_text(fig: Figure) -> str:
    d = fig.data
    if not d.get("samples"):
        return fig.text
    text = (f"{d['resource_warnings']} ResourceWarning{'s' if d['resource_warnings'] != 1 else ''} in "
            f"{d['num_workers']} workers over {d['samples']} samples")
    if d.get("resource_warning"):
        text += f" ({_short(probes.strip_dirs(d['resource_warning']), 80)})"
    return text + f"; fds {d['slope']:+.2f}/sample"


def run_fd_growth(case: Case) -> dict:
    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "descriptors per sample",
                                  lambda s=side: probes.fd_growth(case.make(s), case.loader_kwargs(s), workers=case.workers,
                                                                  epochs=case.epochs()))

    def leaks(f: Figure) -> bool:
        return f.data.get("slope", 0) >= 0.5 or f.data.get("files_at_start", 0) >= 16

    verdict, note = _pair_verdict(leaks(figs["bad"]), leaks(figs["good"]), "descriptor growth")
    return _result(figs["bad"], figs["good"], verdict, note)


def run_time_ratio(case: Case) -> dict:
    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "per-sample time",
                                  lambda s=side: probes.sample_time(case.make(s), case.loader_kwargs(s), workers=case.workers,
                                                                    epochs=case.epochs()))
    bad, good = figs["bad"], figs["good"]
    r = probes.ratio(bad, good)
    verdict = CONFIRMED if r >= 3 else NOT_REPRODUCED
    note = "" if verdict == CONFIRMED else f"bad is only {r:.2f}x slower per sample than good"
    out = _result(bad, good, verdict, note, bad_text=f"{bad.text}; {_fmt(r)}x good per sample")
    out["data"]["ratio"] = r
    return out


def run_epoch_counts(case: Case) -> dict:
    figs = {}
    epochs = max(3, case.epochs())
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "samples per epoch",
                                  lambda s=side: probes.epoch_counts(case.make(s), case.loader_kwargs(s), epochs=epochs))
    verdict, note = _pair_verdict(figs["bad"].symptom, figs["good"].symptom, "a short or empty later epoch")
    return _result(figs["bad"], figs["good"], verdict, note)


def run_duplicates(case: Case) -> dict:
    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "duplicates across workers",
                                  lambda s=side: probes.duplicates(case.make(s), case.loader_kwargs(s), workers=case.workers,
                                                                   epochs=case.epochs()))
    verdict, note = _pair_verdict(figs["bad"].symptom, figs["good"].symptom, "samples duplicated across workers")
    return _result(figs["bad"], figs["good"], verdict, note)


def run_integrity(case: Case) -> dict:
    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "integrity under forked workers",
                                  lambda s=side: probes.integrity(case.make(s), case.loader_kwargs(s), workers=case.workers))
    verdict, note = _pair_verdict(figs["bad"].symptom, figs["good"].symptom, "wrong records or an unpicklable handle")
    return _result(figs["bad"], figs["good"], verdict, note)


def run_rng(case: Case) -> dict:
    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "RNG streams across workers and epochs",
                                  lambda s=side: probes.rng_streams(case.make(s), case.loader_kwargs(s), workers=case.workers,
                                                                    epochs=case.epochs()))
    verdict, note = _pair_verdict(figs["bad"].symptom, figs["good"].symptom, "shared or repeated random streams")
    return _result(figs["bad"], figs["good"], verdict, note)


def _matches(actual: str, expected: str) -> bool:
    a = " ".join(actual.split())
    e = " ".join(str(expected).split())
    return a.startswith(e) or e in a


def _run_exception(case: Case, call_len: bool) -> dict:
    expected = fixtures.expect_error(case.bad_module, case.bad_builder)
    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "exception at construction / first iter()",
                                  lambda s=side: probes.exception_at(case.make(s), case.loader_kwargs(s), epochs=1,
                                                                     call_len=call_len))
    bad, good = figs["bad"], figs["good"]
    if not bad.symptom:
        verdict, note = NOT_REPRODUCED, "bad.py raised nothing"
    elif expected and not _matches(bad.data["exception"], expected):
        verdict, note = NOT_REPRODUCED, f"expected {expected!r}, got {bad.data['exception']!r}"
    elif good.symptom:
        verdict, note = NOT_REPRODUCED, f"good.py raised {good.data['exception']!r}"
    else:
        verdict, note = CONFIRMED, ""
    out = _result(bad, good, verdict, note)
    out["data"]["expected"] = expected
    return out


def run_exception(case: Case) -> dict:
    return _run_exception(case, call_len=False)


def run_exception_len(case: Case) -> dict:
    return _run_exception(case, call_len=True)


def run_pickling(case: Case) -> dict:
    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "pickling under spawn",
                                  lambda s=side: probes.pickling(case.make(s), case.loader_kwargs(s), workers=case.workers))
    verdict, note = _pair_verdict(figs["bad"].symptom, figs["good"].symptom, "a pickling failure under spawn")
    return _result(figs["bad"], figs["good"], verdict, note)


def _best(rounds: List[Figure]) -> Figure:
    """Merge repeated throughput figures: each configuration keeps its best rate."""
    best: Dict[str, dict] = {}
    for fig in rounds:
        for row in fig.data["rows"]:
            if row["config"] not in best or row["rate"] > best[row["config"]]["rate"]:
                best[row["config"]] = row
    rows = list(best.values())
    own = next(r for r in rows if r["own"])
    top = max(rows, key=lambda r: r["rate"])
    speedup = top["rate"] / own["rate"] if own["rate"] else 0.0
    text = f"{_fmt(own['rate'])} samples/s ({own['config']})"
    if top is not own:
        text += f"; {_fmt(top['rate'])} samples/s with {top['config']} ({speedup:.2f}x)"
    return Figure(text, speedup >= 1.3, {"rows": rows, "rate": own["rate"], "best": top["config"], "speedup": speedup,
                                         "rounds": len(rounds)})


def run_throughput(case: Case) -> dict:
    """Bad at its own num_workers and at ``workers``, good at its own, each keeping its best epoch
    (a shared machine's neighbours slow some epochs down); a second round when the first is
    inconclusive, since a busy neighbour can eat the cores the workers need."""
    epochs = max(5, case.epochs())
    rounds: Dict[str, List[Figure]] = {"bad": [], "good": []}
    loads = []
    for r in range(2):
        rounds["bad"].append(case.measure("bad", f"throughput (round {r + 1})", lambda: probes.throughput(
            case.make("bad"), case.loader_kwargs("bad"), worker_counts=(case.workers,), epochs=epochs)))
        rounds["good"].append(case.measure("good", f"throughput (round {r + 1})", lambda: probes.throughput(
            case.make("good"), case.loader_kwargs("good"), worker_counts=(), epochs=epochs)))
        loads.append(os.getloadavg()[0])
        bad, good = _best(rounds["bad"]), _best(rounds["good"])
        speed = good.data["rate"] / bad.data["rate"] if bad.data.get("rate") else 0.0
        best = max(r["rate"] for r in bad.data["rows"])
        # the catalog's symptom: the bad loader's own setting is >= 1.3x slower than the best
        # num_workers on the same data; the fix's own setting is not (it reaches the best within 1.3x)
        good_slow = good.data["rate"] * 1.3 < best
        ok = bad.symptom and not good_slow
        if ok:
            break
    verdict = CONFIRMED if ok else NOT_REPRODUCED
    note = "" if ok else (f"workers speed the bad dataset up only {bad.data['speedup']:.2f}x" if not bad.symptom
                          else f"good's own setting is {best / good.data['rate']:.2f}x slower than the best")
    if not ok:
        note += f" (load average {max(loads):.1f} on {os.cpu_count()} CPUs during the measurement)"
    out = _result(bad, good, verdict, note, good_text=f"{good.text}; {speed:.2f}x bad")
    out["data"]["speedup"] = speed
    out["data"]["load"] = loads
    return out


def _fixture_loop(case: Case, side: str, *, required: bool, epochs: int, steps: int = 20):
    """A zero-argument callable running the module's own training loop over a fresh build (or None)."""
    module = case.module(side)
    loop = fixtures.find_loop(module)
    if loop is None:
        if required:
            raise SideError(side, f"{side}.py defines no training loop function ({', '.join(fixtures.LOOP_NAMES[:4])}, ...)")
        return None, None

    def run():
        root = case.new_root(side)
        target = case.builder(side)(root)
        if isinstance(target, DataLoader):
            loader, dataset = target, target.dataset
        else:
            dataset, loader = target, None
        values = {"dataset": getattr(dataset, "inner", dataset), "epochs": epochs, "steps": steps, "root": root}
        roles = fixtures.loop_roles(loop)
        if "loader" in roles:
            values["loader"] = loader or DataLoader(dataset, **case.loader_kwargs(side))
        bound = fixtures.bind_loop(loop, values)
        if bound is None:
            raise SideError(side, f"cannot call {loop.__name__}{_signature(loop)}: verify fills loader, dataset, epochs, steps, root")
        return bound()

    return run, loop.__name__


def _signature(fn) -> str:
    import inspect

    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def run_loop_cost(case: Case) -> dict:
    figs = {}
    for side in ("bad", "good"):
        run, _ = _fixture_loop(case, side, required=True, epochs=case.epochs())
        figs[side] = case.measure(side, "the training loop", lambda r=run: probes.loop_cost(r))
    bad, good = figs["bad"], figs["good"]
    r = bad.data["seconds"] / good.data["seconds"] if good.data.get("seconds") else float("inf")
    ok = bad.symptom and not good.symptom and r >= 1.5
    verdict = CONFIRMED if ok else NOT_REPRODUCED
    note = "" if ok else ("bad.py does not re-create workers per step" if not bad.symptom else
                          "good.py re-creates workers too" if good.symptom else f"bad is only {r:.2f}x slower")
    out = _result(bad, good, verdict, note, bad_text=f"{bad.text} ({_fmt(r)}x good)")
    out["data"]["ratio"] = r
    return out


def run_worker_state(case: Case) -> dict:
    figs = {}
    epochs = max(3, case.epochs())
    for side in ("bad", "good"):
        module = case.module(side)
        loop = fixtures.find_loop(module)

        def fixture_loop(dataset, loader, n, _loop=loop, _side=side):
            bound = fixtures.bind_loop(_loop, {"dataset": dataset, "loader": loader, "epochs": n})
            if bound is None:
                raise SideError(_side, f"cannot call {_loop.__name__}{_signature(_loop)}")
            return bound()

        figs[side] = case.measure(side, "dataset state seen by workers",
                                  lambda s=side, lp=(fixture_loop if loop else None): probes.worker_state(
                                      case.make(s), case.loader_kwargs(s), epochs=epochs, loop=lp, workers=case.workers))
    verdict, note = _pair_verdict(figs["bad"].symptom, figs["good"].symptom, "workers with stale dataset state")
    return _result(figs["bad"], figs["good"], verdict, note)


def run_worker_memory(case: Case) -> dict:
    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "worker private memory",
                                  lambda s=side: probes.worker_memory(case.make(s), case.loader_kwargs(s), workers=case.workers,
                                                                      epochs=case.epochs()))
    verdict, note = _pair_verdict(figs["bad"].symptom, figs["good"].symptom, "worker memory growth toward a copy")
    return _result(figs["bad"], figs["good"], verdict, note)


def run_distributed(case: Case) -> dict:
    from dslint.runtime import distributed

    epochs = max(3, case.epochs())
    phase(f"{case.label}: 2 ranks", case.limit + 30)
    try:
        result = distributed.distributed_orders({"dir": str(case.pair.directory), "builder": case.name}, ("bad", "good"),
                                                epochs=epochs, world=2, timeout=case.limit + 25, root=str(case.new_root("ranks")))
    except Exception as exc:  # noqa: BLE001
        raise SideError("ranks", _short(f"{type(exc).__name__}: {exc}", 400), traceback.format_exc()) from None
    bad = distributed.summarize(result["bad"])
    good = distributed.summarize(result["good"])
    for fig in (bad, good):
        if any(r["epochs"] < 2 for r in fig.data["ranks"]):
            raise SideError("bad" if fig is bad else "good", f"the sampler was iterated fewer than 2 times: {fig.text}")
    verdict, note = _pair_verdict(bad.symptom, good.symptom, "an order repeated across epochs")
    out = _result(bad, good, verdict, note)
    out["where"] = f"{'GPU' if case.cuda else 'CPU'}, torch {torch_version()}, {result['world']} ranks ({result['backend']})"
    return out


def run_cuda_fork(case: Case) -> dict:
    from dslint.runtime import gpu

    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "CUDA in fork workers",
                                  lambda s=side: gpu.cuda_fork(case.make(s), case.loader_kwargs(s), workers=case.workers))
    verdict, note = _pair_verdict(figs["bad"].symptom, figs["good"].symptom, "the CUDA re-initialisation error")
    return _result(figs["bad"], figs["good"], verdict, note)


def run_h2d(case: Case) -> dict:
    from dslint.runtime import gpu

    figs = {}
    for side in ("bad", "good"):
        figs[side] = case.measure(side, "host-to-device copies",
                                  lambda s=side: gpu.h2d_copy(case.make(s), case.loader_kwargs(s), epochs=case.epochs()))
    bad, good = figs["bad"], figs["good"]
    r = bad.data.get("median_ms", 0) / good.data["median_ms"] if good.data.get("median_ms") else 0.0
    ok = bad.symptom and not good.symptom and r >= 1.2
    verdict = CONFIRMED if ok else NOT_REPRODUCED
    note = "" if ok else f"pageable/pinned copy time ratio {r:.2f}"
    out = _result(bad, good, verdict, note, bad_text=f"{bad.text}; {r:.2f}x pinned")
    out["data"]["ratio"] = r
    return out


RUNNERS: Dict[str, Callable[[Case], dict]] = {
    "resource_warnings": run_resource_warnings,
    "fd_growth": run_fd_growth,
    "time_ratio": run_time_ratio,
    "epoch_counts": run_epoch_counts,
    "duplicates": run_duplicates,
    "integrity": run_integrity,
    "rng": run_rng,
    "exception": run_exception,
    "exception_len": run_exception_len,
    "pickling": run_pickling,
    "throughput": run_throughput,
    "loop_cost": run_loop_cost,
    "worker_state": run_worker_state,
    "worker_memory": run_worker_memory,
    "distributed": run_distributed,
    "cuda_fork": run_cuda_fork,
    "h2d": run_h2d,
}


def torch_version() -> str:
    return torch.__version__.split("+")[0]


def where(cuda: bool, workers: int) -> str:
    if cuda:
        from dslint.runtime.gpu import device_name

        return f"GPU ({device_name()}), torch {torch_version()}, {workers} workers"
    return f"CPU, torch {torch_version()}, {workers} workers"


# ------------------------------------------------------------------ one rule


def run_rule(code: str, pairs: List[dict], settings: dict) -> dict:
    """All cases of one rule (every pair, every builder); plain data for the parent."""
    spec = all_rules()[code].symptom
    runner = RUNNERS[spec.probe]
    cuda = bool(settings.get("cuda"))
    workers = int(settings.get("workers", 2))
    tmp = tempfile.mkdtemp(prefix=f"{code}-", dir=settings.get("tmp"))
    cases: List[dict] = []
    for info in pairs:
        pair = fixtures.Pair(info["code"], info["name"], Path(info["directory"]), info["form"], info.get("folder_label", ""))
        phase(f"{code} {pair.label}: import", settings.get("limit", 30))
        try:
            bad_module = fixtures.load_side(pair.directory, "bad")
            good_module = fixtures.load_side(pair.directory, "good")
            # the two modules must not shadow each other's helpers: load both before building
        except Exception as exc:  # noqa: BLE001
            cases.append({"form": pair.form, "case": "import", "bad": "", "good": "",
                          "verdict": f"error: cannot import the fixture: {_short(f'{type(exc).__name__}: {exc}', 200)}",
                          "note": traceback.format_exc()[-2000:]})
            continue
        bad_builders = fixtures.builders(bad_module)
        good_builders = fixtures.builders(good_module)
        if not bad_builders:
            cases.append({"form": pair.form, "case": "build", "bad": "", "good": "",
                          "verdict": "error: bad.py defines no build(root)"})
            continue
        for name, bad_builder in bad_builders.items():
            good_builder = good_builders.get(name) or good_builders.get("build")
            if good_builder is None:
                cases.append({"form": pair.form, "case": name, "bad": "", "good": "",
                              "verdict": f"error: good.py defines neither {name} nor build"})
                continue
            case = Case(code, spec.probe, pair, name, bad_module, good_module, bad_builder, good_builder, tmp,
                        float(settings.get("limit", 30)), workers, cuda)
            try:
                result = runner(case)
            except SideError as exc:
                result = {"bad": "", "good": "", "verdict": f"error: {exc.side}: {exc.message}", "note": exc.tb[-3000:]}
            result.update(form=pair.form, case=name, label=case.label)
            result.setdefault("where", where(cuda, workers))
            cases.append(result)
        for side in ("bad", "good"):
            import sys

            sys.modules.pop(side, None)
        import sys

        if str(pair.directory.resolve()) in sys.path:
            sys.path.remove(str(pair.directory.resolve()))
    return {"code": code, "cases": cases}
