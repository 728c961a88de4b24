"""The output formats through the real CLI, checked against their published schemas.

- SARIF: the OASIS SARIF 2.1.0 JSON schema, vendored unchanged in
  ``tests/schemas/sarif-schema-2.1.0.json`` (see ``tests/schemas/README.md``).
- GitLab Code Quality: GitLab publishes no JSON schema for it, so ``GITLAB_SCHEMA``
  below is written from the fields GitLab's Code Quality documentation lists as
  required (description, check_name, fingerprint, severity, location.path,
  location.lines.begin), with their documented types and severity values.
- Machine formats print the report alone on stdout; everything else goes to stderr.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import PER_SAMPLE_HANDLE, REPO, run_cli, write_files

SCHEMAS = Path(__file__).resolve().parent / "schemas"

BAD_LOADER = """
from torch.utils.data import DataLoader, RandomSampler

loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)
"""

BAD_DATASET = PER_SAMPLE_HANDLE

# two identical DSL102 findings (library handles opened per sample, never closed)
TWICE = """
import tables
from torch.utils.data import Dataset


class Records(Dataset):
    def __getitem__(self, i):
        return tables.open_file(self.files[i]).read()


class Labels(Dataset):
    def __getitem__(self, i):
        return tables.open_file(self.files[i]).read()
"""

GITLAB_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "minLength": 1},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    # "a relative path in the repository; do not prefix with ./"
                    "path": {"type": "string", "pattern": r"^(?!\./)(?!/)\S"},
                    "lines": {
                        "type": "object",
                        "required": ["begin"],
                        "properties": {"begin": {"type": "integer", "minimum": 1}, "end": {"type": "integer", "minimum": 1}},
                    },
                },
            },
        },
    },
}


@pytest.fixture
def project(tmp_path) -> Path:
    write_files(tmp_path, {"pkg/a.py": BAD_LOADER, "pkg/b.py": BAD_DATASET, "pkg/broken.py": "from torch.utils.data import Dataset\ndef f(:\n"})
    return tmp_path


def sarif_validator():
    import jsonschema

    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def assert_valid(validator, document) -> None:
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


# ------------------------------------------------------- stdout is the report only

# Every way the run has something to say besides the findings: a warning (a preview
# rule selected without --preview), a missing path (DSL002), a syntax error (DSL000),
# the summary, the fixable hint.
NOISY = ("--extend-select", "DSL601", ".", "missing.py")


def parse_machine(fmt: str, text: str):
    if fmt in ("json", "gitlab", "sarif"):
        return json.loads(text)
    if fmt == "json-lines":
        return [json.loads(line) for line in text.splitlines()]
    assert fmt == "github"
    lines = text.splitlines()
    assert all(re.match(r"^::(error|warning) file=[^,]+,line=\d+,col=\d+,endLine=\d+,endColumn=\d+,title=[^:]+::", line) for line in lines), text
    return lines


@pytest.mark.parametrize("fmt", ["json", "json-lines", "github", "gitlab", "sarif"])
def test_machine_formats_print_only_the_report_on_stdout(project, fmt):
    run = run_cli("check", "--no-cache", "--output-format", fmt, *NOISY, cwd=project)
    assert run.returncode == 1, run.stderr
    report = parse_machine(fmt, run.stdout)
    if fmt == "sarif":
        assert_valid(sarif_validator(), report)
        report = report["runs"][0]["results"]
    if fmt == "gitlab":
        import jsonschema

        jsonschema.validate(report, GITLAB_SCHEMA)
    assert len(report) == 4  # DSL000, DSL002, DSL501, DSL102
    for needle in ("dslint: warning: DSL601 is a preview rule", "Found 4 problems in 4 files.", "fixable with the `--fix` option"):
        assert needle in run.stderr
        assert needle not in run.stdout


@pytest.mark.parametrize("fmt", ["json", "gitlab", "sarif"])
def test_machine_formats_with_fix_and_without_files_stay_parseable(project, fmt):
    fixed = run_cli("check", "--no-cache", "--fix", "--output-format", fmt, ".", cwd=project)
    assert fixed.returncode == 1  # DSL000 remains
    parse_machine(fmt, fixed.stdout)
    assert "(2 fixed, 1 remaining)" in fixed.stderr
    empty = project / "empty"
    empty.mkdir()
    nothing = run_cli("check", "--no-cache", "--output-format", fmt, ".", cwd=empty)
    assert nothing.returncode == 0 and "No Python files found" in nothing.stderr
    parsed = parse_machine(fmt, nothing.stdout)
    assert (parsed["runs"][0]["results"] if fmt == "sarif" else parsed) == []


# ----------------------------------------------------------------------- JSON


def test_json_url_is_an_absolute_documentation_url(project):
    from dslint.docs import DEFAULT_DOCS_URL, REPOSITORY_URL

    data = json.loads(run_cli("check", "--no-cache", "--output-format", "json", ".", cwd=project).stdout)
    by_code = {d["code"]: d for d in data}
    assert by_code["DSL501"]["url"] == f"{REPOSITORY_URL}/blob/main/rules/DSL501.md"
    for item in data:
        parts = urlsplit(item["url"])
        assert parts.scheme == "https" and parts.netloc, item["url"]
        # the default points at the page of that rule in this repository
        assert (REPO / "rules" / f"{item['code']}.md").is_file()
    assert DEFAULT_DOCS_URL.endswith("/rules/{code}.md")
    lines = run_cli("check", "--no-cache", "--output-format", "json-lines", ".", cwd=project).stdout.splitlines()
    assert [json.loads(line)["url"] for line in lines] == [d["url"] for d in data]


# ----------------------------------------------------------------------- SARIF


def test_sarif_validates_against_the_sarif_2_1_0_schema_and_rules_carry_help(project):
    run = run_cli("check", "--no-cache", "--output-format", "sarif", "--config",
                  "docs-url = 'https://docs.example.org/{code}'", ".", cwd=project)
    log = json.loads(run.stdout)
    assert_valid(sarif_validator(), log)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    for rule in rules:
        assert rule["helpUri"] == f"https://docs.example.org/{rule['id']}"
        assert rule["fullDescription"]["text"].strip()
        assert rule["shortDescription"]["text"].strip()
    dsl501 = next(r for r in rules if r["id"] == "DSL501")
    assert "## Why is this bad?" in dsl501["fullDescription"]["text"]


def test_the_vendored_schema_is_the_published_one():
    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text())
    assert schema["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    import hashlib

    digest = hashlib.sha256((SCHEMAS / "sarif-schema-2.1.0.json").read_bytes()).hexdigest()
    assert digest in (SCHEMAS / "README.md").read_text()


# ----------------------------------------------------------------------- GitLab


def test_gitlab_code_quality_report(tmp_path, monkeypatch):
    import jsonschema

    write_files(tmp_path, {"pkg/a.py": BAD_LOADER, "pkg/twice.py": TWICE})
    run = run_cli("check", "--no-cache", "--output-format", "gitlab", ".", cwd=tmp_path)
    issues = json.loads(run.stdout)
    jsonschema.validate(issues, GITLAB_SCHEMA)
    assert [(i["check_name"], i["location"]["path"], i["location"]["lines"]["begin"], i["severity"]) for i in issues] == [
        ("DSL501", "pkg/a.py", 3, "major"),
        ("DSL102", "pkg/twice.py", 7, "minor"),
        ("DSL102", "pkg/twice.py", 12, "minor"),
    ]
    assert issues[0]["description"].startswith("DSL501: `sampler` and `shuffle=True` are mutually exclusive")
    fingerprints = [i["fingerprint"] for i in issues]
    assert len(set(fingerprints)) == 3  # identical lines in one file are told apart

    # a finding keeps its fingerprint when lines above it move
    (tmp_path / "pkg" / "a.py").write_text("# a new first line\n\n" + (tmp_path / "pkg" / "a.py").read_text())
    moved = json.loads(run_cli("check", "--no-cache", "--output-format", "gitlab", ".", cwd=tmp_path).stdout)
    assert moved[0]["location"]["lines"]["begin"] == 5 and moved[0]["fingerprint"] == fingerprints[0]

    # paths are relative to $CI_PROJECT_DIR when GitLab sets it
    inside = json.loads(run_cli("check", "--no-cache", "--output-format", "gitlab", "pkg", cwd=tmp_path,
                                env={"CI_PROJECT_DIR": str(tmp_path / "pkg")}).stdout)
    assert inside[0]["location"]["path"] == "a.py"


# ----------------------------------------------------------------------- grouped


def test_grouped_output_is_ruffs_shape(tmp_path):
    second = TWICE.replace("Records", "R2").replace("Labels", "L2")
    write_files(tmp_path, {"pkg/a.py": BAD_LOADER + "x = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)\n",
                           "pkg/twice.py": TWICE + "\n" * 90 + second})
    run = run_cli("check", "--no-cache", "--output-format", "grouped", ".", cwd=tmp_path)
    assert run.returncode == 1
    blocks = run.stdout.split("\n\n")
    message = ("`sampler` and `shuffle=True` are mutually exclusive: the DataLoader raises "
               "`ValueError: sampler option is mutually exclusive with shuffle`")
    # rows right-aligned, columns left-aligned, to the widest in the file; [*] when --fix fixes it
    assert blocks[0].splitlines() == ["pkg/a.py:", f"  3:10 DSL501 [*] {message}", f"  4:5  DSL501 [*] {message}"]
    twice = blocks[1].splitlines()
    assert twice[0] == "pkg/twice.py:"
    assert [line[:10] for line in twice[1:]] == ["    7:16 D", "   12:16 D", "  110:16 D", "  115:16 D"]
    assert run.stdout.endswith("\n\n") and "Found 6 problems in 2 files." in run.stderr


# ----------------------------------------------------------------------- --statistics


def test_statistics_is_ruffs_shape(tmp_path):
    write_files(tmp_path, {"pkg/a.py": BAD_LOADER, "pkg/twice.py": TWICE, "pkg/loop.py": """
        from torch.utils.data import DataLoader

        for batch in DataLoader(ds, batch_size=8, persistent_workers=True):
            pass
        """})
    run = run_cli("check", "--no-cache", "--statistics", ".", cwd=tmp_path)
    assert run.returncode == 1
    rows = run.stdout.splitlines()
    # count desc then code; COUNT<TAB>CODE<TAB>[*] or [ ] then the rule name
    assert rows[0] == "2\tDSL102\t[*] unclosed-file-open"
    assert "1\tDSL501\t[*] sampler-with-shuffle" in rows
    assert "1\tDSL503\t[ ] worker-option-without-workers" in rows  # its fix is unsafe: not applied by --fix
    codes = [row.split("\t")[1] for row in rows[1:]]
    assert codes == sorted(codes)
    assert "Found" in run.stderr and "Found" not in run.stdout

    data = json.loads(run_cli("check", "--no-cache", "--statistics", "--output-format", "json", ".", cwd=tmp_path).stdout)
    assert data[0] == {"code": "DSL102", "name": "unclosed-file-open", "count": 2, "fixable": True, "fixable_count": 2}
    assert {"code": "DSL503", "name": "worker-option-without-workers", "count": 1, "fixable": False, "fixable_count": 0} in data

    unsafe = run_cli("check", "--no-cache", "--statistics", "--unsafe-fixes", ".", cwd=tmp_path).stdout
    assert "1\tDSL503\t[*] worker-option-without-workers" in unsafe.splitlines()
    nothing_fixable = run_cli("check", "--no-cache", "--statistics", "--unfixable", "ALL", ".", cwd=tmp_path).stdout
    assert nothing_fixable.splitlines()[0] == "2\tDSL102\tunclosed-file-open"  # no marker column at all


@pytest.mark.parametrize("fmt", ["json-lines", "github", "gitlab", "sarif", "grouped"])
def test_statistics_refuses_formats_it_cannot_print(tmp_path, fmt):
    write_files(tmp_path, {"a.py": BAD_LOADER})
    run = run_cli("check", "--no-cache", "--statistics", "--output-format", fmt, ".", cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip() == f"dslint: error: --statistics prints with --output-format full, concise or json, not {fmt}"
