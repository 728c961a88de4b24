"""semantics/values.py: what a DataLoader argument can be, followed through the ways
real code passes it (argparse, parameters and their callers, config objects,
``**kwargs`` dicts, conditional expressions)."""

from __future__ import annotations

import textwrap

import pytest

from dslint.check_file import file_contexts
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.values import possible_arg
from tests.conftest import check_tree, write_files


def _loader_arg(tmp_path, source: str, name: str, index: int = 0):
    path = tmp_path / "train.py"
    text = HEADER + textwrap.dedent(source).lstrip("\n")
    path.write_text(text)
    ctx = file_contexts({str(path): text})[str(path)]
    bound = ctx.dataloader_calls()[index]
    return possible_arg(ctx, bound, name)


def _values(found):
    return sorted({repr(v.value) for v in found.values})


HEADER = "import argparse\nfrom torch.utils.data import DataLoader\n"


def test_literal_and_absent_argument(tmp_path):
    found = _loader_arg(tmp_path, "DataLoader(ds, num_workers=4)\n", "num_workers")
    assert found.known == 4
    absent = _loader_arg(tmp_path, "DataLoader(ds)\n", "num_workers")
    assert absent.known == 0 and absent.values[0].origin == "the default"


def test_argparse_default_is_possible_but_not_known(tmp_path):
    source = """
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-workers", type=int, default=0)
    args = parser.parse_args()
    DataLoader(ds, num_workers=args.num_workers)
    """
    found = _loader_arg(tmp_path, source, "num_workers")
    assert found.known is UNKNOWN and not found.complete
    zero = found.can_be(lambda v: v == 0)
    assert zero is not None and zero.origin == "the default of `--num-workers`"


def test_argparse_namespace_handed_to_a_function(tmp_path):
    source = """
    def main(opts):
        return DataLoader(ds, num_workers=opts.workers, persistent_workers=opts.persist)

    if __name__ == "__main__":
        p = argparse.ArgumentParser()
        p.add_argument("--workers", dest="workers", default=2, choices=[0, 2, 4])
        p.add_argument("--persist", action="store_true")
        main(p.parse_args())
    """
    workers = _loader_arg(tmp_path, source, "num_workers")
    assert _values(workers) == ["0", "2", "4"] and workers.complete
    persist = _loader_arg(tmp_path, source, "persistent_workers")
    assert _values(persist) == ["False", "True"]


def test_argparse_namespace_a_function_of_the_file_returns(tmp_path):
    """``args = parse_args()`` then ``main(args)``: the options are what the file's own
    ``parse_args`` returns (through its local ``args``, on either branch)."""
    source = """
    def parse_args(argv=None):
        parser = argparse.ArgumentParser()
        parser.add_argument("--dataloader_num_workers", type=int, default=0)
        if argv is not None:
            args = parser.parse_args(argv)
        else:
            args = parser.parse_args()
        return args

    def main(args):
        return DataLoader(ds, num_workers=args.dataloader_num_workers)

    if __name__ == "__main__":
        args = parse_args()
        main(args)
    """
    found = _loader_arg(tmp_path, source, "num_workers")
    assert _values(found) == ["0"] and not found.complete
    assert found.values[0].origin == "the default of `--dataloader_num_workers`"


def test_an_option_the_code_sets_again_can_be_what_it_sets(tmp_path):
    """``args.workers = min(16, os.cpu_count())`` when the option was left out: the attribute can
    be the option's default or what the file assigns (unknown here, so the answer is open)."""
    source = """
    import os

    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("-j", "--workers", type=int, default=None)
        return parser.parse_args()

    def main(args):
        if not isinstance(args.workers, int):
            args.workers = min(16, os.cpu_count())
        return DataLoader(ds, num_workers=args.workers)

    main(parse_args())
    """
    found = _loader_arg(tmp_path, source, "num_workers")
    assert [v.value for v in found.values] == [None, UNKNOWN] and not found.complete


def test_a_function_returning_something_else_is_not_an_options_namespace(tmp_path):
    source = """
    def load_config(path):
        return json.load(open(path))

    def main(cfg):
        return DataLoader(ds, num_workers=cfg.workers)

    main(load_config("c.json"))
    """
    assert _loader_arg(tmp_path, source, "num_workers").values == ()


def test_parameter_default_and_callers(tmp_path):
    source = """
    def make_loader(ds, workers=4):
        return DataLoader(ds, num_workers=workers)

    train = make_loader(ds)
    evaluate = make_loader(ds, 0)
    """
    found = _loader_arg(tmp_path, source, "num_workers")
    assert _values(found) == ["0", "4"] and not found.complete


def test_conditional_expression_and_or(tmp_path):
    source = """
    def f(debug, n):
        a = DataLoader(ds, num_workers=0 if debug else 8)
        b = DataLoader(ds, num_workers=n or 2)
    """
    assert _values(_loader_arg(tmp_path, source, "num_workers", 0)) == ["0", "8"]
    second = _loader_arg(tmp_path, source, "num_workers", 1)
    assert _values(second) == ["2"] and not second.complete


def test_not_of_a_value_negates_each_value(tmp_path):
    """``shuffle=not deterministic``: the negation of every value the parameter can take (its
    default and what the callers pass), as incomplete as they are."""
    source = """
    def load(ds, deterministic=False):
        return DataLoader(ds, shuffle=not deterministic)

    load(ds, deterministic=True)
    """
    found = _loader_arg(tmp_path, source, "shuffle")
    assert _values(found) == ["False", "True"] and not found.complete
    fixed = _loader_arg(tmp_path, "DataLoader(ds, shuffle=not False)\n", "shuffle")
    assert fixed.known is True


def test_kwargs_dict_with_key_assignments_and_update(tmp_path):
    source = """
    def f(n):
        kw = dict(batch_size=32, num_workers=0)
        kw["persistent_workers"] = True
        kw.update(pin_memory=True)
        return DataLoader(ds, **kw)
    """
    assert _loader_arg(tmp_path, source, "num_workers").known == 0
    assert _loader_arg(tmp_path, source, "persistent_workers").known is True
    assert _loader_arg(tmp_path, source, "pin_memory").known is True
    assert _loader_arg(tmp_path, source, "drop_last").known is False  # the dict is closed: the default


def test_kwargs_dict_bound_more_than_once_or_by_a_conditional(tmp_path):
    """Each dict that reaches the call is a path: with all but one empty, that one's keys are
    possible, not known (elsewhere they are absent: the default); the dict bound before is not
    among them. Two dicts with entries stay unknown: one flat dict would pair their keys."""
    source = """
    def f(opt, cuda):
        kw = dict(num_workers=0, drop_last=True)
        data = Images(**kw)
        kw = {"num_workers": opt.workers, "persistent_workers": True} if cuda else {}
        return DataLoader(data, **kw)
    """
    workers = _loader_arg(tmp_path, source, "num_workers")
    assert workers.known is UNKNOWN and not workers.complete and "0" not in _values(workers)
    assert _values(_loader_arg(tmp_path, source, "persistent_workers")) == ["True"]
    assert _loader_arg(tmp_path, source, "persistent_workers").known is UNKNOWN
    assert _loader_arg(tmp_path, source, "drop_last").known is False  # both dicts are closed: the default
    branches = """
    def f(cfg, sampler):
        if cfg.batched:
            extra = {"batch_sampler": sampler, "shuffle": False}
        else:
            extra = {"sampler": sampler, "batch_size": 8}
        return DataLoader(data, num_workers=2, **extra)
    """
    (tmp_path / "branches").mkdir()
    for key in ("batch_size", "shuffle"):
        found = _loader_arg(tmp_path / "branches", branches, key)
        assert found.known is UNKNOWN and _values(found) == []


def test_kwargs_dict_handed_elsewhere_is_open(tmp_path):
    source = """
    def f(n):
        kw = {"num_workers": 0}
        tweak(kw)
        return DataLoader(ds, **kw)
    """
    assert _loader_arg(tmp_path, source, "num_workers").known == 0
    assert _loader_arg(tmp_path, source, "drop_last").known is UNKNOWN


def test_config_class_defaults_and_overrides(tmp_path):
    source = """
    from dataclasses import dataclass

    @dataclass
    class Config:
        workers: int = 0
        batch: int = 16

    cfg = Config(batch=64)
    DataLoader(ds, batch_size=cfg.batch, num_workers=cfg.workers)
    """
    assert _loader_arg(tmp_path, source, "num_workers").known == 0
    assert _loader_arg(tmp_path, source, "batch_size").known == 64


def test_dict_config_get_with_default(tmp_path):
    source = """
    cfg = {"batch_size": 8}
    DataLoader(ds, batch_size=cfg["batch_size"], num_workers=cfg.get("workers", 0))
    """
    assert _loader_arg(tmp_path, source, "batch_size").known == 8
    assert _loader_arg(tmp_path, source, "num_workers").known == 0


@pytest.mark.parametrize("expr", ["os.cpu_count()", "compute()", "args.workers", "self.workers"])
def test_unfollowable_values_are_unknown(tmp_path, expr):
    source = f"import os\nDataLoader(ds, num_workers={expr})\n"
    found = _loader_arg(tmp_path, source, "num_workers")
    assert not found.values and not found.complete and found.known is UNKNOWN


def test_reassigned_name_gives_every_value(tmp_path):
    source = """
    def f(fast):
        workers = 0
        if fast:
            workers = 8
        return DataLoader(ds, num_workers=int(workers))
    """
    found = _loader_arg(tmp_path, source, "num_workers")
    assert _values(found) == ["0", "8"]


def test_instance_attribute_stored_from_a_parameter(tmp_path):
    source = """
    class Wrapper:
        def __init__(self, num_workers: int = 0, prefetch_factor: int = 2):
            self.num_workers = num_workers
            self.prefetch_factor = prefetch_factor

        def build(self, ds):
            return DataLoader(ds, num_workers=self.num_workers, prefetch_factor=self.prefetch_factor)

        def widen(self):
            self.num_workers = 8
    """
    workers = _loader_arg(tmp_path, source, "num_workers")
    assert _values(workers) == ["0", "8"] and not workers.complete  # code elsewhere may set it too
    assert workers.can_be(lambda v: v == 0).origin == "the default of parameter `num_workers`"
    assert _values(_loader_arg(tmp_path, source, "prefetch_factor")) == ["2"]


def test_instance_attribute_bound_by_unpacking_is_unknown(tmp_path):
    source = """
    class Wrapper:
        def __init__(self, pair):
            self.workers, self.other = pair

        def build(self, ds):
            return DataLoader(ds, num_workers=self.workers)
    """
    assert _loader_arg(tmp_path, source, "num_workers").values == ()


def test_none_test_around_the_read_narrows(tmp_path):
    source = """
    class Wrapper:
        def __init__(self, sampler=None, batch_sampler=None):
            self.sampler = sampler if sampler is not None else RandomSampler()
            self.batch_sampler = batch_sampler

        def build(self, ds, sampler=None):
            if self.batch_sampler is None and sampler is None:
                return DataLoader(ds, sampler=sampler, batch_sampler=self.batch_sampler)
            if sampler is not None:
                return DataLoader(ds, sampler=sampler)
            else:
                return DataLoader(ds, sampler=sampler, batch_sampler=self.batch_sampler)

        def rebound(self, ds, sampler=None):
            if sampler is None:
                sampler = make_sampler()
                return DataLoader(ds, sampler=sampler)
    """
    first = _loader_arg(tmp_path, source, "batch_sampler", 0)
    assert first.complete and _values(first) == ["None"] and first.values[0].origin == "the test on line 9"
    assert _loader_arg(tmp_path, source, "sampler", 0).known is None
    assert _values(_loader_arg(tmp_path, source, "sampler", 1)) == []  # the default None is ruled out
    assert _loader_arg(tmp_path, source, "sampler", 2).known is None  # the else of a single `is not None`
    assert _values(_loader_arg(tmp_path, source, "batch_sampler", 2)) == ["None"] and not _loader_arg(
        tmp_path, source, "batch_sampler", 2).complete  # an `else` of another name's test decides nothing
    assert not _loader_arg(tmp_path, source, "sampler", 3).complete  # rebound in the branch: not narrowed


def test_a_config_kept_on_self_and_filled_in_by_the_class(tmp_path):
    """``self.cfg = args`` (a parameter) then ``if self.cfg.num_workers is None:
    self.cfg.num_workers = 0`` in a method: the loader's ``self.cfg.num_workers`` can be 0
    (``self_stores.nested_self_stores``), and ``self.cfg.prefetch_factor`` is the option's
    default, so the worker-only option raises there (DSL503)."""
    write_files(tmp_path, {"train.py": """
        import argparse
        from torch.utils.data import DataLoader

        class Runner:
            def setup(self, args):
                self.cfg = args
                if self.cfg.num_workers is None:
                    self.cfg.num_workers = 0

            def loader(self, ds):
                return DataLoader(ds, num_workers=self.cfg.num_workers, prefetch_factor=self.cfg.prefetch_factor)

        parser = argparse.ArgumentParser()
        parser.add_argument("--num_workers", type=int, default=None)
        parser.add_argument("--prefetch_factor", type=int, default=2)
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL503"]).diagnostics]
    assert found == [("DSL503", 11)]


def test_the_assignment_that_reaches_the_read_decides_a_rebound_parameter(tmp_path):
    """A parameter (or a name bound several times) assigned just before the read, in the read's
    own block with nothing binding it between, holds only that value there: ``sampler = None``
    replaces whatever a caller passed (and DSL501 stays silent beside ``shuffle=True``)."""
    source = """
    def val_loader(ds, sampler):
        # the distributed alternative was switched off:
        sampler = None
        return DataLoader(ds, shuffle=True, sampler=sampler)

    def maybe(ds, sampler, flag):
        if flag:
            sampler = None
        return DataLoader(ds, shuffle=True, sampler=sampler)

    def twice(ds, make):
        sampler = make(ds)
        sampler = None
        return DataLoader(ds, sampler=sampler)

    val_loader(ds, RandomSampler(ds))
    maybe(ds, RandomSampler(ds), True)
    """
    rebound = _loader_arg(tmp_path, source, "sampler", 0)
    assert rebound.complete and _values(rebound) == ["None"]
    assert not _loader_arg(tmp_path, source, "sampler", 1).complete  # bound in a branch: the parameter may reach
    assert _values(_loader_arg(tmp_path, source, "sampler", 2)) == ["None"]
    outcome = check_tree(tmp_path, select=["DSL501"])
    assert [(d.path, d.row) for d in outcome.diagnostics] == [("train.py", 11)]  # only `maybe`


def test_comparison_tests_passed_before_the_read_narrow(tmp_path):
    """``narrowing.narrow``: the ``else`` of a disjunction, a guard that returns, ``assert``,
    a pinning ``==``, a truth test and a mirrored comparison; a rebinding between the guard
    and the read undoes the guard."""
    source = """
    def build(args, ds, infer=False):
        workers = args.workers if hasattr(args, "workers") else 0
        if workers == 0 or infer:
            return DataLoader(ds, num_workers=workers)
        else:
            return DataLoader(ds, num_workers=workers)

    def guarded(ds, workers=0):
        if workers < 1:
            return ds
        return DataLoader(ds, num_workers=workers)

    def asserted(ds, workers=0):
        assert 0 < workers
        return DataLoader(ds, num_workers=workers)

    def truth(ds, workers=0):
        if workers:
            return DataLoader(ds, num_workers=workers)

    def rebound(ds, workers=0):
        if workers == 0:
            return ds
        workers = int(0)
        return DataLoader(ds, num_workers=workers)

    def member(ds, workers=0):
        if workers not in (0, 1):
            return DataLoader(ds, num_workers=workers)
    """
    assert _values(_loader_arg(tmp_path, source, "num_workers", 0)) == ["0"]  # the body of `or`: both arms
    assert _values(_loader_arg(tmp_path, source, "num_workers", 1)) == []  # `workers == 0` failed: not 0
    assert _values(_loader_arg(tmp_path, source, "num_workers", 2)) == []  # after `if workers < 1: return`
    assert _values(_loader_arg(tmp_path, source, "num_workers", 3)) == []  # after `assert 0 < workers`
    assert _values(_loader_arg(tmp_path, source, "num_workers", 4)) == []  # `if workers:`
    assert _values(_loader_arg(tmp_path, source, "num_workers", 5)) == ["0"]  # rebound after the guard
    assert _values(_loader_arg(tmp_path, source, "num_workers", 6)) == []


def test_a_pinning_test_makes_the_value_exact(tmp_path):
    source = """
    def build(ds, workers):
        if workers == 0:
            return DataLoader(ds, num_workers=workers)
    """
    found = _loader_arg(tmp_path, source, "num_workers")
    assert found.known == 0 and found.values[0].origin == "the test on line 4"


def test_stores_that_cannot_reach_the_read_are_left_out(tmp_path):
    """``reaching.cannot_reach``: a store in an arm that returns, and a binding in the other arm
    of one ``if``, never reach the read; inside a loop the other arm may run first."""
    source = """
    def build(opt, ds, make):
        workers = opt.workers if hasattr(opt, "workers") else 0
        if workers == 0:
            it = make(ds)
            it.workers = 0
            return it
        it = make(ds)
        it.workers = 4
        return DataLoader(it, num_workers=it.workers)

    def arms(ds, cpu):
        if cpu:
            n = 0
        else:
            n = 8
            return DataLoader(ds, num_workers=n)

    def looped(ds, cpus):
        for cpu in cpus:
            if cpu:
                n = 0
            else:
                loader = DataLoader(ds, num_workers=n)
                n = 8
    """
    assert _values(_loader_arg(tmp_path, source, "num_workers", 0)) == ["4"]
    assert _values(_loader_arg(tmp_path, source, "num_workers", 1)) == ["8"]
    assert _values(_loader_arg(tmp_path, source, "num_workers", 2)) == ["0", "8"]
