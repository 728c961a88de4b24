"""``dslint bench TARGET``: the data-loading-only benchmark of a user's dataset or loader.

Sweeps DataLoader settings and measures each one in its own isolated child process
(``dslint.runtime.isolate``: a time limit per setting, the process group -- workers
included -- killed afterwards), on a freshly built dataset, so a cache one setting
fills in the main process never speeds up the next. Per setting: a warm-up of a few
batches (not measured), then ``epochs`` epochs of ``batches`` batches each: the dataset is cut
to its first ``batches x batch_size`` samples (an iterable one: that many divided by the
workers, per worker), so every epoch ends the way a real one does.

Default sweep: ``num_workers`` over 0, 1, 2, 4, ... up to the CPU count (the other
settings as the loader has them), then, at the best ``num_workers``, the other
combinations of ``prefetch_factor`` (2, 4) and ``persistent_workers`` -- and
``pin_memory`` when batches go to CUDA (on a CPU-only run pinning changes nothing).
``--grid KEY=V1,V2`` replaces it by the full product of the given values.

Reported per setting: ms/batch (median and p90 over sliding windows of
``num_workers`` consecutive batches after each epoch's first: workers deliver in bursts), samples/s (the median epoch: samples over the epoch's wall time, start-up
included), first-batch latency (``iter()`` to the first batch, median over epochs),
peak memory of the worker processes (the sum of their USS, sampled every 0.2 s),
and with ``--model-step`` the share of each iteration spent waiting for data, with
``--device cuda`` the host-to-device copy per batch (CUDA events).

No torch at import: the parent imports it in ``run``.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from dslint.runtime.bench_measure import GRID_KEYS, bench_config, label
from dslint.runtime.common import (
    BenchSettings,
    CommandError,
    outcome_error,
    table,
    target_lines,
    target_notes,
    to_json,
)
from dslint.runtime.describe import describe_in_child, warm_parent
from dslint.runtime.isolate import Outcome, run_many
from dslint.runtime.target import TargetError, TargetSpec, load_attr, load_step, raised_message


# ====================================================================== grid


def parse_grid(values: List[str]) -> Dict[str, list]:
    """``["num_workers=0,2,4", "persistent_workers=true,false"]`` -> {key: [values]}."""
    grid: Dict[str, list] = {}
    for value in values:
        for item in value.replace(";", " ").split():
            if "=" not in item:
                raise CommandError(f"--grid expects KEY=V1,V2 with KEY one of {', '.join(GRID_KEYS)}; got {item!r}")
            key, raw = item.split("=", 1)
            key = key.strip().replace("-", "_")
            if key not in GRID_KEYS:
                raise CommandError(f"--grid: unknown setting {key!r} (one of {', '.join(GRID_KEYS)})")
            out = []
            for v in raw.split(","):
                v = v.strip()
                if not v:
                    continue
                if key in ("persistent_workers", "pin_memory"):
                    if v.lower() not in ("true", "false", "1", "0", "yes", "no"):
                        raise CommandError(f"--grid {key}: {v!r} is not true or false")
                    out.append(v.lower() in ("true", "1", "yes"))
                else:
                    try:
                        number = int(v)
                    except ValueError:
                        raise CommandError(f"--grid {key}: {v!r} is not an integer") from None
                    if number < (0 if key == "num_workers" else 1):
                        raise CommandError(f"--grid {key}: {number} is out of range")
                    out.append(number)
            if not out:
                raise CommandError(f"--grid {key}: no values")
            grid[key] = list(dict.fromkeys(grid.get(key, []) + out))
    return grid


def worker_counts(cpus: int) -> List[int]:
    """0, 1, 2, 4, 8, ... up to the CPU count (which is included)."""
    counts = [0, 1]
    n = 2
    while n <= cpus:
        counts.append(n)
        n *= 2
    if cpus > 1 and counts[-1] != cpus:
        counts.append(cpus)
    return counts


def normalize(config: Dict[str, Any]) -> Dict[str, Any]:
    """Worker-only settings mean nothing at num_workers=0: drop them (torch rejects some)."""
    out = dict(config)
    if out.get("num_workers") == 0:
        out.pop("prefetch_factor", None)
        out.pop("persistent_workers", None)
    return out


def grid_configs(grid: Dict[str, list]) -> List[Dict[str, Any]]:
    keys = [k for k in GRID_KEYS if k in grid]
    configs: List[Dict[str, Any]] = []
    for values in itertools.product(*(grid[k] for k in keys)):
        config = normalize(dict(zip(keys, values)))
        config.setdefault("num_workers", None)
        if config not in configs:
            configs.append(config)
    if not any(c.get("num_workers") == 0 for c in configs):
        base = {k: v for k, v in configs[0].items() if k == "pin_memory"} if configs else {}
        configs.insert(0, {"num_workers": 0, **base})
    return [{k: v for k, v in c.items() if v is not None} for c in configs]


# ====================================================================== parent side


@dataclass
class BenchReport:
    target: dict
    settings: dict
    rows: List[dict]
    #: None when the runs were too short to rank the settings (see ``warnings``)
    best: Optional[dict]
    baseline: dict
    seconds: float = 0.0
    warnings: List[str] = field(default_factory=list)

    @property
    def speedup(self) -> float:
        if self.best is None or not self.baseline.get("samples_per_s"):
            return 0.0
        return self.best["samples_per_s"] / self.baseline["samples_per_s"]


def run(settings: BenchSettings, *, on_event: Optional[Callable[[str, float, str], None]] = None) -> BenchReport:
    """Describe the target, then measure every setting, one at a time."""
    warm_parent()
    start = time.monotonic()
    if on_event:
        on_event("loading", 0.0, f"importing and building {settings.spec.text}")
    info = describe_in_child(settings)
    if settings.device == "cuda" and not info.get("cuda"):
        raise CommandError("--device cuda: no CUDA device here (torch.cuda.is_available() is False); "
                           "run without --device to measure loading alone")
    if settings.model_step is not None:
        check_step(settings)
    if settings.grid:
        plan = grid_configs(settings.grid)
        staged = False
    else:
        plan = [{"num_workers": w} for w in worker_counts(settings.cpus)]
        staged = True
    planned_total = len(plan) + (3 + (4 if settings.device == "cuda" else 0) if staged else 0)
    rows: List[dict] = []
    for config in plan:
        rows.append(measure(settings, config, len(rows), planned_total, on_event))
    if staged:
        for config in stage_two(rows, settings.device):
            rows.append(measure(settings, config, len(rows), planned_total, on_event))
    baseline = next((r for r in rows if r["config"].get("num_workers") == 0), rows[0])
    warnings = short_run_warnings(settings, rows)
    best = None if warnings else max(rows, key=lambda r: r["samples_per_s"])
    if on_event:
        on_event("done", 1.0, "")
    view = {"batches": settings.batches, "epochs": settings.epochs, "warmup": settings.warmup, "device": settings.device,
            "batch_size": rows[0]["settings"].get("batch_size") if rows else None, "grid": settings.grid,
            "model_step": settings.model_step.text if settings.model_step else None, "cpus": settings.cpus,
            "batch_size_source": batch_source(settings, info)}
    return BenchReport(info, view, rows, best, baseline, round(time.monotonic() - start, 2), warnings)


def short_run_warnings(settings: BenchSettings, rows: List[dict]) -> List[str]:
    """Why these rows cannot rank the settings: a dataset that ends before the warm-up does
    gives epochs that are all start-up (every row's figures stand, but no "best")."""
    short = [r for r in rows if r.get("warmup_batches", settings.warmup) < settings.warmup]
    if not short:
        return []
    got = min(r["warmup_batches"] for r in short)
    return [f"an epoch gives only {got} batch{'es' if got != 1 else ''}, fewer than the {settings.warmup}-batch warm-up: "
            f"the warm-up ended with the epoch, and epochs this short are mostly start-up, too short to rank the "
            f"settings, so no best setting is named (use more data, a smaller --batch-size or a shorter --warmup)"]


def measure(settings: BenchSettings, config: Dict[str, Any], index: int, planned_total: int,
            on_event: Optional[Callable[[str, float, str], None]]) -> dict:
    """The row of one setting, measured alone in an isolated child (the ``index``-th of about ``planned_total``)."""
    name = label(config)

    def event(kind: str, text: str) -> None:
        if on_event is None or kind != "progress":
            return
        try:
            got, total = (int(x) for x in text.split("/"))
        except ValueError:
            return
        on_event(name, (index + got / max(1, total)) / max(planned_total, index + 1), f"{index + 1}/{planned_total} {name}")

    if on_event:
        on_event(name, index / max(planned_total, index + 1), f"{index + 1}/{planned_total} {name}")
    outcomes: Dict[str, Outcome] = {}
    run_many([{"name": name, "fn": bench_config, "args": (settings, config),
               "limit": settings.timeout, "exclusive": True,
               "log_path": os.path.join(settings.tmp, f"config-{index}.log"), "on_event": event}],
             on_done=lambda job, outcome: outcomes.update({job["name"]: outcome}))
    outcome = outcomes[name]
    if not outcome.ok:
        raise CommandError(f"{name}: {outcome_error(outcome, settings.timeout)}")
    if "error" in outcome.value:
        raise CommandError(f"{name}: {outcome.value['error']}")
    row = outcome.value
    row["seconds"] = round(outcome.seconds, 2)
    return row


def stage_two(rows: List[dict], device: str) -> List[Dict[str, Any]]:
    """At the fastest num_workers of stage one, the other prefetch_factor / persistent_workers
    (and, for CUDA, pin_memory) combinations."""
    with_workers = [r for r in rows if r["config"].get("num_workers")]
    if not with_workers:
        return []
    top = max(with_workers, key=lambda r: r["samples_per_s"])
    workers = top["config"]["num_workers"]
    own = top["settings"]
    pins = [False, True] if device == "cuda" else [None]
    configs = []
    for prefetch, persistent, pin in itertools.product((2, 4), (False, True), pins):
        config = {"num_workers": workers, "prefetch_factor": prefetch, "persistent_workers": persistent}
        if pin is not None:
            config["pin_memory"] = pin
        if own.get("prefetch_factor") == prefetch and bool(own.get("persistent_workers")) == persistent and \
                (pin is None or bool(own.get("pin_memory")) == pin):
            continue  # that is the stage-1 row
        configs.append(config)
    return configs


def batch_source(settings: BenchSettings, info: dict) -> str:
    if settings.batch_size is not None:
        return "--batch-size"
    if info.get("returns") == "DataLoader":
        return "the loader's"
    if "batch_size=" in info.get("loader", "") and info.get("loader_source"):
        return info["loader_source"]
    return "dslint bench's default; --batch-size to change"


def check_step(settings: BenchSettings) -> None:
    """Import the model step in a child first: a clear error before any measurement."""

    def resolve(spec: TargetSpec) -> dict:
        try:
            _, text = load_step(spec, load_attr(spec))
        except TargetError as exc:
            return {"error": str(exc)}
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            return {"error": raised_message(f"--model-step {spec.text}", exc, spec)}
        return {"label": text}

    outcomes: Dict[str, Outcome] = {}
    run_many([{"name": "step", "fn": resolve, "args": (settings.model_step,), "limit": settings.timeout,
               "log_path": os.path.join(settings.tmp, "step.log")}], on_done=lambda job, o: outcomes.update(step=o))
    outcome = outcomes["step"]
    if not outcome.ok:
        raise CommandError(f"--model-step {settings.model_step.text}: {outcome_error(outcome, settings.timeout)}")
    if "error" in outcome.value:
        raise CommandError(outcome.value["error"])


# ====================================================================== output


def _num(value: Optional[float], digits: int = 1) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _setting(row: dict, key: str) -> str:
    if row["config"].get("num_workers", row["settings"].get("num_workers")) == 0 and key in ("prefetch_factor", "persistent_workers"):
        return "-"
    value = row["settings"].get(key)
    return "-" if value is None else str(value)


def _memory(row: dict) -> str:
    """The workers' peak memory: "-" without workers, "n/a" when no worker was seen to measure."""
    if not row["settings"].get("num_workers"):
        return "-"
    return _num(row["workers_mib"], 0) if row.get("workers_mib") else "n/a"


def render_text(report: BenchReport) -> str:
    wait = any("wait_fraction" in r for r in report.rows)
    h2d = any("h2d_ms" in r for r in report.rows)
    columns = ["num_workers", "prefetch_factor", "persistent_workers", "pin_memory", "ms/batch median", "ms/batch p90",
               "samples/s", "first batch ms", "workers' peak MiB"]
    if h2d:
        columns.append("H2D ms/batch")
    if wait:
        columns.append("waiting for data")
    rows = []
    for row in report.rows:
        cells = [str(row["settings"].get("num_workers")), _setting(row, "prefetch_factor"), _setting(row, "persistent_workers"),
                 _setting(row, "pin_memory"), _num(row["ms_median"]), _num(row["ms_p90"]), _num(row["samples_per_s"], 0),
                 _num(row["first_batch_ms"], 0), _memory(row)]
        if h2d:
            cells.append(_num(row.get("h2d_ms"), 2))
        if wait:
            cells.append(f"{row['wait_fraction']:.0%}" if "wait_fraction" in row else "-")
        rows.append(cells)
    lines = [f"dslint bench {report.target['target']}", *header(report), "", *table(columns, rows), "",
             recommendation(report)]
    return "\n".join(lines) + "\n"


def header(report: BenchReport) -> List[str]:
    """The target (as ``dslint probe`` describes it), then how it was measured."""
    s = report.settings
    bs = s.get("batch_size")
    measured = (f"measured: batch_size={bs} ({s['batch_size_source']}); a {s['warmup']}-batch warm-up, then {s['epochs']} "
                f"epoch{'s' if s['epochs'] != 1 else ''} of at most {s['batches']} batches per setting, each setting in a fresh process; "
                f"{'batches copied to CUDA; ' if s['device'] == 'cuda' else ''}"
                f"{'model step ' + s['model_step'] + '; ' if s.get('model_step') else ''}"
                f"{s['cpus']} CPUs")
    return target_lines(report.target) + [measured] + target_notes(report.target)


def recommendation(report: BenchReport) -> str:
    best, base = report.best, report.baseline
    if best is None:
        return f"best: none named: {report.warnings[0].split(': the warm-up')[0]}, too short to rank the settings"
    text = f"best: {best['label']}: {_num(best['samples_per_s'], 0)} samples/s"
    if best is base:
        text += " (no setting with workers was faster than num_workers=0 here)"
    else:
        text += f", {report.speedup:.2f}x num_workers=0 ({_num(base['samples_per_s'], 0)} samples/s)"
    if "wait_fraction" in best:
        text += f"; the model step waits for data {best['wait_fraction']:.0%} of the time"
        if best is not base and "wait_fraction" in base:
            text += f" (num_workers=0: {base['wait_fraction']:.0%})"
    return text


def render_json(report: BenchReport) -> str:
    data = {
        "target": report.target,
        "settings": report.settings,
        "rows": report.rows,
        "best": {"config": report.best["config"], "label": report.best["label"],
                 "samples_per_s": report.best["samples_per_s"], "speedup": round(report.speedup, 3)}
        if report.best is not None else None,
        "baseline": {"config": report.baseline["config"], "samples_per_s": report.baseline["samples_per_s"]},
        "recommendation": recommendation(report),
        "warnings": report.warnings,
        "seconds": report.seconds,
    }
    return to_json(data)


def plot(report: BenchReport, path: str) -> None:
    """samples/s against num_workers, one line per combination of the other settings."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: Dict[str, List[tuple]] = {}
    base = report.baseline
    with_workers = [r for r in report.rows if r["config"].get("num_workers") != 0]
    varied = [k for k in ("prefetch_factor", "persistent_workers", "pin_memory")
              if len({r["settings"].get(k) for r in with_workers}) > 1]
    for row in with_workers:
        name = ", ".join(f"{k}={row['settings'].get(k)}" for k in varied) or "samples/s"
        series.setdefault(name, []).append((row["settings"]["num_workers"], row["samples_per_s"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in sorted(series.items()):
        points = sorted(set(points))
        if base:
            points = [(0, base["samples_per_s"])] + points
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    if not series and base:
        ax.plot([0], [base["samples_per_s"]], marker="o", label="num_workers=0")
    best = report.best
    if best is not None:
        ax.plot([best["settings"]["num_workers"]], [best["samples_per_s"]], marker="*", markersize=16, color="gold",
                markeredgecolor="black", linestyle="none", label=f"best ({report.speedup:.2f}x num_workers=0)")
    ax.set_xticks(sorted({r["settings"]["num_workers"] for r in report.rows}))
    ax.set_xlabel("num_workers")
    ax.set_ylabel("samples/s")
    ax.set_title(f"dslint bench {report.target['target']}", fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
