"""DSL301 iter-returns-self: ``__iter__`` returns ``self``, so the one iterator is
exhausted after the first epoch."""

from __future__ import annotations

from dslint.rules.base import ERROR, Invalid, Rule, Symptom
from dslint.rules.iterable._common import iter_fix, iterable_classes, reiterated_message
from dslint.semantics.classes import all_methods, find_method, methods, reached_methods
from dslint.semantics.loops import is_test_code
from dslint.semantics.reiteration import reiterated_classes
from dslint.semantics.streams import advanced_state, assigned_attrs, mutated_attrs, reset_on_exhaustion, returns_self


class IterReturnsSelf(Rule):
    """
    ## What it does
    Flags `return self` in the `__iter__` of an `IterableDataset` subclass whose
    `__next__` advances state on the instance (a counter, a cursor, an iterator)
    and can raise `StopIteration`, when nothing resets that state for the next
    `iter()` call.

    Also flagged: the same `__iter__` of a class of this file that is no dataset
    (a DataLoader wrapper whose `__next__` returns `next(self._it)` over an
    `iter(loader)` made when it is built), when the code re-iterates an instance:
    a `for` over it, in full, inside a loop that does not rebind it, directly or
    through a function of this file that iterates it (`self._validate(val_iter)`
    on every step; see DSL302 for what counts).

    ## When it does not fire
    An `__iter__` that resets everything `__next__` advances before returning
    `self`, a `__next__` that resets its state right before raising
    `StopIteration`, state that another method of the class reassigns (a `reset()`
    the caller may use), endless streams (a `__next__` that never stops), and
    classes whose `__next__` is not in the checked file. DataPipes and test code
    (a `tests/` directory, `test_*.py`), whose fixture streams are built and
    drained once per test, are left alone.

    ## Why is this bad?
    The DataLoader calls `iter(dataset)` at the start of every epoch. When that
    returns the dataset itself, every epoch continues the *same* iterator, which
    the first epoch exhausted. Measured on torch 2.13 with 100 samples over 3
    epochs: `num_workers=0` gave 100/0/0 samples and `persistent_workers=True`
    gave 200/0/0 (two workers, unsharded). Plain workers gave 200/200/200 only
    because each epoch re-forks the untouched parent copy, which hides the bug
    until someone turns persistence on or debugs with `num_workers=0`. Nothing
    raises: the training loop just runs empty epochs.

    ## Example
    ```python
    class Lines(IterableDataset):
        def __init__(self, lines):
            self.lines = lines
            self.pos = 0

        def __iter__(self):
            return self

        def __next__(self):
            if self.pos >= len(self.lines):
                raise StopIteration
            self.pos += 1
            return self.lines[self.pos - 1]
    ```

    ## Use instead
    ```python
    class Lines(IterableDataset):
        def __init__(self, lines):
            self.lines = lines

        def __iter__(self):
            for line in self.lines:
                yield line
    ```

    ## Fix safety
    A fix is offered when `__iter__` is just `return self` (optionally after
    assigning attributes) and every attribute that `__next__` (or a method it
    calls) assigns or advances is set once at the top of `__init__` from
    literals and other attributes. It rewrites `__iter__` into a generator that
    resets those attributes to their `__init__` values and then drains
    `next(self)`, so every epoch restarts. It is unsafe:
    `iter(ds)` no longer returns `ds`, the reset re-evaluates the `__init__`
    expression (for example `iter(self.items)`), and code that relied on resuming
    a partly consumed stream will now start over.

    ## References
    - PyTorch docs: `torch.utils.data.IterableDataset`
    - [evidence: IT-1](../docs/evidence.md#it-1)
    """

    code = "DSL301"
    name = "iter-returns-self"
    symptom = Symptom("epoch_counts", "second epoch yields 0 samples (num_workers=0 or persistent workers)")
    level = ERROR
    summary = "`IterableDataset.__iter__` returns `self`, so only the first epoch has samples"
    help = "Make `__iter__` a generator (or return a fresh iterator) so every `iter()` call starts over"

    valid = (
        """
        from torch.utils.data import IterableDataset

        class Reset(IterableDataset):
            def __init__(self, n):
                self.n = n
                self.i = 0

            def __iter__(self):
                self.i = 0
                return self

            def __next__(self):
                if self.i >= self.n:
                    raise StopIteration
                self.i += 1
                return self.i
        """,
        """
        from torch.utils.data import IterableDataset

        class Gen(IterableDataset):
            def __iter__(self):
                for i in range(3):
                    yield i
                return self
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader

        class Batches:
            def __init__(self, loader):
                self.loader = loader
                self._it = iter(loader)

            def __iter__(self):
                return self  # expect: DSL301

            def __next__(self):
                return next(self._it)

        def validate(model, batches):
            for batch in batches:
                model(batch)

        def search(model, dataset, rates):
            batches = Batches(DataLoader(dataset, batch_size=8))
            for rate in rates:
                validate(model, batches)
        """,
        Invalid(
            """
            from torch.utils.data import IterableDataset, get_worker_info

            class Counter(IterableDataset):
                def __init__(self, n):
                    self.n = n
                    self.i = 0

                def __iter__(self):
                    return self  # expect: DSL301

                def __next__(self):
                    if self.i >= self.n:
                        raise StopIteration
                    self.i += 1
                    return self.i
            """,
            expected_replacement="""
            from torch.utils.data import IterableDataset, get_worker_info

            class Counter(IterableDataset):
                def __init__(self, n):
                    self.n = n
                    self.i = 0

                def __iter__(self):
                    self.i = 0
                    while True:
                        try:
                            sample = next(self)
                        except StopIteration:
                            return
                        yield sample  # expect: DSL301

                def __next__(self):
                    if self.i >= self.n:
                        raise StopIteration
                    self.i += 1
                    return self.i
            """,
        ),
        Invalid(
            {
                "base.py": """
                import torch.utils.data as tud

                class Stream(tud.IterableDataset):
                    pass
                """,
                "lines.py": """
                from base import Stream

                class Lines(Stream):
                    def __init__(self, lines):
                        self.lines = lines
                        self.pos = 0

                    def __iter__(self):
                        self.other = None
                        return self  # expect: DSL301

                    def __next__(self):
                        if self.pos >= len(self.lines):
                            raise StopIteration
                        line = self._advance()
                        return line

                    def _advance(self):
                        self.pos = self.pos + 1
                        return self.lines[self.pos - 1]
                """,
            },
            expected_replacement={
                "lines.py": """
                from base import Stream

                class Lines(Stream):
                    def __init__(self, lines):
                        self.lines = lines
                        self.pos = 0

                    def __iter__(self):
                        self.other = None
                        self.pos = 0
                        while True:
                            try:
                                sample = next(self)
                            except StopIteration:
                                return
                            yield sample  # expect: DSL301

                    def __next__(self):
                        if self.pos >= len(self.lines):
                            raise StopIteration
                        line = self._advance()
                        return line

                    def _advance(self):
                        self.pos = self.pos + 1
                        return self.lines[self.pos - 1]
                """,
            },
        ),
    )

    def check(self, ctx):
        wrappers = [(cls, found) for cls, _, found in reiterated_classes(ctx) if ctx.class_kind(cls) is None]
        reported = set()
        for cls, found in [(cls, None) for cls in iterable_classes(ctx)] + wrappers:
            iter_func = methods(cls).get("__iter__") if found is None else find_method(ctx, cls, "__iter__")
            if iter_func is None or ctx.regions.get(iter_func).is_generator:
                continue
            if is_test_code(ctx, cls):
                continue  # a test's fixture stream, built and drained once per test
            returns = returns_self(iter_func)
            if not returns:
                continue
            next_func = find_method(ctx, cls, "__next__")
            if next_func is None:
                continue  # defined elsewhere (unknown), or a different bug
            advancing = reached_methods(ctx, cls, next_func)
            advanced, stops = advanced_state(ctx, advancing)
            if not advanced or not stops:
                continue
            reset = reset_on_exhaustion(ctx, cls, advancing)
            init = find_method(ctx, cls, "__init__")
            for method in all_methods(ctx, cls):
                if method is init or any(method is f for f in advancing):
                    continue
                reset |= assigned_attrs(method)
            for method in reached_methods(ctx, cls, iter_func):
                reset |= assigned_attrs(method)
            missing = advanced - reset
            if not missing:
                continue
            ret = returns[0]
            if id(ret) in reported:
                continue
            reported.add(id(ret))
            names = ", ".join(f"`self.{a}`" for a in sorted(missing))
            message = (
                f"`__iter__` returns `self` and nothing resets {names}: every epoch continues the iterator the "
                "first epoch exhausted, so with `num_workers=0` or `persistent_workers=True` the second epoch "
                "yields 0 samples (non-persistent workers hide it by re-forking the parent's untouched copy)"
            ) if found is None else reiterated_message(
                ctx, f"`__iter__` returns `self` and nothing resets {names} for a new pass over a `{cls.name.value}`", found)
            to_reset = (advanced | mutated_attrs(advancing)) - assigned_attrs(iter_func)
            yield self.report(ret, message, fix=iter_fix(ctx, cls, iter_func, ret, to_reset))
