"""`dslint server`: a real LSP client (pytest-lsp's, on pygls) drives the server over stdio.

Each test starts ``python -m dslint server`` in a project written to tmp_path and
talks to it as an editor does: open, change, save, close, code actions, hover.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

pytest.importorskip("pygls")
pytest.importorskip("pytest_lsp")

from lsprotocol import types as lsp  # noqa: E402
from pygls.protocol import default_converter  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402
from pytest_lsp import LanguageClient, client_capabilities  # noqa: E402
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features  # noqa: E402

from tests.conftest import REPO, write_files  # noqa: E402

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TIMEOUT = 60

BUG = """\
from torch.utils.data import DataLoader, RandomSampler


def make(ds):
    return DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)
"""
FIXED = BUG.replace(", shuffle=True", "")

BASE_ITERABLE = "from torch.utils.data import IterableDataset\n\n\nclass Base(IterableDataset):\n    pass\n"
STREAM = """\
from torch.utils.data import DataLoader

from base import Base


class Stream(Base):
    def __iter__(self):
        return iter(range(10))


loader = DataLoader(Stream(), shuffle=True)
"""


class Session:
    """A client connected to a fresh ``dslint server`` whose workspace is ``root``."""

    def __init__(self, root: Path, capabilities: str = "visual-studio-code", options: Optional[dict] = None,
                 encodings: Optional[List[str]] = None) -> None:
        self.root = root
        self.capabilities = client_capabilities(capabilities)
        if encodings is not None:
            self.capabilities.general = lsp.GeneralClientCapabilities(position_encodings=encodings)
        self.options = options
        self.published: List[lsp.PublishDiagnosticsParams] = []
        self.arrived = asyncio.Event()
        self.texts: Dict[str, str] = {}
        self.versions: Dict[str, int] = {}

    async def __aenter__(self) -> "Session":
        client = LanguageClient(converter_factory=default_converter)

        def publish(params: lsp.PublishDiagnosticsParams) -> None:
            self.published.append(params)
            self.arrived.set()

        register_lsp_features(client, {
            **DEFAULT_CLIENT_FEATURES,
            lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish,
            lsp.CLIENT_REGISTER_CAPABILITY: lambda params: None,
        })
        env = {**os.environ, "PYTHONPATH": str(REPO), "DSLINT_CACHE_DIR": str(self.root / ".no-cache-here")}
        await client.start_io(sys.executable, "-m", "dslint", "server", cwd=str(self.root), env=env)
        self.client = client
        self.init = await client.initialize_session(lsp.InitializeParams(
            capabilities=self.capabilities,
            workspace_folders=[lsp.WorkspaceFolder(uri=from_fs_path(str(self.root)), name="project")],
            initialization_options=self.options,
        ))
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.shutdown_session()
        await self.client.stop()

    def uri(self, name: str) -> str:
        return from_fs_path(os.path.normpath(str(self.root / name)))

    async def diagnostics(self, name: str, version: Optional[int] = None, after: int = 0) -> List[lsp.Diagnostic]:
        """The first diagnostics published for ``name`` (at ``version``) after the
        first ``after`` publications."""
        uri = self.uri(name)
        version = self.versions.get(uri) if version is None else version

        async def wait():
            seen = after
            while True:
                for params in self.published[seen:]:
                    if params.uri == uri and (version is None or params.version in (None, version)):
                        return list(params.diagnostics)
                seen = len(self.published)
                self.arrived.clear()
                await self.arrived.wait()

        return await asyncio.wait_for(wait(), TIMEOUT)

    async def open(self, name: str, text: Optional[str] = None) -> List[lsp.Diagnostic]:
        text = (self.root / name).read_text() if text is None else text
        uri = self.uri(name)
        self.texts[uri], self.versions[uri] = text, 1
        mark = len(self.published)
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
        return await self.diagnostics(name, 1, mark)

    def change(self, name: str, text: Optional[str] = None, edits: Optional[List[lsp.TextEdit]] = None) -> int:
        """Send a change (the whole text, or range edits applied here too); the new version."""
        uri = self.uri(name)
        self.versions[uri] += 1
        if edits is not None:
            changes = [lsp.TextDocumentContentChangePartial(range=e.range, text=e.new_text) for e in edits]
            for edit in edits:
                self.texts[uri] = apply_edit(self.texts[uri], edit)
        else:
            self.texts[uri] = text
            changes = [lsp.TextDocumentContentChangeWholeDocument(text=text)]
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=changes))
        return self.versions[uri]

    async def actions(self, name: str, where: lsp.Range, only=None) -> List[lsp.CodeAction]:
        return await self.client.text_document_code_action_async(lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=self.uri(name)),
            range=where,
            context=lsp.CodeActionContext(diagnostics=[], only=only),
        ))

    def apply(self, name: str, action: lsp.CodeAction) -> int:
        """Apply a code action's workspace edit as the editor would (a didChange)."""
        edits = [e for change in action.edit.document_changes for e in change.edits]
        return self.change(name, edits=sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True))


def apply_edit(text: str, edit: lsp.TextEdit) -> str:
    """UTF-16 positions (the tests' client default) to offsets; lines end at \\n here."""
    lines = text.split("\n")

    def offset(pos: lsp.Position) -> int:
        before = sum(len(line) + 1 for line in lines[: pos.line])
        line = lines[pos.line] if pos.line < len(lines) else ""
        units = 0
        for index, ch in enumerate(line):
            if units >= pos.character:
                return before + index
            units += 2 if ord(ch) > 0xFFFF else 1
        return before + len(line)

    return text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]


def lsp_test(func):
    """Run an async test body to completion (one event loop per test)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        asyncio.run(asyncio.wait_for(func(*args, **kwargs), 240))

    return wrapper


def codes(diagnostics) -> List[str]:
    return sorted(d.code for d in diagnostics)


# ---------------------------------------------------------------------- diagnostics


@lsp_test
async def test_open_publishes_the_finding_with_code_range_message_and_rule_page(tmp_path):
    write_files(tmp_path, {"train.py": BUG})
    async with Session(tmp_path) as s:
        assert s.init.capabilities.position_encoding == "utf-16"
        [d] = await s.open("train.py")
        assert d.code == "DSL501" and d.source == "dslint"
        assert d.severity == lsp.DiagnosticSeverity.Error
        assert "mutually exclusive" in d.message
        # `DataLoader(...)` on line 5 (0-based 4), columns 11..66
        assert (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character) == (4, 11, 4, 66)
        assert d.code_description.href.startswith("file://") and d.code_description.href.endswith("/DSL501.md")


@lsp_test
async def test_columns_are_utf16_code_units_or_what_the_client_negotiated(tmp_path):
    # an astral character (2 UTF-16 units, 4 UTF-8 bytes) and an accent (1 unit, 2 bytes) before the call
    line = 'x = "😀é"; loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)\n'
    text = "from torch.utils.data import DataLoader, RandomSampler\n\nds = None\n" + line
    write_files(tmp_path, {"train.py": text})
    start = line.index("DataLoader")
    end = line.index("\n")
    for encodings, expected in ((None, (start + 1, end + 1)), (["utf-8", "utf-16"], (start + 4, end + 4)), (["utf-32"], (start, end))):
        async with Session(tmp_path, encodings=encodings) as s:
            [d] = [d for d in await s.open("train.py") if d.code == "DSL501"]
            assert d.range.start.line == 3
            assert (d.range.start.character, d.range.end.character) == expected, encodings


@lsp_test
async def test_changes_recheck_with_incremental_edits_and_close_clears(tmp_path):
    write_files(tmp_path, {"train.py": FIXED})
    async with Session(tmp_path, options={"debounce": 0}) as s:
        assert await s.open("train.py") == []
        call_end = lsp.Position(line=4, character=len(FIXED.splitlines()[4]) - 1)  # before the last `)`
        version = s.change("train.py", edits=[lsp.TextEdit(range=lsp.Range(start=call_end, end=call_end), new_text=", shuffle=True")])
        assert s.texts[s.uri("train.py")] == BUG
        assert codes(await s.diagnostics("train.py", version)) == ["DSL501"]
        # lines inserted above move the finding down
        top = lsp.Position(line=0, character=0)
        version = s.change("train.py", edits=[lsp.TextEdit(range=lsp.Range(start=top, end=top), new_text="# é😀\n\n")])
        [d] = await s.diagnostics("train.py", version)
        assert d.range.start.line == 6
        mark = len(s.published)
        s.client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=s.uri("train.py"))))
        assert await s.diagnostics("train.py", None, mark) == []


@lsp_test
async def test_typing_is_debounced_to_one_check_of_the_last_version(tmp_path):
    write_files(tmp_path, {"train.py": FIXED})
    async with Session(tmp_path, options={"debounce": 400}) as s:
        await s.open("train.py")
        mark = len(s.published)
        text = FIXED
        for ch in ", shuffle=True":  # keystrokes 10 ms apart
            call = text.rindex(")")
            text = text[:call] + ch + text[call:]
            s.change("train.py", text)
            await asyncio.sleep(0.01)
        last = s.versions[s.uri("train.py")]
        assert codes(await s.diagnostics("train.py", last, mark)) == ["DSL501"]
        await asyncio.sleep(1.0)
        versions = [p.version for p in s.published[mark:]]
        # the first keystroke after a quiet spell is checked at once, the rest wait for the pause
        assert len(versions) <= 3 and versions[-1] == last, versions


@lsp_test
async def test_save_publishes(tmp_path):
    write_files(tmp_path, {"train.py": BUG})
    async with Session(tmp_path) as s:
        await s.open("train.py")
        mark = len(s.published)
        s.client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=s.uri("train.py"))))
        assert codes(await s.diagnostics("train.py", 1, mark)) == ["DSL501"]


# ---------------------------------------------------------------------- code actions


@lsp_test
async def test_code_actions_fix_noqa_and_fix_all(tmp_path):
    write_files(tmp_path, {"train.py": BUG})
    async with Session(tmp_path, options={"debounce": 0}) as s:
        [d] = await s.open("train.py")
        actions = await s.actions("train.py", d.range)
        titles = [a.title for a in actions]
        fix = next(a for a in actions if a.kind == lsp.CodeActionKind.QuickFix and "shuffle" in a.title)
        assert fix.is_preferred and fix.diagnostics[0].code == "DSL501"
        [change] = fix.edit.document_changes
        assert change.text_document.version == 1
        assert [(e.range.start.line, e.range.start.character, e.range.end.character, e.new_text) for e in change.edits] == [(4, 51, 65, "")]
        noqa = next(a for a in actions if "noqa" in a.title)
        [edit] = noqa.edit.document_changes[0].edits
        assert edit.new_text == "  # noqa: DSL501" and edit.range.start.line == 4
        assert any(a.kind == "source.fixAll.dslint" for a in actions), titles

        # the fix, applied by the client, makes the finding go away
        version = s.apply("train.py", fix)
        assert s.texts[s.uri("train.py")] == FIXED
        assert await s.diagnostics("train.py", version) == []

        # back to the bug; then `# noqa` silences it
        version = s.change("train.py", BUG)
        [d] = await s.diagnostics("train.py", version)
        noqa = next(a for a in await s.actions("train.py", d.range) if "noqa" in a.title)
        version = s.apply("train.py", noqa)
        assert s.texts[s.uri("train.py")].splitlines()[4].endswith("shuffle=True)  # noqa: DSL501")
        assert await s.diagnostics("train.py", version) == []


@lsp_test
async def test_fix_all_applies_safe_fixes_to_a_fixed_point(tmp_path):
    text = BUG + "\n\ndef other(ds):\n    return DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)  # noqa: DSL101\n"
    write_files(tmp_path, {"train.py": text})
    async with Session(tmp_path, options={"debounce": 0}) as s:
        found = await s.open("train.py")
        assert codes(found) == ["DSL001", "DSL501", "DSL501"]
        top = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
        [action] = await s.actions("train.py", top, only=["source.fixAll"])
        assert action.kind == "source.fixAll.dslint"
        version = s.apply("train.py", action)
        after = s.texts[s.uri("train.py")]
        assert "shuffle" not in after and "noqa" not in after, after
        assert await s.diagnostics("train.py", version) == []
        # nothing left to fix: no edit
        [action] = await s.actions("train.py", top, only=["source.fixAll.dslint"])
        assert not action.edit.document_changes[0].edits


@lsp_test
async def test_unsafe_fixes_say_so_and_fix_all_leaves_them(tmp_path):
    text = (REPO / "fixtures" / "DSL503-worker-option-without-workers" / "bad.py").read_text()
    write_files(tmp_path, {"train.py": text})
    async with Session(tmp_path) as s:
        found = [d for d in await s.open("train.py") if d.code == "DSL503"]
        assert found
        actions = [a for d in found for a in await s.actions("train.py", d.range, only=["quickfix"])]
        unsafe = [a for a in actions if "noqa" not in a.title]
        assert unsafe and all("unsafe" in a.title and not a.is_preferred for a in unsafe), [a.title for a in actions]
        top = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=0))
        [fix_all] = await s.actions("train.py", top, only=["source.fixAll.dslint"])
        assert not fix_all.edit.document_changes[0].edits  # unsafe fixes are not applied


# ---------------------------------------------------------------------- hover


@lsp_test
async def test_hover_on_a_finding_shows_the_rule_page(tmp_path):
    write_files(tmp_path, {"train.py": BUG})
    async with Session(tmp_path) as s:
        [d] = await s.open("train.py")
        inside = lsp.Position(line=4, character=20)
        hover = await s.client.text_document_hover_async(lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=s.uri("train.py")), position=inside))
        assert hover.contents.kind == lsp.MarkupKind.Markdown
        assert "# sampler-with-shuffle (DSL501)" in hover.contents.value
        assert "## What it does" in hover.contents.value
        assert hover.range == d.range
        outside = lsp.Position(line=0, character=0)
        assert await s.client.text_document_hover_async(lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=s.uri("train.py")), position=outside)) is None


# ---------------------------------------------------------------------- project


@lsp_test
async def test_a_dataset_base_class_in_another_file_is_known_and_its_buffer_wins(tmp_path):
    write_files(tmp_path, {"base.py": BASE_ITERABLE, "train.py": STREAM})
    async with Session(tmp_path, options={"debounce": 0}) as s:
        # base.py is not open: read from disk, an IterableDataset subclass -> DSL504
        assert "DSL504" in codes(await s.open("train.py"))
        # base.py opened and edited (unsaved): a map-style Dataset now; train.py is re-published
        await s.open("base.py")
        mark = len(s.published)
        s.change("base.py", BASE_ITERABLE.replace("IterableDataset", "Dataset"))
        found = await s.diagnostics("train.py", 1, mark)
        assert "DSL504" not in codes(found) and "DSL507" in codes(found), codes(found)
        assert "IterableDataset" in (tmp_path / "base.py").read_text()  # the disk is untouched


@lsp_test
async def test_the_buffer_wins_over_the_file_on_disk(tmp_path):
    write_files(tmp_path, {"train.py": FIXED})
    async with Session(tmp_path) as s:
        assert codes(await s.open("train.py", BUG)) == ["DSL501"]


@lsp_test
async def test_tool_dslint_of_the_nearest_pyproject_is_honoured(tmp_path):
    write_files(tmp_path, {
        "pyproject.toml": '[tool.dslint]\nignore = ["DSL501"]\n',
        "train.py": BUG,
        "sub/pyproject.toml": "[tool.dslint]\nselect = [\"DSL5\"]\n",
        "sub/train.py": BUG,
    })
    async with Session(tmp_path) as s:
        assert await s.open("train.py") == []
        assert codes(await s.open("sub/train.py")) == ["DSL501"]


@lsp_test
async def test_a_file_outside_the_workspace_is_checked_alone(tmp_path):
    write_files(tmp_path, {"workspace/empty.py": "", "elsewhere/train.py": BUG})
    async with Session(tmp_path / "workspace") as s:
        uri = from_fs_path(str(tmp_path / "elsewhere" / "train.py"))
        s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=BUG)))
        assert codes(await s.diagnostics("../elsewhere/train.py", 1)) == ["DSL501"]


@lsp_test
async def test_an_excluded_file_gets_no_diagnostics(tmp_path):
    write_files(tmp_path, {"pyproject.toml": '[tool.dslint]\nextend-exclude = ["generated/"]\n', "generated/train.py": BUG})
    async with Session(tmp_path) as s:
        assert await s.open("generated/train.py") == []


@lsp_test
async def test_a_broken_configuration_is_shown_and_defaults_apply(tmp_path):
    write_files(tmp_path, {"pyproject.toml": '[tool.dslint]\nselect = ["NOPE"]\n', "train.py": BUG})
    async with Session(tmp_path) as s:
        assert codes(await s.open("train.py")) == ["DSL501"]
        for _ in range(100):
            if s.client.messages:
                break
            await asyncio.sleep(0.05)
        assert any("NOPE" in m.message for m in s.client.messages)


def test_check_never_imports_pygls(tmp_path):
    write_files(tmp_path, {"train.py": BUG})
    code = (
        "import sys, dslint.cli\n"
        "try:\n    dslint.cli.main(['check', '--no-cache', sys.argv[1]], standalone_mode=False)\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol', 'cattrs')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout + proc.stderr


# ---------------------------------------------------------------------- same answers as `dslint check`


def _cli_findings(root: Path, *paths: str) -> Dict[str, List[tuple]]:
    import json

    from tests.conftest import run_cli

    run = run_cli("check", "--no-cache", "--output-format", "json", *paths, cwd=root)
    out: Dict[str, List[tuple]] = {}
    for item in json.loads(run.stdout):
        name = os.path.relpath(item["filename"], root) if os.path.isabs(item["filename"]) else item["filename"]
        out.setdefault(name, []).append((item["code"], item["location"]["row"] - 1, item["end_location"]["row"] - 1, item["message"]))
    return out


def _lsp_findings(diagnostics) -> List[tuple]:
    return sorted((d.code, d.range.start.line, d.range.end.line, d.message) for d in diagnostics)


@lsp_test
async def test_the_server_reports_what_check_reports_on_every_fixture(tmp_path):
    shutil.copytree(REPO / "fixtures", tmp_path / "fixtures", ignore=shutil.ignore_patterns("*.md"))
    expected = _cli_findings(tmp_path, "fixtures")
    names = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "fixtures").rglob("*.py"))
    async with Session(tmp_path) as s:
        for name in names:
            got = _lsp_findings(await s.open(name))
            assert got == sorted(expected.get(name, [])), name


@lsp_test
async def test_random_edits_end_where_check_of_the_same_text_ends(tmp_path):
    """Incremental edits (the incremental parse and positions underneath) give the
    findings a cold `dslint check` gives for the final text, at every step."""
    sources = sorted((REPO / "fixtures").glob("*/bad.py"))
    text = "\n\n".join(p.read_text() for p in sources[:12])  # ~450 lines, many findings
    write_files(tmp_path, {"train.py": text})
    rng = random.Random(7)
    snippets = ["\n", "# é 😀\n", "x = 1\n", "    # indented comment\n", "def helper():\n    return 1\n", "\n\n"]
    async with Session(tmp_path, options={"debounce": 0}) as s:
        await s.open("train.py")
        for step in range(12):
            lines = s.texts[s.uri("train.py")].split("\n")
            row = rng.randrange(len(lines))
            if step % 3 == 0 and lines[row].strip():  # delete a line
                edit = lsp.TextEdit(range=lsp.Range(start=lsp.Position(line=row, character=0), end=lsp.Position(line=row + 1, character=0)), new_text="")
            else:
                at = lsp.Position(line=row, character=0)
                edit = lsp.TextEdit(range=lsp.Range(start=at, end=at), new_text=rng.choice(snippets))
            version = s.change("train.py", edits=[edit])
            got = await s.diagnostics("train.py", version)
            (tmp_path / "train.py").write_text(s.texts[s.uri("train.py")])
            assert _lsp_findings(got) == sorted(_cli_findings(tmp_path, "train.py").get("train.py", [])), step


def test_the_incremental_parse_equals_a_full_parse():
    """Top-level statements reused across edits: the tree equals libcst's full parse
    (or the text fails to parse in both), and positions equal a full regeneration."""
    import libcst as cst

    from dslint.semantics.walk import iter_subtree
    from dslint.server_incremental import IncrementalParser, original_node_ranges

    sources = [p.read_text() for p in sorted((REPO / "fixtures").glob("*/*.py"))]
    texts = ["\n".join(sources[i : i + 4]) for i in range(0, len(sources), 4)]
    rng = random.Random(11)
    snippets = ["x = 1\n", "\n", "# c\n", "    # ind\n", "def g():\n    pass\n", "        z = 2\n", "    \n", "class A:\n  y = 1\n", "(\n", "\\\n"]
    parser = IncrementalParser()
    reused = 0
    for text in texts:
        parser.parse(text)
        for _ in range(25):
            lines = text.splitlines(True)
            i = rng.randrange(len(lines))
            op = rng.randrange(3)
            if op == 0:
                lines.insert(i, rng.choice(snippets))
            elif op == 1:
                del lines[i]
            else:
                j = rng.randrange(len(lines[i]))
                lines[i] = lines[i][:j] + rng.choice(["x", "_1", "é", " ", ":"]) + lines[i][j:]
            new = "".join(lines)
            try:
                expected = cst.parse_module(new)
            except Exception:
                expected = None
            before = parser.stats["incremental"]
            try:
                got = parser.parse(new)
            except Exception:
                got = None
            assert (got is None) == (expected is None), new
            if got is None:
                continue
            reused += parser.stats["incremental"] - before
            assert got.deep_equals(expected) and got.code == expected.code
            nodes = list(iter_subtree(got))[1:]
            picked = rng.sample(nodes, min(10, len(nodes)))
            assert parser.node_ranges(got, picked) == original_node_ranges(got, picked)
            text = new
    assert reused > 50, parser.stats  # the incremental path did the work


def test_the_server_runs_nothing_of_the_project(tmp_path):
    """The trap project of test_never_executes, opened in the server (started from inside it)."""
    from tests.test_never_executes import assert_no_markers, build_trap

    project, markers = build_trap(tmp_path)

    @lsp_test
    async def session():
        async with Session(project) as s:
            assert "DSL501" in codes(await s.open("train.py"))
            await s.open("victim_pkg/data.py")

    session()
    assert_no_markers(markers)


# ---------------------------------------------------------------------- README: editor setups


def _editor_section() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Editor integration\n", 1)[1]
    return section.split("\n## ", 1)[0]


def _block(heading: str, language: str) -> str:
    part = _editor_section().split(f"### {heading}", 1)[1].split("\n### ", 1)[0]
    return re.search(rf"```{language}\n(.*?)```", part, re.S).group(1)


def _lua_cmd(lua: str) -> List[str]:
    table = re.search(r"cmd\s*=\s*\{([^}]*)\}", lua).group(1)
    return re.findall(r'"([^"]*)"', table)


def test_readme_helix_neovim_and_vscode_snippets_start_dslint_server():
    import json

    helix = tomllib.loads(_block("Helix", "toml"))
    server = helix["language-server"]["dslint"]
    assert [server["command"], *server["args"]] == ["dslint", "server"]
    [python] = [lang for lang in helix["language"] if lang["name"] == "python"]
    assert "dslint" in python["language-servers"]

    lua = _block("Neovim (0.11+)", "lua")
    assert _lua_cmd(lua) == ["dslint", "server"]
    assert re.search(r'vim\.lsp\.enable\("dslint"\)', lua) and 'filetypes = { "python" }' in lua

    vscode = json.loads(_block("VS Code", "json"))
    assert [vscode["glspc.server.command"], *vscode["glspc.server.commandArguments"]] == ["dslint", "server"]
    assert vscode["glspc.server.languageId"] == ["python"]
    assert "source.fixAll.dslint" in vscode["editor.codeActionsOnSave"]


NVIM_CLIENT = """
local cmd = vim.fn.json_decode(os.getenv("DSLINT_TEST_CMD"))
local out = os.getenv("DSLINT_TEST_OUT")
local done = false
local function finish(result)
  local handle = io.open(out, "w")
  handle:write(vim.fn.json_encode(result))
  handle:close()
  done = true
end
local handlers = {
  ["textDocument/publishDiagnostics"] = function(err, result, ctx, config)
    if result and #result.diagnostics > 0 then finish(result) end
  end,
}
if vim.lsp.config ~= nil and vim.lsp.enable ~= nil then
  -- Neovim 0.11+: the README's snippet itself (its cmd on PATH is the test's `dslint`)
  local snippet = assert(loadstring(os.getenv("DSLINT_TEST_SNIPPET")))
  snippet()
  vim.lsp.config("dslint", { handlers = handlers })
  vim.cmd("edit " .. os.getenv("DSLINT_TEST_FILE"))
  vim.cmd("filetype detect")
else
  -- older Neovim: the same command, started with the API it has
  local id = vim.lsp.start_client({ cmd = cmd, root_dir = os.getenv("DSLINT_TEST_ROOT"), handlers = handlers })
  vim.cmd("edit " .. os.getenv("DSLINT_TEST_FILE"))
  vim.lsp.buf_attach_client(0, id)
end
vim.wait(90000, function() return done end, 100)
vim.cmd("qa!")
"""


@pytest.mark.skipif(shutil.which("nvim") is None, reason="nvim is not installed")
def test_neovim_headless_gets_the_diagnostics(tmp_path):
    """A real Neovim, headless, starts the README's command and receives the finding."""
    import json

    project = tmp_path / "project"
    write_files(project, {"train.py": BUG, "pyproject.toml": "[tool.dslint]\n"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "dslint"  # `dslint` on PATH: this checkout's dslint
    launcher.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m dslint \"$@\"\n")
    launcher.chmod(0o755)
    script = tmp_path / "client.lua"
    script.write_text(NVIM_CLIENT)
    out = tmp_path / "published.json"
    lua = _block("Neovim (0.11+)", "lua")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "DSLINT_TEST_CMD": json.dumps(_lua_cmd(lua)),
        "DSLINT_TEST_SNIPPET": lua,
        "DSLINT_TEST_OUT": str(out),
        "DSLINT_TEST_FILE": str(project / "train.py"),
        "DSLINT_TEST_ROOT": str(project),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    proc = subprocess.run(["nvim", "--headless", "--clean", "-c", f"luafile {script}"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=150)
    assert out.is_file(), (proc.returncode, proc.stdout, proc.stderr)
    published = json.loads(out.read_text())
    [diagnostic] = published["diagnostics"]
    assert diagnostic["code"] == "DSL501" and diagnostic["source"] == "dslint"
    assert diagnostic["range"]["start"] == {"line": 4, "character": 11}
