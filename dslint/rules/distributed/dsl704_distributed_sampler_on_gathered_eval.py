"""DSL704: a padding (or dropping) ``DistributedSampler`` under an evaluation whose results are gathered."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.distributed._common import torch_distributed_samplers
from dslint.semantics.calls import BoundCall
from dslint.semantics.distributed import eval_feeds, line_of
from dslint.semantics.loops import DISTRIBUTED_SAMPLER_SIGNATURE, is_test_code, loader_loops
from dslint.semantics.values import possible_arg


class DistributedSamplerOnGatheredEval(Rule):
    """
    ## What it does
    Flags a `torch.utils.data.DistributedSampler` (with its default padding,
    or with `drop_last=True`) on a loader that feeds an evaluation whose
    results are combined across ranks:

    - the evaluation: a loop over the loader under `torch.no_grad()` /
      `torch.inference_mode()` (a `with` block or a decorator), after a
      `model.eval()` call in the same function, or over a sampler built with
      `shuffle=False`; or the loader passed to a project function of another
      file that runs under `no_grad`/`inference_mode` or whose sampler does not
      shuffle;
    - the gathering: `all_gather`, `all_gather_object`, `all_reduce`,
      `gather_object`..., accelerate's `gather`/`reduce`, or a project function
      (any file) that calls them, in the evaluating function or the function
      that calls it.

    ## Why is this bad?
    `DistributedSampler` gives every rank `ceil(len / world_size)` indices: it
    pads the index list by repeating its first samples (or, with
    `drop_last=True`, drops the last `len % world_size`). When the dataset
    length does not divide the world size, the gathered predictions hold up
    to `world_size - 1` samples twice (or miss them), so accuracy, counts and
    per-sample outputs are off. Measured with 2 gloo ranks over 63 samples:
    64 samples were evaluated, 1 of them twice, against 63 and none twice
    with an unpadded shard. Nothing warns.

    ## Example
    ```python
    sampler = DistributedSampler(val_set, shuffle=False)
    loader = DataLoader(val_set, batch_size=64, sampler=sampler)
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum() for x, y in loader)
    dist.all_reduce(correct)
    accuracy = correct / len(val_set)
    ```

    ## Use instead
    ```python
    mine = Subset(val_set, range(rank, len(val_set), world_size))  # no padding
    loader = DataLoader(mine, batch_size=64)
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum() for x, y in loader)
    dist.all_reduce(correct)
    accuracy = correct / len(val_set)
    ```
    Or keep the sampler and de-duplicate the gathered results by sample index
    (accelerate's `gather_for_metrics` drops the padding).

    ## When it does not fire
    - the evaluation de-duplicates: `gather_for_metrics`, or a slice bounded
      by a `len(...)` in the evaluating or gathering function (truncating the
      gathered results to the dataset length);
    - a project or library sampler (it may not pad), a sampler that may be
      something else (`DistributedSampler(...) if args.dist_eval else
      SequentialSampler(...)` still counts: the distributed path pads);
    - evaluations that are not gathered (each rank reports its own shard), a
      gathering done through methods of objects defined in another file
      (`metric_logger.synchronize()`: not seen), training loops, Lightning
      hooks; test code.
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
        from torch.utils.data import DataLoader

        def evaluate(model, accelerator, ds):
            loader = accelerator.prepare(DataLoader(ds))
            with torch.no_grad():
                for x, y in loader:
                    preds = accelerator.gather_for_metrics(model(x))
        """,
    )
    invalid = (
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
        {
            "engine.py": """
            import torch
            import torch.distributed as dist
            from torch.utils.data import DataLoader

            def reduce_mean(t):
                dist.all_reduce(t)
                return t / dist.get_world_size()

            @torch.no_grad()
            def validate(model, loader: DataLoader):
                model.eval()
                losses = [model(x, y) for x, y in loader]
                return reduce_mean(torch.stack(losses).mean())
            """,
            "main.py": """
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler
            from engine import validate

            def main(args, model, val_set):
                val_sampler = DistributedSampler(val_set, shuffle=False, drop_last=True)  # expect: DSL704
                val_loader = DataLoader(val_set, batch_size=32, sampler=val_sampler)
                print(validate(model, val_loader))
            """,
        },
    )

    def check(self, ctx):
        if not ctx.dataloader_calls():
            return
        index = loader_loops(ctx)
        for loader in index.loaders:
            samplers = torch_distributed_samplers(ctx, index, loader)
            if not samplers or is_test_code(ctx, loader.call) or loader.framework_driven:
                continue
            feed = eval_feeds(ctx, index, loader, samplers)
            if feed is None:
                continue
            for sampler in samplers:
                drops = possible_arg(ctx, BoundCall(sampler, DISTRIBUTED_SAMPLER_SIGNATURE), "drop_last").can_be(
                    lambda v: v is True)
                off = ("drops the last `len % world_size` samples (`drop_last=True`), so up to `world_size - 1` "
                       "samples are never evaluated" if drops else
                       "pads every rank to `ceil(len / world_size)` samples by repeating the first ones, so up to "
                       "`world_size - 1` samples are evaluated and counted twice")
                yield self.report(
                    sampler,
                    f"this `DistributedSampler` feeds an evaluation ({feed[0]}) whose results are gathered "
                    f"({feed[1]}, line {line_of(ctx, feed[2])}): unless `len(dataset)` divides the world size it {off}; "
                    "shard without padding (each rank takes `range(rank, len, world_size)`) or de-duplicate the "
                    "gathered results by sample index",
                )
