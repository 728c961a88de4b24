"""Which torch the project declares: does it pin or cap torch below 1.9?

Before torch 1.9 a DataLoader worker seeded Python's ``random`` and torch per worker but
not numpy: every forked worker started with the parent's numpy global RNG state. A project
runs on the torch its declarations allow, so the answer comes from the files that declare
it: ``requirements*.txt`` (also under ``requirements/``), ``setup.py`` / ``setup.cfg`` /
``pyproject.toml`` dependency strings and conda ``environment*.yml`` files, in the nearest
directory above a file that has any of them (at most ``MAX_UP`` levels up, not above a
``.git`` folder).

The project is *old* when one declaration caps or pins torch (``torch`` or conda's
``pytorch``) below 1.9 (``==1.6.0``, ``=1.6``, ``<1.9``, ``<=1.8.1``, ``~=1.7.0``) and no
declaration asks for 1.9 or later (``>=1.10``, ``==2.0``). Anything else (no declaration,
only lower bounds, unparsable) is not old: rules stay silent.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Tuple

MAX_UP = 4
FIXED = (1, 9)  # the first torch that seeds numpy in each worker

_PATTERNS = ("requirements", "environment", "setup.py", "setup.cfg", "pyproject.toml", "conda")
_SPEC = re.compile(
    r"""(?<![\w.-])(?:py)?torch(?:\[[^\]]*\])?\s*((?:(?:===|==|~=|!=|<=|>=|<|>|=)\s*[0-9][0-9A-Za-z.*+]*\s*,?\s*)+|\s+[0-9][0-9.]*)""",
)
_CLAUSE = re.compile(r"(===|==|~=|!=|<=|>=|<|>|=)?\s*([0-9][0-9A-Za-z.*+]*)")
_cache: Dict[tuple, Optional[Tuple[str, str]]] = {}


def _version(text: str) -> Optional[Tuple[int, int]]:
    m = re.match(r"(\d+)\.(\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.match(r"(\d+)(?![\d.])", text)
    return (int(m.group(1)), 0) if m else None


def spec_verdict(spec: str) -> Optional[bool]:
    """True: the spec keeps torch below 1.9; False: it asks for 1.9 or later; None: neither."""
    old = new = False
    for op, raw in _CLAUSE.findall(spec):
        version = _version(raw)
        if version is None:
            continue
        op = op or "=="
        if op in ("==", "===", "=", "~="):
            (old, new) = (old or version < FIXED, new or version >= FIXED)
        elif op == "<":
            old = old or version <= FIXED
        elif op == "<=":
            old = old or version < FIXED
        elif op in (">=", ">"):
            new = new or version >= FIXED
    if new:
        return False
    return True if old else None


def _declaration_files(directory: str) -> List[str]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found = []
    for name in names:
        low = name.lower()
        path = os.path.join(directory, name)
        if low in ("setup.py", "setup.cfg", "pyproject.toml"):
            found.append(path)
        elif (low.startswith("requirements") or low.startswith("environment") or low.startswith("conda")) and (
            low.endswith((".txt", ".yml", ".yaml", ".in"))
        ):
            found.append(path)
        elif low == "requirements" and os.path.isdir(path):
            found += [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith((".txt", ".in"))]
    return [p for p in found if os.path.isfile(p)]


def _project_files(start: str) -> Tuple[Optional[str], List[str]]:
    directory = start
    for _ in range(MAX_UP + 1):
        files = _declaration_files(directory)
        if files:
            return directory, files
        if os.path.isdir(os.path.join(directory, ".git")):
            return None, []
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return None, []


def _stamp(files: List[str]) -> tuple:
    out = []
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            continue
        out.append((path, st.st_size, st.st_mtime_ns))
    return tuple(out)


def declaration_stamps(paths) -> list:
    """(path, size, mtime) of the declaring files of every project the given files are in: what a
    whole-run record must also match (the files are read outside the per-file cache)."""
    seen_dirs, found = set(), set()
    for path in paths:
        directory = os.path.dirname(os.path.abspath(path))
        if directory in seen_dirs:
            continue
        seen_dirs.add(directory)
        found.update(_stamp(_project_files(directory)[1]))
    return sorted(found)


def old_torch(path: str) -> Optional[Tuple[str, str]]:
    """(declaring file relative to its project directory, the spec as written) when the project
    of the file at ``path`` keeps torch below 1.9; None otherwise."""
    start = os.path.dirname(os.path.abspath(path))
    root, files = _project_files(start)
    if root is None:
        return None
    key = (root, _stamp(files))
    if key not in _cache:
        _cache[key] = _verdict(root, files)
    return _cache[key]


def _verdict(root: str, files: List[str]) -> Optional[Tuple[str, str]]:
    first = None
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read(200_000)
        except OSError:
            continue
        for line in text.splitlines():
            line = line.split("#", 1)[0]
            for m in _SPEC.finditer(line):
                verdict = spec_verdict(m.group(1))
                if verdict is False:
                    return None
                if verdict and first is None:
                    first = (os.path.relpath(path, root).replace(os.sep, "/"), m.group(0).strip().strip(",\"'"))
    return first
