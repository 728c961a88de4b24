"""Cases of the handles and memory families' rules that do not fit in the rule modules (300 lines
each); they run exactly like the embedded ones (tests/test_rule_cases.py)."""

from __future__ import annotations

import pytest

from tests.test_rule_cases import run_case

# A slot filled once when found empty, keyed by the shard a sample falls in: at most one handle per
# shard (DSL103), and the shard list is read once per shard, not per sample (DSL601)
PACKED = """
    import bisect
    import os
    import pickle
    from torch.utils.data import DataLoader, Dataset

    class Packed(Dataset):
        def __init__(self, index_file, lengths):
            with open(index_file, "rb") as f:
                self.shards = [os.path.join("d", x) for x in pickle.load(f)]
            self.handles = [None] * len(self.shards)
            self.ends = list(lengths)

        def __len__(self):
            return self.ends[-1]

        def __getitem__(self, index):
            pos = bisect.bisect_right(self.ends, index)
            if self.handles[pos] is None:
                self.handles[pos] = open(self.shards[pos], "rb")
            return pickle.load(self.handles[pos])

    loader = DataLoader(Packed("i.pkl", [3]), num_workers=2)
    """

# Module-level archive caches of a reader module, filled once per archive: behind a membership
# guard, and after a search of the list that returns what it finds (also with parallel lists)
ARCHIVE_CACHES = """
    import zipfile
    from torch.utils.data import DataLoader, Dataset

    _by_path = {}
    _entries = []
    _keys, _archives = [], []

    def read_guarded(path, member):
        if path not in _by_path:
            _by_path[path] = zipfile.ZipFile(path)
        return _by_path[path].read(member)

    def read_searched(path, member):
        for i in range(len(_entries)):
            if _entries[i]["path"] == path:
                data = _entries[i]["zip"].read(member)
                return data
        _entries.append({"path": path, "zip": zipfile.ZipFile(path)})
        return _entries[-1]["zip"].read(member)

    def read_parallel(path, member):
        for i, key in enumerate(_keys):
            if key == path:
                return _archives[i].read(member)
        _keys.append(path)
        _archives.append(zipfile.ZipFile(path))
        return _archives[-1].read(member)

    class Members(Dataset):
        def __init__(self, items):
            self.items = items  # (archive, member) pairs: many members per archive

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            archive, member = self.items[i]
            return read_guarded(archive, member) + read_searched(archive, member) + read_parallel(archive, member)

    loader = DataLoader(Members([]), num_workers=2)
    """

MORE_CASES = [
    ("DSL103", "valid", PACKED),
    ("DSL103", "valid", ARCHIVE_CACHES),
    # a membership guard whose block stores into a slice of the cache answers nothing (and must not crash)
    ("DSL103", "invalid", """
        import zipfile
        from torch.utils.data import DataLoader, Dataset

        _zips = {}

        def read(path, member):
            if path not in _zips:
                _zips[1:2] = [zipfile.ZipFile(path)]  # expect: DSL103
            return member

        class Members(Dataset):
            def __len__(self):
                return 1

            def __getitem__(self, i):
                return read("a.zip", i)

        loader = DataLoader(Members(), num_workers=2)
        """),
    # a search that does not return what it finds guards nothing: every call appends a new handle
    ("DSL103", "invalid", """
        import zipfile
        from torch.utils.data import DataLoader, Dataset

        _opened = []

        def read(path, member):
            for archive in _opened:
                if archive.filename == path:
                    print("seen before")
            _opened.append(zipfile.ZipFile(path))  # expect: DSL103
            return _opened[-1].read(member)

        class Members(Dataset):
            def __init__(self, items):
                self.items = items

            def __len__(self):
                return len(self.items)

            def __getitem__(self, i):
                return read(*self.items[i])

        loader = DataLoader(Members([]), num_workers=2)
        """),
    ("DSL601", "valid", PACKED),
    # DSL103: the same guard keyed by the sample index keeps one handle per sample
    ("DSL103", "invalid", """
        from torch.utils.data import DataLoader, Dataset

        class PerSample(Dataset):
            def __init__(self, paths):
                self.paths = paths
                self.handles = [None] * len(paths)

            def __len__(self):
                return len(self.paths)

            def __getitem__(self, index):
                if not self.handles[index]:
                    self.handles[index] = open(self.paths[index], "rb")  # expect: DSL103
                return self.handles[index].read(64)

        loader = DataLoader(PerSample(["a"]), num_workers=2)
        """),
]


@pytest.mark.parametrize(
    "code,kind,case", [pytest.param(*case, id=f"{case[0]}-{case[1]}-more-{i}") for i, case in enumerate(MORE_CASES)]
)
def test_more_cases(tmp_path, code, kind, case):
    run_case(tmp_path, code, kind, case)
