"""Settings: the nearest configuration file, then ``--config KEY = VALUE``, then flags.

A configuration file is a ``.dslint.toml`` or ``dslint.toml`` (the keys at its top
level) or a ``pyproject.toml`` with a ``[tool.dslint]`` table, searched upward from
the checked paths as ruff searches for its own. Precedence follows ruff: the file,
then every ``--config "key = value"`` override, then the dedicated flags;
``--select`` replaces the configured ``select``; ``extend-select`` and ``ignore``
(and ``extend-fixable``/``unfixable``) from every layer add up; for each rule the
most specific selector wins, and at equal specificity ``ignore`` (``unfixable``)
wins. Every problem is a ``ConfigError`` (one line, exit 2), never a traceback.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from dslint.docs import DEFAULT_DOCS_URL, docs_url_problem
from dslint.formats import FORMATS
from dslint.rules.base import Rule, all_rules

OUTPUT_FORMATS = tuple(FORMATS)
#: configuration files whose keys sit at the top level, in the order they win
STANDALONE_CONFIGS = (".dslint.toml", "dslint.toml")

#: the files a directory walk picks (ruff's ``include``): Jupyter notebooks too
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb")

DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".git-rewrite",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pants.d",
    ".pyenv",
    ".pytest_cache",
    ".pytype",
    ".ruff_cache",
    ".dslint_cache",
    ".svn",
    ".tox",
    ".venv",
    ".vscode",
    "__pypackages__",
    "__pycache__",
    "_build",
    "buck-out",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)


class ConfigError(Exception):
    """A problem with flags or configuration: reported in one line, exit 2."""


@dataclass
class Settings:
    root: Path
    config_file: Optional[Path] = None
    select: Optional[List[str]] = None
    extend_select: List[str] = field(default_factory=list)
    ignore: List[str] = field(default_factory=list)
    per_file_ignores: Dict[str, List[str]] = field(default_factory=dict)
    include: List[str] = field(default_factory=lambda: list(DEFAULT_INCLUDE))
    extend_include: List[str] = field(default_factory=list)
    exclude: List[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: List[str] = field(default_factory=list)
    respect_gitignore: bool = True
    force_exclude: bool = False
    output_format: str = "full"
    preview: bool = False
    cache_dir: Optional[str] = None
    baseline: Optional[str] = None
    #: which codes ``--fix`` may fix (ruff's ``fixable``/``unfixable``/``extend-fixable``)
    fixable: Optional[List[str]] = None
    unfixable: List[str] = field(default_factory=list)
    extend_fixable: List[str] = field(default_factory=list)
    #: the documentation page of a rule: ``{code}`` and ``{name}`` are filled in
    docs_url: str = DEFAULT_DOCS_URL
    #: bytes; a larger file is one DSL000 finding, never parsed (parsing takes ~650x its size in memory)
    max_file_size: int = 2 * 1024 * 1024
    rule_options: Dict[str, dict] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)

    # ---------------------------------------------------------------- rules
    def enabled_rules(self) -> List[type]:
        rules = all_rules()
        select = self.select if self.select is not None else ["ALL"]
        chosen = []
        for code, rule in rules.items():
            if rule.engine_rule and code in ("DSL000", "DSL002"):
                continue  # always reported, not selectable
            if not _is_enabled(code, select + self.extend_select, self.ignore):
                continue
            if rule.preview and not self.preview:
                if _explicitly_selected(code, select + self.extend_select):
                    self.warnings.append(f"{code} is a preview rule; pass `--preview` to enable it")
                continue
            chosen.append(rule)
        return chosen

    def fix_allowed(self, code: str) -> bool:
        """Whether ``--fix`` may apply this code's fixes (as ruff: the most specific of
        ``fixable`` + ``extend-fixable`` against ``unfixable``)."""
        fixable = self.fixable if self.fixable is not None else ["ALL"]
        return _is_enabled(code, fixable + self.extend_fixable, self.unfixable)

    def without_unfixable(self, diagnostics: list) -> list:
        """The findings, those of codes ``--fix`` may not fix stripped of their fix (as
        ruff does: no ``[*]``, not counted as fixable, never applied)."""
        import dataclasses

        allowed: Dict[str, bool] = {}
        out = []
        for d in diagnostics:
            if d.fix is not None:
                if d.code not in allowed:
                    allowed[d.code] = self.fix_allowed(d.code)
                if not allowed[d.code]:
                    d = dataclasses.replace(d, fix=None)
            out.append(d)
        return out

    def ignored_codes_for(self, relpath: str) -> set:
        codes: set = set()
        for pattern, rules in self.per_file_ignores.items():
            if _match_glob(pattern, relpath):
                for selector in rules:
                    codes.update(expand_selector(selector))
        return codes

    def analysis_key(self) -> str:
        """What changes the analysis of a file (for the cache)."""
        import json

        codes = sorted(r.code for r in self.enabled_rules())
        return json.dumps({"rules": codes, "preview": self.preview, "options": self.rule_options}, sort_keys=True)


def _specificity(selector: str, code: str) -> int:
    if selector == "ALL":
        return 0
    if code.startswith(selector):
        return len(selector)
    return -1


def _is_enabled(code: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    best_select = max((_specificity(s, code) for s in select), default=-1)
    best_ignore = max((_specificity(s, code) for s in ignore), default=-1)
    if best_select < 0:
        return False
    return best_select > best_ignore


def _explicitly_selected(code: str, select: Sequence[str]) -> bool:
    return any(s != "ALL" and code.startswith(s) for s in select)


def _match_glob(pattern: str, relpath: str) -> bool:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(relpath)


def expand_selector(selector: str) -> set:
    rules = all_rules()
    if selector == "ALL":
        return set(rules)
    return {code for code in rules if code.startswith(selector)}


def normalize_selector(selector: str, where: str) -> str:
    """A code, a prefix (``DSL5``), a rule name (``sampler-with-shuffle``) or ``ALL``."""
    selector = selector.strip()
    rules = all_rules()
    if selector == "ALL":
        return selector
    for code, rule in rules.items():
        if rule.name == selector:
            return code
    upper = selector.upper()
    if upper.startswith("DSL") and any(code.startswith(upper) for code in rules):
        return upper
    raise ConfigError(f"{where}: unknown rule selector `{selector}` (expected a code such as DSL101, a prefix such as DSL1, a rule name, or ALL)")


# -------------------------------------------------------------------- loading

_KEYS = {
    "select": "codes",
    "extend-select": "codes",
    "ignore": "codes",
    "per-file-ignores": "per-file",
    "extend-per-file-ignores": "per-file",
    "include": "strings",
    "extend-include": "strings",
    "exclude": "strings",
    "extend-exclude": "strings",
    "respect-gitignore": "bool",
    "force-exclude": "bool",
    "output-format": "format",
    "preview": "bool",
    "cache-dir": "string",
    "baseline": "string",
    "fixable": "codes",
    "unfixable": "codes",
    "extend-fixable": "codes",
    "docs-url": "url",
    "max-file-size": "size",
    "rules": "rules",
}


def find_config(start_dirs: Sequence[Path]) -> Optional[Path]:
    """The nearest ``.dslint.toml``, ``dslint.toml`` or pyproject.toml with a
    [tool.dslint] table (in that order within one directory), above any of ``start_dirs``."""
    seen = set()
    for start in start_dirs:
        directory = start if start.is_dir() else start.parent
        for candidate_dir in [directory, *directory.parents]:
            if candidate_dir in seen:
                break
            seen.add(candidate_dir)
            for name in STANDALONE_CONFIGS:
                if (candidate_dir / name).is_file():
                    return candidate_dir / name
            candidate = candidate_dir / "pyproject.toml"
            if candidate.is_file() and _has_dslint_table(candidate):
                return candidate
    return None


def _has_dslint_table(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if b"tool.dslint" not in data and b"[tool]" not in data and b"tool = " not in data and b"tool=" not in data:
        return False
    table = _load_toml(path)
    return isinstance(table.get("tool"), dict) and "dslint" in table["tool"]


def _load_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # TOML is UTF-8 by definition
        row = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 (byte 0x{data[exc.start]:02x} on line {row})")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}")


def read_config(path: Path) -> dict:
    """The validated settings of a configuration file: the whole of a ``dslint.toml``,
    the ``[tool.dslint]`` table of any other TOML file (an error when it has none)."""
    data = _load_toml(path)
    if path.name in STANDALONE_CONFIGS:
        return validate_table(data, str(path))
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table, got {_type_name(tool)}")
    if "dslint" not in tool:
        raise ConfigError(
            f"{path}: no [tool.dslint] table, so this file configures nothing "
            f"(a pyproject.toml-style file needs [tool.dslint]; a dslint.toml holds the keys at its top level)"
        )
    table = tool["dslint"]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.dslint] must be a table, got {_type_name(table)}")
    return validate_table(table, str(path))


def split_config_args(values: Sequence[str]) -> tuple:
    """``--config`` values as ruff reads them: (the one configuration file or None,
    the validated table of every ``KEY = VALUE`` override, later ones winning)."""
    config_file: Optional[str] = None
    overrides: dict = {}
    for value in values:
        if os.path.isfile(value):
            if config_file is not None:
                raise ConfigError(f"--config: only one configuration file may be given ({config_file}, {value})")
            config_file = value
            continue
        try:
            table = tomllib.loads(value)
        except tomllib.TOMLDecodeError as exc:
            if "=" not in value:
                raise ConfigError(f"--config {value}: config file not found")
            raise ConfigError(f"--config {value!r}: not a TOML `key = value` pair ({exc})")
        for key, item in validate_table(table, f"--config {value!r}").items():
            if key == "rules" and "rules" in overrides:
                for code, options in item.items():
                    overrides["rules"].setdefault(code, {}).update(options)
            else:
                overrides[key] = item
    return config_file, overrides


def validate_table(table: dict, where: str) -> dict:
    out = {}
    for key, value in table.items():
        kind = _KEYS.get(key)
        if kind is None:
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(f"{where}: unknown key `{key}` in [tool.dslint] (known keys: {known})")
        label = f"{where}: [tool.dslint] `{key}`"
        if kind in ("codes", "strings"):
            if not isinstance(value, list):
                raise ConfigError(f"{label} must be a list of strings, got {_type_name(value)}")
            for item in value:
                if not isinstance(item, str):
                    raise ConfigError(f"{label} must be a list of strings, got {_type_name(item)} ({item!r}) in the list")
            out[key] = [normalize_selector(v, label) for v in value] if kind == "codes" else list(value)
        elif kind == "bool":
            if not isinstance(value, bool):
                raise ConfigError(f"{label} must be true or false, got {_type_name(value)}")
            out[key] = value
        elif kind == "string":
            if not isinstance(value, str):
                raise ConfigError(f"{label} must be a string, got {_type_name(value)}")
            out[key] = value
        elif kind == "url":
            problem = docs_url_problem(value) if isinstance(value, str) else f"got {_type_name(value)}"
            if problem:
                raise ConfigError(f"{label} must be an absolute URL template with {{code}}, e.g. "
                                  f"\"https://example.org/rules/{{code}}.md\": {problem}")
            out[key] = value
        elif kind == "size":
            if type(value) is not int or value < 1:
                raise ConfigError(f"{label} must be a positive number of bytes, got {_type_name(value)} ({value!r})")
            out[key] = value
        elif kind == "format":
            if value not in OUTPUT_FORMATS:
                raise ConfigError(f"{label} must be one of {', '.join(OUTPUT_FORMATS)}, got {value!r}")
            out[key] = value
        elif kind == "per-file":
            if not isinstance(value, dict):
                raise ConfigError(f"{label} must map file patterns to lists of codes, got {_type_name(value)}")
            for pattern, codes in value.items():
                if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
                    raise ConfigError(
                        f"{label} must map file patterns to lists of codes, got {_type_name(codes)} for {pattern!r}"
                    )
            out[key] = {pattern: [normalize_selector(c, label) for c in codes] for pattern, codes in value.items()}
        elif kind == "rules":
            out[key] = _validate_rule_options(value, label)
    return out


def _validate_rule_options(value, label: str) -> Dict[str, dict]:
    if not isinstance(value, dict):
        raise ConfigError(f"{label} must be a table of per-rule tables")
    rules = all_rules()
    result = {}
    for code, options in value.items():
        rule: Optional[type[Rule]] = rules.get(code)
        if rule is None:
            raise ConfigError(f"{label}: unknown rule code `{code}`")
        if not isinstance(options, dict):
            raise ConfigError(f"{label}.{code} must be a table")
        for name, option in options.items():
            if name not in rule.options:
                known = ", ".join(sorted(rule.options)) or "none"
                raise ConfigError(f"{label}.{code}: unknown option `{name}` (options: {known})")
            default = rule.options[name]
            if type(option) is not type(default) or (
                isinstance(default, list) and not all(isinstance(x, str) for x in option)
            ):
                raise ConfigError(f"{label}.{code}.{name} must be {_type_name(default)}, got {_type_name(option)}")
        result[code] = dict(options)
    return result


def _type_name(value) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table"}.get(
        type(value), type(value).__name__
    )


def build_settings(
    paths: Sequence[str],
    *,
    config: Optional[str] = None,
    isolated: bool = False,
    overrides: Optional[dict] = None,
    cwd: Optional[Path] = None,
    config_overrides: Optional[dict] = None,
) -> Settings:
    """Settings from the config file (unless ``isolated``), then ``config_overrides``
    (``--config KEY = VALUE``, validated), then the dedicated flags' ``overrides``."""
    cwd = cwd or Path.cwd()
    config_file: Optional[Path] = None
    table: dict = {}
    if config is not None:
        config_file = Path(config)
        if not config_file.is_file():
            raise ConfigError(f"{config}: config file not found")
        table = read_config(config_file)
    elif not isolated:
        starts = [Path(p).resolve() for p in paths if p != "-" and os.path.exists(p)]
        config_file = find_config([*starts, cwd.resolve()])
        if config_file is not None:
            table = read_config(config_file)
    root = config_file.resolve().parent if config_file else cwd.resolve()
    settings = Settings(root=root, config_file=config_file)
    _apply(settings, table)
    _apply(settings, config_overrides or {})
    _apply(settings, overrides or {}, from_cli=True)
    return settings


def _apply(settings: Settings, table: dict, from_cli: bool = False) -> None:
    for key, value in table.items():
        if value is None:
            continue
        if key == "select":
            settings.select = list(value)
        elif key == "extend-select":
            settings.extend_select += list(value)
        elif key == "ignore":
            settings.ignore += list(value)
        elif key == "per-file-ignores":
            if from_cli:
                settings.per_file_ignores.update(value)
            else:
                settings.per_file_ignores = dict(value)
        elif key == "extend-per-file-ignores":
            settings.per_file_ignores.update(value)
        elif key == "include":
            settings.include = list(value)
        elif key == "extend-include":
            settings.extend_include += list(value)
        elif key == "exclude":
            settings.exclude = list(value)
        elif key == "extend-exclude":
            settings.extend_exclude += list(value)
        elif key == "respect-gitignore":
            settings.respect_gitignore = value
        elif key == "force-exclude":
            settings.force_exclude = value
        elif key == "output-format":
            settings.output_format = value
        elif key == "preview":
            settings.preview = value
        elif key == "cache-dir":
            settings.cache_dir = value
        elif key == "baseline":
            settings.baseline = value
        elif key == "fixable":
            settings.fixable = list(value)
        elif key == "unfixable":
            settings.unfixable += list(value)
        elif key == "extend-fixable":
            settings.extend_fixable += list(value)
        elif key == "docs-url":
            settings.docs_url = value
        elif key == "max-file-size":
            settings.max_file_size = value
        elif key == "rules":
            for code, options in value.items():
                settings.rule_options.setdefault(code, {}).update(options)
