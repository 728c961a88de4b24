"""The distributed family (DSL701-705): ``dslint.semantics.distributed`` asked directly,
DSL303/DSL703 giving one finding per stream, the figures of
``dslint.runtime.distributed_checks`` on made-up rank records, and one real 2-rank gloo
run of a fixture pair (marked slow).

The embedded rule cases run in ``test_rule_cases.py``; the fixtures in ``test_fixtures.py``.
"""

from __future__ import annotations

import libcst as cst
import pytest

from tests.conftest import FIXTURES, check_tree, expected_markers, write_files
from tests.test_rule_cases import run_case


def _context(tmp_path, source: str, name: str = "train.py"):
    """The FileContext of one file, built the way the engine builds it."""
    from dslint.check_file import file_contexts

    (path,) = write_files(tmp_path, {name: source})
    return file_contexts({str(path): path.read_text()})[str(path)]


@pytest.mark.parametrize(
    "source,what,kind",
    [
        ("import torch.distributed as dist\ndef main():\n    dist.init_process_group('nccl')\n", "`init_process_group`", "process_group"),
        ("import os\nrank = int(os.environ['LOCAL_RANK'])\n", "a read of `LOCAL_RANK` from the launcher's environment", "process_group"),
        ("import os\nddp = os.environ.get('RANK', -1) != -1\n", "a read of `RANK` from the launcher's environment", "process_group"),
        ("from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(net)\n", "`DistributedDataParallel`", "process_group"),
        ("from accelerate import Accelerator\naccelerator = Accelerator()\n", "`Accelerator()`", "framework"),
        ("import torch.distributed as dist\nrank = dist.get_rank() if dist.is_initialized() else 0\n", None, None),
        ("import os\npath = os.environ['DATA_ROOT']\n", None, None),
    ],
)
def test_ddp_marker(tmp_path, source, what, kind):
    from dslint.semantics.distributed import ddp_marker

    marker = ddp_marker(_context(tmp_path, source))
    assert (marker.what if marker else None) == what
    assert (marker.kind if marker else None) == kind


def test_ddp_marker_through_a_project_function_of_another_file(tmp_path):
    files = {
        "dist_utils.py": """
        import torch.distributed as dist
        from torch.utils.data import DataLoader  # (a file the engine analyses)

        def setup(args):
            dist.init_process_group("nccl")
        """,
        "train.py": """
        from torch.utils.data import DataLoader
        from dist_utils import setup

        def make(ds):
            return DataLoader(ds, batch_size=8, shuffle=True)  # expect: DSL702

        def main(args, ds):
            setup(args)
            loader = make(ds)
        """,
    }
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=["DSL702"])
    assert [(d.path.split("/")[-1], d.row) for d in outcome.diagnostics] == [("train.py", 5)]
    assert "`setup` (it calls `init_process_group`)" in outcome.diagnostics[0].message


def test_ddp_marker_from_a_project_subclass_and_a_stateful_loader(tmp_path):
    """A project subclass of torch's DistributedSampler, re-exported by its package, marks a per-rank
    file as torch's own class does; torchdata's StatefulDataLoader is a DataLoader."""
    files = {
        "replicas/__init__.py": "from replicas.sampling import GroupSampler\n",
        "replicas/sampling.py": """
        from torch.utils import data

        class GroupSampler(data.distributed.DistributedSampler):
            def __init__(self, dataset, group, groups, **kwargs):
                super().__init__(dataset, **kwargs)
        """,
        "train.py": """
        from torchdata.stateful_dataloader import StatefulDataLoader
        from replicas import GroupSampler

        def main(trainset, step):
            sampler = GroupSampler(trainset, 0, 2, rank=0, num_replicas=1)
            loader = StatefulDataLoader(trainset, batch_size=64, shuffle=True)  # expect: DSL702
            for batch in loader:
                step(batch).backward()
        """,
    }
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=["DSL702"])
    assert [(d.path.split("/")[-1], d.row) for d in outcome.diagnostics] == [("train.py", 6)]
    assert "`replicas.GroupSampler`, a subclass of a `DistributedSampler`" in outcome.diagnostics[0].message


def test_rank_names_guards_and_seeds(tmp_path):
    from dslint.semantics.distributed import global_seeds, mentions_rank, rank_guarded
    from dslint.semantics.loops import loader_loops

    ctx = _context(tmp_path, """
    import os
    import torch
    import torch.distributed as dist

    def main(args):
        rank = int(os.environ["RANK"])
        torch.manual_seed(args.seed + rank)
        torch.manual_seed(args.seed)
        if dist.get_rank() == 0:
            save()
        if args.world_size > 1:
            log()
    """)
    calls = {ctx.code(c.func): c for c in ctx.nodes(cst.Call)}
    assert rank_guarded(ctx, calls["save"]) and not rank_guarded(ctx, calls["log"])
    world = next(i for i in ctx.nodes(cst.If) if "world_size" in ctx.code(i.test)).test
    assert not mentions_rank(ctx, world) and mentions_rank(ctx, world, shards=True)
    seeds = global_seeds(ctx, loader_loops(ctx))
    assert [per_rank for _, per_rank in seeds] == [True, False]


@pytest.mark.parametrize(
    "body,expected",
    [
        ("ds = load_dataset('c4', streaming=True)", "stream"),
        ("ds = load_dataset('c4', streaming=flag)", None),  # a parameter nothing passes: unknown
        ("ds = load_dataset('c4', streaming=(True if flag else False)).map(f).shuffle()", "stream"),
        ("ds = load_dataset('c4')", None),
        ("ds = load_dataset('c4').to_iterable_dataset()", "stream"),
        ("ds = split_dataset_by_node(load_dataset('c4', streaming=True), rank=r, world_size=w)", "split"),
    ],
)
def test_hugging_face_streams(tmp_path, body, expected):
    from dslint.rules.distributed._common import hf_stream
    from dslint.semantics.loops import loader_loops

    ctx = _context(tmp_path, f"""
    from datasets import load_dataset
    from datasets.distributed import split_dataset_by_node
    from torch.utils.data import DataLoader

    def main(flag, r, w):
        {body}
        return DataLoader(ds)
    """)
    index = loader_loops(ctx)
    found = hf_stream(ctx, index, index.loaders[0].bound.expr("dataset"))
    assert (found[0] if found else None) == expected


STREAM = """
import torch.distributed as dist
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

class Lines(IterableDataset):
    def __init__(self, lines):
        self.lines = lines

    def __iter__(self):
{body}

def main(lines):
    dist.init_process_group("gloo")
    return DataLoader(Lines(lines), num_workers=4)
"""


@pytest.mark.parametrize(
    "body,codes",
    [
        ("        yield from self.lines", ["DSL303"]),  # splits by nothing: the worker rule's
        ("        info = get_worker_info()\n        yield from self.lines[info.id :: info.num_workers]", ["DSL703"]),
        ("        info = get_worker_info()\n        r, n = dist.get_rank(), dist.get_world_size()\n"
         "        yield from self.lines[r * info.num_workers + info.id :: n * info.num_workers]", []),
    ],
)
def test_one_finding_per_unsplit_stream(tmp_path, body, codes):
    write_files(tmp_path, {"train.py": STREAM.replace("{body}", body)})
    outcome = check_tree(tmp_path, select=["DSL303", "DSL703"])
    assert sorted(d.code for d in outcome.diagnostics) == codes


def test_evaluation_keyed_by_sample_index_is_not_padding_trouble(tmp_path):
    from dslint.rules.distributed._common import torch_distributed_samplers
    from dslint.semantics.distributed import eval_feeds
    from dslint.semantics.loops import loader_loops

    source = """
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler

    @torch.no_grad()
    def extract(model, ds, out):
        loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
        for {target} in loader:
            feats = model(x)
            dist.all_reduce(feats)
    """
    for target, gathered in (("x, idx", False), ("x, y", True)):
        ctx = _context(tmp_path, source.replace("{target}", target), name=f"e_{gathered}.py")
        index = loader_loops(ctx)
        loader = index.loaders[0]
        feed = eval_feeds(ctx, index, loader, torch_distributed_samplers(ctx, index, loader))
        assert (feed is not None) == gathered, target


def test_results_written_by_sample_index_are_not_counted_twice(tmp_path):
    """Gathered features written into a bank at each sample's index (``bank[idx] = feats``): a padded
    duplicate rewrites its own slot with the same value, so DSL704 stays silent; adding them
    (``bank[idx] += feats``) or appending them counts the duplicate twice, and it fires."""
    source = """
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler

    def gather(t):
        out = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(out, t)
        return torch.cat(out)

    @torch.no_grad()
    def extract(model, ds, bank, seen):
        loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
        for batch in loader:
            idx, x = batch
            feats = gather(model(x))
            idx = gather(idx)
            {store}
    """
    for store, fires in (("bank[idx] = feats", False), ("bank[idx] += feats", True), ("seen.append(feats)", True)):
        write_files(tmp_path, {"extract.py": source.replace("{store}", store)})
        outcome = check_tree(tmp_path, select=["DSL704"])
        assert [d.code for d in outcome.diagnostics] == (["DSL704"] if fires else []), store


def test_loaders_handed_in_a_list_and_trained_on_every_rank_but_one_branch(tmp_path):
    """The loaders reach the training loop packed in a list (``train(..., [train_loader, val_loader])``,
    unpacked there as ``train_loader, val_loader = loaders``), called under ``if rank == 0:`` and, in
    its ``else``, on every other rank: the loop runs on every rank (``rank_guarded`` leaves out the
    other ranks' branch), so DSL702 fires. Called under ``if rank == 0:`` alone, it does not."""
    source = """
    import numpy as np
    import torch.distributed as dist
    from torch.utils.data import DataLoader, Dataset

    class Clips(Dataset):
        def __init__(self, paths):
            self.paths = paths
        def __getitem__(self, i):
            return np.load(self.paths[i])
        def __len__(self):
            return len(self.paths)

    def run(rank, world, paths, model, optimizer):
        dist.init_process_group("gloo", rank=rank, world_size=world)
        train_loader = DataLoader(Clips(paths), batch_size=8, num_workers=2)
        val_loader = DataLoader(Clips(paths[:10]), batch_size=1)
        for epoch in range(10):
            if rank == 0:
                train(model, optimizer, [train_loader, val_loader])
            {other}

    def train(model, optimizer, loaders):
        train_loader, val_loader = loaders
        for step, batch in enumerate(train_loader):
            model(batch).mean().backward()
            optimizer.step()
    """
    for other, fires in (("else:\n                train(model, optimizer, [train_loader, None])", True), ("pass", False)):
        write_files(tmp_path, {"run.py": source.replace("{other}", other)})
        outcome = check_tree(tmp_path, select=["DSL702"])
        assert [d.row for d in outcome.diagnostics] == ([15] if fires else []), other


def test_figures_from_rank_records():
    from dslint.runtime.distributed_checks import overlap_figure, padding_figure, split_figure

    leaked = split_figure([{"train": ["a", "b"], "val": ["c"]}, {"train": ["a", "c"], "val": ["b"]}])
    assert leaked.symptom and leaked.data["leaked"] == 2
    same = split_figure([{"train": ["a", "b"], "val": ["c"]}, {"train": ["a", "b"], "val": ["c"]}])
    assert not same.symptom and same.data["same_split"]
    both = overlap_figure([{"seen": ["a", "b"]}, {"seen": ["a", "b"]}], "were seen")
    assert both.symptom and both.data["shared"] == 2
    halves = overlap_figure([{"seen": ["a"]}, {"seen": ["b"]}], "were seen")
    assert not halves.symptom
    padded = padding_figure([{"seen": ["a", "b"], "result": 4.0, "loop": "evaluate"}, {"seen": ["c", "a"]}])
    assert padded.symptom and padded.data["twice"] == 1 and "gathered count is 4" in padded.text


@pytest.mark.slow
def test_two_gloo_ranks_measure_the_padding_of_the_fixture(tmp_path):
    pytest.importorskip("torch")
    from dslint.runtime.distributed_checks import padding_figure, run_ranks

    folder = FIXTURES / "DSL704-distributed-sampler-on-gathered-eval"
    measured = run_ranks({"dir": str(folder), "builder": "build", "sides": ["bad", "good"], "probe": "dist_padding",
                          "root": str(tmp_path)}, timeout=120)
    bad, good = padding_figure(measured["bad"]), padding_figure(measured["good"])
    assert bad.data["gathered"] == 64 and bad.data["twice"] == 1, bad.text
    assert good.data["gathered"] == 63 and good.data["twice"] == 0, good.text


def test_dsl702_a_loader_in_the_arm_without_ddp_is_the_single_process_run(tmp_path):
    """``if args.distributed:`` builds the loaders over ``DistributedSampler``s and the ``else``
    arm plain shuffled ones: that arm runs without a process group
    (``ddp_markers.single_process_arm``), no DSL702. A shuffled loader after the ``if`` is
    built on every rank: reported."""
    write_files(tmp_path, {"train.py": """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        from torchvision.datasets import MNIST

        def main(args):
            dist.init_process_group("nccl")
            train_set = MNIST("data")
            if args.distributed:
                loader = DataLoader(train_set, batch_size=8, sampler=DistributedSampler(train_set))
            else:
                loader = DataLoader(train_set, batch_size=8, shuffle=True)
            extra = DataLoader(train_set, batch_size=8, shuffle=True)
            return loader, extra
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL702"]).diagnostics]
    assert found == [("DSL702", 12)]


def test_dsl702_an_attribute_spelled_like_a_rank_variable_is_not_one(tmp_path):
    """The dataset is built from ``args.model`` and ``transform=...`` while the script also binds
    ``model = DistributedDataParallel(model, device_ids=[args.local_rank])``: the attribute and the
    keyword read no variable (``distributed._not_a_variable``), so the dataset is not cut per rank
    and the plain shuffled loader is reported (DSL702)."""
    write_files(tmp_path, {"main.py": """
        import torch
        from torch.utils.data import DataLoader
        from data import get_dataset

        def main(args, model, transform):
            train_set = get_dataset(args.model, transform=transform)
            loader = DataLoader(train_set, batch_size=8, shuffle=True)
            torch.distributed.init_process_group("nccl")
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.local_rank])
            for epoch in range(3):
                for x in loader:
                    model(x).sum().backward()
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL702"]).diagnostics]
    assert found == [("DSL702", 7)]


def test_dsl702_weighted_and_subset_samplers_draw_over_everything_on_every_rank(tmp_path):
    """torch's ``WeightedRandomSampler`` and ``SubsetRandomSampler`` do not cut the data per rank:
    over weights or indices that name no rank, every rank draws from all of them (the sampler's
    kinds count them as random: DSL702). Indices sliced by the rank are cut already: silent."""
    write_files(tmp_path, {"train.py": """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, SubsetRandomSampler, WeightedRandomSampler
        from torchvision.datasets import MNIST

        def main(weights, indices):
            dist.init_process_group("nccl")
            rank, world = dist.get_rank(), dist.get_world_size()
            train_set = MNIST("data")
            weighted = DataLoader(train_set, batch_size=8, sampler=WeightedRandomSampler(weights, len(weights)))
            subset = DataLoader(train_set, batch_size=8, sampler=SubsetRandomSampler(indices))
            mine = DataLoader(train_set, batch_size=8, sampler=SubsetRandomSampler(indices[rank::world]))
            return weighted, subset, mine
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL702"]).diagnostics]
    assert found == [("DSL702", 9), ("DSL702", 10)]


def test_dsl701_an_unguarded_split_in_a_lightning_setup_draws_again_for_each_stage(tmp_path):
    """Lightning calls ``setup`` once per stage: an unseeded ``random_split`` that keeps a test
    part on ``self`` there with no guard draws a new split when ``trainer.test`` follows
    ``trainer.fit`` (``stage_resplits``), also through names the hook keeps. Under ``if stage ==
    "fit":``, after an early ``return`` once split, or with no test part (fit and validation use
    the one draw): silent."""
    write_files(tmp_path, {"dm.py": """
        import pytorch_lightning as pl
        from torch.utils.data import random_split
        from torchvision.datasets import MNIST

        class Data(pl.LightningDataModule):
            def setup(self, stage=None):
                self.train, self.val, self.test = random_split(MNIST("data"), [50000, 5000, 5000])

        class Guarded(pl.LightningDataModule):
            def setup(self, stage=None):
                if stage == "fit":
                    self.train, self.test = random_split(MNIST("data"), [55000, 5000])

        class Once(pl.LightningDataModule):
            def setup(self, stage=None):
                if self.train is not None:
                    return
                self.train, self.test_set = random_split(MNIST("data"), [55000, 5000])

        class Named(pl.LightningDataModule):
            def setup(self, stage=None):
                train, test = random_split(MNIST("data"), [55000, 5000])
                self.data_test = test

        class Validated(pl.LightningDataModule):
            def setup(self, stage=None):
                self.train, self.val = random_split(MNIST("data"), [55000, 5000])
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL701"]).diagnostics]
    assert found == [("DSL701", 7), ("DSL701", 22)]


def test_dsl702_a_mocked_factory_leaves_the_loaders_fate_unknown(tmp_path):
    write_files(tmp_path, {"train.py": '''
        from accelerate import Accelerator
        from torch.utils.data import DataLoader

        def get_loaders(ds):
            return DataLoader(ds, shuffle=True)

        if TESTING:
            get_loaders = mocked_loaders  # the call below is ambiguous: the loader's fate is unknown
        def main(ds, model):
            accelerator = Accelerator()
            loader = get_loaders(ds)
            model, loader = accelerator.prepare(model, loader)
        '''})
    assert check_tree(tmp_path, select=["DSL702"]).diagnostics == []


def test_dsl702_a_distributed_sampler_built_for_the_dataset_and_dropped(tmp_path):
    write_files(tmp_path, {
        "rebound.py": '''
        from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler

        def loaders(train_set, eval_set, args):
            if args.local_rank == -1:
                eval_sampler = SequentialSampler(eval_set)
            else:
                eval_sampler = DistributedSampler(eval_set)
            eval_sampler = SequentialSampler(eval_set)  # rebound on every path
            return DataLoader(eval_set, sampler=eval_sampler, batch_size=8)  # expect: DSL702
        ''',
        "picked.py": '''
        from torch.utils.data import DataLoader, DistributedSampler

        def build(dataset, train, distributed):
            sampler = DistributedSampler(dataset, shuffle=train) if distributed else None
            return DataLoader(  # expect: DSL702
                dataset,
                shuffle=(sampler is None) and train,
                sampler=sampler if train else None,  # evaluation drops it on every rank
            )
        ''',
        "kept.py": '''
        from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler

        def build(dataset, train, distributed):
            sampler = DistributedSampler(dataset, shuffle=train) if distributed else None
            first = DataLoader(dataset, sampler=sampler if distributed else None)  # the test it was built under
            rebuilt = DistributedSampler(dataset)
            second = DataLoader(dataset, sampler=rebuilt)
            rebuilt = SequentialSampler(dataset)
            third = DataLoader(dataset, sampler=rebuilt)  # the first value went to `second`
            return first, second, third

        def evaluate(dataset, train, distributed, cfg):
            if distributed:
                sampler = DistributedSampler(dataset, shuffle=train)
                if not cfg.dist_eval_sampler:  # retrieval needs the whole set on every rank: a setting of its own
                    sampler = sampler if train else None
            else:
                sampler = None
            return DataLoader(dataset, sampler=sampler)
        ''',
    })
    found = check_tree(tmp_path, select=["DSL702"]).diagnostics
    assert {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in found} == expected_markers(tmp_path)
    assert sorted(f.message.split(": ", 1)[1][:50] for f in found) == [
        "`SequentialSampler(eval_set)` replaces it before t",
        "the loader drops it when `train` is false, so ever",
    ]


def test_dsl702_a_dataset_that_keeps_its_own_share_per_rank(tmp_path):
    """A dataset class (of another file) whose ``__init__`` reads the world size keeps its own
    share of the data on each rank (``distributed.construction_reads_world``): a plain sampler
    over it is right, also when the dataset reaches the loader through a factory and a
    parameter. A dataset that only logs the rank is not cut."""
    write_files(tmp_path, {
        "data.py": """
        import torch
        from torch.utils.data import Dataset

        class Shard(Dataset):
            def __init__(self, rows, rank):
                world = torch.distributed.get_world_size()
                self.rows = [r for i, r in enumerate(rows) if i % world == rank]
            def __len__(self):
                return len(self.rows)
            def __getitem__(self, i):
                return self.rows[i]

        class Logged(Dataset):
            def __init__(self, rows):
                if torch.distributed.get_rank() == 0:
                    print(len(rows))
                self.rows = rows
            def __len__(self):
                return len(self.rows)
            def __getitem__(self, i):
                return self.rows[i]
        """,
        "train.py": """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, RandomSampler
        from data import Logged, Shard

        def build(rows, args):
            return Shard(rows, args.local_rank)

        def train(model, dataset, opt):
            loader = DataLoader(dataset, sampler=RandomSampler(dataset), batch_size=8)
            for x in loader:
                model(x).sum().backward()
                opt.step()

        def other(model, rows, opt):
            loader = DataLoader(Logged(rows), sampler=RandomSampler(rows), batch_size=8)  # expect: DSL702
            for x in loader:
                model(x).sum().backward()

        def main(model, rows, args, opt):
            dist.init_process_group("nccl")
            train(model, build(rows, args), opt)
            other(model, rows, opt)
        """,
    })
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL702"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_gathered_results_picked_out_by_unique_sample_ids_are_not_counted_twice(tmp_path):
    """An evaluation of another module gathers predictions and targets, then keeps the first entry
    of each image id (``np.unique(ids, return_index=True)``, ``eval_keys.unique_ids``): the padded
    repeats are dropped, DSL704 stays silent. Without that step it fires."""
    engine = """
    import numpy as np
    import torch
    import torch.distributed as dist

    def all_gather(items):
        out = [None] * dist.get_world_size()
        dist.all_gather_object(out, items)
        return [x for part in out for x in part]

    @torch.no_grad()
    def evaluate(model, loader):
        preds, gts = [], []
        for x, targets in loader:
            preds.extend(all_gather(model(x).tolist()))
            gts.extend(all_gather(targets))
        {keep}
        return preds, gts
    """
    main = """
    from torch.utils.data import DataLoader, DistributedSampler
    from engine import evaluate

    def run(model, ds):
        loader = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds, shuffle=False))
        return evaluate(model, loader)
    """
    keep = ("img_ids = [t['id'] for t in gts]\n        _, first = np.unique(img_ids, return_index=True)\n"
            "        preds = [p for i, p in enumerate(preds) if i in first]")
    for body, fires in ((keep, False), ("pass", True)):
        write_files(tmp_path, {"engine.py": engine.replace("{keep}", body), "main.py": main})
        outcome = check_tree(tmp_path, select=["DSL704"])
        assert [d.code for d in outcome.diagnostics] == (["DSL704"] if fires else []), body


def test_dsl705_an_object_whose_own_cuda_method_moves_only_its_network(tmp_path):
    """A script moves its model wrapper with ``model.cuda()``: the wrapper is a plain project class
    whose own ``cuda`` moves only its inner network (``cuda._moves_itself``), so a dataset keeping
    the wrapper (to read its vocabularies) holds no CUDA tensor. A module of the project moved the
    same way is one: reported."""
    write_files(tmp_path, {
        "model.py": """
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 4)

        class Summariser:
            def __init__(self, vocab):
                self.vocab, self.network = vocab, Net()

            @staticmethod
            def load(path):
                return Summariser(torch.load(path))

            def cuda(self):
                self.network = self.network.cuda()
        """,
        "train.py": """
        from torch.utils.data import DataLoader, Dataset
        from model import Net, Summariser

        class Pairs(Dataset):
            def __init__(self, examples, model):
                self.examples, self.model = examples, model
            def __len__(self):
                return len(self.examples)
            def __getitem__(self, i):
                return self.examples[i]

        def main(examples, path, fresh):
            model = Summariser.load(path) if not fresh else None
            if fresh:
                model = Summariser({})
            model.cuda()
            net = Net()
            net.cuda()
            a = DataLoader(Pairs(examples, model), num_workers=4)
            b = DataLoader(Pairs(examples, net), num_workers=4)  # expect: DSL705
            return a, b
        """})
    outcome = check_tree(tmp_path, select=["DSL705"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_dsl702_reads_the_kwargs_dicts_the_file_builds(tmp_path):
    """A ``**`` dict the file builds on every path without ``sampler`` or ``batch_sampler``
    (``kw = {"num_workers": 1} if cuda else {}``) leaves the loader without a sampler
    (``_common.sampler_kinds`` through ``values.expand_kwargs``): under DDP the shuffled training
    loader is DSL702's. A dict that may hold a sampler, or one the file does not show, stays silent."""
    write_files(tmp_path, {"train.py": """
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader
        from torchvision import datasets

        def main(args, options):
            dist.init_process_group("gloo")
            cuda = torch.cuda.is_available()
            kw = {"num_workers": 1, "pin_memory": True} if cuda else {}
            train = DataLoader(datasets.MNIST("data", train=True), batch_size=64, shuffle=True, **kw)  # expect: DSL702
            chosen = {"sampler": args.sampler} if args.sampler else {}
            other = DataLoader(datasets.MNIST("data", train=True), batch_size=64, **chosen)
            given = DataLoader(datasets.MNIST("data", train=True), batch_size=64, shuffle=True, **options)
            model = DistributedDataParallel(torch.nn.Linear(784, 10))
            for epoch in range(args.epochs):
                for loader in (train, other, given):
                    for x, y in loader:
                        model(x.flatten(1)).sum().backward()
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL702"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_dsl702_a_training_path_that_never_touches_the_process_group(tmp_path):
    """The file's DDP code (``init_process_group`` in ``__init__``, a ``DistributedSampler`` and a
    wrapped model in ``fit_shared``) is on another path than ``fit_plain``, which trains a plain
    model on plain loaders: launched once per rank, it trains one independent model per process,
    so its shuffled loader is not reported (``ddp_paths.on_rank_path``). A loader whose path
    reads ``self.net`` that ``__init__`` wrapped in DDP, or that a caller hands to a loop next to
    the rank, is."""
    write_files(tmp_path, {
        "trainer.py": """
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader, DistributedSampler

        class Trainer:
            def __init__(self, net, world):
                dist.init_process_group("gloo")
                self.net = DDP(net) if world > 1 else net
                self.plain = net

            def fit_shared(self, ds):
                loader = DataLoader(ds, sampler=DistributedSampler(ds), batch_size=8)
                self._epochs(loader, self.net)

            def fit_plain(self, ds):
                loader = DataLoader(ds, shuffle=True, batch_size=8)
                self._epochs(loader, self.plain)

            def fit_wrapped(self, ds):
                loader = DataLoader(ds, shuffle=True, batch_size=8)  # expect: DSL702
                for x in loader:
                    self.net(x).sum().backward()

            def _epochs(self, loader, net):
                for _ in range(3):
                    for x in loader:
                        net(x).sum().backward()
        """,
        "script.py": """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        def build(ds):
            return DataLoader(ds, shuffle=True, batch_size=8)  # expect: DSL702

        def evaluate(ds, net):
            sharded = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
            return [net(x) for x in sharded]

        def main(ds, net, rank):
            torch_rank = rank
            for x in build(ds):
                net(x).sum().backward()
        """,
    })
    found = check_tree(tmp_path, select=["DSL702"]).diagnostics
    assert {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in found} == expected_markers(tmp_path)


def test_dsl702_an_override_that_drops_the_base_methods_distributed_sampler(tmp_path):
    """A trainer subclass of another file rebuilds ``self.train_loader`` in the hook its base
    defines, and the base's version builds a ``DistributedSampler`` under DDP: the override
    drops the sharding, so every rank trains on every sample (``ddp_paths.overridden_sharding``).
    An override whose base builds no ``DistributedSampler``, or that keeps a sampler it cannot
    see into, is not reported."""
    write_files(tmp_path, {
        "base.py": """
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        class BaseTrainer:
            def setup_data(self, ds):
                sampler = DistributedSampler(ds) if self.distributed else None
                self.train_loader = DataLoader(ds, sampler=sampler, shuffle=sampler is None)

            def setup_eval(self, ds):
                self.eval_loader = DataLoader(ds, batch_size=8)
        """,
        "models.py": """
        from torch.utils.data import DataLoader
        from base import BaseTrainer

        class DetTrainer(BaseTrainer):
            def setup_data(self, ds):
                self.train_loader = DataLoader(ds, batch_size=8, shuffle=True)  # expect: DSL702

            def setup_eval(self, ds):
                self.eval_loader = DataLoader(ds, batch_size=8, shuffle=True)

        class PoseTrainer(BaseTrainer):
            def setup_data(self, ds):
                self.train_loader = DataLoader(ds, batch_size=8, sampler=self.make_sampler(ds))
        """,
    })
    found = check_tree(tmp_path, select=["DSL702"]).diagnostics
    assert {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in found} == expected_markers(tmp_path)
    assert "`BaseTrainer.setup_data`, builds a `DistributedSampler`" in found[0].message


# DSL701 cases across three files (they do not fit in the rule module): a project helper that adds
# the process index to the seed it is given when handed the accelerator seeds per rank only
def _seeded_through_helper(args: str, expect: str) -> dict:
    return {
        "seeding.py": """
        import torch
        def seed_all(seed, accelerator=None):
            if accelerator is not None: seed += accelerator.process_index  # a different seed per process
            torch.manual_seed(seed)
        """,
        "data.py": f"""
        from torch.utils.data import random_split
        def build(full): return random_split(full, [0.9, 0.1]){expect}
        """,
        "train.py": f"""
        from accelerate import Accelerator
        from torch.utils.data import random_split
        from data import build
        from seeding import seed_all
        def main(cfg, full):
            accelerator = Accelerator()
            seed_all({args})
            train, val = build(full)
            parts = random_split(full, [0.5, 0.5]){expect}
        """,
    }


@pytest.mark.parametrize("kind,case", [
    ("valid", _seeded_through_helper("cfg.seed", "")),
    ("invalid", _seeded_through_helper("cfg.seed, accelerator=accelerator", "  # expect: DSL701")),
])
def test_dsl701_seeded_through_a_helper_of_another_file(tmp_path, kind, case):
    run_case(tmp_path, "DSL701", kind, case)


def test_dsl702_a_loader_handed_on_only_under_a_rank_zero_test(tmp_path):
    """A shuffled loader that the file never loops over, only hands to another file's function under
    ``if is_main_process():``, is iterated on one rank (validation on rank 0): no DSL702. One handed
    on outside such a test too runs on every rank: reported."""
    write_files(tmp_path, {
        "evaluate.py": """
            import torch

            def evaluate_loss(model, loader):
                total = 0.0
                for x in loader:
                    total += float(model(x).sum())
                return total
        """,
        "train.py": """
            import torch
            from torch.nn.parallel import DistributedDataParallel
            from torch.utils.data import DataLoader

            from evaluate import evaluate_loss
            from utils import is_main_process

            def train(model, train_set, valid_set, steps):
                model = DistributedDataParallel(model)
                valid_loader = DataLoader(valid_set, batch_size=8, shuffle=True, num_workers=2)
                probe_loader = DataLoader(valid_set, batch_size=8, shuffle=True, num_workers=2)  # expect: DSL702
                for step in range(steps):
                    model(next(iter(train_set))).sum().backward()
                    if is_main_process() and step % 100 == 0:
                        evaluate_loss(model, valid_loader)
                        evaluate_loss(model, probe_loader)
                evaluate_loss(model, probe_loader)
        """,
    })
    found = {(d.path.replace("\\", "/"), d.row, d.code) for d in check_tree(tmp_path, select=["DSL702"]).diagnostics}
    assert found == {m for m in expected_markers(tmp_path) if m[2] == "DSL702"}
