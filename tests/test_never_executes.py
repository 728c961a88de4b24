"""`dslint check` never imports or runs the code it checks.

The checked directory is a trap: every module, if imported or executed, writes a
marker file and kills the process (exit 97) — at module top level, in a package
``__init__.py``, a ``conftest.py``, a ``setup.py``, a ``.pth`` file, a
``sitecustomize.py``, a fake ``torch`` package, and modules named like the
standard library and dslint's dependencies (``json.py``, ``typing.py``,
``click.py``, ...), which ``python -m dslint`` run from inside the project would
otherwise import in place of the real ones. The test asserts that no marker
appears, that the run ends normally with its findings, and that after an
in-process check neither torch nor any checked module is in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli, write_files

TRAP = """
import os as _os
_os.makedirs({markers!r}, exist_ok=True)
open(_os.path.join({markers!r}, {name!r}), "w").write("executed")
_os._exit(97)
"""

DATASET_CODE = """
from torch.utils.data import DataLoader, Dataset, RandomSampler


class Records(Dataset):
    def __getitem__(self, i):
        return open(self.files[i]).read()


loader = DataLoader(Records(), sampler=RandomSampler(range(3)), shuffle=True)
"""

MODULES = {
    # module top level, next to dataset code that dslint does parse
    "train.py": DATASET_CODE,
    # a package: __init__ and a submodule importing its sibling
    "victim_pkg/__init__.py": "from torch.utils.data import Dataset\n",
    "victim_pkg/data.py": "from . import helpers\nfrom torch.utils.data import DataLoader\n" + DATASET_CODE,
    "victim_pkg/helpers.py": "from torch.utils.data import Dataset\n",
    # what test runners and installers execute
    "conftest.py": "import pytest\nfrom torch.utils.data import Dataset\n",
    "setup.py": "from setuptools import setup\nfrom torch.utils.data import Dataset\nsetup(name='victim')\n",
    # interpreter start-up hooks
    "sitecustomize.py": "",
    "usercustomize.py": "",
    "__main__.py": "from torch.utils.data import DataLoader\n",
    # a fake torch: importing torch from the checked tree would run it
    "torch/__init__.py": "",
    "torch/utils/__init__.py": "",
    "torch/utils/data.py": "class Dataset: pass\nclass DataLoader: pass\n",
    # modules that shadow the standard library and dslint's own dependencies
    **{f"{name}.py": "" for name in ("json", "typing", "dataclasses", "re", "click", "libcst", "pathspec", "tomllib", "tomli", "hashlib")},
}


def build_trap(root: Path) -> tuple:
    """The trap project under root/project; markers go to root/markers."""
    project = root / "project"
    markers = root / "markers"
    files = {}
    for name, body in MODULES.items():
        trap = TRAP.format(markers=str(markers), name=name.replace("/", "_"))
        files[name] = trap + "\n" + body
    write_files(project, files)
    # a .pth file runs its `import` lines when its directory is a site directory
    (project / "zz_victim.pth").write_text(TRAP.format(markers=str(markers), name="pth").strip().replace("\n", "; ") + "\n")
    # a cookie naming a codec nobody has: looked up, never imported from the project; the file is
    # then read as UTF-8 (it is Python that way: its loader is reported), or a DSL002 when it is not
    cookie = "# -*- coding: victim_codec -*-\n" + TRAP.format(markers=str(markers), name="cookie")
    (project / "cookie.py").write_text(cookie + DATASET_CODE)
    (project / "template.py").write_text(cookie + "<victim name='x'/>\n")
    return project, markers


def assert_no_markers(markers: Path) -> None:
    found = sorted(p.name for p in markers.iterdir()) if markers.exists() else []
    assert found == [], f"checked code was executed: {found}"


@pytest.fixture
def trap(tmp_path):
    return build_trap(tmp_path)


def _reported(stdout: str) -> set:
    return {line.split(":", 1)[0] for line in stdout.splitlines() if ": DSL" in line}


@pytest.mark.parametrize("flags", [[], ["--no-prefilter"]], ids=["default", "no-prefilter"])
def test_console_script_runs_nothing(trap, flags):
    project, markers = trap
    script = Path(sys.executable).parent / "dslint"
    proc = subprocess.run(
        [str(script), "check", "--no-cache", "--output-format", "concise", *flags, "."],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert_no_markers(markers)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    # the trap modules were read and parsed, not skipped
    reported = _reported(proc.stdout)
    assert {"train.py", os.path.join("victim_pkg", "data.py"), "cookie.py", "template.py"} <= reported, proc.stdout


def test_python_m_from_inside_the_project_runs_nothing(trap):
    """`python -m dslint` puts the cwd first on sys.path; the project's json.py,
    typing.py, click.py... must still not be imported in place of the real ones."""
    project, markers = trap
    run = run_cli("check", "--output-format", "concise", ".", cwd=project)  # with the cache, as users run it
    assert_no_markers(markers)
    assert run.returncode == 1 and "Traceback" not in run.stderr, (run.returncode, run.stderr)
    assert "train.py" in _reported(run.stdout)
    run = run_cli("check", "--fix", "--diff", ".", cwd=project)
    assert_no_markers(markers)
    assert run.returncode == 1 and "Traceback" not in run.stderr


IN_PROCESS = """
import json, os, sys
project = os.path.realpath(sys.argv[1])
import dslint.cli
code = None
try:
    dslint.cli.main(["check", "--no-cache", "--no-prefilter", "-j", "2", "--output-format", "json", project], standalone_mode=False)
except SystemExit as exc:
    code = exc.code
from_project = sorted(
    name for name, module in list(sys.modules.items())
    if os.path.realpath(getattr(module, "__file__", None) or "/nonexistent").startswith(project + os.sep)
)
print(json.dumps({"code": code, "torch": "torch" in sys.modules, "from_project": from_project}))
"""


def test_check_imports_neither_torch_nor_any_checked_module(trap, tmp_path):
    project, markers = trap
    # cwd is outside the project: `python -c` puts the cwd on sys.path itself
    proc = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, str(project)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert_no_markers(markers)
    assert proc.returncode == 0, proc.stderr
    state = json.loads(proc.stdout.strip().splitlines()[-1])
    # (torch is installed in the test environment, so its absence means dslint did not import it)
    assert state == {"code": 1, "torch": False, "from_project": []}, state
