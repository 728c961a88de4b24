"""Is this file test code? The one answer every rule and fact uses.

Test code builds loaders and datasets to exercise them (CUDA in workers under
spawn, fixed streams replayed on purpose, a few in-memory rows), so rules leave
it alone. A file is test code when a directory above it is named ``tests``,
``test`` or ``testing`` in any letter case (``Tests/`` is common in Windows-born
projects), or when its name is ``test_*.py``, ``*_test.py`` or ``conftest.py``.
"""

from __future__ import annotations

import functools
import os

TEST_DIRECTORIES = frozenset({"tests", "test", "testing"})


#: files that mark a project's root directory
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def is_test_path(path: str) -> bool:
    """``path`` (absolute, or relative to the working directory) is a file of test code. Only
    the directories inside the file's project count (below the nearest directory holding a
    ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``): a project checked out under
    ``~/testing/`` is not test code. Without such a directory, the path as given counts (an
    absolute path outside the working directory: its file name only)."""
    path = _project_relative(path)
    parts = path.replace("\\", "/").split("/")
    name = parts[-1]
    if any(part.lower() in TEST_DIRECTORIES for part in parts[:-1]):
        return True
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def is_test_module(modname: str) -> bool:
    """A dotted module name of tests (``tests.test_data``, ``Tests.ML.configs``, ``conftest``, ``data_test``)."""
    return any(
        part.lower() in TEST_DIRECTORIES or part == "conftest" or part.startswith("test_") or part.endswith("_test")
        for part in modname.split(".")
    )


def _project_relative(path: str) -> str:
    absolute = os.path.abspath(path)
    root = _project_root(os.path.dirname(absolute))
    if root is not None:
        return os.path.relpath(absolute, root)
    if os.path.isabs(path):
        relative = os.path.relpath(path)
        return relative if not relative.startswith("..") else os.path.basename(path)
    return path


@functools.lru_cache(maxsize=4096)
def _project_root(directory: str):
    """The nearest directory at or above ``directory`` that holds a project marker, or None."""
    if any(os.path.exists(os.path.join(directory, marker)) for marker in PROJECT_MARKERS):
        return directory
    parent = os.path.dirname(directory)
    return None if parent == directory else _project_root(parent)
