"""Can a DataLoader construction start worker processes?

``may_have_workers(ctx, bound)``: ``num_workers`` is passed and not known to be 0; or, in a
DataLoader subclass's ``super().__init__``, it may come from the subclass's callers through
``**kwargs``. A dict the file builds without ``num_workers`` does not count, nor does a
class defined inside a function whose every construction there passes no workers.
"""

from __future__ import annotations

import libcst as cst

from dslint.semantics.calls import UNKNOWN, SubclassInit
from dslint.semantics.forwarding import forwarded_option
from dslint.semantics.possible import is_zero


def may_have_workers(ctx, bound) -> bool:
    """See the module docstring."""
    if bound.passed("num_workers"):
        workers = ctx.value(bound, "num_workers")
        return workers is UNKNOWN or not (is_zero(workers) or workers is None or workers is False)
    if not isinstance(bound, SubclassInit) or not bound.has_star_kwargs:
        return False
    workers, open_ = forwarded_option(ctx, bound.call, "num_workers")
    if workers is not None and (workers.can_be(lambda v: not (v == 0 or v is None)) or not workers.complete):
        return True
    return open_ and not local_callers_pass_no_workers(ctx, bound.owner)


def local_callers_pass_no_workers(ctx, cls) -> bool:
    """A class defined inside a function is constructed only there: none of those calls passes
    ``num_workers`` (other than 0) or ``**kwargs``."""
    scope = ctx.enclosing_function(cls)
    if scope is None:
        return False
    for call in ctx.tree.scope_nodes(scope, cst.Call):
        if not (isinstance(call.func, cst.Name) and call.func.value == cls.name.value):
            continue
        for arg in call.args:
            if arg.star or (arg.keyword is not None and arg.keyword.value == "num_workers" and ctx.literal(arg.value) != 0):
                return False
    return True
