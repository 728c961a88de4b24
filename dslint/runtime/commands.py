"""CLI commands of the runtime companion, added to the ``dslint`` group by dslint/cli.py.

Importing this module must not import torch: the commands import it when they run.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

from typing import List, Optional, Tuple

import click

from dslint.runtime.common import BenchSettings, CommandError, ProbeSettings, cpu_count


def _default_paths() -> list:
    return ["fixtures"]


def selectors(select, ignore) -> Tuple[Optional[List[str]], List[str]]:
    """``--select`` and ``--ignore`` normalized as ``dslint check`` does (codes, prefixes, rule
    names, ALL); an unknown one is a one-line error and exit 2, as in ``dslint check``."""
    from dslint.config import ConfigError, normalize_selector

    def normalized(values, flag: str) -> List[str]:
        return [normalize_selector(v, flag) for value in values for v in value.split(",") if v.strip()]

    try:
        return normalized(select, "--select") or None, normalized(ignore, "--ignore")
    except ConfigError as exc:
        click.echo(f"dslint: error: {exc}", err=True)
        sys.exit(2)


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", help="One row per rule, as a table or JSON.")
@click.option("--select", multiple=True, metavar="CODES", help="Only these rules (codes, prefixes such as DSL1, names, or ALL).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Not these rules (codes, prefixes or names).")
@click.option("--timeout", type=click.FloatRange(min=1), default=60.0, show_default=True,
              help="Seconds each probe phase (one side of one fixture) may take before it is killed.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Rules measured at the same time [default: 2 on machines with 2+ CPUs]; timing probes always run alone.")
@click.option("--workers", type=click.IntRange(min=2), default=2, show_default=True, help="DataLoader workers per probe.")
@click.option("--write-evidence", is_flag=True, help="Write the rows to dslint/evidence.json for the rule pages "
              "(then regenerate them with `python -m dslint.docs`).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
def verify(paths, output_format, select, ignore, timeout, jobs, workers, write_evidence, quiet) -> None:
    """Prove each rule at runtime: run every fixture pair (bad.py, good.py) under PATHS
    (default: fixtures/) through real multi-worker DataLoaders and measure its symptom.

    Exit 1 when a rule is not reproduced or its probe fails, 0 otherwise.
    """
    codes, ignored = selectors(select, ignore)
    needs_torch("verify")
    from dslint.runtime import verify as driver

    paths = list(paths) or _default_paths()
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        click.echo(f"dslint: error: no such path: {', '.join(missing)}", err=True)
        sys.exit(2)
    parallel = jobs or (2 if (os.cpu_count() or 1) >= 2 else 1)
    show = not quiet and sys.stderr.isatty()

    phases: dict = {}

    def on_event(code: str, kind: str, text: str) -> None:
        if not show:
            return
        if kind == "done":
            click.echo(f"\r\033[K{code}: {text}", err=True)
        else:
            click.echo(f"\r\033[K{progress_line(code, kind, text, phases)}"[:110], err=True, nl=False)

    start = time.monotonic()
    rows = driver.verify(paths, limit=timeout, parallel=parallel, select=codes, ignore=ignored, workers=workers,
                         on_event=on_event)
    seconds = time.monotonic() - start
    if not rows:
        chosen = " selected by --select/--ignore" if codes or ignored else ""
        click.echo(f"dslint: warning: no fixture folders (<CODE>-<name>/bad.py + good.py){chosen} under the given path(s)",
                   err=True)
    text = driver.render_json(rows) if output_format == "json" else driver.render_text(rows)
    click.echo(text, nl=False)
    if write_evidence:
        path = driver.write_evidence(rows)
        if not quiet:
            click.echo(f"wrote {path} (regenerate the rule pages: python -m dslint.docs)", err=True)
    if not quiet:
        click.echo(driver.summary(rows, seconds), err=True)
    sys.exit(1 if any(r.failed for r in rows) else 0)


def progress_line(code: str, kind: str, text: str, phases: dict) -> str:
    """``verify``'s progress line for one rule: its phase (whose name starts with the code, e.g.
    ``DSL103 bad: fd growth``) and the latest progress within it, the code said once."""
    if kind == "phase":
        phases[code] = text if text.startswith(code) else f"{code} {text}"
        return phases[code]
    current = phases.get(code, code)
    return f"{current} ({text})" if text else current


# ------------------------------------------------------------------ probe / bench: a user's own dataset


def needs_torch(command: str) -> None:
    """Exit 2 with a one-line error when torch cannot be imported."""
    try:
        importlib.import_module("torch")
    except ImportError:
        click.echo(f"dslint: error: `dslint {command}` needs torch (pip install 'torch-dslint[runtime]')", err=True)
        sys.exit(2)


def run_driver(command: str, target: str, driver, on_event, make_settings, *, clear_line: bool = False):
    """``driver.run`` with the settings ``make_settings(tmp)`` makes around a fresh temporary folder
    (removed afterwards); exit 2 with one line when it raises CommandError."""
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix=f"dslint-{command}-")
    settings = make_settings(tmp)
    try:
        return driver.run(settings, on_event=on_event)
    except CommandError as exc:
        if clear_line:
            click.echo("\r\033[K", err=True, nl=False)
        click.echo(f"dslint: error: {command} {target}: {exc}", err=True)
        sys.exit(2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _target_spec(text: str):
    from dslint.runtime.target import TargetError, parse

    try:
        return parse(text)
    except TargetError as exc:
        click.echo(f"dslint: error: {exc}", err=True)
        sys.exit(2)


def _kwargs(text: str) -> dict:
    if not text:
        return {}
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        click.echo(f"dslint: error: --kwargs is not valid JSON: {exc}", err=True)
        sys.exit(2)
    if not isinstance(value, dict):
        click.echo("dslint: error: --kwargs must be a JSON object, e.g. '{\"root\": \"data/\"}'", err=True)
        sys.exit(2)
    return value


_TARGET_HELP = """TARGET is module:attr or path/to/file.py:attr, naming a Dataset or DataLoader instance,
a Dataset class, or a factory returning a Dataset or DataLoader (a required `root`
parameter gets a fresh temporary directory; other arguments come from --kwargs).
Importing TARGET runs its code (`dslint check` never does)."""


@click.command(help=f"""Run a dataset in real DataLoader worker processes and report the problems measured,
with the rule codes of `dslint check`, each marked `confirmed at runtime`.

{_TARGET_HELP}

Exit 1 when a problem is confirmed, 0 when none is, 2 when the target cannot be
imported, built or sampled, or a check crashes or exceeds --timeout.""")
@click.argument("target")
@click.option("--kwargs", "kwargs_json", default="", metavar="JSON", help="Keyword arguments for the class or factory, as a JSON object.")
@click.option("--workers", type=click.IntRange(min=2), default=2, show_default=True, help="DataLoader worker processes per check.")
@click.option("--epochs", type=click.IntRange(min=2), default=2, show_default=True, help="Epochs per check.")
@click.option("--samples", type=click.IntRange(min=8), default=512, show_default=True,
              help="At most this many samples per epoch (an iterable dataset: per worker).")
@click.option("--timeout", type=click.FloatRange(min=1), default=60.0, show_default=True,
              help="Seconds each check (and importing/building the target) may take before it is killed.")
@click.option("--select", multiple=True, metavar="CODES", help="Only the checks for these codes (codes, prefixes such as DSL3, names, or ALL).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Not these codes (codes, prefixes or names).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Checks run at the same time [default: 2 on machines with 2+ CPUs]; the per-sample profile always runs alone.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", help="A table and the findings, or JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
def probe(target, kwargs_json, workers, epochs, samples, timeout, select, ignore, jobs, output_format, quiet) -> None:
    codes, ignored = selectors(select, ignore)
    spec = _target_spec(target)
    kwargs = _kwargs(kwargs_json)
    from dslint.runtime.checks import CHECKS
    from dslint.runtime.probe_cmd import selected

    if not any(selected(check, codes, ignored) for check in CHECKS):
        measured = ", ".join(sorted({code for check in CHECKS for code in check.codes}))
        click.echo(f"dslint: error: --select/--ignore leave no check to run (probe confirms {measured})", err=True)
        sys.exit(2)
    needs_torch("probe")
    from dslint.runtime import probe_cmd as driver

    show = not quiet and sys.stderr.isatty()

    def on_event(name: str, kind: str, text: str) -> None:
        if not show:
            return
        if kind == "done":
            click.echo("\r\033[K", err=True, nl=False)
        else:
            click.echo(f"\r\033[K{name}: {text}"[:110], err=True, nl=False)

    report = run_driver("probe", target, driver, on_event, lambda tmp: ProbeSettings(
        spec, kwargs, workers=workers, epochs=epochs, samples=samples, timeout=timeout, tmp=tmp,
        parallel=jobs or (2 if cpu_count() >= 2 else 1), select=codes, ignore=ignored))
    text = driver.render_json(report) if output_format == "json" else driver.render_text(report)
    click.echo(text, nl=False)
    for row in report.errors:
        click.echo(f"dslint: error: probe {target}: {row.check}: {row.result[len('error: '):]}", err=True)
    sys.exit(report.exit_code)



@click.command(help=f"""Benchmark data loading alone: sweep num_workers, prefetch_factor,
persistent_workers (and pin_memory with --device cuda) over a dataset or loader and
print, per setting, ms/batch (median, p90), samples/s, first-batch latency and the
workers' peak memory, then the best setting and its speed-up over num_workers=0.

{_TARGET_HELP}

Exit 0 when the sweep finished, 2 when the target cannot be imported, built or
iterated, a setting exceeds --timeout, or an option cannot be honoured.""")
@click.argument("target")
@click.option("--kwargs", "kwargs_json", default="", metavar="JSON", help="Keyword arguments for the class or factory, as a JSON object.")
@click.option("--batches", type=click.IntRange(min=2), default=40, show_default=True, help="Batches per epoch (at most).")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Batch size [default: the loader's, LOADER's in the target's module, else 32].")
@click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True, help="Measured epochs per setting.")
@click.option("--warmup", type=click.IntRange(min=0), default=5, show_default=True, help="Batches fetched before measuring each setting.")
@click.option("--grid", multiple=True, metavar="KEY=V1,V2",
              help="Sweep exactly these values (repeatable; the product of all keys): num_workers, prefetch_factor, "
                   "persistent_workers, pin_memory. num_workers=0 is always measured as the baseline.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="cuda: copy every batch to the GPU (timed with CUDA events) and sweep pin_memory too.")
@click.option("--model-step", metavar="TARGET", default=None,
              help="A training step step(batch) (or a zero-argument factory returning one), same syntax as TARGET: "
                   "reports the share of each iteration spent waiting for data.")
@click.option("--timeout", type=click.FloatRange(min=1), default=120.0, show_default=True,
              help="Seconds each setting (and importing/building the target) may take before it is killed.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", help="A table and the best setting, or JSON.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True), default=None, metavar="FILE.png",
              help="Draw samples/s against num_workers into FILE.png (needs matplotlib: pip install 'torch-dslint[plot]').")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar on stderr.")
def bench(target, kwargs_json, batches, batch_size, epochs, warmup, grid, device, model_step, timeout, output_format,
          plot_path, quiet) -> None:
    spec = _target_spec(target)
    step_spec = _target_spec(model_step) if model_step else None
    kwargs = _kwargs(kwargs_json)
    from dslint.runtime import bench as driver

    try:
        parsed_grid = driver.parse_grid(list(grid)) if grid else None
    except CommandError as exc:
        click.echo(f"dslint: error: {exc}", err=True)
        sys.exit(2)
    if plot_path:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            click.echo("dslint: error: --plot needs matplotlib: pip install 'torch-dslint[plot]'", err=True)
            sys.exit(2)
    needs_torch("bench")
    show = not quiet and sys.stderr.isatty()

    def on_event(name: str, fraction: float, text: str) -> None:
        if not show:
            return
        if name == "done":
            click.echo("\r\033[K", err=True, nl=False)
            return
        width = 24
        filled = int(round(max(0.0, min(1.0, fraction)) * width))
        bar = "#" * filled + "-" * (width - filled)
        click.echo(f"\r\033[K[{bar}] {fraction:4.0%} {text}"[:120], err=True, nl=False)

    report = run_driver("bench", target, driver, on_event, lambda tmp: BenchSettings(
        spec, kwargs, batches=batches, batch_size=batch_size, epochs=epochs, warmup=warmup, grid=parsed_grid,
        device=device, model_step=step_spec, timeout=timeout, tmp=tmp, cpus=cpu_count()), clear_line=show)
    text = driver.render_json(report) if output_format == "json" else driver.render_text(report)
    click.echo(text, nl=False)
    for warning in report.warnings:
        click.echo(f"dslint: warning: {warning}", err=True)
    if plot_path:
        try:
            driver.plot(report, plot_path)
        except Exception as exc:  # noqa: BLE001 - a file we cannot write
            click.echo(f"dslint: error: --plot {plot_path}: {type(exc).__name__}: {exc}", err=True)
            sys.exit(2)
        if not quiet:
            click.echo(f"wrote {plot_path}", err=True)
    sys.exit(0)


COMMANDS = [verify, probe, bench]
