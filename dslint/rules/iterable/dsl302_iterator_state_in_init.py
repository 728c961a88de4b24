"""DSL302 iterator-state-in-init: an iterator made once in ``__init__`` (a file, a
reader, a cursor, a generator) is drained by ``__iter__``, so later epochs are empty."""

from __future__ import annotations

from typing import Set

from dslint.rules.base import ERROR, Rule, Symptom
from dslint.rules.iterable._common import (
    drained_init_iterators, iterable_classes, reiterated_message, state_message, wrapped_one_shots,
)
from dslint.semantics.loops import is_test_code
from dslint.semantics.reiteration import bound_name, drained_one_shots, reiterated_classes


class IteratorStateInInit(Rule):
    """
    ## What it does
    Flags a one-shot iterator created in an `IterableDataset`'s `__init__`, stored on `self` and drained
    by `__iter__` (or a method it calls): an open file, a `csv.reader`, a database cursor
    (`conn.execute(...)`, `cursor.execute(...)`), `iter(...)`, `map`/`zip`/`enumerate`/`filter`, an
    `itertools` iterator, a generator expression, a call to a generator function or method,
    `os.scandir`/`os.walk`/`glob.iglob`/`Path.glob`, or a chunked pandas reader. "Drained" means
    iterated by `for`, a comprehension, `yield from`, `next()`, an iterating builtin (`list`,
    `enumerate`, ...), or returned from `__iter__`.

    The iterator may also be made by a method that `__init__` calls and no other method reaches
    (`self._open()`), or by a function of this file whose every `return` hands back a fresh iterator
    (`return (parse(l) for l in f)`), or be passed in: `self.rows = rows` from a parameter of `__init__`
    at which some construction of the class in the project (any file) passes a generator expression,
    `iter()`/`map()`/..., or a call of a generator function. An `__iter__` that returns `self` drains
    what its `__next__` iterates.

    Also flagged: a DataPipe wrapper that re-iterates what it wraps every epoch (torchdata's / torch's
    `IterableWrapper`) built over a one-shot iterator: a generator (which cannot be deep-copied, so the
    wrapper falls back to the generator itself), or any other iterator when `deepcopy` is certainly
    false (every value seen is `False`; an unresolved one stays silent).

    Also flagged, outside datasets: a one-shot iterator bound once to a name (a generator, `iter(...)`,
    `map`/`zip`/..., a generator expression) that a loop drains again on every pass: a `for` over it
    inside a `for`/`while` that does not rebind the name, or a call in that loop handing it to a function
    of this file whose own `for` iterates that parameter (`for step ...: evaluate(model, held_out)`), or to a function of
    another project file that names it and whose `for` drains that parameter in full.
    The same for the iterator that a class of this file (a DataLoader wrapper, not a dataset) makes when
    built and drains in `__iter__`, when the code re-iterates an instance that way.

    ## When it does not fire
    An attribute that `__iter__` or any other method reassigns (or rewinds with `seek`) - it is renewed
    for the next epoch; endless iterators (`itertools.count`/`cycle`/`repeat`); a reader over a handle
    that a `with` block closed in `__init__`. A handle that is only read or seeked (not iterated) is
    DSL401's. Outside datasets: a `for` that stops early (`break`, `return`, `raise` in its body) takes
    a few items per pass and goes on with the stream on purpose; a loop that binds a new iterator each
    pass.

    ## Why is this bad?
    An iterator can be iterated once. The first epoch drains it; every later epoch gets an exhausted
    iterator. Measured on torch 2.13, 100 samples over 3 epochs: `iter(list)`, a generator, and a
    sqlite3 cursor gave 100/0/0 with `num_workers=0` and 200/0/0 with `persistent_workers=True`
    (non-persistent workers re-fork the parent's untouched copy each epoch and hide it). An open file or
    a `csv.reader` over one gave 100/0/0 in *every* configuration, including two plain workers: forked
    workers share the file offset, so the parent's copy is at end-of-file too. Nothing raises.

    ## Example
    ```python
    class Rows(IterableDataset):
        def __init__(self, path):
            self.reader = csv.reader(open(path))

        def __iter__(self):
            for row in self.reader:
                yield parse(row)
    ```

    ## Use instead
    ```python
    class Rows(IterableDataset):
        def __init__(self, path):
            self.path = path

        def __iter__(self):
            with open(self.path, newline="") as f:
                for row in csv.reader(f):
                    yield parse(row)
    ```

    ## References
    - PyTorch docs: `torch.utils.data.IterableDataset`
    - [evidence: IT-1](../docs/evidence.md#it-1)
    """

    code = "DSL302"
    name = "iterator-state-in-init"
    symptom = Symptom("epoch_counts", "second epoch yields 0 (or fewer) samples")
    level = ERROR
    summary = "An iterator made once in `__init__` is drained by `__iter__`, so later epochs are empty"
    help = "Create the iterator (open the file, run the query) inside `__iter__`, so every epoch gets a fresh one"

    valid = (
        """
        def batches(loader):
            for batch in loader:
                yield batch

        def main(model, loader, epochs):
            stream = batches(loader)
            for epoch in range(epochs):
                for i, batch in enumerate(stream):  # a few batches per pass: the stream goes on
                    if i == 10:
                        break
            for epoch in range(epochs):
                fresh = batches(loader)  # a new generator every pass
                for batch in fresh:
                    model(batch)
            for name, fresh in [("a", loader)]:  # the loop's own target: bound anew every pass
                for batch in fresh:
                    model(batch)
        """,
        """
        from torch.utils.data import IterableDataset

        class Items(IterableDataset):
            def __init__(self, items):
                self.items = items

            def __iter__(self):
                yield from self.items

        ds = Items([line for line in open("a.txt")])  # a list: iterated afresh every epoch
        """,
        """
        import csv
        from torch.utils.data import IterableDataset

        class Rows(IterableDataset):
            def __init__(self, path):
                self.path = path

            def __iter__(self):
                with open(self.path) as f:
                    for row in csv.reader(f):
                        yield row
        """,
        """
        from torch.utils.data import IterableDataset

        class Renewed(IterableDataset):
            def __init__(self, items):
                self.items = items
                self.it = iter(items)

            def __iter__(self):
                self.it = iter(self.items)
                yield from self.it
        """,
        """
        import csv
        from torch.utils.data import IterableDataset
        from torchdata.datapipes.iter import IterableWrapper

        class Reopened(IterableDataset):
            def __init__(self, path):
                self.path = path
                self._open()

            def _open(self):
                self.reader = csv.reader(open(self.path))

            def __iter__(self):
                self._open()  # a fresh reader every epoch
                yield from self.reader

        rows = IterableWrapper([1, 2, 3])
        copied = IterableWrapper(iter([1, 2, 3]))  # deepcopy=True copies the fresh iterator every epoch
        """,
    )
    invalid = (
        """
        from torch.utils.data import DataLoader

        def batches(loader):
            for batch in loader:
                yield batch

        def evaluate(model, data):
            for batch in data:
                model(batch)

        def main(model, dataset, steps):
            held_out = batches(DataLoader(dataset, batch_size=8))  # expect: DSL302
            for step in range(steps):
                if step % 100 == 0:
                    evaluate(model, held_out)
        """,
        """
        import csv
        from torch.utils.data import IterableDataset

        class Rows(IterableDataset):
            def __init__(self, path):
                self.reader = csv.reader(open(path))  # expect: DSL302

            def __iter__(self):
                for row in self.reader:
                    yield row
        """,
        """
        import itertools, sqlite3
        import torch.utils.data as tud

        class Query(tud.IterableDataset):
            def __init__(self, db):
                conn = sqlite3.connect(db)
                self.rows = conn.execute("SELECT x FROM t")  # expect: DSL302
                self.pairs = itertools.chain([1], [2])  # expect: DSL302
                self.lines = (l.strip() for l in open(db))  # expect: DSL302

            def __iter__(self):
                yield from self._rows()
                yield from enumerate(self.pairs)
                return_value = [l for l in self.lines]

            def _rows(self):
                for (x,) in self.rows:
                    yield x
        """,
        """
        from pathlib import Path
        from torch.utils.data import IterableDataset as ID

        class Files(ID):
            def __init__(self, root):
                self.root = Path(root)
                self.files = self.root.glob("*.txt")  # expect: DSL302
                self.gen = self._walk()  # expect: DSL302

            def _walk(self):
                yield 1

            def __iter__(self):
                first = next(self.gen)
                for f in self.files:
                    yield first, f
        """,
        """
        import csv
        from torch.utils.data import IterableDataset
        from torchdata.datapipes.iter import IterableWrapper

        class Rows(IterableDataset):
            def __init__(self, path):
                self._open(path)

            def _open(self, path):
                self.reader = csv.reader(open(path))  # expect: DSL302

            def __iter__(self):
                yield from self.reader

        def parsed(path):
            return (line.split(",") for line in open(path))

        pipe = IterableWrapper(parsed("a.csv"))  # expect: DSL302
        same = IterableWrapper(iter(load()), deepcopy=False)  # expect: DSL302
        """,
    )

    def check(self, ctx):
        reported: Set[int] = set()
        wrappers = [(cls, found) for cls, _, found in reiterated_classes(ctx) if ctx.class_kind(cls) is None]
        for cls, found in [(cls, None) for cls in iterable_classes(ctx)] + wrappers:
            for attr, node, flavour in drained_init_iterators(ctx, cls):
                if id(node) not in reported:
                    reported.add(id(node))
                    message = state_message(attr, flavour) if found is None else reiterated_message(
                        ctx, f"`self.{attr}` is a one-shot iterator made once, when the object is built", found)
                    yield self.report(node, message)
        for value, flavour, found in drained_one_shots(ctx):
            if not is_test_code(ctx, value):
                name = bound_name(ctx, value).value
                what = "a generator" if flavour == "generator" else "a one-shot iterator"
                yield self.report(value, reiterated_message(ctx, f"`{name}` is {what} made once here", found))
        yield from self._wrapped_iterators(ctx)

    def _wrapped_iterators(self, ctx):
        """``IterableWrapper(one_shot_iterator, ...)``: the pipe re-iterates a drained iterator."""
        for call, message in wrapped_one_shots(ctx):
            yield self.report(call, message)
