"""The semantics the loader rules (DSL501-511) ask: DataLoader constructions in subclasses,
the binding that reaches a read, tests of a value against 0, values.py additions (a
method's ``self`` is no options namespace, ``switch``, ``forwarded_option``), and two
findings on one loader."""

from __future__ import annotations

import textwrap

import libcst as cst

from dslint.check_file import file_contexts
from dslint.semantics.calls import ForwardedInit, SubclassInit, dataloader_constructions
from dslint.semantics.loops import loader_loops
from dslint.semantics.forwarding import forwarded_option, switch
from dslint.semantics.values import possible
from tests.conftest import check_tree, expected_markers, run_cli, write_files


def _ctx(tmp_path, source: str, name: str = "train.py"):
    path = tmp_path / name
    text = textwrap.dedent(source).lstrip("\n")
    path.write_text(text)
    return file_contexts({str(path): text})[str(path)]


def _name(ctx, value: str, nth: int = -1) -> cst.Name:
    return [n for n in ctx.nodes(cst.Name) if n.value == value][nth]


def test_subclass_inits_are_constructions(tmp_path):
    ctx = _ctx(
        tmp_path,
        """
        import torch.utils.data as tud

        class A(tud.DataLoader):
            def __init__(self, ds, **kw):
                super(A, self).__init__(ds, 4, True, **kw)

        class B(tud.DataLoader):
            def __init__(self, ds):
                tud.DataLoader.__init__(self, ds, 8)

        class C(A):  # A's __init__ is not DataLoader's, but it hands `ds` on to it
            def __init__(self, ds):
                super().__init__(ds)

        loader = tud.DataLoader(ds)
        """,
    )
    found = dataloader_constructions(ctx)
    inits = [b for b in found if isinstance(b, SubclassInit)]
    assert [b.owner.name.value for b in inits] == ["A", "B", "C"]
    assert ctx.code(inits[0].expr("shuffle")) == "True" and inits[0].has_star_kwargs
    assert ctx.code(inits[1].expr("batch_size")) == "8" and ctx.code(inits[1].expr("dataset")) == "ds"
    forwarded = inits[2]  # C's call, with A's arguments where A does not forward its own parameters
    assert isinstance(forwarded, ForwardedInit) and forwarded.call.func.attr.value == "__init__"
    assert forwarded.arg("dataset").value is forwarded.call.args[0].value and ctx.code(forwarded.expr("shuffle")) == "True"
    assert len(found) == 4


def test_the_binding_that_reaches_a_read(tmp_path):
    ctx = _ctx(
        tmp_path,
        """
        def make(flag, other):
            if flag:
                data = First()
                a = data
            else:
                data = Second()
                b = data
            c = data
            x = other
            for i in range(3):
                d = x
                x = Third()
            return a, b, c, d
        """,
    )
    index = loader_loops(ctx)

    def codes(name: str, nth: int):
        return sorted(ctx.code(n) for n in index.value_nodes(_name(ctx, name, nth)) or [])

    assert codes("data", 1) == ["First()"]  # the read in the `if` branch
    assert codes("data", 3) == ["Second()"]  # the read in the `else` branch
    assert codes("data", 4) == ["First()", "Second()"]  # after the `if`: both
    assert index.value_nodes(_name(ctx, "x", 1)) is None  # the loop rebinds it: unknown (the parameter) or Third()


def test_zero_tests_follow_self_attributes_to_init_parameters(tmp_path):
    ctx = _ctx(
        tmp_path,
        """
        class Data:
            def __init__(self, workers=8):
                self.workers = workers
                self.context = "spawn" if workers > 0 else None
                if workers < 0:  # a check for negative counts does not tell 0 apart
                    raise ValueError(workers)

            def loader(self):
                return self.workers
        """,
    )
    index = loader_loops(ctx)
    read = [n for n in ctx.nodes(cst.Attribute) if ctx.code(n) == "self.workers"][-1]
    assert [ctx.code(t) for t in index.zero_tests(read)] == ["workers > 0"]


def test_values_self_is_not_an_options_namespace(tmp_path):
    ctx = _ctx(
        tmp_path,
        """
        import argparse

        p = argparse.ArgumentParser()
        p.add_argument("--workers", type=int, default=0)

        class Data:
            def loader(self):
                return self.workers

        def main(args):
            return args.workers
        """,
    )
    attrs = [n for n in ctx.nodes(cst.Attribute) if n.attr.value == "workers"]
    assert possible(ctx, attrs[0]).values == ()  # self.workers: the instance, not the options
    assert [v.value for v in possible(ctx, attrs[1]).values] == [0]  # args.workers: the options


def test_switch_and_forwarded_option(tmp_path):
    ctx = _ctx(
        tmp_path,
        """
        from torch.utils.data import DataLoader

        def make(ds, drop_last: bool = False, count=3, shuffle=True, **kwargs):
            kwargs["num_workers"] = 0
            kwargs.pop("timeout", None)
            return DataLoader(ds, drop_last=drop_last, batch_size=count, shuffle=shuffle, **kwargs)
        """,
    )
    call = next(n for n in ctx.nodes(cst.Call) if ctx.code(n.func) == "DataLoader")
    args = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    assert sorted(v.value for v in switch(ctx, args["drop_last"]).values) == [False, True]
    assert sorted(v.value for v in switch(ctx, args["shuffle"]).values) == [False, True]
    assert switch(ctx, args["batch_size"]).values == ()  # not a bool parameter
    workers, open_ = forwarded_option(ctx, call, "num_workers")
    assert [v.value for v in workers.values] == [0] and not open_
    assert forwarded_option(ctx, call, "timeout") == (None, False)
    assert forwarded_option(ctx, call, "pin_memory") == (None, True)  # the caller may pass it


def test_sampler_shuffle_and_set_epoch_are_both_reported(tmp_path):
    write_files(
        tmp_path,
        {
            "train.py": """
            from torch.utils.data import DataLoader, DistributedSampler

            def main(ds, distributed):
                sampler = DistributedSampler(ds) if distributed else None
                loader = DataLoader(ds, shuffle=True, sampler=sampler)
                for epoch in range(3):
                    for batch in loader:
                        step(batch)
            """,
        },
    )
    run = run_cli("check", "--no-cache", "--preview", "--select", "DSL501,DSL505", "--output-format", "concise", ".", cwd=tmp_path)
    codes = sorted(line.split()[1] for line in run.stdout.splitlines() if "DSL5" in line)
    assert codes == ["DSL501", "DSL505"]
    assert "whenever `sampler` is not None" in run.stdout and "without a sampler the loader shuffles" in run.stdout


def test_a_process_target_is_called_with_its_args(tmp_path):
    ctx = _ctx(
        tmp_path,
        """
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader

        def run(rank, loader):
            for batch in loader:
                pass

        if __name__ == "__main__":
            loader = DataLoader(ds)
            p = mp.Process(target=run, args=(0, loader))
            p.start()
        """,
    )
    index = loader_loops(ctx)
    [loop] = index.loops
    assert loop.loader is index.loaders[0]


# A training loop over a small project dataset, without workers (DSL507's form)
TRAINING_SOURCE = """
import torch
from torch.utils.data import DataLoader, Dataset

class Images(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return torch.load(self.paths[i])

def fit(model, opt, paths):
    for x in DataLoader(Images(paths), batch_size=8, shuffle=True):
        model(x).sum().backward()
        opt.step()
"""


def test_test_directories_are_test_code_in_any_letter_case(tmp_path):
    """``Tests/`` is a test directory as ``tests/`` is (one answer: ``semantics.test_paths``):
    the same training loader over a small project dataset is reported in ``src/`` only."""
    source = TRAINING_SOURCE
    write_files(tmp_path, {"src/fit.py": source, "Tests/ML/fit.py": source, "Testing/fit.py": source})
    run = run_cli("check", "--no-cache", "--select", "DSL507", "--output-format", "concise", ".", cwd=tmp_path)
    flagged = sorted(line.split(":")[0] for line in run.stdout.splitlines() if "DSL507" in line)
    assert flagged == ["src/fit.py"]


def test_only_directories_inside_the_project_make_test_code(tmp_path):
    """A project checked out under a directory named ``testing`` is not test code: only the
    directories below the project's root (its ``pyproject.toml``) count, however dslint is run."""
    source = TRAINING_SOURCE
    project = tmp_path / "testing" / "proj"
    write_files(project, {"pyproject.toml": "[project]\nname = 'proj'\n", "src/fit.py": source, "tests/fit.py": source})
    for cwd, target in ((tmp_path, "testing/proj"), (project, "."), (tmp_path, str(project))):
        run = run_cli("check", "--no-cache", "--select", "DSL507", "--output-format", "concise", target, cwd=cwd)
        flagged = [line.split(":")[0].replace("\\", "/") for line in run.stdout.splitlines() if "DSL507" in line]
        assert len(flagged) == 1 and flagged[0].endswith("src/fit.py"), (target, run.stdout)


def test_test_paths_answer_for_files_and_modules():
    from dslint.semantics.test_paths import is_test_module, is_test_path

    assert is_test_path("Tests/ML/configs/containers.py") and is_test_path("pkg/test_data.py")
    assert is_test_path("conftest.py") and is_test_path("pkg/data_test.py")
    assert not is_test_path("src/contest/data.py") and not is_test_path("latest/data.py")
    assert is_test_module("Tests.ML.configs") and is_test_module("pkg.tests.data") and is_test_module("conftest")
    assert not is_test_module("pkg.testbed.data")


def test_subclasses_that_forward_every_argument_are_judged_like_dataloader(tmp_path):
    """A DataLoader subclass of the file whose ``__init__(self, *args, **kwargs)`` hands both on
    unchanged takes torch's arguments (``semantics.passthrough_loaders``): its constructions are
    DSL503's like ``DataLoader(...)``; one that names a parameter of its own is not followed."""
    write_files(
        tmp_path,
        {
            "loaders.py": """
            import torch
            from torch.utils.data import DataLoader

            class Endless(torch.utils.data.DataLoader):
                def __init__(self, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    self.it = super().__iter__()

            class Own(DataLoader):
                def __init__(self, ds, *args, **kwargs):
                    super().__init__(ds, *args, **kwargs)

            def make(ds, cfg, workers):
                a = Endless(ds, num_workers=workers, prefetch_factor=cfg.p if workers > 0 else 2)
                b = Endless(ds, 4, True, persistent_workers=True)
                c = Own(ds, batch_size=4, persistent_workers=True)
                d = Endless(ds, num_workers=workers, prefetch_factor=cfg.p if workers > 0 else None)
                return a, b, c, d
            """,
        },
    )
    run = run_cli("check", "--no-cache", "--select", "DSL503", "--output-format", "concise", ".", cwd=tmp_path)
    rows = sorted(int(line.split(":")[1]) for line in run.stdout.splitlines() if "DSL503" in line)
    assert rows == [14, 15]
    assert "`prefetch_factor` is `2` when `workers` is 0 (`workers > 0` is false then)" in run.stdout


def test_a_parameter_other_project_files_fill_is_decided_by_their_calls(tmp_path):
    """A public function's worker-count parameter that no call in its own file fills is the
    user's choice (DSL503 fires). In a module outside any package that a function of another
    project file calls, the project's calls decide it, as its own file's calls would; a
    package's function is an API whose users choose too (``user_values``)."""
    loader = """
        from torch.utils.data import DataLoader

        def {name}(ds, workers):
            return DataLoader(ds, num_workers=workers, persistent_workers=True)

        class {cls}:
            def __init__(self, ds, workers):
                self.loader = DataLoader(ds, num_workers=workers, persistent_workers=True)
        """
    write_files(
        tmp_path,
        {
            "called.py": loader.format(name="evaluate", cls="Evaluator"),
            "library.py": loader.format(name="build", cls="Builder"),
            "pkg/__init__.py": "",
            "pkg/api.py": loader.format(name="make", cls="Maker"),
            "pkg/train.py": """
            from torchvision.datasets import MNIST
            from pkg.api import Maker, make

            def main(root, workers):
                return make(MNIST(root), workers), Maker(MNIST(root), workers)
            """,
            "main.py": """
            import called
            from called import Evaluator
            from torchvision.datasets import MNIST

            def main(root, workers):
                ds = MNIST(root)
                called.evaluate(ds, workers)
                return Evaluator(ds, workers)
            """,
        },
    )
    # a count the user chooses is one of DSL503's preview forms
    run = run_cli("check", "--no-cache", "--preview", "--select", "DSL503", "--output-format", "concise", ".", cwd=tmp_path)
    found = sorted(line.split(":")[0] + ":" + line.split(":")[1] for line in run.stdout.splitlines() if "DSL503" in line)
    assert found == ["library.py:4", "library.py:8", "pkg/api.py:4", "pkg/api.py:8"]
    default = run_cli("check", "--no-cache", "--select", "DSL503", "--output-format", "concise", ".", cwd=tmp_path)
    assert "DSL503" not in default.stdout


def test_a_sampler_chosen_per_run_and_a_rebuilt_iterator_count_for_dsl505(tmp_path):
    """A ``DistributedSampler`` on one branch and a torch sampler on the other (also a class chosen
    into a name), and ``iter(loader)`` rebuilt inside a loop, are DSL505's (``sampler_passes``),
    without a fix: ``set_epoch`` does not exist on the other branch's sampler, and the loop around
    a rebuilt iterator need not count epochs. One ``iter`` before the loop is one pass: silent."""
    write_files(
        tmp_path,
        {
            "train.py": """
            from torch.utils.data import DataLoader, RandomSampler
            from torch.utils.data.distributed import DistributedSampler

            def chosen(args, ds):
                sampler = DistributedSampler(ds) if args.ddp else RandomSampler(ds)
                loader = DataLoader(ds, sampler=sampler)
                for epoch in range(args.epochs):
                    for batch in loader:
                        step(batch)

            def by_class(args, ds):
                make = DistributedSampler if args.ddp else RandomSampler
                loader = DataLoader(ds, sampler=make(ds))
                for epoch in range(args.epochs):
                    for batch in loader:
                        step(batch)

            def rebuilt(args, ds):
                loader = DataLoader(ds, sampler=DistributedSampler(ds))
                batches = iter(loader)
                for step_no in range(args.steps):
                    try:
                        batch = next(batches)
                    except StopIteration:
                        batches = iter(loader)
                        batch = next(batches)

            def one_pass(args, ds):
                loader = DataLoader(ds, sampler=DistributedSampler(ds))
                batches = iter(loader)
                for step_no in range(args.steps):
                    batch = next(batches)
            """,
        },
    )
    run = run_cli("check", "--no-cache", "--select", "DSL505", "--output-format", "concise", ".", cwd=tmp_path)
    rows = sorted(int(line.split(":")[1]) for line in run.stdout.splitlines() if "DSL505" in line)
    assert rows == [5, 13, 19]
    assert "fixable" not in run.stdout + run.stderr


def test_a_generic_dataloader_base_is_dataloader(tmp_path):
    """``class L(DataLoader[T], Mixin)``: the subscripted base is the class itself, so the
    ``super().__init__`` of ``L`` is a DataLoader construction (DSL506 judges its collate)."""
    ctx = _ctx(
        tmp_path,
        """
        from typing import TypeVar
        from torch.utils.data import DataLoader

        T = TypeVar("T")

        class Typed(DataLoader[T], object):
            def __init__(self, ds, cfg, **kwargs):
                super().__init__(ds, collate_fn=lambda b: b[0], num_workers=cfg.workers, **kwargs)

        class Other(list[T]):
            def __init__(self, items):
                super().__init__(items)
        """,
    )
    inits = [b for b in dataloader_constructions(ctx) if isinstance(b, SubclassInit)]
    assert [b.owner.name.value for b in inits] == ["Typed"]
    run = run_cli("check", "--no-cache", "--select", "DSL506", "--output-format", "concise", "train.py", cwd=tmp_path)
    assert [line.split(":")[1] for line in run.stdout.splitlines() if "DSL506" in line] == ["8"]


def test_a_subclass_of_a_forwarding_dataloader_subclass_is_a_construction(tmp_path):
    """``super().__init__`` of a subclass of a DataLoader subclass whose ``__init__`` hands its
    parameters on to DataLoader by name (replacing one only when it is None) reaches DataLoader
    with the outer arguments (``calls.ForwardedInit``): DSL506 judges the outer collate."""
    write_files(
        tmp_path,
        {
            "loaders.py": """
            from torch.utils.data import DataLoader

            def plain(batch):
                return batch

            def wrap(inner):
                def collate(batch):
                    return inner(batch)
                return collate

            class Base(DataLoader):
                def __init__(self, dataset, num_workers=0, collate_fn=None):
                    if collate_fn is None:
                        collate_fn = plain
                    super().__init__(dataset, num_workers=num_workers, collate_fn=collate_fn)

            class Wrapped(Base):
                def __init__(self, dataset, num_workers=0):
                    super().__init__(dataset, num_workers=num_workers, collate_fn=wrap(plain))

            class Plain(Base):
                def __init__(self, dataset, num_workers=0):
                    super().__init__(dataset, num_workers=num_workers, collate_fn=plain)

            class Rebound(DataLoader):  # the parameter is replaced whatever it is: not forwarded
                def __init__(self, dataset, num_workers=0, collate_fn=None):
                    collate_fn = plain
                    super().__init__(dataset, num_workers=num_workers, collate_fn=collate_fn)

            class Unforwarded(Rebound):
                def __init__(self, dataset, num_workers=0):
                    super().__init__(dataset, num_workers=num_workers, collate_fn=wrap(plain))
            """,
        },
    )
    run = run_cli("check", "--no-cache", "--select", "DSL506", "--output-format", "concise", ".", cwd=tmp_path)
    assert [line.split(":")[1] for line in run.stdout.splitlines() if "DSL506" in line] == ["19"]


def test_keywords_a_forwarding_base_passes_on_in_its_kwargs_reach_dataloader(tmp_path):
    """A base that hands ``**kwargs`` on to DataLoader passes the outer call's other keywords:
    ``num_workers=0`` there pins the workers (no DSL506 at its lambda), a caller's ``**kwargs`` leaves
    them open (reported at the lambda that caller passes)."""
    write_files(
        tmp_path,
        {
            "loaders.py": """
            from torch.utils.data import DataLoader

            class Base(DataLoader):
                def __init__(self, items, collate, **kwargs):
                    super().__init__(items, collate_fn=collate, **kwargs)

            class Pinned(Base):
                def __init__(self, items):
                    super().__init__(items, lambda b: b[0], shuffle=False, num_workers=0)

            class Open(Base):
                def __init__(self, items, **kwargs):
                    super().__init__(items, lambda b: b[0], **kwargs)
            """,
        },
    )
    run = run_cli("check", "--no-cache", "--select", "DSL506", "--output-format", "concise", ".", cwd=tmp_path)
    assert [line.split(":")[1] for line in run.stdout.splitlines() if "DSL506" in line] == ["13"]  # at Open's lambda


def test_a_collate_parameter_replaced_when_none_is_judged_on_the_default_path(tmp_path):
    """``if collate_fn is None: collate_fn = make()``: a caller that passes nothing gets what the
    function puts there (``scopes.none_replacements``), so DSL506 judges that; a replacement in
    the ``else`` branch, or one that is picklable, keeps it silent."""
    write_files(
        tmp_path,
        {
            "loaders.py": """
            from torch.utils.data import DataLoader, default_collate

            def make(pad):
                def collate(batch):
                    return [pad] + batch
                return collate

            def build(ds, workers=2, collate_fn=None):
                if collate_fn is None:
                    collate_fn = make(0)
                return DataLoader(ds, num_workers=workers, collate_fn=collate_fn)

            def plain(ds, workers=2, collate_fn=None):
                if collate_fn is None:
                    collate_fn = default_collate
                return DataLoader(ds, num_workers=workers, collate_fn=collate_fn)

            def wrapped(ds, workers=2, collate_fn=None):
                if collate_fn is None:
                    pass
                else:
                    collate_fn = make(collate_fn)
                return DataLoader(ds, num_workers=workers, collate_fn=collate_fn)
            """,
        },
    )
    run = run_cli("check", "--no-cache", "--select", "DSL506", "--output-format", "concise", ".", cwd=tmp_path)
    rows = [line for line in run.stdout.splitlines() if "DSL506" in line]
    assert [row.split(":")[1] for row in rows] == ["11"] and "when the caller passes none" in rows[0]


def test_a_loop_that_breaks_after_one_batch_only_looks_at_the_loader(tmp_path):
    """A shuffled loader whose one loop ends with ``break`` (a sanity check that plots a batch) is
    looked at, not trained on (``batches.runs_once``): neither DSL507 nor DSL702 reports it; the
    same loader trained on in a full loop is reported by both."""
    script = """
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torchvision.datasets import MNIST

        dist.init_process_group("gloo")
        loader = DataLoader(MNIST("data", transform=augment), batch_size=8, shuffle=True)
        for images, labels in loader:
            show(images, labels)
            {last}
        """
    write_files(tmp_path, {"peek.py": script.format(last="break"), "train.py": script.format(last="loss(images).backward()")})
    run = run_cli("check", "--no-cache", "--select", "DSL507,DSL702", "--output-format", "concise", ".", cwd=tmp_path)
    found = sorted(line.split(":")[0] + " " + line.split()[1] for line in run.stdout.splitlines() if ": DSL" in line)
    assert found == ["train.py DSL507", "train.py DSL702"]


def test_a_loop_that_only_prints_its_batches_only_looks_at_the_loader(tmp_path):
    """A dataset module's ``__main__`` smoke test that prints each batch's shape (``batches.only_looks``)
    is not training: DSL507 stays silent; the same loader whose loop also runs a model is reported."""
    script = """
        from torch.utils.data import DataLoader
        from torchvision.datasets import MNIST

        if __name__ == "__main__":
            loader = DataLoader(MNIST("data", transform=augment), batch_size=12, shuffle=True)
            for points, labels in loader:
                print(points.shape, len(labels))
                {work}
        """
    write_files(tmp_path, {"look.py": script.format(work="logger.info(labels.size())"),
                           "train.py": script.format(work="model(points).sum().backward()")})
    run = run_cli("check", "--no-cache", "--select", "DSL507", "--output-format", "concise", ".", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in run.stdout.splitlines() if ": DSL" in line) == ["train.py"]


def test_a_loop_that_only_tallies_its_batches_is_a_data_check(tmp_path):
    """A ``__main__`` data check that counts labels with numpy into a list it built
    (``batches.only_looks``) trains nothing: DSL507 stays silent. A tally through a project
    helper, or into an object the code did not build as a container, may be work: reported."""
    script = """
        import numpy as np
        from torch.utils.data import DataLoader
        from torchvision.datasets import MNIST

        if __name__ == "__main__":
            loader = DataLoader(MNIST("data", transform=augment), batch_size=8, shuffle=True)
            counts = {start}
            for item in loader:
                counts.append({tally}(item[1]))
            print(sum(counts))
        """
    write_files(tmp_path, {
        "check.py": script.format(start="[]", tally="np.count_nonzero"),
        "helper.py": script.format(start="[]", tally="score"),
        "object.py": script.format(start="Recorder()", tally="np.count_nonzero"),
    })
    run = run_cli("check", "--no-cache", "--select", "DSL507", "--output-format", "concise", ".", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in run.stdout.splitlines() if ": DSL" in line) == ["helper.py", "object.py"]


def test_a_split_passed_through_a_parameter_is_an_evaluation_split(tmp_path):
    """``get_loader(args, "val")`` building ``Scenes(split=split)``: every value the code shows for
    ``split`` is an evaluation split (``batches.evaluation_split`` asks ``values.possible``), so the
    shuffled loader is not a training loader (DSL507). One call passing ``"train"`` makes it one."""
    script = """
        from torch.utils.data import DataLoader, Dataset

        class Scenes(Dataset):
            def __init__(self, split):
                self.split = split

            def __getitem__(self, i):
                return load(self.split, i)

        def get_loader(args, split):
            dataset = Scenes(split=split)
            return DataLoader(dataset, batch_size=args.batch_size, shuffle=True)

        def evaluate(args, model):
            for batch in get_loader(args, "val"):
                model(batch)
            {more}
        """
    write_files(tmp_path, {"eval.py": script.format(more="get_loader(args, 'test')"),
                           "train.py": script.format(more="get_loader(args, 'train')")})
    run = run_cli("check", "--no-cache", "--select", "DSL507", "--output-format", "concise", ".", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in run.stdout.splitlines() if ": DSL" in line) == ["train.py"]


def test_a_module_list_filled_in_place_is_not_its_empty_display(tmp_path):
    """``parts = []`` at module level then ``parts.append(...)`` in a loop: the list's value is not
    ``[]`` (``Context.module_constant`` refuses a display the module changes in place), so
    ``ConcatDataset(parts)`` is not reported as empty (DSL509); a list never changed still is."""
    write_files(tmp_path, {"concat.py": """
        from torch.utils.data import ConcatDataset

        SUBJECTS = {"art": "Art", "math": "Math"}
        parts = []
        for key in SUBJECTS:
            parts.append(Subject(key))
        joined = ConcatDataset(parts)
        extra = {}
        extra["b"] = Subject("b")
        nothing = []
        empty = ConcatDataset(nothing)
        """})
    run = run_cli("check", "--no-cache", "--select", "DSL509", "--output-format", "concise", ".", cwd=tmp_path)
    assert [line.split(":")[1] for line in run.stdout.splitlines() if ": DSL" in line] == ["11"]


def test_an_option_set_on_the_path_one_call_takes(tmp_path):
    """``prefetch_factor=4 if not test else None`` in a helper that the training hook calls with
    ``test=False`` is set on that path (``call_paths.arms_taken``), and the user's worker count can be
    0: DSL503 fires. When every call passes ``test=True``, or the test is not on a parameter, it stays silent."""
    module = """
        from torch.utils.data import DataLoader

        class Data:
            def __init__(self, num_workers: int = 8):
                self.num_workers = num_workers

            def train_loader(self):
                return self._loader(self.train_set, test={flag})

            def test_loader(self):
                return self._loader(self.test_set, test=True)

            def _loader(self, ds, test: bool = False):
                return DataLoader(ds, num_workers=self.num_workers, prefetch_factor=4 if not test else None)
        """
    write_files(tmp_path, {"fires.py": module.format(flag="False"), "silent.py": module.format(flag="True"),
                           "opaque.py": module.format(flag="self.flag")})
    # the count is the user's (a parameter defaulting to 8): one of DSL503's preview forms
    run = run_cli("check", "--no-cache", "--preview", "--select", "DSL503", "--output-format", "concise", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in run.stdout.splitlines() if ": DSL" in line] == ["fires.py"]


def test_a_branch_on_the_worker_count_handles_only_what_it_rebinds(tmp_path):
    """``if num_workers > 0: context = "fork"`` handles `multiprocessing_context` for 0 workers but
    not `prefetch_factor` (``count_branches.handles_count``): DSL503 still reports the prefetch
    default; a branch that rebinds it, or returns, handles it."""
    source = """
        from torch.utils.data import DataLoader

        class Loader(DataLoader):
            def __init__(self, dataset, num_workers: int = 0, prefetch_factor: int = 2, context=None):
                if num_workers > 0{extra}:
                    context = "fork"
                super().__init__(dataset, num_workers=num_workers, prefetch_factor=prefetch_factor,
                                 multiprocessing_context=context)
        """
    write_files(tmp_path, {"half.py": source.format(extra=""),
                           "whole.py": source.format(extra=":\n                    prefetch_factor = None\n                if True")})
    run = run_cli("check", "--no-cache", "--select", "DSL503", "--output-format", "concise", ".", cwd=tmp_path)
    rows = [line for line in run.stdout.splitlines() if ": DSL" in line]
    assert [row.split(":")[0] for row in rows] == ["half.py"] and "`prefetch_factor` needs" in rows[0]


def test_a_worker_count_a_caller_hands_through_a_factorys_kwargs(tmp_path):
    """``def get_loader(path, **kwargs): ... DataLoader(ds, collate_fn=_collate, **kwargs)``: the workers
    are its callers' choice. A call in another file that passes ``num_workers=4`` makes the nested
    collate unpicklable in workers (DSL506,
    ``worker_counts.may_have_workers``); callers that pass no count, or 0, leave it silent."""
    factory = """
        from torch.utils.data import DataLoader

        def get_loader(path, **kwargs):
            def _collate(batch):
                return batch
            return DataLoader(open(path).read().split(), collate_fn=_collate, **kwargs)
        """
    for call, fires in (("get_loader('a.txt', batch_size=8, num_workers=4)", True),
                        ("get_loader('a.txt', batch_size=8)", False), ("get_loader('a.txt', num_workers=0)", False)):
        write_files(tmp_path, {"data/__init__.py": "", "data/loaders.py": factory,
                               "main.py": f"from torch.utils.data import DataLoader\nfrom data.loaders import get_loader\n\n"
                                          f"loader = {call}\nprobe = DataLoader(range(4))\n"})
        run = run_cli("check", "--no-cache", "--select", "DSL506", "--output-format", "concise", ".", cwd=tmp_path)
        assert [line.split(":")[0] for line in run.stdout.splitlines() if ": DSL" in line] == (
            ["data/loaders.py"] if fires else []), call


def test_an_error_raised_for_a_bad_configuration_is_no_loading_work(tmp_path):
    """A dataset of random tensors whose ``__getitem__`` raises ``ValueError(...)`` for an unknown
    task only indexes memory: the call in the ``raise`` builds the error of a sample that fails
    (``call_costs._raised``), so DSL507 stays silent; a file read in its place is work."""
    source = """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Random(Dataset):
            def __init__(self, task, n):
                self.task, self.n = task, n

            def __len__(self):
                return self.n

            def __getitem__(self, i):
                x = {load}
                if self.task != "classification":
                    raise ValueError(f"unsupported task {{self.task}}")
                return x, torch.randint(0, 10, (1,)).item()

        loader = DataLoader(Random("classification", 100), batch_size=8, shuffle=True)
        """
    write_files(tmp_path, {"memory.py": source.format(load="torch.randn(3, 8, 8)"),
                           "disk.py": source.format(load="torch.load(f'{i}.pt')")})
    run = run_cli("check", "--no-cache", "--select", "DSL507", "--output-format", "concise", ".", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in run.stdout.splitlines() if ": DSL" in line) == ["disk.py"]


def test_a_pipeline_returned_by_a_factory_of_the_file_is_kept_by_the_dataset(tmp_path):
    """``T = get_transforms()`` where a module-level function of the file returns a transform
    container holding a lambda: the dataset built with ``transform=T`` keeps the lambda, so a
    DataLoader with workers cannot pickle it (DSL506 at the lambda); a factory whose pipeline
    holds only importable callables is fine."""
    write_files(
        tmp_path,
        {
            "pipeline.py": """
            import torchvision.transforms as T
            from torch.utils.data import DataLoader, Dataset

            class Scans(Dataset):
                def __init__(self, paths, transform=None):
                    self.paths, self.transform = paths, transform
                def __getitem__(self, i):
                    return self.transform(self.paths[i])

            def get_transforms(size):
                return T.Compose([T.Resize(size), T.Lambda(lambda x: x / 255)])  # expect: DSL506

            def plain_transforms(size):
                return T.Compose([T.Resize(size), T.ToTensor()])

            def loaders(paths, workers=4):
                lam = Scans(paths, transform=get_transforms(64))
                fine = Scans(paths, transform=plain_transforms(64))
                return DataLoader(lam, num_workers=workers), DataLoader(fine, num_workers=workers)
            """,
        },
    )
    outcome = check_tree(tmp_path, select=["DSL506"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_a_lambda_a_class_keeps_from_its_constructor_makes_its_instances_unpicklable(tmp_path):
    """A dataset whose own ``__init__`` keeps a lambda (directly, or in a pipeline) cannot reach a
    spawned worker (DSL506 at the lambda); nor can one given, as its transform, an object of a
    class of another file whose ``__init__`` keeps one (DSL506 at that argument, whose file the
    engine summarises although it never names a dataset; at that construction). Silent: a lambda that is only a default
    replaced on another path, one only used (``sorted(key=...)``), a class deciding its own pickling,
    a subclass storing its own value there, and a loader without workers."""
    write_files(
        tmp_path,
        {
            "aug.py": """
            import numpy as np

            def compose(*steps):
                return steps

            class TrainAug:
                def __init__(self, std):
                    self.steps = compose(np.asarray, np.flipud)
                    self.scale = lambda img: img / std

                def __call__(self, img):
                    return self.scale(img)
            """,
            "data.py": """
            import torchvision.transforms as T
            from torch.utils.data import DataLoader, Dataset
            from aug import TrainAug

            class Kept(Dataset):
                def __init__(self, rows, transform=None):
                    self.rows, self.transform = rows, transform
                    self.to_tensor = T.Compose([T.ToTensor(), T.Lambda(lambda x: x * 2 - 1)])  # expect: DSL506
                def __getitem__(self, i):
                    return self.to_tensor(self.rows[i])

            class Defaulted(Dataset):
                def __init__(self, rows, transform=None):
                    self.rows = sorted(rows, key=lambda r: r[0])
                    self.transform = lambda x: x
                    if transform is not None:
                        self.transform = transform
                def __getitem__(self, i):
                    return self.transform(self.rows[i])

            class Pickled(Kept):
                def __getstate__(self):
                    return {"rows": self.rows}

            class Replaced(Kept):
                def __init__(self, rows):
                    super().__init__(rows)
                    self.to_tensor = T.ToTensor()

            class Plain(Dataset):
                def __init__(self, rows, transform=None):
                    self.rows, self.transform = rows, transform
                def __getitem__(self, i):
                    return self.transform(self.rows[i])

            def loaders(rows, workers=4):
                aug = TrainAug(0.5)  # expect: DSL506
                return (
                    DataLoader(Kept(rows), num_workers=workers),
                    DataLoader(Plain(rows, transform=aug), num_workers=workers),
                    DataLoader(Defaulted(rows), num_workers=workers),
                    DataLoader(Pickled(rows), num_workers=workers),
                    DataLoader(Replaced(rows), num_workers=workers),
                    DataLoader(Kept(rows), num_workers=0),
                )
            """,
        },
    )
    outcome = check_tree(tmp_path, select=["DSL506"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_one_batch_peeked_each_epoch_beside_training_and_an_image_export_are_not_training(tmp_path):
    """``next(iter(preview))`` once per epoch, in the epoch loop of the training loop over another
    loader (``batches._once_per_epoch``), looks at one batch; a loop that only converts its batches
    and writes them as image files (``cv2.imwrite``) exports them (``batches.only_looks``), also
    when each arm of an ``if`` binds its own loader to the name it iterates (``possible_loops``):
    DSL507 reports none of these shuffled loaders. A peek in a loop of its own that trains on it is reported."""
    script = """
        import os
        import cv2
        from torch.utils.data import DataLoader
        from torchvision.datasets import MNIST

        def main(model, opt, out):
            train = DataLoader(MNIST("data", transform=augment), batch_size=8, shuffle=True, num_workers=4)
            preview = DataLoader(MNIST("data", transform=augment, train=False), batch_size=8, shuffle=True)
            for epoch in range(10):
                for x, y in train:
                    model(x).sum().backward()
                    opt.step()
                x, y = next(iter(preview))
                show(model(x), epoch)
            if out:
                dump = DataLoader(MNIST("data", transform=augment), batch_size=8, shuffle=True)
            else:
                dump = DataLoader(MNIST("data", transform=augment, train=False), batch_size=8, shuffle=True)
            for step, (x, y) in enumerate(dump):
                for i in range(x.shape[0]):
                    cv2.imwrite(os.path.join(out, str(step * 8 + i) + ".png"), 255 * x[i].numpy())
            {extra}
        """
    write_files(tmp_path, {
        "fine.py": script.format(extra=""),
        "steps.py": script.format(extra="\n            ".join([
            'steps = DataLoader(MNIST("data", transform=augment), batch_size=8, shuffle=True)',
            "for it in range(1000):",
            "    x, y = next(iter(steps))",
            "    model(x).sum().backward()",
        ])),
    })
    run = run_cli("check", "--no-cache", "--select", "DSL507", "--output-format", "concise", ".", cwd=tmp_path)
    found = sorted(line.split(":")[0] + ":" + line.split(":")[1] for line in run.stdout.splitlines() if ": DSL" in line)
    assert found == ["steps.py:22"]


def test_a_worker_count_capped_at_zero_and_a_shuffle_a_caller_turns_on(tmp_path):
    """``num_workers=min(cfg.workers, batch_size, 0)`` is never more than 0 (``worker_counts.
    capped_at_zero``), and ``shuffle=is_train`` is True when a call passes ``is_train=True`` (or by
    default): the factory's loader is a training loader without workers (DSL507). Capped at 1, or
    shuffled by no call, it is not reported."""
    script = """
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        def prepare(dataset, batch_size, workers, is_train={default}):
            return DataLoader(dataset, batch_size=batch_size, num_workers=min(workers, batch_size, {cap}), shuffle=is_train)

        train = prepare(ImageFolder("train"), 8, 4, is_train={passed})
        """
    write_files(tmp_path, {
        "zero.py": script.format(default="True", cap="0", passed="True"),
        "passed.py": script.format(default="False", cap="0", passed="True"),
        "one.py": script.format(default="True", cap="1", passed="True"),
        "never.py": script.format(default="False", cap="0", passed="False"),
    })
    run = run_cli("check", "--no-cache", "--select", "DSL507", "--output-format", "concise", ".", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in run.stdout.splitlines() if ": DSL" in line) == ["passed.py", "zero.py"]


def test_a_dataset_built_without_its_optional_transform_only_indexes(tmp_path):
    """A buffer dataset that calls ``self.transform`` only under ``if self.transform:`` and is built
    without one (``transform=None`` by default, ``optional_parts.unset_attributes``) only indexes the
    tensors it holds (``call_costs`` records the guard, ``indexing.indexes_only`` skips it): DSL507
    leaves that loader alone. Built with a transform, each item does work: reported."""
    write_files(tmp_path, {"buffer.py": """
        from torch.utils.data import DataLoader, Dataset

        class Buffer(Dataset):
            def __init__(self, data, targets=None, transform=None):
                self.data, self.targets = data, targets
                self.transform = transform

            def __len__(self):
                return len(self.data)

            def __getitem__(self, idx):
                data = self.data[idx]
                if self.transform is not None:
                    data = self.transform(data)
                return data, self.targets[idx]

        def fit(model, opt, x, y, aug):
            plain = DataLoader(Buffer(x, y), batch_size=32, shuffle=True)
            augmented = DataLoader(Buffer(x, y, transform=aug), batch_size=32, shuffle=True)  # expect: DSL507
            positional = DataLoader(Buffer(x, y, aug), batch_size=32, shuffle=True)  # expect: DSL507
            for loader in (plain, augmented, positional):
                for a, b in loader:
                    model(a).sum().backward()
                    opt.step()
        """})
    outcome = check_tree(tmp_path, select=["DSL507"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_work_under_an_option_every_loaders_dataset_leaves_off_runs_in_no_worker(tmp_path):
    """A dataset keeps a visualisation option (``vis=False``) and does CUDA work and builds a model
    only under ``if self.vis:``, or in a helper that tests the ``vis`` it is handed
    (``option_guards``). The one construction a DataLoader receives leaves it out, and the demo that
    turns it on indexes the dataset in the main process (``option_reach``): nothing runs in a
    worker. The same class of another file, built with the option through a project function that
    makes the loader, is reported."""
    body = """
        import torch
        from torch.utils.data import Dataset
        from helpers import {helper}

        class {name}(Dataset):
            def __init__(self, items, vis=False):
                self.items = items
                self.vis = vis
                self.device = torch.device("cuda")

            def __len__(self):
                return len(self.items)

            def __getitem__(self, idx):
                item = torch.as_tensor(self.items[idx])
                if self.vis:
                    item = item.to(self.device){mark}
                return self.features(item, self.vis)

            def features(self, item, vis=False):
                if vis:
                    {helper}()
                    return item.to(self.device){mark}
                return item
        """
    write_files(tmp_path, {
        "scans.py": body.format(name="Scans", helper="make_renderer", mark=""),
        "shown.py": body.format(name="Shown", helper="make_viewer", mark="  # expect: DSL204"),
        "helpers.py": """
        from torch import nn

        def make_renderer():
            return nn.Conv2d(3, 3, 3)

        def make_viewer():
            return nn.Conv2d(3, 3, 3)  # expect: DSL203
        """,
        "train.py": """
        import argparse
        from torch.utils.data import DataLoader
        from scans import Scans
        from shown import Shown

        def loader(ds):
            return DataLoader(ds, batch_size=4, num_workers=4)

        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--show", action="store_true")
            args = parser.parse_args()
            train = DataLoader(Scans(list(range(8))), batch_size=4, num_workers=4)
            demo = Scans(list(range(8)), vis=args.show)
            print(demo[0])
            shown = loader(Shown(list(range(8)), vis=args.show))
        """})
    outcome = check_tree(tmp_path, select=["DSL203", "DSL204"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_a_sampler_given_through_a_kwargs_dict_to_a_loader_class_alias(tmp_path):
    """A loader factory binds ``loader_class = torch.utils.data.DataLoader`` (a function's alias:
    ``names.ModuleNames.resolve_name``) and gives it the sampler through a ``dict(...)`` it unpacks
    (``kwargs_dicts.closed_entries``): the loader's one sampler is that ``DistributedSampler``, which
    no epoch loop gives the epoch. A dict that may hold other keys leaves the sampler unknown."""
    write_files(tmp_path, {"data.py": """
        import torch


        def create_loader(dataset, batch_size, distributed=False, is_training=False, num_workers=1):
            sampler = None
            if distributed and is_training:
                sampler = torch.utils.data.distributed.DistributedSampler(dataset)  # expect: DSL505
            loader_class = torch.utils.data.DataLoader
            loader_args = dict(batch_size=batch_size, num_workers=num_workers, sampler=sampler)
            return loader_class(dataset, **loader_args)


        def create_open_loader(dataset, extra):
            sampler = torch.utils.data.distributed.DistributedSampler(dataset)
            loader_args = dict(batch_size=8, sampler=sampler)
            loader_args.update(extra)  # may replace the sampler
            return torch.utils.data.DataLoader(dataset, **loader_args)


        def train(model, dataset, extra, epochs):
            loader = create_loader(dataset, 8, distributed=True, is_training=True)
            other = create_open_loader(dataset, extra)
            for epoch in range(epochs):
                for x in loader:
                    model(x).backward()
                for x in other:
                    model(x).backward()
        """})
    outcome = check_tree(tmp_path, select=["DSL505"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_a_factory_loader_handed_each_epoch_to_a_training_function_of_another_module(tmp_path):
    """A script builds its loader with a factory of another module and, in its epoch loop, hands it
    to a training function of a third module that iterates it and calls ``.backward()``
    (``epoch_facts.epoch_iterated_results``: ``[f, g, slot]``; the index asks ``g``'s facts): the
    factory's ``DistributedSampler`` is re-iterated every epoch, and nothing gives it the epoch.
    Handed only to an evaluation function, its order does not matter: silent."""
    write_files(tmp_path, {
        "data.py": """
        import torch

        def train_loader(dataset, distributed=False):
            sampler = torch.utils.data.distributed.DistributedSampler(dataset) if distributed else None  # expect: DSL505
            return torch.utils.data.DataLoader(dataset, batch_size=8, sampler=sampler)

        def val_loader(dataset, distributed=False):
            sampler = torch.utils.data.distributed.DistributedSampler(dataset) if distributed else None
            return torch.utils.data.DataLoader(dataset, batch_size=8, sampler=sampler)
        """,
        "engine.py": """
        def train_one_epoch(model, loader, optimizer):
            for x in loader:
                model(x).backward()
                optimizer.step()

        def evaluate(model, loader):
            total = 0.0
            for x in loader:
                total += float(model(x))
            return total
        """,
        "train.py": """
        import torch.utils.data
        from data import train_loader, val_loader
        from engine import evaluate, train_one_epoch

        def main(model, train_set, val_set, optimizer, epochs):
            loader = train_loader(train_set, distributed=True)
            checks = val_loader(val_set, distributed=True)
            for epoch in range(epochs):
                train_one_epoch(model, loader, optimizer)
                evaluate(model, loader=checks)
        """})
    outcome = check_tree(tmp_path, select=["DSL505"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)


def test_a_distributed_sampler_made_anew_each_epoch_over_the_same_data(tmp_path):
    """A training loop builds its loader and a ``DistributedSampler`` in each pass of the epoch loop
    over a dataset bound before it (``epochs._rebuilt_each_pass``): each fresh sampler starts at
    epoch 0 with the same seed, so every epoch repeats one order. A seed of its own each pass, or a
    new dataset each pass (shards), is fine; so is an evaluation pass."""
    write_files(tmp_path, {"train.py": """
        import torch
        from torch.utils.data import DataLoader, DistributedSampler


        def fit(model, ds, shards, epochs):
            for epoch in range(epochs):
                loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))  # expect: DSL505
                for x in loader:
                    model(x).backward()
            for epoch in range(epochs):
                seeded = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds, seed=epoch))
                for x in seeded:
                    model(x).backward()
            for shard in shards:
                part = torch.load(shard)
                one = DataLoader(part, batch_size=8, sampler=DistributedSampler(part))
                for x in one:
                    model(x).backward()
            for epoch in range(epochs):
                checks = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
                with torch.no_grad():
                    for x in checks:
                        model(x)
        """})
    outcome = check_tree(tmp_path, select=["DSL505"])
    assert {(d.path, d.row, d.code) for d in outcome.diagnostics} == expected_markers(tmp_path)
