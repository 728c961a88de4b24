"""The results cache: where it lives, that warm runs reuse it, and that cross-file facts invalidate it."""

from __future__ import annotations

import json
import re

from tests.conftest import run_cli, write_files

BASE = """
from torch.utils.data import Dataset


class Base(Dataset):
    pass
"""

NOT_A_DATASET = """
from torch.utils.data import Sampler


class Base(Sampler):
    pass
"""

# DSL102 by default: a library handle opened per sample and never closed
CHILD = """
import tables
from base import Base
from torch.utils.data import get_worker_info


class Child(Base):
    def __getitem__(self, i):
        return tables.open_file(self.files[i]).read()
"""


def stats(run) -> dict:
    m = re.search(r"(\d+) files, (\d+) analysed \((\d+) parsed, (\d+) from cache\)", run.stderr)
    assert m, run.stderr
    return dict(zip(("files", "analysed", "parsed", "cached"), map(int, m.groups())))


def codes(run) -> list:
    return sorted((f["filename"].rsplit("/", 1)[-1], f["code"]) for f in json.loads(run.stdout))


def test_cache_directory_layout_and_controls(tmp_path):
    write_files(tmp_path, {"child.py": CHILD, "base.py": BASE})
    run_cli("check", ".", cwd=tmp_path)
    cache = tmp_path / ".dslint_cache"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache / ".gitignore").read_text().strip().endswith("*")
    assert list(cache.glob("*/*.json")), "results are stored under the dslint version"

    other = tmp_path / "elsewhere"
    run_cli("check", "--cache-dir", str(other), ".", cwd=tmp_path)
    assert list(other.glob("*/*.json"))
    env_dir = tmp_path / "from-env"
    run_cli("check", ".", cwd=tmp_path, env={"DSLINT_CACHE_DIR": str(env_dir)})
    assert list(env_dir.glob("*/*.json"))

    fresh = tmp_path / "fresh"
    write_files(fresh, {"child.py": CHILD, "base.py": BASE})
    run_cli("check", "--no-cache", ".", cwd=fresh)
    assert not (fresh / ".dslint_cache").exists()


def test_warm_run_reuses_results(tmp_path):
    write_files(tmp_path, {"child.py": CHILD, "base.py": BASE, "other.py": "x = 1\n"})
    cold = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    warm = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(cold) == codes(warm) == [("child.py", "DSL102")]
    assert stats(cold)["parsed"] == 2 and stats(cold)["cached"] == 0
    assert stats(warm)["parsed"] == 0 and stats(warm)["cached"] == 2
    # another rule selection is another cache entry, never a stale answer
    other = run_cli("check", "-v", "--select", "DSL5", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(other) == [] and stats(other)["parsed"] == 2


def test_editing_a_base_class_rechecks_its_subclasses_in_other_files(tmp_path):
    write_files(tmp_path, {"child.py": CHILD, "base.py": BASE})
    first = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(first) == [("child.py", "DSL102")]

    # Base stops being a Dataset: child.py is unchanged, but its finding must go
    write_files(tmp_path, {"base.py": NOT_A_DATASET})
    second = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(second) == []
    assert stats(second)["parsed"] == 2  # base.py changed; child.py's cached answer was stale

    # and back
    write_files(tmp_path, {"base.py": BASE})
    third = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(third) == [("child.py", "DSL102")]


def test_a_corrupt_cache_is_ignored(tmp_path):
    write_files(tmp_path, {"child.py": CHILD, "base.py": BASE})
    run_cli("check", ".", cwd=tmp_path)
    for entry in (tmp_path / ".dslint_cache").glob("*/*.json"):
        entry.write_text("{not json")
    run = run_cli("check", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(run) == [("child.py", "DSL102")]


# ---------------------------------------------------------------------- what a warm run skips

SPECIAL_PLAIN = """
class Special:
    pass
"""

SPECIAL_DATASET = """
from base import Base


class Special(Base):
    pass
"""

# Never says "Dataset": it is analysed only once `Special` derives from a dataset.
LEAF = """
import tables
from special import Special


class Leaf(Special):
    def __getitem__(self, i):
        return tables.open_file(self.files[i]).read()
"""


def test_cached_prefilter_decisions_follow_a_new_dataset_base_in_another_file(tmp_path):
    """The prefilter's reading of each file is cached with its text; whether a file
    names a dataset-derived class is re-decided when the set of those names changes."""
    write_files(tmp_path, {"base.py": BASE, "special.py": SPECIAL_PLAIN, "leaf.py": LEAF})
    first = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(first) == [] and stats(first)["analysed"] == 1  # base.py only
    entries = next((tmp_path / ".dslint_cache").glob("*/*.json"))
    cached = json.loads(entries.read_text())["files"]
    assert all("pf" in entry for entry in cached.values()), "every file's prefilter facts are cached"

    write_files(tmp_path, {"special.py": SPECIAL_DATASET})  # leaf.py is unchanged
    second = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    fresh = run_cli("check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(second) == codes(fresh) == [("leaf.py", "DSL102")]
    third = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(third) == codes(fresh) and stats(third)["parsed"] == 0


WARM_PROBE = """
import sys
import dslint.cli
try:
    dslint.cli.main(sys.argv[1:])
except SystemExit:
    pass
families = sorted(m for m in sys.modules if m.startswith("dslint.rules.") and m != "dslint.rules.base")
print("IMPORTED", "libcst" in sys.modules, "dslint.check_file" in sys.modules, families, file=sys.stderr)
"""


def test_a_warm_run_imports_neither_libcst_nor_the_rules(tmp_path):
    """A warm run answers from the cache and the rules' manifest: no parser, no rule module."""
    import os
    import subprocess
    import sys

    write_files(tmp_path, {"child.py": CHILD, "base.py": BASE, "other.py": "x = 1\n"})
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "DSLINT_CACHE_DIR")}
    env["NO_COLOR"] = "1"

    def probe():
        proc = subprocess.run(
            [sys.executable, "-c", WARM_PROBE, "check", "-v", "--output-format", "json", "."],
            cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
        )
        return proc

    cold = probe()  # writes the cache (and the rules' manifest, as Python writes .pyc files)
    warm = probe()
    assert json.loads(cold.stdout) and codes(warm) == codes(cold) == [("child.py", "DSL102")]
    assert stats(warm)["parsed"] == 0
    assert "IMPORTED False False []" in warm.stderr, warm.stderr


def test_cross_file_answers_do_not_depend_on_the_order_files_were_summarised(tmp_path):
    """Shards finish in any order; the project index (and the dataset class named in
    messages) must not, or cached answers fail to replay in the next run."""
    from dslint import check_file
    from dslint.semantics.modules import module_name_for
    from dslint.semantics.project import ProjectIndex

    files = {
        "helpers.py": "import json\n\n\ndef load(p):\n    return json.load(open(p))\n",
        "a.py": "from torch.utils.data import Dataset\nfrom helpers import load\n\n\n"
        "class A(Dataset):\n    def __getitem__(self, i):\n        return load(i)\n",
        "b.py": "from torch.utils.data import Dataset\nfrom helpers import load\n\n\n"
        "class B(Dataset):\n    def __getitem__(self, i):\n        return load(i)\n",
    }
    write_files(tmp_path, files)
    summaries = {}
    for name in files:
        path = str(tmp_path / name)
        summary, diagnostic = check_file.parse_file(path, (tmp_path / name).read_text(), *module_name_for(path))
        assert diagnostic is None
        summaries[path] = summary
    check_file.release()
    forward = ProjectIndex(dict(summaries))
    backward = ProjectIndex(dict(reversed(list(summaries.items()))))
    key = (str(tmp_path / "helpers.py"), "load")
    assert forward.per_sample[key] == backward.per_sample[key] == ("whole", "a.A")


# ---------------------------------------------------------------------- a rerun with nothing changed

RUN_PROBE = """
import sys
import dslint.cli
try:
    dslint.cli.main(sys.argv[1:])
except SystemExit:
    pass
print("IMPORTED", "libcst" in sys.modules, "dslint.semantics.project" in sys.modules, file=sys.stderr)
"""


def _age(root, seconds: int = 3600) -> None:
    """Every file's modification time set in the past (a fresh file's time is never trusted)."""
    import os
    import time

    for path in root.rglob("*.py"):
        os.utime(path, ns=(time.time_ns() - seconds * 10**9, time.time_ns() - seconds * 10**9))


def _probe(root, *args):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "DSLINT_CACHE_DIR")}
    env["NO_COLOR"] = "1"
    return subprocess.run([sys.executable, "-c", RUN_PROBE, *args], cwd=root, capture_output=True, text=True,
                          env=env, timeout=300)


def test_an_unchanged_rerun_replays_the_recorded_run_without_reading_the_files(tmp_path):
    write_files(tmp_path, {"child.py": CHILD, "base.py": BASE, "other.py": "x = 1\n"})
    _age(tmp_path)
    cold = _probe(tmp_path, "check", "-v", "--output-format", "json", ".")
    assert list((tmp_path / ".dslint_cache").glob("*/*.run.json")), "the run is recorded"
    warm = _probe(tmp_path, "check", "-v", "--output-format", "json", ".")
    assert codes(warm) == codes(cold) == [("child.py", "DSL102")]
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
    assert stats(warm)["parsed"] == 0 and "replayed run" in warm.stderr
    assert "IMPORTED False False" in warm.stderr, warm.stderr


def test_a_recorded_run_misses_on_any_change_the_analysis_could_see(tmp_path):
    import os

    write_files(tmp_path, {"child.py": CHILD, "base.py": BASE})
    _age(tmp_path)
    run_cli("check", ".", cwd=tmp_path)
    # an edit of the same size, with an old modification time: the stat differs, not the size
    child = tmp_path / "child.py"
    child.write_text(child.read_text().replace("open_file(", "opem_file("))
    _age(tmp_path, 7200)
    edited = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(edited) == [] and "replayed run" not in edited.stderr
    # a new file
    write_files(tmp_path, {"new.py": CHILD.replace("Child", "New")})
    _age(tmp_path, 7200)
    added = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(added) == [("new.py", "DSL102")]
    # a removed file
    os.remove(tmp_path / "new.py")
    removed = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert codes(removed) == [] and "replayed run" not in removed.stderr
    # other settings
    again = run_cli("check", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert "replayed run" in again.stderr
    other = run_cli("check", "-v", "--select", "DSL5", "--output-format", "json", ".", cwd=tmp_path)
    assert "replayed run" not in other.stderr
    ignored = run_cli("check", "-v", "--per-file-ignores", "new.py:DSL1", "--output-format", "json", ".", cwd=tmp_path)
    assert "replayed run" not in ignored.stderr


def test_files_modified_just_now_are_not_trusted_by_their_stat(tmp_path):
    write_files(tmp_path, {"child.py": CHILD, "base.py": BASE})
    run_cli("check", ".", cwd=tmp_path)
    assert not list((tmp_path / ".dslint_cache").glob("*/*.run.json"))
    entries = json.loads(next((tmp_path / ".dslint_cache").glob("*/*[0-9a-f].json")).read_text())["files"]
    assert all("st" not in entry for entry in entries.values())
    _age(tmp_path)
    run_cli("check", ".", cwd=tmp_path)
    entries = json.loads(next((tmp_path / ".dslint_cache").glob("*/*[0-9a-f].json")).read_text())["files"]
    assert all("st" in entry for entry in entries.values())
