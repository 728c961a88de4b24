"""The ``dslint`` command line. Thin: parse flags, call the API, print, exit.

Exit codes (as ruff): 0 no findings, 1 findings, 2 usage/config/internal error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import click

from dslint import __version__
from dslint.formats import FORMATS

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _fail(message: str) -> None:
    click.echo(f"dslint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _codes(values) -> Optional[List[str]]:
    """Comma- or repeat-separated selectors."""
    if not values:
        return None
    out: List[str] = []
    for value in values:
        out.extend(v for v in value.split(",") if v.strip())
    return out


class _Group(click.Group):
    """The ``dslint`` group. The runtime companion's commands (verify, probe, bench) are
    added when one of them runs or the list is printed: ``check`` never imports them."""

    def _with_runtime(self) -> None:
        if "verify" not in self.commands:
            from dslint.runtime.commands import COMMANDS

            for command in COMMANDS:
                self.add_command(command)

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands:
            self._with_runtime()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx):
        self._with_runtime()
        return super().list_commands(ctx)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="dslint")
def main() -> None:
    """Find the bugs that make PyTorch data pipelines leak, stall, repeat or crash."""


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--select", multiple=True, metavar="CODES", help="Rules to enable (codes, prefixes such as DSL5, names, or ALL); replaces the configured `select`.")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Rules to enable on top of `select`.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rules to disable.")
@click.option("--per-file-ignores", "per_file_ignores", multiple=True, metavar="PATTERN:CODES", help="Ignore codes in files matching a pattern, e.g. 'tests/**:DSL1'.")
@click.option("--preview/--no-preview", default=None, help="Enable preview rules, and the preview forms of stable rules (each page's Preview section).")
@click.option("--fixable", multiple=True, metavar="CODES", help="Rules whose fixes --fix may apply [default: ALL]; replaces the configured `fixable`.")
@click.option("--unfixable", multiple=True, metavar="CODES", help="Rules whose fixes --fix must not apply.")
@click.option("--extend-fixable", multiple=True, metavar="CODES", help="Rules whose fixes --fix may apply, on top of `fixable`.")
@click.option("--output-format", type=click.Choice(list(FORMATS)), default=None, envvar="DSLINT_OUTPUT_FORMAT", help="How to print findings [default: full]. json, json-lines, github, gitlab and sarif print the report alone on stdout (summaries go to stderr).")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), help="Write findings to this file instead of stdout.")
@click.option("--statistics", is_flag=True, help="Print a count per rule instead of the findings (with --output-format full, concise or json).")
@click.option("--show-settings", is_flag=True, help="Print the resolved settings and exit 0; check nothing.")
@click.option("--show-files", is_flag=True, help="Print the files that would be checked and exit 0; check nothing.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (2 still means an error).")
@click.option("--exclude", multiple=True, metavar="PATTERN", help="Replace the default excludes with these patterns.")
@click.option("--extend-exclude", multiple=True, metavar="PATTERN", help="Exclude these patterns too.")
@click.option("--force-exclude/--no-force-exclude", default=None, help="Apply excludes to paths passed explicitly too (for pre-commit).")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None, help="Skip files ignored by .gitignore [default: respect].")
@click.option("--stdin-filename", metavar="PATH", help="The name to report for source read from stdin (`-`).")
@click.option("--config", "config", multiple=True, metavar="FILE | KEY=VALUE", help="A configuration file to use instead of searching for one (a dslint.toml, or a TOML file with [tool.dslint]), or a `KEY = VALUE` override of one [tool.dslint] key, e.g. --config \"ignore = ['DSL507']\" (repeatable).")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--no-cache", is_flag=True, envvar="DSLINT_NO_CACHE", help="Neither read nor write the cache.")
@click.option("--cache-dir", metavar="DIR", help="Where the cache lives [env: DSLINT_CACHE_DIR; default: .dslint_cache].")
@click.option("--no-prefilter", is_flag=True, help="Parse every file, not only those that can contain dataset code.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes [default: CPU count; small inputs run in-process].")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("-v", "--verbose", is_flag=True, help="Also print what was parsed, cached and how long each phase took.")
@click.option("--color/--no-color", default=None, help="Colour the full output [default: when stdout is a terminal].")
@click.option("--fix", is_flag=True, help="Apply safe fixes, then report what remains.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply (or count) fixes marked unsafe.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing (exit 1 if there are any).")
@click.option("--fix-only", is_flag=True, help="Apply fixes and report nothing else.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when fixes were applied, even if nothing remains.")
@click.option("--baseline", "baseline_file", metavar="FILE", help="Report only findings not recorded in this baseline [config: baseline].")
@click.option("--write-baseline", metavar="FILE", help="Record the current findings in FILE (for --baseline) and exit 0.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every reported line (merging with existing noqa comments).")
def check(**options) -> None:
    """Check PATHS (default: .) for Dataset/DataLoader bugs. Never imports or runs them."""
    from dslint import api

    from dslint import show

    flags = CheckFlags(**options)
    conflict = show.conflict(flags)
    if conflict:
        _fail(conflict)
    paths = list(flags.paths) or (["-"] if flags.stdin_filename else ["."])
    settings = _settings(flags, paths)
    for warning in dict.fromkeys(settings.warnings):
        click.echo(f"dslint: warning: {warning}", err=True)
    if flags.show_settings or flags.show_files:
        sys.exit(show.run(flags, settings, paths))
    if flags.statistics and not (flags.fix_only or flags.diff):
        from dslint.formats.statistics import SUPPORTED

        if settings.output_format not in SUPPORTED:
            _fail(f"--statistics prints with --output-format {', '.join(SUPPORTED[:-1])} or {SUPPORTED[-1]}, not {settings.output_format}")

    run_options = api.CheckOptions(stdin_filename=flags.stdin_filename, use_cache=not flags.no_cache,
                                   use_prefilter=not flags.no_prefilter, jobs=flags.jobs)
    if flags.fix or flags.diff or flags.fix_only:
        _run_fix(paths, settings, run_options, flags)
        return
    outcome = api.check(paths, settings, run_options)
    outcome.diagnostics = settings.without_unfixable(outcome.diagnostics)
    result = outcome.result
    if flags.verbose:
        _verbose(result)
    if flags.write_baseline:
        _write_baseline(flags.write_baseline, outcome, settings, flags.quiet)
        return
    if flags.add_noqa:
        _add_noqa(outcome, flags.quiet)
        return
    if settings.baseline:
        _apply_baseline(outcome, settings)
    diagnostics = outcome.diagnostics

    env = _report(diagnostics, settings, flags, flags.unsafe_fixes)
    for error in result.internal_errors:
        click.echo(f"dslint: error: {error}", err=True)
    if not flags.quiet:
        _summary(outcome, env)
    if result.internal_errors:
        sys.exit(EXIT_ERROR)
    if diagnostics and not flags.exit_zero:
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


class CheckFlags:
    """Every option of ``dslint check``, as click parsed it (one object instead of 32
    parameters). Settings that configuration can also give are turned into the one
    ``Settings`` object by ``_settings``; the rest steer the command itself. Read-only; not a
    frozen dataclass (its 32 fields' generated methods cost ~3% of a rerun from the cache)."""

    def __init__(self, **options) -> None:
        if set(options) != set(self.__annotations__):
            raise TypeError(f"CheckFlags: expected {sorted(self.__annotations__)}, got {sorted(options)}")
        self.__dict__.update(options)

    def __setattr__(self, name, value) -> None:
        raise AttributeError(f"CheckFlags is read-only (cannot set {name})")

    paths: Tuple[str, ...]
    select: Tuple[str, ...]
    extend_select: Tuple[str, ...]
    ignore: Tuple[str, ...]
    per_file_ignores: Tuple[str, ...]
    preview: Optional[bool]
    fixable: Tuple[str, ...]
    unfixable: Tuple[str, ...]
    extend_fixable: Tuple[str, ...]
    output_format: Optional[str]
    output_file: Optional[str]
    statistics: bool
    show_settings: bool
    show_files: bool
    exit_zero: bool
    exclude: Tuple[str, ...]
    extend_exclude: Tuple[str, ...]
    force_exclude: Optional[bool]
    respect_gitignore: Optional[bool]
    stdin_filename: Optional[str]
    config: Tuple[str, ...]
    isolated: bool
    no_cache: bool
    cache_dir: Optional[str]
    no_prefilter: bool
    jobs: Optional[int]
    quiet: bool
    verbose: bool
    color: Optional[bool]
    fix: bool
    unsafe_fixes: bool
    diff: bool
    fix_only: bool
    exit_non_zero_on_fix: bool
    baseline_file: Optional[str]
    write_baseline: Optional[str]
    add_noqa: bool


def _settings(flags: CheckFlags, paths: List[str]):
    """The configuration file (unless ``--isolated``), then the ``--config KEY = VALUE``
    overrides, then the flags; exits 2 with the message on a configuration error."""
    from dslint.config import ConfigError, build_settings, normalize_selector, split_config_args, validate_table

    try:
        config_file, config_overrides = split_config_args(flags.config)
        if config_file is not None and flags.isolated:
            raise ConfigError(f"--config {config_file} cannot be used with --isolated (which ignores every configuration file)")
        overrides = {}
        raw = {
            "select": _codes(flags.select),
            "extend-select": _codes(flags.extend_select),
            "ignore": _codes(flags.ignore),
            "fixable": _codes(flags.fixable),
            "unfixable": _codes(flags.unfixable),
            "extend-fixable": _codes(flags.extend_fixable),
            "exclude": list(flags.exclude) or None,
            "extend-exclude": list(flags.extend_exclude) or None,
            "force-exclude": flags.force_exclude,
            "respect-gitignore": flags.respect_gitignore,
            "output-format": flags.output_format,
            "preview": flags.preview,
            "cache-dir": flags.cache_dir,
            "baseline": os.path.abspath(flags.baseline_file) if flags.baseline_file else None,
        }
        for key, value in raw.items():
            if value is None:
                continue
            if key in ("select", "extend-select", "ignore", "fixable", "unfixable", "extend-fixable"):
                value = [normalize_selector(v, f"--{key}") for v in value]
            overrides[key] = value
        if flags.per_file_ignores:
            table = {}
            for item in flags.per_file_ignores:
                pattern, sep, codes = item.rpartition(":")
                if not sep or not pattern:
                    raise ConfigError(f"--per-file-ignores: expected PATTERN:CODES, got {item!r}")
                table[pattern] = [c for c in codes.split(",") if c]
            overrides["per-file-ignores"] = validate_table({"per-file-ignores": table}, "--per-file-ignores")["per-file-ignores"]
        settings = build_settings(paths, config=config_file, isolated=flags.isolated, overrides=overrides,
                                  config_overrides=config_overrides)
        settings.enabled_rules()  # an unknown selector in the configuration is an error now, not later
    except ConfigError as exc:
        _fail(str(exc))
    return settings


def _verbose(result) -> None:
    phases = ", ".join(f"{name} {seconds:.3f}s" for name, seconds in result.timings.items())
    total = sum(result.timings.values())
    click.echo(
        f"dslint: {result.files} files, {result.selected} analysed ({result.parsed} parsed, {result.cached} from "
        f"cache), {result.processes} process{'es' if result.processes != 1 else ''}, {total:.3f}s ({phases})",
        err=True,
    )


def _baseline_path(settings) -> str:
    path = Path(settings.baseline)
    return str(path if path.is_absolute() or settings.config_file is None else Path(settings.root) / path)


def _apply_baseline(outcome, settings) -> None:
    from dslint import baseline

    try:
        entries = baseline.load(_baseline_path(settings))
    except baseline.BaselineError as exc:
        _fail(str(exc))
    before = len(outcome.diagnostics)
    outcome.diagnostics = baseline.filter_new(outcome.diagnostics, outcome.result.texts, str(settings.root), entries)
    outcome.baselined = before - len(outcome.diagnostics)


def _write_baseline(path, outcome, settings, quiet) -> None:
    from dslint import baseline

    for error in outcome.result.internal_errors:
        click.echo(f"dslint: error: {error}", err=True)
    if outcome.result.internal_errors:
        sys.exit(EXIT_ERROR)
    count = baseline.write(path, outcome.diagnostics, outcome.result.texts, str(settings.root))
    if not quiet:
        click.echo(f"Wrote {count} finding{'s' if count != 1 else ''} to the baseline {path}.", err=True)
    sys.exit(EXIT_OK)


def _add_noqa(outcome, quiet) -> None:
    from dslint.fixes import add_noqa
    from dslint.source import encode

    rows: dict = {}
    for d in outcome.diagnostics:
        if d.code in ("DSL000", "DSL002"):
            continue
        rows.setdefault(d.path, {}).setdefault(d.noqa_row or d.start[0], set()).add(d.code)
    added = skipped = 0
    for path, codes_by_row in rows.items():
        text = outcome.result.texts[path]
        new_text, changed, missed = add_noqa(text, codes_by_row)
        skipped += missed
        if changed:
            encoding, bom = outcome.result.encodings[path]
            with open(path, "wb") as handle:
                handle.write(encode(new_text, encoding, bom))
            added += changed
    if not quiet:
        click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.", err=True)
        if skipped:
            click.echo(f"dslint: warning: {skipped} line(s) could not take a comment (inside a multi-line string or a backslash continuation)", err=True)
    sys.exit(EXIT_ERROR if outcome.result.internal_errors else EXIT_OK)


def _report(diagnostics, settings, flags: CheckFlags, unsafe_fixes: bool):
    from dslint import formats
    from dslint.rules.base import all_rules

    fmt = settings.output_format
    output_file = flags.output_file
    use_color = flags.color if flags.color is not None else (output_file is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ)
    env = formats.Env(
        root=str(settings.root),
        color=bool(use_color and fmt == "full"),
        rules={r.code: r for r in all_rules().values()},
        unsafe_fixes=unsafe_fixes,
        docs_url=settings.docs_url,
    )
    if flags.statistics:
        from dslint.formats import statistics

        text = statistics.render(diagnostics, env, fmt)
    elif any(getattr(d, "in_cells", None) is not None for d in diagnostics):
        text = formats.render(fmt, diagnostics, env)
    else:  # no notebook finding: the format as is (the notebook modules are not imported)
        text = __import__("importlib").import_module(f"dslint.formats.{formats.FORMATS[fmt]}").render(list(diagnostics), env)
    if output_file:
        Path(output_file).write_text(text, encoding="utf-8")
    elif text:
        click.echo(text, nl=False)
    return env


def _run_fix(paths, settings, options, flags: CheckFlags) -> None:
    from dslint import api

    unsafe, diff, fix_only, quiet = flags.unsafe_fixes, flags.diff, flags.fix_only, flags.quiet

    state = api.fix(paths, settings, options, unsafe=unsafe)
    remaining = settings.without_unfixable(state.outcome.diagnostics)
    result = state.outcome.result
    errors = [*result.internal_errors, *state.errors]
    n_fixed = state.total_fixed
    if diff:
        click.echo(api.unified_diff(state), nl=False)
        for error in errors:
            click.echo(f"dslint: error: {error}", err=True)
        if not quiet:
            if n_fixed:
                click.echo(f"Would fix {n_fixed} problem{'s' if n_fixed != 1 else ''}.", err=True)
            else:
                click.echo("No problems would be fixed.", err=True)
            _hidden_unsafe(remaining, unsafe)
        sys.exit(EXIT_ERROR if errors else (EXIT_FINDINGS if n_fixed else EXIT_OK))
    api.write_fixes(state)
    if state.stdin_path is not None:
        source = state.results.get(state.stdin_path, result.texts.get(state.stdin_path, ""))
        click.echo(source, nl=False)
    elif not fix_only:
        _report(remaining, settings, flags, unsafe)
    for error in errors:
        click.echo(f"dslint: error: {error}", err=True)
    if not quiet:
        if fix_only:
            click.echo(f"Fixed {n_fixed} problem{'s' if n_fixed != 1 else ''}.", err=True)
        elif remaining or n_fixed:
            total = len(remaining) + n_fixed
            click.echo(
                f"Found {total} problem{'s' if total != 1 else ''} ({n_fixed} fixed, {len(remaining)} remaining).",
                err=True,
            )
        else:
            click.echo("All checks passed!", err=True)
        _hidden_unsafe(remaining, unsafe)
    if errors:
        sys.exit(EXIT_ERROR)
    if flags.exit_non_zero_on_fix and n_fixed:
        sys.exit(EXIT_FINDINGS)
    if remaining and not flags.exit_zero and not fix_only:
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


def _hidden_unsafe(remaining, unsafe: bool) -> None:
    hidden = sum(1 for d in remaining if d.fix is not None and d.fix.applicability == "unsafe")
    if hidden and not unsafe:
        click.echo(f"({hidden} more fix{'es' if hidden != 1 else ''} available with `--unsafe-fixes`.)", err=True)


def _summary(outcome, env) -> None:
    from dslint.formats import fixable

    diagnostics = outcome.diagnostics
    for path in outcome.skipped:  # (dangling symlinks found walking)
        click.echo(f"dslint: warning: skipped {path}: a symlink whose target does not exist", err=True)
    if outcome.no_files:
        if outcome.excluded:
            for path, reason in outcome.excluded:
                click.echo(f"dslint: warning: {path} is excluded by {reason} (--force-exclude)", err=True)
            click.echo("dslint: warning: every path given is excluded; nothing was checked", err=True)
        else:
            click.echo("dslint: warning: No Python files found under the given path(s)", err=True)
        return
    hidden = outcome.baselined
    note = f" ({hidden} more in the baseline)" if hidden else ""
    if not diagnostics:
        click.echo(f"All checks passed!{note}", err=True)
        return
    files = len({d.path for d in diagnostics})
    n = len(diagnostics)
    click.echo(f"Found {n} problem{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''}{note}.", err=True)
    safe = sum(1 for d in diagnostics if fixable(d, None))
    unsafe = sum(1 for d in diagnostics if d.fix is not None and d.fix.applicability == "unsafe")
    if safe:
        click.echo(f"[*] {safe} fixable with the `--fix` option.", err=True)
    if unsafe:
        click.echo(f"({unsafe} more fixable with `--fix --unsafe-fixes`.)", err=True)


@main.command()
@click.argument("code")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule(code: str, output_format: str) -> None:
    """Print the documentation of rule CODE (or its name)."""
    from dslint.docs import rule_json, rule_page
    from dslint.rules.base import all_rules

    rules = all_rules()
    found = rules.get(code.upper()) or next((r for r in rules.values() if r.name == code), None)
    if found is None:
        _fail(f"unknown rule `{code}` (see `dslint rules`)")
        return
    if output_format == "json":
        click.echo(json.dumps(rule_json(found), indent=2))
    else:
        click.echo(rule_page(found), nl=False)


@main.command()
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rules(output_format: str) -> None:
    """List every rule: code, name, level, fixable, preview."""
    from dslint.docs import rule_json
    from dslint.rules.base import all_rules

    registry = all_rules()
    if output_format == "json":
        click.echo(json.dumps([rule_json(r) for r in registry.values()], indent=2))
        return
    rows = [("CODE", "NAME", "LEVEL", "FIX", "PREVIEW", "SUMMARY")]
    for rule_cls in registry.values():
        rows.append(
            (
                rule_cls.code,
                rule_cls.name,
                rule_cls.level,
                {"never": "-", "sometimes": "some", "always": "yes"}[rule_cls.fix_availability],
                "yes" if rule_cls.preview else "-",
                rule_cls.summary,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        click.echo("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:5])) + "  " + row[5])


@main.command()
@click.option("-v", "--verbose", is_flag=True, help="Log each check (phases, files parsed) to stderr.")
def server(verbose: bool) -> None:
    """Run the language server (LSP over stdio) for editors: diagnostics as you type, fixes, rule pages on hover."""
    try:
        from dslint.server import serve  # pygls: imported only here, never by `check`
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ("pygls", "lsprotocol", "cattrs"):
            _fail("`dslint server` needs pygls: pip install 'torch-dslint[server]'")
        raise
    serve(verbose)


if __name__ == "__main__":
    main()
