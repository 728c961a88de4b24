"""Project facts over every definition a name may have (``dslint.semantics.alternatives``)."""

from __future__ import annotations

from tests.conftest import write_files


def _index(tmp_path, files):
    from dslint import check_file
    from dslint.semantics.names import module_name_for
    from dslint.semantics.project import ProjectIndex

    summaries = {}
    for path in write_files(tmp_path, files):
        modname, is_package = module_name_for(str(path))
        summary, diagnostic = check_file.parse_file(str(path), path.read_text(), modname, is_package)
        assert diagnostic is None
        check_file._PARSED.pop(str(path), None)
        summaries[str(path)] = summary
    return ProjectIndex(summaries)


def _names(index, keys):
    return sorted(f"{index.summaries[k[0]]['module']}.{k[1]}" for k in keys)


READERS = {
    "rd/a.py": "def read(p):\n    return p\nclass Mixin:\n    def load(self):\n        return read(1)\n",
    "rd/b.py": "def read(p):\n    return p\nclass Mixin:\n    def load(self):\n        return read(2)\n",
}


def test_star_imports_in_branches_bring_every_definition(tmp_path):
    from dslint.semantics.alternatives import locate_all

    files = {**READERS, "rd/__init__.py": "try:\n    from .a import *\nexcept ImportError:\n    from .b import *\n"}
    index = _index(tmp_path, files)
    where = str(tmp_path / "x.py")
    assert _names(index, locate_all(index, "rd.read", where, "functions")) == ["rd.a.read", "rd.b.read"]


def test_a_later_star_import_outside_a_branch_replaces_the_earlier(tmp_path):
    from dslint.semantics.alternatives import locate_all

    files = {**READERS, "rd/__init__.py": "from .a import *\nfrom .b import *\n"}
    index = _index(tmp_path, files)
    where = str(tmp_path / "x.py")
    assert _names(index, locate_all(index, "rd.read", where, "functions")) == ["rd.b.read"]


def test_each_definition_of_a_base_is_followed_per_sample(tmp_path):
    files = {
        **READERS,
        "rd/__init__.py": "if fast():\n    from .a import *\nelse:\n    from .b import *\n",
        "ds.py": "from torch.utils.data import Dataset\nfrom rd import Mixin\n"
        "class D(Dataset, Mixin):\n    def __getitem__(self, i):\n        return self.load()\n",
    }
    index = _index(tmp_path, files)
    per_sample = _names(index, index.per_sample)
    assert {"rd.a.Mixin.load", "rd.b.Mixin.load", "rd.a.read", "rd.b.read"} <= set(per_sample)


DUCKS = """
from torch.utils.data import DataLoader

class Base:
    def __len__(self):
        return 3
    def __getitem__(self, i):
        return i

class Lines(Base):
    pass

class Pages(Base):
    def __init__(self, paths):
        self.items = [crop(p) for p in paths]

class Table:
    def __init__(self, rows):
        self.rows = [crop(r) for r in rows]
    def __len__(self):
        return 3
    def __getitem__(self, i):
        return i

class Half:
    def __getitem__(self, i):
        return i

def crop(p):
    return p

def train(lines):
    if lines:
        ds = Lines()
    else:
        ds = Half()
    return DataLoader(ds, num_workers=2), Table([])
"""


def test_a_class_a_dataloader_receives_shows_its_protocol_base_to_be_a_dataset(tmp_path):
    index = _index(tmp_path, {"ducks.py": DUCKS})
    path = str(tmp_path / "ducks.py")
    assert index.duck_roots == {(path, "Base")}  # Half has no __len__: not shown to be a dataset
    kinds = {name: index.class_kind((path, name)) for name in ("Base", "Lines", "Pages", "Table", "Half")}
    assert kinds == {"Base": "map", "Lines": "map", "Pages": "map", "Table": None, "Half": None}
    assert index.built.get((path, "crop")) == "ducks.Pages"  # called by a dataset's __init__, not Table's
    assert (path, "Table.__init__") not in index.built


def test_a_class_that_subset_or_concat_dataset_wraps_is_a_dataset(tmp_path):
    source = """
from torch.utils.data import ConcatDataset, Subset

class Rows:
    def __len__(self):
        return 3
    def __getitem__(self, i):
        return i

class Cols(Rows):
    pass

class Cells(Rows):
    pass

cols = Cols()
both = ConcatDataset([Subset(Rows(), [0, 1]), cols])
"""
    index = _index(tmp_path, {"grid.py": source})
    path = str(tmp_path / "grid.py")
    assert index.duck_roots == {(path, "Rows")}
    assert index.class_kind((path, "Cells")) == "map"  # a sibling: the same protocol base


def test_a_class_passed_to_a_function_that_hands_it_to_a_dataloader_is_a_dataset(tmp_path):
    files = {
        "loaders.py": "from torch.utils.data import DataLoader\n\n"
        "def make_loader(name, ds, workers=2):\n    return DataLoader(ds, num_workers=workers)\n",
        "rows.py": "class Rows:\n    def __len__(self):\n        return 3\n    def __getitem__(self, i):\n        return i\n"
        "class Table(Rows):\n    pass\n",
        "train.py": "from loaders import make_loader\nfrom rows import Rows, Table\n\n"
        "loader = make_loader('rows', ds=Rows())\nshow('table', Table())\n",
    }
    index = _index(tmp_path, files)
    path = str(tmp_path / "rows.py")
    assert index.duck_roots == {(path, "Rows")}
    # (``show`` is bound nowhere: its call is not recorded)
    assert index.summaries[str(tmp_path / "train.py")]["class_args"] == [["loaders.make_loader", "ds", "rows.Rows"]]


def test_a_class_passed_elsewhere_at_the_position_is_not_a_dataset(tmp_path):
    files = {
        "loaders.py": "from torch.utils.data import DataLoader\n\n"
        "def make_loader(ds, sampler):\n    return DataLoader(ds, sampler=sampler)\n",
        "rows.py": "class Rows:\n    def __len__(self):\n        return 3\n    def __getitem__(self, i):\n        return i\n",
        "train.py": "from loaders import make_loader\nfrom rows import Rows\n\nloader = make_loader(data, Rows())\n",
    }
    assert _index(tmp_path, files).duck_roots == set()


def test_a_class_held_on_self_and_handed_to_a_dataloader_is_a_dataset(tmp_path):
    source = """
from torch.utils.data import DataLoader

class Rows:
    def __len__(self):
        return 3
    def __getitem__(self, i):
        return i

class Other(Rows):
    pass

class Module:
    def setup(self):
        self.rows = Rows()
        self.other = Other()
    def train_dataloader(self):
        return DataLoader(self.rows, num_workers=2)

class Unrelated:
    def loader(self):
        return DataLoader(self.other)
"""
    index = _index(tmp_path, {"dm.py": source})
    path = str(tmp_path / "dm.py")
    assert index.summaries[path]["loader_classes"] == ["dm.Rows"]  # not Other: held by another class
    assert index.duck_roots == {(path, "Rows")}
