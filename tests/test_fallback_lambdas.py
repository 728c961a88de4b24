"""DSL506: a lambda a dataset keeps when a parameter defaulting to ``None`` is left out, written as an
``if`` statement (``kept_lambdas.stored_defaults``), and imports of a package name that two source
roots of the project define (``modules.closest_path``)."""

from __future__ import annotations

from tests.conftest import check_tree, write_files

_DATA = """
import torch

class Slices(torch.utils.data.Dataset):
    def __init__(self, root, keep=None, transform=None):
        self.root = root
        if keep is None:
            self.keep = lambda item: True
        else:
            self.keep = keep
        if not transform:
            transform = lambda x: x
        self.transform = transform
        self.items = [r for r in range(8) if self.keep(r)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.transform(self.items[i])
"""

_RUN = """
import torch
from data import Slices

def main(root, workers):
    dataset = Slices(root{args})
    return torch.utils.data.DataLoader(dataset, num_workers=4)
"""


def _found(tmp_path, files, preview=False):
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=["DSL506"], preview=preview)
    assert not outcome.result.internal_errors
    return sorted((d.path, d.row) for d in outcome.diagnostics)


def test_the_arm_for_a_left_out_parameter_stores_or_rebinds_a_lambda(tmp_path):
    # both fallbacks are kept when the construction leaves both parameters out: reported at each lambda
    assert _found(tmp_path / "a", {"data.py": _DATA, "run.py": _RUN.format(args="")}) == [("data.py", 7), ("data.py", 11)]
    # given, the other arm keeps what the caller passed
    given = _RUN.format(args=", keep=str.isdigit, transform=abs")
    assert _found(tmp_path / "b", {"data.py": _DATA, "run.py": given}) == []
    assert _found(tmp_path / "c", {"data.py": _DATA, "run.py": _RUN.format(args=", transform=abs")}) == [("data.py", 7)]


def test_the_arm_for_a_given_parameter_may_store_anything_and_an_elif_chain_counts(tmp_path):
    # only the arm that runs with the parameter left out decides what is kept then
    other = _DATA.replace("            self.keep = keep\n", "            self.keep = None\n")
    assert _found(tmp_path / "a", {"data.py": other, "run.py": _RUN.format(args=", transform=abs")}) == [("data.py", 7)]
    chained = _DATA.replace("        else:\n            self.keep = keep\n",
                            "        elif callable(keep):\n            self.keep = keep\n")
    assert _found(tmp_path / "b", {"data.py": chained, "run.py": _RUN.format(args=", transform=abs")}) == [("data.py", 7)]
    # ``if keep is not None: ... elif ...``: an ``elif`` may run with it left out too: no fallback known
    negated = _DATA.replace("        if keep is None:\n            self.keep = lambda item: True\n        else:\n            self.keep = keep\n",
                            "        if keep is not None:\n            self.keep = keep\n        elif root:\n            self.keep = lambda item: True\n")
    assert negated != _DATA
    assert _found(tmp_path / "c", {"data.py": negated, "run.py": _RUN.format(args=", transform=abs")}) == []


def test_defaults_every_construction_gives_are_left_to_the_users_with_preview(tmp_path):
    # the project's only construction gives both: with --preview each default is reported, as its users may leave it out
    given = _RUN.format(args=", keep=str.isdigit, transform=abs")
    assert _found(tmp_path / "a", {"data.py": _DATA, "run.py": given}, preview=True) == [("data.py", 7), ("data.py", 11)]
    # a construction of the project that may leave it out (a ``**`` dict): its loaders are the project's
    unknown = _RUN.format(args=", **options").replace("def main(root, workers):", "def main(root, workers, **options):")
    assert _found(tmp_path / "b", {"data.py": _DATA, "run.py": unknown}, preview=True) == []



_FACTORY = """
import os
import torch

def under(root):
    def name(url):
        return os.path.join(root, url)
    return name

def plain(root):
    return root

class Shards(torch.utils.data.Dataset):
    def __init__(self, urls, cache_dir=None, localname=None):
        self.urls = urls
        if cache_dir is not None:
            self.localname = under(cache_dir)
        elif localname is not None:
            self.localname = localname
        else:
            self.localname = {fallback}

    def __len__(self):
        return len(self.urls)

    def __getitem__(self, i):
        return self.localname(self.urls[i])
"""


def test_a_fallback_may_be_the_closure_a_module_level_factory_returns_in_any_arm_of_a_chain(tmp_path):
    # with ``localname`` left out, the first or the last arm runs: both keep a closure of ``under``; the
    # finding points at the last arm's, which runs when every parameter is left out
    files = {"data.py": _FACTORY.format(fallback="under('/tmp/cache')"), "run.py": _RUN.replace("Slices", "Shards").format(args="")}
    assert _found(tmp_path / "a", files) == [("data.py", 20)]
    given = _RUN.replace("Slices", "Shards").format(args=", localname=os.path.basename").replace("import torch", "import os\nimport torch")
    assert _found(tmp_path / "b", {**files, "run.py": given}) == []
    # a factory returning what pickle copies: nothing kept
    files["data.py"] = _FACTORY.format(fallback="plain('/tmp/cache')")
    assert _found(tmp_path / "c", files) == []
    # the chain must end in ``else``: otherwise with both left out no arm runs
    files["data.py"] = _FACTORY.format(fallback="under('/tmp')").replace("        else:\n            self.localname = under('/tmp')\n", "")
    assert "else:" not in files["data.py"]
    assert _found(tmp_path / "d", files) == []
    # one arm (before the test) keeping what pickle copies: not kept on every path with ``localname`` left out
    files["data.py"] = _FACTORY.format(fallback="under('/tmp')").replace("self.localname = under(cache_dir)", "self.localname = os.path.basename")
    assert _found(tmp_path / "e", files) == []


_VENDORED = """
import torch

class Slices(torch.utils.data.Dataset):
    def __init__(self, root):
        self.root = root

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return i
"""


def test_an_import_reaches_the_package_whose_source_root_holds_the_importing_file(tmp_path):
    # ``pkg`` at the top and a second ``pkg`` under ``legacy/`` (a directory without ``__init__.py``):
    # ``examples/run.py`` imports the top-level one, whose class keeps a lambda
    data = _DATA.replace("class Slices", "class Slices")
    run = _RUN.format(args=", transform=abs").replace("from data import Slices", "from pkg.data import Slices")
    files = {"pkg/__init__.py": "", "pkg/data.py": data, "legacy/pkg/__init__.py": "", "legacy/pkg/data.py": _VENDORED,
             "examples/run.py": run}
    assert _found(tmp_path / "a", files) == [("pkg/data.py", 7)]
    # from inside ``legacy/``, the same import reaches the vendored copy, which keeps none
    files = {**files, "legacy/run.py": run}
    del files["examples/run.py"]
    assert _found(tmp_path / "b", files) == []
