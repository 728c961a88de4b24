"""Orchestration of one ``dslint check`` run.

1. read and decode every file (I/O problems become DSL002 findings);
2. prefilter: pick the files that can matter (``prefilter.py``);
3. phase 1: parse each picked file once and summarise it; pull in files whose
   functions or classes dataset code reaches, until nothing new is reached;
4. build the project index from the summaries (cross-file facts);
5. phase 2: run every selected rule over each parsed file, then suppressions;
6. per-file ignores, sorted output.

Large inputs run on one worker process per core ("shards"); a shard keeps the
trees it parsed in phase 1 for phase 2, so nothing is parsed twice. Small inputs
(what pre-commit passes) run in-process. The cache (``cache.py``) skips both
phases for unchanged files whose cross-file answers are unchanged.
"""

from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Set, Tuple

from dslint.config import Settings
from dslint.project_files import reached_files
from dslint.report import ERROR, Finding
from dslint.rules.base import all_rules
from dslint.semantics.modules import module_name_for

if TYPE_CHECKING:  # multiprocessing and concurrent.futures load only when shards start
    from concurrent.futures import ProcessPoolExecutor

    from dslint.semantics.project import ProjectIndex

PARALLEL_MIN_BYTES = 256 * 1024
CHUNK_BYTES = 64 * 1024
MAX_PULL_ROUNDS = 8


@dataclass
class FileInput:
    path: str  # display path
    abspath: str
    data: Optional[bytes] = None
    error: Optional[str] = None
    #: named on the command line (or stdin): its syntax errors are reported even when
    #: the prefilter finds nothing in it to analyse
    explicit: bool = False
    #: (size, mtime_ns) when read from disk: the cache trusts an unchanged stat before hashing
    stat: Optional[Tuple[int, int]] = None
    #: a file of a named file's package (``project_files.py``): read for cross-file facts, never reported
    context: bool = False


@dataclass
class CheckResult:
    diagnostics: List[Finding] = field(default_factory=list)
    internal_errors: List[str] = field(default_factory=list)
    files: int = 0
    parsed: int = 0
    cached: int = 0
    selected: int = 0  # files the prefilter (and pull-in) chose to analyse
    processes: int = 1
    timings: Dict[str, float] = field(default_factory=dict)
    texts: Dict[str, str] = field(default_factory=dict)
    encodings: Dict[str, tuple] = field(default_factory=dict)


def io_error(path: str, message: str) -> Finding:
    rule = all_rules()["DSL002"]
    return Finding(
        code="DSL002",
        name=rule.name,
        message=message,
        path=path,
        start=(1, 1),
        end=(1, 1),
        level=ERROR,
        help=rule.help,
    )


class Engine:
    def __init__(self, settings: Settings, *, use_prefilter: bool = True, jobs: Optional[int] = None, cache=None) -> None:
        self.settings = settings
        self.use_prefilter = use_prefilter
        self.jobs = jobs if jobs is not None else (os.cpu_count() or 1)
        self.cache = cache
        self.rules = settings.enabled_rules()
        self.rule_specs = [(r.code, settings.rule_options.get(r.code, {}), settings.preview) for r in self.rules]
        self.enabled = sorted({r.code for r in self.rules} | {"DSL000", "DSL002"})

    # ------------------------------------------------------------------ public
    def check(self, inputs: Sequence[FileInput]) -> CheckResult:
        # The parsed trees (millions of small objects) stay alive until their file's
        # rules have run, so every generation-2 collection would traverse all of them
        # again: the cyclic collector costs a third of a cold run and frees nothing
        # (libcst trees hold no cycles). Off during the check, in the shard processes
        # too (forked from here); reference counting still frees everything else.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._check(inputs)
        finally:
            if enabled:
                gc.enable()

    def _check(self, inputs: Sequence[FileInput]) -> CheckResult:
        # (not imported by a run replayed whole from the cache)
        from dslint.semantics.project import ProjectIndex
        from dslint.source import SourceError, decode, is_apple_double

        clock = _Clock()
        result = CheckResult(files=sum(not item.context for item in inputs), timings=clock.laps)
        self._parsed_now: Set[str] = set()
        texts: Dict[str, str] = {}
        modules: Dict[str, Tuple[str, bool]] = {}
        sizes: Dict[str, int] = {}
        for item in inputs:
            if is_apple_double(item.path, item.data):
                continue  # macOS metadata committed next to its file: nothing to check, nothing broken
            try:
                if item.error is not None:
                    raise SourceError(item.error)
                source = decode(item.data or b"", item.path)
            except SourceError as exc:
                if not item.context:
                    result.diagnostics.append(io_error(item.path, str(exc)))
                continue
            texts[item.path] = source.text
            sizes[item.path] = len(item.data or b"")
            result.encodings[item.path] = (source.encoding, source.has_bom)
            modules[item.path] = module_name_for(item.abspath)
        result.texts = texts
        clock.lap("decode")
        if not texts:
            return result

        stats = {item.path: item.stat for item in inputs if item.stat is not None and item.path in texts}
        cached = self.cache.lookup(texts, stats) if self.cache is not None else {}
        clock.lap("cache lookup")
        chosen = self._choose(texts, cached)
        # A file over max-file-size is never parsed (by libcst, or by CPython for its syntax
        # errors): one DSL000 finding instead, when it would have been parsed.
        limit = self.settings.max_file_size
        too_large = {path for path, size in sizes.items() if size > limit}
        explicit = {item.path for item in inputs if item.explicit and item.path in texts}
        context = {item.path for item in inputs if item.context and item.path in texts}
        refused = (chosen | explicit) & too_large - context
        for path in sorted(refused):
            result.diagnostics.append(_too_large(path, sizes[path], limit))
        chosen -= too_large
        for path in sorted(explicit - chosen - too_large):
            finding = syntax_error_of(path, texts[path])
            if finding is not None:
                result.diagnostics.append(finding)
        clock.lap("prefilter")
        by_module: Dict[str, List[str]] = {}
        for path, (name, _) in modules.items():
            by_module.setdefault(name, []).append(path)

        # Worker processes start only when there is enough to parse (not on a warm run).
        with _Shards(self.jobs) as shards:
            summaries: Dict[str, dict] = {}
            pending = set(chosen)
            rounds = 0
            index = None
            while pending and rounds < MAX_PULL_ROUNDS:
                rounds += 1
                self._phase1(sorted(pending), texts, modules, cached, shards, summaries, result)
                index = ProjectIndex(summaries, by_module)
                reached = reached_files(index, summaries, by_module)
                pending = {p for p in reached if p not in chosen}
                for path in sorted(pending & too_large - refused - context):
                    refused.add(path)
                    result.diagnostics.append(_too_large(path, sizes[path], limit))
                pending -= too_large
                chosen |= pending
            clock.lap("parse + summaries")
            if index is None or pending:  # (otherwise the last round's index is this one)
                index = ProjectIndex(summaries, by_module)
            self._phase2(sorted(chosen - context), texts, modules, cached, shards, summaries, index, result, by_module)
            clock.lap("rules")
            result.processes = shards.count
        result.selected = len(chosen - context)
        if self.cache is not None:
            self.cache.save()
        self._per_file_ignores(result)
        result.diagnostics.sort(key=Finding.sort_key)
        clock.lap("save + sort")
        return result

    # ------------------------------------------------------------------ steps
    def _choose(self, texts: Dict[str, str], cached: Dict[str, dict]) -> Set[str]:
        if not self.use_prefilter:
            return set(texts)
        from dslint import prefilter

        # What the prefilter read from an unchanged text last time is in the cache,
        # so a warm run scans nothing.
        facts = {}
        matches = {}
        for path, entry in cached.items():
            if "pf" in entry:
                facts[path] = entry["pf"]
            if "pfm" in entry:
                matches[path] = entry["pfm"]
        selection = prefilter.select(texts, facts, matches)
        if self.cache is not None:
            for path, text in texts.items():
                matched = selection.matches.get(path)
                match = [selection.derived_key, matched] if matched is not None else None
                entry = cached.get(path)
                if entry is not None and entry.get("pf") is selection.facts[path] and entry.get("pfm") == match:
                    continue  # unchanged
                self.cache.store_prefilter(path, text, selection.facts[path], match)
        return selection.chosen

    def _phase1(self, paths, texts, modules, cached, shards, summaries, result) -> None:
        todo = []
        for path in paths:
            entry = cached.get(path)
            if entry is not None and "summary" in entry:
                if entry["summary"] is not None:
                    summaries[path] = entry["summary"]
                elif entry.get("syntax") is not None:
                    pass  # a cached syntax error: reported in phase 2
                continue
            todo.append((path, texts[path], *modules[path]))
        for path, summary, syntax in shards.summarize(todo):
            result.parsed += 1
            self._parsed_now.add(path)
            if summary is not None:
                summaries[path] = summary
            if self.cache is not None:
                self.cache.store_summary(path, texts[path], summary, syntax)
            if syntax is not None:
                cached.setdefault(path, {})["syntax_now"] = syntax

    def _phase2(self, paths, texts, modules, cached, shards, summaries, index, result, by_module) -> None:
        todo = []
        for path in paths:
            entry = cached.get(path, {})
            if "syntax_now" in entry:
                result.diagnostics.append(Finding.from_dict(entry["syntax_now"]))
                continue
            if entry.get("summary") is None and entry.get("syntax") is not None:
                result.diagnostics.append(Finding.from_dict(entry["syntax"]))
                result.cached += 1
                continue
            if self.cache is not None and self.cache.valid_findings(path, entry, index):
                result.diagnostics.extend(Finding.from_dict(d) for d in entry["findings"])
                result.cached += 1
                continue
            todo.append((path, texts[path], *modules[path]))
            if path not in self._parsed_now:
                result.parsed += 1  # a cached summary, but stale findings: parsed again now
        for path, diagnostics, log, errors in shards.check(todo, summaries, self.rule_specs, self.enabled, by_module):
            result.diagnostics.extend(Finding.from_dict(d) for d in diagnostics)
            result.internal_errors.extend(errors)
            if self.cache is not None and not errors:
                self.cache.store_findings(path, texts[path], diagnostics, log)

    def _per_file_ignores(self, result: CheckResult) -> None:
        if not self.settings.per_file_ignores:
            return
        root = str(self.settings.root)
        kept = []
        memo: Dict[str, set] = {}
        for diagnostic in result.diagnostics:
            ignored = memo.get(diagnostic.path)
            if ignored is None:
                rel = os.path.relpath(os.path.abspath(diagnostic.path), root).replace(os.sep, "/")
                ignored = memo[diagnostic.path] = self.settings.ignored_codes_for(rel)
            if diagnostic.code not in ignored:
                kept.append(diagnostic)
        result.diagnostics = kept


class _Clock:
    def __init__(self) -> None:
        import time

        self._now = time.perf_counter
        self._last = self._now()
        self.laps: Dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = self._now()
        self.laps[name] = self.laps.get(name, 0.0) + now - self._last
        self._last = now


# ---------------------------------------------------------------------- shards


class _Shards:
    """Phase 1 and phase 2 on N single-process pools; a file stays on its shard.

    The pools start on the first batch with at least ``PARALLEL_MIN_BYTES`` of text
    to analyse; until then (small inputs, warm runs) everything runs in-process.
    """

    def __init__(self, count: int) -> None:
        self.max_count = max(1, count)
        self.count = 1
        self.pools: List[ProcessPoolExecutor] = []
        self.owner: Dict[str, int] = {}
        self.context = None
        self.dead: Dict[str, str] = {}  # files whose worker process died -> the error

    def __enter__(self):
        return self

    def _start(self, items: List[tuple]) -> None:
        if self.pools or self.max_count <= 1:
            return
        if sum(len(item[1] or "") for item in items) < PARALLEL_MIN_BYTES:
            return
        # imported (libcst and the rules with it) once here, before the shards fork
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from dslint import check_file  # noqa: F401
        from dslint.rules.base import load_all

        load_all()
        self.count = self.max_count
        self.context = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
        self.pools = [ProcessPoolExecutor(max_workers=1, mp_context=self.context) for _ in range(self.count)]

    # A worker process that dies (a crash in native code, killed for memory) breaks
    # its pool: the shard gets a fresh process, the files of the lost batch are
    # retried one per batch, and a file that kills a process alone is reported as an
    # internal error. Every other file still reports.
    def _restart(self, shard: int) -> None:
        from concurrent.futures import ProcessPoolExecutor

        self.pools[shard].shutdown(wait=False, cancel_futures=True)
        self.pools[shard] = ProcessPoolExecutor(max_workers=1, mp_context=self.context)
        for path in [p for p, s in self.owner.items() if s == shard]:
            del self.owner[path]  # the trees it kept for phase 2 died with it

    def _died(self, path: str) -> None:
        self.dead[path] = (
            f"internal error in a worker process on {path}: the process died while checking this file "
            "(a crash in native code, or killed for memory)"
        )

    def __exit__(self, *exc) -> None:
        for pool in self.pools:
            pool.shutdown(wait=True, cancel_futures=True)
        if "dslint.check_file" in sys.modules:
            sys.modules["dslint.check_file"].release()

    def summarize(self, items: List[tuple]) -> List[tuple]:
        if not items:
            return []
        from dslint import check_file  # libcst: only once a file is to be parsed

        self._start(items)
        if not self.pools:
            return check_file.summarize_batch(items)
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        chunks = _chunks(items)
        results: List[tuple] = []
        free = list(range(self.count))
        running = {}
        while chunks or running:
            while chunks and free:
                shard = free.pop()
                chunk = chunks.pop(0)
                running[self.pools[shard].submit(check_file.summarize_batch, chunk)] = (shard, chunk)
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                shard, chunk = running.pop(future)
                free.append(shard)
                try:
                    batch = future.result()
                except BrokenProcessPool:
                    self._restart(shard)
                    if len(chunk) > 1:
                        chunks.extend([item] for item in chunk)
                    else:
                        self._died(chunk[0][0])
                    continue
                for item in chunk:
                    self.owner[item[0]] = shard
                results.extend(batch)
        return results

    def check(self, items: List[tuple], summaries, rule_specs, enabled, module_paths) -> List[tuple]:
        if not items:
            return []
        from dslint import check_file

        self._start(items)
        if not self.pools:
            return check_file.check_batch(items, summaries, rule_specs, enabled, module_paths)
        from concurrent.futures.process import BrokenProcessPool

        per_shard: Dict[int, List[tuple]] = {}
        unowned = []
        results: List[tuple] = [(item[0], [], [], [self.dead[item[0]]]) for item in items if item[0] in self.dead]
        full = {item[0]: item for item in items}
        for item in items:
            if item[0] in self.dead:
                continue
            shard = self.owner.get(item[0])
            if shard is None:
                unowned.append(item)
            else:
                per_shard.setdefault(shard, []).append((item[0], None, item[2], item[3]))
        # files parsed by nobody yet (cache hits in phase 1) go to the lightest shard
        for item in unowned:
            shard = min(range(self.count), key=lambda s: len(per_shard.get(s, ())))
            per_shard.setdefault(shard, []).append(item)
        futures = [
            (shard, batch, self.pools[shard].submit(check_file.check_batch, batch, summaries, rule_specs, enabled, module_paths))
            for shard, batch in per_shard.items()
        ]
        retry = []
        for shard, batch, future in futures:
            try:
                results.extend(future.result())
            except BrokenProcessPool:
                self._restart(shard)
                retry.extend(full[item[0]] for item in batch)
        for item in retry:  # one file at a time, with its text (its tree is gone)
            try:
                results.extend(
                    self.pools[0].submit(check_file.check_batch, [item], summaries, rule_specs, enabled, module_paths).result()
                )
            except BrokenProcessPool:
                self._restart(0)
                self._died(item[0])
                results.append((item[0], [], [], [self.dead[item[0]]]))
        return results


def _chunks(items: List[tuple]) -> List[List[tuple]]:
    chunks: List[List[tuple]] = []
    current: List[tuple] = []
    size = 0
    for item in sorted(items, key=lambda it: -len(it[1])):
        current.append(item)
        size += len(item[1])
        if size >= CHUNK_BYTES:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    return chunks


def _too_large(path: str, size: int, limit: int) -> Finding:
    from dslint.syntax import too_large_finding  # (syntax.py imports libcst: only when needed)

    return too_large_finding(path, size, limit)


def syntax_error_of(path: str, text: str) -> Optional[Finding]:
    """DSL000 for a file Python itself rejects, without parsing it with libcst (for files
    named explicitly that the prefilter leaves out)."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        from dslint.syntax import syntax_finding

        return syntax_finding(path, text, exc)
    return None
