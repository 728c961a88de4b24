"""A text pass that decides which files can matter, before any parsing.

Parsing is ~90% of a check's cost, and most files of a project never touch a
dataset. A file is parsed when it mentions a word the rules look for (torch's
data API, DSL noqa codes), or mentions a class
name that textually derives from a dataset class in *any* checked file (the
fixed point over ``class X(Base)`` statements and ``Alias = Base`` assignments),
so a subclass in a file that never says "Dataset" is still analysed. A DataLoader wrapper (a
class with an ``__iter__`` in a file that says "DataLoader") counts as such a root: a file that
iterates its instances (``for batch in Batches(...)``) is analysed too, and so does a module-level
function of such a file that takes ``**kwargs`` (a loader builder): a file that calls it or hands it
on by name (``make_loaders(cfg, get_loader)``) is analysed.
The engine later pulls in any file whose functions are reached from dataset
code. ``--no-prefilter`` parses everything; a test checks both give identical
findings.
"""

from __future__ import annotations

import hashlib
import re
from typing import Dict, Iterable, List, Optional, Set, Tuple

# Bumped when ``file_facts`` changes what it reads (cached facts are then discarded).
FACTS_VERSION = 6

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
    "set_epoch",  # the project-wide "nothing sets a sampler's epoch" needs every file that does
    "set_start_method",  # the project-wide start method (DSL204) needs every file that sets one
    "num_workers",  # a caller or a command-line option elsewhere may give a loader its worker count
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
# The three line patterns below are searched in "\n" + text, each starting with the "\n"
# that precedes its line (where ``^`` with re.MULTILINE would test every position, a
# literal first character lets the regex engine skip to the next newline). The same
# matches: none of them can end just after a newline, so consuming the newline before
# a line never hides the next match; ``(?=\n|\Z)`` is MULTILINE's ``$``.
_IMPORT_LINE = re.compile(r"\n[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)")
_CLASS = re.compile(r"\n[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)")
_ALIAS = re.compile(r"\n(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*([\w.]+)[ \t]*(?=\n|\Z)")
_WORD = re.compile(r"\w+")


def class_edges(text: str) -> List[Tuple[str, Set[str]]]:
    """(class name, words in its bases) for every class statement, plus ``A = B``
    aliases and ``import B as A`` renames."""
    lines = "\n" + text
    edges = [(m.group(1), set(_WORD.findall(m.group(2)))) for m in _CLASS.finditer(lines)] if "class" in text else []
    if "=" in text:
        edges.extend((m.group(1), {m.group(2).rsplit(".", 1)[-1]}) for m in _ALIAS.finditer(lines))
    if " as " in text:
        for line in _IMPORT_LINE.finditer(lines):
            edges.extend((m.group(2), {m.group(1)}) for m in _IMPORT_AS.finditer(line.group()))
    return edges


def torchvision_roots(text: str) -> Set[str]:
    """Class names a text takes from torchvision.datasets (all of them are datasets)."""
    if "torchvision" not in text:
        return set()
    names = {w for m in _TV_IMPORT.finditer(text) for w in _WORD.findall(m.group(1)) if w[:1].isupper()}
    names.update(m.group(1) for m in _TV_ATTR.finditer(text))
    return names


_CLASS_OR_ITER = re.compile(r"\n[ \t]*class[ \t]+(\w+)|\n[ \t]*def[ \t]+(__iter__)\b")


def loader_wrappers(text: str) -> Set[str]:
    """Classes of a text that says "DataLoader" which define ``__iter__`` (the ``def __iter__`` belongs
    to the last ``class`` statement before it: a nested class may make this pick one too many,
    which only parses a file more)."""
    if "DataLoader" not in text or "__iter__" not in text:
        return set()
    found, last = set(), None
    for match in _CLASS_OR_ITER.finditer("\n" + text):
        if match.group(1):
            last = match.group(1)
        elif last is not None:
            found.add(last)
    return found


_FORWARDER = re.compile(r"\ndef[ \t]+(\w+)[ \t]*\(([^)]*)\)")


def kwargs_forwarder_defs(text: str) -> Set[str]:
    """Module-level functions of a text that says "DataLoader" that take ``**kwargs`` (``def
    get_loader(path, **kwargs)``): a caller's keywords may reach a loader through them, and a
    file that calls one, or hands it to another function by name, is analysed too."""
    if "DataLoader" not in text or "**" not in text:
        return set()
    return {match.group(1) for match in _FORWARDER.finditer("\n" + text) if "**" in match.group(2)}


def dataset_names(edges_by_file: Iterable[List[Tuple[str, Set[str]]]], roots: Set[str] = frozenset()) -> Set[str]:
    """Names that textually derive from a dataset root (a root word, or one of
    ``roots``), transitively."""
    names: Set[str] = set(roots)
    # name -> the names deriving from it; seeds: edges with a root word in a base
    derived_from: Dict[str, List[str]] = {}
    work: List[str] = []
    for file_edges in edges_by_file:
        for name, bases in file_edges:
            if any(_ROOT_WORD.search(b) for b in bases):
                work.append(name)
            for base in bases:
                derived_from.setdefault(base, []).append(name)
    work.extend(names)
    while work:
        name = work.pop()
        if name not in names:
            names.add(name)
        for child in derived_from.pop(name, ()):
            if child not in names:
                work.append(child)
    return names


def _word_regex(words: Set[str]):
    r"""``(?:w1|w2|...)\b`` for ``words``, as a trie (shared prefixes merged): the
    regex engine then rejects a position after one character test instead of one per
    word, which is what makes the search over hundreds of names fast. Without a leading
    ``\b`` the engine skips to the next possible first letter; ``mentions_word`` checks
    the word boundary before a match."""
    if not words:
        return None
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = True

    def pattern(node: dict) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        if len(branches) == 1 and "" not in node:
            return branches[0]
        return "(?:" + "|".join(branches) + ")" + ("?" if "" in node else "")

    return re.compile(pattern(trie) + r"\b")


_WORD_CHAR = re.compile(r"\w")


def mentions_word(pattern, text: str) -> bool:
    r"""``re.search(r"\b" + pattern.pattern, text)`` for a ``_word_regex`` (every word
    starts with a word character, so ``\b`` before it means: no word character just
    before): each match preceded by a word character is skipped for the next position."""
    pos = 0
    while True:
        match = pattern.search(text, pos)
        if match is None:
            return False
        start = match.start()
        if start == 0 or _WORD_CHAR.match(text, start - 1) is None:
            return True
        pos = start + 1


_CORE_GROUPS = tuple(
    (shared, tuple(w for w in CORE_WORDS if shared in w and (shared or not any(s and s in w for s in ("Data", "worker_")))))
    for shared in ("Data", "worker_", "")
)
_TV_FROM = re.compile(r"from[ \t]+torchvision[ \t]+import[^\n]*\bdatasets\b")


def mentions_core(text: str) -> bool:
    """``CORE.search(text) or _NOQA_DSL.search(text)``, with plain substring tests
    first (each a fast scan, where the regex alternation tests every position; the
    words sharing "Data" or "worker_" are looked for only when that is there)."""
    for group, words in _CORE_GROUPS:
        if group in text and any(word in text for word in words):
            return True
    if "torchvision" in text and _TV_FROM.search(text):
        return True
    if "dslint:" in text:
        return True
    return "noqa" in text and _NOQA_DSL.search(text) is not None


def file_facts(text: str) -> list:
    """What the prefilter reads from one text, as JSON-able data (cached per content):
    ``[mentions a core word or a DSL noqa, torchvision roots, class edges]``."""
    core = mentions_core(text)
    roots = sorted(torchvision_roots(text) | loader_wrappers(text) | kwargs_forwarder_defs(text)) if core else []
    edges = []
    if "class" in text or "=" in text or " as " in text:
        edges = [[name, sorted(bases)] for name, bases in class_edges(text)]
    return [core, roots, edges]


class Selection:
    """The result of ``select``: the chosen paths, and what can be cached for next time."""

    def __init__(self) -> None:
        self.chosen: Set[str] = set()
        self.facts: Dict[str, list] = {}  # path -> file_facts
        self.derived_key: str = ""  # identifies the derived-name set the matches were made against
        self.matches: Dict[str, bool] = {}  # path (not core) -> mentions a derived name


def select(texts: Dict[str, str], facts: Optional[Dict[str, list]] = None, matches: Optional[Dict[str, list]] = None):
    """The paths (keys of ``texts``) worth parsing.

    ``facts``/``matches``: what an earlier run computed for files with the same text
    (``Selection.facts`` and ``[derived_key, matched]``); only the rest is scanned.
    Returns the set of chosen paths, or with ``facts`` given, a ``Selection``.
    """
    selection = _select(texts, facts or {}, matches or {})
    return selection if facts is not None else selection.chosen


def _select(texts: Dict[str, str], known: Dict[str, list], known_matches: Dict[str, list]) -> Selection:
    out = Selection()
    roots: Set[str] = set()
    edges: List[list] = []
    for path, text in texts.items():
        found = known.get(path)
        if found is None:
            found = file_facts(text)
        out.facts[path] = found
        core, file_roots, file_edges = found
        if core:
            out.chosen.add(path)
            roots.update(file_roots)
        if file_edges:
            edges.append([(name, set(bases)) for name, bases in file_edges])
    derived = dataset_names(edges, roots) - set(CORE_WORDS)
    if not derived:
        return out
    out.derived_key = hashlib.blake2b("\n".join(sorted(derived)).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    pattern = None
    for path, text in texts.items():
        if path in out.chosen:
            continue
        previous = known_matches.get(path)
        if previous is not None and previous[0] == out.derived_key:
            matched = bool(previous[1])
        else:
            if pattern is None:
                pattern = _word_regex(derived)
            matched = mentions_word(pattern, text)
        out.matches[path] = matched
        if matched:
            out.chosen.add(path)
    return out
