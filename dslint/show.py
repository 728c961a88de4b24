"""``dslint check --show-settings`` and ``--show-files``: what a check would use, without checking.

As ruff: ``--show-settings`` prints the resolved settings (the configuration file, the
``--config`` overrides and the flags merged) and ``--show-files`` the files a check
would read, one absolute path a line, sorted; both exit 0 and write nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import click

from dslint.config import Settings


def conflict(flags) -> Optional[str]:
    """``--show-settings``/``--show-files`` check nothing: with an option that acts on
    findings they would silently drop it, so the pair is a usage error (as in ruff)."""
    actions = {"--statistics": flags.statistics, "--fix": flags.fix, "--diff": flags.diff, "--fix-only": flags.fix_only,
               "--add-noqa": flags.add_noqa, "--write-baseline": bool(flags.write_baseline)}
    others = [name for name, on in actions.items() if on]
    if flags.show_settings and flags.show_files:
        others.insert(0, "--show-files")
    for name, wanted in (("--show-settings", flags.show_settings), ("--show-files", flags.show_files)):
        if wanted and others:
            return f"{name} cannot be used with {others[0]}"
    return None


def run(flags, settings: Settings, paths: Sequence[str]) -> int:
    """Print what ``--show-settings`` or ``--show-files`` asks for; the exit code (0)."""
    if flags.show_settings:
        click.echo(settings_text(settings, paths), nl=False)
        return 0
    found, warnings = files(paths, settings)
    for warning in warnings:
        click.echo(f"dslint: warning: {warning}", err=True)
    if not found and not warnings:
        click.echo("dslint: warning: No Python files found under the given path(s)", err=True)
    for path in found:
        click.echo(path)
    return 0


def _value(value) -> str:
    return "none" if value is None else json.dumps(value)


def _rule_list(key: str, rules) -> List[str]:
    if not rules:
        return [f"{key} = []"]
    return [f"{key} = [", *(f"\t{rule.name} ({rule.code})," for rule in rules), "]"]


def settings_text(settings: Settings, paths: Sequence[str]) -> str:
    from dslint.cache import default_cache_dir
    from dslint.rules.base import all_rules

    enabled = settings.enabled_rules()
    every_rule = [r for code, r in all_rules().items() if code in {e.code for e in enabled} or code in ("DSL000", "DSL002")]
    lines = [
        f"Resolved settings for: {', '.join(json.dumps(str(Path(p).resolve())) for p in paths if p != '-') or '<stdin>'}",
        f"Settings path: {json.dumps(str(settings.config_file.resolve())) if settings.config_file else 'none (defaults)'}",
        "",
        "# General settings",
        f"root = {_value(str(settings.root))}",
        f"cache-dir = {_value(str(default_cache_dir(Path(settings.root), settings.cache_dir)))}",
        f"output-format = {_value(settings.output_format)}",
        f"docs-url = {_value(settings.docs_url)}",
        f"baseline = {_value(settings.baseline)}",
        "",
        "# Files",
        f"respect-gitignore = {_value(settings.respect_gitignore)}",
        f"force-exclude = {_value(settings.force_exclude)}",
        f"exclude = {_value(settings.exclude)}",
        f"extend-exclude = {_value(settings.extend_exclude)}",
        "",
        "# Rules",
        f"preview = {_value(settings.preview)}",
        f"select = {_value(settings.select if settings.select is not None else ['ALL'])}",
        f"extend-select = {_value(settings.extend_select)}",
        f"ignore = {_value(settings.ignore)}",
        f"per-file-ignores = {_value(settings.per_file_ignores)}",
        f"fixable = {_value(settings.fixable if settings.fixable is not None else ['ALL'])}",
        f"extend-fixable = {_value(settings.extend_fixable)}",
        f"unfixable = {_value(settings.unfixable)}",
        f"rules = {_value(settings.rule_options)}",
        *_rule_list("rules.enabled", every_rule),
        *_rule_list("rules.should_fix", [r for r in every_rule if settings.fix_allowed(r.code) and r.fix_availability != "never"]),
    ]
    return "\n".join(lines) + "\n"


def files(paths: Sequence[str], settings: Settings) -> Tuple[List[str], List[str]]:
    """(the absolute path of every file a check would read, sorted; a warning for each
    path given that is missing or cannot be listed)."""
    from dslint.discovery import Discovery

    found, warnings = [], []
    for candidate in Discovery(settings).collect([p for p in paths if p != "-"]):
        if candidate.missing:
            warnings.append(f"{candidate.path}: No such file or directory")
        elif candidate.error is not None:
            warnings.append(candidate.error)
        else:
            found.append(candidate.abspath)
    return sorted(found), warnings
