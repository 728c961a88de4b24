"""``dslint server``: the Language Server Protocol over stdio, on pygls.

- Diagnostics are published when a document opens, changes and is saved. Changes
  are debounced: a change after a quiet spell is checked at once; changes that
  follow each other within ``debounce`` ms (typing) wait until the typing pauses.
- Code actions: each finding's fix (safe fixes are preferred quick fixes, unsafe
  ones say so in their title), ``# noqa: CODE`` for the finding's line
  (``fixes.add_noqa``), and "Fix all dslint problems" (``source.fixAll.dslint``),
  the safe fixes applied until none applies.
- Hover over a finding shows its rule's page (``docs.rule_page``).

Checks run one at a time on one worker thread (the engine keeps per-process state);
requests wait for the check of the version they are about. Projects, settings and
the warm engine per project: ``server_project.py``; positions: ``server_text.py``;
the incremental parse that keeps a keystroke cheap: ``server_incremental.py``.
Initialization options: ``{"debounce": 300, "ruleUrlBase": "https://.../rules"}``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from dslint import __version__
from dslint.report import SAFE, Finding
from dslint.server_project import Checked, Projects
from dslint.server_text import Lines, apply_change, fix_edits, overlaps, replacement, severity

FIX_ALL = "source.fixAll.dslint"
DEBOUNCE_MS = 300
log = logging.getLogger("dslint.server")


@dataclass
class Document:
    uri: str
    path: str
    text: str
    version: Optional[int]


@dataclass
class Published:
    """The findings of one checked version of a document, and their LSP form."""

    version: Optional[int]
    text: str
    findings: List[Finding]
    diagnostics: List[lsp.Diagnostic] = field(default_factory=list)
    seq: int = 0


class DslintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("dslint", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.docs: Dict[str, Document] = {}
        self.published: Dict[str, Published] = {}
        self.projects = Projects()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dslint-check")
        self.debounce = DEBOUNCE_MS / 1000
        self.rule_url_base: Optional[str] = None
        self.timers: Dict[str, asyncio.Task] = {}
        self.last_change: Dict[str, float] = {}
        self.seq = 0
        self.shown_errors: set = set()
        self._rule_urls: Dict[str, Optional[str]] = {}

    @property
    def encoding(self) -> str:
        return str(getattr(self.workspace.position_encoding, "value", self.workspace.position_encoding) or "utf-16")

    # ------------------------------------------------------------------ checking
    async def run(self, func, *args):
        """``func(*args)`` on the check thread (one at a time, in order)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, func, *args)

    def schedule(self, uri: str, *, now: bool = False) -> None:
        loop = asyncio.get_running_loop()
        clock = loop.time()
        quiet = clock - self.last_change.get(uri, float("-inf")) >= self.debounce
        self.last_change[uri] = clock
        waiting = self.timers.pop(uri, None)
        if waiting is not None:
            waiting.cancel()  # only tasks still sleeping are kept in timers
        delay = 0.0 if (now or quiet) else self.debounce
        self.timers[uri] = loop.create_task(self._check_later(uri, delay))

    async def _check_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        if self.timers.get(uri) is asyncio.current_task():
            del self.timers[uri]
        await self.check(uri)

    async def check(self, uri: str) -> None:
        doc = self.docs.get(uri)
        if doc is None:
            return
        self.seq += 1
        seq = self.seq
        snapshot = {d.path: (d.uri, d.text, d.version) for d in self.docs.values()}
        buffers = {path: text for path, (_, text, _) in snapshot.items()}
        started = asyncio.get_running_loop().time()
        try:
            checked: Checked = await self.run(self.projects.check_one, doc.path, buffers)
        except Exception as exc:  # never take the server down; say what happened
            log.exception("check failed")
            self._log(f"dslint: internal error while checking {doc.path}: {type(exc).__name__}: {exc}", lsp.MessageType.Error)
            return
        self._report_problems(doc.path, checked)
        if log.isEnabledFor(logging.INFO) and checked.result is not None:
            result = checked.result
            phases = ", ".join(f"{name} {seconds * 1000:.0f}" for name, seconds in result.timings.items())
            log.info("%s v%s: %.0f ms (%s; %d files, %d parsed, %d from cache)", doc.path, doc.version,
                     (asyncio.get_running_loop().time() - started) * 1000, phases, result.files, result.parsed, result.cached)
        for path, findings in checked.findings.items():
            uri_of, text, version = snapshot[path]
            previous = self.published.get(uri_of)
            if previous is not None and previous.seq > seq:
                continue  # a later check already answered
            lines = Lines(text)
            result = Published(version, text, findings, [self.diagnostic(f, lines) for f in findings], seq)
            self.published[uri_of] = result
            if uri_of not in self.docs:
                continue
            if uri_of == uri or previous is None or previous.diagnostics != result.diagnostics:
                self.text_document_publish_diagnostics(
                    lsp.PublishDiagnosticsParams(uri=uri_of, diagnostics=result.diagnostics, version=version)
                )

    def _report_problems(self, path: str, checked: Checked) -> None:
        error = self.projects.config_errors.get(path)
        if error and error not in self.shown_errors:
            self.shown_errors.add(error)
            self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"dslint: {error}"))
        for message in checked.errors:
            self._log(f"dslint: {message}", lsp.MessageType.Error)

    def _log(self, message: str, kind: lsp.MessageType) -> None:
        self.window_log_message(lsp.LogMessageParams(type=kind, message=message))

    async def current(self, uri: str) -> Optional[Published]:
        """The findings of the document's current version (checked now if need be)."""
        doc = self.docs.get(uri)
        if doc is None:
            return None
        result = self.published.get(uri)
        if result is None or result.text != doc.text:
            await self.check(uri)
            result = self.published.get(uri)
        return result if result is not None and result.text == doc.text else None

    # ------------------------------------------------------------------ LSP forms
    def diagnostic(self, finding: Finding, lines: Lines) -> lsp.Diagnostic:
        url = self.rule_url(finding.code)
        return lsp.Diagnostic(
            range=lines.range(finding.start, finding.end, self.encoding),
            message=finding.message,
            severity=severity(finding),
            code=finding.code,
            code_description=lsp.CodeDescription(href=url) if url else None,
            source="dslint",
            tags=[lsp.DiagnosticTag.Unnecessary] if finding.code == "DSL001" else None,
        )

    def rule_url(self, code: str) -> Optional[str]:
        """The rule's page: ``ruleUrlBase``/CODE.md, the repository's ``rules/CODE.md``,
        or the page generated into a temporary folder."""
        if code in self._rule_urls:
            return self._rule_urls[code]
        url = None
        if self.rule_url_base:
            url = f"{self.rule_url_base.rstrip('/')}/{code}.md"
        else:
            page = Path(__file__).resolve().parent.parent / "rules" / f"{code}.md"
            if not page.is_file():
                page = _generated_page(code)
            url = page.as_uri() if page is not None else None
        self._rule_urls[code] = url
        return url

    def edit(self, doc: Document, edits: List[lsp.TextEdit]) -> lsp.WorkspaceEdit:
        caps = self.client_capabilities.workspace
        versioned = bool(caps and caps.workspace_edit and caps.workspace_edit.document_changes)
        if versioned:
            identifier = lsp.OptionalVersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version)
            return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(text_document=identifier, edits=edits)])
        return lsp.WorkspaceEdit(changes={doc.uri: edits})

    async def code_actions(self, params: lsp.CodeActionParams) -> List[lsp.CodeAction]:
        uri = params.text_document.uri
        result = await self.current(uri)
        doc = self.docs.get(uri)
        if result is None or doc is None:
            return []
        only = params.context.only
        lines = Lines(result.text)
        actions: List[lsp.CodeAction] = []
        if _wanted(lsp.CodeActionKind.QuickFix, only):
            actions.extend(self._quick_fixes(doc, result, lines, params.range))
        fixable = any(f.fix is not None and f.fix.applicability == SAFE for f in result.findings)
        if _wanted(FIX_ALL, only) and (fixable or only):
            buffers = {d.path: d.text for d in self.docs.values()}
            buffers[doc.path] = doc.text
            text, count = await self.run(self.projects.fix_all_for, doc.path, buffers)
            edit = replacement(doc.text, text, self.encoding) if count and self.docs.get(uri) is doc else None
            if edit is not None or only:
                actions.append(
                    lsp.CodeAction(
                        title="Fix all dslint problems",
                        kind=FIX_ALL,
                        edit=self.edit(doc, [edit] if edit else []),
                    )
                )
        return actions

    def _quick_fixes(self, doc, result: Published, lines: Lines, wanted: lsp.Range) -> List[lsp.CodeAction]:
        from dslint.fixes import add_noqa

        actions, noqa = [], []
        for finding, diagnostic in zip(result.findings, result.diagnostics):
            if not overlaps(diagnostic.range, wanted):
                continue
            fix = finding.fix
            if fix is not None:
                unsafe = fix.applicability != SAFE
                title = f"{fix.message} ({finding.code}{', unsafe fix: review it' if unsafe else ''})"
                actions.append(
                    lsp.CodeAction(
                        title=title,
                        kind=lsp.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        edit=self.edit(doc, fix_edits(result.text, fix.edits, self.encoding)),
                        is_preferred=not unsafe,
                    )
                )
            if finding.code in ("DSL000", "DSL002"):
                continue
            row = finding.noqa_row or finding.start[0]
            new_text, changed, _ = add_noqa(result.text, {row: {finding.code}})
            edit = replacement(result.text, new_text, self.encoding) if changed else None
            if edit is not None and (finding.code, row) not in {(c, r) for c, r, _ in noqa}:
                noqa.append((finding.code, row, lsp.CodeAction(
                    title=f"Disable {finding.code} for this line (`# noqa: {finding.code}`)",
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    edit=self.edit(doc, [edit]),
                )))
        return actions + [action for _, _, action in noqa]

    async def hover(self, params: lsp.HoverParams) -> Optional[lsp.Hover]:
        from dslint.docs import rule_page
        from dslint.rules.base import all_rules

        result = await self.current(params.text_document.uri)
        if result is None:
            return None
        here = lsp.Range(start=params.position, end=params.position)
        pages, ranges = [], []
        rules = all_rules()
        for finding, diagnostic in zip(result.findings, result.diagnostics):
            if overlaps(diagnostic.range, here) and finding.code in rules:
                pages.append(f"**{finding.code}** {finding.message}\n\n---\n\n{rule_page(rules[finding.code])}")
                ranges.append(diagnostic.range)
        if not pages:
            return None
        return lsp.Hover(
            contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(pages)),
            range=ranges[0] if len(ranges) == 1 else None,
        )


def _wanted(kind: str, only) -> bool:
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def _generated_page(code: str) -> Optional[Path]:
    import tempfile

    from dslint.docs import rule_page
    from dslint.rules.base import all_rules

    rule = all_rules().get(code)
    if rule is None:
        return None
    folder = Path(tempfile.gettempdir()) / f"dslint-rules-{__version__}-{os.getuid() if hasattr(os, 'getuid') else 0}"
    page = folder / f"{code}.md"
    try:
        folder.mkdir(exist_ok=True)
        if not page.is_file():
            page.write_text(rule_page(rule), encoding="utf-8")
    except OSError:
        return None
    return page


def _path(uri: str) -> Optional[str]:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return os.path.abspath(path) if path else None


def build_server() -> DslintServer:
    server = DslintServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: DslintServer, params: lsp.InitializeParams) -> None:
        options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        if isinstance(options.get("debounce"), (int, float)) and options["debounce"] >= 0:
            ls.debounce = options["debounce"] / 1000
        if isinstance(options.get("ruleUrlBase"), str):
            ls.rule_url_base = options["ruleUrlBase"]
        folders = [_path(f.uri) for f in params.workspace_folders or []]
        if not folders and params.root_uri:
            folders = [_path(params.root_uri)]
        ls.projects.set_folders([f for f in folders if f])

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: DslintServer, params: lsp.InitializedParams) -> None:
        caps = ls.client_capabilities.workspace
        watched = caps.did_change_watched_files if caps else None
        if watched is None or not watched.dynamic_registration:
            return
        watchers = [lsp.FileSystemWatcher(glob_pattern=p) for p in ("**/*.py", "**/*.pyi", "**/pyproject.toml", "**/.gitignore")]
        registration = lsp.Registration(
            id="dslint-watched-files",
            method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=lsp.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
        )
        try:
            await ls.client_register_capability_async(lsp.RegistrationParams(registrations=[registration]))
        except Exception:  # a client that cannot watch: saves and opens still refresh
            log.info("file watching not registered")

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: DslintServer, params: lsp.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        path = _path(item.uri)
        if path is None:
            return
        ls.docs[item.uri] = Document(item.uri, path, item.text, item.version)
        ls.schedule(item.uri, now=True)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DslintServer, params: lsp.DidChangeTextDocumentParams) -> None:
        doc = ls.docs.get(params.text_document.uri)
        if doc is None:
            return
        text = doc.text
        for change in params.content_changes:
            text = apply_change(text, change, ls.encoding)
        ls.docs[doc.uri] = Document(doc.uri, doc.path, text, params.text_document.version)
        ls.schedule(doc.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
    async def did_save(ls: DslintServer, params: lsp.DidSaveTextDocumentParams) -> None:
        doc = ls.docs.get(params.text_document.uri)
        if doc is not None:
            await ls.run(ls.projects.file_changed, doc.path)
            ls.schedule(doc.uri, now=True)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: DslintServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = ls.docs.pop(uri, None)
        ls.published.pop(uri, None)
        waiting = ls.timers.pop(uri, None)
        if waiting is not None:
            waiting.cancel()
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        if doc is not None:  # the file on disk counts again for the others
            await ls.run(ls.projects.file_changed, doc.path)
            for other in list(ls.docs):
                ls.schedule(other, now=True)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def watched(ls: DslintServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            path = _path(change.uri)
            if path is not None:
                await ls.run(ls.projects.file_changed, path)
        for uri in list(ls.docs):
            ls.schedule(uri, now=True)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def folders_changed(ls: DslintServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
        current = set(ls.projects.folders)
        current -= {_path(f.uri) for f in params.event.removed}
        current |= {_path(f.uri) for f in params.event.added}
        await ls.run(ls.projects.set_folders, [f for f in current if f])
        for uri in list(ls.docs):
            ls.schedule(uri, now=True)

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.SourceFixAll, FIX_ALL]),
    )
    async def code_action(ls: DslintServer, params: lsp.CodeActionParams):
        return await ls.code_actions(params)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def hover(ls: DslintServer, params: lsp.HoverParams):
        return await ls.hover(params)

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: DslintServer, params) -> None:
        ls.executor.shutdown(wait=False, cancel_futures=True)

    return server


def serve(verbose: bool = False) -> None:
    """Serve on stdin/stdout; anything else printed goes to stderr (with ``verbose``,
    one line per check: its phases, files parsed and replayed)."""
    from dslint.server_incremental import install

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr, format="dslint server: %(message)s")
    logging.getLogger("pygls").setLevel(logging.WARNING)
    install()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol stream
    build_server().start_io(stdin, stdout)
