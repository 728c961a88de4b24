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

CHILD = """
import json
from base import Base
from torch.utils.data import get_worker_info


class Child(Base):
    def __getitem__(self, i):
        return json.load(open(self.files[i]))
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
