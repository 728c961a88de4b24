"""Results cache, keyed by file content, dslint version, its analysis code and settings.

``.dslint_cache/<version>/<settings-key>.json`` (or ``--cache-dir``/
``DSLINT_CACHE_DIR``) holds, per file: the hash of its text, its module name, what
the prefilter read from it (``pf``, and ``pfm``: whether it mentions a name derived
from a dataset class, with the key of the derived-name set that was matched), its
summary (phase 1), and its findings with the log of every cross-file question the
rules asked (phase 2). Findings are reused only when the text is unchanged *and*
every recorded question gets the same answer from the new project index -- so
editing a base class in one file re-checks its subclasses in other files. A warm
run with nothing changed reads, hashes and replays; it parses and scans nothing.

JSON, never pickle: a cache directory committed to a repository must not be able
to run code when dslint reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Dict, Optional

from dslint import __version__
from dslint.prefilter import FACTS_VERSION
from dslint.semantics.modules import module_name_for
from dslint.semantics.project import ProjectIndex
from dslint.semantics.view import replay

# Bumped when what an entry holds changes shape (part of the cache file's name).
FORMAT = f"3.{FACTS_VERSION}"


def sources_key() -> str:
    """The analysis code as installed: the path, size and modification time of every
    module of dslint (rules, semantics, the per-file pipeline), so that a cache written
    by other rule or semantics code is never replayed (an editable install, a
    development checkout, an upgrade that kept the version number)."""
    here = os.path.dirname(os.path.abspath(__file__))
    stats = []
    for folder, dirs, files in os.walk(here):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "runtime", "formats"))
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                stats.append(f"{os.path.relpath(path, here)}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(stats)

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
        key = hashlib.blake2b(f"{analysis_key}\0{FORMAT}\0{sources_key()}".encode(), digest_size=8).hexdigest()
        self.file = directory / __version__ / f"{key}.json"
        self.entries: Dict[str, dict] = {}
        self.dirty = False
        self._digests: Dict[str, str] = {}  # abspath -> digest of the text seen this run
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
            key = os.path.abspath(path)
            digest = self._digests[key] = _digest(text)
            entry = self.entries.get(key)
            if entry is None or entry.get("hash") != digest:
                continue
            if entry.get("module") != list(module_name_for(path)):
                continue
            found[path] = _with_path(entry, path)
        return found

    def _hash(self, key: str, text: str) -> str:
        digest = self._digests.get(key)
        if digest is None:
            digest = self._digests[key] = _digest(text)
        return digest

    def valid_findings(self, path: str, entry: dict, index: ProjectIndex) -> bool:
        if "findings" not in entry or "log" not in entry:
            return False
        return replay(index, path, entry["log"])

    # ------------------------------------------------------------------ writing
    def _entry(self, path: str, text: str) -> dict:
        """The entry for ``path``, started afresh when its text changed."""
        key = os.path.abspath(path)
        digest = self._hash(key, text)
        entry = self.entries.get(key)
        module = list(module_name_for(path))
        if entry is None or entry.get("hash") != digest or entry.get("module") != module:
            entry = self.entries[key] = {"hash": digest, "module": module}
            self.dirty = True
        return entry

    def store_prefilter(self, path: str, text: str, facts: list, match: Optional[list]) -> None:
        entry = self._entry(path, text)
        if entry.get("pf") != facts:
            entry["pf"] = facts
            self.dirty = True
        if match is not None and entry.get("pfm") != match:
            entry["pfm"] = match
            self.dirty = True

    def store_summary(self, path: str, text: str, summary: Optional[dict], syntax: Optional[dict]) -> None:
        entry = self._entry(path, text)
        entry.pop("findings", None)
        entry.pop("log", None)
        entry["summary"] = summary
        entry["syntax"] = syntax
        self.dirty = True

    def store_findings(self, path: str, text: str, diagnostics, log) -> None:
        key = os.path.abspath(path)
        entry = self.entries.get(key)
        if entry is None or entry.get("hash") != self._hash(key, text):
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
            # one json.dumps and one write: json.dump's streaming writes are ~10x slower
            data = json.dumps({"version": __version__, "files": self.entries}, separators=(",", ":"))
            import tempfile

            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
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
