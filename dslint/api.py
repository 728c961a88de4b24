"""The programmatic face of ``dslint check``: files in, findings and an exit code out."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from dslint.cache import Cache, RunRecord, default_cache_dir, run_key
from dslint.config import Settings
from dslint.report import Finding
from dslint.discovery import Discovery
from dslint.engine import CheckResult, FileInput
from dslint.project_files import ContextCandidate, context_candidates

if TYPE_CHECKING:  # (the notebook modules load only when a notebook is checked)
    from dslint.notebooks import Notebook

NOTEBOOK_SUFFIX = ".ipynb"  # (notebooks.SUFFIX: checked here without importing it)


def is_notebook(path: str) -> bool:
    return path.lower().endswith(NOTEBOOK_SUFFIX)


@dataclass
class CheckOptions:
    stdin_filename: Optional[str] = None
    use_cache: bool = True
    use_prefilter: bool = True
    jobs: Optional[int] = None


@dataclass
class Outcome:
    result: CheckResult
    diagnostics: List[Finding] = field(default_factory=list)
    no_files: bool = False
    baselined: int = 0  # findings hidden by the baseline
    #: (path, reason) of every path named explicitly that --force-exclude left out
    excluded: List[Tuple[str, str]] = field(default_factory=list)
    #: symlinks found walking whose target does not exist: skipped (``Discovery.dangling``)
    skipped: List[str] = field(default_factory=list)


def _input(path: str, abspath: str, data: bytes, explicit: bool, notebooks: Dict[str, Notebook]) -> FileInput:
    """A file read: a notebook (``*.ipynb``) becomes the UTF-8 bytes of its joined code
    cells (recorded in ``notebooks``); one that cannot be read as a notebook, a DSL002."""
    if not is_notebook(path):
        return FileInput(path, abspath, data=data, explicit=explicit)
    from dslint.notebooks import Notebook, NotebookError

    try:
        notebook = Notebook.from_bytes(data)
    except NotebookError as exc:
        return FileInput(path, abspath, error=f"cannot read {path} as a Jupyter notebook: {exc}")
    notebooks[path] = notebook
    return FileInput(path, abspath, data=notebook.code_bytes(), explicit=explicit)


def _collect(paths: Sequence[str], settings: Settings, options: CheckOptions,
             excluded: Optional[List[Tuple[str, str]]], notebooks: Dict[str, Notebook],
             skipped: Optional[List[str]] = None) -> Tuple[List[FileInput], list]:
    """The input read from stdin (if any) and the files discovery found, not read yet."""
    discovery = Discovery(settings)
    inputs: List[FileInput] = []
    file_paths = [p for p in paths if p != "-"]
    if "-" in paths:
        name = options.stdin_filename or "-"
        abspath = os.path.abspath(name) if name != "-" else os.path.abspath("<stdin>.py")
        reason = discovery.force_excluded(abspath, False) if name != "-" else None
        if reason is None:
            inputs.append(_input(name, abspath, sys.stdin.buffer.read(), True, notebooks))
        elif excluded is not None:
            excluded.append((name, reason))
    candidates = discovery.collect(file_paths)
    if excluded is not None:
        excluded.extend(discovery.excluded_explicit)
    if skipped is not None:
        skipped.extend(discovery.dangling)
    # the rest of the named files' packages: read for cross-file facts, never reported
    stdin = [item.abspath for item in inputs if options.stdin_filename]
    candidates.extend(context_candidates(paths, candidates, discovery, stdin))
    return inputs, candidates


def _stat(candidate) -> object:
    """``os.stat`` of a candidate, or the OSError it raised (None when it is missing or
    discovery already failed on it)."""
    if candidate.missing or candidate.error is not None:
        return None
    try:
        return os.stat(candidate.abspath)
    except OSError as exc:
        return exc


def _read(candidate, st, notebooks: Dict[str, Notebook]) -> FileInput:
    item = _read_file(candidate, st, notebooks)
    item.context = isinstance(candidate, ContextCandidate)
    return item


def _read_file(candidate, st, notebooks: Dict[str, Notebook]) -> FileInput:
    if candidate.missing:
        return FileInput(candidate.path, candidate.abspath, error=f"{candidate.path}: No such file or directory")
    if candidate.error is not None:
        return FileInput(candidate.path, candidate.abspath, error=candidate.error)
    try:
        if isinstance(st, OSError):
            raise st
        # A FIFO or device named *.py (or a symlink to /dev/zero) would block or
        # never end: only regular files are read.
        if not stat.S_ISREG(st.st_mode):
            return FileInput(candidate.path, candidate.abspath, error=f"cannot read {candidate.path}: not a regular file")
        with open(candidate.abspath, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if exc.errno == errno.ELOOP:
            reason = "symlink loop"
        return FileInput(candidate.path, candidate.abspath, error=f"cannot read {candidate.path}: {reason}")
    item = _input(candidate.path, candidate.abspath, data, candidate.explicit, notebooks)
    if item.path not in notebooks and len(data) == st.st_size:
        item.stat = (st.st_size, st.st_mtime_ns)
    return item


def read_inputs(paths: Sequence[str], settings: Settings, options: CheckOptions,
                excluded: Optional[List[Tuple[str, str]]] = None,
                notebooks: Optional[Dict[str, Notebook]] = None) -> List[FileInput]:
    """The files to check, read. Paths named explicitly that ``--force-exclude`` leaves
    out are appended to ``excluded`` with the pattern that excluded them. Notebooks are
    read as their joined code cells, and recorded (display path -> ``Notebook``) in
    ``notebooks``."""
    notebooks = {} if notebooks is None else notebooks
    inputs, candidates = _collect(paths, settings, options, excluded, notebooks)
    inputs.extend(_read(candidate, _stat(candidate), notebooks) for candidate in candidates)
    return inputs


def _run_record(settings: Settings, options: CheckOptions, inputs, stats) -> Optional[RunRecord]:
    """The record of a whole run of exactly these files (``cache.RunRecord``), when this
    run can have one: the cache is on, nothing read from stdin, only regular files that
    exist (no I/O errors). Notebooks count by their stats like any file; a recorded run
    with a finding in a notebook is not replayed (``_replayed``)."""
    if not options.use_cache or inputs or not stats:
        return None
    files = []
    for candidate, st in stats:
        if st is None or isinstance(st, OSError) or not stat.S_ISREG(st.st_mode):
            return None
        files.append((candidate.path, candidate.abspath, candidate.explicit, st.st_size, st.st_mtime_ns))
    context = sorted(c.abspath for c, _ in stats if isinstance(c, ContextCandidate))
    key = json.dumps([settings.analysis_key(), settings.per_file_ignores, str(settings.root), settings.max_file_size,
                      options.use_prefilter, context], sort_keys=True)
    return RunRecord(default_cache_dir(Path(settings.root), settings.cache_dir), run_key(settings.analysis_key()), key, files)


def _replayed(data: dict, stats) -> Optional[CheckResult]:
    """The recorded run as a result; the texts of the files with findings are read again
    (for the baseline, ``--add-noqa``). None if one of them cannot be read as before, or
    is a notebook."""
    from dslint.source import SourceError, decode

    result = CheckResult(files=data.get("files", 0), selected=data.get("selected", 0), parsed=0)
    result.cached = result.selected
    result.diagnostics = [Finding.from_dict(d) for d in data["diagnostics"]]
    if any(is_notebook(d.path) for d in result.diagnostics):
        return None  # a notebook's findings carry its cells' sources: run again
    abspaths = {candidate.path: candidate.abspath for candidate, _ in stats}
    for path in sorted({d.path for d in result.diagnostics}):
        try:
            with open(abspaths[path], "rb") as handle:
                source = decode(handle.read(), path)
        except (OSError, KeyError, SourceError):
            return None
        result.texts[path] = source.text
        result.encodings[path] = (source.encoding, source.has_bom)
    return result


def check(paths: Sequence[str], settings: Settings, options: Optional[CheckOptions] = None) -> Outcome:
    options = options or CheckOptions()
    excluded: List[Tuple[str, str]] = []
    skipped: List[str] = []
    notebooks: Dict[str, Notebook] = {}
    inputs, candidates = _collect(paths, settings, options, excluded, notebooks, skipped)
    stats = [(candidate, _stat(candidate)) for candidate in candidates]
    record = _run_record(settings, options, inputs, stats)
    if record is not None:
        import time

        started = time.perf_counter()
        data = record.load()
        result = _replayed(data, stats) if data is not None else None
        if result is not None:  # nothing changed since the recorded run
            result.timings["replayed run"] = time.perf_counter() - started
            return Outcome(result=result, diagnostics=list(result.diagnostics), excluded=excluded, skipped=skipped)
    inputs.extend(_read(candidate, st, notebooks) for candidate, st in stats)
    cache = None
    if options.use_cache and inputs and "-" not in paths:
        cache = Cache(default_cache_dir(Path(settings.root), settings.cache_dir), settings.analysis_key())
    from dslint.engine import Engine

    engine = Engine(settings, use_prefilter=options.use_prefilter, jobs=options.jobs, cache=cache)
    result = engine.check(inputs)
    if notebooks:
        from dslint.notebook_findings import attach

        attach(result, notebooks)
    if record is not None and not result.internal_errors:
        record.save([d.to_dict() for d in result.diagnostics], result.files, result.selected)
    return Outcome(result=result, diagnostics=list(result.diagnostics), no_files=not inputs, excluded=excluded, skipped=skipped)


MAX_FIX_PASSES = 10


@dataclass
class FixOutcome:
    outcome: Outcome  # the check after the last pass: what remains
    fixed: dict = field(default_factory=dict)  # path -> number of fixes applied
    originals: dict = field(default_factory=dict)  # path -> original text
    results: dict = field(default_factory=dict)  # path -> fixed text
    errors: List[str] = field(default_factory=list)
    stdin_path: Optional[str] = None  # fixed stdin is printed, not written
    #: path -> (the notebook before, after) for every notebook fixed
    notebooks: dict = field(default_factory=dict)

    @property
    def total_fixed(self) -> int:
        return sum(self.fixed.values())


def fix(paths: Sequence[str], settings: Settings, options: Optional[CheckOptions] = None, *, unsafe: bool = False) -> FixOutcome:
    """Check, apply the applicable fixes, and re-check until nothing more applies.

    Nothing is written here; the caller writes ``results`` (``--fix``) or prints
    a diff (``--diff``). Every fixed text must parse, or its fixes are dropped
    and reported as an internal error. A notebook's fixes apply to its cells
    (``Notebook.fixed``); its result is a ``NotebookText`` (encoded: the notebook),
    and a notebook read from stdin is printed back as the notebook's JSON.
    """
    import libcst as cst

    from dslint.fixes import apply_fixes
    from dslint.notebook_findings import NotebookText, attach
    from dslint.source import encode

    options = options or CheckOptions()
    notebooks: Dict[str, Notebook] = {}
    inputs = read_inputs(paths, settings, options, notebooks=notebooks)
    cache = None
    if options.use_cache and inputs and "-" not in paths:
        cache = Cache(default_cache_dir(Path(settings.root), settings.cache_dir), settings.analysis_key())
    from dslint.engine import Engine

    engine = Engine(settings, use_prefilter=options.use_prefilter, jobs=options.jobs, cache=cache)
    by_path = {item.path: item for item in inputs}
    state = FixOutcome(outcome=Outcome(result=CheckResult()))
    if "-" in paths:
        state.stdin_path = options.stdin_filename or "-"
    result = engine.check(inputs)
    attach(result, notebooks)
    for _ in range(MAX_FIX_PASSES):
        applicable: dict = {}
        for d in result.diagnostics:
            if d.fix is not None and (d.fix.applicability == "safe" or unsafe) and settings.fix_allowed(d.code):
                applicable.setdefault(d.path, []).append(d.fix)
        changed = False
        for path, fixes in applicable.items():
            text = result.texts.get(path)
            if text is None:
                continue
            notebook = notebooks.get(path)
            if notebook is not None:
                fixed, count = notebook.fixed(fixes)
                new_text = NotebookText(fixed.code, fixed)
            else:
                new_text, count = apply_fixes(text, fixes)
            if not count or new_text == text:
                continue
            try:
                cst.parse_module(str(new_text))  # (a NotebookText encodes to its notebook)
            except Exception as exc:  # a fix must never break the file
                state.errors.append(f"internal error: fixes for {path} would not parse ({type(exc).__name__}); not applied")
                continue
            state.originals.setdefault(path, text)
            state.results[path] = new_text
            state.fixed[path] = state.fixed.get(path, 0) + count
            encoding, bom = result.encodings[path]
            item = by_path[path]
            if notebook is not None:
                data = fixed.code_bytes()
                notebooks[path] = fixed
                state.notebooks[path] = (state.notebooks.get(path, (notebook,))[0], fixed)
            else:
                data = encode(new_text, encoding, bom)
            by_path[path] = FileInput(item.path, item.abspath, data=data, explicit=item.explicit)
            changed = True
        if not changed:
            break
        result = engine.check(list(by_path.values()))
        attach(result, notebooks)
    if state.stdin_path in notebooks:  # printed back as the notebook it was read as
        state.results[state.stdin_path] = notebooks[state.stdin_path].dump().decode("utf-8-sig", "surrogatepass")
    state.outcome = Outcome(result=result, diagnostics=list(result.diagnostics), no_files=not inputs)
    return state


def write_fixes(state: FixOutcome) -> None:
    from dslint.source import encode

    for path, text in state.results.items():
        if path == state.stdin_path:
            continue
        encoding, bom = state.outcome.result.encodings.get(path, ("utf-8", False))
        with open(path, "wb") as handle:
            handle.write(encode(text, encoding, bom))


def unified_diff(state: FixOutcome) -> str:
    import difflib

    from dslint.notebook_findings import cell_diff
    from dslint.source import split_lines

    chunks = []
    for path in sorted(state.results):  # Python's lines: a form feed or U+2028 does not end one
        if path in state.notebooks:
            chunks.extend(cell_diff(path, *state.notebooks[path]))
            continue
        if path not in state.originals:  # a notebook read from stdin, unchanged
            continue
        before = split_lines(state.originals[path], keepends=True)
        after = split_lines(state.results[path], keepends=True)
        chunks.extend(difflib.unified_diff(before, after, fromfile=f"a/{path}", tofile=f"b/{path}"))
    return "".join(chunks)
