"""The prefilter loses nothing: ``dslint check --no-cache`` gives the same findings
with and without ``--no-prefilter``.

Checked on the fixtures, on real code available offline (the installed torch
package's ``utils/``, ``nn/`` and ``optim/``, copied to a temp folder), and on
synthetic cross-file projects where the dataset base class lives in one file and
the subclass (with the finding) in a file that never says "Dataset".

Every rule is enabled (``--select ALL --preview``), so a rule added later is
covered too. Each case runs the real CLI twice; the whole module takes well
under a minute on 2 cores.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest

from tests.conftest import FIXTURES, run_cli

ARGS = ("check", "--no-cache", "--isolated", "--select", "ALL", "--preview", "--output-format", "json", "--exit-zero", "-q")


def findings(path: Path, cwd: Path, *extra: str, select: str = "ALL") -> List[dict]:
    args = [a if a != "ALL" else select for a in ARGS]
    run = run_cli(*args, *extra, str(path), cwd=cwd)
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout or "[]")
    return sorted(
        (
            {
                "file": str(Path(d["filename"]).resolve().relative_to(cwd.resolve())),
                "code": d["code"],
                "start": (d["location"]["row"], d["location"]["column"]),
                "end": (d["end_location"]["row"], d["end_location"]["column"]),
                "message": d["message"],
                "fix": json.dumps(d.get("fix"), sort_keys=True),
            }
            for d in rows
        ),
        key=lambda d: (d["file"], d["start"], d["code"], d["message"]),
    )


def assert_equivalent(path: Path, cwd: Path) -> List[dict]:
    with_prefilter = findings(path, cwd)
    without = findings(path, cwd, "--no-prefilter")
    missing = [d for d in without if d not in with_prefilter]
    extra = [d for d in with_prefilter if d not in without]
    assert not missing and not extra, (
        f"the prefilter changed the findings\n  lost with the prefilter: {json.dumps(missing, indent=1)}\n"
        f"  only with the prefilter: {json.dumps(extra, indent=1)}"
    )
    return without


def write(root: Path, files: Dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


# ---------------------------------------------------------------------- fixtures


def test_fixtures_same_findings_with_and_without_prefilter():
    found = assert_equivalent(FIXTURES, FIXTURES.parent)
    assert found, "the fixtures have findings (otherwise the comparison proves nothing)"


def test_a_rule_finds_the_same_whatever_else_is_selected():
    """``bench/realworld/run.py recall`` selects only the codes of a checkout's defects: each rule's
    findings (with the prefilter reading only the files the selected rules need) must equal its
    findings when every rule runs."""
    everything = findings(FIXTURES, FIXTURES.parent)
    codes = sorted({d["code"] for d in everything})
    assert len(codes) > 20, codes
    for code in codes:
        alone = findings(FIXTURES, FIXTURES.parent, select=code)
        assert alone == [d for d in everything if d["code"] == code], code


# ---------------------------------------------------------------------- real code


@pytest.fixture(scope="module")
def torch_corpus(tmp_path_factory) -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    torch_dir = Path(list(spec.submodule_search_locations)[0])
    root = tmp_path_factory.mktemp("torch-corpus")
    for part in ("utils", "nn", "optim"):
        shutil.copytree(torch_dir / part, root / "torch" / part, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    return root


def test_installed_torch_same_findings_with_and_without_prefilter(torch_corpus):
    assert sum(1 for _ in torch_corpus.rglob("*.py")) > 200
    assert_equivalent(Path("torch"), torch_corpus)


# ---------------------------------------------------------------------- cross-file

BASE = """
from torch.utils.data import IterableDataset


class Base(IterableDataset):
    pass
"""

# Never says "Dataset", "DataLoader", "torch.utils.data", ...; the finding is here.
STREAM = """
class Stream({base}):
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.items)
"""

CROSS_FILE = {
    "plain": {
        "pkg/__init__.py": "",
        "pkg/base.py": BASE,
        "pkg/middle.py": "from .base import Base\n\n\nclass Middle(Base):\n    pass\n",
        "pkg/stream.py": "from pkg.middle import Middle\n\n" + STREAM.format(base="Middle"),
        "pkg/aliased.py": "from pkg import base as b\n\n" + STREAM.format(base="b.Base"),
    },
}

RENAMED_AND_LIBRARY_ROOTS = {
    # A base re-exported under another name by a package __init__: the subclass file
    # names only the new name, which the textual fixed point never links to `Base`.
    "reexported-alias": {
        "pkg/__init__.py": "from .base import Base as Exported\n",
        "pkg/base.py": BASE,
        "pkg/stream.py": "from pkg import Exported\n\n" + STREAM.format(base="Exported"),
    },
    # torchvision.datasets.* classes are dataset roots for the semantics layer, but
    # neither "torchvision.datasets" nor "ImageFolder" is a prefilter word.
    "torchvision-root": {
        "faces.py": """
            import pandas as pd
            from torchvision.datasets import ImageFolder


            class Faces(ImageFolder):
                def __getitem__(self, i):
                    return pd.read_csv(self.csv).iloc[i]
            """,
        "more.py": """
            import pandas as pd
            from faces import Faces


            class MoreFaces(Faces):
                def __getitem__(self, i):
                    return pd.read_csv(self.csv).iloc[i]
            """,
    },
    # torch.utils.data.Subset is a root; "Subset" is not a prefilter root word.
    "subset-root": {
        "part.py": """
            import pandas as pd
            from torch.utils import data


            class Part(data.Subset):
                def __getitem__(self, i):
                    return pd.read_csv(self.csv).iloc[i]
            """,
    },
}


@pytest.mark.parametrize("name", sorted(CROSS_FILE))
def test_cross_file_subclass_same_findings(tmp_path, name):
    files = CROSS_FILE[name]
    write(tmp_path, files)
    for path, text in files.items():
        if path.endswith(("stream.py", "aliased.py")):
            assert "Dataset" not in text and "torch" not in text
    found = assert_equivalent(Path("."), tmp_path)
    in_subclass_files = {d["file"] for d in found if d["code"] == "DSL301"}
    assert {"pkg/stream.py", "pkg/aliased.py"} <= in_subclass_files, found


@pytest.mark.parametrize("name", sorted(RENAMED_AND_LIBRARY_ROOTS))
def test_renamed_and_library_roots_same_findings(tmp_path, name):
    write(tmp_path, RENAMED_AND_LIBRARY_ROOTS[name])
    assert findings(Path("."), tmp_path, "--no-prefilter"), "the case must have findings, or it proves nothing"
    assert_equivalent(Path("."), tmp_path)


def test_syntax_errors_are_reported_for_analysed_files_only(tmp_path):
    """Documented in README ("Which files are parsed"): DSL000 is reported for files
    dslint analyses. A file the prefilter rules out cannot affect any rule, is never
    parsed, and its syntax error is left to Python and the project's other linters;
    ``--no-prefilter`` parses (and so reports) every file."""
    write(
        tmp_path,
        {
            "unrelated.py": "def f(:\n    pass\n",
            "data.py": "from torch.utils.data import Dataset\n\nclass D(Dataset):\n    def f(:\n        pass\n",
        },
    )
    default = {(d["file"], d["code"]) for d in findings(Path("."), tmp_path)}
    everything = {(d["file"], d["code"]) for d in findings(Path("."), tmp_path, "--no-prefilter")}
    assert default == {("data.py", "DSL000")}
    assert everything == {("data.py", "DSL000"), ("unrelated.py", "DSL000")}


# The prefilter's line patterns search "\n" + text with a leading "\n" instead of ``^``
# under re.MULTILINE (fast); these are the ``^`` forms they must agree with.
_REFERENCE = {
    "_CLASS": r"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)",
    "_ALIAS": r"^(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*([\w.]+)[ \t]*$",
    "_IMPORT_LINE": r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(?:\([^)]*\)|[^\n]*)",
}
_TRICKY = [
    "class A(B): pass\nclass C(D, E):\n    pass\n",
    "class A(\n    B,\n    class C(D)\n) : pass\nclass E(F)",
    "class A(B) class C(D)\n  class E(F)\n\tclass G (H)\n",
    "x class A(B)\nclass C(D)\n",
    "A = B\nC: type = d.E  \nF=G\n  H = I\nJ = K.L # c\nM = N\r\nO = P",
    "import a as b\nfrom c import (d as e,\n  f as g)\nfrom h import i as j\n  import k as l\nx = 1 import m as n",
    "",
    "\n\n",
    "A = B",
    "class",
]


@pytest.mark.parametrize("name", sorted(_REFERENCE))
def test_line_patterns_match_their_multiline_reference(name):
    import re

    from dslint import prefilter

    reference = re.compile(_REFERENCE[name], re.MULTILINE)
    fast = getattr(prefilter, name)
    texts = list(_TRICKY) + [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.rglob("*.py"))]
    for text in texts:
        for variant in (text, text.replace("\n", "\r\n")):
            expected = [(m.groups(), m.group()) for m in reference.finditer(variant)]
            found = [(m.groups(), m.group()[1:]) for m in fast.finditer("\n" + variant)]
            assert found == expected, variant


def test_derived_name_search_matches_its_word_boundary_reference():
    import re

    from dslint import prefilter

    words = {"Leaf", "LeafSet", "L", "_Hidden", "Ω", "Data2", "x"}
    pattern = prefilter._word_regex(words)
    reference = re.compile(r"\b" + pattern.pattern)
    texts = ["", "Leaf", "MyLeaf", "MyLeaf Leaf", "LeafSets", "aLeafSet.LeafSet", "_Hidden", "a_Hidden",
             "ΩLeaf Ω", "xL L", "Data2x", "(Data2)", "Leaf_", "\nL\n", "éLeaf", "1Leaf", "Le af"]
    texts += [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.rglob("*.py"))]
    for text in texts:
        assert prefilter.mentions_word(pattern, text) == (reference.search(text) is not None), text
