"""The project around the files given: what cross-file facts are read from.

A file's findings may depend on other files of its project (a base class, a
``worker_init_fn`` that shards, a DataLoader built elsewhere over its dataset). So
that they do not depend on which files were named on the command line, the files
of the packages the named files belong to take part in the analysis as *context*:
they are read, prefiltered and summarised like any other file (so the project index
is the one a run over the whole package builds), but never reported on.

The package root of a file is the topmost directory above it that is a package
(``__init__.py``); everything under it is context. A file outside any package (a
script) sees its own directory as ``sys.path`` does: the modules next to it and the
packages there. Excludes and ``.gitignore`` apply as when walking.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, List, Sequence, Set

from dslint.discovery import Candidate, Discovery
from dslint.semantics.alternatives import locate_all
from dslint.semantics.modules import canonical

if TYPE_CHECKING:
    from dslint.semantics.project import ProjectIndex

#: a root with more files than this is not read as context (a run over it is the way)
MAX_CONTEXT_FILES = 5000


class ContextCandidate(Candidate):
    """A file of a named file's package that was not named: analysed, not reported."""


def _is_package(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "__init__.py"))


def package_root(abspath: str) -> tuple:
    """(directory, whole): the topmost package directory above ``abspath`` (whole: every
    file under it), or the file's own directory when it is in no package (whole:
    False, only its modules and packages)."""
    directory = os.path.dirname(abspath)
    if not _is_package(directory):
        return directory, False
    while True:
        parent = os.path.dirname(directory)
        if parent == directory or not _is_package(parent):
            return directory, True
        directory = parent


def _walk(discovery: Discovery, root: str, whole: bool, found: List[str]) -> bool:
    """Append the files of ``root`` to ``found``; False when there are too many."""
    stack = [(root, whole)]
    while stack:
        directory, all_files = stack.pop()
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            rel = os.path.relpath(entry.path, discovery.root).replace(os.sep, "/")
            if is_dir:
                if (all_files or _is_package(entry.path)) and not discovery.excluded(entry.path, True, rel):
                    stack.append((entry.path, True))
            elif is_file and entry.name.endswith(".py") and discovery.included(entry.name, rel):
                if not discovery.excluded(entry.path, False, rel):
                    found.append(entry.path)
                    if len(found) > MAX_CONTEXT_FILES:
                        return False
    return True


def context_candidates(paths: Sequence[str], candidates: Sequence[Candidate], discovery: Discovery,
                       stdin: Sequence[str] = ()) -> List[Candidate]:
    """The files of the named files' packages that were not named themselves (a root
    inside a directory that was named was walked already). ``stdin``: the paths source
    read from stdin stands for (``--stdin-filename``): its file on disk is not read."""
    candidates = [*candidates, *(Candidate(path, path) for path in stdin)]
    given: Set[str] = {c.abspath for c in candidates}
    walked = [os.path.abspath(p) for p in paths if p != "-" and os.path.isdir(p)]
    roots: Dict[str, bool] = {}
    for candidate in candidates:
        if candidate.missing or candidate.error is not None or not candidate.abspath.endswith(".py"):
            continue
        root, whole = package_root(candidate.abspath)
        if any(root == top or root.startswith(top.rstrip(os.sep) + os.sep) for top in walked):
            continue
        roots[root] = roots.get(root, False) or whole
    out: List[Candidate] = []
    seen: Set[str] = set(given)
    for root in sorted(roots):
        files: List[str] = []
        if not _walk(discovery, root, roots[root], files):
            continue
        for path in files:
            if path not in seen:
                seen.add(path)
                out.append(ContextCandidate(discovery.display(path), path))
    return out


def reached_files(index: "ProjectIndex", summaries: Dict[str, dict], by_module: Dict[str, List[str]]) -> Set[str]:
    """Files (not yet summarised) that define something dataset code refers to; the function an
    epoch loop hands the result of a factory to (``epoch_facts``), when the factory's module builds
    DataLoaders (a module that does passed the prefilter; a package may re-export its function); and
    a function handed by name to one that calls that parameter with a worker count (``function_values``)."""
    wanted: Dict[str, str] = {}  # qualified name -> a file that refers to it
    per_sample_by_path: Dict[str, List[tuple]] = {}
    for key in index.per_sample:
        per_sample_by_path.setdefault(key[0], []).append(key)
    for path, summary in summaries.items():
        for cls in summary["classes"].values():
            wanted.update((b, path) for b in cls["bases"] if b and b not in wanted)
        for key in per_sample_by_path.get(path, ()):
            facts = index.function_facts(key)
            for kind, target, _ in facts["calls"] if facts else ():
                if kind == "func":
                    wanted.setdefault(target, path)
        for reference in summary.get("references", ()):
            wanted.setdefault(reference, path)
            locate_all(index, canonical(reference), path)  # notes star-imported modules not summarised yet
    for path, summary in summaries.items():  # a function an epoch loop hands the result of a loader-building module's function to
        for qualified, *handed in summary.get("epoch_results", ()):
            located = index.locate(qualified, path, table="functions") if handed else None
            if located is not None and summaries[located[0]].get("loaders"):
                wanted.setdefault(handed[0], path)
                locate_all(index, canonical(handed[0]), path)  # (as for references)
            elif handed and located is None and any(p.endswith("__init__.py") for p in by_module.get(qualified.rpartition(".")[0], ())):
                wanted.setdefault(qualified, path)  # (a package that may re-export a loader-building module's function)
    receivers = {qualified for summary in summaries.values() for qualified in summary.get("receivers", ())}
    for path, summary in summaries.items():
        for qualified, refs in summary.get("eval_references", {}).items():
            if qualified in receivers:
                for ref in refs:
                    wanted.setdefault(ref, path)
    handed_to = {(path, qualified) for path, summary in summaries.items() for qualified, *_ in summary.get("worker_params", ())}
    for path, summary in summaries.items():  # a function handed by name to one that calls it with workers (``function_values``)
        for callee, _, handed in summary.get("function_args", ()) if handed_to else ():
            if index.locate(canonical(callee), path, table="functions") in handed_to:
                wanted.setdefault(handed, path)
                locate_all(index, canonical(handed), path)  # (as for references: a package may re-export it)
    found: Set[str] = {path for path in index.wanted_paths if path not in summaries}  # (through star imports)
    for qualified, referrer in wanted.items():
        parts = qualified.split(".")
        for i in range(len(parts) - 1, 0, -1):
            # a module of that name, else one rooted above the referring file (a script's ``sys.path``)
            for path in by_module.get(".".join(parts[:i])) or index.rooted_paths(parts[:i], referrer):
                if path not in summaries:
                    found.add(path)
    return found
