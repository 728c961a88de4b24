"""`dslint check` end to end through the real CLI: packaging, discovery, selection,
configuration, suppressions, output formats, exit codes, and the rule docs commands."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import PER_SAMPLE_HANDLE, REPO, run_cli, write_files

BAD_LOADER = """
from torch.utils.data import DataLoader, RandomSampler

loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)
"""

BAD_DATASET = PER_SAMPLE_HANDLE

CLEAN = """
from torch.utils.data import DataLoader

loader = DataLoader(ds, batch_size=4, num_workers=2)
"""


def git_init(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True)


def concise(run) -> list:
    return [line for line in run.stdout.splitlines() if re.match(r"^\S.*:\d+:\d+: DSL\d{3} ", line)]


# ----------------------------------------------------------------- packaging


def test_python_m_and_console_script_and_version():
    run = run_cli("--version")
    assert run.returncode == 0 and "dslint" in run.stdout
    script = Path(sys.executable).parent / "dslint"
    assert script.exists(), "the `dslint` console script is installed"
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and run.stdout.strip() == proc.stdout.strip()


def test_core_dependencies_do_not_include_torch():
    import tomllib

    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = data["project"]
    assert project["name"] != "dslint"
    deps = " ".join(project["dependencies"]).lower()
    for heavy in ("torch", "pillow", "psutil", "numpy"):
        assert heavy not in deps
    assert "torch" in " ".join(project["optional-dependencies"]["runtime"])


# ----------------------------------------------------------------- exit codes


def test_exit_codes_clean_findings_and_exit_zero(tmp_path):
    write_files(tmp_path, {"clean.py": CLEAN})
    run = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    assert run.returncode == 0 and "All checks passed!" in run.stderr
    write_files(tmp_path, {"bad.py": BAD_LOADER})
    run = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    assert run.returncode == 1 and "Found 1 problem in 1 file." in run.stderr
    run = run_cli("check", "--no-cache", "--exit-zero", ".", cwd=tmp_path)
    assert run.returncode == 0 and "DSL501" in run.stdout


def test_usage_errors_exit_2_in_one_line(tmp_path):
    run = run_cli("check", "--select", "XYZ999", ".", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "unknown rule selector `XYZ999`" in run.stderr
    assert "Traceback" not in run.stderr
    run = run_cli("check", "--output-format", "yaml", ".", cwd=tmp_path)
    assert run.returncode == 2


def test_syntax_error_is_a_finding_and_the_run_goes_on(tmp_path):
    write_files(tmp_path, {"broken.py": "from torch.utils.data import Dataset\nclass D(Dataset:\n    pass\n", "bad.py": BAD_LOADER})
    run = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert run.returncode == 1
    lines = concise(run)
    assert any(line.startswith("broken.py:2:") and "DSL000" in line for line in lines), lines
    assert any("bad.py:3:10: DSL501" in line for line in lines)


def test_missing_path_is_reported_and_others_still_checked(tmp_path):
    write_files(tmp_path, {"bad.py": BAD_LOADER})
    run = run_cli("check", "--no-cache", "--output-format", "concise", "nope.py", "bad.py", cwd=tmp_path)
    assert run.returncode == 1
    assert "nope.py:1:1: DSL002" in run.stdout and "bad.py:3:10: DSL501" in run.stdout


def test_no_files_exits_zero(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    run = run_cli("check", ".", cwd=tmp_path)
    assert run.returncode == 0 and "No Python files found" in run.stderr


# ----------------------------------------------------------------- discovery


def test_gitignore_and_default_excludes(tmp_path):
    git_init(tmp_path)
    write_files(
        tmp_path,
        {
            "src/bad.py": BAD_LOADER,
            "generated/bad.py": BAD_LOADER,
            ".venv/lib/bad.py": BAD_LOADER,
            "build/bad.py": BAD_LOADER,
            "src/keep/bad.py": BAD_LOADER,
            ".gitignore": "generated/\n",
            "src/.gitignore": "keep/\n!keep/\n",
        },
    )
    run = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    files = sorted({line.split(":")[0] for line in concise(run)})
    assert files == ["src/bad.py", "src/keep/bad.py"], files
    run = run_cli("check", "--no-cache", "--no-respect-gitignore", "--output-format", "concise", ".", cwd=tmp_path)
    files = sorted({line.split(":")[0] for line in concise(run)})
    assert "generated/bad.py" in files and ".venv/lib/bad.py" not in files


def test_exclude_extend_exclude_and_force_exclude(tmp_path):
    write_files(
        tmp_path,
        {
            "pyproject.toml": '[tool.dslint]\nextend-exclude = ["legacy/", "*_gen.py"]\n',
            "legacy/bad.py": BAD_LOADER,
            "pkg/model_gen.py": BAD_LOADER,
            "pkg/bad.py": BAD_LOADER,
        },
    )
    run = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert sorted({line.split(":")[0] for line in concise(run)}) == ["pkg/bad.py"]
    # an explicitly named file is checked anyway ...
    run = run_cli("check", "--no-cache", "--output-format", "concise", "legacy/bad.py", cwd=tmp_path)
    assert run.returncode == 1 and "legacy/bad.py" in run.stdout
    # ... unless --force-exclude (what pre-commit passes)
    run = run_cli("check", "--no-cache", "--force-exclude", "legacy/bad.py", "pkg/model_gen.py", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout == ""
    # --exclude replaces the defaults
    write_files(tmp_path, {"build/bad.py": BAD_LOADER})
    run = run_cli("check", "--no-cache", "--exclude", "nothing", "--output-format", "concise", ".", cwd=tmp_path)
    assert "build/bad.py" in run.stdout


def test_stdin_with_filename(tmp_path):
    run = run_cli("check", "--output-format", "concise", "--stdin-filename", "pkg/loader.py", "-", cwd=tmp_path, input=BAD_LOADER.encode())
    assert run.returncode == 1
    assert run.stdout.startswith("pkg/loader.py:4:10: DSL501")  # stdin keeps its leading blank line
    run = run_cli("check", "--output-format", "concise", "-", cwd=tmp_path, input=CLEAN.encode())
    assert run.returncode == 0
    write_files(tmp_path, {"pyproject.toml": '[tool.dslint]\nextend-exclude = ["gen/"]\n'})
    run = run_cli(
        "check", "--force-exclude", "--stdin-filename", "gen/x.py", "-", cwd=tmp_path, input=BAD_LOADER.encode()
    )
    assert run.returncode == 0 and run.stdout == ""


# ----------------------------------------------------------------- selection and config


def test_select_ignore_extend_select_by_code_prefix_name_and_all(tmp_path):
    write_files(tmp_path, {"a.py": BAD_LOADER, "b.py": BAD_DATASET})

    def codes(*args):
        run = run_cli("check", "--no-cache", "--output-format", "concise", *args, ".", cwd=tmp_path)
        return sorted({line.split()[1] for line in concise(run)})

    assert codes() == ["DSL102", "DSL501"]
    assert codes("--select", "DSL5") == ["DSL501"]
    assert codes("--select", "DSL1") == ["DSL102"]
    assert codes("--select", "unclosed-file-open") == ["DSL102"]
    assert codes("--ignore", "DSL501") == ["DSL102"]
    assert codes("--select", "DSL5", "--extend-select", "DSL102") == ["DSL102", "DSL501"]
    assert codes("--select", "ALL", "--ignore", "DSL1,DSL5") == []
    # the most specific selector wins: DSL5 ignored, DSL501 selected again
    assert codes("--ignore", "DSL5", "--extend-select", "DSL501") == ["DSL102", "DSL501"]


def test_pyproject_config_and_cli_precedence(tmp_path):
    write_files(
        tmp_path,
        {
            "pyproject.toml": textwrap.dedent(
                """
                [tool.dslint]
                select = ["DSL1"]
                output-format = "concise"
                [tool.dslint.per-file-ignores]
                "tests/**" = ["DSL102"]
                """
            ),
            "a.py": BAD_LOADER,
            "b.py": BAD_DATASET,
            "tests/test_b.py": BAD_DATASET,
        },
    )
    run = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    lines = concise(run)
    assert [line.split(":")[0] for line in lines] == ["b.py"] and "DSL102" in lines[0]
    run = run_cli("check", "--no-cache", "--select", "DSL5", ".", cwd=tmp_path)
    assert [line.split()[1] for line in concise(run)] == ["DSL501"]
    # the nearest pyproject is found from a subdirectory too
    run = run_cli("check", "--no-cache", ".", cwd=tmp_path / "tests")
    assert concise(run) == []
    run = run_cli("check", "--no-cache", "--per-file-ignores", "a.py:DSL5", "--select", "ALL", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in concise(run)] == ["b.py"]


@pytest.mark.parametrize(
    "toml,needle",
    [
        ('[tool.dslint]\nselct = ["DSL1"]\n', "unknown key `selct`"),
        ('[tool.dslint]\nselect = "DSL1"\n', "`select` must be a list of strings"),
        ('[tool.dslint]\nselect = ["DSL999"]\n', "unknown rule selector `DSL999`"),
        ('[tool.dslint]\npreview = "yes"\n', "`preview` must be true or false"),
        ('[tool.dslint]\noutput-format = "xml"\n', "`output-format` must be one of"),
        ('[tool.dslint.rules.DSL501]\nfoo = 1\n', "unknown option `foo`"),
        ('[tool.dslint\nselect = [\n', "invalid TOML"),
    ],
)
def test_bad_config_is_one_line_exit_2(tmp_path, toml, needle):
    write_files(tmp_path, {"pyproject.toml": toml, "a.py": CLEAN})
    run = run_cli("check", ".", cwd=tmp_path)
    assert run.returncode == 2
    assert needle in run.stderr and "pyproject.toml" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_isolated_ignores_config(tmp_path):
    write_files(tmp_path, {"pyproject.toml": '[tool.dslint]\nselect = ["DSL1"]\n', "a.py": BAD_LOADER})
    assert run_cli("check", "--no-cache", ".", cwd=tmp_path).returncode == 0
    assert run_cli("check", "--no-cache", "--isolated", ".", cwd=tmp_path).returncode == 1


# ----------------------------------------------------------------- suppressions


def test_noqa_forms(tmp_path):
    write_files(
        tmp_path,
        {
            "a.py": """
            from torch.utils.data import DataLoader, RandomSampler

            a = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)  # noqa
            b = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)  # noqa: DSL501
            c = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)  # noqa: E501
            d = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)  # NOQA:DSL102,DSL501
            # dslint: ignore[DSL501]
            e = DataLoader(
                ds, sampler=RandomSampler(ds), shuffle=True
            )
            f = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)
            s = "# noqa"; g = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)
            """,
        },
    )
    run = run_cli("check", "--no-cache", "--output-format", "concise", "--ignore", "DSL001", ".", cwd=tmp_path)
    rows = sorted(int(line.split(":")[1]) for line in concise(run))
    assert rows == [5, 11, 12], run.stdout


def test_file_level_suppressions(tmp_path):
    write_files(
        tmp_path,
        {
            "a.py": "# dslint: noqa\n" + BAD_LOADER,
            "b.py": "# dslint: file-ignore[DSL501]\n" + BAD_LOADER + BAD_DATASET,
            "c.py": "x = '# dslint: noqa'\n" + BAD_LOADER,
        },
    )
    run = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    got = sorted((line.split(":")[0], line.split()[1]) for line in concise(run))
    assert got == [("b.py", "DSL102"), ("c.py", "DSL501")], got


# ----------------------------------------------------------------- output formats


@pytest.fixture
def project(tmp_path):
    write_files(tmp_path, {"pkg/a.py": BAD_LOADER, "pkg/b.py": BAD_DATASET})
    return tmp_path


def test_full_output_has_frame_caret_and_help(project):
    run = run_cli("check", "--no-cache", ".", cwd=project)
    text = run.stdout
    assert "pkg/a.py:3:10: DSL501 [*] `sampler` and `shuffle=True` are mutually exclusive" in text
    frame = text.split("pkg/a.py:3:10")[1].splitlines()
    assert any(line.startswith("3 | loader = DataLoader(") for line in frame)
    caret_line = next(line for line in frame if "^" in line)
    assert caret_line.index("^") == frame[[i for i, l in enumerate(frame) if l.startswith("3 |")][0]].index("DataLoader")
    assert any(line.strip().startswith("= help: Remove `shuffle=True`") for line in frame)
    assert "Found 2 problems in 2 files." in run.stderr


def test_concise_output(project):
    run = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=project)
    assert run.stdout.splitlines() == [
        "pkg/a.py:3:10: DSL501 [*] `sampler` and `shuffle=True` are mutually exclusive: the DataLoader raises "
        "`ValueError: sampler option is mutually exclusive with shuffle`",
        "pkg/b.py:7:16: DSL102 [*] `tables.open_file()` is never closed on a per-sample path: PyTables keeps the file in "
        "its registry of open files until `close()`, not when the object is dropped, so open handles pile up in every worker",
    ]


def test_json_output_is_ruff_shaped(project):
    run = run_cli("check", "--no-cache", "--output-format", "json", ".", cwd=project)
    data = json.loads(run.stdout)
    assert [d["code"] for d in data] == ["DSL501", "DSL102"]
    first = data[0]
    for key in ("code", "name", "message", "filename", "location", "end_location", "fix", "noqa_row", "url"):
        assert key in first
    assert first["name"] == "sampler-with-shuffle"
    assert first["filename"] == str(project / "pkg" / "a.py")
    assert first["location"] == {"row": 3, "column": 10}
    assert first["end_location"]["row"] == 3 and first["end_location"]["column"] > 10
    assert first["noqa_row"] == 3 and first["url"].endswith("DSL501.md")
    lines = run_cli("check", "--no-cache", "--output-format", "json-lines", ".", cwd=project).stdout.splitlines()
    assert [json.loads(line)["code"] for line in lines] == ["DSL501", "DSL102"]


def test_github_annotations(project):
    run = run_cli("check", "--no-cache", "--output-format", "github", ".", cwd=project)
    lines = run.stdout.splitlines()
    assert lines[0].startswith("::error file=pkg/a.py,line=3,col=10,endLine=3,endColumn=")
    assert ",title=dslint (DSL501)::" in lines[0]
    assert lines[1].startswith("::warning file=pkg/b.py,line=7,col=16,")  # DSL102 is warning-level


SARIF_SUBSET_SCHEMA = {
    # The parts of the SARIF 2.1.0 schema that GitHub code scanning requires.
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id", "shortDescription", "fullDescription", "defaultConfiguration"],
                                            "properties": {
                                                "shortDescription": {"type": "object", "required": ["text"]},
                                                "fullDescription": {"type": "object", "required": ["text"]},
                                                "defaultConfiguration": {
                                                    "type": "object",
                                                    "properties": {"level": {"enum": ["none", "note", "warning", "error"]}},
                                                },
                                            },
                                        },
                                    }
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "message", "locations", "level"],
                            "properties": {
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": {"type": "object", "required": ["text"]},
                                "locations": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation", "region"],
                                                "properties": {
                                                    "artifactLocation": {"type": "object", "required": ["uri"]},
                                                    "region": {
                                                        "type": "object",
                                                        "required": ["startLine", "startColumn"],
                                                        "properties": {
                                                            "startLine": {"type": "integer", "minimum": 1},
                                                            "startColumn": {"type": "integer", "minimum": 1},
                                                        },
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_sarif_output(project):
    import jsonschema

    out = project / "report.sarif"
    run = run_cli("check", "--no-cache", "--output-format", "sarif", "-o", str(out), ".", cwd=project)
    assert run.returncode == 1 and run.stdout == ""
    log = json.loads(out.read_text())
    jsonschema.validate(log, SARIF_SUBSET_SCHEMA)
    driver = log["runs"][0]["tool"]["driver"]
    ids = [r["id"] for r in driver["rules"]]
    assert "DSL101" in ids and "DSL501" in ids
    rule = driver["rules"][ids.index("DSL501")]
    assert rule["name"] == "sampler-with-shuffle" and "## Why is this bad?" in rule["fullDescription"]["text"]
    results = log["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["DSL501", "DSL102"]
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/a.py"
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    assert driver["rules"][results[0]["ruleIndex"]]["id"] == "DSL501"
    assert results[1]["level"] == "warning"


def test_statistics(project):
    run = run_cli("check", "--no-cache", "--statistics", ".", cwd=project)
    rows = [line.split("\t") for line in run.stdout.splitlines()]
    assert sorted(r[1] for r in rows) == ["DSL102", "DSL501"] and all(r[0].strip() == "1" for r in rows)
    data = json.loads(run_cli("check", "--no-cache", "--statistics", "--output-format", "json", ".", cwd=project).stdout)
    assert {d["code"]: d["count"] for d in data} == {"DSL102": 1, "DSL501": 1}


def test_output_file_and_quiet(project):
    out = project / "out.txt"
    run = run_cli("check", "--no-cache", "--output-format", "concise", "-o", str(out), "-q", ".", cwd=project)
    assert run.returncode == 1 and run.stdout == "" and run.stderr == ""
    assert len(out.read_text().splitlines()) == 2


# ----------------------------------------------------------------- rule docs


def test_rule_and_rules_commands():
    run = run_cli("rule", "DSL501")
    assert run.returncode == 0
    assert run.stdout.startswith("# sampler-with-shuffle (DSL501)")
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in run.stdout
    page = json.loads(run_cli("rule", "sampler-with-shuffle", "--output-format", "json").stdout)
    assert page["code"] == "DSL501" and page["url"].startswith("https://") and page["url"].endswith("/rules/DSL501.md")
    assert run_cli("rule", "DSL999").returncode == 2
    listing = run_cli("rules")
    assert listing.returncode == 0 and re.search(r"^DSL501\s+sampler-with-shuffle\s+error", listing.stdout, re.M)
    rules = json.loads(run_cli("rules", "--output-format", "json").stdout)
    assert {"code", "name", "level", "fix_availability", "preview"} <= set(rules[0])
