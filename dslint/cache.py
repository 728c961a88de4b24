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

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from dslint import __version__
from dslint.semantics.modules import module_name_for
from dslint.semantics.torch_version import declaration_stamps

if TYPE_CHECKING:  # (the project index and its replay load only when a file is checked)
    from dslint.semantics.project import ProjectIndex

# Bumped when what an entry holds changes shape (part of the cache file's name, with
# the prefilter's FACTS_VERSION).
FORMAT = "3"
#: a file modified less than this long before it was read is never trusted by its
#: modification time alone (the clock's granularity: it could change again within
#: the same tick without its time or size changing)
RACY_NS = 2_000_000_000


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


_SOURCES: Dict[str, str] = {}


def _sources() -> str:
    if "key" not in _SOURCES:  # (once per process)
        _SOURCES["key"] = sources_key()
    return _SOURCES["key"]


def cache_key(analysis_key: str) -> str:
    from dslint.prefilter import FACTS_VERSION  # (its patterns compile on import: not on a replayed run)

    form = f"{FORMAT}.{FACTS_VERSION}"
    return hashlib.blake2b(f"{analysis_key}\0{form}\0{_sources()}".encode(), digest_size=8).hexdigest()


def run_key(analysis_key: str) -> str:
    """The name of the run record: what the analysis sees (settings, the analysis code as
    installed: ``sources_key`` covers the prefilter too)."""
    return hashlib.blake2b(f"run\0{analysis_key}\0{FORMAT}\0{_sources()}".encode(), digest_size=8).hexdigest()


class Cache:
    def __init__(self, directory: Path, analysis_key: str) -> None:
        self.directory = directory
        key = cache_key(analysis_key)
        self.file = directory / __version__ / f"{key}.json"
        self.entries: Dict[str, dict] = {}
        self.dirty = False
        self._digests: Dict[str, str] = {}  # abspath -> digest of the text seen this run
        self._stats: Dict[str, list] = {}  # abspath -> [size, mtime_ns] of it, when old enough to trust
        try:
            with open(self.file, encoding="utf-8") as handle:
                data = json.load(handle)
            if isinstance(data, dict) and data.get("version") == __version__ and isinstance(data.get("files"), dict):
                self.entries = data["files"]
        except (OSError, ValueError):
            self.entries = {}

    # ------------------------------------------------------------------ reading
    def lookup(self, texts: Dict[str, str], stats: Optional[Dict[str, tuple]] = None) -> Dict[str, dict]:
        """Usable entries for the given files, keyed by their display paths. A file whose
        (size, mtime_ns) in ``stats`` is the one recorded with its entry is not hashed."""
        import time

        found = {}
        stats = stats or {}
        now = time.time_ns()
        for path, text in texts.items():
            key = os.path.abspath(path)
            entry = self.entries.get(key)
            st = stats.get(path)
            if st is not None and now - st[1] > RACY_NS:
                self._stats[key] = list(st)
            if entry is not None and st is not None and entry.get("st") == list(st) and "hash" in entry:
                digest = self._digests[key] = entry["hash"]
            else:
                digest = self._digests[key] = _digest(text)
            if entry is None or entry.get("hash") != digest:
                continue
            if entry.get("module") != list(module_name_for(path)):
                continue
            if entry.get("st") != self._stats.get(key):  # (hashed: the stat to trust next time)
                self._entry(path, text)
            found[path] = _with_path(entry, path)
        return found

    def _hash(self, key: str, text: str) -> str:
        digest = self._digests.get(key)
        if digest is None:
            digest = self._digests[key] = _digest(text)
        return digest

    def valid_findings(self, path: str, entry: dict, index: "ProjectIndex") -> bool:
        if "findings" not in entry or "log" not in entry:
            return False
        from dslint.semantics.view import replay

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
        st = self._stats.get(key)
        if entry.get("st") != st:
            if st is None:
                entry.pop("st", None)
            else:
                entry["st"] = st
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
        # one json.dumps and one write: json.dump's streaming writes are ~10x slower
        _write(self.directory, self.file, json.dumps({"version": __version__, "files": self.entries}, separators=(",", ":")))
        self.dirty = False


def _write(directory: Path, file: Path, data: str) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tag = directory / "CACHEDIR.TAG"
        if not tag.exists():
            tag.write_text(CACHEDIR_TAG)
        ignore = directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Automatically created by dslint.\n*\n")
        import tempfile

        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, file)
    except OSError:
        pass  # a read-only checkout still gets its results; only the cache is lost


class RunRecord:
    """The findings of the last whole run for one exact set of files (``<key>.run.json``).

    Its identity is a digest of the run's settings and of every file's display path,
    absolute path, module name, size and modification time, and of the size and time of
    the files that declare the projects' dependencies (``torch_version``: read by DSL403). When a rerun's digest is
    the same, nothing changed that the analysis could see: its findings are printed
    without reading, decoding or hashing any file, loading the per-file cache, building
    the project index or importing libcst. Any difference (an edited, added or removed
    file, other settings, other dslint code) misses, and the run goes through the
    per-file cache as before. A file modified within ``RACY_NS`` of being read is not
    recorded (its time could not tell a later edit in the same clock tick).
    """

    def __init__(self, directory: Path, key: str, settings_key: str, files: Sequence[tuple]) -> None:
        """``files``: (display path, abspath, explicit, size, mtime_ns) of every file of the run."""
        import time

        self.directory = directory
        self.key = key
        self.file = directory / __version__ / f"{key}.run.json"  # (key: ``run_key``)
        now = time.time_ns()
        self.recordable = all(now - f[4] > RACY_NS for f in files)
        rows = [[p, a, bool(e), size, mtime, *module_name_for(a)] for p, a, e, size, mtime in files]
        rows.append(declaration_stamps([f[1] for f in files]))  # requirements/setup: the torch version
        self.digest = hashlib.blake2b(json.dumps([settings_key, rows]).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    def load(self) -> Optional[dict]:
        """The recorded run (``diagnostics``, ``files``, ``selected``) when it is this run."""
        try:
            with open(self.file, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("digest") != self.digest or not isinstance(data.get("diagnostics"), list):
            return None
        return data

    def save(self, diagnostics: List[dict], files: int, selected: int) -> None:
        if not self.recordable:
            return
        data = {"digest": self.digest, "files": files, "selected": selected, "diagnostics": diagnostics}
        _write(self.directory, self.file, json.dumps(data, separators=(",", ":")))


def _with_path(entry: dict, path: str) -> dict:
    """The entry with diagnostics re-pointed at the current display path."""
    out = dict(entry)
    if "findings" in entry:
        out["findings"] = [dict(d, path=path) for d in entry["findings"]]
    if entry.get("syntax"):
        out["syntax"] = dict(entry["syntax"], path=path)
    return out
