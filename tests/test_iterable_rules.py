"""DSL301-DSL304 beyond the embedded cases: the DSL301 fix, levels, messages, the cache."""

from __future__ import annotations

import shutil
import textwrap

import libcst as cst
import pytest

from dslint.fixes import apply_edits
from tests.conftest import FIXTURES, check_tree, expected_markers, run_cli, write_files
from tests.test_rule_cases import run_case


def _findings(root, code):
    outcome = check_tree(root, select=[code])
    assert not outcome.result.internal_errors
    return [d for d in outcome.diagnostics if d.code == code]


def _fix(root, name, code="DSL301"):
    """Apply every fix of ``code`` to ``root/name`` and return the new text."""
    found = [d for d in _findings(root, code) if d.path.endswith(name)]
    assert found and all(d.fix is not None for d in found), found
    path = root / name
    text = apply_edits(path.read_text(), [e for d in found for e in d.fix.edits])
    path.write_text(text)
    return text


# --------------------------------------------------------------------------- DSL301 fix


def test_dsl301_fix_on_fixture_parses_removes_finding_and_restarts_epochs(tmp_path):
    shutil.copy(FIXTURES / "DSL301-iter-returns-self" / "bad.py", tmp_path / "stream.py")
    [finding] = _findings(tmp_path, "DSL301")
    assert finding.fix.applicability == "unsafe"
    assert "second epoch yields 0 samples" in finding.message
    text = _fix(tmp_path, "stream.py")
    cst.parse_module(text)
    assert _findings(tmp_path, "DSL301") == []

    # the fixed stream really restarts: 100 samples in each of 3 epochs
    torch = pytest.importorskip("torch")
    namespace = {"__name__": "fixed_stream"}
    exec(compile(text, str(tmp_path / "stream.py"), "exec"), namespace)
    dataset = namespace["build"](tmp_path)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=0)
    assert [len(list(loader)) for _ in range(3)] == [100, 100, 100]


def test_dsl301_fix_keeps_existing_resets_and_adds_missing_ones(tmp_path):
    write_files(
        tmp_path,
        {
            "rows.py": """
            from torch.utils.data import IterableDataset

            class Rows(IterableDataset):
                \"\"\"Rows of a table.\"\"\"

                def __init__(self, rows):
                    self.rows = list(rows)
                    self.it = iter(self.rows)
                    self.seen = 0

                def __iter__(self):
                    \"\"\"Iterate.\"\"\"
                    self.seen = 0
                    return self  # expect: DSL301

                def __next__(self):
                    self.seen += 1
                    return next(self.it)
            """
        },
    )
    text = _fix(tmp_path, "rows.py")
    cst.parse_module(text)
    assert "self.it = iter(self.rows)" in text.split("def __iter__")[1]
    assert "self.seen = 0" in text.split("def __iter__")[1]
    assert _findings(tmp_path, "DSL301") == []
    namespace = {}
    exec(compile(text, "rows.py", "exec"), namespace)
    rows = namespace["Rows"]([1, 2, 3])
    assert [list(rows), list(rows)] == [[1, 2, 3], [1, 2, 3]]


@pytest.mark.parametrize(
    "init_line",
    [
        "self.it = iter(rows)",  # a constructor argument: not available in __iter__
        "self.it = make_iterator(self.rows)",  # an arbitrary call: unknown side effects
    ],
)
def test_dsl301_no_fix_when_the_initial_state_cannot_be_recomputed(tmp_path, init_line):
    write_files(
        tmp_path,
        {
            "rows.py": f"""
            from torch.utils.data import IterableDataset

            class Rows(IterableDataset):
                def __init__(self, rows):
                    self.rows = rows
                    {init_line}

                def __iter__(self):
                    return self

                def __next__(self):
                    return next(self.it)
            """
        },
    )
    [finding] = _findings(tmp_path, "DSL301")
    assert finding.fix is None


def test_dsl301_no_fix_when_iter_does_more_than_return_self(tmp_path):
    write_files(
        tmp_path,
        {
            "rows.py": """
            from torch.utils.data import IterableDataset

            class Rows(IterableDataset):
                def __init__(self, rows):
                    self.rows = rows
                    self.i = 0

                def __iter__(self):
                    if self.rows:
                        return self
                    return iter(())

                def __next__(self):
                    if self.i >= len(self.rows):
                        raise StopIteration
                    self.i += 1
                    return self.rows[self.i - 1]
            """
        },
    )
    [finding] = _findings(tmp_path, "DSL301")
    assert finding.row == 10 and finding.fix is None


def test_dsl301_fix_through_the_cli_is_idempotent(tmp_path):
    shutil.copy(FIXTURES / "DSL301-iter-returns-self" / "bad.py", tmp_path / "stream.py")
    first = run_cli("check", "--fix", "--unsafe-fixes", "--select", "DSL301", "--no-cache", "stream.py", cwd=tmp_path)
    once = (tmp_path / "stream.py").read_text()
    assert "return self" not in once, first.stdout + first.stderr
    cst.parse_module(once)
    run_cli("check", "--fix", "--unsafe-fixes", "--select", "DSL301", "--no-cache", "stream.py", cwd=tmp_path)
    assert (tmp_path / "stream.py").read_text() == once


# --------------------------------------------------------------------------- DSL302


def test_dsl302_messages_tell_files_from_iterators(tmp_path):
    write_files(
        tmp_path,
        """
        from torch.utils.data import IterableDataset

        class S(IterableDataset):
            def __init__(self, path, items):
                self.f = open(path)
                self.it = iter(items)

            def __iter__(self):
                for line in self.f:
                    yield line, next(self.it)
        """,
    )
    found = {d.row: d.message for d in _findings(tmp_path, "DSL302")}
    assert set(found) == {5, 6}
    assert "with or without workers" in found[5]
    assert "`num_workers=0` or `persistent_workers=True`" in found[6]


def test_dsl302_not_reported_for_a_handle_only_read_in_getitem(tmp_path):
    write_files(
        tmp_path,
        """
        from torch.utils.data import IterableDataset

        class S(IterableDataset):
            def __init__(self, path):
                self.f = open(path, "rb")
                self.offsets = [0, 8, 16]

            def __iter__(self):
                for offset in self.offsets:
                    self.f.seek(offset)
                    yield self.f.read(8)
        """,
    )
    assert _findings(tmp_path, "DSL302") == []


# --------------------------------------------------------------------------- DSL303


STREAM = """
from torch.utils.data import DataLoader, IterableDataset

class Files(IterableDataset):
    def __init__(self, files):
        self.files = files

    def __iter__(self):
        for f in self.files:
            yield f
"""


@pytest.mark.parametrize(
    "loaders,level",
    [
        ("", "warning"),
        ("loader = DataLoader(Files([]), num_workers=args.workers)", "warning"),
        ("loader = DataLoader(Files([]), num_workers=4)", "error"),
        ("a = DataLoader(Files([]))\nb = DataLoader(Files([]), num_workers=2)", "error"),
        ("a = DataLoader(Files([]))\nb = DataLoader(Files([]), num_workers=1)", None),
    ],
)
def test_dsl303_level_follows_the_loaders(tmp_path, loaders, level):
    write_files(tmp_path, STREAM + "\n" + loaders + "\n")
    found = _findings(tmp_path, "DSL303")
    if level is None:
        assert found == []
    else:
        [finding] = found
        assert finding.row == 7 and finding.level == level
        if level == "error" and "num_workers=4" in loaders:
            assert "arrives 4 times" in finding.message


def test_dsl303_worker_info_read_only_while_the_object_is_built_splits_nothing(tmp_path):
    """``get_worker_info()`` read in ``__init__`` (or in a method only ``__init__`` runs) is None
    there: the dataset is built in the main process and each worker gets a copy of the same split.
    Reported at that read, or at the ``__init__`` call of the method (``sharding.construction_code``);
    a method that ``__iter__`` also runs still shards."""
    write_files(tmp_path, {"train.py": """
        from torch.utils.data import DataLoader, IterableDataset, get_worker_info

        class Ranked(IterableDataset):
            def __init__(self, rows):
                self.rows = rows
                self._setup()  # expect: DSL303

            def _setup(self):
                info = get_worker_info()
                workers, worker = (info.num_workers, info.id) if info else (1, 0)
                self.part = slice(worker, None, workers)

            def __iter__(self):
                yield from self.rows[self.part]

        class Direct(IterableDataset):
            def __init__(self, rows):
                info = get_worker_info()  # expect: DSL303
                self.rows = rows[info.id::info.num_workers] if info else rows

            def __iter__(self):
                yield from self.rows

        class Lazy(IterableDataset):
            def __init__(self, rows):
                self.rows = rows
                self._setup()

            def _setup(self):
                info = get_worker_info()
                self.part = slice(info.id, None, info.num_workers) if info else slice(None)

            def __iter__(self):
                self._setup()  # (runs in each worker too)
                yield from self.rows[self.part]

        loaders = [DataLoader(cls(list(range(8))), num_workers=2) for cls in (Ranked, Direct, Lazy)]
        """})
    found = check_tree(tmp_path, select=["DSL303"]).diagnostics
    assert {(f.path, f.row) for f in found} == {(p, r) for p, r, _ in expected_markers(tmp_path)}
    assert all("only while the object is built" in f.message for f in found)


def test_dsl303_silent_when_a_worker_init_fn_in_another_file_shards_through_a_helper(tmp_path):
    write_files(
        tmp_path,
        {
            "stream.py": STREAM,
            "sharding.py": """
            import torch.utils.data as tud

            def _split(ds, info):
                ds.files = ds.files[info.id :: info.num_workers]

            def worker_init(worker_id):
                _split(tud.get_worker_info().dataset, tud.get_worker_info())
            """,
            "train.py": """
            from torch.utils.data import DataLoader
            from stream import Files
            from sharding import worker_init

            loader = DataLoader(Files(["a"]), num_workers=4, worker_init_fn=worker_init)
            """,
        },
    )
    assert _findings(tmp_path, "DSL303") == []


def test_dsl303_a_loader_over_a_parameter_annotated_with_the_class(tmp_path):
    """``def loader(ds: Files)``: the loader is over ``Files``, so its ``worker_init_fn``
    (which sets each worker's slice) counts; without one, 4 workers make it an error."""
    files = {
        "stream.py": STREAM,
        "sharding.py": """
            import torch.utils.data as tud

            def worker_init(worker_id):
                info = tud.get_worker_info()
                info.dataset.files = info.dataset.files[worker_id :: info.num_workers]
            """,
        "module.py": """
            from torch.utils.data import DataLoader
            from stream import Files
            from sharding import worker_init

            def loader(ds: Files, workers):
                return DataLoader(ds, num_workers=workers, worker_init_fn=worker_init)
            """,
    }
    write_files(tmp_path, files)
    assert _findings(tmp_path, "DSL303") == []
    files["module.py"] = files["module.py"].replace(
        "num_workers=workers, worker_init_fn=worker_init", "num_workers=4").replace("ds: Files, workers", "ds: Files")
    write_files(tmp_path, files)
    assert [f.level for f in check_tree(tmp_path, select=["DSL303"]).diagnostics] == ["error"]


def test_dsl303_silent_when_a_helper_in_another_file_shards(tmp_path):
    write_files(
        tmp_path,
        {
            "shard.py": """
            import torch.utils.data

            def mine(items):
                info = torch.utils.data.get_worker_info()
                return items if info is None else items[info.id :: info.num_workers]
            """,
            "stream.py": """
            from torch.utils.data import IterableDataset
            from shard import mine

            class Files(IterableDataset):
                def __init__(self, files):
                    self.files = files

                def __iter__(self):
                    for f in mine(self.files):
                        yield f
            """,
        },
    )
    assert _findings(tmp_path, "DSL303") == []


# --------------------------------------------------------------------------- DSL304


def test_dsl304_follows_a_base_gaining_len_across_files_with_the_cache(tmp_path):
    """The answer about another file's class is recorded: editing the base re-checks the user."""
    write_files(
        tmp_path,
        {
            "base.py": """
            import torch.utils.data as tud

            class Base(tud.IterableDataset):
                pass
            """,
            "stream.py": """
            from base import Base

            class Stream(Base):
                def __iter__(self):
                    yield 1
            """,
            "train.py": """
            from torch.utils.data import DataLoader
            from stream import Stream

            n = len(DataLoader(Stream()))
            """,
        },
    )
    env = {"DSLINT_CACHE_DIR": str(tmp_path / ".cache")}
    args = ("check", "--select", "DSL304", "--output-format", "concise", ".")
    first = run_cli(*args, cwd=tmp_path, env=env)
    assert "train.py:4:" in first.stdout and "DSL304" in first.stdout
    (tmp_path / "base.py").write_text(
        textwrap.dedent(
            """
            import torch.utils.data as tud

            class Base(tud.IterableDataset):
                def __len__(self):
                    return 1
            """
        )
    )
    second = run_cli(*args, cwd=tmp_path, env=env)
    assert "DSL304" not in second.stdout, second.stdout


# --------------------------------------------------------------------------- precision on public code


def test_dsl303_silent_for_a_reader_object_that_may_shard_itself(tmp_path):
    # `self.reader` is made by a factory or passed in: its own __iter__ may consult worker info
    write_files(
        tmp_path,
        """
        from torch.utils.data import IterableDataset

        def make_reader(name, root):
            return Reader(name, root)

        class Images(IterableDataset):
            def __init__(self, root, reader=None):
                if reader is None:
                    self.reader = make_reader("tfds", root)
                else:
                    self.reader = reader

            def __iter__(self):
                for image, target in self.reader:
                    yield self.transform(image), target
        """,
    )
    assert _findings(tmp_path, "DSL303") == []


def test_dsl303_bare_counter_streams_are_toys(tmp_path):
    write_files(
        tmp_path,
        """
        from torch.utils.data import IterableDataset

        class Counting(IterableDataset):
            def __init__(self, n):
                self.n = n

            def __iter__(self):
                return iter(range(self.n))

        class CountingList(IterableDataset):
            def __iter__(self):
                return iter(list(range(self.n)))

        class Lines(IterableDataset):
            def __iter__(self):
                return iter(self.lines)
        """,
    )
    assert [(d.row, d.code) for d in _findings(tmp_path, "DSL303")] == [(15, "DSL303")]


def test_iterable_protocol_rules_leave_test_fixtures_alone(tmp_path):
    fixture = """
    from torch.utils.data import IterableDataset

    class Replay(IterableDataset):
        def __init__(self, items):
            self.items = items
            self.pos = 0

        def __iter__(self):
            return self

        def __next__(self):
            if self.pos >= len(self.items):
                raise StopIteration
            self.pos += 1
            return self.items[self.pos - 1]
    """
    write_files(tmp_path, {"tests/helpers.py": fixture, "test_state.py": fixture})
    assert _findings(tmp_path, "DSL301") == [] and _findings(tmp_path, "DSL303") == []
    write_files(tmp_path, {"replay.py": fixture})
    assert {(d.path, d.code) for d in _findings(tmp_path, "DSL301") + _findings(tmp_path, "DSL303")} == {
        ("replay.py", "DSL301"),
        ("replay.py", "DSL303"),
    }


# --------------------------------------------------------------------------- more cases

# Cases of this family's rules that do not fit in the rule modules (300 lines each);
# they run exactly like the embedded ones (tests/test_rule_cases.py).
MORE_CASES = [
    # DSL301: an endless stream (its __next__ never stops)
    ('DSL301', 'valid', """
    import torch
    from torch.utils.data import IterableDataset

    class Endless(IterableDataset):
        def __iter__(self):
            return self

        def __next__(self):
            return torch.randn(3)
    """),
    # DSL301: a cursor advanced by __next__ with no reset
    ('DSL301', 'invalid', """
    import torch.utils.data as tud

    class Rows(tud.IterableDataset):
        def __init__(self, rows):
            self.rows = iter(rows)

        def __iter__(self):
            return self  # expect: DSL301

        def __next__(self):
            return self._parse(next(self.rows))

        def _parse(self, row):
            return row
    """),
    # DSL302: a file rewound by `__iter__` (seek) is renewed for each epoch
    ('DSL302', 'valid', """
    from torch.utils.data import IterableDataset

    class Rewinds(IterableDataset):
        def __init__(self, path):
            self.f = open(path)

        def __iter__(self):
            self.f.seek(0)
            for line in self.f:
                yield line
    """),
    # DSL302: an iterator that another method (set_epoch) renews
    ('DSL302', 'valid', """
    from torch.utils.data import IterableDataset

    class ResetHook(IterableDataset):
        def __init__(self, items):
            self.items = items
            self.it = iter(items)

        def set_epoch(self, epoch):
            self.it = iter(self.items)

        def __iter__(self):
            yield from self.it
    """),
    # DSL302: a generator passed to the constructor of another file's stream and drained by __next__
    ('DSL302', 'invalid', {
        "rows.py": """
        import torch

        def lines(path):
            with open(path) as f:
                yield from f

        class Stream(torch.utils.data.IterableDataset):
            def __init__(self, iterator):
                self._iterator = iterator  # expect: DSL302

            def __iter__(self):
                return self

            def __next__(self):
                return next(self._iterator)
        """,
        "news.py": "from rows import Stream, lines\n\nds = Stream(lines('news.txt'))\n",
    }),
    # DSL302: a generator of another file, handed in a loop to a function of a third file that drains it
    ('DSL302', 'invalid', {
        "data/batches.py": """
        from torch.utils.data import DataLoader

        def batches(dataset, size):
            for batch in DataLoader(dataset, batch_size=size):
                yield batch.cuda(non_blocking=True)
        """,
        "evaluation.py": """
        from torch.utils.data import DataLoader

        def score(model, held_out: DataLoader):
            total = 0.0
            for batch in held_out:
                total += float(model(batch).mean())
            return total

        def peek(model, held_out):
            for batch in held_out:
                return model(batch)
        """,
        "train.py": """
        from torch.utils.data import DataLoader
        from data.batches import batches
        from evaluation import peek, score

        def main(model, rows, steps):
            held_out = batches(rows, 32)  # expect: DSL302
            stream = batches(rows, 32)
            for step in range(steps):
                if step % 100 == 0:
                    score(model, held_out=held_out)
                    peek(model, stream)  # one batch per pass: the stream goes on
        """,
    }),
    # DSL303: torch's base comes first in the bases, so the class does not take Lines.__iter__
    ('DSL303', 'valid', """
        from torch.utils.data import IterableDataset

        class Lines:
            def __iter__(self):
                with open(self.path) as f:
                    yield from f

        class TorchLines(IterableDataset, Lines):
            pass
    """),
    # DSL303: the objects it zips are attributes the code never names (set with setattr from what is handed in)
    ('DSL303', 'valid', """
        import torch.utils.data as tud

        class Joint(tud.IterableDataset):
            def __init__(self, sources):
                self.names = []
                for key, source in sources.items():
                    setattr(self, key, source)
                    self.names.append(key)

            def __iter__(self):
                for batch in zip(*[getattr(self, n) for n in self.names]):
                    yield dict(zip(self.names, batch))

        def build(loaders):
            return Joint(loaders)  # DataLoaders with their own workers, iterated in the main process
    """),
    # DSL302: a subclass in another file of a base that derives from IterableDataset
    ('DSL302', 'invalid', {
        "base.py": """
        import torch.utils.data as tud

        class Base(tud.IterableDataset):
            pass
        """,
        "child.py": """
        from base import Base

        class Child(Base):
            def __init__(self, items):
                self.it = iter(items)  # expect: DSL302

            def __iter__(self):
                return self.it
        """,
    }),
    # the class itself (``Cls(...)`` in its own methods) is not a project object that shards:
    # worker info read only to seed does not split the stream
    ('DSL303', 'invalid', """
        import numpy as np
        import torch

        class Records(torch.utils.data.IterableDataset):
            def __init__(self, paths):
                super().__init__()
                self.paths = paths

            def head(self, n):
                return Records(self.paths[:n])

            def __iter__(self):  # expect: DSL303
                info = torch.utils.data.get_worker_info()
                if info is not None:
                    np.random.seed(info.seed % 2**32)
                for path in self.paths:
                    yield path
        """),
    # the stream draws its indexes from a project sampler class (another file) whose
    # ``__iter__`` splits them by worker: sharded
    ('DSL303', 'valid', {
        "splitting.py": """
            import torch

            class PerWorker(torch.utils.data.Sampler):
                def __init__(self, inner):
                    self.inner = inner

                def __iter__(self):
                    info = torch.utils.data.get_worker_info()
                    indexes = list(self.inner)
                    if info is not None:
                        indexes = indexes[info.id::info.num_workers]
                    return iter(indexes)
            """,
        "clips.py": """
            import torch
            from splitting import PerWorker

            class Clips(torch.utils.data.IterableDataset):
                def __init__(self, videos):
                    self.videos = videos
                    self.order = None

                def __next__(self):
                    if self.order is None:
                        self.order = iter(PerWorker(torch.utils.data.RandomSampler(self.videos)))
                    return self.videos[next(self.order)]

                def __iter__(self):
                    return self
            """,
    }),
    # the same class whose ``__iter__`` does not consult worker info: every worker replays it
    ('DSL303', 'invalid', {
        "splitting.py": """
            import torch

            class Shuffled(torch.utils.data.Sampler):
                def __init__(self, inner):
                    self.inner = inner

                def __iter__(self):
                    return iter(list(self.inner))
            """,
        "clips.py": """
            import torch
            from splitting import Shuffled

            class Clips(torch.utils.data.IterableDataset):
                def __init__(self, videos):
                    self.videos = videos
                    self.order = None

                def __next__(self):
                    if self.order is None:
                        self.order = iter(Shuffled(torch.utils.data.RandomSampler(self.videos)))
                    return self.videos[next(self.order)]

                def __iter__(self):  # expect: DSL303
                    return self
            """,
    }),
    # the loader's worker_init_fn is a bound method of its own dataset, and the dataset comes from
    # a factory whose class is unknown here: the method may reconfigure (shard) the instance
    ('DSL303', 'valid', """
        from torch.utils.data import DataLoader, IterableDataset
        from corpora import open_corpus

        class Lines(IterableDataset):
            def __init__(self, paths):
                self.paths = paths
                self.offset, self.stride = 0, 1

            def reshard(self, worker_id):
                self.offset, self.stride = worker_id, 4

            def __iter__(self):
                for path in self.paths:
                    yield path

        data = open_corpus("train")
        loader = DataLoader(data, num_workers=4, worker_init_fn=data.reshard)
        """),
    # a classmethod returning ``cls(...)`` constructs the class: its loader's bound-method
    # worker_init_fn belongs to that class
    ('DSL303', 'valid', """
        from torch.utils.data import DataLoader, IterableDataset

        class Lines(IterableDataset):
            def __init__(self, paths):
                self.paths = paths

            @classmethod
            def from_list(cls, listing):
                return cls(open(listing).read().split())

            def reshard(self, worker_id):
                self.paths = self.paths[worker_id::4]

            def __iter__(self):
                yield from self.paths

        data = Lines.from_list("train.txt")
        loader = DataLoader(data, num_workers=4, worker_init_fn=data.reshard)
        """),
    # the same bound method on a loader over another object does not shard this class
    ('DSL303', 'invalid', """
        from torch.utils.data import DataLoader, IterableDataset

        class Lines(IterableDataset):
            def __init__(self, paths):
                self.paths = paths

            def reshard(self, worker_id):
                pass

            def __iter__(self):  # expect: DSL303
                for path in self.paths:
                    yield path

        def build(make, other):
            data = make()
            return DataLoader(data, num_workers=4, worker_init_fn=other.reshard)
        """),
    # a generator `__iter__` that draws from `next(self)`: the samples come from `__next__`
    ('DSL303', 'invalid', """
        from torch.utils.data import IterableDataset

        class Counter(IterableDataset):
            def __init__(self, n):
                self.n = n
                self.i = 0

            def __iter__(self):  # expect: DSL303
                self.i = 0
                while True:
                    try:
                        yield next(self)
                    except StopIteration:
                        return

            def __next__(self):
                if self.i >= self.n:
                    raise StopIteration
                self.i += 1
                return self.i
        """),
    ('DSL303', 'valid', """
        from torch.utils.data import IterableDataset, get_worker_info

        class Counter(IterableDataset):
            def __init__(self, n):
                self.n = n

            def __iter__(self):
                info = get_worker_info()
                self.i = info.id if info else 0
                self.step = info.num_workers if info else 1
                while True:
                    try:
                        yield next(self)
                    except StopIteration:
                        return

            def __next__(self):
                if self.i >= self.n:
                    raise StopIteration
                self.i += self.step
                return self.i
        """),
    ('DSL303', 'valid', """
        import torch.utils.data as tud

        def my_shard(files):
            info = tud.get_worker_info()
            return files if info is None else files[info.id :: info.num_workers]

        class ViaHelper(tud.IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                for f in self._mine():
                    yield f

            def _mine(self):
                return my_shard(self.files)
        """),
    ('DSL303', 'valid', """
        from torch.utils.data import DataLoader, IterableDataset

        class SingleProcess(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                yield from self.files

        ds = SingleProcess(["a"])
        loader = DataLoader(ds, batch_size=4)
        other = DataLoader(ds, num_workers=1)
        """),
    ('DSL303', 'valid', """
        import webdataset as wds
        from torch.utils.data import IterableDataset

        class Shards(IterableDataset):
            def __init__(self, urls):
                self.urls = urls

            def __iter__(self):
                for sample in wds.WebDataset(self.urls):
                    yield sample
        """),
    ('DSL303', 'valid', {
            "base.py": """
            from torch.utils.data import get_worker_info

            class ShardMixin:
                def my_files(self):
                    info = get_worker_info()
                    return self.files if info is None else self.files[info.id :: info.num_workers]
            """,
            "ds.py": """
            from torch.utils.data import IterableDataset
            from base import ShardMixin

            class Files(ShardMixin, IterableDataset):
                def __init__(self, files):
                    self.files = files

                def __iter__(self):
                    for f in self.my_files():
                        yield f
            """,
        }),
    ('DSL303', 'valid', """
        from torch.utils.data import IterableDataset, get_worker_info

        class ByProperty(IterableDataset):
            def __init__(self, files):
                self.files = files

            @property
            def mine(self):
                info = get_worker_info()
                return self.files if info is None else self.files[info.id :: info.num_workers]

            def __iter__(self):
                for f in self.mine:
                    yield f
        """),
    ('DSL303', 'valid', """
        import numpy as np
        from torch.utils.data import IterableDataset

        class RandomClips(IterableDataset):
            def __init__(self, files):
                self.files = files

            def generate(self):
                while True:
                    idx = np.random.choice(len(self.files))
                    yield self.files[idx]

            def __iter__(self):
                return iter(self.generate())

        class Empty(IterableDataset):
            def __iter__(self):
                return iter([])

        class Toy(IterableDataset):
            def __iter__(self):
                yield from [1, 2, 3]
        """),
    ('DSL303', 'valid', """
        from torch.utils.data import IterableDataset
        from torch.utils.data import get_worker_info as gwi

        class Aliased(IterableDataset):
            def __init__(self, files):
                self.files = files

            def __iter__(self):
                def mine():
                    info = gwi()
                    return self.files if info is None else self.files[info.id :: info.num_workers]

                for f in mine():
                    yield f
        """),
    ('DSL303', 'valid', {  # each step draws at random from a buffer it is handed (the draw in its class, another file)
            "buffer.py": """
            import torch

            class Buffer:
                def __init__(self, rows):
                    self.rows = rows

                def _pick(self, n):
                    return torch.randint(len(self.rows), (n,))

                def sample(self, n):
                    return [self.rows[i] for i in self._pick(n)]
            """,
            "stream.py": """
            from torch.utils.data import DataLoader, IterableDataset
            from buffer import Buffer

            class Draws(IterableDataset):
                def __init__(self, buffer: Buffer, steps):
                    self.buffer = buffer
                    self.steps = steps

                def __iter__(self):
                    for _ in range(self.steps):
                        yield self.buffer.sample(8)

            loader = DataLoader(Draws(Buffer(list(range(100))), 10), num_workers=2)
            """,
        }),
    ('DSL303', 'invalid', {  # the same shape over a reader that walks its rows in order: every worker replays them
            "reader.py": """
            class Reader:
                def __init__(self, rows):
                    self.rows = rows
                    self.at = 0

                def take(self, n):
                    out = self.rows[self.at:self.at + n]
                    self.at += n
                    return out
            """,
            "stream.py": """
            from torch.utils.data import DataLoader, IterableDataset
            from reader import Reader

            class Chunks(IterableDataset):
                def __init__(self, reader: Reader, steps):
                    self.reader = reader
                    self.steps = steps

                def __iter__(self):  # expect: DSL303
                    for _ in range(self.steps):
                        yield self.reader.take(8)

            loader = DataLoader(Chunks(Reader(list(range(100))), 10), num_workers=2)
            """,
        }),
    ('DSL303', 'valid', {  # __next__ asks an object handed in for each item: its project class decides
            "samplers.py": """
            class ClipSampler:
                def get_next(self, rng):
                    return self.server.request(rng)
            """,
            "data.py": """
            import numpy as np
            from samplers import ClipSampler
            from torch.utils.data import DataLoader, IterableDataset

            class Forward(IterableDataset):
                def __init__(self, picker, n):
                    self.picker = picker
                    self.n = n
                    self.rng = np.random.default_rng()

                def __len__(self):
                    return self.n

                def __iter__(self):
                    return self

                def __next__(self):
                    return self.picker.get_next(self.rng)

            loader = DataLoader(Forward(ClipSampler(), 8), num_workers=2)
            """,
        }),
    ('DSL303', 'invalid', """
        from torch.utils.data import DataLoader, IterableDataset

        class Rows(IterableDataset):  # a method no project class defines: the frame's own rows
            def __init__(self, frame):
                self.frame = frame
                self.i = 0

            def __iter__(self):  # expect: DSL303
                return self

            def __next__(self):
                if self.i >= len(self.frame):
                    raise StopIteration
                self.i += 1
                return self.frame.row_at(self.i - 1)

        loader = DataLoader(Rows(None), num_workers=2)
        """),
    ('DSL303', 'valid', """
        from torch.utils.data.datapipes.iter import IterDataPipe

        class Pipe(IterDataPipe):
            def __init__(self, items):
                self.items = items

            def __iter__(self):
                yield from self.items
        """),
    ('DSL303', 'invalid', {
            "helpers.py": """
            def load(path):
                return open(path).read()
            """,
            "base.py": """
            from torch.utils.data import IterableDataset

            class Stream(IterableDataset):
                pass
            """,
            "child.py": """
            from base import Stream
            from helpers import load

            class Child(Stream):
                def __init__(self, paths):
                    self.paths = paths

                def __iter__(self):  # expect: DSL303
                    for i in range(len(self.paths)):
                        yield load(self.paths[i])
            """,
            "train.py": """
            from torch.utils.data import DataLoader
            from child import Child

            ds = Child(["a", "b"])
            loader = DataLoader(ds, num_workers=0)
            fast = DataLoader(ds, num_workers=2)
            """,
        }),
    ('DSL301', 'valid', """
        from torch.utils.data import IterableDataset

        class ResetsOnExhaustion(IterableDataset):
            def __init__(self, n):
                self.n = n
                self.i = 0

            def __iter__(self):
                return self

            def __next__(self):
                if self.i >= self.n:
                    self.i = 0
                    raise StopIteration
                self.i += 1
                return self.i
        """),
    ('DSL301', 'valid', """
        class NotADataset:
            def __init__(self):
                self.i = 0

            def __iter__(self):
                return self

            def __next__(self):
                if self.i > 3:
                    raise StopIteration
                self.i += 1
                return self.i
        """),
    ('DSL301', 'valid', """
        from torch.utils.data import IterableDataset

        class ExternalReset(IterableDataset):
            def __init__(self, data):
                self.data = data
                self.it = iter(data)

            def set_epoch(self, epoch):
                self.it = iter(self.data)

            def __iter__(self):
                return self

            def __next__(self):
                return next(self.it)
        """),
    ('DSL301', 'valid', """
        from torch.utils.data import IterableDataset

        class Helper(IterableDataset):
            def __init__(self, data):
                self.data = data

            def __iter__(self):
                self._restart()
                return self

            def _restart(self):
                self.pos = 0

            def __next__(self):
                if self.pos >= len(self.data):
                    raise StopIteration
                self.pos += 1
                return self.data[self.pos - 1]
        """),
    ('DSL302', 'valid', """
        from torch.utils.data import Dataset

        class SeekRead(Dataset):
            def __init__(self, path):
                self.f = open(path, "rb")

            def __getitem__(self, i):
                self.f.seek(i * 8)
                return self.f.read(8)
        """),
    ('DSL302', 'valid', """
        import itertools
        from torch.utils.data import IterableDataset

        class Endless(IterableDataset):
            def __init__(self, items):
                self.pool = itertools.cycle(items)
                self.items = list(items)

            def __iter__(self):
                for x in self.items:
                    yield x, next(self.pool)
        """),
    ('DSL302', 'valid', {"tests/test_pipe.py": """
        from torchdata.datapipes.iter import IterableWrapper

        def test_drains_once():
            pipe = IterableWrapper(x for x in range(3))
            assert list(pipe) == [0, 1, 2]
        """}),
    # DSL303: a DataLoader a method builds over ``self`` is a loader over the class: without workers,
    # the stream is read once; with workers, each replays it
    ("DSL303", "valid", """
        import torch

        class Records(torch.utils.data.IterableDataset):
            def __init__(self, rows):
                self.rows = rows
            def __iter__(self):
                for row in self.rows:
                    yield row
            def to_loader(self):
                return torch.utils.data.DataLoader(self, batch_size=None)
        """),
    ("DSL303", "invalid", """
        import torch

        class Records(torch.utils.data.IterableDataset):
            def __init__(self, rows):
                self.rows = rows
            def __iter__(self):  # expect: DSL303
                for row in self.rows:
                    yield row
            def to_loader(self):
                return torch.utils.data.DataLoader(self, batch_size=None, num_workers=4)
        """),
    # DSL304: ``self`` of a class whose base (another file) defines ``__len__`` has a length, so a
    # ``len(self)`` under ``except TypeError`` guards the cast next to it, not a missing length
    ("DSL304", "valid", {
        "container.py": """
            class Sized:
                def __len__(self):
                    return len(self.rows)
        """,
        "table.py": """
            import numpy as np
            from torch.utils.data import Dataset
            from container import Sized

            class Table(Sized):
                def fill(self, key, value, dtype):
                    print(f"filling {len(self)} rows")
                    try:
                        self.rows[key] = np.array([value] * len(self), dtype=dtype)
                    except TypeError:
                        raise ValueError(key)
        """,
    }),
    # ... while a class without ``__len__`` that probes itself so may have none
    ("DSL304", "invalid", """
        import numpy as np
        from torch.utils.data import Dataset

        class Stream:
            def fill(self, key, value, dtype):
                print(f"filling {len(self)} rows")  # expect: DSL304
                try:
                    self.rows[key] = np.array([value] * len(self), dtype=dtype)
                except TypeError:
                    raise ValueError(key)
        """),
]


@pytest.mark.parametrize(
    "code,kind,case", [pytest.param(*case, id=f"{case[0]}-{case[1]}-more-{i}") for i, case in enumerate(MORE_CASES)]
)
def test_more_cases(tmp_path, code, kind, case):
    run_case(tmp_path, code, kind, case)


PASSED_STREAM = """
import torch


class Stream(torch.utils.data.IterableDataset):
    def __init__(self, rows):
        self.rows = rows

    def __iter__(self):
        yield from self.rows
"""

PLAIN_ITER = """
class Lines:
    def __iter__(self):
        with open(self.path) as f:
            yield from f
"""


def test_iterators_passed_in_only_by_tests_and_heirs_only_in_tests_are_left_alone(tmp_path):
    """A test that passes a generator drains it once on purpose; an IterableDataset defined
    only in a test does not make a plain class's ``__iter__`` a dataset's."""
    write_files(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/stream.py": PASSED_STREAM,
        "pkg/lines.py": PLAIN_ITER,
        "pkg/use.py": "from pkg.stream import Stream\n\nds = Stream(['a', 'b'])\n",
        "tests/test_stream.py": (
            "import torch\nfrom pkg.lines import Lines\nfrom pkg.stream import Stream\n\n\n"
            "class TorchLines(Lines, torch.utils.data.IterableDataset):\n    pass\n\n\n"
            "def check():\n    assert list(Stream(x for x in 'ab')) == ['a', 'b']\n"
        ),
    })
    assert _findings(tmp_path, "DSL302") == []
    assert [d for d in _findings(tmp_path, "DSL303") if d.path.endswith("lines.py")] == []
    (tmp_path / "pkg/use.py").write_text("from pkg.stream import Stream\n\nds = Stream(iter(['a', 'b']))\n")
    assert [(d.path.rsplit("/", 1)[-1], d.row) for d in _findings(tmp_path, "DSL302")] == [("stream.py", 6)]


def test_dsl303_a_stage_applied_to_a_wrapped_stream_is_judged_by_that_stream(tmp_path):
    """``return self.fn(iter(self.source))``: the stage only transforms what the wrapped
    stream yields, so the wrapped stream decides the sharding (silent); a stage applied to
    the class's own list replays that list in every worker (reported)."""
    write_files(
        tmp_path,
        {
            "stages.py": """
            from torch.utils.data import IterableDataset

            class Stage(IterableDataset):
                def __init__(self, source, fn):
                    self.source = source
                    self.fn = fn

                def __iter__(self):
                    return self.fn(iter(self.source))

            class Lines(IterableDataset):
                def __init__(self, lines, fn):
                    self.lines = lines
                    self.fn = fn

                def __iter__(self):
                    return self.fn(iter(self.lines))
            """,
        },
    )
    found = [(d.path.rsplit("/", 1)[-1], d.start[0]) for d in _findings(tmp_path, "DSL303")]
    assert found == [("stages.py", 16)]


def test_dsl303_silent_when_a_handed_object_makes_the_stream(tmp_path):
    """``return self.task.train_stream()`` where ``self.task`` is handed in and a project class defines
    ``train_stream``: which one runs, and whether it splits by worker, cannot be told (silent). A
    method no project class defines (a library object's, ``itertuples``) still streams plain data."""
    write_files(
        tmp_path,
        {
            "tasks.py": """
            from torch.utils.data import DataLoader

            class Sampling:
                def train_dataloader(self):
                    return DataLoader(self.train_set, batch_size=8)

                def train_stream(self):
                    rng = make_rng_per_worker()
                    while True:
                        yield rng.choice(self.items)
            """,
            "data.py": """
            from torch.utils.data import IterableDataset

            class Handed(IterableDataset):
                def __init__(self, task):
                    self.task = task

                def __iter__(self):
                    return self.task.train_stream()

            class Rows(IterableDataset):
                def __init__(self, frame):
                    self.frame = frame

                def __iter__(self):
                    return self.frame.itertuples()
            """,
        },
    )
    run = run_cli("check", "--no-cache", "--select", "DSL303", "--output-format", "concise", ".", cwd=tmp_path)
    assert [line.split(":")[:2] for line in run.stdout.splitlines() if "DSL303" in line] == [["data.py", "14"]]


def test_dsl303_an_iterator_whose_next_takes_items_from_a_wrapped_dataset_is_a_wrapper(tmp_path):
    """``__iter__`` returns ``self`` and ``__next__`` returns the next item of a dataset handed in
    (``self.dataset.__next__()``, ``next(self.source)``): the wrapped stream decides the sharding
    (``sharding._next_delegates_to``), so no report. A ``__next__`` over the class's own list of
    lines still replays it in every worker."""
    write_files(
        tmp_path,
        {
            "data.py": """
            from torch.utils.data import DataLoader, IterableDataset

            class Clips(IterableDataset):
                def __init__(self, dataset, clips):
                    self.dataset = dataset
                    self.clips = clips

                def __next__(self):
                    return self.dataset.__next__()

                def __iter__(self):
                    return self

            class Lines(IterableDataset):
                def __init__(self, path):
                    self.lines = open(path).read().splitlines()
                    self.position = iter(self.lines)

                def __next__(self):
                    return next(self.position)

                def __iter__(self):
                    return self

            clips = DataLoader(Clips(make_stream(), 3), num_workers=4)
            lines = DataLoader(Lines("corpus.txt"), num_workers=4)
            """,
        },
    )
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL303"]).diagnostics]
    assert found == [("DSL303", 22)]


def test_dsl303_a_next_that_also_returns_its_own_items_is_not_a_wrapper(tmp_path):
    """``__next__`` takes items from a handed-in stream on one branch and returns items of its own
    list on another: not every ``return`` delegates (``sharding._next_delegates_to``), so the class
    is judged as the source of its samples and reported."""
    write_files(
        tmp_path,
        {
            "data.py": """
            from torch.utils.data import DataLoader, IterableDataset

            class Mixed(IterableDataset):
                def __init__(self, source, path):
                    self.source = source
                    self.lines = open(path).read().splitlines()
                    self.i = 0

                def __next__(self):
                    if self.i >= len(self.lines):
                        return next(self.source)
                    self.i += 1
                    return self.lines[self.i - 1]

                def __iter__(self):
                    return self

            loader = DataLoader(Mixed(make_stream(), "corpus.txt"), num_workers=4)
            """,
        },
    )
    assert [f.code for f in check_tree(tmp_path, select=["DSL303"]).diagnostics] == ["DSL303"]


def test_dsl303_a_next_that_decodes_what_it_draws_from_a_library_stream(tmp_path):
    """``__next__`` draws ``next(self.stream)``, where ``self.stream = iter(self.audio)`` and
    ``self.audio`` is a webdataset chain (``wd.Dataset(urls).shuffle(64).to_tuple(...)``: its root
    call decides), then returns what it builds from the item: the library stream decides the
    sharding (``sharding._drawn_kinds``). Lines drawn from a file the class opened are replayed
    by every worker."""
    write_files(tmp_path, {"noise.py": """
        import io
        import webdataset as wd
        from torch.utils.data import IterableDataset

        class Noise(IterableDataset):
            def __init__(self, urls):
                self.audio = wd.Dataset(urls).shuffle(64).to_tuple("wav", "__key__")
                self.stream = iter(self.audio)
            def __iter__(self):
                return self
            def __next__(self):
                try:
                    data, key = next(self.stream)
                except StopIteration:
                    self.stream = iter(self.audio)
                    data, key = next(self.stream)
                return io.BytesIO(data), key

        class Lines(IterableDataset):
            def __init__(self, path):
                self.handle = open(path)
            def __iter__(self):  # expect: DSL303
                return self
            def __next__(self):
                line = next(self.handle)
                return line.strip()
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL303"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_dsl304_a_library_length_probe_guards_and_probes(tmp_path):
    """``transformers.trainer_utils.has_length(x)`` probes ``x`` for a length
    (``length_probes.LIBRARY_PROBES``): a ``len(x)`` under it is guarded, one before it is not."""
    write_files(
        tmp_path,
        {
            "trainer.py": """
            from torch.utils.data import DataLoader
            from transformers.trainer_utils import has_length

            def steps(loader: DataLoader, accumulation):
                if has_length(loader):
                    return len(loader) // accumulation
                return None

            class Fit:
                def setup(self, limit):
                    steps = limit * len(self.train_loader)  # expect: DSL304
                    if not has_length(self.train_loader):
                        steps = limit
                    return steps
            """,
        },
    )
    outcome = check_tree(tmp_path, select=["DSL304"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_dsl304_a_comprehension_condition_that_tests_the_length_guards_len(tmp_path):
    """A wrapper over several loaders takes ``len()`` only of those its comprehension's condition
    shows to have one: the condition runs first for each element (``length_uses.len_guarded``).
    Without the condition, the ``len()`` is reported."""
    write_files(tmp_path, {"mix.py": """
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield 1

        class Mixed:
            def __init__(self, loaders):
                self.loaders = loaders

            def __len__(self):
                return sum([len(x) for x in self.loaders if hasattr(x, "__len__")])

            def sizes(self):
                sizes = [len(x) for x in self.loaders]  # expect: DSL304
                return sizes if all(hasattr(x, "__len__") for x in self.loaders) else None

        loaders = [DataLoader(Stream()), DataLoader(Stream())]
        n, m = len(Mixed(loaders)), Mixed(loaders).sizes()
        """})
    outcome = check_tree(tmp_path, select=["DSL304"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_dsl303_a_stream_from_a_factory_whose_object_iterates_itself(tmp_path):
    """An IterableDataset iterates what a project factory returns. When the factory returns an
    object of a project class with its own ``__iter__`` (``dataset_uses.factory_returns``), that
    class shards or not by itself (``sharding``): the wrapper is left alone. A factory returning
    plain data is what the wrapper replays in every worker: reported."""
    write_files(tmp_path, {
        "readers.py": """
        from torch.utils.data import get_worker_info

        class Records:
            def __init__(self, path):
                self.path = path

            def __iter__(self):
                info = get_worker_info()
                with open(self.path) as f:
                    for i, line in enumerate(f):
                        if info is None or i % info.num_workers == info.id:
                            yield line

        def make_reader(kind, path):
            if kind == "records":
                reader = Records(path)
            else:
                from columns import Columns
                reader = Columns(path)
            return reader

        def read_lines(path):
            with open(path) as f:
                return f.readlines()
        """,
        "columns.py": """
        class Columns:
            def __init__(self, path):
                self.path = path

            def __iter__(self):
                yield from open(self.path)
        """,
        "stream.py": """
        from torch.utils.data import DataLoader, IterableDataset
        from readers import make_reader, read_lines

        class Wrapped(IterableDataset):
            def __init__(self, kind, path):
                self.parser = make_reader(kind, path)

            def __iter__(self):
                for item in self.parser:
                    yield item.strip()

        class Lines(IterableDataset):
            def __init__(self, path):
                self.lines = read_lines(path)

            def __iter__(self):  # expect: DSL303
                for line in self.lines:
                    yield line.strip()

        loaders = [DataLoader(Wrapped("records", "a.txt"), num_workers=2), DataLoader(Lines("a.txt"), num_workers=2)]
        """})
    outcome = check_tree(tmp_path, select=["DSL303"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)
