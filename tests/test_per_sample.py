"""Index dependence (``dslint.semantics.dataflow``) and traps of the DSL2xx rules."""

from __future__ import annotations

import json

import libcst as cst
import pytest

from tests.conftest import check_tree, expected_markers, write_files


def _contexts(tmp_path, files):
    """FileContext per written file, built the way the engine builds them."""
    from dslint import check_file
    from dslint.semantics.context import FileContext
    from dslint.semantics.names import module_name_for
    from dslint.semantics.project import ProjectIndex
    from dslint.semantics.view import View

    paths = write_files(tmp_path, files)
    summaries = {}
    for path in paths:
        modname, is_package = module_name_for(str(path))
        summary, diagnostic = check_file.parse_file(str(path), path.read_text(), modname, is_package)
        assert diagnostic is None
        summaries[str(path)] = summary
    index = ProjectIndex(summaries)
    out = {}
    for path in paths:
        parsed = check_file._PARSED.pop(str(path))
        out[path.name] = FileContext(
            parsed.path, parsed.text, parsed.module, parsed.tree, parsed.names, parsed.regions, parsed.summary,
            View(index, parsed.path),
        )
    return out


def _expr(ctx, text):
    """The expression node whose source is exactly ``text`` (the first one)."""
    for cls in (cst.Call, cst.Name, cst.Attribute, cst.Subscript, cst.FormattedString, cst.BinaryOperation, cst.Lambda):
        for node in ctx.nodes(cls):
            if ctx.code(node).strip() == text:
                return node
    raise AssertionError(f"no expression {text!r}")


MAP_STYLE = """
import os
import random
import time
import numpy as np
import torch
from torch.utils.data import Dataset

ROOT = "/data"

class D(Dataset):
    def __init__(self, root):
        self.root = root
        self.files = sorted(os.listdir(root))

    def __getitem__(self, idx):
        path = self.files[idx]
        fixed = os.path.join(self.root, "labels.csv")
        renamed = path.replace(".jpg", ".png")
        via_method = self.pick()
        drawn = random.choice(self.files)
        rolled = np.random.randint(10)
        noise = torch.randint(0, 10, (1,))
        stamp = time.time()
        text = f"{self.root}/{idx}.npy"
        cfg = self.cfg["ann"]
        listed = [f for f in self.groups[idx]]
        with open(self.files[idx]) as fh:
            pass
        with open(fixed) as fixed_handle:
            pass
        if (n := idx + 1) > 0:
            pass
        self.current = self.files[idx]
        bag = {}
        bag["k"] = idx
        items = []
        items.append(path)
        keyed = sorted(self.files, key=lambda f: f.lower())
        use(path, fixed, renamed, via_method, drawn, rolled, noise, stamp, text, cfg, listed, fh, fixed_handle, n,
            self.current, bag, items, keyed, ROOT, self.root)

    def pick(self):
        return self.files[0]
"""


@pytest.mark.parametrize(
    "expr,dependent",
    [
        ("path", True),
        ("fixed", False),
        ("renamed", True),
        ("via_method", True),
        ("drawn", True),
        ("rolled", True),
        ("noise", True),
        ("stamp", True),
        ("text", True),
        ("cfg", False),
        ("listed", True),
        ("fh", True),
        ("fixed_handle", False),
        ("n", True),
        ("self.current", True),
        ("bag", True),
        ("items", True),
        ("keyed", False),
        ("ROOT", False),
        ("self.root", False),
    ],
)
def test_index_dependence_in_getitem(tmp_path, expr, dependent):
    from dslint.semantics.dataflow import depends_on_sample

    ctx = _contexts(tmp_path, MAP_STYLE)["example.py"]
    use = next(c for c in ctx.nodes(cst.Call) if ctx.code(c.func) == "use")
    node = next(a.value for a in use.args if ctx.code(a.value).strip() == expr)
    assert depends_on_sample(ctx, node) is dependent


def test_loop_items_counters_and_helpers(tmp_path):
    from dslint.semantics.dataflow import depends_on_sample, inputs_depend

    ctx = _contexts(
        tmp_path,
        """
        import torch
        from torch.utils.data import IterableDataset, Dataset

        def helper(p):
            return torch.load(p)

        class Stream(IterableDataset):
            def __iter__(self):
                before = self.path
                i = 0
                for item in self.items:
                    i += 1
                    j = 0
                    j = j + 1
                    yield torch.load(item), torch.load(before), i, j, helper(self.path)

        class Counter(Dataset):
            def __getitem__(self, idx):
                self._advance()
                return torch.load(self.cursor), torch.load(self.path)

            def _advance(self):
                self.cursor = self.next_path()
        """,
    )["example.py"]
    assert depends_on_sample(ctx, _expr(ctx, "item"))
    assert not depends_on_sample(ctx, _expr(ctx, "before"))
    yielded = next(n for n in ctx.nodes(cst.Yield))
    values = [e.value for e in yielded.value.elements]
    assert [depends_on_sample(ctx, v) for v in values[2:4]] == [True, True]  # i += 1; j = j + 1 in a loop
    # a helper's parameter is unknown, so treated as dependent
    assert inputs_depend(ctx, _expr(ctx, "torch.load(p)"))
    # an attribute another per-sample method of the class reassigns varies per sample
    assert inputs_depend(ctx, _expr(ctx, "torch.load(self.cursor)"))
    assert not inputs_depend(ctx, _expr(ctx, "torch.load(self.path)"))


def test_per_item_excludes_outer_loop_of_nested_generator(tmp_path):
    from dslint.semantics.dataflow import per_item

    ctx = _contexts(
        tmp_path,
        """
        import torch
        from torch.utils.data import IterableDataset

        class Repeat(IterableDataset):
            def __iter__(self):
                while True:
                    data = torch.load(self.path)
                    for x in data:
                        yield torch.load(self.other)
        """,
    )["example.py"]
    assert ctx.is_per_sample(_expr(ctx, "torch.load(self.path)"))  # what regions say
    assert not per_item(ctx, _expr(ctx, "torch.load(self.path)"))  # once per pass over `data`
    assert per_item(ctx, _expr(ctx, "torch.load(self.other)"))


def _codes(tmp_path, files, select):
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=select)
    assert not outcome.result.internal_errors, outcome.result.internal_errors
    return sorted((d.path, d.row, d.code) for d in outcome.diagnostics)


def test_traps_stay_silent(tmp_path):
    found = _codes(
        tmp_path,
        """
        import os
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        import torchvision.transforms as T
        from torch.utils.data import Dataset, IterableDataset

        class D(Dataset):
            def __init__(self, root):
                self.files = os.listdir(root)
                self.count = 0

            def __len__(self):
                return len(os.listdir(self.root))

            def __getitem__(self, idx):
                self.count += 1
                x = torch.load(f"{self.root}/{self.count}.pt")
                if torch.cuda.is_available() and torch.cuda.device_count() > 1:
                    x = x.to(self.device)
                w = nn.Parameter(torch.ones(3))
                return F.relu(T.ToTensor()(x)) * w

        class Repeat(IterableDataset):
            def __iter__(self):
                while True:
                    data = torch.load(self.path)
                    for x in data:
                        yield x
        """,
        ["DSL201", "DSL202", "DSL203", "DSL204"],
    )
    assert found == []


def test_one_finding_per_construction_and_statement(tmp_path):
    found = _codes(
        tmp_path,
        """
        import torch
        import torch.nn as nn
        import torchvision.transforms as T
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, idx):
                net = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU()))
                tf = T.Compose([T.Resize(8), T.RandomApply([T.ColorJitter(0.1)])])
                y = torch.zeros(3, device="cuda").cuda()
                return net, tf, y
        """,
        ["DSL203", "DSL204"],
    )
    assert [(row, code) for _, row, code in found] == [(8, "DSL203"), (9, "DSL203"), (10, "DSL204")]


def test_cross_file_answers_are_recorded_as_json(tmp_path):
    """The new View questions are logged for the cache and replay to the same answers."""
    from dslint.semantics.view import replay

    ctxs = _contexts(
        tmp_path,
        {
            "models.py": """
                import torch.nn as nn

                class Net(nn.Module):
                    pass
            """,
            "collate.py": """
                def to_gpu(batch):
                    return batch.cuda()
            """,
            "train.py": """
                from torch.utils.data import DataLoader
                from collate import to_gpu
                from models import Net

                loader = DataLoader([1, 2], collate_fn=to_gpu, num_workers=2)
            """,
        },
    )
    train = ctxs["train.py"]
    assert train.view.external_bases("models.Net") == ["torch.nn.Module"]
    assert train.view.external_bases("os.path") is None
    collate = ctxs["collate.py"]
    loaders = collate.view.collate_loaders("to_gpu")
    assert [facts["num_workers"] for facts in loaders] == [2]
    for ctx in (train, collate):
        log = json.loads(json.dumps(ctx.view.log))
        assert replay(ctx.view._index, ctx.path, log)


def test_once_guarded_loads_are_not_per_sample(tmp_path):
    # `if self.loaded: return` ... `self.loaded = True`: the load runs once per worker
    found = _codes(
        tmp_path,
        """
        import numpy as np
        from torch.utils.data import Dataset

        class Lazy(Dataset):
            def __init__(self, path):
                self.path = path
                self.loaded = False

            def _ensure(self):
                if self.loaded:
                    return
                self.table = np.load(self.path)
                self.loaded = True

            def __getitem__(self, idx):
                self._ensure()
                return self.table[idx]

        class Always(Dataset):
            def _ensure(self):
                if self.loaded:
                    return
                return np.load(self.path)  # nothing sets `self.loaded`: every sample

            def __getitem__(self, idx):
                return self._ensure()[idx]
        """,
        ["DSL202"],
    )
    assert [(row, code) for _, row, code in found] == [(23, "DSL202")]


def test_cuda_in_a_test_suite_dataset_is_left_alone(tmp_path):
    # test datasets that use CUDA are there to exercise it (under spawn)
    dataset = """
    import torch
    from torch.utils.data import Dataset

    class CudaCounting(Dataset):
        def __getitem__(self, i):
            return torch.as_tensor(i, device="cuda")
    """
    assert _codes(tmp_path, {"tests/test_loader.py": dataset}, ["DSL204"]) == []
    assert _codes(tmp_path, {"data.py": dataset}, ["DSL204"]) == [("data.py", 6, "DSL204")]


def test_cuda_only_where_get_worker_info_is_none_runs_in_the_main_process(tmp_path):
    """Code under a test that ``get_worker_info()`` is None (directly, negated, through the
    object or a name bound once to the test, or in the ``else`` of the opposite test) never runs
    in a worker (``worker_info.main_process_only``): no DSL204 there; the last ``.cuda()`` runs
    in every process."""
    dataset = """
    from torch.utils.data import Dataset, get_worker_info

    class Augmented(Dataset):
        def __getitem__(self, i):
            x = self.items[i]
            use_gpu = get_worker_info() is None
            if use_gpu:
                x = x.cuda()
            info = get_worker_info()
            if info is not None:
                x = x + 1
            else:
                x = x.cuda()
            if not get_worker_info():
                x = x.cuda()
            if info is None:
                x = x.cuda()
            return x.cuda()
    """
    assert _codes(tmp_path, {"data.py": dataset}, ["DSL204"]) == [("data.py", 18, "DSL204")]


def test_a_test_that_an_attribute_is_set_already_is_no_lazy_guard(tmp_path):
    """``if self.root is not None:`` tests that the attribute is set, not that it is still to be
    made once per worker (``regions.is_lazy_guard``): a body that reassigns it runs for every
    sample, so the handle it opens there is per-sample (DSL102). ``if self.pid != os.getpid():``
    reopening per process stays a lazy guard."""
    dataset = """
    import os
    from torch.utils.data import Dataset

    class Records(Dataset):
        def __getitem__(self, i):
            if self.root is not None:
                self.root = os.path.join(self.base, self.names[i])
                self.f = open(self.root, "rb")
                return self.f.read()
            if self.pid != os.getpid():
                self.pid = os.getpid()
                self.g = open(self.path, "rb")
            return self.g.read()
    """
    assert _codes(tmp_path, {"data.py": dataset}, ["DSL102"]) == [("data.py", 8, "DSL102")]


RECORDS = """
import glob
import os
import random
import numpy as np
import torch
from torch.utils.data import Dataset

class D(Dataset):
    def __getitem__(self, idx):
        path, row = self.items[idx]
        other, _ = self.items[idx]
        rec = self.records[idx]
        name = self.ids[idx]
        use(path, row, other, rec.file, rec.pos, random.randrange(4), self.load(path, row))
        use(glob.glob(os.path.join(self.root, name + "_*.png")), glob.glob(os.path.join(self.root, name, "*.png")))
        use(self.root.glob(f"{name}.*"), glob.glob(name + "*"), glob.glob(self.root + name + "*"))
        use(self.root.rglob(f"{name}/*.png"), glob.glob(f"{self.root}/{name}.png"))

    def load(self, file, position):
        return use(file, position)
"""


def test_fields_of_one_per_sample_entry(tmp_path):
    from dslint.semantics.records import same_record

    ctx = _contexts(tmp_path, RECORDS)["example.py"]
    first = next(c for c in ctx.nodes(cst.Call) if ctx.code(c.func) == "use")
    args = [a.value for a in first.args]
    path, row, other, field, pos, drawn = args[:6]
    assert same_record(ctx, path, row) and same_record(ctx, field, pos)
    assert not same_record(ctx, path, other)  # the same field of two lookups
    assert not same_record(ctx, path, field) and not same_record(ctx, path, drawn)
    inner = next(c for c in ctx.nodes(cst.Call) if ctx.code(c.func) == "use" and ctx.code(c.args[0].value) == "file")
    assert same_record(ctx, inner.args[0].value, inner.args[1].value)  # through the helper's one call


def test_glob_pattern_directory(tmp_path):
    from dslint.semantics.file_reads import scans_fixed_directory

    ctx = _contexts(tmp_path, RECORDS)["example.py"]
    scans = {}
    for call in ctx.nodes(cst.Call):
        tail = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
        if tail in ("glob", "rglob"):
            kind = "glob.glob" if ctx.call_name(call) == "glob.glob" else f"Path.{tail}"
            scans[ctx.code(call)] = scans_fixed_directory(ctx, call, kind)
    assert scans == {
        'glob.glob(os.path.join(self.root, name + "_*.png"))': True,
        'glob.glob(os.path.join(self.root, name, "*.png"))': False,  # a per-sample folder
        'self.root.glob(f"{name}.*")': True,
        'glob.glob(name + "*")': False,  # nothing fixed before the per-sample part
        'glob.glob(self.root + name + "*")': True,
        'self.root.rglob(f"{name}/*.png")': True,  # rglob walks the whole tree
        'glob.glob(f"{self.root}/{name}.png")': False,  # no wildcard: no listing
    }


def test_devices_that_can_be_cuda(tmp_path):
    from dslint.semantics.cuda import may_be_cuda

    ctx = _contexts(
        tmp_path,
        """
        import torch
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, a="cuda", b="cpu", c=None):
                self.a, self.c = a, c
                self.b = b
                self.auto = torch.device("cuda" if torch.cuda.is_available() else "cpu")

            def __getitem__(self, idx):
                use(self.b, self.auto, self.c, self.unknown)

        def f(device="cuda:1"):
            use(device)
        """,
    )["example.py"]
    calls = [c for c in ctx.nodes(cst.Call) if ctx.code(c.func) == "use"]
    answers = {ctx.code(a.value): may_be_cuda(ctx, a.value) is not None for c in calls for a in c.args}
    assert answers == {"self.b": False, "self.auto": True, "self.c": False, "self.unknown": False, "device": True}


def test_readlines_of_a_fixed_file_per_sample_is_dsl202(tmp_path):
    """A list file re-read whole for every sample to take one row is DSL202; a file that
    changes with the index, or lines read once in ``__init__``, are not."""
    source = '''
from torch.utils.data import Dataset

class Rows(Dataset):
    def __init__(self, list_path, paths):
        self.list_path = list_path
        self.paths = paths
        with open(list_path) as handle:
            self.rows = handle.readlines()

    def __getitem__(self, index):
        with open(self.list_path) as handle:
            rows = handle.readlines()
        with open(self.paths[index]) as own:
            text = own.readlines()
        return rows[index], text, self.rows[index]
'''
    found = [(row, code) for _, row, code in _codes(tmp_path, {"rows.py": source}, "DSL202") if code == "DSL202"]
    assert found == [(12, "DSL202")]


def test_reads_of_in_memory_buffers_are_not_file_reloads(tmp_path):
    # a buffer made once per sample and filled with that sample's bytes reads no file (DSL202 silent);
    # the index file beside it is parsed again for every sample (reported)
    found = _codes(
        tmp_path,
        """
        import io
        import json
        import numpy as np
        from torch.utils.data import Dataset

        class Blobs(Dataset):
            def __init__(self, blobs, index_path):
                self.blobs = blobs
                self.index_path = index_path

            def __getitem__(self, idx):
                buf = io.BytesIO()
                buf.write(self.blobs[idx])
                buf.seek(0)
                array = np.load(buf)
                meta = json.load(io.StringIO(self.blobs[0].decode()))
                with open(self.index_path) as f:
                    index = json.load(f)
                return array, meta, index[idx]
        """,
        ["DSL202"],
    )
    assert [(row, code) for _, row, code in found] == [(18, "DSL202")]


def test_parts_collected_for_a_pipeline_that_depends_on_the_sample(tmp_path):
    """A constant part appended to a list that a per-sample pipeline takes, where which parts the
    list gets depends on the sample's size, is built with that pipeline (DSL203 silent); the same
    part in a list that a constant pipeline takes is repeated work, reported once with that pipeline."""
    from tests.test_rule_cases import run_case

    helpers = """
        import torchvision.transforms as T
        from torch.utils.data import Dataset

        def sized_pipeline(size, h, w):
            steps = []
            if h < size and w < size:
                steps.append(T.Pad(size - min(h, w)))
            else:
                steps.append(T.Resize(size))
            steps.append(T.ToTensor())
            steps.append(T.Normalize([0.5], [0.5]))
            return T.Compose(steps)

        class Sized(Dataset):
            def __getitem__(self, idx):
                image = self.images[idx]
                return sized_pipeline(self.size, image.height, image.width)(image)
        """
    run_case(tmp_path / "valid", "DSL203", "valid", helpers)
    constant = """
        import torchvision.transforms as T
        from torch.utils.data import Dataset

        class Fixed(Dataset):
            def __getitem__(self, idx):
                steps = [T.Normalize([0.5], [0.5])]  # a part of the pipeline below: one finding
                return T.Compose(steps)(self.images[idx])  # expect: DSL203
        """
    run_case(tmp_path / "invalid", "DSL203", "invalid", constant)


def test_one_finding_per_pipeline_whose_parts_are_built_apart(tmp_path):
    """A constant pipeline whose parts are appended to a local list or bound to local names before
    the ``Compose`` that takes them is one finding, at the ``Compose``
    (``constructions.pipeline_takers``); a constant transform applied on its own is its own finding."""
    found = _codes(
        tmp_path,
        """
        import torchvision.transforms as T
        from torch.utils.data import Dataset

        class Images(Dataset):
            def __getitem__(self, i):
                steps = []
                steps.append(T.Resize(256))
                steps.append(T.CenterCrop(224))
                norm = T.Normalize(self.mean, self.std)
                pipeline = T.Compose(steps + [norm])
                crop = T.CenterCrop(112)
                return pipeline(self.images[i]), crop(self.images[i])
        """,
        ["DSL203"],
    )
    assert [row for _, row, _ in found] == [10, 11]


def test_parts_added_with_plus_equals_belong_to_their_pipeline(tmp_path):
    """``steps += [T.Normalize(...)]`` collects a part like ``steps.append(...)``
    (``constructions.pipeline_takers``): in a pipeline whose crop comes from the sample's random
    parameters it is built with that pipeline, silent; the same transform applied on its own is
    reported."""
    found = _codes(
        tmp_path,
        """
        import random
        import torchvision.transforms as T
        from torch.utils.data import Dataset

        def make(params, normalized=True):
            steps = [T.Lambda(lambda img: img.crop(params["box"]))]
            if normalized:
                steps += [T.Normalize((0.5,), (0.5,))]
            return T.Compose(steps)

        class Pairs(Dataset):
            def __getitem__(self, i):
                params = {"box": (random.randint(0, 8), 0, 64, 64)}
                norm = T.Normalize((0.5,), (0.5,))
                return make(params)(self.images[i]), norm(self.tensors[i])
        """,
        ["DSL203"],
    )
    assert [row for _, row, _ in found] == [14]  # the `norm = ...` line


def test_a_helper_device_default_counts_only_where_a_per_sample_call_leaves_it_out(tmp_path):
    """A helper of another module that per-sample code calls runs with the arguments those calls
    pass (``sample_calls``): its ``device="cuda"`` default (or ``device or DEVICE``) is used in the
    workers only where such a call leaves ``device`` out; calls from the main process do not count."""
    files = {
        "tensors.py": """
            import torch

            DEVICE = "cuda:0"

            def eye(n, device="cuda"):
                return torch.eye(n, device=torch.device(device))  # expect: DSL204

            def as_tensor(x, dtype=None, device=None):
                device = device or DEVICE
                return torch.tensor(x, dtype=dtype, device=device)

            def ones(n, device="cuda"):
                return torch.ones(n, device=device)
        """,
        "data.py": """
            from torch.utils.data import Dataset
            from tensors import as_tensor, eye, ones

            class Poses(Dataset):
                def __getitem__(self, i):
                    pose = as_tensor(self.rows[i], device="cpu")
                    return pose @ eye(4) + ones(4, device="cpu")

            def plan(rows):
                return as_tensor(rows), ones(3)  # the main process: its defaults are not the workers'
        """,
    }
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=["DSL204"])
    got = {(d.path, d.row, d.code) for d in outcome.diagnostics}
    assert got == {m for m in expected_markers(tmp_path)}


def test_a_static_helper_device_argument_keeps_its_position(tmp_path):
    """A ``@staticmethod`` has no receiver: its first parameter is the first argument the
    per-sample call passes, so ``device`` keeps its position; a classmethod's ``cls`` is skipped."""
    files = {
        "data.py": """
            import torch
            from torch.utils.data import Dataset

            class Frames(Dataset):
                @staticmethod
                def to_tensor(x, device="cuda"):
                    return torch.as_tensor(x, device=device)

                @staticmethod
                def pad(x, device="cuda"):
                    return torch.zeros(4, device=device) + x  # expect: DSL204

                @classmethod
                def scale(cls, x, device="cuda"):
                    return torch.ones(4, device=device) * x

                def __getitem__(self, i):
                    a = self.to_tensor(self.rows[i], "cpu")
                    b = self.scale(a, "cpu")
                    return self.pad(b)
        """,
    }
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=["DSL204"])
    got = {(d.path, d.row, d.code) for d in outcome.diagnostics}
    assert got == {m for m in expected_markers(tmp_path)}


def test_cuda_data_kept_for_the_main_process_alone_is_not_reported(tmp_path):
    """DSL204 at an ``__init__`` store: CUDA data the dataset keeps only for the main process (class
    weights the training script hands to its loss) never reaches a worker. It is reported when
    any method but ``__init__`` reads the attribute, or may: in a base of another file, in a subclass
    of another file, through ``getattr(self, "...")``, when ``self`` is handed on, or when
    ``__init__`` derives another attribute from it."""
    write_files(tmp_path, {
        "base.py": """
        from torch.utils.data import Dataset

        class Base(Dataset):
            def __getitem__(self, idx):
                return self.load(idx) * self.scale
        """,
        "data.py": """
        import torch
        from base import Base

        def describe(obj):
            return vars(obj)

        class Weighted(Base):
            def __init__(self, items):
                self.items = items
                self.class_weights = torch.tensor([0.5, 2.0]).cuda()
                self.scale = torch.ones(2).cuda()  # expect: DSL204
                self.mean = torch.zeros(2).cuda()  # expect: DSL204
                self.std = self.mean + 1
                self.table = torch.ones(3).cuda()  # expect: DSL204
            def load(self, idx):
                return self.items[idx] + getattr(self, "table")[0]

        class Handed(Base):
            def __init__(self, items):
                self.items = items
                self.extra = torch.ones(3).cuda()  # expect: DSL204
            def load(self, idx):
                return describe(self)["items"][idx]
        """,
        "sub.py": """
        import torch
        from data import Weighted

        class Shifted(Weighted):
            def __init__(self, items):
                super().__init__(items)
                self.offset = torch.ones(2).cuda()  # expect: DSL204
                self.unused = torch.ones(2).to("cuda")
            def load(self, idx):
                return self.items[idx] + self.offset
        """,
        "train.py": """
        import torch
        from torch.utils.data import DataLoader
        from data import Weighted
        from sub import Shifted

        def main(items):
            data = Weighted(items)
            loss = torch.nn.CrossEntropyLoss(weight=data.class_weights)
            return loss, DataLoader(data, num_workers=4), DataLoader(Shifted(items), num_workers=4), Handed
        """,
    })
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL204"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_an_except_handler_and_a_one_sample_dataset_are_not_per_item_costs(tmp_path):
    """``dataflow.per_item``: the handler of an ``except`` runs when loading the item failed (a
    directory listed for the error message), and a dataset whose ``__len__`` returns 1 reads its
    one sample once per epoch, as ``__init__`` would. The same calls on the normal path of a
    dataset of many samples are per-item costs (DSL201, DSL202)."""
    write_files(tmp_path, {"data.py": """
        import os
        import numpy as np
        from torch.utils.data import Dataset

        class Lookup(Dataset):
            def __init__(self, root, names):
                self.root, self.names = root, names
            def __len__(self):
                return len(self.names)
            def __getitem__(self, idx):
                try:
                    return np.load(os.path.join(self.root, self.names[idx]))
                except FileNotFoundError:
                    near = [n for n in os.listdir(self.root) if n[:3] == self.names[idx][:3]]
                    raise KeyError(f"missing; similar: {near}")

        class Scanning(Lookup):
            def __getitem__(self, idx):
                files = sorted(os.listdir(self.root))  # expect: DSL201
                return np.load(os.path.join(self.root, files[idx]))

        class Demo(Dataset):
            def __init__(self, path):
                self.path = path
            def __len__(self):
                \"\"\"One pair of clouds.\"\"\"
                return 1
            def __getitem__(self, idx):
                return np.loadtxt(self.path)

        class Repeated(Demo):
            def __len__(self):
                return 100
            def __getitem__(self, idx):
                return np.loadtxt(self.path)[idx]  # expect: DSL202
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL201", "DSL202"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_code_behind_a_counter_the_method_resets_runs_every_few_items(tmp_path):
    """``once.every_few_calls``: a replay buffer that rescans its directory only after ``every``
    samples (``if self.seen < self.every: return`` ... ``self.seen = 0``, the counter counted up per
    sample) lists it once every few items, not per item. A counter the method never resets (it only
    grows) throttles nothing: past the threshold the scan runs for every sample."""
    write_files(tmp_path, {"buffer.py": """
        import glob
        import random
        from torch.utils.data import IterableDataset

        class Replay(IterableDataset):
            def __init__(self, root, every=1000):
                self.root, self.every, self.seen, self.files = root, every, 0, []

            def _fetch(self):
                if self.seen < self.every:
                    return
                self.seen = 0
                self.files = sorted(glob.glob(f"{self.root}/*.npz"))

            def __iter__(self):
                while True:
                    self._fetch()
                    self.seen += 1
                    yield random.choice(self.files)

        class Growing(Replay):
            def _fetch(self):
                if self.seen >= self.every:
                    self.files = sorted(glob.glob(f"{self.root}/*.npz"))  # expect: DSL201
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL201"]).diagnostics}
    assert found == expected_markers(tmp_path)
