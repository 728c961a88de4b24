"""Jupyter notebooks in ``dslint check``: real notebooks written with ``nbformat`` (v4,
with outputs, metadata, markdown cells and magics), checked through the real CLI.

Cells are numbered as ruff numbers them: the 1-based position among all cells.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli, write_files

nbformat = pytest.importorskip("nbformat")
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell  # noqa: E402

# --------------------------------------------------------------------- notebooks

STREAM = """
from torch.utils.data import IterableDataset


class Stream(IterableDataset):
    def __iter__(self):
        yield from range(10)
""".strip()

SHUFFLED = "ds = Stream()\nloader = DataLoader(ds, batch_size=4, shuffle=True)\nlen(ds)"
SHUFFLE_MSG_START = "nb.ipynb:cell 7:2:10: DSL504"


def notebook(cells, **metadata):
    nb = new_notebook()
    nb.metadata.update({"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                        "language_info": {"name": "python", "version": "3.11.0"}, **metadata})
    nb.cells = cells
    return nb


def training_notebook():
    """A dataset in cell 3, its loader in cell 7; magics, outputs and markdown between."""
    return notebook([
        new_markdown_cell("# Training\nThe data pipeline."),
        new_code_cell("%matplotlib inline\n!pip install torch\nimport torch\nfrom torch.utils.data import DataLoader",
                      execution_count=1, outputs=[new_output("stream", name="stdout", text="Requirement already satisfied\n")]),
        new_code_cell(STREAM, execution_count=2),
        new_raw_cell("not python at all: def (:"),
        new_code_cell("%%bash\necho 'not python' (\nls -la", execution_count=3),
        new_code_cell("%%capture\nfiles = !ls data\nStream?\n%time x = 1", execution_count=4),
        new_code_cell(SHUFFLED, execution_count=5,
                      outputs=[new_output("execute_result", data={"text/plain": "10"}, execution_count=5)]),
    ])


def write_nb(path: Path, nb, **kwargs) -> Path:
    nbformat.write(nb, str(path), **kwargs)
    return path


def check(*args, cwd):
    return run_cli("check", "--no-cache", *args, cwd=cwd)


def located(stdout: str) -> list:
    """(location, code) of every concise line."""
    out = []
    for line in stdout.splitlines():
        where, _, rest = line.partition(": ")
        out.append((where, rest.split(" ")[0]))
    return out


@pytest.fixture
def project(tmp_path) -> Path:
    write_nb(tmp_path / "nb.ipynb", training_notebook())
    return tmp_path


# ------------------------------------------------------------ checking notebooks


def test_cells_are_one_module_and_findings_point_at_the_cell(project):
    run = check("--output-format", "concise", ".", cwd=project)
    assert run.returncode == 1, run.stdout + run.stderr
    # DSL504 needs the dataset of cell 3 to judge the loader of cell 7; DSL304 too
    assert located(run.stdout) == [("nb.ipynb:cell 7:2:10", "DSL504"), ("nb.ipynb:cell 7:3:1", "DSL304")]
    assert "DSL000" not in run.stdout  # magics, a bash cell and a raw cell are no syntax errors


def test_magics_and_help_are_masked_never_parse_errors(tmp_path):
    from dslint.notebooks import mask

    source = (
        "x = (1\n     % 2)\n"  # a modulo continuing an expression is Python
        "s = '''\n%not a magic\n'''\n"
        "files = !ls\nenv = %env\nobj?\n?obj\nobj.attr??\n"
        "for i in range(2):\n    %time f(i)\n"
        "!ls \\\n  -la\n"
        "print('what?')  # really?"
    )
    lines, masked = mask(source)
    assert "".join(lines) == (
        "x = (1\n     % 2)\ns = '''\n%not a magic\n'''\n"
        "pass\npass\npass\npass\npass\n"
        "for i in range(2):\n    pass\n"
        "pass\npass\n"
        "print('what?')  # really?\n"
    )
    assert sorted(masked) == [5, 6, 7, 8, 9, 11, 12, 13]
    assert mask("%%timeit x = 1\nx + 1")[0] == ["\n", "x + 1\n"]  # a Python cell magic: its line only
    # automagic: a line magic without its `%`, when the line is not Python; a name of one used as Python stays
    assert mask("conda install pyg -c pyg\npip = 3\ncd ..\nls -la\nenv.get('x')\n")[0] == [
        "pass\n", "pip = 3\n", "pass\n", "ls -la\n", "env.get('x')\n"]
    assert mask("%%writefile a.py\ndef (:\n")[0] == ["\n", "\n"]  # any other: the whole cell

    write_nb(tmp_path / "m.ipynb", notebook([new_code_cell(source), new_code_cell("%%html\n<b>(</b>")]))
    run = check("m.ipynb", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


def test_an_invalid_notebook_is_an_io_error_not_a_crash(project):
    (project / "broken.ipynb").write_text('{"cells": [')
    (project / "old.ipynb").write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": []}))
    (project / "list.ipynb").write_text("[1, 2]")
    (project / "cells.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                                     "cells": [{"cell_type": "code", "source": 3}]}))
    run = check("--output-format", "concise", ".", cwd=project)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    out = run.stdout
    assert "broken.ipynb:1:1: DSL002 cannot read broken.ipynb as a Jupyter notebook: not valid JSON" in out
    assert "old.ipynb:1:1: DSL002 cannot read old.ipynb as a Jupyter notebook: nbformat 3 is not supported" in out
    assert "list.ipynb:1:1: DSL002" in out and "cells.ipynb:1:1: DSL002" in out
    assert SHUFFLE_MSG_START in out  # the other notebook is still checked


def test_a_notebook_of_another_language_is_skipped(tmp_path):
    nb = notebook([new_code_cell("loader <- DataLoader(ds, shuffle=True)!")],
                  kernelspec={"name": "ir", "display_name": "R", "language": "R"}, language_info={"name": "R"})
    write_nb(tmp_path / "r.ipynb", nb)
    assert check("r.ipynb", cwd=tmp_path).returncode == 0


def test_discovery_include_and_extend_include(project):
    write_files(project, {"a.py": "x = 1\n", ".ipynb_checkpoints/nb-checkpoint.ipynb": "{}"})
    shown = run_cli("check", "--show-files", ".", cwd=project).stdout.splitlines()
    assert [Path(p).name for p in shown] == ["a.py", "nb.ipynb"]  # checkpoints are excluded
    no_nb = run_cli("check", "--show-files", "--config", "include = ['*.py']", ".", cwd=project).stdout
    assert "nb.ipynb" not in no_nb and "a.py" in no_nb
    (project / "extra.pyw").write_text("x = 1\n")
    more = run_cli("check", "--show-files", "--config", "extend-include = ['*.pyw']", ".", cwd=project).stdout
    assert [Path(p).name for p in more.splitlines()] == ["a.py", "extra.pyw", "nb.ipynb"]
    # a notebook named explicitly is checked whatever `include` says
    run = check("--config", "include = ['*.py']", "--output-format", "concise", "nb.ipynb", cwd=project)
    assert SHUFFLE_MSG_START in run.stdout


def test_the_cache_replays_notebook_findings(project):
    first = run_cli("check", "--output-format", "concise", ".", cwd=project)
    second = run_cli("check", "--output-format", "concise", "-v", ".", cwd=project)
    assert first.stdout == second.stdout and SHUFFLE_MSG_START in second.stdout
    assert "1 from cache" in second.stderr


def test_stdin_notebook(project):
    data = (project / "nb.ipynb").read_bytes()
    run = run_cli("check", "--output-format", "concise", "--stdin-filename", "nb.ipynb", "-", cwd=project, input=data)
    assert SHUFFLE_MSG_START in run.stdout


# --------------------------------------------------------------------- noqa


def test_noqa_in_a_cell(tmp_path):
    nb = training_notebook()
    nb.cells[6].source = SHUFFLED.replace("shuffle=True)", "shuffle=True)  # noqa: DSL504").replace(
        "len(ds)", "len(ds)  # noqa: DSL304, DSL501")
    write_nb(tmp_path / "nb.ipynb", nb)
    run = check("--output-format", "concise", "nb.ipynb", cwd=tmp_path)
    assert run.stdout.splitlines() == [
        "nb.ipynb:cell 7:3:10: DSL001 [*] unused `noqa` directive: `DSL501` suppressed nothing on this line"
    ]
    fixed = run_cli("check", "--no-cache", "--fix", "nb.ipynb", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert nbformat.read(str(tmp_path / "nb.ipynb"), as_version=4).cells[6].source.endswith("len(ds)  # noqa: DSL304")


# --------------------------------------------------------------------- fixes


def source_outside(raw: str, cell: int) -> tuple:
    from dslint.notebook_json import source_spans

    a, b = source_spans(raw)[cell - 1]
    return raw[:a], raw[b:]


# DSL102 (a library handle opened per sample, never closed) in cell 3, DSL501 in cell 4: both fixable
FIXABLE = [
    new_markdown_cell("Loading"),
    new_code_cell("import tables\nfrom torch.utils.data import DataLoader, Dataset, RandomSampler\n%load_ext autoreload",
                  execution_count=1, outputs=[new_output("stream", name="stderr", text="warn\n")]),
    new_code_cell("class Records(Dataset):\n    def __getitem__(self, i):\n        %time y = 1\n"
                  "        return tables.open_file(self.files[i]).read()\n\n    def __len__(self):\n        return 3",
                  execution_count=2, metadata={"tags": ["data"], "collapsed": False}),
    new_code_cell("ds = Records()\nloader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True, num_workers=2)\n",
                  execution_count=3, outputs=[new_output("error", ename="ValueError", evalue="sampler", traceback=["tb"])]),
]


@pytest.mark.parametrize("style", ["nbformat", "indent-2-no-newline"])
def test_fix_writes_back_into_the_cells_and_nothing_else(tmp_path, style):
    nb = notebook(FIXABLE)
    path = tmp_path / "nb.ipynb"
    if style == "nbformat":
        write_nb(path, nb)
    else:  # another writer's formatting: 2 spaces, keys not sorted, non-ASCII escaped, no final newline
        doc = json.loads(nbformat.writes(nb))
        doc = {"nbformat": doc["nbformat"], "nbformat_minor": doc["nbformat_minor"], "cells": doc["cells"], "metadata": doc["metadata"]}
        doc["cells"][0]["source"] = "Loading \u00e9"
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=True))
    before = path.read_text()
    diff = run_cli("check", "--no-cache", "--diff", "nb.ipynb", cwd=tmp_path)
    assert diff.returncode == 1
    assert "--- a/nb.ipynb:cell 3\n+++ b/nb.ipynb:cell 3\n" in diff.stdout
    assert "--- a/nb.ipynb:cell 4\n+++ b/nb.ipynb:cell 4\n" in diff.stdout
    assert path.read_text() == before  # --diff writes nothing

    run = run_cli("check", "--no-cache", "--fix", "nb.ipynb", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    after = path.read_text()
    fixed = nbformat.read(str(path), as_version=4)
    nbformat.validate(fixed)
    assert fixed.cells[2].source == (
        "class Records(Dataset):\n    def __getitem__(self, i):\n        %time y = 1\n"
        "        with tables.open_file(self.files[i]) as f:\n            return f.read()\n\n    def __len__(self):\n        return 3"
    )
    assert fixed.cells[3].source == "ds = Records()\nloader = DataLoader(ds, sampler=RandomSampler(ds), num_workers=2)\n"
    # the file differs only inside the two fixed sources
    head3, tail3 = source_outside(before, 3)
    head3_after, _ = source_outside(after, 3)
    assert head3 == head3_after
    _, tail4 = source_outside(before, 4)
    _, tail4_after = source_outside(after, 4)
    assert tail4 == tail4_after
    old, new = json.loads(before), json.loads(after)
    for i, (a, b) in enumerate(zip(old["cells"], new["cells"])):
        if i in (2, 3):
            a, b = dict(a, source=None), dict(b, source=None)
        assert a == b
    assert list(new) == list(old) and new["metadata"] == old["metadata"]
    assert after.endswith("\n") == before.endswith("\n")
    if style != "nbformat":
        assert "\\u00e9" in after and "\n  " in after
    assert check("nb.ipynb", cwd=tmp_path).returncode == 0


def test_fix_of_a_notebook_read_from_stdin_prints_the_notebook(tmp_path):
    write_nb(tmp_path / "nb.ipynb", notebook(FIXABLE))
    data = (tmp_path / "nb.ipynb").read_bytes()
    run = run_cli("check", "--no-cache", "--fix", "--stdin-filename", "nb.ipynb", "-", cwd=tmp_path, input=data)
    printed = nbformat.reads(run.stdout, as_version=4)
    nbformat.validate(printed)
    assert "shuffle" not in printed.cells[3].source
    assert (tmp_path / "nb.ipynb").read_bytes() == data  # stdin is never written back


# --------------------------------------------------------------------- adoption


def test_add_noqa_writes_into_the_cell(project):
    before = nbformat.read(str(project / "nb.ipynb"), as_version=4)
    run = run_cli("check", "--no-cache", "--add-noqa", "nb.ipynb", cwd=project)
    assert run.returncode == 0 and "Added 2 noqa directives." in run.stderr
    after = nbformat.read(str(project / "nb.ipynb"), as_version=4)
    nbformat.validate(after)
    assert after.cells[6].source == (
        "ds = Stream()\nloader = DataLoader(ds, batch_size=4, shuffle=True)  # noqa: DSL504\nlen(ds)  # noqa: DSL304"
    )
    assert [c for i, c in enumerate(after.cells) if i != 6] == [c for i, c in enumerate(before.cells) if i != 6]
    assert check("nb.ipynb", cwd=project).returncode == 0


def test_baseline_on_a_notebook(project):
    assert run_cli("check", "--no-cache", "--write-baseline", "baseline.json", ".", cwd=project).returncode == 0
    entries = json.loads((project / "baseline.json").read_text())["findings"]
    assert [(e["path"], e["code"]) for e in entries] == [("nb.ipynb", "DSL504"), ("nb.ipynb", "DSL304")]
    # cells added above and a new defect in a new cell: only the new one is reported
    nb = nbformat.read(str(project / "nb.ipynb"), as_version=4)
    nb.cells.insert(1, new_markdown_cell("More text"))
    nb.cells.insert(2, new_code_cell("import os\n%pwd"))
    nb.cells.append(new_code_cell("other = DataLoader(Stream(), sampler=[1, 2])"))
    write_nb(project / "nb.ipynb", nb)
    run = check("--baseline", "baseline.json", "--output-format", "concise", ".", cwd=project)
    assert located(run.stdout) == [("nb.ipynb:cell 10:1:9", "DSL504")]
    assert "(2 more in the baseline)" in run.stderr


# --------------------------------------------------------------------- formats


def test_every_output_format_carries_the_cell(project):
    from tests.test_formats import GITLAB_SCHEMA, assert_valid, sarif_validator

    full = check("nb.ipynb", cwd=project).stdout
    assert full.startswith("nb.ipynb:cell 7:2:10: DSL504 ")
    assert "  |\n1 | ds = Stream()\n2 | loader = DataLoader(ds, batch_size=4, shuffle=True)\n  |          ^^^" in full

    grouped = check("--output-format", "grouped", "nb.ipynb", cwd=project).stdout.splitlines()
    assert grouped[0] == "nb.ipynb:" and grouped[1].startswith("  cell 7:2:10 DSL504 ")
    assert grouped[2].startswith("  cell 7:3:1  DSL304 ")

    data = json.loads(check("--output-format", "json", "nb.ipynb", cwd=project).stdout)
    assert [(d["cell"], d["code"], d["location"], d["end_location"], d["noqa_row"]) for d in data] == [
        (7, "DSL504", {"row": 2, "column": 10}, {"row": 2, "column": 52}, 2),
        (7, "DSL304", {"row": 3, "column": 1}, {"row": 3, "column": 8}, 3),
    ]
    lines = check("--output-format", "json-lines", "nb.ipynb", cwd=project).stdout.splitlines()
    assert [json.loads(line)["cell"] for line in lines] == [7, 7]

    github = check("--output-format", "github", "nb.ipynb", cwd=project).stdout.splitlines()
    assert github[0].startswith("::error file=nb.ipynb,line=2,col=10,endLine=2,endColumn=52,title=dslint (DSL504)::"
                                "nb.ipynb:cell 7:2:10: DSL504 ")

    import jsonschema

    gitlab = json.loads(check("--output-format", "gitlab", "nb.ipynb", cwd=project).stdout)
    jsonschema.validate(gitlab, GITLAB_SCHEMA)
    assert gitlab[0]["location"] == {"path": "nb.ipynb", "lines": {"begin": 2, "end": 2}}
    assert gitlab[0]["description"].startswith("DSL504: ") and gitlab[0]["description"].endswith(" (cell 7)")

    log = json.loads(check("--output-format", "sarif", "nb.ipynb", cwd=project).stdout)
    assert_valid(sarif_validator(), log)
    location = log["runs"][0]["results"][0]["locations"][0]
    assert location["properties"] == {"cell": 7}
    assert location["physicalLocation"]["region"] == {"startLine": 2, "startColumn": 10, "endLine": 2, "endColumn": 52}


def test_python_files_keep_a_null_cell(tmp_path):
    write_files(tmp_path, {"a.py": "from torch.utils.data import DataLoader\nloader = DataLoader(ds, sampler=s, shuffle=True)\n"})
    data = json.loads(check("--output-format", "json", ".", cwd=tmp_path).stdout)
    assert [d["cell"] for d in data] == [None]
    log = json.loads(check("--output-format", "sarif", ".", cwd=tmp_path).stdout)
    assert "properties" not in log["runs"][0]["results"][0]["locations"][0]


# --------------------------------------------------------------------- the model


def test_fixes_that_span_cells_or_touch_a_magic_are_not_applied():
    from dslint.notebooks import Notebook
    from dslint.report import Fix, TextEdit

    nb = Notebook(nbformat.writes(notebook([new_code_cell("a = 1\n%time b = 2\nc = 3"), new_markdown_cell("m"),
                                            new_code_cell("d = 4")])))
    assert nb.code == "a = 1\npass\nc = 3\nd = 4\n"
    assert [(c.number, c.first_row, c.rows) for c in nb.cells] == [(1, 1, 3), (3, 4, 1)]

    def fix(start, end, content="x"):
        return Fix("safe", "m", (TextEdit(content, start, end),))

    assert nb.fixed([fix((3, 1), (4, 1))])[1] == 1  # the last line of cell 1, its newline included
    assert nb.fixed([fix((3, 1), (4, 2))])[1] == 0  # into cell 3
    assert nb.fixed([fix((1, 1), (3, 1))])[1] == 0  # over the magic
    fixed, count = nb.fixed([fix((1, 5), (1, 6), "10"), fix((4, 5), (4, 6), "40")])
    assert count == 2 and [c.source for c in fixed.cells] == ["a = 10\n%time b = 2\nc = 3", "d = 40"]
    nbformat.validate(nbformat.reads(fixed.raw, as_version=4))


def test_a_coding_cookie_in_a_cell_does_not_change_how_the_code_is_read(tmp_path):
    source = "# -*- coding: latin-1 -*-\nname = 'caf\u00e9'\nfrom torch.utils.data import DataLoader\n" \
             "loader = DataLoader(ds, sampler=s, shuffle=True)"
    write_nb(tmp_path / "nb.ipynb", notebook([new_code_cell(source)]))
    run = check("--output-format", "concise", "nb.ipynb", cwd=tmp_path)
    assert located(run.stdout) == [("nb.ipynb:cell 1:4:10", "DSL501")]
    assert run_cli("check", "--no-cache", "--add-noqa", "nb.ipynb", cwd=tmp_path).returncode == 0
    cell = nbformat.read(str(tmp_path / "nb.ipynb"), as_version=4).cells[0]
    assert cell.source == source + "  # noqa: DSL501"


def test_notebook_json_nested_too_deeply_is_an_io_error(tmp_path):
    (tmp_path / "deep.ipynb").write_text("[" * 100000 + "]" * 100000)
    run = check("--output-format", "concise", "deep.ipynb", cwd=tmp_path)
    assert located(run.stdout) == [("deep.ipynb:1:1", "DSL002")] and "Traceback" not in run.stderr


def test_a_rerun_with_notebooks_is_replayed_unless_a_notebook_has_a_finding(tmp_path):
    """Notebooks count in the record of a whole run by their stats like any file: a rerun with
    nothing changed prints the recorded findings without analysing anything. A recorded finding
    in a notebook carries its cells' sources, so that run is analysed again, with the same output."""
    import os
    import time

    def age():  # files written just now are never recorded (their next write may keep the stat)
        for path in tmp_path.iterdir():
            os.utime(path, (time.time() - 3600, time.time() - 3600))

    write_nb(tmp_path / "explore.ipynb", notebook([new_code_cell("import torch\nx = torch.ones(3)")]))
    (tmp_path / "loader.py").write_text(
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, persistent_workers=True)\n")
    age()
    first = run_cli("check", "-v", "--output-format", "concise", ".", cwd=tmp_path)
    again = run_cli("check", "-v", "--output-format", "concise", ".", cwd=tmp_path)
    assert "loader.py:2:10: DSL503" in first.stdout and again.stdout == first.stdout
    assert "replayed run" in again.stderr and "replayed run" not in first.stderr

    write_nb(tmp_path / "nb.ipynb", training_notebook())
    age()
    first = run_cli("check", "-v", "--output-format", "concise", ".", cwd=tmp_path)
    again = run_cli("check", "-v", "--output-format", "concise", ".", cwd=tmp_path)
    assert SHUFFLE_MSG_START in first.stdout and again.stdout == first.stdout
    assert "replayed run" not in again.stderr


def test_a_lambda_given_to_workers_in_a_notebook_is_no_dsl506(tmp_path):
    """Under spawn a worker cannot import anything a notebook defines (its ``__main__`` has no file),
    so moving the lambda to the notebook's top level fixes nothing: DSL506 stays silent there; the same
    code in a ``.py`` file is reported."""
    code = ("import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(torch.arange(8), batch_size=2, num_workers=2, collate_fn=lambda b: b)")
    write_nb(tmp_path / "nb.ipynb", notebook([new_code_cell(code)]))
    (tmp_path / "script.py").write_text(code + "\n")
    run = check("--output-format", "concise", "--select", "DSL506", ".", cwd=tmp_path)
    assert [where for where, _ in located(run.stdout) if where] == ["script.py:3:67"], run.stdout
