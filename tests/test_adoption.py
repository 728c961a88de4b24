"""Adopting dslint on a legacy repository: baselines, --add-noqa, and DSL001 unused-noqa."""

from __future__ import annotations

import json

from tests.conftest import run_cli, write_files

# DSL102 by default: a library handle opened per sample and never closed
LEGACY = """
import tables
from torch.utils.data import DataLoader, Dataset, RandomSampler


class Records(Dataset):
    def __getitem__(self, i):
        return tables.open_file(self.files[i]).read()


loader = DataLoader(Records(), sampler=RandomSampler(range(3)), shuffle=True, num_workers=2)
"""


def concise(run):
    return [line for line in run.stdout.splitlines() if ": DSL" in line]


def test_baseline_gates_only_new_findings(tmp_path):
    write_files(tmp_path, {"pkg/data.py": LEGACY})
    run = run_cli("check", "--no-cache", "--write-baseline", "dslint-baseline.json", ".", cwd=tmp_path)
    assert run.returncode == 0 and "Wrote 2 findings to the baseline" in run.stderr
    data = json.loads((tmp_path / "dslint-baseline.json").read_text())
    assert {(f["path"], f["code"]) for f in data["findings"]} == {("pkg/data.py", "DSL102"), ("pkg/data.py", "DSL501")}

    run = run_cli("check", "--no-cache", "--baseline", "dslint-baseline.json", ".", cwd=tmp_path)
    assert run.returncode == 0 and "All checks passed! (2 more in the baseline)" in run.stderr

    # edits elsewhere in the file move every line: the baseline still matches
    path = tmp_path / "pkg" / "data.py"
    path.write_text('"""Docs added on top."""\n\nimport os\n' + path.read_text() + "\n\nVALUE = 1\n")
    run = run_cli("check", "--no-cache", "--baseline", "dslint-baseline.json", ".", cwd=tmp_path)
    assert run.returncode == 0, run.stdout

    # a new finding is reported, including a second copy of a baselined one
    path.write_text(path.read_text() + "\nagain = DataLoader(Records(), sampler=RandomSampler(range(3)), shuffle=True)\n")
    run = run_cli("check", "--no-cache", "--baseline", "dslint-baseline.json", "--output-format", "concise", ".", cwd=tmp_path)
    assert run.returncode == 1
    assert [line.split()[1] for line in concise(run)] == ["DSL501"] and "again = " not in run.stdout
    assert "(2 more in the baseline)" in run.stderr


def test_baseline_from_config_and_fixed_findings_drop_out(tmp_path):
    write_files(tmp_path, {"pkg/data.py": LEGACY, "pyproject.toml": '[tool.dslint]\nbaseline = "ci/baseline.json"\n'})
    (tmp_path / "ci").mkdir()
    run_cli("check", "--no-cache", "--write-baseline", "ci/baseline.json", ".", cwd=tmp_path)
    run = run_cli("check", "--no-cache", ".", cwd=tmp_path / "pkg")  # config found from a subdirectory
    assert run.returncode == 0, run.stdout + run.stderr
    # fix one finding, rewrite the baseline: it drops out
    path = tmp_path / "pkg" / "data.py"
    path.write_text(path.read_text().replace(", shuffle=True", ""))
    run_cli("check", "--no-cache", "--write-baseline", "ci/baseline.json", ".", cwd=tmp_path)
    data = json.loads((tmp_path / "ci" / "baseline.json").read_text())
    assert [f["code"] for f in data["findings"]] == ["DSL102"]


def test_missing_baseline_is_an_error(tmp_path):
    write_files(tmp_path, {"a.py": LEGACY})
    run = run_cli("check", "--baseline", "nope.json", ".", cwd=tmp_path)
    assert run.returncode == 2 and "baseline file not found" in run.stderr


def test_add_noqa_merges_and_keeps_other_codes(tmp_path):
    write_files(
        tmp_path,
        {
            "a.py": '''
            import tables
            from torch.utils.data import DataLoader, Dataset


            class Records(Dataset):
                def __getitem__(self, i):
                    return tables.open_file(self.files[i]).read()  # noqa: E501


            a = DataLoader(ds, sampler=s, shuffle=True)
            b = DataLoader(ds, sampler=s, shuffle=True)  # trailing note
            c = DataLoader(ds, sampler=s, shuffle=True)  # noqa
            d = DataLoader(ds, sampler=open("""x
            """), shuffle=True)
            '''
        },
    )
    run = run_cli("check", "--no-cache", "--add-noqa", ".", cwd=tmp_path)
    assert run.returncode == 0
    assert "Added 3 noqa directives." in run.stderr and "1 line(s) could not take a comment" in run.stderr
    text = (tmp_path / "a.py").read_text()
    assert "return tables.open_file(self.files[i]).read()  # noqa: E501, DSL102\n" in text
    assert "a = DataLoader(ds, sampler=s, shuffle=True)  # noqa: DSL501\n" in text
    assert "b = DataLoader(ds, sampler=s, shuffle=True)  # trailing note  # noqa: DSL501\n" in text
    assert "c = DataLoader(ds, sampler=s, shuffle=True)  # noqa\n" in text
    assert 'd = DataLoader(ds, sampler=open("""x\n"""), shuffle=True)\n' in text
    run = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert [line.split()[1] for line in concise(run)] == ["DSL501"]  # only the string-spanning line is left


def test_unused_noqa_is_reported_and_fixed(tmp_path):
    write_files(
        tmp_path,
        {
            "a.py": """
            from torch.utils.data import DataLoader

            a = DataLoader(ds, num_workers=2)  # noqa: DSL501
            b = DataLoader(ds, num_workers=2)  # noqa: E501, DSL501, DSL102
            c = DataLoader(ds, sampler=s, shuffle=True)  # noqa: DSL501, DSL503
            d = DataLoader(ds, num_workers=2)  # noqa: E501
            e = DataLoader(ds, num_workers=2)  # noqa
            """
        },
    )
    run = run_cli("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    lines = concise(run)
    assert [line.split(":")[1] for line in lines] == ["3", "4", "5"], run.stdout
    assert all(" DSL001 [*] unused `noqa` directive" in line for line in lines)
    assert "`DSL102`, `DSL501` suppressed nothing" in lines[1]
    assert "`DSL503` suppressed nothing" in lines[2]
    # not judged when the rule is not selected
    run = run_cli("check", "--no-cache", "--select", "DSL001", "--output-format", "concise", ".", cwd=tmp_path)
    assert concise(run) == []
    run = run_cli("check", "--no-cache", "--fix", ".", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    text = (tmp_path / "a.py").read_text()
    assert "a = DataLoader(ds, num_workers=2)\n" in text
    assert "b = DataLoader(ds, num_workers=2)  # noqa: E501\n" in text
    assert "c = DataLoader(ds, sampler=s, shuffle=True)  # noqa: DSL501\n" in text
    assert "d = DataLoader(ds, num_workers=2)  # noqa: E501\n" in text
    assert "e = DataLoader(ds, num_workers=2)  # noqa\n" in text
