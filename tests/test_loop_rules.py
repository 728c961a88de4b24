"""Loops over a loader (``dslint.semantics.loops``) and the loop-level rules DSL505-511.

The embedded rule cases run in ``test_rule_cases.py``; this file tests the
semantics API directly and DSL505's fix end to end (it parses, inserts exactly
one statement, removes the finding, and a second run changes nothing).
"""

from __future__ import annotations

import json
import shutil
import textwrap

import libcst as cst

from tests.conftest import FIXTURES, check_tree, expected_markers, run_cli, write_files


def _context(tmp_path, source: str, name: str = "train.py"):
    """The FileContext of one file, built the way the engine builds it."""
    from dslint import check_file
    from dslint.semantics.context import FileContext
    from dslint.semantics.names import module_name_for
    from dslint.semantics.project import ProjectIndex
    from dslint.semantics.view import View

    (path,) = write_files(tmp_path, {name: source})
    modname, is_package = module_name_for(str(path))
    summary, diagnostic = check_file.parse_file(str(path), path.read_text(), modname, is_package)
    assert diagnostic is None
    index = ProjectIndex({str(path): summary})
    parsed = check_file._PARSED.pop(str(path))
    return FileContext(
        parsed.path, parsed.text, parsed.module, parsed.tree, parsed.names, parsed.regions, parsed.summary,
        View(index, parsed.path),
    )


def _row(ctx, node) -> int:
    from dslint.positions import node_ranges

    return node_ranges(ctx.module, [node])[id(node)][0][0]


HELPERS = """
import torch.utils.data as tud
from tqdm import tqdm

def train_one_epoch(model, loader, optimizer):
    for i, (x, y) in enumerate(tqdm(loader)):      # line 5: via a parameter
        model(x).backward()
        optimizer.step()

def evaluate(model, loader):
    for batch in loader:                           # line 10: called outside any loop
        model(batch)

def get_loaders(ds):
    train = tud.DataLoader(ds, shuffle=True)       # line 14
    val = tud.DataLoader(ds)                       # line 15
    return train, val

class Trainer:
    def __init__(self, loader):
        self.loader = loader

    def epoch(self):
        for batch in self.loader:                  # line 23: self attribute bound in __init__
            pass

    def fit(self, n):
        for _ in range(n):                         # line 27: the epoch loop around self.epoch()
            self.epoch()

def main(ds, model, optimizer):
    train_loader, val_loader = get_loaders(ds)     # line 31: tuple unpacking of a return
    for epoch in range(10):                        # line 32: epoch loop
        train_one_epoch(model, train_loader, optimizer)
    evaluate(model, val_loader)
    Trainer(train_loader).fit(3)
    for a, b in zip(train_loader, val_loader):     # line 36: zip of two loaders, iterated once
        pass
"""


def test_loops_through_helpers_tuples_self_and_wrappers(tmp_path):
    from dslint.semantics.loops import loader_loops

    ctx = _context(tmp_path, HELPERS)
    index = loader_loops(ctx)
    assert loader_loops(ctx) is index  # computed once per file
    loaders = {_row(ctx, l.call): l for l in index.loaders}
    assert sorted(loaders) == [14, 15]
    found = {(_row(ctx, loop.loop), _row(ctx, loop.loader.call)) for loop in index.loops}
    assert found == {(5, 14), (10, 15), (23, 14), (36, 14), (36, 15)}
    epochs = {}
    for loop in index.loops:
        epoch = index.epoch(loop)
        epochs[(_row(ctx, loop.loop), _row(ctx, loop.loader.call))] = _row(ctx, epoch) if epoch is not None else None
    assert epochs == {(5, 14): 32, (10, 15): None, (23, 14): 27, (36, 14): None, (36, 15): None}
    helper_loop = next(l for l in index.loops if _row(ctx, l.loop) == 5)
    assert [_row(ctx, c) for c in helper_loop.epoch_calls] == [33]
    assert [f.name.value for f, _ in index.epoch_functions(helper_loop)] == ["train_one_epoch"]


def test_unknown_loaders_stay_unknown(tmp_path):
    from dslint.semantics.loops import loader_loops

    ctx = _context(
        tmp_path,
        """
        from torch.utils.data import DataLoader

        def main(ds, accelerator, flag):
            loader = DataLoader(ds)
            loader = accelerator.prepare(loader)         # rebound: no longer known
            for batch in loader:
                pass
            either = DataLoader(ds) if flag else DataLoader(ds, shuffle=True)
            for batch in either:                         # two alternatives on one path
                pass
            for name, dl in {"a": DataLoader(ds)}.items():
                for batch in dl:
                    pass
        """,
    )
    assert loader_loops(ctx).loops == []


def test_sampler_values_follow_names_and_conditionals(tmp_path):
    from dslint.semantics.loops import DISTRIBUTED_SAMPLER, is_none, loader_loops

    ctx = _context(
        tmp_path,
        """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler as DS

        def main(ds, distributed):
            if distributed:
                sampler = DS(ds)
            else:
                sampler = None
            return DataLoader(ds, sampler=sampler)
        """,
    )
    index = loader_loops(ctx)
    (loader,) = index.loaders
    values = index.sampler_values(loader)
    assert len(values) == 2 and any(is_none(v.node) for v in values)
    (call,) = index.sampler_calls(loader, [DISTRIBUTED_SAMPLER])
    assert ctx.code(call).strip() == "DS(ds)"


def _copy_fixture(tmp_path, folder: str):
    dest = tmp_path / "proj"
    dest.mkdir()
    shutil.copy(FIXTURES / folder / "bad.py", dest / "bad.py")
    return dest / "bad.py"


def test_dsl505_fix_on_the_fixture(tmp_path):
    bad = _copy_fixture(tmp_path, "DSL505-distributed-sampler-without-set-epoch")
    before = bad.read_text().splitlines()
    report = run_cli("check", "--no-cache", "--isolated", "--select", "DSL505", "--output-format", "json", ".", cwd=bad.parent)
    (finding,) = json.loads(report.stdout)
    assert finding["fix"]["applicability"] == "unsafe"
    run = run_cli("check", "--no-cache", "--isolated", "--select", "DSL505", "--fix", "--unsafe-fixes", ".", cwd=bad.parent)
    assert run.returncode == 0, run.stdout + run.stderr
    after = bad.read_text().splitlines()
    cst.parse_module(bad.read_text())
    assert len(after) == len(before) + 1
    inserted = [line for line in after if line not in before]
    assert [line.strip() for line in inserted] == ["loader.sampler.set_epoch(epoch)"]
    loop_line = after.index("    for epoch in range(epochs):")
    assert after[loop_line + 1] == "        loader.sampler.set_epoch(epoch)"
    again = run_cli("check", "--no-cache", "--isolated", "--select", "DSL505", "--fix", "--unsafe-fixes", ".", cwd=bad.parent)
    assert again.returncode == 0 and bad.read_text().splitlines() == after


def _fixed(tmp_path, source: str) -> str:
    path = tmp_path / "proj" / "train.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    run_cli("check", "--no-cache", "--isolated", "--select", "DSL505", "--fix", "--unsafe-fixes", "--exit-zero", ".", cwd=path.parent)
    return path.read_text()


def test_dsl505_fix_uses_the_sampler_name_and_the_block_indentation(tmp_path):
    fixed = _fixed(
        tmp_path,
        """
        from torch.utils.data import DataLoader, DistributedSampler

        class Trainer:
          def fit(self, ds, epochs):
            sampler = DistributedSampler(ds)
            loader = DataLoader(ds, sampler=sampler)
            for ep in range(epochs):
              # train
              for batch in loader:
                self.step(batch)
        """,
    )
    assert "    for ep in range(epochs):\n      # train\n      sampler.set_epoch(ep)\n      for batch in loader:\n" in fixed
    cst.parse_module(fixed)
    outcome_dir = tmp_path / "proj"
    assert not [d for d in check_tree(outcome_dir, select=["DSL505"]).diagnostics]


def test_dsl505_no_fix_when_ambiguous(tmp_path):
    source = """
        from torch.utils.data import DataLoader, DistributedSampler

        def main(ds, distributed, steps):
            sampler = DistributedSampler(ds) if distributed else None
            loader = DataLoader(ds, sampler=sampler)
            for epoch in range(3):
                for batch in loader:
                    pass
            while steps:
                for batch in loader:
                    steps -= 1
        """
    outcome = check_tree(write_files(tmp_path, {"train.py": source})[0].parent, select=["DSL505"])
    (finding,) = outcome.diagnostics
    assert finding.fix is None  # `sampler` may be None: `sampler.set_epoch` would raise


def test_a_loader_made_in_the_loop_has_no_epoch_loop(tmp_path):
    from dslint.semantics.loops import loader_loops

    ctx = _context(
        tmp_path,
        """
        from torch.utils.data import DataLoader

        def main(files, ds):
            for path in files:
                loader = DataLoader(load(path))   # line 5: a new loader per file
                for batch in loader:
                    pass
            steady = DataLoader(ds)               # line 8
            for epoch in range(3):
                for batch in steady:
                    pass
        """,
    )
    index = loader_loops(ctx)
    epochs = {_row(ctx, l.loader.call): index.epoch(l) for l in index.loops}
    assert epochs[5] is None and _row(ctx, epochs[8]) == 9


def test_fixtures_of_the_loop_rules_are_flagged_at_their_markers():
    run = run_cli(
        "check", "--no-cache", "--isolated", "--preview", "--select", "DSL505,DSL506,DSL507,DSL508,DSL510,DSL511",
        "--output-format", "json", ".", cwd=FIXTURES,
    )
    findings = json.loads(run.stdout)
    got = {(f["filename"].split("/fixtures/", 1)[1].split("/", 1)[0], f["code"]) for f in findings}
    for code in ("DSL505", "DSL506", "DSL507", "DSL508", "DSL510", "DSL511"):
        assert any(c == code and folder.startswith(code) for folder, c in got), code
    assert not [f for f in findings if f["filename"].endswith("good.py")]


# --------------------------------------------------------------------------- precision on public code


def _rule_rows(tmp_path, files, code):
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=[code])
    assert not outcome.result.internal_errors
    return sorted((d.path, d.row) for d in outcome.diagnostics if d.code == code)


def test_dsl507_leaves_validation_hooks_alone_even_when_shuffled(tmp_path):
    rows = _rule_rows(
        tmp_path,
        """
        import torchvision
        from torch.utils.data import DataLoader

        class Data:
            def train_dataloader(self):
                ds = torchvision.datasets.CIFAR10("data", transform=augment, train=True)
                return DataLoader(ds, batch_size=2, shuffle=True, num_workers=0)

            def val_dataloader(self):
                ds = torchvision.datasets.CIFAR10("data", transform=augment, train=False)
                return DataLoader(ds, batch_size=2, shuffle=True, num_workers=0)

            def _make(self, train):
                return DataLoader(torchvision.datasets.MNIST("data", transform=augment, train=train), shuffle=True)

            def test_dataloader(self):
                return self._make(False)
        """,
        "DSL507",
    )
    assert rows == [("example.py", 7)]


def test_dsl507_in_memory_dataset_of_another_file_needs_the_index_fact(tmp_path):
    from dslint.semantics.loops import LoopIndex

    ctx = _context(
        tmp_path,
        """
        from torch.utils.data import DataLoader
        from corpus import Tokens

        loader = DataLoader(Tokens("t.pt"), shuffle=True)
        """,
    )
    answers = {}

    class IndexView:  # the project index's answer for `corpus.Tokens.__getitem__`
        def __init__(self, view):
            self._view = view

        def __getattr__(self, name):
            return getattr(self._view, name)

        def indexes_only(self, qualified, name):
            return answers.get((qualified, name), False)

    ctx.view = IndexView(ctx.view)
    index = LoopIndex(ctx)
    assert not index._in_memory_elsewhere("corpus.Tokens")  # not known to the index
    answers[("corpus.Tokens", "__getitem__")] = True  # only indexes data in memory
    assert index._in_memory_elsewhere("corpus.Tokens")
    [loader] = index.loaders
    assert index.in_memory(loader.bound.expr("dataset"))


def test_indexes_only_follows_self_super_and_project_helpers(tmp_path):
    """``indexing.indexes_only`` over the summaries: cheap calls, and the project's own methods and
    helpers that make only cheap calls, keep a ``__getitem__`` in memory; anything else is work."""
    from dslint.check_file import parse_file
    from dslint.semantics.indexing import indexes_only
    from dslint.semantics.project import ProjectIndex

    source = textwrap.dedent("""
        import numpy as np
        import torch
        from torch.utils.data import Dataset
        from helpers import pad, read

        class Rows(Dataset):
            def __getitem__(self, i):
                return torch.tensor(self.rows[i]), np.random.randint(len(self.rows))

        class Padded(Rows):
            def __getitem__(self, i):
                row, _ = super().__getitem__(i)
                return self._cut(pad(row))

            def _cut(self, row):
                return row.reshape(-1)[: self.n]

        class Read(Padded):
            def _cut(self, row):
                return read(row)

        class Looped(Dataset):
            def __getitem__(self, i):
                return self.again(i)

            def again(self, i):
                return self.__getitem__(i - 1) if i else self.rows[0]
        """)
    helpers = "import numpy as np\n\ndef pad(row):\n    return np.concatenate([row, np.zeros(4)])\n\n" \
              "def read(path):\n    return np.load(path)\n"
    summaries = {}
    for path, text, module in (("data.py", source, "data"), ("helpers.py", helpers, "helpers")):
        summaries[path] = parse_file(path, text, module, False)[0]
    index = ProjectIndex(summaries)

    def in_memory(cls):
        key = ("data.py", cls)
        return indexes_only(index, key, index.find_method(index.mro(key), "__getitem__"))

    assert in_memory("Rows") and in_memory("Padded") and in_memory("Looped")
    assert not in_memory("Read")  # its `_cut`, reached by `self._cut` from the inherited method, loads


def test_dsl508_follows_the_batch_not_tensors_made_from_it(tmp_path):
    rows = _rule_rows(
        tmp_path,
        """
        import torch
        from torch.utils.data import DataLoader

        def extract(ds, model, preprocess):
            loader = DataLoader(ds, batch_size=1, num_workers=4)
            for data in loader:
                video = data["video"].squeeze()
                video = preprocess(video)  # a new tensor, made in the main process
                for i in range(0, len(video), 8):
                    model(video[i:i + 8].cuda())

        def stack(ds, model):
            loader = DataLoader(ds, batch_size=None, num_workers=4)
            for frames in loader:
                model(torch.stack(frames).cuda())

        def train(ds, model):
            loader = DataLoader(ds, batch_size=8, num_workers=4)
            for i, (x, y) in enumerate(loader):
                x, y = x.to("cuda:0"), y.to("cuda:0")
                model(x, y).backward()

        def train_dict(ds, model):
            loader = DataLoader(ds, batch_size=8, num_workers=4)
            for batch in loader:
                inputs = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
                model(**inputs).backward()
        """,
        "DSL508",
    )
    assert rows == [("example.py", 18), ("example.py", 24)]


# --------------------------------------------------------------------------- DSL505 across files


_SCRIPT_505 = """
import torch.utils.data as tud
from engine import train_one_epoch

def main(ds, args):
    sampler = tud.DistributedSampler(ds) if args.distributed else None
    loader = tud.DataLoader(ds, batch_size=8, sampler=sampler, shuffle=sampler is None)
    for epoch in range(args.epochs):
        train_one_epoch(model, loader)
"""


def test_dsl505_a_helper_of_another_module_iterates_and_no_file_sets_the_epoch(tmp_path):
    engine = "def train_one_epoch(model, loader):\n    for batch in loader:\n        model(batch).backward()\n"
    rows = _rule_rows(tmp_path / "a", {"train.py": _SCRIPT_505, "engine.py": engine}, "DSL505")
    assert rows == [("train.py", 5)]
    # some file names set_epoch (it may reach the sampler): silent
    setter = "def reset(loader, epoch):\n    loader.sampler.set_epoch(epoch)\n"
    files = {"train.py": _SCRIPT_505, "engine.py": engine, "utils.py": setter}
    assert _rule_rows(tmp_path / "b", files, "DSL505") == []
    # the helper does not iterate the loader: silent
    logger = "def train_one_epoch(model, loader):\n    print(len(loader))\n"
    assert _rule_rows(tmp_path / "c", {"train.py": _SCRIPT_505, "engine.py": logger}, "DSL505") == []


def test_dsl505_a_factory_whose_loader_another_file_iterates_every_epoch(tmp_path):
    data = """
    from torch.utils.data import DataLoader, DistributedSampler

    def build_loader(ds):
        sampler = DistributedSampler(ds)
        return DataLoader(ds, batch_size=8, sampler=sampler)
    """
    train = """
    import torch.utils.data
    from data import build_loader

    loader = build_loader(ds)
    for epoch in range(10):
        for batch in loader:
            step(batch)
    """
    assert _rule_rows(tmp_path / "a", {"data.py": data, "train.py": train}, "DSL505") == [("data.py", 4)]
    once = train.replace("for epoch in range(10):\n        for batch", "if True:\n        for batch")
    assert _rule_rows(tmp_path / "b", {"data.py": data, "train.py": once}, "DSL505") == []
    imports = train.replace("import torch.utils.data", "import torch.utils.data\n    import ignite")
    assert _rule_rows(tmp_path / "c", {"data.py": data, "train.py": imports}, "DSL505") == []


def test_dsl505_a_loader_wrapper_whose_instances_an_epoch_loop_iterates(tmp_path):
    """A class keeps the loader on ``self`` and its ``__iter__`` iterates it (``loader_results.
    wrapper_iterated``); an epoch loop re-iterates an instance: in another file that names no data
    API (the prefilter's loader-wrapper roots), chosen by ``(A if c else B)(...)``, or a subclass's;
    or in the same file. Iterated once, or only under ``no_grad``: silent."""
    data = """
    from torch.utils import data

    class Batches:
        def __init__(self, ds, world):
            self.sampler = data.distributed.DistributedSampler(ds) if world > 1 else None
            self.loader = data.DataLoader(ds, batch_size=8, sampler=self.sampler, num_workers=2)

        def __iter__(self):
            for batch in self.loader:
                yield batch

    class Plain:
        def __iter__(self):
            return iter(())

    class Moved(Batches):
        pass
    """
    train = """
    from data import Batches, Moved, Plain

    def train(model, ds, world, steps, plain):
        batches = (Plain if plain else Batches)(ds, world)
        step = 0
        while step < steps:
            for x in batches:
                model(x).backward()
                step += 1
    """
    assert _rule_rows(tmp_path / "a", {"data.py": data, "train.py": train}, "DSL505") == [("data.py", 5)]
    sub = train.replace("(Plain if plain else Batches)(ds, world)", "Moved(ds, world)")
    assert _rule_rows(tmp_path / "b", {"data.py": data, "train.py": sub}, "DSL505") == [("data.py", 5)]
    local = data + train.replace("from data import Batches, Moved, Plain", "")
    assert _rule_rows(tmp_path / "c", {"data.py": local}, "DSL505") == [("data.py", 5)]
    once = train.replace("while step < steps:", "if step < steps:")
    assert _rule_rows(tmp_path / "d", {"data.py": data, "train.py": once}, "DSL505") == []
    evaluated = """
    import torch
    from data import Batches

    def evaluate(model, ds, world, rounds):
        batches = Batches(ds, world)
        with torch.no_grad():
            for _ in range(rounds):
                for x in batches:
                    model(x)
    """
    assert _rule_rows(tmp_path / "e", {"data.py": data, "train.py": evaluated}, "DSL505") == []


def test_dsl507_a_copy_of_a_sample_held_in_memory_is_no_loading_work(tmp_path):
    """``copy.deepcopy(self.batch)`` per sample copies what ``__init__`` loaded, like ``.clone()``
    (``indexing.cheap``): the loader has nothing for workers to overlap. Unpickling a file per
    sample is loading work."""
    write_files(tmp_path, {"data.py": """
        import copy
        import pickle
        from torch.utils.data import DataLoader, Dataset

        class Repeated(Dataset):
            def __init__(self, path):
                with open(path, "rb") as f:
                    self.batch = pickle.load(f)
            def __getitem__(self, i):
                return copy.deepcopy(self.batch)
            def __len__(self):
                return 1000

        class Read(Dataset):
            def __init__(self, paths):
                self.paths = paths
            def __getitem__(self, i):
                with open(self.paths[i], "rb") as f:
                    return pickle.load(f)
            def __len__(self):
                return len(self.paths)

        class Debug:
            def train_dataloader(self):
                return DataLoader(Repeated(self.path), batch_size=4, shuffle=True)

        class Files:
            def train_dataloader(self):
                return DataLoader(Read(self.paths), batch_size=4, shuffle=True)  # expect: DSL507
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL507"]).diagnostics}
    assert found == expected_markers(tmp_path)
