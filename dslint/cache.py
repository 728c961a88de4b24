"""Results cache, keyed by file content, dslint version and the analysis settings.

``.dslint_cache/<version>/<settings-key>.json`` (or ``--cache-dir``/
``DSLINT_CACHE_DIR``) holds, per file: the hash of its text, its module name, its
summary (phase 1), and its findings with the log of every cross-file question the
rules asked (phase 2). Findings are reused only when the text is unchanged *and*
every recorded question gets the same answer from the new project index -- so
editing a base class in one file re-checks its subclasses in other files.

JSON, never pickle: a cache directory committed to a repository must not be able
to run code when dslint reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Dict, Optional

from dslint import __version__
from dslint.semantics.names import module_name_for
from dslint.semantics.project import ProjectIndex, replay

CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by dslint.\n"


def default_cache_dir(root: Path, configured: Optional[str]) -> Path:
    env = os.environ.get("DSLINT_CACHE_DIR")
    if configured:
        path = Path(configured)
        return path if path.is_absolute() else root / path
    if env:
        return Path(env)
    return root / ".dslint_cache"


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class Cache:
    def __init__(self, directory: Path, analysis_key: str) -> None:
        self.directory = directory
        key = hashlib.blake2b(analysis_key.encode(), digest_size=8).hexdigest()
        self.file = directory / __version__ / f"{key}.json"
        self.entries: Dict[str, dict] = {}
        self.dirty = False
        try:
            with open(self.file, encoding="utf-8") as handle:
                data = json.load(handle)
            if isinstance(data, dict) and data.get("version") == __version__ and isinstance(data.get("files"), dict):
                self.entries = data["files"]
        except (OSError, ValueError):
            self.entries = {}

    # ------------------------------------------------------------------ reading
    def lookup(self, texts: Dict[str, str]) -> Dict[str, dict]:
        """Usable entries for the given files, keyed by their display paths."""
        found = {}
        for path, text in texts.items():
            entry = self.entries.get(os.path.abspath(path))
            if entry is None or entry.get("hash") != _digest(text):
                continue
            if entry.get("module") != list(module_name_for(path)):
                continue
            found[path] = _with_path(entry, path)
        return found

    def valid_findings(self, path: str, entry: dict, index: ProjectIndex) -> bool:
        if "findings" not in entry or "log" not in entry:
            return False
        return replay(index, path, entry["log"])

    # ------------------------------------------------------------------ writing
    def store_summary(self, path: str, text: str, summary: Optional[dict], syntax: Optional[dict]) -> None:
        self.entries[os.path.abspath(path)] = {
            "hash": _digest(text),
            "module": list(module_name_for(path)),
            "summary": summary,
            "syntax": syntax,
        }
        self.dirty = True

    def store_findings(self, path: str, text: str, diagnostics, log) -> None:
        entry = self.entries.get(os.path.abspath(path))
        if entry is None or entry.get("hash") != _digest(text):
            return
        entry["findings"] = diagnostics
        entry["log"] = log
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        self.entries = {p: e for p, e in self.entries.items() if os.path.exists(p)}
        try:
            self._prepare()
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"version": __version__, "files": self.entries}, handle, separators=(",", ":"))
            os.replace(tmp, self.file)
        except OSError:
            pass  # a read-only checkout still gets its results; only the cache is lost
        self.dirty = False

    def _prepare(self) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        tag = self.directory / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text(CACHEDIR_TAG)
        ignore = self.directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Automatically created by dslint.\n*\n")


def _with_path(entry: dict, path: str) -> dict:
    """The entry with diagnostics re-pointed at the current display path."""
    out = dict(entry)
    if "findings" in entry:
        out["findings"] = [dict(d, path=path) for d in entry["findings"]]
    if entry.get("syntax"):
        out["syntax"] = dict(entry["syntax"], path=path)
    return out
