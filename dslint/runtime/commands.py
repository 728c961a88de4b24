"""CLI commands of the runtime companion, added to the ``dslint`` group by dslint/cli.py.

Importing this module must not import torch: the commands import it when they run.
"""

from __future__ import annotations

import os
import sys
import time

import click


def _default_paths() -> list:
    return ["fixtures"]


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", help="One row per rule, as a table or JSON.")
@click.option("--select", multiple=True, metavar="CODES", help="Only these rule codes or prefixes (e.g. DSL1, DSL505).")
@click.option("--timeout", type=click.FloatRange(min=1), default=60.0, show_default=True,
              help="Seconds each probe phase (one side of one fixture) may take before it is killed.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Rules measured at the same time [default: 2 on machines with 2+ CPUs]; timing probes always run alone.")
@click.option("--workers", type=click.IntRange(min=2), default=2, show_default=True, help="DataLoader workers per probe.")
@click.option("--write-evidence", is_flag=True, help="Write the rows to dslint/evidence.json for the rule pages "
              "(then regenerate them with `python -m dslint.docs`).")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
def verify(paths, output_format, select, timeout, jobs, workers, write_evidence, quiet) -> None:
    """Prove each rule at runtime: run every fixture pair (bad.py, good.py) under PATHS
    (default: fixtures/) through real multi-worker DataLoaders and measure its symptom.

    Exit 1 when a rule is not reproduced or its probe fails, 0 otherwise.
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        click.echo("dslint: error: `dslint verify` needs torch (pip install 'torch-dslint[runtime]')", err=True)
        sys.exit(2)
    from dslint.runtime import verify as driver

    paths = list(paths) or _default_paths()
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        click.echo(f"dslint: error: no such path: {', '.join(missing)}", err=True)
        sys.exit(2)
    codes = [c.strip().upper() for value in select for c in value.split(",") if c.strip()] or None
    parallel = jobs or (2 if (os.cpu_count() or 1) >= 2 else 1)
    show = not quiet and sys.stderr.isatty()

    def on_event(code: str, kind: str, text: str) -> None:
        if not show:
            return
        if kind == "done":
            click.echo(f"\r\033[K{code}: {text}", err=True)
        else:
            click.echo(f"\r\033[K{code} {text}"[:110], err=True, nl=False)

    start = time.monotonic()
    rows = driver.verify(paths, limit=timeout, parallel=parallel, select=codes, workers=workers, on_event=on_event)
    seconds = time.monotonic() - start
    if not rows:
        click.echo("dslint: warning: no fixture folders (<CODE>-<name>/bad.py + good.py) under the given path(s)", err=True)
    text = driver.render_json(rows) if output_format == "json" else driver.render_text(rows)
    click.echo(text, nl=False)
    if write_evidence:
        path = driver.write_evidence(rows)
        if not quiet:
            click.echo(f"wrote {path} (regenerate the rule pages: python -m dslint.docs)", err=True)
    if not quiet:
        click.echo(driver.summary(rows, seconds), err=True)
    sys.exit(1 if any(r.failed for r in rows) else 0)


COMMANDS = [verify]
