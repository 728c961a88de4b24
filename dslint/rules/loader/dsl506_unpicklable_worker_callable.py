"""DSL506: a lambda or local function/class given to a DataLoader with workers."""

from __future__ import annotations

from dslint.rules.base import ERROR, Rule, Symptom, Valid
from dslint.rules.loader._common import fork_context, fork_everywhere, forwarded_loader_calls
from dslint.semantics.library_loaders import OWN_COLLATE_LOADERS
from dslint.semantics.worker_counts import may_have_workers, workers_only_by_choice
from dslint.semantics.calls import SubclassInit, dataloader_constructions
from dslint.semantics.kwargs_dicts import entry_expressions
from dslint.semantics.loops import loader_loops
from dslint.semantics.returned_datasets import returned_datasets
from dslint.semantics.start_methods import main_is_unimportable
from dslint.semantics.unpicklable import (caller_callables, foreign_kept_callables, held_unpicklable, kept_callables, local_instance,
                                         local_instance_class, unloaded_kept_callables, unpicklable)


class UnpicklableWorkerCallable(Rule):
    """
    ## What it does
    Flags a `DataLoader` with workers (`num_workers` passed and not a literal 0) whose `collate_fn` or
    `worker_init_fn` is a lambda, a function defined inside another function, or an instance of a class defined
    inside a function (also through `functools.partial`; `None` on other branches), or whose `dataset` is an
    instance of a class defined inside a function. A call of a module-level project function (in this file or
    another) whose every `return` gives a function, class or lambda defined inside it (a collate or dataset-class
    *factory*, and its body ends with that `return`) counts as that nested function or class, and so does an
    instance of the class it returns. The finding points at that argument (at its entry in a `**` dict the file builds:
    `opts = dict(num_workers=2, worker_init_fn=seed)`; for a parameter handed on, `super().__init__(collate_fn=collate_fn)`,
    at the lambda each caller passes). MONAI's and PyG's loaders count as DataLoaders (PyG's installs its own `collate_fn`:
    only `worker_init_fn` and the dataset are judged there), and so do the constructions of a project subclass that hands `*args, **kwargs` on, and the calls of a project function (any file) that hands its
    `**kwargs` on unchanged to a DataLoader (`tally(ds, num_workers=2, collate_fn=pad)`), and the calls of a `functools.partial(DataLoader, ...)` (its arguments and the call's; reported once, at the partial).

    A dataset constructed with such a callable to keep counts too (also one that a `ConcatDataset`, `Subset` or
    `random_split` part given to the loader keeps): one given as an argument (a keyword only when it names a
    transform, `transform=`, `target_transform=`, also such a key of a `**` dict, or the project class keeps it on `self`: `Folder(root, degrade=lambda x: x)`), through names, lists filled with
    `append`/`extend`/`+=`, and transform containers (`T.Compose([T.Lambda(lambda x: 1 - x)])`, MONAI and albumentations alike, a project subclass of one, and a class of the
    project whose constructor keeps the argument on `self`, or a module-level function of the file that returns such a
    pipeline: `transform=get_transforms(64)`, each lambda of each pipeline it may return), or installed on it after construction by the code
    that builds the loader (`train_set.transform = T.Compose([...])`), or kept as a stage of a webdataset or torchdata
    pipeline (`wds.WebDataset(urls).map(lambda s: ...)`). The finding then points at the lambda or nested function;
    each problem of a loader is reported where its fix goes. So does a dataset whose own class keeps one from its `__init__` chain (`self.scale = lambda x: 2 * x`, `self.t = T.Compose([..., T.Lambda(lambda x: x * 2 - 1)])`,
    in a list, dict, `functools.partial` or `collections.defaultdict`, or an object of a project class it builds and keeps that keeps one: `self.reader = Reader(p)`, or the closure a module-level project function returns (the factories above: `self.namer = make_namer(root)`), or a construction given one as a `*transform*` keyword, also a part of a `ConcatDataset` or `Subset`, through local names (`ev = Omniglot(root, target_transform=lambda y: y + 964)`); or an object pickle cannot copy (a generator: a generator expression, a call of a project generator function or method, `Path.iterdir()`, `os.walk`, also in a list; a module, `self.rng = random`; a `functools.lru_cache` wrapper; an OpenCV object, `cv2.createCLAHE()`; also when a method of the class builds the DataLoader over `self`); or a parameter it keeps whose default is a lambda, `def __init__(self, paths, augment=lambda a: a)`, or a lambda fallback for one defaulting to `None` (`self.t = t or (lambda x: x)`, an `if t is None:` arm that stores one or rebinds `t` to one, whatever its `elif`/`else` arms store; in a chain ending in `else` that tests `t is not None` in a later arm, every other arm storing one: `if cache: self.t = make_namer(cache) elif t is not None: self.t = t else: self.t = make_namer(tmp)`), a fallback that may also be the closure a module-level project factory returns, when the construction leaves that argument out (a `**` dict the file builds passes only the keys it holds); for a name bound in several places, the class of any
    construction it may hold: `ds = Resized(**kw) if plain else Cropped(**kw)`; for `self.dataset`, each construction the class stores there when every store is one, `None` aside), and a dataset given, as its transform, an object of a project class (any file) that keeps one
    (reported at that object's construction); not when another store on some path replaces it, a subclass's `__init__` stores its own value there, or the class decides its own pickling (`__getstate__`).
    A dataset that a module-level function returns (whole, or an element of a returned tuple) to a DataLoader of
    another file whose `num_workers` is passed and not a literal 0, also in a `**` dict (`{"num_workers": n} if cuda else {}`) (`train_set, test_set = get_cifar10(root)`) is
    judged the same way in the function's file, where the fix goes (the preview-only forms are not told apart there; an instance of a class the function defines inside itself: at that class;
    each class the returned name may be built from, one finding per lambda). So is a lambda a class keeps from its own `__init__` (also a parameter's default that a construction there
    leaves out, also through a `**` dict it builds, or a default naming a module-level `identity = lambda x: x`:
    pickle looks it up as `<lambda>`), once, when another file's such DataLoader is built over it or a subclass; that file says nothing.

    A `DataLoader` subclass counts too: the `super().__init__(...)` call in its `__init__` is a DataLoader
    construction, and so is that of a subclass of it whose own `__init__` hands its parameters on by name.
    When the subclass forwards `**kwargs` to it, `num_workers` is its callers' choice, and a subclass
    is used like a DataLoader, so the workers count as possible: the subclass is flagged unless it pins
    `num_workers` to 0 (or builds the forwarded dict itself without `num_workers`).

    ## When it does not fire
    - Module-level functions and classes, `functools.partial` of a module-level function, bound methods.
    - A factory that may return anything else (a module-level function; for a factory of another file also
      `None` by falling off its end, or any decorator, which may change the result).
    - `num_workers` absent or `0`, a plain `DataLoader(...)` call whose workers come only from an unknown
      `**kwargs` (a function's own `**kwargs` counts when a call of it in the project passes `num_workers`,
      also through a function it is handed to by name: `make_loaders(cfg, build_loader)` calling
      `get_loader_fn(path, num_workers=n)`), an explicit `multiprocessing_context="fork"` (also `"fork" if
      num_workers > 0 else None`).
    - A Jupyter notebook: its code runs in a `__main__` without a file, so a spawned worker cannot import
      anything it defines, a module-level function neither; moving the lambda fixes nothing there.

    ## Preview
    With `--preview`, also a loader whose workers start only when a user asks for them by hand: every
    value the code shows for `num_workers` is 0, the default of a command-line option (argparse
    `default=`, `set_defaults`). Off by default: reviewers judged such findings true but not worth a
    change, since the worker path is one that no documented run takes.

    Also with `--preview`: a loader whose dataset or collate object (an instance of a project class)
    keeps a lock, thread, queue, open file or database handle (`h5py.File`, `lmdb.open`...) on `self`
    from its `__init__`, unless the class decides its own pickling (`__getstate__`, `__reduce__`).
    That object cannot reach a spawned worker either, so the loader works only with `fork` as
    written, and replacing the callable alone changes nothing.

    Also with `--preview`: a dataset class (on torch's, torchgeo's or MONAI's bases) that keeps such a lambda
    from its `__init__` (always, or as a parameter's default or fallback) when no DataLoader of the project is
    built over it (for a default: over a construction that leaves the parameter out). The project leaves
    that dataset to its users, and each of their DataLoaders with workers fails under spawn.

    ## Why is this bad?
    With the `spawn` or `forkserver` start method, each worker receives the dataset, `collate_fn` and
    `worker_init_fn` by pickling, and pickle stores a function by its importable name. A lambda or a local
    object has none, so starting the workers fails:

    - a lambda or nested function or class inside a function: `AttributeError: Can't pickle local object
      'make_loader.<locals>.<lambda>'` (or `'make_loader.<locals>.collate'`)
    - a lambda at module level: `_pickle.PicklingError: Can't pickle
      <function <lambda> at 0x...>: attribute lookup <lambda> on __main__ failed`

    (both after torch's warning `Got pickle error when attempting to start a
    worker Process`). `spawn` is the default on macOS and Windows, and
    `forkserver` is the Linux default from Python 3.14, so code that works with
    `fork` on Linux today fails there.

    ## Example
    ```python
    def make_loader(ds):
        def collate(batch):
            return pad(batch)
        return DataLoader(ds, num_workers=4, collate_fn=collate)
    ```

    ## Use instead
    Move the function (or class) to module level; bind its options with
    `functools.partial`:
    ```python
    def collate(batch, pad_value=0):
        return pad(batch, pad_value)

    def make_loader(ds):
        return DataLoader(ds, num_workers=4, collate_fn=functools.partial(collate, pad_value=0))
    ```

    ## References
    - Platform-specific behaviors of multi-process data loading (the PyTorch documentation, `torch.utils.data`)
    - What can be pickled (the Python documentation)
    """

    code = "DSL506"
    name = "unpicklable-worker-callable"
    symptom = Symptom("pickling", "PicklingError / Can't pickle local object under spawn/forkserver")
    level = ERROR
    summary = "A lambda or local function/class given to a DataLoader with workers"
    help = "Define the function or class at module level (bind options with `functools.partial`)"

    valid = (
        """
        import functools
        from torch.utils.data import DataLoader

        def collate(batch, pad=0):
            return batch

        loader = DataLoader(ds, num_workers=4, collate_fn=functools.partial(collate, pad=1))
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, collate_fn=lambda b: b)  # no workers: nothing is pickled
        zero = DataLoader(ds, num_workers=0, collate_fn=lambda b: b)
        plain = DataLoader(ds, num_workers=2, collate_fn=None if ds else print)  # None, or a picklable builtin
        """,
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, num_workers=2, collate_fn=lambda b: b, multiprocessing_context="fork")
        """,
        """
        from torch.utils.data import DataLoader

        class Collator:
            def __call__(self, batch):
                return batch

        def make(ds):
            return DataLoader(ds, num_workers=4, collate_fn=Collator())
        """,
        """
        from torch.utils.data import DataLoader

        def make(ds, collate, **kw):
            return DataLoader(ds, collate_fn=lambda b: collate(b), **kw)  # workers unknown
        """,
        Valid(
            """
            from torch.utils.data import Dataset

            class Scans(Dataset):  # a dataset left to its users: a form of --preview only
                def __init__(self, paths, transform=None):
                    self.paths = paths
                    self.transform = transform or (lambda x: x)
            """,
            preview=False,
        ),
        Valid(
            """
            import argparse
            from torch.utils.data import DataLoader

            parser = argparse.ArgumentParser()
            parser.add_argument("--workers", type=int, default=0)  # workers only when a user asks for them
            args = parser.parse_args()
            loader = DataLoader(ds, num_workers=args.workers, collate_fn=lambda b: b)
            """,
            preview=False,
        ),
    )
    invalid = (
        """
        from torch.utils.data import Dataset

        class Scans(Dataset):  # no DataLoader of the project: its users choose the workers
            def __init__(self, paths, transform=None):
                self.paths = paths
                if not transform:
                    self.transform = lambda x: x  # expect: DSL506
                elif callable(transform):
                    self.transform = transform
                else:
                    raise TypeError(transform)

            def __getitem__(self, i):
                return self.transform(self.paths[i])

            def __len__(self):
                return len(self.paths)
        """,
        {
            "collating.py": """
                from torch.utils.data import default_collate

                def make_collate(pad):
                    def collate(batch):
                        return default_collate([pad] + batch)
                    return collate
                """,
            "train.py": """
                from torch.utils.data import DataLoader
                from collating import make_collate

                def train_loader(ds, workers):
                    return DataLoader(ds, num_workers=workers, collate_fn=make_collate(0))  # expect: DSL506
                """,
        },
        """
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=lambda batch: batch)  # expect: DSL506
        """,
        """
        import torch.utils.data

        class ListLoader(torch.utils.data.DataLoader):
            def __init__(self, dataset, batch_size=1, **kwargs):
                super(ListLoader, self).__init__(
                    dataset, batch_size, collate_fn=lambda items: items, **kwargs  # expect: DSL506
                )
        """,
    )

    def check(self, ctx):
        if fork_everywhere(ctx) or main_is_unimportable(ctx.path):
            return  # (a notebook: nothing it defines reaches a spawned worker, a module-level function neither)
        index, reported = loader_loops(ctx), set()
        for bound in dataloader_constructions(ctx) + forwarded_loader_calls(ctx):  # (MONAI's, PyG's, pass-through)
            if not may_have_workers(ctx, bound) or (not self.preview_forms and workers_only_by_choice(ctx, bound)):
                continue
            if not self.preview_forms and any(held_unpicklable(ctx, bound.expr(p)) for p in ("dataset", "collate_fn")):
                continue  # the dataset (or collate object) cannot reach a spawned worker either
            if fork_context(ctx, index, bound):
                continue
            problems = []  # (what, problem, where: the argument, or the dict entry holding it when not passed)
            for param in ("collate_fn", "worker_init_fn"):  # passed, or an entry of a `**` dict the call unpacks
                if param == "collate_fn" and ctx.call_name(bound.call) in OWN_COLLATE_LOADERS:
                    continue  # the library drops it for its own
                given = [bound.expr(param)] if bound.passed(param) else entry_expressions(ctx, bound.call, param)
                problem = next(((unpicklable(ctx, index, e), e) for e in given if unpicklable(ctx, index, e)), None)
                if problem:
                    problems.append((f"`{param}`", problem[0], bound.arg(param) if bound.passed(param) else problem[1]))
            dataset = local_instance(ctx, index, bound.expr("dataset"))
            if dataset:
                problems.append(("the dataset", dataset, bound.arg("dataset")))
            for node, problem in [] if dataset else kept_callables(ctx, index, bound.expr("dataset")):
                problems.append(("the dataset", problem, node))  # reported at the lambda (or nested function) it keeps
            via = ""
            if isinstance(bound, SubclassInit) and not bound.passed("num_workers"):
                via = f" (`{bound.owner.name.value}` passes its callers' `num_workers` on through `**kwargs`)"
            # each problem where its fix goes: the argument as written (in the call or its partial: once), its
            # entry in a `**` dict, the lambda the dataset keeps; for a parameter handed on, what each caller passes
            for param, (what, error), arg in problems:
                for at in caller_callables(ctx, index, arg) or [arg or bound.call]:
                    if id(at) not in reported:
                        reported.add(id(at))
                        yield self.report(at, _message(f"{param} is {what}", via, error))
        for node, (what, error), path in foreign_kept_callables(ctx):  # this file's class, another file's loader
            if id(node) not in reported:
                reported.add(id(node))
                yield self.report(node, _message(f"the dataset is an instance of {what}", f" (a DataLoader with workers in `{path}` is built over one)", error))
        for node, (what, error), default in unloaded_kept_callables(ctx) if self.preview_forms else ():  # users' loaders
            if id(node) not in reported:
                reported.add(id(node))
                over = "a construction that leaves it out" if default else "it"
                yield self.report(node, _message(f"the dataset class {what}", f" (no DataLoader of this project is built over {over}: its users choose the workers)", error))
        for func, expr, module in returned_datasets(ctx):  # a dataset this file's factory returns to another file's loader
            for node, (what, error) in kept_callables(ctx, index, expr) or list(filter(None, [local_instance_class(ctx, index, expr)])):
                if id(node) not in reported:
                    reported.add(id(node))
                    yield self.report(node, _message(f"the dataset `{func.name.value}` returns is {what}", f" (module `{module}` hands it to a DataLoader with workers)", error))


def _message(what: str, via: str, error: str) -> str:
    return (f"{what}, which cannot be pickled{via}: with the spawn or forkserver start method (the default on macOS and "
            f"Windows, and on Linux from Python 3.14) starting the workers fails with `{error}`")
