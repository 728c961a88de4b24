"""DSL503: a worker-only DataLoader option while ``num_workers`` is 0."""

from __future__ import annotations

from typing import Iterator, Optional, Tuple

from dslint.edits import remove_args
from dslint.report import FixSpec
from dslint.rules.base import Invalid, Rule, Symptom, Valid
from dslint.rules.loader._common import fixed_by_code, forwarding_loader_calls, must_be, must_be_on_a_call, truthy, user_zero_workers, zero_workers
from dslint.semantics.builder_defaults import defaulted_option
from dslint.semantics.forced_zero import forced_zero_leftovers, leftovers_message
from dslint.semantics.kwargs_paths import path_entry, zero_paths
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.count_branches import option_handled
from dslint.semantics.loops import loader_loops
from dslint.semantics.worker_counts import zero_on_small_machines
from dslint.semantics.zero_arms import TORCH_ERRORS as ERRORS, WORKER_ONLY as SET, zero_arm_options


class WorkerOptionWithoutWorkers(Rule):
    """
    ## What it does
    Flags `prefetch_factor`, `persistent_workers=True`, `timeout > 0` or `multiprocessing_context` on a
    `DataLoader` (or a DataLoader subclass's `super().__init__`) whose `num_workers` is absent, a literal `0`,
    or can be 0 while the option is set on every path.

    "Can be 0" follows the value where the code passes it (argparse, a parameter's default and this file's calls, the literals
    other files pass to a module-level function, also in a `**` dict: `build(ds, **dict(per_gpu=0))`, `self.x` as the class stores it, a config class default, a `**kwargs` dict the file builds, the
    branches that assign it): an argparse option whose default is 0 counts as 0, and so does a value the code
    itself tests against 0 in another function (`if num_workers > 0:` in `__init__`: the author expects 0). The
    option must then be set on every path seen (`persistent_workers=True`, or a configuration's default: `cfg.get("persistent_workers", True)`;
    also in a `**` dict when 0 is certain; or in the dict one branch binds to a `**` name that another branch
    binds to a dict without it, while the call passes the count itself: reported at that entry). A function that forces
    `opts["num_workers"] = 0` in a caller's options dict spread into the loader (`**opts`), resetting some worker-only
    keys but never naming `prefetch_factor` (or another), keeps whatever the caller put there: it fires on that call.

    An option whose value is a conditional on the worker count itself is judged by the arm for 0 workers: `prefetch_factor=p if workers > 0 else 2` raises whenever the count is 0. A `**` name bound to a different dict on each
    path is judged path by path, with the keys written into it later in that path's branch or after the paths join (before the call): a path whose dict leaves `num_workers` 0 while a worker-only option may be set there raises whenever it runs (reported where that option is written).

    DataLoader subclasses that hand torch's arguments through (PyG's `DataLoader`, `DataListLoader`, `DenseDataLoader`, MONAI's,
    webdataset's `WebLoader`, a subclass of the same file whose `__init__(self, *args, **kwargs)` forwards both unchanged, a project function handing its `**kwargs` to one) are checked the same way.

    ## When it does not fire
    - A computed count (`max(1, n)`, `os.cpu_count()`), argparse `choices` that list every value, values this
      file's calls pass, a name the file does not bind, a parameter of a function (or class) of a module in no
      package that another project file's function calls: the project's calls decide it, as this file's would.
    - A loader built under a test of the count (`if workers > 0:`, the `else` of `if workers == 0 or infer:`), or
      after one that returns, raises or rebinds the count or the option (`if workers == 0: prefetch = None`; one
      that only sets another option handles that one; a store of 0 in an arm that returns does not reach the
      loader; a statement that divides by the count, `n / (batch * workers)`, raises first), an option set only
      with workers (`persistent_workers=workers > 0`), a forced 0 naming every key.

    ## Preview
    With `--preview`, a worker count the *user* sets also counts as one that can be 0 (users set 0 to debug,
    or on machines without shared memory): a setting read from a configuration (`cfg.workers`,
    `self.hparams["num_workers"]`, `args.workers` with `args` from `parse_args()`, `self.args.workers` stored
    from a parameter), or a parameter of a public function or class that no call in the file fills in
    (`def make_loader(ds, workers):`), followed through names, `self.x` stored in `__init__` and `**kwargs`
    dicts; the message says where it comes from. The option may be set on the path one of the file's calls
    takes (`4 if not test else None`, `test=False` passed). A builder whose count is a parameter without a
    default and whose own default turns `persistent_workers` on (`def build(ds, workers,
    persistent_workers=True)`, directly or via `kwargs[...] = ...` and `**kwargs`) counts. So does the CPU count
    less `k` (`os.cpu_count() - 1`, also inside `min(...)`; not `max(1, ...)`): 0 on a machine with `k` CPUs.

    These forms are off by default. Such a loader fails only when a user picks 0 workers by hand (or runs on a
    one-CPU machine), and then at once, with torch's explicit message; on public repositories whose shipped
    configurations all ask for workers, reviewers judged these findings true but not worth a change. Bug reports
    show that users do hit them (a 0 set to debug), which is why the forms stay available.

    ## Why is this bad?
    These options only mean something for worker processes, and torch rejects them without workers:

    `prefetch_factor` (`ValueError: prefetch_factor option could only be specified in multiprocessing`),
    `persistent_workers=True` (`ValueError: persistent_workers option needs num_workers > 0`),
    `multiprocessing_context` (`ValueError: ... can only be used with multi-process loading`);
    `timeout > 0` raises `AssertionError: _SingleProcessDataLoaderIter requires timeout == 0` at the first `iter()`.
    Often `num_workers` was meant to be set and was forgotten.

    ## Example
    ```python
    loader = DataLoader(ds, batch_size=64, persistent_workers=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(ds, batch_size=64, num_workers=4, persistent_workers=True)
    ```

    ## Fix safety
    When `num_workers` is certainly 0, the unsafe fix removes the worker-only options (the loader then runs in
    the main process): the author may have meant to add workers (`num_workers=4`) instead. When 0 is only one
    of the possible values there is no fix: removing the option would change the runs that have workers.
    """

    code = "DSL503"
    name = "worker-option-without-workers"
    symptom = Symptom("exception", "ValueError at construction, or AssertionError at first iter()")
    summary = "A worker-only DataLoader option is set while `num_workers` is 0"
    help = "Set `num_workers > 0`, or remove the worker-only options"

    valid = (
        Valid(
            """
            from torch.utils.data import DataLoader

            def make_loader(ds, cfg):  # only a user who picks 0 by hand hits it: a preview form
                return DataLoader(ds, num_workers=cfg.workers, persistent_workers=True)
            """,
            preview=False,
        ),
        """
        from torch.utils.data import DataLoader
        from torch_geometric.loader import DataLoader as GraphLoader

        loader = DataLoader(ds, num_workers=4, prefetch_factor=4, persistent_workers=True, timeout=30)
        loader = DataLoader(ds, num_workers=args.workers, persistent_workers=True)
        loader = DataLoader(ds, prefetch_factor=None, persistent_workers=False, timeout=0)
        loader = DataLoader(ds, persistent_workers=True, **loader_kwargs)
        graphs = GraphLoader(dataset, 32, True, None, None, num_workers=4, persistent_workers=True)
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader

        def build(ds, opt, phase):
            if phase == "train":
                args = {"dataset": ds, "num_workers": opt["workers"], "shuffle": True}
            else:
                args = {"dataset": ds, "batch_size": 1, "num_workers": 0}
            args["persistent_workers"] = opt.get("persistent_workers", True)  # expect: DSL503
            return DataLoader(**args)
        """,
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64, persistent_workers=True)  # expect: DSL503
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=64)  # expect: DSL503
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            WORKERS = 0
            loader = DataLoader(ds, num_workers=WORKERS, prefetch_factor=2)  # expect: DSL503
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader
            WORKERS = 0
            loader = DataLoader(ds, num_workers=WORKERS)  # expect: DSL503
            """,
        ),
        Invalid(
            """
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, timeout=10)  # expect: DSL503
            """,
            expected_replacement="""
            from torch.utils.data import DataLoader
            loader = DataLoader(ds)  # expect: DSL503
            """,
        ),
        """
        import argparse
        from torch.utils.data import DataLoader

        parser = argparse.ArgumentParser()
        parser.add_argument("--workers", type=int, default=0)
        args = parser.parse_args()
        loader = DataLoader(ds, num_workers=args.workers, persistent_workers=True)  # expect: DSL503
        """,
        """
        import sys
        from torch.utils.data import DataLoader

        def build(ds):
            if sys.platform == "linux":
                workers = 8
            else:
                workers = 0
            return DataLoader(ds, num_workers=workers, prefetch_factor=4)  # expect: DSL503

        def zero_arm(ds, n):  # the arm for 0 workers still sets the option
            return DataLoader(ds, num_workers=n, prefetch_factor=4 if n > 0 else 2)  # expect: DSL503
        def debug_loader(ds, opts, no_workers=False):  # the caller's prefetch_factor is kept
            if no_workers:
                opts["num_workers"] = 0
                opts["persistent_workers"] = False
            return DataLoader(ds, **opts)  # expect: DSL503
        """,
        """
        from torch.utils.data import DataLoader

        class Data:
            def __init__(self, workers: int = 8):
                self.workers = workers
                self.context = "spawn" if workers > 0 else None

            def train_loader(self):
                options = dict(batch_size=32, persistent_workers=True)
                return DataLoader(self.train_set, num_workers=self.workers, **options)  # expect: DSL503
        """,
        """
        from torch.utils.data import DataLoader

        class Data:
            def __init__(self, hparams, args):
                self.save_hyperparameters(hparams)
                self.args = args

            def _loader(self, ds):
                return DataLoader(ds, num_workers=self.hparams["num_workers"], persistent_workers=True)  # expect: DSL503

            def val_loader(self):
                options = dict(batch_size=8, num_workers=self.args.workers, persistent_workers=True)
                return DataLoader(self.val_set, **options)  # expect: DSL503

        def make_loader(ds, workers):
            return DataLoader(ds, num_workers=workers, prefetch_factor=2)  # expect: DSL503

        def build(ds, per_gpu, dist, gpus=1, persistent_workers=True, **kwargs):  # 0 workers per GPU fails
            workers = per_gpu
            if not dist:
                workers = gpus * per_gpu
            kwargs["persistent_workers"] = persistent_workers
            return DataLoader(ds, num_workers=workers, **kwargs)  # expect: DSL503
        """,
        Invalid(
            """
            from torch_geometric.loader import DataLoader as GraphLoader

            graphs = GraphLoader(dataset, 32, True, persistent_workers=True)  # expect: DSL503
            """,
            expected_replacement="""
            from torch_geometric.loader import DataLoader as GraphLoader

            graphs = GraphLoader(dataset, 32, True)  # expect: DSL503
            """,
        ),
    )

    def check(self, ctx):
        index = loader_loops(ctx)
        for bound in forwarding_loader_calls(ctx):
            arms = zero_arm_options(ctx, bound)
            for name, cond, value, truth, count in arms:
                yield self.report(cond, f"`{name}` is `{value!r}` when `{count}` is 0 (`{ctx.code(cond.test).strip()}` is "
                                  f"{str(truth).lower()} then), and the DataLoader raises {ERRORS[name]}")
            left = None if arms else forced_zero_leftovers(ctx, bound)
            if left:
                yield self.report(bound.call, leftovers_message(left))
            if arms or left:
                continue
            zero = zero_workers(ctx, index, bound) or (user_zero_workers(ctx, index, bound) if self.preview_forms else None)
            small = zero_on_small_machines(ctx, bound.expr("num_workers")) if self.preview_forms and not zero else None
            zero = zero or (f"is 0 on a machine with few CPUs (`{small}`)" if small else None)
            if zero is None:
                for each, found in zero_paths(ctx, bound, SET):
                    yield self.report(found[0][1], f"{' and '.join(f'`{o}`' for o, _ in found)} may be set while `num_workers` is 0 on the path "
                                      f"that binds the `**` dict on line {ctx.line(each)}: there the DataLoader raises {ERRORS[found[0][0]]}")
                continue
            certain = zero == "is 0"
            problems = [p for p in self._options(ctx, bound, certain, zero.startswith("comes from")) if p is not None and not option_handled(ctx, index, bound, p[1])]
            if zero.startswith("comes from"):  # the user's count: an option the code hard-codes, or a builder's default
                problems = [p for p in problems if fixed_by_code(ctx, bound, p[1]) or defaulted_option(ctx, bound, p[1])]
            if not problems:
                continue
            removed, fix = [bound.arg(p[1]) for p in problems], None
            if certain and all(arg is not None for arg in removed):
                fix = FixSpec("unsafe", f"Remove {', '.join(f'`{p[1]}`' for p in problems)}", remove_args(bound.call, removed))
            names = " and ".join(f"`{p[0]}`" for p in problems)
            tail = f"the DataLoader {'raises' if certain else 'then raises'} {problems[0][2]}"
            if zero.startswith("comes from"):
                tail = f"the DataLoader raises {problems[0][2]} when it is 0"
            yield self.report(path_entry(ctx, bound, [p[1] for p in problems]) or bound.call, f"{names} need{'s' if len(problems) == 1 else ''} worker processes but `num_workers` {zero}: {tail}", fix=fix)

    @staticmethod
    def _options(ctx, bound, certain: bool, user: bool) -> Iterator[Optional[Tuple[str, str, str]]]:
        """(shown, argument, error) per worker-only option set: with 0 certain, a value not known unset; else every value (one call's for a user's count)."""
        def given(name, is_set):
            if certain and bound.passed(name):
                value = ctx.value(bound, name)
                return value is UNKNOWN or is_set(value)
            return (must_be_on_a_call if user else must_be)(ctx, bound, name, is_set) is not None

        if given("prefetch_factor", SET["prefetch_factor"]):
            yield "prefetch_factor", "prefetch_factor", ERRORS["prefetch_factor"]
        persistent = must_be(ctx, bound, "persistent_workers", SET["persistent_workers"])
        if truthy(ctx.value(bound, "persistent_workers")) or persistent or defaulted_option(ctx, bound, "persistent_workers"):
            yield "persistent_workers=True", "persistent_workers", ERRORS["persistent_workers"]
        if given("multiprocessing_context", SET["multiprocessing_context"]):
            yield "multiprocessing_context", "multiprocessing_context", ERRORS["multiprocessing_context"]
        timeout = must_be(ctx, bound, "timeout", SET["timeout"])
        if timeout is not None:
            shown = f"timeout={timeout.values[0].value!r}" if len({v.value for v in timeout.values}) == 1 else "timeout"
            yield shown, "timeout", ERRORS["timeout"]
