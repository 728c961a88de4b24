"""What ``dslint server`` knows about files: projects, their files, open buffers.

A *project* is what one ``dslint check`` of a document would see: the settings of
the document's nearest ``[tool.dslint]`` (``build_settings([path])``, the workspace
folder standing in for the current directory) and every file ``check`` would
discover under the settings' root. Each project keeps

- a snapshot of its files on disk (re-read when the client reports a change, on
  save, or when a file's size or modification time moved),
- one ``Engine`` with the engine's own cache held in memory (``MemoryCache``):
  the other files' summaries, prefilter facts and findings stay warm, so a
  keystroke parses and checks one file while cross-file facts come from the same
  project index ``check`` builds. The cache is seeded from the project's cache
  file when ``dslint check`` wrote one; the server never writes into a project.

Open buffers replace their files' text in the inputs (every open buffer, not only
the one being checked), so an unsaved edit to a base class is what its subclasses
see.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from dslint.api import MAX_FIX_PASSES
from dslint.cache import Cache, default_cache_dir
from dslint.config import ConfigError, Settings, build_settings
from dslint.discovery import Discovery
from dslint.engine import CheckResult, Engine, FileInput
from dslint.report import SAFE, Finding

CONFIG_NAMES = ("pyproject.toml", ".gitignore")


class MemoryCache(Cache):
    """The engine's cache, in memory: read from the project's cache file, never written."""

    def save(self) -> None:
        self.dirty = False


def encode_buffer(text: str) -> bytes:
    """A buffer's text as the bytes the engine decodes: UTF-8, or the encoding its
    PEP 263 cookie declares when the text can be written in it."""
    import io
    import tokenize

    data = text.encode("utf-8", "surrogatepass")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return data
    if encoding.replace("_", "-").lower() not in ("utf-8", "utf-8-sig"):
        try:
            return text.encode(encoding)
        except (LookupError, UnicodeEncodeError):
            pass
    return data


@dataclass
class Checked:
    """One check of a project with the open buffers: findings per open buffer."""

    findings: Dict[str, List[Finding]] = field(default_factory=dict)
    excluded: Dict[str, str] = field(default_factory=dict)  # open path -> the pattern excluding it
    errors: List[str] = field(default_factory=list)
    result: Optional[CheckResult] = None


class Project:
    def __init__(self, settings: Settings, walk: bool = True) -> None:
        self.settings = settings
        #: False for a file outside every workspace folder and every configured project:
        #: only the open buffers are checked (its folder may be a home directory)
        self.walk = walk
        self.root = str(settings.root)
        self.discovery = Discovery(settings, cwd=Path(self.root))
        self.exclusion = Discovery(dataclasses.replace(settings, force_exclude=True), cwd=Path(self.root))
        cache = MemoryCache(default_cache_dir(Path(self.root), settings.cache_dir), settings.analysis_key())
        self.engine = Engine(settings, cache=cache)
        self.files: Dict[str, Tuple[int, int, Optional[bytes], Optional[str]]] = {}  # path -> (mtime, size, data, error)
        self.stale = True

    # ------------------------------------------------------------------ files
    def refresh(self) -> None:
        """Walk the root again (as ``dslint check ROOT`` would) and re-read changed files."""
        found = {}
        for candidate in self.discovery.collect([self.root]) if self.walk else ():
            if candidate.error is None and not candidate.missing:
                found[candidate.abspath] = self.files.get(candidate.abspath)
        self.files = {}
        for path, known in found.items():
            self._read(path, known)
        self.stale = False

    def touch(self, path: str) -> None:
        """A file under the root changed on disk (created, changed or deleted)."""
        if not os.path.isfile(path):
            self.files.pop(path, None)
        elif path in self.files:
            self._read(path, None)
        else:
            self.stale = True  # a new file: the walk decides whether it counts

    def _read(self, path: str, known) -> None:
        try:
            st = os.stat(path)
            if known is not None and (known[0], known[1]) == (st.st_mtime_ns, st.st_size):
                self.files[path] = known
                return
            with open(path, "rb") as handle:
                self.files[path] = (st.st_mtime_ns, st.st_size, handle.read(), None)
        except OSError as exc:
            self.files[path] = (0, 0, None, f"cannot read {path}: {exc.strerror or type(exc).__name__}")

    def excluded(self, path: str) -> Optional[str]:
        """The configured pattern that excludes an open document, if any (as
        ``--force-exclude`` would; ``.gitignore`` does not hide an open file)."""
        return self.exclusion.force_excluded(path, False)

    # ------------------------------------------------------------------ checking
    def inputs(self, buffers: Dict[str, str]) -> List[FileInput]:
        if self.stale:
            self.refresh()
        out = []
        for path, (_, _, data, error) in self.files.items():
            if path not in buffers:
                out.append(FileInput(path, path, data=data, error=error))
        for path, text in buffers.items():
            out.append(FileInput(path, path, data=encode_buffer(text), explicit=True))
        return out

    def check(self, buffers: Dict[str, str]) -> Checked:
        """Check the project with ``buffers`` (the open documents of this project,
        path -> text) in place of their files; findings for each buffer."""
        checked = Checked()
        kept = {}
        for path, text in buffers.items():
            reason = self.excluded(path)
            if reason is None:
                kept[path] = text
            else:
                checked.excluded[path] = reason
        result = self.engine.check(self.inputs(kept))
        checked.result = result
        checked.findings = {path: [] for path in buffers}
        for finding in result.diagnostics:
            if finding.path in kept:
                checked.findings[finding.path].append(finding)
        checked.errors = [e for e in result.internal_errors if any(path in e for path in kept)]
        return checked

    def fix_all(self, path: str, buffers: Dict[str, str]) -> Tuple[str, int]:
        """The buffer at ``path`` with every safe fix applied, re-checking until none
        applies (``api.fix``'s loop on the project's warm engine; the text in a
        buffer is not on disk, so ``api.fix`` itself cannot read it)."""
        from dslint.fixes import apply_fixes
        from dslint.semantics.walk import parse_module

        text = buffers[path]
        total = 0
        if self.excluded(path) is not None:
            return text, 0
        for _ in range(MAX_FIX_PASSES):
            result = self.engine.check(self.inputs({**buffers, path: text}))
            fixes = [d.fix for d in result.diagnostics if d.path == path and d.fix is not None and d.fix.applicability == SAFE]
            new_text, count = apply_fixes(text, fixes)
            if not count or new_text == text:
                break
            try:
                parse_module(new_text)
            except Exception:  # a fix must never break the file
                break
            text, total = new_text, total + count
        return text, total


class Projects:
    """The projects of a workspace, found per document and kept while their settings hold."""

    def __init__(self, folders: Sequence[str] = ()) -> None:
        self.folders = sorted({os.path.abspath(f) for f in folders}, key=len, reverse=True)
        self.projects: Dict[tuple, Project] = {}
        self.by_path: Dict[str, tuple] = {}
        self.config_errors: Dict[str, str] = {}  # path -> the configuration error its check met

    def set_folders(self, folders: Sequence[str]) -> None:
        self.folders = sorted({os.path.abspath(f) for f in folders}, key=len, reverse=True)
        self.forget()

    def forget(self) -> None:
        """Configuration changed: settings and projects are found again on next use."""
        self.projects.clear()
        self.by_path.clear()
        self.config_errors.clear()

    def folder_of(self, path: str) -> Optional[str]:
        for folder in self.folders:
            if path == folder or path.startswith(folder.rstrip(os.sep) + os.sep):
                return folder
        return None

    def project_for(self, path: str) -> Project:
        key = self.by_path.get(path)
        if key is not None and key in self.projects:
            return self.projects[key]
        folder = self.folder_of(path)
        cwd = Path(folder or os.path.dirname(path))
        try:
            settings = build_settings([path], cwd=cwd)
            settings.enabled_rules()
            self.config_errors.pop(path, None)
        except ConfigError as exc:
            self.config_errors[path] = str(exc)
            settings = build_settings([path], isolated=True, cwd=cwd)
        walk = folder is not None or settings.config_file is not None
        key = (str(settings.config_file), str(settings.root), walk, repr(dataclasses.replace(settings, warnings=[])))
        project = self.projects.get(key)
        if project is None:
            project = self.projects[key] = Project(settings, walk)
        self.by_path[path] = key
        return project

    def file_changed(self, path: str) -> None:
        """The client (or a save) reports a change on disk."""
        if os.path.basename(path) in CONFIG_NAMES:
            self.forget()
            return
        for project in self.projects.values():
            if path.startswith(project.root.rstrip(os.sep) + os.sep):
                project.touch(path)

    def _group(self, path: str, buffers: Dict[str, str]) -> Tuple[Project, Dict[str, str]]:
        project = self.project_for(path)
        return project, {p: t for p, t in buffers.items() if p == path or self.project_for(p) is project}

    def check_one(self, path: str, buffers: Dict[str, str]) -> Checked:
        """The project of ``path``, with every open buffer of that project."""
        project, group = self._group(path, buffers)
        return project.check(group)

    def fix_all_for(self, path: str, buffers: Dict[str, str]) -> Tuple[str, int]:
        project, group = self._group(path, buffers)
        return project.fix_all(path, group)
