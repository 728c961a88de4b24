"""What the fork rules share.

Whether the project re-creates per-worker state (``family_consults_worker``,
``loaders_allow``) and the one check flow of DSL401/DSL402 (``inherited_uses``: an
object created in ``__init__``, kept on ``self`` and used per sample, that nothing
re-creates in the workers); the messages DSL401 reports per handle kind; and the
seeding analysis of DSL403 (``fixed_seedings``: which RNG seedings of a function
depend on the worker id and constants alone).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics import lifetimes as lt
from dslint.semantics.bindings import class_ref, single_assignment
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.classes import class_family
from dslint.semantics.instance_state import (
    AttrUse,
    Held,
    absent_or_none,
    dropped_in_init,
    method_of,
    per_sample_loads,
    self_attr_uses,
    stores_elsewhere,
)
from dslint.semantics.names import dotted_parts
from dslint.semantics.walk import iter_subtree

WORKER_INFO = "torch.utils.data.get_worker_info"
PER_PROCESS_CHECKS = frozenset({"os.getpid", "multiprocessing.current_process", "os.getppid"})
FUNCTOOLS_PARTIAL = "functools.partial"


def call_text(ctx, call: cst.Call) -> str:
    text = " ".join(ctx.code(call.func).split())
    return f"{text}()"


def family_consults_worker(ctx, cls: cst.ClassDef, family: List[cst.ClassDef]) -> bool:
    """Does the dataset's own code look at which worker or process it runs in?

    ``get_worker_info()`` or ``os.getpid()`` anywhere in the class family (this
    file), or in what its entry points reach across the project.
    """
    family_ids = {id(c) for c in family}
    memo = ctx.memo(("fork._common.consults",), dict)
    if id(cls) in memo:
        return memo[id(cls)]
    answer = False
    for node in (*ctx.nodes(cst.Name), *ctx.nodes(cst.Attribute)):
        parts = dotted_parts(node)
        if not parts or parts[-1] not in ("get_worker_info", "getpid", "getppid", "current_process"):
            continue
        if isinstance(ctx.parent(node), cst.Attribute) and ctx.parent(node).value is node:
            continue  # the inner part of a longer chain
        if method_of(ctx, node, family_ids) is None:
            continue
        qualified = ctx.qualname(node)
        if qualified == WORKER_INFO or qualified in PER_PROCESS_CHECKS:
            answer = True
            break
    if not answer:
        qual = ctx.qualname_of_def(cls)
        for method in ("__getitem__", "__getitems__", "__iter__", "__next__"):
            for facts in ctx.view.reachable_facts(qual, method):
                if facts and (
                    facts.get("worker_info") or any(call[1] in PER_PROCESS_CHECKS for call in facts.get("calls", ()))
                ):
                    answer = True
                    break
            if answer:
                break
    memo[id(cls)] = answer
    return answer


def function_target(ctx, expr: Optional[cst.CSTNode]) -> Optional[cst.CSTNode]:
    """The expression naming the function passed as a callable (through ``partial``)."""
    if isinstance(expr, cst.Call) and ctx.call_name(expr) == FUNCTOOLS_PARTIAL and expr.args:
        return expr.args[0].value
    return expr


def loaders_allow(ctx, cls: cst.ClassDef, attrs: Set[str]) -> bool:
    """False when the project's DataLoaders over ``cls`` show the state is handled.

    Silent (False) when a ``worker_init_fn`` given to a DataLoader over the class
    reassigns one of ``attrs`` or looks at ``get_worker_info()`` (it may re-create
    the state through the dataset), when a same-file DataLoader passes a
    ``worker_init_fn`` that cannot be resolved, or when every DataLoader found has a
    literal ``num_workers=0`` (there is no fork).
    """
    qual = ctx.qualname_of_def(cls)
    loaders = ctx.view.loaders_over(qual)
    for facts in loaders:
        ref = facts.get("worker_init_fn")
        if not ref:
            continue
        function = ctx.view.function_facts(ref)
        if function is None:
            continue  # a library function cannot know this dataset's attributes
        if function.get("worker_info") or attrs & set(function.get("assigns", ())):
            return False
    for bound in ctx.dataloader_calls():
        ref = class_ref(ctx.tree, ctx.names, bound.expr("dataset"))
        if ref is None or ref[0] != "local" or ref[1] is not cls:
            continue
        arg = bound.arg("worker_init_fn")
        if arg is None or absent_or_none(arg.value):
            continue
        target = function_target(ctx, arg.value)
        if not isinstance(target, (cst.Name, cst.Attribute)) or ctx.qualname(target) is None:
            return False  # a worker_init_fn we cannot follow
    if loaders and all(facts.get("num_workers") == 0 for facts in loaders):
        return False
    return True


def inherited_uses(
    ctx,
    cls: cst.ClassDef,
    init: cst.FunctionDef,
    self_param: str,
    held: Held,
    close_methods,
    silenced: Callable[[str, List[AttrUse]], bool],
) -> List[str]:
    """The attributes of ``held`` that per-sample code uses while the workers inherit them.

    Empty when ``__init__`` drops every one again, when one is re-created outside
    ``__init__`` (``stores_elsewhere``) or ``silenced(attr, uses)`` says the project
    handles it, when the dataset consults ``get_worker_info()``/``os.getpid()``, or
    when its DataLoaders show the state is handled (``loaders_allow``).
    """
    family = class_family(ctx, cls)
    used: List[str] = []
    for attr, site in held.attrs.items():
        if dropped_in_init(ctx, init, self_param, attr, site, close_methods):
            continue
        uses = self_attr_uses(ctx, family, attr)
        if silenced(attr, uses) or stores_elsewhere(ctx, family, attr, init):
            return []
        if per_sample_loads(ctx, uses):
            used.append(attr)
    if not used or family_consults_worker(ctx, cls, family) or not loaders_allow(ctx, cls, set(held.attrs)):
        return []
    return used


# --------------------------------------------------------------------------- DSL401 messages


def _file_pickle_type(ctx, call: cst.Call) -> str:
    qualified = ctx.call_name(call)
    if qualified not in ("builtins.open", "codecs.open", "io.FileIO") and lt.opener_kind(ctx, call) != "file":
        return "_io.BufferedReader"
    if qualified == "io.FileIO":
        return "_io.FileIO"
    args = [a for a in call.args if a.keyword is None]
    mode = "r"
    buffering = UNKNOWN
    offset = 1 if qualified in ("builtins.open", "codecs.open") else 0
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "mode":
            mode = ctx.literal(arg.value)
        if arg.keyword is not None and arg.keyword.value == "buffering":
            buffering = ctx.literal(arg.value)
    if arg_at := (args[offset] if len(args) > offset else None):
        mode = ctx.literal(arg_at.value)
    if len(args) > offset + 1:
        buffering = ctx.literal(args[offset + 1].value)
    if not isinstance(mode, str):
        return "_io.BufferedReader"
    if "b" not in mode:
        return "_io.TextIOWrapper"
    if buffering == 0:
        return "_io.FileIO"
    if "+" in mode:
        return "_io.BufferedRandom"
    if "r" in mode:
        return "_io.BufferedReader"
    return "_io.BufferedWriter"


def keyword_literal(ctx, call: cst.Call, name: str):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return ctx.literal(arg.value)
    return UNKNOWN


def handle_message(ctx, kind: str, call: cst.Call, attr: str) -> str:
    text = call_text(ctx, call)
    where = f"`{text}` in `__init__` is kept on `self.{attr}` and used per sample"
    if kind == "file":
        return (
            f"{where}: forked DataLoader workers share one open-file description, so one worker's seek "
            "moves the other's offset and reads return wrong records (measured: 54 wrong in 60,000 "
            "buffered reads with 2 workers); under spawn/forkserver the dataset cannot be pickled "
            f"(`TypeError: cannot pickle '{_file_pickle_type(ctx, call)}' object`)"
        )
    if kind == "zip":
        return (
            f"{where}: forked DataLoader workers read the archive through one shared file offset, so member "
            "reads fail with `zipfile.BadZipFile` (`Bad magic number for file header`, `Bad CRC-32`) or "
            "return wrong bytes; under spawn/forkserver the dataset cannot be pickled "
            "(`TypeError: cannot pickle '_io.BufferedReader' object`)"
        )
    if kind == "tar":
        return (
            f"{where}: forked DataLoader workers read the archive through one shared file offset, so "
            "extracted members come back with wrong bytes; under spawn/forkserver the dataset cannot be "
            "pickled (`TypeError: cannot pickle '_io.BufferedReader' object`)"
        )
    if kind == "h5py":
        return (
            f"{where}: an HDF5 file opened before the fork is not safe to read from forked DataLoader "
            "workers, which get `KeyError: 'Unable to open object (bad object header version number)'` "
            "or wrong data (pytorch#11929); under spawn/forkserver the dataset cannot be pickled "
            "(`TypeError: h5py objects cannot be pickled`)"
        )
    if kind == "lmdb":
        shared = (
            "the parent's environment"
            if keyword_literal(ctx, call, "lock") is False
            else "the parent's environment and its reader lock table (`lmdb.BadRslotError: MDB_BAD_RSLOT`)"
        )
        return (
            f"{where}: LMDB does not support using an environment after fork(), yet forked DataLoader "
            f"workers all use {shared}; under spawn/forkserver (macOS, Windows, Linux from Python 3.14) "
            "the dataset cannot be pickled (`TypeError: can't pickle Environment objects`)"
        )
    if kind == "sqlite":
        return (
            f"{where}: SQLite does not support a connection carried across fork(); forked DataLoader "
            "workers share the parent's connection and file descriptor (reported as "
            "`sqlite3.DatabaseError: database disk image is malformed`); under spawn/forkserver the "
            "dataset cannot be pickled (`TypeError: cannot pickle 'sqlite3.Connection' object`)"
        )
    if kind == "image":
        return (
            f"{where}: the image stays open and undecoded, and forked DataLoader workers decode it through "
            "one shared file offset, giving wrong pixels or `OSError` (measured with 2 workers: a PNG opened "
            "in `__init__` decoded correctly in 5 of 240 reads over 30 epochs; `image file is truncated`, "
            "`unrecognized data stream contents`)"
        )
    if kind == "socket":
        return (
            f"{where}: forked DataLoader workers share one socket, so their requests and replies "
            "interleave; under spawn/forkserver the dataset cannot be pickled "
            "(`TypeError: cannot pickle 'socket' object`)"
        )
    if kind == "session":
        return (
            f"{where}: the connection the session opened in `__init__` stays in its pool, and forked "
            "DataLoader workers share that one socket, so their requests and responses interleave"
        )
    return (
        f"{where}: forked DataLoader workers share the parent's server connection, so their queries and "
        "results interleave (database connections are not fork-safe); under spawn/forkserver the dataset "
        "cannot be pickled"
    )


# --------------------------------------------------------------------------- DSL403 seedings

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
            if self._bound_in_function(expr):
                value = self._local_value(expr)
                return value is not None and self.fixed(value, depth + 1)
            return self.ctx.literal(expr) is not UNKNOWN
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _FIXED_INFO_ATTRS and self._worker_info_value(expr.value, depth):
                return True
            return False
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
            root = expr
            while isinstance(root, cst.Attribute):
                root = root.value
            return isinstance(root, cst.Name) and root.value != self.worker_param and self._other_parameter(root)
        if isinstance(expr, cst.Name):
            if expr.value == self.worker_param:
                return False
            if self._other_parameter(expr):
                return True
            if self._bound_in_function(expr):
                value = self._local_value(expr)
                return value is not None and self.parent_value(value, depth + 1)
            return self.ctx.literal(expr) is not UNKNOWN
        if isinstance(expr, cst.BinaryOperation):
            return self.parent_value(expr.left, depth + 1) and self.parent_value(expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self.parent_value(expr.expression, depth + 1)
        if isinstance(expr, cst.Call) and self.ctx.call_name(expr) in _PURE_BUILTINS:
            return bool(expr.args) and all(
                arg.keyword is None and not arg.star and self.parent_value(arg.value, depth + 1) for arg in expr.args
            )
        return False

    def _other_parameter(self, name: cst.Name) -> bool:
        params = self.func.params
        names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
        return name.value in names and name.value != self.worker_param and not self._assigned_in_function(name.value)

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
