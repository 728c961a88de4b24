"""`--fix`, `--unsafe-fixes`, `--diff`, `--fix-only`, and the guarantees of every fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import libcst as cst
import pytest

from tests.conftest import FIXTURES, write_files
from tests.conftest import run_cli as _run_cli


def run_cli(*args, **kwargs):
    """The CLI with the opt-in DSL104 on: the `with` rewrite these tests exercise is offered
    for handles that are used and dropped at once, which DSL104 reports (not DSL101/DSL102)."""
    if args and args[0] == "check":
        args = ("check", "--preview", "--extend-select", "DSL104", *args[1:])
    return _run_cli(*args, **kwargs)

SOURCE = """
import json
from PIL import Image
from torch.utils.data import DataLoader, Dataset, RandomSampler


class Frames(Dataset):
    def __getitem__(self, i):
        # decode one frame
        img = Image.open(self.paths[i]).convert("RGB")  # keep this comment
        meta = json.load(open(self.metas[i]))
        return img, meta


a = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)  # trailing
b = DataLoader(ds, batch_size=8, persistent_workers=True)
c = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)  # noqa: DSL501
"""


@pytest.fixture
def project(tmp_path):
    write_files(tmp_path, {"pkg/data.py": SOURCE})
    return tmp_path


def read(project):
    return (project / "pkg" / "data.py").read_text()


def test_full_output_marks_fixable_and_json_carries_edits(project):
    run = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=project)
    lines = run.stdout.splitlines()
    assert any("DSL501 [*]" in line for line in lines)
    assert any("DSL503 " in line and "[*]" not in line for line in lines)  # unsafe: not marked by default
    assert "[*] 3 fixable with the `--fix` option." in run.stderr
    assert "(1 more fixable with `--fix --unsafe-fixes`.)" in run.stderr
    data = json.loads(run_cli("check", "--no-cache", "--output-format", "json", ".", cwd=project).stdout)
    fix = next(d for d in data if d["code"] == "DSL501")["fix"]
    assert fix["applicability"] == "safe" and fix["message"] == "Remove `shuffle`"
    (edit,) = fix["edits"]
    assert edit["content"] == "" and edit["location"]["row"] == 14 and edit["end_location"]["row"] == 14
    unsafe = next(d for d in data if d["code"] == "DSL503")["fix"]
    assert unsafe["applicability"] == "unsafe"


def test_diff_writes_nothing(project):
    before = read(project)
    run = run_cli("check", "--no-cache", "--diff", ".", cwd=project)
    assert run.returncode == 1
    assert run.stdout.startswith("--- a/pkg/data.py\n+++ b/pkg/data.py\n")
    assert "-a = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)  # trailing" in run.stdout
    assert "+a = DataLoader(ds, sampler=RandomSampler(ds))  # trailing" in run.stdout
    assert "Would fix 3 problems." in run.stderr
    assert read(project) == before


def test_fix_applies_safe_fixes_only_and_reports_the_rest(project):
    run = run_cli("check", "--no-cache", "--fix", "--output-format", "concise", ".", cwd=project)
    after = read(project)
    assert run.returncode == 1  # DSL503 (unsafe) and the noqa'd line remain
    assert "Found 4 problems (3 fixed, 1 remaining)." in run.stderr
    assert "(1 more fix available with `--unsafe-fixes`.)" in run.stderr
    assert [line.split()[1] for line in run.stdout.splitlines()] == ["DSL503"]
    assert '        with Image.open(self.paths[i]) as im:\n            img = im.convert("RGB")  # keep this comment\n' in after
    assert "        with open(self.metas[i]) as f:\n            meta = json.load(f)\n" in after
    assert "a = DataLoader(ds, sampler=RandomSampler(ds))  # trailing\n" in after
    # a suppressed finding is never fixed
    assert "c = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)  # noqa: DSL501\n" in after
    assert "        # decode one frame\n" in after
    # a second run changes nothing
    again = run_cli("check", "--no-cache", "--fix", ".", cwd=project)
    assert read(project) == after and "0 fixed" in again.stderr


def test_unsafe_fixes_and_exit_zero_when_nothing_remains(project):
    run = run_cli("check", "--no-cache", "--fix", "--unsafe-fixes", "--ignore", "DSL001", ".", cwd=project)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Found 4 problems (4 fixed, 0 remaining)." in run.stderr
    assert "b = DataLoader(ds, batch_size=8)\n" in read(project)
    run = run_cli("check", "--no-cache", "--fix", "--unsafe-fixes", "--ignore", "DSL001", ".", cwd=project)
    assert run.returncode == 0 and "All checks passed!" in run.stderr


def test_fix_only_reports_nothing_else(project):
    run = run_cli("check", "--no-cache", "--fix-only", ".", cwd=project)
    assert run.returncode == 0 and run.stdout == ""
    assert "Fixed 3 problems." in run.stderr
    run = run_cli("check", "--no-cache", "--fix-only", "--exit-non-zero-on-fix", "--unsafe-fixes", ".", cwd=project)
    assert run.returncode == 1 and "Fixed 1 problem." in run.stderr


def test_overlapping_fixes_are_applied_in_passes(tmp_path):
    # the DSL104 fix rewrites the whole statement, which contains DSL501's edit: DSL501 waits a pass
    write_files(
        tmp_path,
        {
            "d.py": """
            import json
            from torch.utils.data import DataLoader, Dataset

            class D(Dataset):
                def loader(self, s):
                    return DataLoader(json.load(open(self.index)), sampler=s, shuffle=True)

                def __getitem__(self, i):
                    return json.load(open(self.a[i])), json.load(open(self.b[i]))
            """
        },
    )
    run = run_cli("check", "--no-cache", "--fix", "--output-format", "concise", ".", cwd=tmp_path)
    text = (tmp_path / "d.py").read_text()
    cst.parse_module(text)
    # `s` is a parameter, so it can be None: DSL501 keeps shuffling for that path
    assert "        with open(self.index) as f:\n            return DataLoader(json.load(f), sampler=s, shuffle=(s is None))\n" in text
    # only the first open of the tuple can move in front of the statement; the second would
    # now run before `json.load(f)`, so it keeps its finding and gets no fix
    assert "        with open(self.a[i]) as f:\n            return json.load(f), json.load(open(self.b[i]))\n" in text
    assert "Found 4 problems (3 fixed, 1 remaining)." in run.stderr
    assert run.stdout.count("DSL104") == 1


def test_unsafe_to_move_calls_get_no_fix(tmp_path):
    write_files(
        tmp_path,
        {
            "d.py": """
            from PIL import Image
            from torch.utils.data import Dataset

            class D(Dataset):
                def __getitem__(self, i):
                    a = i and Image.open(self.p).copy()
                    b = [Image.open(p).copy() for p in self.paths]
                    c = f(load(), Image.open(self.p).copy())
                    return a, b, c
            """
        },
    )
    run = run_cli("check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path)
    data = json.loads(run.stdout)
    assert [d["code"] for d in data] == ["DSL104", "DSL104", "DSL104"]
    assert all(d["fix"] is None for d in data)


def test_fixed_stdin_is_printed(tmp_path):
    source = "from torch.utils.data import DataLoader\nx = DataLoader(ds, sampler=s, shuffle=True)\n"
    run = run_cli("check", "--fix", "--stdin-filename", "x.py", "-", cwd=tmp_path, input=source.encode())
    assert run.stdout == "from torch.utils.data import DataLoader\nx = DataLoader(ds, sampler=s, shuffle=(s is None))\n"
    assert not (tmp_path / "x.py").exists()


def test_crlf_files_keep_their_line_endings(tmp_path):
    source = SOURCE.replace("\n", "\r\n")
    (tmp_path / "w.py").write_bytes(source.encode())
    run = run_cli("check", "--no-cache", "--fix", ".", cwd=tmp_path)
    data = (tmp_path / "w.py").read_bytes()
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert run.returncode == 1


# ------------------------------------------------------------------- fix-safety corpus


def _copy_corpus(dest: Path) -> list:
    """Every fixture's bad.py, and real code: the installed torch package's data and nn files."""
    import torch

    copied = []
    for bad in sorted(FIXTURES.glob("*/bad.py")):
        target = dest / "fixtures" / bad.parent.name / "bad.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(bad, target)
        copied.append(target)
    torch_root = Path(torch.__file__).parent
    for sub in ("utils/data", "nn/modules", "optim"):
        for source in sorted((torch_root / sub).rglob("*.py")):
            target = dest / "torch_src" / sub / source.relative_to(torch_root / sub)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            copied.append(target)
    return copied


@pytest.mark.slow
def test_fix_safety_corpus(tmp_path):
    files = _copy_corpus(tmp_path)
    originals = {p: p.read_bytes() for p in files}
    first = run_cli("check", "--no-cache", "--no-prefilter", "--preview", "--fix", "--unsafe-fixes", "--exit-zero", ".", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    changed = [p for p in files if p.read_bytes() != originals[p]]
    assert changed, "the corpus has fixable findings"
    for path in files:
        cst.parse_module(path.read_bytes())  # every output parses
    snapshot = {p: p.read_bytes() for p in files}
    second = run_cli("check", "--no-cache", "--no-prefilter", "--preview", "--fix", "--unsafe-fixes", "--exit-zero", ".", cwd=tmp_path)
    assert second.returncode == 0
    assert {p: p.read_bytes() for p in files} == snapshot, "a second --fix changed something"
    assert "0 fixed" in second.stderr or "All checks passed!" in second.stderr
    # nothing fixable is left anywhere: each fix removed its own finding
    report = run_cli("check", "--no-cache", "--no-prefilter", "--preview", "--unsafe-fixes", "--output-format", "json", ".", cwd=tmp_path)
    leftover = [d for d in json.loads(report.stdout) if d["fix"] is not None]
    assert leftover == []
    print(f"fix-safety corpus: {len(files)} files, {len(changed)} fixed, all parse, second pass a no-op")


def test_with_rewrite_is_safe_only_when_the_statement_consumes_the_handle(tmp_path):
    # csv.reader keeps the file and reads it on the next line: closing it after the
    # statement would raise `ValueError: I/O operation on closed file`
    write_files(
        tmp_path,
        {
            "d.py": """
            import csv
            import json
            from torch.utils.data import Dataset

            class D(Dataset):
                def __getitem__(self, i):
                    reader = csv.reader(open(self.files[i]))
                    rows = [r for r in reader]
                    meta = json.load(open(self.metas[i]))
                    return rows, meta
            """
        },
    )
    run = run_cli("check", "--no-cache", "--fix", "--output-format", "concise", ".", cwd=tmp_path)
    text = (tmp_path / "d.py").read_text()
    assert "        reader = csv.reader(open(self.files[i]))\n" in text
    assert "        with open(self.metas[i]) as f:\n            meta = json.load(f)\n" in text
    assert "(1 more fix available with `--unsafe-fixes`.)" in run.stderr
    data = json.loads(run_cli("check", "--no-cache", "--unsafe-fixes", "--output-format", "json", ".", cwd=tmp_path).stdout)
    (finding,) = [d for d in data if d["code"] == "DSL104"]
    assert finding["fix"]["applicability"] == "unsafe" and "may read it after the block closes it" in finding["fix"]["message"]
    run_cli("check", "--no-cache", "--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    # `f` is taken by the first fix now: a fresh name
    assert "        with open(self.files[i]) as fh:\n            reader = csv.reader(fh)\n" in (tmp_path / "d.py").read_text()
