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

MORE_CASES = [
    ("DSL103", "valid", PACKED),
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
