"""Names resolve the way Python binds them: star imports and namespace packages
(directories without ``__init__.py``) included, across files."""

from __future__ import annotations

from tests.conftest import check_tree, write_files

# a new handle kept on `self` on every sample: DSL102 by default, on the line after the `def`
PER_SAMPLE_OPEN = """
    def __getitem__(self, i):
        self.f = open(f"{i}.txt")
        return self.f.read()
"""


def _codes(tmp_path, files, select=("DSL102", "DSL501")):
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=list(select))
    assert not outcome.result.internal_errors
    return sorted((d.path.replace("\\", "/"), d.row, d.code) for d in outcome.diagnostics)


def test_star_import_of_torch_utils_data(tmp_path):
    files = {"a.py": "from torch.utils.data import *\n\n\nclass DS(Dataset):" + PER_SAMPLE_OPEN + """
loader = DataLoader(DS(), sampler=RandomSampler(DS()), shuffle=True)
"""}
    assert _codes(tmp_path, files) == [("a.py", 6, "DSL102"), ("a.py", 9, "DSL501")]


def test_star_import_of_a_project_module(tmp_path):
    files = {
        "base.py": "from torch.utils.data import Dataset\n\n\nclass Base(Dataset):\n    pass\n",
        "images.py": "from base import *\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
    }
    assert _codes(tmp_path, files) == [("images.py", 6, "DSL102")]


def test_two_star_imports_resolve_through_the_module_that_defines_the_name(tmp_path):
    files = {
        "base.py": "from torch.utils.data import Dataset\n\n\nclass Base(Dataset):\n    pass\n",
        "other.py": "X = 1\n",
        "images.py": "from base import *\nfrom other import *\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
    }
    assert _codes(tmp_path, files) == [("images.py", 7, "DSL102")]


def test_a_later_star_import_that_binds_the_name_wins(tmp_path):
    files = {
        "base.py": "from torch.utils.data import Dataset\n\n\nclass Base(Dataset):\n    pass\n",
        "other.py": "class Base:\n    pass\n",
        "images.py": "from base import *\nfrom other import *\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
    }
    assert _codes(tmp_path, files) == []


def test_a_name_unknown_to_every_star_imported_module_stays_unknown(tmp_path):
    files = {
        "base.py": "X = 1\n",
        "other.py": "Y = 1\n",
        "images.py": "from base import *\nfrom other import *\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
    }
    assert _codes(tmp_path, files) == []


def test_star_import_of_a_library_does_not_shadow_the_project_one(tmp_path):
    files = {
        "base.py": "from torch.utils.data import Dataset\n\n\nclass Base(Dataset):\n    pass\n",
        "images.py": "from numpy import *\nfrom base import *\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
    }
    assert _codes(tmp_path, files) == [("images.py", 7, "DSL102")]


def test_subclass_across_a_namespace_package(tmp_path):
    files = {
        "proj/data/base.py": "from torch.utils.data import Dataset\n\n\nclass Base(Dataset):\n    pass\n",
        "proj/data/images.py": "from proj.data.base import Base\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
        "proj/other/base.py": "class Base:\n    pass\n",
    }
    assert _codes(tmp_path, files) == [("proj/data/images.py", 6, "DSL102")]


def test_subclass_across_a_namespace_package_above_a_regular_package(tmp_path):
    """``src/proj/pkg/`` with no ``__init__.py`` in ``proj``: the file is module ``pkg.images``
    but the project imports it as ``proj.pkg.images``."""
    files = {
        "src/proj/pkg/__init__.py": "",
        "src/proj/pkg/base.py": "from torch.utils.data import Dataset\n\n\nclass Base(Dataset):\n    pass\n",
        "src/proj/pkg/images.py": "from proj.pkg.base import Base\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
        "src/proj/other/base.py": "class Base:\n    pass\n",
    }
    assert _codes(tmp_path, files) == [("src/proj/pkg/images.py", 6, "DSL102")]


def test_a_script_inside_a_package_imports_from_its_own_directory(tmp_path):
    """``python scripts/train.py`` puts ``scripts/`` on ``sys.path``: there ``lib.base`` is
    ``scripts/lib/base.py`` although ``scripts`` is a package (its module name is
    ``scripts.lib.base``; ``ProjectIndex.rooted_paths``). A file outside ``scripts/`` importing
    ``lib.base`` does not reach it."""
    files = {
        "scripts/__init__.py": "",
        "scripts/lib/__init__.py": "",
        "scripts/lib/base.py": "from torch.utils.data import Dataset\n\n\nclass Base(Dataset):\n    pass\n",
        "scripts/data/images.py": "from lib.base import Base\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
        "tools/images.py": "from lib.base import Base\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
    }
    assert _codes(tmp_path, files) == [("scripts/data/images.py", 6, "DSL102")]


def test_a_package_checked_from_its_own_root_imports_from_there(tmp_path):
    """A checked directory that is itself a package (``__init__.py`` at the top: module names
    start with its name) whose scripts run from it import ``lib.base`` as ``lib/base.py``; a star
    import of a module rooted at a script's directory binds that module's names too."""
    files = {
        "__init__.py": "",
        "lib/__init__.py": "",
        "lib/base.py": "from torch.utils.data import Dataset\n\n\nclass Base(Dataset):\n    pass\n",
        "data/images.py": "from lib.base import Base\n\n\nclass Images(Base):" + PER_SAMPLE_OPEN,
        "data/frames.py": "from lib.base import *\n\n\nclass Frames(Base):" + PER_SAMPLE_OPEN,
    }
    assert _codes(tmp_path, files) == [("data/frames.py", 6, "DSL102"), ("data/images.py", 6, "DSL102")]


def test_a_class_named_like_its_imported_base(tmp_path):
    """``class Dataset(Dataset)``: the base is evaluated before the class binds the name."""
    files = {"a.py": "from torch.utils.data import Dataset\n\n\nclass Dataset(Dataset):" + PER_SAMPLE_OPEN}
    assert _codes(tmp_path, files) == [("a.py", 6, "DSL102")]


def test_a_torch_import_guarded_by_a_project_fallback(tmp_path):
    """``if HAS_TORCH: from torch.utils.data import DataLoader`` ``else: from pkg.dummy import Dummy as
    DataLoader``: the name is torch's class (data-loading code only runs with torch), so a subclass
    is a DataLoader; a second library's class in the other branch leaves the name unknown."""
    guarded = """from pkg.env import HAS_TORCH
if HAS_TORCH:
    from torch.utils.data import DataLoader, RandomSampler
else:
    from {other} import Dummy as DataLoader


class Loader(DataLoader):
    def __init__(self, ds):
        super().__init__(ds, sampler=RandomSampler(ds), shuffle=True)
"""
    files = {"pkg/__init__.py": "", "pkg/env.py": "HAS_TORCH = True\n", "pkg/dummy.py": "class Dummy:\n    pass\n",
             "pkg/loaders.py": guarded.format(other="pkg.dummy"), "pkg/other.py": guarded.format(other="otherlib")}
    assert _codes(tmp_path, files) == [("pkg/loaders.py", 10, "DSL501")]
