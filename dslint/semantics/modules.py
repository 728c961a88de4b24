"""Module names and canonical qualified names: plain strings, no libcst.

Shared by the name resolver (``names.py``), the project index (``project.py``)
and the cache, so that a warm run, which parses nothing, never imports libcst.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Callable, Dict, List, Optional

# Where torch and friends re-export a name, report the public spelling.
_CANONICAL_PREFIXES = (
    ("torch.utils.data.dataloader.", "torch.utils.data."),
    ("torch.utils.data.dataset.", "torch.utils.data."),
    ("torch.utils.data.sampler.", "torch.utils.data."),
    ("torch.utils.data.distributed.", "torch.utils.data."),
    ("torch.utils.data._utils.worker.", "torch.utils.data."),
    ("torchvision.datasets.vision.", "torchvision.datasets."),
    ("torchvision.datasets.folder.", "torchvision.datasets."),
    ("PIL.ImageFile.ImageFile", "PIL.Image.Image"),
)
_CANONICAL_EXACT = {
    "io.open": "builtins.open",
    "torch.utils.data.DataLoader2": "torch.utils.data.DataLoader",
    # torchdata's drop-in DataLoader that can checkpoint its position: torch's signature, arguments and checks
    "torchdata.stateful_dataloader.StatefulDataLoader": "torch.utils.data.DataLoader",
    "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader": "torch.utils.data.DataLoader",
}
_CANONICAL_MEMO: Dict[str, str] = {}


def spelled_tails(tail: str) -> frozenset:
    """The last components a name ending in ``tail`` has where another name canonicalises to it
    (``StatefulDataLoader`` and ``DataLoader2`` for ``DataLoader``), ``tail`` included."""
    return frozenset({tail} | {src.rsplit(".", 1)[-1] for src, dst in _CANONICAL_EXACT.items() if dst.rsplit(".", 1)[-1] == tail})


def canonical(name: str) -> str:
    found = _CANONICAL_MEMO.get(name)
    if found is not None:
        return found
    result = _CANONICAL_EXACT.get(name)
    if result is None:
        result = name
        for prefix, replacement in _CANONICAL_PREFIXES:
            if name.startswith(prefix):
                result = replacement + name[len(prefix) :]
                break
    if len(_CANONICAL_MEMO) < 100_000:
        _CANONICAL_MEMO[name] = result
    return result


@lru_cache(maxsize=4096)
def _is_package_dir(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "__init__.py")) or os.path.isfile(
        os.path.join(directory, "__init__.pyi")
    )


def module_name_for(path: str) -> tuple[str, bool]:
    """Dotted module name of a file, from the packages (``__init__.py``) above it."""
    path = os.path.abspath(path)
    directory, filename = os.path.split(path)
    stem = filename.rsplit(".", 1)[0] if "." in filename else filename
    is_package = stem == "__init__"
    if is_package:
        parts = [*_package_parts(os.path.dirname(directory)), os.path.basename(directory)]
    else:
        parts = [*_package_parts(directory), stem]
    name = ".".join(p for p in parts if p)
    return (name or stem), is_package


@lru_cache(maxsize=4096)
def _package_parts(directory: str) -> tuple:
    """Names of the packages ``directory`` is inside of (itself included), outermost first."""
    parts: list = []
    while directory and _is_package_dir(directory):
        parent = os.path.dirname(directory)
        parts.insert(0, os.path.basename(directory))
        if parent == directory:
            break
        directory = parent
    return tuple(parts)


def resolve_relative(level: int, module: Optional[str], modname: str, is_package: bool) -> Optional[str]:
    package = modname if is_package else modname.rpartition(".")[0]
    pieces = package.split(".") if package else []
    if level - 1 > len(pieces):
        return None
    base = pieces[: len(pieces) - (level - 1)] if level > 1 else pieces
    if module:
        base = base + module.split(".")
    return ".".join(base) or None


def source_root(path: str, module: str) -> Optional[str]:
    """The directory above the file's top package, where its module name is rooted
    (``src/pkg/mod.py`` named ``pkg.mod``: ``src``); None when the path does not end so."""
    stem = path[:-len(".py")] if path.endswith(".py") else path
    pieces = stem.split(os.sep)
    if pieces[-1] == "__init__":
        pieces.pop()
    parts = module.split(".")
    if len(pieces) < len(parts) or pieces[len(pieces) - len(parts):] != parts:
        return None
    return os.sep.join(pieces[:len(pieces) - len(parts)])


def closest_path(paths: List[str], from_path: Optional[str], root_of: Callable[[str], Optional[str]]) -> Optional[str]:
    """Of the files several packages of one name hold, the one an import in ``from_path`` reaches:
    the one whose directory shares the longest leading part with ``from_path``'s; on a tie, the
    one whose source root (``root_of``, asked only then) holds ``from_path`` when only one does
    (``import pkg`` in ``examples/run.py`` reaches the top-level ``pkg/``, not ``other/pkg/``
    beside it); else None."""
    if len(paths) == 1:
        return paths[0]
    if from_path is None:
        return None
    here = os.path.dirname(from_path)
    best, best_len, tied = None, -1, []
    for path in paths:
        common = len(os.path.commonpath([here, os.path.dirname(path)]))
        if common > best_len:
            best, best_len, tied = path, common, [path]
        elif common == best_len:
            tied.append(path)
    if len(tied) == 1:
        return best
    roots = {p: root_of(p) for p in tied}
    holding = [p for p in tied if roots[p] is not None and (roots[p] == "" or (here + os.sep).startswith(roots[p] + os.sep))]
    return holding[0] if len(holding) == 1 else None
