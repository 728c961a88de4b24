"""Configuration through the real CLI: ``--config FILE`` and ``--config KEY = VALUE``,
``dslint.toml``, ``fixable``/``unfixable``/``extend-fixable``, ``docs-url``,
``--show-settings`` and ``--show-files``; every answer is a real exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PER_SAMPLE_HANDLE, run_cli, write_files

BAD_LOADER = """
from torch.utils.data import DataLoader, RandomSampler

loader = DataLoader(ds, sampler=RandomSampler(ds), shuffle=True)
"""

BAD_DATASET = PER_SAMPLE_HANDLE


@pytest.fixture
def project(tmp_path) -> Path:
    write_files(tmp_path, {"pkg/a.py": BAD_LOADER, "pkg/b.py": BAD_DATASET})
    return tmp_path


def codes(run) -> list:
    return [d["code"] for d in json.loads(run.stdout)]


def check_json(project, *args):
    return run_cli("check", "--no-cache", "--output-format", "json", *args, ".", cwd=project)


# ------------------------------------------------------------------ --config FILE


def test_config_file_without_a_dslint_table_is_an_error(project):
    (project / "other.toml").write_text('[tool.black]\nline-length = 100\n')
    run = check_json(project, "--config", "other.toml")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == [
        "dslint: error: other.toml: no [tool.dslint] table, so this file configures nothing "
        "(a pyproject.toml-style file needs [tool.dslint]; a dslint.toml holds the keys at its top level)"
    ]
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert check_json(project, "--config", "pyproject.toml").returncode == 2


def test_config_file_with_a_dslint_table_is_used(project):
    (project / "settings.toml").write_text('[tool.dslint]\nselect = ["DSL5"]\n')
    run = check_json(project, "--config", "settings.toml")
    assert run.returncode == 1 and codes(run) == ["DSL501"]


def test_dslint_toml_holds_keys_at_top_level_and_is_found_upward(project):
    (project / "dslint.toml").write_text('select = ["DSL1"]\n')
    run = run_cli("check", "--no-cache", "--output-format", "json", "pkg", cwd=project)
    assert codes(run) == ["DSL102"]
    settings = run_cli("check", "--show-settings", "pkg", cwd=project)
    assert f'Settings path: "{project / "dslint.toml"}"' in settings.stdout
    # given explicitly too; and [tool.dslint] inside a dslint.toml is an unknown key
    assert codes(check_json(project, "--config", "dslint.toml")) == ["DSL102"]
    (project / "dslint.toml").write_text('[tool.dslint]\nselect = ["DSL1"]\n')
    bad = check_json(project, "--config", "dslint.toml")
    assert bad.returncode == 2 and "unknown key `tool`" in bad.stderr


def test_two_config_files_or_config_with_isolated_are_errors(project):
    (project / "a.toml").write_text("[tool.dslint]\n")
    (project / "b.toml").write_text("[tool.dslint]\n")
    two = check_json(project, "--config", "a.toml", "--config", "b.toml")
    assert two.returncode == 2 and "only one configuration file" in two.stderr
    isolated = check_json(project, "--config", "a.toml", "--isolated")
    assert isolated.returncode == 2 and "cannot be used with --isolated" in isolated.stderr


def test_missing_config_file_is_an_error(project):
    run = check_json(project, "--config", "nope.toml")
    assert run.returncode == 2 and run.stderr.strip() == "dslint: error: --config nope.toml: config file not found"


# ------------------------------------------------------------ --config KEY = VALUE


def test_config_overrides_set_keys_like_the_file_would(project):
    run = check_json(project, "--config", "select = ['DSL5']")
    assert run.returncode == 1 and codes(run) == ["DSL501"]
    # repeatable; dotted keys and inline tables work as in TOML
    run = check_json(project, "--config", "ignore = ['DSL501']", "--config", "per-file-ignores = {'pkg/b.py' = ['DSL1']}")
    assert run.returncode == 0 and codes(run) == []


def test_config_overrides_win_over_the_file_and_flags_win_over_them(project):
    (project / "pyproject.toml").write_text('[tool.dslint]\nselect = ["DSL1"]\n')
    assert codes(check_json(project)) == ["DSL102"]
    assert codes(check_json(project, "--config", "select = ['DSL5']")) == ["DSL501"]
    assert codes(check_json(project, "--config", "select = ['DSL5']", "--select", "DSL1")) == ["DSL102"]


@pytest.mark.parametrize(
    "override, needle",
    [
        ("foo = 1", "--config 'foo = 1': unknown key `foo` in [tool.dslint]"),
        ("select = 'DSL5'", "`select` must be a list of strings, got a string"),
        ("select = ['DSL9']", "unknown rule selector `DSL9`"),
        ("select = [", "not a TOML `key = value` pair"),
    ],
)
def test_bad_config_override_is_one_line_exit_2(project, override, needle):
    run = check_json(project, "--config", override)
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dslint: error: ") and needle in lines[0], run.stderr


# ------------------------------------------------------------------ fixability


def fixes(run) -> dict:
    return {d["code"]: d["fix"] is not None for d in json.loads(run.stdout)}


def test_unfixable_strips_the_fix_and_fix_leaves_the_code_alone(project):
    assert fixes(check_json(project)) == {"DSL501": True, "DSL102": True}
    assert fixes(check_json(project, "--unfixable", "DSL102")) == {"DSL501": True, "DSL102": False}
    concise = run_cli("check", "--no-cache", "--output-format", "concise", "--unfixable", "DSL1", ".", cwd=project)
    assert "DSL102 [*]" not in concise.stdout and "DSL501 [*]" in concise.stdout
    assert "[*] 1 fixable with the `--fix` option." in concise.stderr

    before = (project / "pkg" / "b.py").read_text()
    run = run_cli("check", "--no-cache", "--fix", "--unfixable", "DSL102", ".", cwd=project)
    assert run.returncode == 1  # DSL102 remains
    assert (project / "pkg" / "b.py").read_text() == before
    assert "shuffle=True" not in (project / "pkg" / "a.py").read_text()


def test_fixable_replaces_and_extend_fixable_adds(project):
    (project / "pyproject.toml").write_text('[tool.dslint]\nfixable = ["DSL5"]\n')
    assert fixes(check_json(project)) == {"DSL501": True, "DSL102": False}
    assert fixes(check_json(project, "--extend-fixable", "DSL102")) == {"DSL501": True, "DSL102": True}
    assert fixes(check_json(project, "--fixable", "DSL1")) == {"DSL501": False, "DSL102": True}
    # the most specific selector wins, as for select/ignore
    assert fixes(check_json(project, "--fixable", "ALL", "--unfixable", "DSL1", "--extend-fixable", "DSL102")) == {
        "DSL501": True,
        "DSL102": True,
    }
    diff = run_cli("check", "--no-cache", "--diff", "--config", "unfixable = ['DSL501']", ".", cwd=project)
    assert "shuffle=True" not in diff.stdout and "with tables.open_file" not in diff.stdout and diff.returncode == 0


def test_unknown_fixable_code_is_an_error(project):
    run = check_json(project, "--unfixable", "DSL999")
    assert run.returncode == 2 and "--unfixable: unknown rule selector `DSL999`" in run.stderr


# ------------------------------------------------------------------ docs-url


def test_docs_url_is_configurable(project):
    run = check_json(project, "--config", "docs-url = 'https://docs.example.org/dslint/{name}/{code}.html'")
    urls = {d["code"]: d["url"] for d in json.loads(run.stdout)}
    assert urls["DSL501"] == "https://docs.example.org/dslint/sampler-with-shuffle/DSL501.html"


@pytest.mark.parametrize(
    "template, needle",
    [
        ("'rules/{code}.md'", "is not absolute"),
        ("'https://example.org/rules.md'", "has no {code}"),
        ("'https://example.org/{code}/{rule}.md'", "placeholder other than"),
        ("3", "got an integer"),
    ],
)
def test_bad_docs_url_is_an_error(project, template, needle):
    run = check_json(project, "--config", f"docs-url = {template}")
    assert run.returncode == 2 and needle in run.stderr and "dslint: error:" in run.stderr


# ------------------------------------------------------------ --show-settings/--show-files


def test_show_settings_prints_the_resolved_settings_and_exits_0(project):
    (project / "pyproject.toml").write_text('[tool.dslint]\nignore = ["DSL102"]\nunfixable = ["DSL5"]\n')
    run = run_cli("check", "--show-settings", "--extend-select", "DSL601", "--preview", ".", cwd=project)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert f'Settings path: "{project / "pyproject.toml"}"' in out
    assert 'ignore = ["DSL102"]' in out and 'unfixable = ["DSL5"]' in out and "preview = true" in out
    assert 'extend-select = ["DSL601"]' in out
    enabled = out.split("rules.enabled = [")[1].split("]")[0]
    assert "sampler-with-shuffle (DSL501)" in enabled and "(DSL102)" not in enabled and "(DSL601)" in enabled
    should_fix = out.split("rules.should_fix = [")[1].split("]")[0]
    assert "(DSL501)" not in should_fix and "(DSL101)" in should_fix
    assert not (project / ".dslint_cache").exists()  # nothing was checked


def test_show_files_lists_what_would_be_checked_and_exits_0(project):
    write_files(project, {"build/gen.py": BAD_LOADER, "notes.txt": "x\n", ".venv/lib/x.py": BAD_LOADER})
    run = run_cli("check", "--show-files", "--extend-exclude", "pkg/b.py", ".", cwd=project)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [str(project / "pkg" / "a.py")]
    assert not (project / ".dslint_cache").exists()
    missing = run_cli("check", "--show-files", "nope.py", "pkg", cwd=project)
    assert missing.returncode == 0 and "dslint: warning: nope.py: No such file or directory" in missing.stderr
    assert missing.stdout.splitlines() == [str(project / "pkg" / "a.py"), str(project / "pkg" / "b.py")]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--show-files", "--show-settings"], "--show-settings cannot be used with --show-files"),
        (["--show-files", "--statistics"], "--show-files cannot be used with --statistics"),
        (["--show-settings", "--fix"], "--show-settings cannot be used with --fix"),
    ],
)
def test_show_options_refuse_options_they_would_ignore(project, args, message):
    run = run_cli("check", *args, ".", cwd=project)
    assert run.returncode == 2 and run.stderr.strip() == f"dslint: error: {message}"
