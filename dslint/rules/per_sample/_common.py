"""What the per-sample rules (DSL201-DSL204) share: finding candidate calls,
showing a call and where it runs per sample, one finding per defect, and the CUDA
work in worker code (DSL204)."""

from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

import libcst as cst

from dslint.rules.base import Symptom
from dslint.semantics.call_facts import last_name
from dslint.semantics.cuda import collate_lambdas, cuda_model_call, cuda_use, loading_context, may_touch_cuda
from dslint.semantics.cuda_kept import kept_on_instance, main_process_only_attribute
from dslint.semantics.loops import is_test_code
from dslint.semantics.regions import LOOP
from dslint.semantics.start_methods import workers_not_forked
from dslint.semantics.worker_info import main_process_only

#: what the runtime companion measures for a per-sample cost
TIME_RATIO = Symptom("time_ratio", "per-sample time, bad / good", exclusive=True)


def candidates(ctx, tails) -> Iterator[cst.Call]:
    """Calls whose last name component may be one of ``tails`` (import aliases included)."""
    accepted = ctx.names.call_tails(frozenset(tails))
    for call in ctx.nodes(cst.Call):
        if last_name(call.func) in accepted:
            yield call


def call_text(ctx, call: cst.Call, qualified: Optional[str] = None) -> str:
    """The call as a message shows it (``os.listdir()``): its callee's source, or a
    short stand-in for a long one."""
    text = ctx.code(call.func).strip()
    if len(text) > 40 or "\n" in text:
        text = f".{last_name(call.func)}" if isinstance(call.func, cst.Attribute) else (qualified or "call")
    return f"{text}()"


def where(ctx, node: cst.CSTNode) -> str:
    """Why ``node`` runs once per sample, for the message."""
    func = ctx.enclosing_function(node)
    if func is None:
        return "per-sample code"
    name = func.name.value
    label = ctx.per_sample_label(func)
    mode = ctx.per_sample_mode(func)
    if mode == LOOP:
        return f"the loop that yields in `{name}` runs once per sample of `{label}`"
    return f"`{name}` runs once per sample of `{label}`"


def outermost(ctx, found: List[Tuple[cst.CSTNode, str]]) -> Iterator[Tuple[cst.CSTNode, str]]:
    """One defect, one finding: drop findings nested inside another finding of the same rule."""
    ids = {id(node) for node, _ in found}
    for node, message in found:
        nested = False
        for ancestor in ctx.ancestors(node):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                break
            if id(ancestor) in ids:
                nested = True
                break
        if not nested:
            yield node, message


# ---------------------------------------------------------------------------- messages


def reader_display(qualified: str) -> str:
    """``pd.read_csv()`` for ``pandas.read_csv`` (DSL202's messages)."""
    module, _, name = qualified.rpartition(".")
    short = {"pandas": "pd", "numpy": "np"}.get(module, module)
    return f"{short}.{name}()"


def reload_cost(qualified: str) -> str:
    """What reloading a file of this reader per item was measured to cost (DSL202's messages)."""
    if qualified.startswith(("pandas.", "csv.", "numpy.loadtxt", "numpy.genfromtxt")):
        return "a whole-file CSV parse per item measured about 104,000x slower than loading it once in `__init__`"
    if qualified.startswith(("json.", "yaml.", "pickle.")):
        return "re-loading a 20k-record JSON per item measured ~48,000x slower than loading it once in `__init__`"
    return "every item pays for reading and deserialising the whole file, which `__init__` would pay once"


_SETUP_MESSAGES = {
    "module": (
        "constructs the same `nn.Module` for every sample",
        "parameter allocation and initialisation per item, measured 55x slower per item for a small model "
        "than building it once in `__init__`",
    ),
    "pretrained": (
        "loads the same pretrained files for every sample",
        "weights or vocabulary files are read and deserialised from disk per item; load them once in `__init__`",
    ),
    "transform": (
        "builds the same transform pipeline for every sample",
        "its construction is repeated per item; build it once in `__init__`",
    ),
    "tokenizer": (
        "builds the same tokenizer/vocabulary for every sample",
        "measured 5,600x slower per item than building it once in `__init__`",
    ),
    "vocab": (
        "builds the same vocabulary from a fixed collection for every sample",
        "the cost grows with the collection, measured 5,600x slower per item than building it once in `__init__`",
    ),
    "factory": (
        "calls a stored factory with the same arguments for every sample and uses what it returns once",
        "the object it returns (a transform pipeline) is rebuilt per item; call the factory once in `__init__`",
    ),
}


def setup_message(text: str, kind: str, where: str) -> str:
    """DSL203's message for a construction of ``kind`` shown as ``text``."""
    what, cost = _SETUP_MESSAGES[kind]
    return f"`{text}` {what} ({where}): {cost}"


def cuda_sites(ctx) -> Iterator[Tuple[cst.Call, str, str, str]]:
    """(call, what touches CUDA, "sample" | "init" | "collate", where) for the CUDA work in
    data-loading code (``dslint.semantics.cuda``), one per statement; test code is left out
    (a test's dataset that uses CUDA is there to exercise it, under spawn)."""
    lambdas = collate_lambdas(ctx)
    cuda_imports = any(target.startswith("torch.cuda") for targets in ctx.names.imports.values() for target in targets)
    seen_statements = set()
    asked = False
    for call in ctx.nodes(cst.Call):
        maybe = may_touch_cuda(call, cuda_imports)
        if not maybe and not (isinstance(call.func, cst.Attribute) and ctx.is_per_sample(call)):
            continue
        context = loading_context(ctx, call, lambdas)  # (cheaper than following the device: first)
        if context is None:
            continue
        what = cuda_use(ctx, call) if maybe else None
        runs_model = what is None and isinstance(call.func, cst.Attribute) and ctx.is_per_sample(call)
        if runs_model:
            what = cuda_model_call(ctx, call)
        if what is None or is_test_code(ctx, call) or (runs_model and context[0] != "sample") \
                or main_process_only(ctx, call):
            continue
        statement = next(
            (a for a in ctx.ancestors(call) if isinstance(a, (cst.SimpleStatementLine, cst.BaseCompoundStatement))), None
        )
        if statement is not None:
            if id(statement) in seen_statements:
                continue  # one finding per statement
            seen_statements.add(id(statement))
        kind, where = context
        if kind == "init" and not (what.startswith(("`.cuda()", "`.to(", "`device=")) and kept_on_instance(ctx, call)):
            continue  # pinning, a CUDA query, or CUDA data the dataset does not keep: its workers never touch CUDA
        if kind == "init" and main_process_only_attribute(ctx, call):
            continue  # kept for the main process alone (class weights for the loss): no worker reads it
        if not asked:  # the project's answer, asked once at the first site
            asked = True
            if workers_not_forked(ctx.view.project_start_methods()) or not ctx.view.project_may_start_workers():
                return  # the project starts its processes with spawn/forkserver, or no loader of it starts workers
        yield call, what, kind, where


FORK_ERROR = ("`RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
              "you must use the 'spawn' start method`")


def cuda_message(kind: str, what: str, where: str) -> str:
    """DSL204's message for CUDA work ``what`` in loading code of ``kind`` (``cuda_sites``)."""
    if kind == "init":
        return (f"{what} in {where}: building the dataset initialises CUDA in the main process and puts "
                f"CUDA data on it; forked DataLoader workers that use it fail with {FORK_ERROR}")
    return (f"{what} in code that runs in DataLoader workers ({where}): with fork workers after the "
            f"main process initialised CUDA this raises {FORK_ERROR}")


# DSL204's cases for a dataset's ``__init__`` that uses the GPU for a while and keeps only what it
# brings back to the host (a model moved in place and deleted, features ``.cpu()``-ed, a number)
TEMPORARY_CUDA_VALID = """
    import torch
    from torch.utils.data import Dataset

    class Encoded(Dataset):
        def __init__(self, clips, encoder, device="cuda"):
            encoder.to(device)
            self.feats = []
            for clip in clips:
                batch = clip.to(device)
                self.feats.append(encoder(batch).cpu())
                points = clip.cuda().unsqueeze(0)
                points = encoder(points).cpu().numpy()[0]
                self.feats.append(points)
            self.scale = float(torch.ones(3, device=device).sum())
            del encoder

        def __getitem__(self, idx):
            return self.feats[idx]
"""
# a custom batch's pin_memory (called by the DataLoader's pin thread in the main process)
PINNED_BATCH_VALID = """
    import torch
    from torch.utils.data import DataLoader

    class Batch:
        def __init__(self, data):
            self.inp = torch.stack(data)

        def pin_memory(self):
            self.inp = self.inp.pin_memory()
            return self

    def collate(batch):
        return Batch(batch)

    loader = DataLoader(list(range(8)), collate_fn=collate, num_workers=2, pin_memory=True)
"""
# ... and one that keeps the CUDA data, through a local name (also one rebound on one branch only,
# or read in the loop's next turn) or a local dict it stores
KEPT_CUDA_INVALID = """
    import torch
    from torch.utils.data import Dataset

    class Cached(Dataset):
        def __init__(self, clips, device="cuda"):
            self.feats = []
            for clip in clips:
                moved = clip.to(device)  # expect: DSL204
                self.feats.append(moved * 2)
                maybe = clip.cuda()  # expect: DSL204
                if len(clips) > 3:
                    maybe = maybe.cpu()
                self.feats.append(maybe)
            last = None
            for clip in clips:
                if last is not None:
                    self.feats.append(last)
                last = clip.cuda()  # expect: DSL204
            table = {}
            table["mean"] = torch.ones(2).cuda()  # expect: DSL204
            self.table = table

        def __getitem__(self, idx):
            return self.feats[idx]
"""


# DSL204's cases for a collate handed over as a method of the loader's dataset object (its class
# known from an annotation), which runs the subclasses' overrides, with a device a script of
# another file passes to the constructor and a base class keeps through ``super().__init__``
_RECORDS = """
    from torch.utils.data import Dataset

    class Records(Dataset):
        def __init__(self, items, device=None):
            self.items = items
            self.device = device
        def __getitem__(self, idx):
            return self.items[idx]
        def batch(self, examples):
            return self.pack(examples)
"""
_BATCHES = """
    from torch.utils.data import DataLoader
    from base import Records

    class Batches(DataLoader):
        def __init__(self, data: Records, workers: int):
            collate = data.batch
            super().__init__(data, batch_size=8, collate_fn=collate, num_workers=workers)
"""
OBJECT_COLLATE_INVALID = {
    "base.py": _RECORDS,
    "lines.py": """
        import torch
        from base import Records

        class Lines(Records):
            def __init__(self, items, device=None):
                super().__init__(items, device=device)
            def pack(self, examples):
                return torch.tensor(examples).to(self.device)  # expect: DSL204

        class Pairs:
            def __getitem__(self, idx):
                return idx
            def batch(self, examples):
                return torch.tensor(examples).cuda()  # expect: DSL204

        class Rows:
            def __getitem__(self, idx):
                return idx
            def stack(self, rows):
                return torch.tensor(rows).cuda()  # expect: DSL204
    """,
    "rows.py": """
        from torch.utils.data import DataLoader

        class RowIterator:
            def __init__(self, data, workers):
                self.loader = DataLoader(data, collate_fn=data.stack, num_workers=workers)
    """,
    "batches.py": _BATCHES,
    "train.py": """
        import torch
        from torch.utils.data import DataLoader
        from lines import Lines, Pairs, Rows
        from rows import RowIterator

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        data = Lines(["a", "b"], device=device)
        rows = RowIterator(Rows(), 2)

        class Module:
            def setup(self):
                self.pairs = Pairs()
            def loader(self, workers):
                return DataLoader(self.pairs, collate_fn=self.pairs.batch, num_workers=workers)
    """,
    # a collate whose device a partial binds; a model put on the GPU handed to the dataset
    "pad.py": """
        import torch

        def pad(batch, device=None):
            return torch.stack(batch).to(device)  # expect: DSL204

        def pad_to(batch, device):
            return torch.stack(batch).to(device)  # expect: DSL204
    """,
    "features.py": """
        from torch.utils.data import Dataset

        class Features(Dataset):
            def __init__(self, items, encoder):
                self.items = items
                self.encoder = encoder
            def __getitem__(self, idx):
                return self.encoder(self.items[idx])  # expect: DSL204

        class Tokens(Dataset):
            def __init__(self, items, device="cpu"):
                self.items = items
                self.device = device
            def __getitem__(self, idx):
                return self.items[idx].to(self.device)  # expect: DSL204

        class Scored(Dataset):
            def __init__(self, items, build, device="cpu"):
                self.items = items
                self.scorer = build().to(device)  # expect: DSL204
                self.tokens = Tokens(items, device=device)  # a project class keeps the device
            def __getitem__(self, idx):
                return self.scorer(self.items[idx])  # expect: DSL204
    """,
    "script.py": """
        import argparse
        from features import Scored, Tokens

        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cuda:0")
        args = parser.parse_args()
        tokens = Tokens([], args.device)
        scored = Scored([], tokens.build, device=args.device)
    """,
    "fit.py": """
        import functools
        import torch
        from torch.utils.data import DataLoader
        from features import Features
        from pad import pad, pad_to

        def fit(items, build, workers):
            encoder = build().eval()
            encoder.cuda()
            data = Features(items, encoder)
            first = DataLoader(data, collate_fn=lambda b: pad_to(b, "cuda:0"), num_workers=workers)
            return DataLoader(data, collate_fn=functools.partial(pad, device="cuda"), num_workers=workers)
    """,
}
# silent: the only device passed is the CPU; an object's collate whose loader never forks workers
OBJECT_COLLATE_VALID = {
    "base.py": _RECORDS,
    "lines.py": """
        import torch
        from torch.utils.data import Dataset
        from base import Records

        class Lines(Records):
            def pack(self, examples):
                return torch.tensor(examples).to(self.device)

        class Pairs(Dataset):
            def __getitem__(self, idx):
                return idx
            def batch(self, examples):
                return torch.tensor(examples).cuda()

        class Rows:
            def __getitem__(self, idx):
                return idx
            def stack(self, rows):
                return torch.tensor(rows).cuda()
    """,
    "rows.py": """
        from torch.utils.data import DataLoader

        class RowIterator:
            def __init__(self, data):
                self.loader = DataLoader(data, collate_fn=data.stack, num_workers=0)
    """,
    "batches.py": _BATCHES,
    "train.py": """
        from torch.utils.data import DataLoader
        from lines import Lines, Pairs, Rows
        from rows import RowIterator

        rows = RowIterator(Rows())
        data = Lines(["a", "b"], device="cpu")
        pairs = Pairs(["a"])
        loader = DataLoader(pairs, collate_fn=pairs.batch, num_workers=0)
    """,
    # the partial binds the CPU; the model handed to the dataset stays on the CPU
    "pad.py": """
        import torch

        def pad(batch, device=None):
            return torch.stack(batch).to(device)

        def pad_to(batch, device):
            return torch.stack(batch).to(device)
    """,
    "features.py": """
        from torch.utils.data import Dataset

        class Features(Dataset):
            def __init__(self, items, encoder):
                self.items = items
                self.encoder = encoder
            def __getitem__(self, idx):
                return self.encoder(self.items[idx])

        class Tokens(Dataset):
            def __init__(self, items, device="cpu"):
                self.items = items
                self.device = device
            def __getitem__(self, idx):
                return self.items[idx].to(self.device)

        class Scored(Dataset):
            def __init__(self, items, build, device="cpu"):
                self.items = items
                self.scorer = build().to(device)
            def __getitem__(self, idx):
                return self.scorer(self.items[idx])
    """,
    "script.py": """
        import argparse
        from features import Scored, Tokens

        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cpu", choices=["cpu", "mps"])
        args = parser.parse_args()
        tokens = Tokens([], args.device)
        scored = Scored([], tokens.build, device=args.device)
    """,
    "fit.py": """
        import functools
        from torch.utils.data import DataLoader
        from features import Features
        from pad import pad, pad_to

        def fit(items, build, model, workers):
            data = Features(items, build().eval())
            model.cuda()
            first = DataLoader(data, collate_fn=lambda b: pad_to(b, "cpu"), num_workers=workers)
            return DataLoader(data, collate_fn=functools.partial(pad, device="cpu"), num_workers=workers)
    """,
}
