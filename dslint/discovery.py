"""Which files to check.

Directories are walked for the files ``include``/``extend-include`` match (by default
``*.py``, ``*.pyi`` and ``*.ipynb``, as ruff: gitignore-style patterns, so ``*.py``
matches in every directory and ``scripts/*.py`` only there), pruning the default excludes
(``.git``, ``.venv``, ``build``, ``site-packages``...), ``exclude``/``extend-exclude``
patterns and, unless disabled, anything ``.gitignore``/``.git/info/exclude`` ignores.
Files named explicitly are always checked, as ruff does; with ``--force-exclude``
(what pre-commit passes) the configured ``exclude``/``extend-exclude`` patterns apply
to them too, but ``.gitignore`` never does: pre-commit hands over tracked files,
and a tracked file is checked even where a ``.gitignore`` pattern matches it. Directory symlinks are not followed, so a symlink loop
cannot trap the walk; a file symlink is read through (a looping one becomes a per-file
I/O error). A symlink found walking whose target does not exist (a link into a submodule that
is not checked out, or to another machine's path) holds nothing to check: it is skipped with a
warning, not reported; named explicitly, it is an I/O error like any missing file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pathspec

from dslint.config import DEFAULT_INCLUDE, Settings

#: what the default ``include`` matches: a suffix test, without matching patterns
DEFAULT_SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass
class Candidate:
    path: str  # as displayed (relative to the cwd when possible)
    abspath: str
    explicit: bool = False
    missing: bool = False
    error: Optional[str] = None  # a directory that could not be listed: reported, not skipped


class _GitIgnore:
    """Hierarchical .gitignore matching, one compiled spec per directory."""

    def __init__(self) -> None:
        self._specs: Dict[str, Optional[pathspec.GitIgnoreSpec]] = {}
        self._repo_roots: Dict[str, Optional[str]] = {}

    def _spec(self, directory: str) -> Optional[pathspec.GitIgnoreSpec]:
        if directory in self._specs:
            return self._specs[directory]
        lines: List[str] = []
        for name in (".gitignore", os.path.join(".git", "info", "exclude")):
            try:
                with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as handle:
                    lines.extend(handle.read().splitlines())
            except OSError:
                pass
        spec = pathspec.GitIgnoreSpec.from_lines(lines) if lines else None
        self._specs[directory] = spec
        return spec

    def _repo_root(self, directory: str) -> Optional[str]:
        if directory in self._repo_roots:
            return self._repo_roots[directory]
        root: Optional[str] = None
        if os.path.exists(os.path.join(directory, ".git")):
            root = directory
        else:
            parent = os.path.dirname(directory)
            if parent != directory:
                root = self._repo_root(parent)
        self._repo_roots[directory] = root
        return root

    def ignored(self, abspath: str, is_dir: bool) -> bool:
        directory = os.path.dirname(abspath)
        repo = self._repo_root(directory)
        if repo is None:
            return False
        # Walk from the repository root down; deeper .gitignore files override.
        chain = []
        current = directory
        while True:
            chain.append(current)
            if current == repo:
                break
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        verdict = False
        for base in reversed(chain):
            spec = self._spec(base)
            if spec is None:
                continue
            rel = os.path.relpath(abspath, base).replace(os.sep, "/")
            if is_dir:
                rel += "/"
            result = spec.check_file(rel)
            if result.include is not None:
                verdict = result.include
        return verdict


class Discovery:
    def __init__(self, settings: Settings, cwd: Optional[Path] = None) -> None:
        self.settings = settings
        self.cwd = str((cwd or Path.cwd()).resolve())
        self.root = str(settings.root)
        self.patterns = [*(("exclude", p) for p in settings.exclude), *(("extend-exclude", p) for p in settings.extend_exclude)]
        self.exclude = pathspec.GitIgnoreSpec.from_lines([p for _, p in self.patterns])
        includes = [*settings.include, *settings.extend_include]
        self.include = None if sorted(set(includes)) == sorted(DEFAULT_INCLUDE) else pathspec.GitIgnoreSpec.from_lines(includes)
        self.gitignore = _GitIgnore() if settings.respect_gitignore else None
        #: (display path, reason) of every path named explicitly that --force-exclude left out
        self.excluded_explicit: List[Tuple[str, str]] = []
        #: display paths of the symlinks found walking whose target does not exist (skipped, with a warning)
        self.dangling: List[str] = []

    def display(self, abspath: str) -> str:
        try:
            rel = os.path.relpath(abspath, self.cwd)
        except ValueError:
            return abspath
        return abspath if rel.startswith("..") else rel

    def _rel_to_root(self, abspath: str) -> str:
        rel = os.path.relpath(abspath, self.root)
        return rel.replace(os.sep, "/")

    def excluded(self, abspath: str, is_dir: bool, rel: Optional[str] = None) -> bool:
        """``rel``: ``abspath`` relative to the root with / separators, when the caller has it."""
        if rel is None:
            rel = self._rel_to_root(abspath)
        if rel.startswith("../"):
            # outside the project: match on the path's own name only
            rel = os.path.basename(abspath)
        if is_dir:
            rel += "/"
        if self.exclude.match_file(rel):
            return True
        return bool(self.gitignore and self.gitignore.ignored(abspath, is_dir))

    def collect(self, paths: List[str]) -> List[Candidate]:
        out: List[Candidate] = []
        seen = set()
        for raw in paths:
            abspath = os.path.abspath(raw)
            if not os.path.lexists(abspath):
                out.append(Candidate(raw, abspath, explicit=True, missing=True))
                continue
            if os.path.isdir(abspath):
                reason = self.force_excluded(abspath, is_dir=True)
                if reason is not None:
                    self.excluded_explicit.append((raw, reason))
                    continue
                for found, shown, error in self._walk(abspath):
                    if found not in seen:
                        seen.add(found)
                        out.append(Candidate(shown, found, error=error))
            else:
                reason = self.force_excluded(abspath, is_dir=False)
                if reason is not None:
                    self.excluded_explicit.append((raw, reason))
                    continue
                if abspath not in seen:
                    seen.add(abspath)
                    out.append(Candidate(self.display(abspath), abspath, explicit=True))
        return out

    def included(self, name: str, rel: str) -> bool:
        """Whether a file found walking (``rel``: relative to the root) is one to check."""
        if self.include is None:
            return name.endswith(DEFAULT_SUFFIXES)
        return self.include.match_file(rel if not rel.startswith("../") else name)

    def force_excluded(self, abspath: str, is_dir: bool) -> Optional[str]:
        """With ``--force-exclude``, why a path named explicitly is left out (the
        configured pattern that matches it or one of its directories), else None.
        ``.gitignore`` is not consulted: explicitly named files are tracked ones."""
        if not self.settings.force_exclude:
            return None
        current, current_is_dir = abspath, is_dir
        while True:
            rel = self._rel_to_root(current)
            if rel.startswith("../"):
                rel = os.path.basename(current)
            if rel != ".":
                result = self.exclude.check_file(rel + ("/" if current_is_dir else ""))
                if result.include and result.index is not None:
                    key, pattern = self.patterns[result.index]
                    return f"`{pattern}` in `{key}`"
            parent = os.path.dirname(current)
            if parent == current or not parent.startswith(self.root) or parent == self.root:
                return None
            current, current_is_dir = parent, True

    def _walk(self, top: str) -> List[Tuple[str, str, Optional[str]]]:
        """(file, display path, None) for every file to check, and (directory, display
        path, reason) for a directory that cannot be listed."""
        found: List[Tuple[str, str, Optional[str]]] = []
        stack = [top]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as exc:
                # An unreadable directory would hide every file in it: say so.
                shown = self.display(directory)
                found.append((directory, shown, f"cannot list directory {shown}: {exc.strerror or type(exc).__name__}"))
                continue
            # Paths of the entries relative to the root and to the cwd, from the
            # directory's (relpath per file is most of the cost of a large walk).
            dir_rel = self._rel_to_root(directory)
            try:
                dir_shown: Optional[str] = os.path.relpath(directory, self.cwd)
            except ValueError:
                dir_shown = None
            subdirs = []
            for entry in entries:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    is_link = entry.is_symlink()
                except OSError:
                    continue
                rel = entry.name if dir_rel == "." else f"{dir_rel}/{entry.name}"
                if is_dir:
                    if not self.excluded(entry.path, True, rel):
                        subdirs.append(entry.path)
                elif self.included(entry.name, rel):
                    if is_link and os.path.isdir(entry.path):
                        continue
                    if not self.excluded(entry.path, False, rel):
                        if dir_shown is None:
                            shown = entry.path
                        else:
                            shown = entry.name if dir_shown == "." else os.path.join(dir_shown, entry.name)
                            if shown.startswith(".."):
                                shown = entry.path
                        if is_link and _dangling(entry.path):
                            self.dangling.append(shown)  # nothing there to check (ruff#19421 asks the same)
                            continue
                        found.append((entry.path, shown, None))
            stack.extend(reversed(subdirs))
        return found


def _dangling(path: str) -> bool:
    """A symlink whose target does not exist (a loop is not one: reading it is an I/O error)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False
