"""Is this file test code? The one answer every rule and fact uses.

Test code builds loaders and datasets to exercise them (CUDA in workers under
spawn, fixed streams replayed on purpose, a few in-memory rows), so rules leave
it alone. A file is test code when a directory above it is named ``tests``,
``test`` or ``testing`` in any letter case (``Tests/`` is common in Windows-born
projects), or when its name is ``test_*.py``, ``*_test.py`` or ``conftest.py``.
"""

from __future__ import annotations

import os

TEST_DIRECTORIES = frozenset({"tests", "test", "testing"})


def is_test_path(path: str) -> bool:
    """``path`` (absolute, or relative to the working directory) is a file of test code."""
    if os.path.isabs(path):
        relative = os.path.relpath(path)
        path = relative if not relative.startswith("..") else os.path.basename(path)
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
