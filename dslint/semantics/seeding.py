"""Which RNG seedings of a ``worker_init_fn`` are the same every epoch, or in every worker.

``fixed_seedings(ctx, func, worker_param)`` lists the seeding calls (``np.random.seed``,
``random.seed``, ``torch.manual_seed``, a stored ``default_rng(...)``, a same-file
helper that seeds) whose seed depends only on the worker id, constants and the function's
other parameters (bound by ``functools.partial`` or their defaults when the loader is
built: ``num_workers * rank + worker_id + seed``), or only on
values fixed in the parent (constants, the function's other, ``partial``-bound,
parameters, and module globals that are never None); ``worker_invariant`` tells the second kind (every worker the same seed)
from the first (each worker its own seed, the same every epoch). A seed that also
depends on anything else (``torch.initial_seed()``, ``get_worker_info().seed``, an
unknown value) makes the whole RNG family silent. ``loader_persistence(ctx, bound)`` is a loader
call's ``persistent_workers``, counting the default of the builder parameter that gives it.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import local_class_path, parameter_default, single_assignment
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.names import dotted_parts
from dslint.semantics.regions import self_name
from dslint.semantics.summary import WORKER_INFO
from dslint.semantics.values import possible
from dslint.semantics.walk import iter_subtree

_SEEDERS = {
    **dict.fromkeys(("numpy.random.seed", "numpy.random.mtrand.seed"), "numpy"),
    "random.seed": "random",
    **dict.fromkeys(("torch.manual_seed", "torch.random.manual_seed"), "torch"),
    **dict.fromkeys(("torch.cuda.manual_seed", "torch.cuda.manual_seed_all"), "torch.cuda"),
    **dict.fromkeys(("imgaug.seed", "imgaug.random.seed"), "imgaug"),
    **dict.fromkeys(("lightning.seed_everything", "lightning.pytorch.seed_everything"), "all"),
    **dict.fromkeys(("lightning.fabric.seed_everything", "pytorch_lightning.seed_everything"), "all"),
    **dict.fromkeys(("lightning_fabric.seed_everything", "transformers.set_seed", "accelerate.utils.set_seed"), "all"),
}
_SEEDER_TAILS = frozenset(q.rsplit(".", 1)[-1] for q in _SEEDERS)
_GENERATOR_MAKERS = frozenset(
    {"numpy.random.default_rng", "numpy.random.RandomState", "random.Random", "numpy.random.Generator"}
)
_PURE_BUILTINS = frozenset({"builtins.int", "builtins.abs", "builtins.str", "builtins.hash", "builtins.float", "builtins.round"})
_FIXED_INFO_ATTRS = frozenset({"id", "num_workers"})


class _SeedAnalysis:
    """Does a seed expression depend only on the worker id and constants?"""

    def __init__(self, ctx, func: cst.FunctionDef | cst.Lambda, worker_param: str) -> None:
        self.ctx = ctx
        self.func = func
        self.worker_param = worker_param

    def _worker_info_value(self, expr: cst.CSTNode, depth: int) -> bool:
        if isinstance(expr, cst.Call) and self.ctx.call_name(expr) == WORKER_INFO:
            return True
        if isinstance(expr, cst.Name) and depth < 6:
            value = self._local_value(expr)
            return value is not None and self._worker_info_value(value, depth + 1)
        return False

    def _local_value(self, name: cst.Name) -> Optional[cst.CSTNode]:
        if self.ctx.enclosing_function(name) is not (self.func if isinstance(self.func, cst.FunctionDef) else None):
            return None
        return single_assignment(self.ctx.tree, name)

    def fixed(self, expr: cst.CSTNode, depth: int = 0) -> bool:
        if depth > 8:
            return False
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
            return True
        if isinstance(expr, cst.Name):
            if expr.value == self.worker_param:
                return self._is_parameter(expr)
            if self._other_parameter(expr):
                return True  # bound by ``functools.partial`` or its default: fixed in the parent
            if self._bound_in_function(expr):
                value = self._local_value(expr)
                return value is not None and self.fixed(value, depth + 1)
            return self.ctx.literal(expr) is not UNKNOWN
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _FIXED_INFO_ATTRS and self._worker_info_value(expr.value, depth):
                return True
            root = _attribute_root(expr)
            return isinstance(root, cst.Name) and self._other_parameter(root)  # ``cfg.seed``, ``cfg`` bound so
        if isinstance(expr, cst.BinaryOperation):
            return self.fixed(expr.left, depth + 1) and self.fixed(expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self.fixed(expr.expression, depth + 1)
        if isinstance(expr, cst.Call) and self.ctx.call_name(expr) in _PURE_BUILTINS:
            return bool(expr.args) and all(
                arg.keyword is None and not arg.star and self.fixed(arg.value, depth + 1) for arg in expr.args
            )
        return False

    def parent_value(self, expr: cst.CSTNode, depth: int = 0) -> bool:
        """Is ``expr`` the same in every worker: constants and the function's other
        parameters (bound by ``functools.partial`` or their defaults in the parent),
        never the worker id?"""
        if depth > 8:
            return False
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
            return True
        if isinstance(expr, cst.Attribute):
            root = _attribute_root(expr)
            if not isinstance(root, cst.Name) or root.value == self.worker_param:
                return False
            return self._other_parameter(root) or (self._free(root) and self._never_none(expr))
        if isinstance(expr, cst.Name):
            if expr.value == self.worker_param:
                return False
            if self._other_parameter(expr):
                return True
            if self._bound_in_function(expr):
                value = self._local_value(expr)
                return value is not None and self.parent_value(value, depth + 1)
            return self._free(expr) and self._never_none(expr)
        if isinstance(expr, cst.BinaryOperation):
            return self.parent_value(expr.left, depth + 1) and self.parent_value(expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self.parent_value(expr.expression, depth + 1)
        if isinstance(expr, cst.Call) and self.ctx.call_name(expr) in _PURE_BUILTINS:
            return bool(expr.args) and all(
                arg.keyword is None and not arg.star and self.parent_value(arg.value, depth + 1) for arg in expr.args
            )
        return False

    def _free(self, name: cst.Name) -> bool:
        """A name the function neither binds (a parameter, an assignment) nor declares ``global``/
        ``nonlocal`` (a module global, an import, a closure variable): the worker reads the value the
        parent process had."""
        scope = self.ctx.names.scope(self.func)
        return not scope.lookup(name.value)[0] and name.value not in scope.declared_global

    def _never_none(self, expr: cst.CSTNode) -> bool:
        """No value the code shows for ``expr`` is None (``seed(None)`` draws fresh entropy in every
        worker); a value it cannot see counts as the parent's one fixed seed."""
        return possible(self.ctx, expr).can_be(lambda v: v is None) is None

    def _other_parameter(self, name: cst.Name) -> bool:
        """Another parameter, never rebound, whose default is not None (``seed(None)`` draws
        fresh entropy in every worker)."""
        params = self.func.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name.value and name.value != self.worker_param:
                default = param.default
                if isinstance(default, cst.Name) and default.value == "None":
                    return False
                return not self._assigned_in_function(name.value)
        return False

    def _is_parameter(self, name: cst.Name) -> bool:
        return self.ctx.names.resolve_name(name.value, name) is None and not self._assigned_in_function(name.value)

    def _assigned_in_function(self, value: str) -> bool:
        for node in iter_subtree(self.func.body, into_scopes=False):
            if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name) and node.target.value == value:
                return True
            if isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name):
                if node.target.value == value:
                    return True
        return False

    def _bound_in_function(self, name: cst.Name) -> bool:
        if not isinstance(self.func, cst.FunctionDef):
            return False
        found, _ = self.ctx.names.scope(self.func).lookup(name.value)
        return found


def _attribute_root(expr: cst.Attribute) -> cst.BaseExpression:
    """``a`` of ``a.b.c``."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr


def _seed_arg(call: cst.Call) -> Optional[cst.CSTNode]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "seed":
            return arg.value
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
    return None


def positional_params(func) -> List[str]:
    params = func.params
    return [p.name.value for p in (*params.posonly_params, *params.params)]


def fixed_seedings(ctx, func, worker_param: str, _depth: int = 0) -> List[Tuple[str, cst.Call]]:
    """(RNG family, call) for every seeding in ``func`` whose seed is fixed per worker id.

    Empty when any family is also seeded from something else (``torch.initial_seed()``,
    ``get_worker_info().seed``, an unknown value): only families seeded from the
    worker id and constants alone, or from values that are the same in every worker
    (constants and the function's other, partial-bound, parameters: see
    ``worker_invariant``), are returned.
    """
    analysis = _SeedAnalysis(ctx, func, worker_param)
    body = func.body
    by_family: Dict[str, List[Tuple[cst.Call, bool]]] = {}
    tails = ctx.names.call_tails(_SEEDER_TAILS | {q.rsplit(".", 1)[-1] for q in _GENERATOR_MAKERS})
    for node in iter_subtree(body, into_scopes=False):
        if not isinstance(node, cst.Call):
            continue
        func_expr = node.func
        tail = func_expr.attr.value if isinstance(func_expr, cst.Attribute) else (
            func_expr.value if isinstance(func_expr, cst.Name) else None
        )
        qualified = ctx.call_name(node) if tail in tails else None
        family = _SEEDERS.get(qualified or "")
        if family is None and qualified in _GENERATOR_MAKERS and _stored_beyond_call(ctx, node, func):
            family = f"object:{qualified}"
        if family is None and _depth == 0 and qualified is not None:
            helper = _same_file_function(ctx, qualified)
            if helper is not None and node.args:
                params = positional_params(helper)
                first = _seed_arg(node)
                if params and first is not None and fixed_seedings(ctx, helper, params[0], _depth + 1):
                    family = f"helper:{qualified}"
        if family is None:
            continue
        seed = _seed_arg(node)
        is_fixed = seed is not None and (
            analysis.fixed(seed) or (not family.startswith("helper:") and analysis.parent_value(seed))
        )
        by_family.setdefault(family, []).append((node, is_fixed))
    found = []
    for family, calls in by_family.items():
        if all(is_fixed for _, is_fixed in calls):
            found.extend((family, call) for call, _ in calls)
    return found


def worker_invariant(ctx, func, worker_param: str, seedings: List[Tuple[str, cst.Call]]) -> bool:
    """No seed of ``seedings`` depends on the worker id: every worker gets the same seed."""
    analysis = _SeedAnalysis(ctx, func, worker_param)
    seeds = [_seed_arg(call) for family, call in seedings if not family.startswith("helper:")]
    return bool(seeds) and len(seeds) == len(seedings) and all(s is not None and analysis.parent_value(s) for s in seeds)


def _stored_beyond_call(ctx, call: cst.Call, func) -> bool:
    """``rng = default_rng(worker_id)`` under ``global rng``, or stored on an object."""
    parent = ctx.parent(call)
    if not isinstance(parent, cst.Assign) or parent.value is not call:
        return False
    declared = set()
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, cst.Global):
            declared.update(item.name.value for item in node.names)
    for target in parent.targets:
        if isinstance(target.target, cst.Attribute):
            return True
        if isinstance(target.target, cst.Name) and target.target.value in declared:
            return True
    return False


def _same_file_function(ctx, qualified: str) -> Optional[cst.FunctionDef]:
    prefix = f"{ctx.names.modname}."
    if not qualified.startswith(prefix):
        return None
    name = qualified[len(prefix) :]
    if "." in name:
        return None
    for node in ctx.nodes(cst.FunctionDef):
        if node.name.value == name and ctx.enclosing_function(node) is None and ctx.method_class(node) is None:
            return node
    return None


def lambda_seedings(ctx, func: cst.Lambda, worker_param: str):
    """A lambda body is one expression: a seeding call on the worker id."""
    body = func.body
    if not isinstance(body, cst.Call):
        return []
    family = _SEEDERS.get(ctx.call_name(body) or "")
    seed = _seed_arg(body)
    if family is None or seed is None:
        return []
    analysis = _SeedAnalysis(ctx, func, worker_param)
    return [(family, body)] if analysis.fixed(seed) or analysis.parent_value(seed) else []


def local_worker_init(ctx, target):
    """(lambda or method def, index of the worker id parameter) for a same-file callable."""
    if isinstance(target, cst.Lambda):
        return target, 0
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
        owner_name = target.value.value
        method_name = target.attr.value
        owner = None
        func = ctx.enclosing_function(target)
        if func is not None and owner_name == self_name(func) and ctx.method_class(func) is not None:
            owner = ctx.method_class(func)
            bound = True
        else:
            owner = local_class_path(ctx.tree, owner_name)
            bound = False
        if owner is None or not isinstance(owner.body, cst.IndentedBlock):
            return None, 0
        for stmt in owner.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == method_name:
                static = any(
                    (dotted_parts(d.decorator) or [""])[-1] == "staticmethod" for d in stmt.decorators
                )
                if static:
                    return stmt, 0
                return (stmt, 1) if bound else (None, 0)
    return None, 0


def loader_persistence(ctx, bound):
    """The loader call's ``persistent_workers``: its literal, or the default of the builder's parameter
    that gives it when the caller keeps it (the loader summaries' fact); UNKNOWN otherwise."""
    value = ctx.value(bound, "persistent_workers")
    default = parameter_default(ctx.tree, bound.expr("persistent_workers")) if value is UNKNOWN else None
    return ctx.literal(default) if default is not None else value


def loader_repeats(facts: dict, same_in_every_worker: bool = False) -> bool:
    """Could the streams repeat under this DataLoader: across epochs (workers re-created
    each epoch) or, when every worker gets the same seed, across its workers?"""
    if facts.get("num_workers") == 0:
        return False
    return same_in_every_worker or facts.get("persistent_workers") is not True
