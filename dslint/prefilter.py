"""A text pass that decides which files can matter, before any parsing.

Parsing is ~90% of a check's cost, and most files of a project never touch a
dataset. A file is parsed when it mentions a word the rules look for (torch's
data API, DSL noqa codes), or mentions a class
name that textually derives from a dataset class in *any* checked file (the
fixed point over ``class X(Base)`` statements and ``Alias = Base`` assignments),
so a subclass in a file that never says "Dataset" is still analysed.
The engine later pulls in any file whose functions are reached from dataset
code. ``--no-prefilter`` parses everything; a test checks both give identical
findings.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Set, Tuple

CORE_WORDS = (
    "Dataset",
    "DataLoader",
    "Sampler",
    "DataPipe",
    "get_worker_info",
    "worker_init_fn",
    "collate_fn",
    "torch.utils.data",
    "Subset",
    "torchvision.datasets",
)
CORE = re.compile("|".join(re.escape(w) for w in CORE_WORDS) + r"|from[ \t]+torchvision[ \t]+import[^\n]*\bdatasets\b")
_NOQA_DSL = re.compile(r"noqa[^\n]*DSL|dslint:")
# Roots: words that make a class a dataset by its base list (plus every name
# imported from torchvision.datasets, found per text by _TV_IMPORT/_TV_ATTR).
_ROOT_WORD = re.compile(r"Dataset|DataPipe|Subset")
_TV_IMPORT = re.compile(r"from[ \t]+torchvision\.datasets[\w.]*[ \t]+import[ \t]+\(?([\w, \t\\\n]+)")
_TV_ATTR = re.compile(r"\bdatasets\.([A-Z]\w*)")
# `from m import Base as Other` / `import m.Base as Other`: Other derives from Base.
_IMPORT_AS = re.compile(r"\b(\w+)[ \t]+as[ \t]+(\w+)")
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)", re.MULTILINE)
_CLASS = re.compile(r"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.MULTILINE)
_ALIAS = re.compile(r"^(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*([\w.]+)[ \t]*$", re.MULTILINE)
_WORD = re.compile(r"\w+")


def class_edges(text: str) -> List[Tuple[str, Set[str]]]:
    """(class name, words in its bases) for every class statement, plus ``A = B``
    aliases and ``import B as A`` renames."""
    edges = [(m.group(1), set(_WORD.findall(m.group(2)))) for m in _CLASS.finditer(text)]
    if "=" in text:
        edges.extend((m.group(1), {m.group(2).rsplit(".", 1)[-1]}) for m in _ALIAS.finditer(text))
    if " as " in text:
        for line in _IMPORT_LINE.finditer(text):
            edges.extend((m.group(2), {m.group(1)}) for m in _IMPORT_AS.finditer(line.group()))
    return edges


def torchvision_roots(text: str) -> Set[str]:
    """Class names a text takes from torchvision.datasets (all of them are datasets)."""
    if "torchvision" not in text:
        return set()
    names = {w for m in _TV_IMPORT.finditer(text) for w in _WORD.findall(m.group(1)) if w[:1].isupper()}
    names.update(m.group(1) for m in _TV_ATTR.finditer(text))
    return names


def dataset_names(edges_by_file: Iterable[List[Tuple[str, Set[str]]]], roots: Set[str] = frozenset()) -> Set[str]:
    """Names that textually derive from a dataset root (a root word, or one of
    ``roots``), transitively."""
    edges = [edge for file_edges in edges_by_file for edge in file_edges]
    names: Set[str] = set(roots)
    changed = True
    while changed:
        changed = False
        for name, bases in edges:
            if name in names:
                continue
            if any(_ROOT_WORD.search(b) for b in bases) or bases & names:
                names.add(name)
                changed = True
    return names


def _word_regex(words: Set[str]):
    if not words:
        return None
    # longest first so that alternatives do not shadow each other
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)) + r")\b")


def select(texts: Dict[str, str]) -> Set[str]:
    """The paths (keys of ``texts``) worth parsing."""
    chosen: Set[str] = set()
    edges: Dict[str, List[Tuple[str, Set[str]]]] = {}
    roots: Set[str] = set()
    for path, text in texts.items():
        if CORE.search(text) or _NOQA_DSL.search(text):
            chosen.add(path)
            roots |= torchvision_roots(text)
        if "class" in text or "=" in text or " as " in text:
            file_edges = class_edges(text)
            if file_edges:
                edges[path] = file_edges
    derived = dataset_names(edges.values(), roots) - set(CORE_WORDS)
    pattern = _word_regex(derived)
    if pattern is not None:
        for path, text in texts.items():
            if path not in chosen and pattern.search(text):
                chosen.add(path)
    return chosen
