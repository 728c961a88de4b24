"""The per-file work: parse once, summarise, then run every selected rule.

These functions run in the main process for small inputs and in worker processes
for large ones (see ``engine.py``). A parsed file stays in ``_PARSED`` between the
summary phase and the rule phase, so each file is parsed exactly once per run.
Everything returned is plain data.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

import libcst as cst

from dslint.report import Finding, Fix, TextEdit
from dslint.positions import form_feed_shifts, node_ranges, shift_ranges
from dslint.rules.base import Rule, all_rules
from dslint.semantics.context import FileContext
from dslint.semantics.names import ModuleNames
from dslint.semantics.project import ProjectIndex
from dslint.semantics.view import View
from dslint.semantics.regions import RegionCache
from dslint.semantics.summary import summarize
from dslint.semantics.walk import TreeIndex, parse_module
from dslint.source import split_lines
from dslint.syntax import (
    accepted_tab_indentation, context_lines, describe_error, gate, python2_indentation, python36_async_keywords, syntax_finding,
)

@dataclass
class Parsed:
    path: str
    text: str
    module: cst.Module
    tree: TreeIndex
    names: ModuleNames
    regions: RegionCache
    summary: dict
    #: the DSL000 of a file analysed as Python 2 read its indentation (``text`` is then
    #: the expanded text, and findings carry no fixes)
    legacy: Optional[Finding] = None
    #: ``text`` is the file with its indentation's tabs expanded: findings carry no fixes
    columns_moved: bool = False


_PARSED: Dict[str, Parsed] = {}
# Files whose parse or summary raised unexpectedly (a bug in dslint or libcst, not
# in the file): the message is reported as an internal error in phase 2.
_FAILED: Dict[str, str] = {}


def internal_error(what: str, path: str, exc: BaseException) -> str:
    """``internal error in WHAT on PATH: Type: message (module.py:line)``, one line."""
    import traceback  # (only on an internal error)

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename.replace(chr(92), '/').rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    detail = " ".join(describe_error(exc).split())
    if len(detail) > 500:
        detail = detail[:500] + "..."
    return f"internal error in {what} on {path}: {detail}{where}"


def parse_file(path: str, text: str, modname: str, is_package: bool) -> Tuple[Optional[dict], Optional[Finding]]:
    """Parse and summarise one file; keep the parse for the rule phase."""
    _FAILED.pop(path, None)
    refused = gate(path, text)
    if refused is not None:
        return None, syntax_finding(path, text, refused)
    legacy, columns_moved = None, False
    try:
        try:
            module = parse_module(text)
        except cst.ParserSyntaxError as exc:
            expanded = python2_indentation(path, text)
            renamed = python36_async_keywords(path, text) if expanded is None else None
            if expanded is not None:
                legacy = syntax_finding(path, text, exc)
                legacy.message += " (analysed as Python 2 reads it: a tab in the indentation moves to the next multiple of 8 columns)"
            elif renamed is not None:
                legacy, expanded = syntax_finding(path, text, exc), renamed
                legacy.message += " (analysed as Python 3.6 reads it: `async` names a keyword argument, as in `.cuda(async=True)`)"
            else:  # a tab mix CPython accepts and libcst's tokenizer does not: read it as CPython does
                expanded = accepted_tab_indentation(path, text)
                if expanded is None:
                    raise
                columns_moved = True
            text = expanded
            module = parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, MemoryError, ValueError) as exc:
        return None, legacy or syntax_finding(path, text, exc)
    except Exception as exc:  # a parser bug must not take the run down
        _FAILED[path] = internal_error("the parser", path, exc)
        return None, None
    try:
        tree = TreeIndex(module)
        names = ModuleNames(tree, modname, is_package)
        regions = RegionCache()
        summary = summarize(tree, names, regions)
    except (RecursionError, MemoryError) as exc:  # nesting Python accepts, too deep to walk
        return None, syntax_finding(path, text, exc)
    except Exception as exc:  # a bug in the semantics layer: this file only
        _FAILED[path] = internal_error("the file summary", path, exc)
        return None, None
    _PARSED[path] = Parsed(path, text, module, tree, names, regions, summary, legacy, columns_moved or legacy is not None)
    return summary, None


def release(paths: Optional[Sequence[str]] = None) -> None:
    if paths is None:
        _PARSED.clear()
        _FAILED.clear()
    else:
        for path in paths:
            _PARSED.pop(path, None)
            _FAILED.pop(path, None)


# ---------------------------------------------------------------------------- phase 1


def summarize_batch(batch: List[tuple]) -> List[tuple]:
    """[(path, text, modname, is_package)] -> [(path, summary or None, DSL000 dict or None)]"""
    return _on_big_stack(_summarize_batch, batch)


def _summarize_batch(batch):
    out = []
    for path, text, modname, is_package in batch:
        summary, diagnostic = parse_file(path, text, modname, is_package)
        out.append((path, summary, diagnostic.to_dict() if diagnostic else None))
    return out


# ---------------------------------------------------------------------------- phase 2


def check_batch(
    batch: List[tuple], summaries: Dict[str, dict], rule_specs: List[tuple], enabled: List[str], module_paths: Dict[str, List[str]]
) -> List[tuple]:
    """[(path, text or None, modname, is_package)] -> [(path, [diagnostic dicts], query log, [errors])]

    ``text`` is None for files this process parsed in phase 1.
    """
    return _on_big_stack(_check_batch, batch, summaries, rule_specs, enabled, module_paths)


def _check_batch(batch, summaries, rule_specs, enabled, module_paths):
    index = ProjectIndex(summaries, module_paths)
    registry = all_rules()
    rules = [registry[code](options, preview) for code, options, preview in rule_specs]
    out = []
    for path, text, modname, is_package in batch:
        parsed = _PARSED.get(path)
        if parsed is None and path not in _FAILED:
            summary, diagnostic = parse_file(path, text, modname, is_package)
            if diagnostic is not None:
                out.append((path, [diagnostic.to_dict()], [], []))
                continue
            parsed = _PARSED.get(path)
        if parsed is None:
            out.append((path, [], [], [_FAILED.pop(path)]))
            continue
        try:
            diagnostics, log, errors = check_parsed(parsed, index, rules, set(enabled))
        except Exception as exc:  # outside any one rule (context, positions, suppressions)
            diagnostics, log, errors = [], [], [internal_error("the checker", path, exc)]
        out.append((path, [d.to_dict() for d in diagnostics], log, errors))
        _PARSED.pop(path, None)
    return out


def context_for(parsed: Parsed, index: ProjectIndex) -> FileContext:
    """The FileContext rules get for a parsed file, with cross-file answers from ``index``."""
    return FileContext(
        parsed.path, parsed.text, parsed.module, parsed.tree, parsed.names, parsed.regions, parsed.summary,
        View(index, parsed.path),
    )


def file_contexts(sources: Dict[str, str]) -> Dict[str, FileContext]:
    """{path: FileContext} for a small project given as {path: text}, built as the engine
    builds them (module names from the paths, one project index over all files); for
    tests and tools that ask the semantics layer directly. Raises on a file that does
    not parse."""
    from dslint.semantics.names import module_name_for

    summaries = {}
    for path, text in sources.items():
        summary, diagnostic = parse_file(path, text, *module_name_for(path))
        if diagnostic is not None or path in _FAILED:
            release(list(sources))
            raise ValueError(f"{path} does not parse: {diagnostic.message if diagnostic else _FAILED[path]}")
        summaries[path] = summary
    index = ProjectIndex(summaries)
    out = {path: context_for(_PARSED.pop(path), index) for path in sources}
    return out


def check_parsed(parsed: Parsed, index: ProjectIndex, rules: Sequence[Rule], enabled: set):
    ctx = context_for(parsed, index)
    view = ctx.view
    reports = []
    errors: List[str] = []
    for rule in rules:
        ctx.options = rule.opts
        try:
            for report in rule.check(ctx):
                reports.append((rule, report))
        except Exception as exc:  # a broken rule must not take the run down
            errors.append(internal_error(rule.code, parsed.path, exc))
    try:
        diagnostics = _to_diagnostics(parsed, reports, errors)
    except (RecursionError, MemoryError) as exc:  # positions regenerate the code recursively
        diagnostics = [syntax_finding(parsed.path, parsed.text, exc)]
    if parsed.columns_moved:
        diagnostics = [replace(d, fix=None) for d in diagnostics]
    if parsed.legacy is not None:
        diagnostics.append(parsed.legacy)
    diagnostics = apply_suppressions(parsed.path, parsed.text, diagnostics, enabled)
    return diagnostics, view.log, errors


def _to_diagnostics(parsed: Parsed, reports, errors: Optional[List[str]] = None) -> List[Finding]:
    if not reports:
        return []
    nodes = []
    statements = {}
    for _, report in reports:
        nodes.append(report.node)
        statement = _statement_of(parsed.tree, report.node)
        if statement is not None:
            statements[id(report.node)] = statement
            nodes.append(statement)
        if report.end_node is not None:
            nodes.append(report.end_node)
        if report.fix is not None:
            for edit in report.fix.edits:
                nodes.append(edit.start)
                if edit.end is not None:
                    nodes.append(edit.end)
    ranges = node_ranges(parsed.module, nodes)
    if "\x0c" in parsed.text:
        ranges = shift_ranges(ranges, form_feed_shifts(parsed.text, parsed.module.code))
    lines = split_lines(parsed.text)
    out = []
    seen = set()
    failed_rules = set()
    for rule, report in reports:
        if rule.code in failed_rules:
            continue
        try:
            (srow, scol), (erow, ecol) = ranges[id(report.node)]
            if report.end_node is not None:
                erow, ecol = ranges[id(report.end_node)][1]
            fix = None
            if report.fix is not None:
                fix = Fix(
                    applicability=report.fix.applicability,
                    message=report.fix.message,
                    edits=tuple(_text_edit(edit, ranges) for edit in report.fix.edits),
                )
        except KeyError as exc:  # the rule reported a node that is not in this file's tree
            if errors is None:
                raise
            failed_rules.add(rule.code)
            exc.args = ("reported a node that is not in this file's tree",)
            errors.append(internal_error(rule.code, parsed.path, exc))
            continue
        key = (rule.code, srow, scol, report.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(
            Finding(
                code=rule.code,
                name=rule.name,
                message=report.message,
                path=parsed.path,
                start=(srow, scol + 1),
                end=(erow, ecol + 1),
                level=report.level or rule.level,
                help=report.help or rule.help,
                fix=fix,
                noqa_row=srow,
                also_noqa=_also_noqa(ranges, statements.get(id(report.node)), srow, erow),
                source_lines=context_lines(lines, srow, erow),
            )
        )
    return out


MAX_NOQA_SPAN = 40  # rows of one reported node a ``# noqa`` may sit on


def _statement_of(tree, node):
    """The statement the reported node belongs to (its first line also takes a noqa)."""
    for ancestor in (node, *tree.ancestors(node)):
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return ancestor
    return None


def _also_noqa(ranges, statement, srow: int, erow: int) -> tuple:
    """Rows besides the reported one whose ``# noqa`` covers the finding: every row of the
    reported node (a multi-line ``DataLoader(...)`` call with the comment on its argument)
    and the first row of its statement."""
    rows = set(range(srow + 1, min(erow, srow + MAX_NOQA_SPAN) + 1))
    if statement is not None and id(statement) in ranges:
        rows.add(ranges[id(statement)][0][0])
    rows.discard(srow)
    return tuple(sorted(rows))


def _text_edit(edit, ranges) -> TextEdit:
    start_range = ranges[id(edit.start)]
    start = start_range[1] if edit.start_at_end else start_range[0]
    end_node = edit.end if edit.end is not None else edit.start
    end_range = ranges[id(end_node)]
    end = end_range[0] if edit.end_at_start else end_range[1]
    return TextEdit(edit.content, (start[0], start[1] + 1), (end[0], end[1] + 1))


def apply_suppressions(path: str, text: str, diagnostics: List[Finding], enabled: set) -> List[Finding]:
    if not diagnostics and ("noqa" not in text or "DSL" not in text):
        return diagnostics
    if "noqa" not in text and "dslint" not in text:
        return diagnostics
    from dslint import suppress  # (only for a text with a suppression comment)

    sup = suppress.parse(text)
    kept = [d for d in diagnostics if not sup.suppresses_any(d.code, (d.noqa_row or d.start[0], *d.also_noqa))]
    if "DSL001" in enabled and not (suppress.ALL in sup.file_codes or "DSL001" in sup.file_codes):
        kept.extend(_unused_noqa(path, text, sup, enabled))
    return kept


def _unused_noqa(path: str, text: str, sup, enabled: set) -> List[Finding]:
    from dslint import suppress
    from dslint.fixes import remove_noqa_codes

    out = []
    lines = split_lines(text)
    rule = all_rules()["DSL001"]
    for row, noqa in sorted(sup.lines.items()):
        if suppress.ALL in noqa.codes:
            continue
        unused = sorted(c for c in noqa.codes if c.startswith("DSL") and c in enabled and c not in noqa.used and c != "DSL001")
        if not unused or "DSL001" in noqa.codes:
            continue
        fix = remove_noqa_codes(noqa, unused)
        out.append(
            Finding(
                code="DSL001",
                name=rule.name,
                message=f"unused `noqa` directive: {', '.join(f'`{c}`' for c in unused)} suppressed nothing on this line",
                path=path,
                start=noqa.start,
                end=noqa.end,
                level=rule.level,
                help=rule.help,
                fix=fix,
                noqa_row=row,
                source_lines=context_lines(lines, row, row),
            )
        )
    return out


# ---------------------------------------------------------------------------- big stack

_STACK_SIZE = 512 * 1024 * 1024


def _on_big_stack(func, *args):
    """Run ``func`` on a thread with a large C stack (libcst recurses natively)."""
    result: dict = {}

    def target():
        old_limit = sys.getrecursionlimit()
        try:
            sys.setrecursionlimit(max(old_limit, 20000))
            result["value"] = func(*args)
        except BaseException as exc:  # re-raised in the calling thread
            result["error"] = exc
        finally:
            sys.setrecursionlimit(old_limit)

    # The size applies to threads *started* while it is set (pthread_create), so
    # start() must run before it is restored.
    thread = threading.Thread(target=target, name="dslint-analysis")
    previous = threading.stack_size()
    try:
        threading.stack_size(_STACK_SIZE)
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]
