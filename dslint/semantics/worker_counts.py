"""Can a DataLoader construction start worker processes?

``may_have_workers(ctx, bound)``: ``num_workers`` is passed and not known to be 0; or, in a
DataLoader subclass's ``super().__init__``, it may come from the subclass's callers through
``**kwargs``; or a ``**`` dict the file builds gives it a count that is not known to be 0
(``opts = dict(num_workers=2, ...)``; ``DataLoader(ds, **opts)``); or, in a module-level function that spreads its own ``**kwargs`` into a plain
``DataLoader(...)``, some call of that function in the project (any file the prefilter reads:
one that names the data API) passes ``num_workers`` (not a literal 0: ``get_loader(path, num_workers=4)``). A dict the file builds
without ``num_workers`` does not count, nor does a class defined inside a function whose every
construction there passes no workers.

``workers_only_by_choice(ctx, bound)``: the count is passed, and every value the code shows for it
is 0 (or ``None``/``False``), the default of a command-line option (argparse ``default=`` or
``set_defaults``): the loader starts workers only when someone passes the option by hand. (A
parameter's default does not count: callers in other files may pass a count, also through a dict.)

``worker_count_callees(tree, names)`` (phase 1, summary entry ``worker_kwargs``): the qualified
names of what this file calls with a ``num_workers`` keyword that is not a literal 0.

``capped_at_zero(ctx, expr)``: the count is ``min(..., 0)``: never more than 0.

``zero_on_small_machines(ctx, expr)``: the count is the CPU count less ``k`` (``os.cpu_count() - 1``,
also as an argument of ``min``, through a name bound once): 0 on a machine with ``k`` CPUs.
"""

from __future__ import annotations

import libcst as cst

from typing import Optional

from dslint.semantics.bindings import single_assignment
from dslint.semantics.calls import UNKNOWN, SubclassInit, literal_value
from dslint.semantics.forwarding import forwarded_option
from dslint.semantics.possible import is_zero
from dslint.semantics.values import expand_kwargs, possible_arg


def may_have_workers(ctx, bound) -> bool:
    """See the module docstring."""
    if bound.passed("num_workers"):
        return may_start_workers(ctx.value(bound, "num_workers"))
    if not bound.has_star_kwargs:
        return False
    workers = expand_kwargs(ctx, bound.call)[0].get("num_workers")  # a ``**`` dict this file builds
    if workers is not None:
        return workers.can_be(lambda v: not (v == 0 or v is None)) is not None or not workers.complete
    if not isinstance(bound, SubclassInit):
        func = _kwargs_owner(ctx, bound.call)
        return func is not None and ctx.view.workers_passed(ctx.qualname_of_def(func))
    workers, open_ = forwarded_option(ctx, bound.call, "num_workers")
    if workers is not None and (workers.can_be(lambda v: not (v == 0 or v is None)) or not workers.complete):
        return True
    return open_ and not local_callers_pass_no_workers(ctx, bound.owner)


def workers_only_by_choice(ctx, bound) -> bool:
    """See the module docstring."""
    if not bound.passed("num_workers"):
        return False
    found = possible_arg(ctx, bound, "num_workers")
    return bool(found.values) and not found.complete and all(
        not may_start_workers(v.value) and v.origin.startswith(("the default of `", "`set_defaults(")) for v in found.values)


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


def may_start_workers(value) -> bool:
    """A ``num_workers`` value that is unknown, or a literal other than 0, ``None`` or ``False``."""
    return value is UNKNOWN or not (is_zero(value) or value is None or value is False)


def _kwargs_owner(ctx, call: cst.Call):
    """The module-level function whose own ``**kwargs`` parameter ``call`` spreads (``**kwargs``)."""
    func = ctx.enclosing_function(call)
    if func is None or ctx.tree.scope_node(func) is not None or func.params.star_kwarg is None:
        return None
    name = func.params.star_kwarg.name.value
    spread = any(arg.star == "**" and isinstance(arg.value, cst.Name) and arg.value.value == name for arg in call.args)
    return func if spread else None


def passes_workers(call: cst.Call) -> bool:
    """``call`` passes ``num_workers=`` other than a literal 0 (or None/False)."""
    return any(arg.keyword is not None and arg.keyword.value == "num_workers" and may_start_workers(literal_value(arg.value))
               for arg in call.args)


def worker_count_callees(tree, names) -> list:
    """Qualified names this file calls with ``num_workers=`` other than a literal 0 (or None/False)."""
    out = set()
    for call in tree.nodes(cst.Call):
        if passes_workers(call):
            qualified = names.qualname(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
            if qualified:
                out.add(qualified)
    return sorted(out)


#: the names a worker count goes by (HF ``TrainingArguments.dataloader_num_workers``)
WORKER_NAMES = frozenset({"num_workers", "dataloader_num_workers"})


def names_workers(tree, names) -> bool:
    """Phase 1 (summary fact ``names_workers``): this file may start DataLoader workers: it names a
    worker count (a name, attribute, keyword or string ``num_workers``/``dataloader_num_workers``, also
    a command-line option ``--num-workers``: the project means to run workers)
    anywhere but as a ``num_workers=0`` (``None``/``False``) argument, or builds a DataLoader from a
    ``**`` dict or with six positional arguments (``num_workers`` is the sixth)."""
    for node in tree.nodes(cst.Name):
        if node.value in WORKER_NAMES:
            arg = tree.parent_of(node)
            if not (isinstance(arg, cst.Arg) and arg.keyword is node and not may_start_workers(literal_value(arg.value))):
                return True
    for node in tree.nodes(cst.SimpleString):  # a config key, or a command-line option (``--num-workers``)
        if "workers" in node.value and node.raw_value.lstrip("-").replace("-", "_") in WORKER_NAMES:
            return True  # (the raw text: evaluating every string would warn on invalid escapes in it)
    for call in tree.nodes(cst.Call):
        func = call.func
        if isinstance(func, (cst.Name, cst.Attribute)) and names.qualname(func) == "torch.utils.data.DataLoader":
            if any(arg.star == "**" for arg in call.args) or sum(1 for arg in call.args if arg.keyword is None) >= 6:
                return True
    return False


CPU_COUNTS = frozenset({"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count"})


def zero_on_small_machines(ctx, expr, depth: int = 0) -> Optional[str]:
    """``"os.cpu_count() - 1"`` (for a message) when the worker count ``expr`` is the CPU count less a
    literal ``k`` >= 1, directly, as an argument of ``min(...)`` or through a name bound once: on a
    machine with ``k`` CPUs it is 0 (or less). None otherwise (``max(1, ...)`` keeps it positive)."""
    if isinstance(expr, cst.Name) and depth < 2:
        value = single_assignment(ctx.tree, expr)
        return zero_on_small_machines(ctx, value, depth + 1) if value is not None else None
    if isinstance(expr, cst.Call) and ctx.call_name(expr) == "builtins.min":
        for arg in expr.args:
            found = None if arg.star else zero_on_small_machines(ctx, arg.value, depth)
            if found:
                return found
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract) \
            and isinstance(expr.left, cst.Call) and ctx.call_name(expr.left) in CPU_COUNTS:
        k = literal_value(expr.right)
        if isinstance(k, int) and not isinstance(k, bool) and k >= 1:
            return ctx.code(expr).strip()
    return None



def capped_at_zero(ctx, expr, depth: int = 0) -> bool:
    """The worker count ``expr`` is ``min(...)`` of a literal 0 (or less) and anything, directly or
    through a name bound once: never more than 0, and torch rejects a negative count, so it is 0
    (``min(cfg.workers, batch_size, 0)``)."""
    if isinstance(expr, cst.Name) and depth < 2:
        value = single_assignment(ctx.tree, expr)
        return value is not None and capped_at_zero(ctx, value, depth + 1)
    if not (isinstance(expr, cst.Call) and ctx.call_name(expr) == "builtins.min"):
        return False
    if len(expr.args) == 1 or any(arg.star for arg in expr.args):
        return False  # (``min(iterable)``: its items are not shown)
    literals = [literal_value(arg.value) for arg in expr.args]
    return any(isinstance(v, int) and not isinstance(v, bool) and v <= 0 for v in literals)
