"""``dslint verify``'s evidence: one rule's fixture pairs run through its probe, bad judged against good.

``RUNNERS`` is the one registry keyed by probe name: a rule class's ``symptom.probe``
(``dslint.rules.base.Symptom``) names its runner here. Runs inside an isolated child
(``dslint.runtime.isolate``): imports torch and the fixtures. ``run_rule`` returns plain
data (the rule's cases) to the parent.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Callable, Dict, List

import torch

from dslint.runtime import distributed_checks, fixtures, probes, worker_probes
from dslint.runtime.common import CONFIRMED, NOT_REPRODUCED, fmt_number, shorten
from dslint.runtime.fixture_case import Case, SideError, call_signature, judge, pair_verdict, result
from dslint.runtime.isolate import phase
from dslint.runtime.probes import Figure
from dslint.rules.base import all_rules

# ------------------------------------------------------------------ runners


def run_resource_warnings(case: Case) -> dict:
    figs = case.both("descriptors and ResourceWarnings", lambda s: probes.fd_growth(
        case.make(s), case.loader_kwargs(s), workers=case.workers, epochs=case.epochs()))
    bad, good = figs["bad"], figs["good"]
    verdict, note = pair_verdict(bad.data.get("resource_warnings", 0) > 0,
                                 good.data.get("resource_warnings", 0) > 0 or good.data.get("slope", 0) >= 0.5,
                                 "ResourceWarnings (an unclosed file)")
    return result(bad, good, verdict, note, warning_text(bad), warning_text(good))


def warning_text(fig: Figure) -> str:
    """fd_growth's figure told as its ResourceWarnings first."""
    d = fig.data
    if not d.get("samples"):
        return fig.text
    text = (f"{d['resource_warnings']} ResourceWarning{'s' if d['resource_warnings'] != 1 else ''} in "
            f"{d['num_workers']} workers over {d['samples']} samples")
    if d.get("resource_warning"):
        text += f" ({shorten(probes.strip_dirs(d['resource_warning']), 80)})"
    return text + f"; fds {d['slope']:+.2f}/sample"


def run_fd_growth(case: Case) -> dict:
    figs = case.both("descriptors per sample", lambda s: probes.fd_growth(
        case.make(s), case.loader_kwargs(s), workers=case.workers, epochs=case.epochs()))

    def leaks(f: Figure) -> bool:
        return f.data.get("slope", 0) >= 0.5 or f.data.get("files_at_start", 0) >= 16

    verdict, note = pair_verdict(leaks(figs["bad"]), leaks(figs["good"]), "descriptor growth")
    return result(figs["bad"], figs["good"], verdict, note)


def run_time_ratio(case: Case) -> dict:
    figs = case.both("per-sample time", lambda s: probes.sample_time(
        case.make(s), case.loader_kwargs(s), workers=case.workers, epochs=case.epochs()))
    bad, good = figs["bad"], figs["good"]
    r = probes.ratio(bad, good)
    verdict = CONFIRMED if r >= 3 else NOT_REPRODUCED
    note = "" if verdict == CONFIRMED else f"bad is only {r:.2f}x slower per sample than good"
    out = result(bad, good, verdict, note, bad_text=f"{bad.text}; {fmt_number(r)}x good per sample")
    out["data"]["ratio"] = r
    return out


def run_epoch_counts(case: Case) -> dict:
    epochs = max(3, case.epochs())
    figs = case.both("samples per epoch", lambda s: probes.epoch_counts(case.make(s), case.loader_kwargs(s), epochs=epochs))
    return judge(figs, "a short or empty later epoch")


def run_duplicates(case: Case) -> dict:
    figs = case.both("duplicates across workers", lambda s: probes.duplicates(
        case.make(s), case.loader_kwargs(s), workers=case.workers, epochs=case.epochs()))
    return judge(figs, "samples duplicated across workers")


def run_integrity(case: Case) -> dict:
    figs = case.both("integrity under forked workers", lambda s: worker_probes.integrity(
        case.make(s), case.loader_kwargs(s), workers=case.workers))
    return judge(figs, "wrong records or an unpicklable handle")


def run_rng(case: Case) -> dict:
    figs = case.both("RNG streams across workers and epochs", lambda s: worker_probes.rng_streams(
        case.make(s), case.loader_kwargs(s), workers=case.workers, epochs=case.epochs()))
    return judge(figs, "shared or repeated random streams")


def matches(actual: str, expected: str) -> bool:
    """Whether an exception's ``Type: message`` is the expected one (a prefix, or contained)."""
    a = " ".join(actual.split())
    e = " ".join(str(expected).split())
    return a.startswith(e) or e in a


def exception_runner(call_len: bool) -> Callable[[Case], dict]:
    """The runner of an exception raised at construction or first ``iter()`` (and ``len()`` with ``call_len``)."""

    def run(case: Case) -> dict:
        expected = fixtures.expect_error(case.bad_module, case.bad_builder)
        figs = case.both("exception at construction / first iter()", lambda s: probes.exception_at(
            case.make(s), case.loader_kwargs(s), epochs=1, call_len=call_len))
        bad, good = figs["bad"], figs["good"]
        if not bad.symptom:
            verdict, note = NOT_REPRODUCED, "bad.py raised nothing"
        elif expected and not matches(bad.data["exception"], expected):
            verdict, note = NOT_REPRODUCED, f"expected {expected!r}, got {bad.data['exception']!r}"
        elif good.symptom:
            verdict, note = NOT_REPRODUCED, f"good.py raised {good.data['exception']!r}"
        else:
            verdict, note = CONFIRMED, ""
        out = result(bad, good, verdict, note)
        out["data"]["expected"] = expected
        return out

    return run


def run_pickling(case: Case) -> dict:
    figs = case.both("pickling under spawn", lambda s: worker_probes.pickling(
        case.make(s), case.loader_kwargs(s), workers=case.workers))
    return judge(figs, "a pickling failure under spawn")


def best_rounds(rounds: List[Figure]) -> Figure:
    """Merge repeated throughput figures: each configuration keeps its best rate."""
    best: Dict[str, dict] = {}
    for fig in rounds:
        for row in fig.data["rows"]:
            if row["config"] not in best or row["rate"] > best[row["config"]]["rate"]:
                best[row["config"]] = row
    rows = list(best.values())
    own, top, speedup = probes.own_and_best(rows)
    text = f"{fmt_number(own['rate'])} samples/s ({own['config']})"
    if top is not own:
        text += f"; {fmt_number(top['rate'])} samples/s with {top['config']} ({speedup:.2f}x)"
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
        bad, good = best_rounds(rounds["bad"]), best_rounds(rounds["good"])
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
    out = result(bad, good, verdict, note, good_text=f"{good.text}; {speed:.2f}x bad")
    out["data"]["speedup"] = speed
    out["data"]["load"] = loads
    return out


def run_loop_cost(case: Case) -> dict:
    def probe(side: str) -> Figure:
        run, _ = case.training_loop(side, required=True, epochs=case.epochs())
        return probes.loop_cost(run)

    figs = case.both("the training loop", probe)
    bad, good = figs["bad"], figs["good"]
    r = bad.data["seconds"] / good.data["seconds"] if good.data.get("seconds") else float("inf")
    ok = bad.symptom and not good.symptom and r >= 1.5
    verdict = CONFIRMED if ok else NOT_REPRODUCED
    note = "" if ok else ("bad.py does not re-create workers per step" if not bad.symptom else
                          "good.py re-creates workers too" if good.symptom else f"bad is only {r:.2f}x slower")
    out = result(bad, good, verdict, note, bad_text=f"{bad.text} ({fmt_number(r)}x good)")
    out["data"]["ratio"] = r
    return out


def run_worker_state(case: Case) -> dict:
    epochs = max(3, case.epochs())

    def probe(side: str) -> Figure:
        loop = fixtures.find_loop(case.module(side))

        def fixture_loop(dataset, loader, n):
            bound = fixtures.bind_loop(loop, {"dataset": dataset, "loader": loader, "epochs": n})
            if bound is None:
                raise SideError(side, f"cannot call {loop.__name__}{call_signature(loop)}")
            return bound()

        return worker_probes.worker_state(case.make(side), case.loader_kwargs(side), epochs=epochs,
                                          loop=fixture_loop if loop else None, workers=case.workers)

    return judge(case.both("dataset state seen by workers", probe), "workers with stale dataset state")


def run_worker_memory(case: Case) -> dict:
    figs = case.both("worker private memory", lambda s: worker_probes.worker_memory(
        case.make(s), case.loader_kwargs(s), workers=case.workers, epochs=case.epochs()))
    return judge(figs, "worker memory growth toward a copy")


def run_distributed(case: Case) -> dict:
    from dslint.runtime import distributed

    epochs = max(3, case.epochs())
    phase(f"{case.label}: 2 ranks", case.limit + 30)
    try:
        orders = distributed.distributed_orders({"dir": str(case.pair.directory), "builder": case.name}, ("bad", "good"),
                                                epochs=epochs, world=2, timeout=case.limit + 25, root=str(case.new_root("ranks")))
    except Exception as exc:  # noqa: BLE001
        raise SideError("ranks", shorten(f"{type(exc).__name__}: {exc}", 400), traceback.format_exc()) from None
    bad = distributed.summarize(orders["bad"])
    good = distributed.summarize(orders["good"])
    for fig in (bad, good):
        if any(r["epochs"] < 2 for r in fig.data["ranks"]):
            raise SideError("bad" if fig is bad else "good", f"the sampler was iterated fewer than 2 times: {fig.text}")
    out = judge({"bad": bad, "good": good}, "an order repeated across epochs")
    out["where"] = f"{'GPU' if case.cuda else 'CPU'}, torch {torch_version()}, {orders['world']} ranks ({orders['backend']})"
    return out


def run_cuda_fork(case: Case) -> dict:
    from dslint.runtime import gpu

    figs = case.both("CUDA in fork workers", lambda s: gpu.cuda_fork(case.make(s), case.loader_kwargs(s), workers=case.workers))
    return judge(figs, "the CUDA re-initialisation error")


def run_h2d(case: Case) -> dict:
    from dslint.runtime import gpu

    figs = case.both("host-to-device copies", lambda s: gpu.h2d_copy(case.make(s), case.loader_kwargs(s), epochs=case.epochs()))
    bad, good = figs["bad"], figs["good"]
    r = bad.data.get("median_ms", 0) / good.data["median_ms"] if good.data.get("median_ms") else 0.0
    ok = bad.symptom and not good.symptom and r >= 1.2
    verdict = CONFIRMED if ok else NOT_REPRODUCED
    note = "" if ok else f"pageable/pinned copy time ratio {r:.2f}"
    out = result(bad, good, verdict, note, bad_text=f"{bad.text}; {r:.2f}x pinned")
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
    "exception": exception_runner(call_len=False),
    "exception_len": exception_runner(call_len=True),
    "pickling": run_pickling,
    "throughput": run_throughput,
    "loop_cost": run_loop_cost,
    "worker_state": run_worker_state,
    "worker_memory": run_worker_memory,
    "distributed": run_distributed,
    "cuda_fork": run_cuda_fork,
    "h2d": run_h2d,
    **distributed_checks.RUNNERS,  # dist_split, dist_overlap, dist_stream, dist_padding (DSL701-704)
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
                          "verdict": f"error: cannot import the fixture: {shorten(f'{type(exc).__name__}: {exc}', 200)}",
                          "note": traceback.format_exc()[-2000:]})
            continue
        bad_builders = fixtures.builders(bad_module)
        if not bad_builders:
            cases.append({"form": pair.form, "case": "build", "bad": "", "good": "",
                          "verdict": "error: bad.py defines no build(root)"})
            continue
        cases += pair_cases(code, spec.probe, runner, pair, (bad_module, good_module), settings, tmp)
        for side in ("bad", "good"):
            sys.modules.pop(side, None)
        if str(pair.directory.resolve()) in sys.path:
            sys.path.remove(str(pair.directory.resolve()))
    return {"code": code, "cases": cases}


def pair_cases(code: str, probe: str, runner: Callable[[Case], dict], pair: fixtures.Pair, modules: tuple, settings: dict, tmp: str) -> List[dict]:
    """One case per builder of bad.py (``build``, ``build_<case>``), each against good.py's
    builder of the same name (or its ``build``), measured by ``runner``."""
    bad_module, good_module = modules
    cuda = bool(settings.get("cuda"))
    workers = int(settings.get("workers", 2))
    good_builders = fixtures.builders(good_module)
    cases: List[dict] = []
    for name, bad_builder in fixtures.builders(bad_module).items():
        good_builder = good_builders.get(name) or good_builders.get("build")
        if good_builder is None:
            cases.append({"form": pair.form, "case": name, "bad": "", "good": "",
                          "verdict": f"error: good.py defines neither {name} nor build"})
            continue
        case = Case(code, probe, pair, name, bad_module, good_module, bad_builder, good_builder, tmp,
                    float(settings.get("limit", 30)), workers, cuda)
        try:
            measured = runner(case)
        except SideError as exc:
            measured = {"bad": "", "good": "", "verdict": f"error: {exc.side}: {exc.message}", "note": exc.tb[-3000:]}
        measured.update(form=pair.form, case=name, label=case.label)
        measured.setdefault("where", where(cuda, workers))
        cases.append(measured)
    return cases
