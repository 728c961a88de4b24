"""DSL704: a padding (or dropping) ``DistributedSampler`` under an evaluation whose results are gathered."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.semantics.handed_evals import gathered_eval_samplers
from dslint.semantics.loader_roles import factory_eval_findings


class DistributedSamplerOnGatheredEval(Rule):
    """
    ## What it does
    Flags a `torch.utils.data.DistributedSampler` (with its default padding,
    or with `drop_last=True`) on a loader that feeds an evaluation whose
    results are combined across ranks:

    - the evaluation: a loop in this file (also in a same-file helper the
      loader is passed to) over a loader whose `DistributedSampler` does not
      shuffle (`shuffle=False`), and that no training loop (one that calls
      `.backward()`) iterates; typically under `torch.no_grad()` or after
      `model.eval()`;
    - the gathering: `all_gather`, `all_gather_object`, `all_reduce`,
      `gather_object`..., accelerate's `gather`/`reduce`, or a project function
      (any file) that calls them, in the evaluating function or a function
      that calls it;
    - or the evaluation is a project function of another file (see below).

    ## Why is this bad?
    `DistributedSampler` gives every rank `ceil(len / world_size)` indices: it
    pads the index list by repeating its first samples (or, with
    `drop_last=True`, drops the last `len % world_size`). When the dataset
    length does not divide the world size, the gathered predictions hold up
    to `world_size - 1` samples twice (or miss them), so accuracy, counts and
    per-sample outputs are off. Measured with 2 gloo ranks over 63 samples:
    64 samples were evaluated, 1 of them twice, against 63 and none twice with
    an unpadded shard. Nothing warns.

    ## Example
    ```python
    sampler = DistributedSampler(val_set, shuffle=False)
    loader = DataLoader(val_set, batch_size=64, sampler=sampler)
    correct = torch.zeros((), device=device)
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum()
    dist.all_reduce(correct)  # accuracy = correct / len(val_set)
    ```

    ## Use instead
    ```python
    mine = Subset(val_set, range(rank, len(val_set), world_size))  # no padding
    loader = DataLoader(mine, batch_size=64)  # the same loop and all_reduce as above
    ```
    Or keep the sampler and de-duplicate by sample index (`gather_for_metrics`).

    ## When it does not fire
    - the evaluation de-duplicates: `gather_for_metrics`, a slice bounded by
      a `len(...)` (gathered results cut back to the dataset length), the
      batch carries each sample's index (`for images, index in loader`) or
      the results are written by index (`index_copy_`, `scatter_`) or picked out by the first index of each
      sample id (`np.unique(ids, return_index=True)`): padded duplicates then land on the same entry;
    - the sampler shuffles (or may: a training sampler iterated once under
      `no_grad`, e.g. to fill a memory bank), or the loader also feeds a
      training loop; a project or library sampler (it may not pad);
    - evaluations that are not gathered (each rank reports its own shard),
      Lightning hooks; test code;
    - a loader handed to a function this project does not define (a
      library's `evaluate`), or handed by `*args`: what it does is unknown.

    A loader handed to a project function of another file counts when that
    function iterates the parameter without `.backward()` or de-duplicating
    (the signs above, or results keyed by each sample's id: `{t["image_id"]:
    out ...}`) and gathers: a collective, a project function calling one, or a
    method (its own, or the same-named method of its module's classes on what
    it holds) of an object it builds from a project class that calls one.

    A loader factory counts without a gathering: a function (any file) building
    a `DistributedSampler(drop_last=True)` into every loader it returns (no
    branch), whose result a caller (any file, also through functions returning
    it) keeps under, or returns from, an evaluation name (`val_loader`,
    `self.valid_dataloader`, `def test_dataloader`; not with `world_size=1`).

    Possible and unknown values: the sampler's `shuffle` must be False on every
    path (a literal, or every value the project shows); a `shuffle` that may be
    True, or is unknown, stays silent. `drop_last` only chooses the message:
    when it can be True the finding says samples are dropped.
    """

    code = "DSL704"
    name = "distributed-sampler-on-gathered-eval"
    symptom = Symptom("dist_padding", "the gathered evaluation counts padded samples twice")
    level = ERROR
    summary = "A padding `DistributedSampler` feeds an evaluation whose results are gathered, so samples count twice"
    help = ("Shard the evaluation set without padding (each rank takes `range(rank, len, world_size)`), or "
            "de-duplicate the gathered results by sample index (`accelerator.gather_for_metrics`)")

    valid = (
        """
        from torch.utils.data import DataLoader, DistributedSampler

        def make_loader(ds, train=True):
            sampler = DistributedSampler(ds, drop_last=train)  # False for evaluation sets
            return DataLoader(ds, batch_size=32, sampler=sampler)

        def main(train_set, val_set):
            train_loader = make_loader(train_set)
            val_loader = make_loader(val_set, train=False)
        """,
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        def evaluate(model, ds):
            loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
            with torch.no_grad():
                correct = sum((model(x).argmax(1) == y).sum() for x, y in loader)
            return correct  # each rank reports its own shard: nothing gathered
        """,
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        @torch.no_grad()
        def evaluate(model, ds, world):
            loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
            preds = torch.cat([model(x) for x, _ in loader])
            out = [torch.empty_like(preds) for _ in range(world)]
            dist.all_gather(out, preds)
            return torch.stack(out, 1).flatten(0, 1)[: len(ds)]  # truncated to the dataset
        """,
        """
        import torch
        from torch.utils.data import DataLoader, DistributedSampler

        def train(model, ds, opt):
            loader = DataLoader(ds, sampler=DistributedSampler(ds))
            for x, y in loader:
                model(x).sum().backward()
                opt.step()
        """,
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        @torch.no_grad()
        def extract(model, ds, bank):
            loader = DataLoader(ds, sampler=DistributedSampler(ds, shuffle=False))
            for images, index in loader:  # each sample's index travels with it
                feats = model(images)
                everything = [torch.empty_like(feats) for _ in range(dist.get_world_size())]
                dist.all_gather(everything, feats)
                bank[index] = feats
        """,
        {
            "engine.py": """
            import torch
            import torch.distributed as dist

            @torch.no_grad()
            def validate(model, loader):
                results = {}
                for images, targets in loader:  # stored under each sample's id: duplicates merge
                    results.update({t["image_id"]: out for t, out in zip(targets, model(images))})
                gathered = [None] * dist.get_world_size()
                dist.all_gather_object(gathered, results)
                return gathered
            """,
            "main.py": """
            from torch.utils.data import DataLoader, DistributedSampler
            from engine import validate

            def main(model, val_set):  # evaluated in another file, which de-duplicates
                loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))
                print(validate(model, loader))
            """,
        },
        """
        import torch
        from torch.utils.data import DataLoader

        def evaluate(model, accelerator, ds):
            loader = accelerator.prepare(DataLoader(ds))
            with torch.no_grad():
                for x, y in loader:
                    preds = accelerator.gather_for_metrics(model(x))
        """,
    )
    invalid = (
        {
            "loaders.py": """
            from torch.utils.data import DataLoader, DistributedSampler

            def make_loader(ds, rank, world):
                sampler = DistributedSampler(ds, world, rank, drop_last=True)  # expect: DSL704
                return DataLoader(ds, batch_size=32, sampler=sampler)
            """,
            "train.py": """
            from torch.utils.data import Dataset
            from loaders import make_loader
            class Trainer:
                def __init__(self, train_set: Dataset, valid_set: Dataset, rank, world):
                    self.train_loader = self.loader(train_set, rank, world)
                    self.valid_loader = self.loader(valid_set, rank, world)
                def loader(self, ds, rank, world):
                    return make_loader(ds, rank, world)
            """,
        },
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        def evaluate(model, ds):
            sampler = DistributedSampler(ds, shuffle=False)  # expect: DSL704
            loader = DataLoader(ds, batch_size=64, sampler=sampler)
            correct = torch.zeros(())
            with torch.no_grad():
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum()
            dist.all_reduce(correct)
            return correct / len(ds)
        """,
        """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        def predict(model, loader):
            model.eval()
            outputs = []
            for (x,) in loader:
                outputs.append(model(x))
            return torch.cat(outputs)

        def main(model, test_set):
            sampler = DistributedSampler(test_set, shuffle=False, drop_last=True)  # expect: DSL704
            preds = predict(model, DataLoader(test_set, batch_size=32, sampler=sampler))
            everything = [None] * dist.get_world_size()
            dist.all_gather_object(everything, preds)
        """,
        {
            "meters.py": """
            import torch
            import torch.distributed as dist

            class Average:
                def __init__(self):
                    self.total, self.count = 0.0, 0

                def sync(self):
                    t = torch.tensor([self.total, self.count])
                    dist.all_reduce(t)
                    self.total, self.count = t.tolist()

            class Board:
                def __init__(self):
                    self.meters = {"acc": Average()}

                def sync(self):
                    for meter in self.meters.values():
                        meter.sync()  # the board merges each meter across ranks
            """,
            "engine.py": """
            import torch
            from meters import Board

            @torch.no_grad()
            def evaluate(model, loader):
                board = Board()
                for x, y in loader:
                    board.meters["acc"].total += (model(x).argmax(1) == y).sum().item()
                board.sync()
                return board
            """,
            "main.py": """
            import torch.distributed as dist
            from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler
            from engine import evaluate

            def main(args, model, val_set):
                if args.dist_eval:
                    sampler = DistributedSampler(val_set, shuffle=False)  # expect: DSL704
                else:
                    sampler = SequentialSampler(val_set)
                loader = DataLoader(val_set, batch_size=64, sampler=sampler)
                print(evaluate(model, loader))
            """,
        },
    )

    def check(self, ctx):
        reported = set()
        for sampler, message in gathered_eval_samplers(ctx):
            reported.add(id(sampler))
            yield self.report(sampler, message)
        for sampler, message in factory_eval_findings(ctx, reported):
            yield self.report(sampler, message)
