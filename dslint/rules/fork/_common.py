"""What the fork rules share.

Whether the project re-creates per-worker state (``family_consults_worker``,
``loaders_allow``) and the one check flow of DSL401/DSL402 (``inherited_uses``: an
object created in ``__init__``, kept on ``self`` and used per sample, that nothing
re-creates in the workers); the messages DSL401 reports per handle kind and which
handles it leaves alone (``write_only``, ``session_used_in_init``); whether DSL402's generator
is reseeded outside ``__init__`` (``reseeded``). DSL403's seeding is ``semantics/seeding.py``.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, List, Optional, Set

import libcst as cst

from dslint.semantics import lifetimes as lt
from dslint.semantics.bindings import class_ref
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.classes import class_family, dataset_inits, methods
from dslint.semantics.helper_drops import dropped_by_construction
from dslint.semantics.init_code import add_aliases, family_construction, held_in_container, init_helpers
from dslint.semantics.helper_openers import held_element, helper_handle
from dslint.semantics.handle_kinds import HANDLE_DERIVATIONS, LIBRARY_FORK_WRONG, LIBRARY_PICKLE_ERRORS
from dslint.semantics.instance_state import (
    AttrUse, Held, consumed_by_iter, handle_kind, rng_factory_kind, rng_kind, absent_or_none,
    dropped_in_init, held_on_self, is_read, method_of, per_sample_loads, self_attr_uses, stores_elsewhere,
)
from dslint.semantics.loader_roles import eval_name
from dslint.semantics.names import dotted_parts
from dslint.semantics.project import ENTRY_METHODS
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.reseeding import reseeded, reseeded_or_retried
from dslint.semantics.rng_holders import returns_holder
from dslint.semantics.walk import iter_subtree

WORKER_INFO = "torch.utils.data.get_worker_info"
PER_PROCESS_CHECKS = frozenset({"os.getpid", "multiprocessing.current_process", "os.getppid"})
FUNCTOOLS_PARTIAL = "functools.partial"


def call_text(ctx, call: cst.Call) -> str:
    text = " ".join(ctx.code(call.func).split())
    return f"{text}()"


def family_consults_worker(ctx, cls: cst.ClassDef, family: List[cst.ClassDef]) -> bool:
    """Does the dataset's own code look at which worker or process it runs in? ``get_worker_info()``
    or ``os.getpid()`` anywhere in the class family (this file), or in what its entry points reach."""
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
        for method in ENTRY_METHODS:
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
    loaders = ctx.view.loaders_over(ctx.qualname_of_def(cls))
    if not project_loaders_allow(ctx, loaders, attrs):
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
    return True


def project_loaders_allow(ctx, loaders: List[dict], attrs: Set[str]) -> bool:
    """``loaders_allow`` from the DataLoaders' summary facts alone (any file)."""
    for facts in loaders:
        ref = facts.get("worker_init_fn")
        function = ctx.view.function_facts(ref) if ref else None  # a library function cannot know them
        if function is not None and (function.get("worker_info") or attrs & set(function.get("assigns", ()))):
            return False
    return not (loaders and all(facts.get("num_workers") == 0 for facts in loaders))


def inherited_uses(
    ctx,
    cls: cst.ClassDef,
    init: cst.FunctionDef,
    self_param: str,
    held: Held,
    close_methods,
    silenced: Callable[[str, List[AttrUse]], bool],
    construction=(),
    copies: bool = True,
    unread: bool = False,
) -> List[str]:
    """The attributes of ``held`` that per-sample code uses while the workers inherit them (``unread``: those
    it never uses, when it uses none: the workers receive them all the same). Empty when ``__init__`` drops every one again, when one is re-created outside
    ``__init__`` (``stores_elsewhere``) or ``silenced(attr, uses)`` says the project
    handles it, when the dataset consults ``get_worker_info()``/``os.getpid()``, or
    when its DataLoaders show the state is handled (``loaders_allow``). Stores in the
    ``construction`` functions (``__init__`` helpers) run before the fork: no re-creation.
    """
    family, used, unused = class_family(ctx, cls), [], []
    for attr, site in held.attrs.items():
        if dropped_by_construction(ctx, cls, init, self_param, attr, site, close_methods):
            continue
        uses = self_attr_uses(ctx, family, attr)
        if silenced(attr, uses) or stores_elsewhere(ctx, family, attr, init, construction, copies):
            return []
        (used if per_sample_loads(ctx, uses) else unused).append(attr)
    found = (unused if not used else []) if unread else used
    if not found or family_consults_worker(ctx, cls, family) or not loaders_allow(ctx, cls, set(held.attrs)):
        return []
    return found


def construction_calls(ctx):
    """(dataset class, its ``__init__``, the function, its self name, call) for every call
    of an ``__init__`` and of the helpers it reaches (``init_code.init_helpers``), once."""
    seen = set()
    for cls, init, _ in dataset_inits(ctx):
        for func in (init, *init_helpers(ctx, cls, init)):
            for call in iter_subtree(func.body, into_scopes=False):
                if isinstance(call, cst.Call) and id(call) not in seen:
                    seen.add(id(call))
                    yield cls, init, func, self_name(func), call


def held_object(ctx, cls, init, func, selfp, call, derive_methods=(), derive_subscript=False):
    """(Held, construction functions to pass to ``inherited_uses``) or (None, ()): what of
    ``self`` keeps the object ``call`` creates: an attribute (and its ``self.b = self.a``
    aliases), or a container filled in construction code (then stores of the other
    construction functions are no re-creation)."""
    held = held_on_self(ctx, func, selfp, call, derive_methods, derive_subscript)
    if held is not None and func is init:
        return add_aliases(ctx, func, held), ()
    held = held or held_in_container(ctx, func, call, derive_methods, derive_subscript)
    return (add_aliases(ctx, func, held), family_construction(ctx, cls)) if held is not None else (None, ())


def handles_in_init(ctx):
    """(call, handle kind, attribute) for DSL401: a handle opened in construction code,
    kept on ``self`` and used per sample while the workers inherit it."""
    for cls, init, func, self_param, call in construction_calls(ctx):
        kind, position = handle_kind(ctx, call), None
        if kind is None:  # a project function that returns a handle it opened (``helper_openers``)
            kind, position = helper_handle(ctx, call) or (None, None)
        if kind is None or (kind == "file" and write_only(ctx, call)):
            continue
        if kind == "sqlite" and call.args and ctx.literal(call.args[0].value) == ":memory:":
            continue  # a private in-memory database: each worker gets its own copy
        derive_methods, subscript = HANDLE_DERIVATIONS.get(kind, ((), False))
        held, construction = held_object(ctx, cls, init, func, self_param, call, derive_methods, subscript) \
            if position is None else (held_element(ctx, func, self_param, call, position), ())
        if held is None or (kind == "session" and not session_used_in_init(ctx, func, self_param, held)):
            continue
        close_methods = ("close", *lt.IMAGE_LOADING_METHODS) if kind == "image" else ("close",)
        silenced = lambda attr, uses: consumed_by_iter(ctx, uses)  # noqa: E731
        used = inherited_uses(ctx, cls, func, self_param, held, close_methods, silenced, construction)
        if used:
            yield call, kind, used[0]


def passed_handles(ctx):
    """(node, kind, attribute, origin) for DSL401: an opened handle that a construction elsewhere
    hands to a parameter of a dataset's ``__init__`` (``handle_flow``: ``env = lmdb.open(p)`` in the
    script, ``Frames(env)``), kept on ``self`` (itself or derived: ``env.begin()``) and used per sample
    while the workers inherit it."""
    silenced = lambda attr, uses: consumed_by_iter(ctx, uses)  # noqa: E731
    for cls, init, _ in dataset_inits(ctx):
        self_param, qual = self_name(init), ctx.qualname_of_def(cls)
        params = init.params
        names = [p.name.value for p in (*params.posonly_params, *params.params)][1:] + [p.name.value for p in params.kwonly_params]
        for name in names:
            found = ctx.view.handle_init_param(qual, name)
            if not found:
                continue
            derive_methods, subscript = HANDLE_DERIVATIONS.get(found[0], ((), False))
            for use in ctx.tree.scope_nodes(init, cst.Name):
                if use.value != name or not is_read(ctx, use):
                    continue
                held, construction = held_object(ctx, cls, init, init, self_param, use, derive_methods, subscript)
                used = held and inherited_uses(ctx, cls, init, self_param, held, ("close",), silenced, construction)
                if used:
                    yield held.attrs[used[0]].value, found[0], used[0], found[1]
                    break


def rngs_in_init(ctx):
    """(call, attribute) for DSL402: a random generator object created in construction
    code (directly, by a conditional, by a same-file factory), kept on ``self`` and drawn
    from per sample while nothing reseeds it per worker."""
    reported = set()
    for cls, init, func, self_param, call in construction_calls(ctx):
        if eval_name(cls.name.value):
            continue  # a dataset of an evaluation split: the same draws in every worker keep it reproducible
        kind = rng_kind(ctx, call) or rng_factory_kind(ctx, call, self_param, class_family(ctx, cls)) or (
            "holder" if returns_holder(ctx, call) else None)
        if kind is None or (kind == "numpy" and isinstance(ctx.parent(call), cst.Arg)):
            continue  # e.g. Generator(PCG64(...)) is reported at the outer call
        held, construction = held_object(ctx, cls, init, func, self_param, call, ("manual_seed",), False)
        if held is None or any(id(site) in reported for site in held.attrs.values()):
            continue  # e.g. the other arm of `default_rng() if s is None else default_rng(s)`
        silenced = partial(reseeded_or_retried, ctx, func)
        used = inherited_uses(ctx, cls, func, self_param, held, (), silenced, construction, copies=False)
        if used:
            reported.update(id(site) for site in held.attrs.values())
            yield call, used[0], None


def rng_message(ctx, call: cst.Call, attr: str, heirs: Optional[List[str]]) -> str:
    made = "" if rng_kind(ctx, call) else " (a factory that returns a new random generator, or an object holding one)"
    where = "`__init__`" if heirs is None else (
        f"construction code that runs for the dataset{'s' * (len(heirs) > 1)} {', '.join(f'`{h}`' for h in heirs[:3])} "
        "(inherited, or an object held on `self`)"
    )
    return (
        f"`{call_text(ctx, call)}`{made} in {where} is kept on `self.{attr}` and drawn from per "
        "sample, but every DataLoader worker inherits a copy of the same generator state: workers "
        "draw identical numbers (measured with 2 workers: 32 of 64 per-sample draws, e.g. augmentations, "
        "duplicated per epoch) and every epoch repeats them (64 of 64 identical); torch reseeds only the global "
        "`random`/`numpy`/`torch` generators per worker"
    )


def mixin_rngs(ctx):
    """(call, attribute, dataset names) for DSL402 across files: a plain (non-dataset) class
    whose construction code creates a generator kept on ``self``, run by datasets of the
    project (any file) that draw from it per sample (``rng_heirs.state_heirs``)."""
    reported = set()
    if not any(rng_kind(ctx, call) for call in ctx.nodes(cst.Call)):
        return  # (a factory of this file creates one too)
    for cls in ctx.nodes(cst.ClassDef):
        init = methods(cls).get("__init__")
        if init is None or not self_name(init) or ctx.class_kind(cls):
            continue
        family = class_family(ctx, cls)
        for func in (init, *init_helpers(ctx, cls, init)):
            selfp = self_name(func)
            for call in iter_subtree(func.body, into_scopes=False):
                kind = isinstance(call, cst.Call) and (
                    rng_kind(ctx, call) or rng_factory_kind(ctx, call, selfp, family)
                )
                if not kind or (kind == "numpy" and isinstance(ctx.parent(call), cst.Arg)):
                    continue
                held, construction = held_object(ctx, cls, init, func, selfp, call, ("manual_seed",), False)
                if held is None or any(id(site) in reported for site in held.attrs.values()):
                    continue
                attrs = {a for a, site in held.attrs.items() if not dropped_in_init(ctx, func, selfp, a, site, ())}
                if not attrs or family_consults_worker(ctx, cls, family) or any(
                    reseeded(ctx, func, a, self_attr_uses(ctx, family, a), construction)
                    or stores_elsewhere(ctx, family, a, func, construction, copies=False)
                    for a in attrs
                ):
                    continue
                heirs = ctx.view.state_heirs(ctx.qualname_of_def(cls), sorted(attrs))
                heirs = [h for h in heirs if project_loaders_allow(ctx, h["loaders"], attrs)]
                if heirs:
                    reported.update(id(site) for site in held.attrs.values())
                    yield call, heirs[0]["attrs"][0], [h["name"] for h in heirs]


# --------------------------------------------------------------------------- DSL401 messages


def _file_pickle_type(ctx, call: cst.CSTNode) -> str:
    if not isinstance(call, cst.Call):
        return "_io.BufferedReader"
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


def handle_message(ctx, kind: str, call: cst.CSTNode, attr: str, origin: str = "") -> str:
    """What goes wrong with a handle of ``kind`` opened before the fork and kept on ``self.<attr>``
    (``origin``: the construction that hands it over, when ``__init__`` receives it opened)."""
    if origin:
        where = f"`{' '.join(ctx.code(call).split())}` in `__init__`, an open handle (the caller's {origin}), is kept on `self.{attr}` and used per sample"
    else:
        where = f"`{call_text(ctx, call)}` in `__init__` is kept on `self.{attr}` and used per sample"
    if kind == "file":
        return (
            f"{where}: forked DataLoader workers share one open-file description, so one worker's seek "
            "moves the other's offset and reads return wrong records (measured: 54 wrong in 60,000 "
            "buffered reads with 2 workers); under spawn/forkserver the dataset cannot be pickled "
            f"(`TypeError: cannot pickle '{_file_pickle_type(ctx, call)}' object`)"
        )
    if kind in ("zip", "npz"):  # an ``NpzFile`` reads its members through a ``zipfile.ZipFile``
        archive = "`np.load` of an `.npz` archive keeps its zip file open (`mmap_mode` does not apply); " if kind == "npz" else ""
        return (
            f"{where}: {archive}forked DataLoader workers read the archive through one shared file offset, so member "
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
            if isinstance(call, cst.Call) and keyword_literal(ctx, call, "lock") is False
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
    if kind in LIBRARY_PICKLE_ERRORS:
        measured = LIBRARY_FORK_WRONG.get(kind)
        forked = (f"forked DataLoader workers read through the parent's one handle and its file offset, so reads "
                  f"return other records' data ({measured}); " if measured is not None else
                  "forked DataLoader workers share the parent's open handle; ")
        return (
            f"{where}: {forked}the handle cannot be pickled, so under spawn/forkserver (macOS, Windows, Linux "
            f"from Python 3.14) the workers cannot start (`{LIBRARY_PICKLE_ERRORS[kind]}`)"
        )
    return (
        f"{where}: forked DataLoader workers share the parent's server connection, so their queries and "
        "results interleave (database connections are not fork-safe); under spawn/forkserver the dataset "
        "cannot be pickled"
    )


# --------------------------------------------------------------------------- DSL401 silences

SESSION_REQUESTS = frozenset({"get", "post", "put", "patch", "delete", "head", "options", "request", "send", "urlopen"})


def write_only(ctx, call: cst.Call) -> bool:
    """``open(p, "w")``/``"a"``/``"x"`` without ``+``: nothing is read back through the offset."""
    qualified = ctx.call_name(call)
    if qualified not in ("builtins.open", "gzip.open", "bz2.open", "lzma.open", "codecs.open"):
        return False
    mode = keyword_literal(ctx, call, "mode")
    if mode is UNKNOWN:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        mode = ctx.literal(positional[1].value) if len(positional) > 1 else "r"
    return isinstance(mode, str) and "+" not in mode and any(c in mode for c in "wax")


def session_used_in_init(ctx, init: cst.FunctionDef, self_param: str, held: Held) -> bool:
    for sub in iter_subtree(init.body, into_scopes=False):
        if not (isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute)):
            continue
        if sub.func.attr.value not in SESSION_REQUESTS:
            continue
        owner = sub.func.value
        if owner is held.call:
            return True
        if self_attr(owner, self_param) in held.attrs:
            return True
        if isinstance(owner, cst.Name):
            parent = ctx.parent(held.call)
            if isinstance(parent, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == owner.value for t in parent.targets
            ):
                return True
    return False


# --------------------------------------------------------------------------- DSL403


def seed_message(ctx, seedings, worker_param: str, func=None, same: bool = False) -> str:
    names = []
    for family, call in seedings:
        text = call_text(ctx, call)
        if text not in names:
            names.append(text)
    shown = ", ".join(f"`{n}`" for n in names[:3])
    who = f"`{func.name.value}`" if isinstance(func, cst.FunctionDef) else "this lambda"
    if same:
        return (
            f"{who} is a DataLoader `worker_init_fn` that seeds {shown} from values that are the same in every "
            f"worker (constants, arguments and globals the parent set, never the worker id `{worker_param}`), "
            "replacing torch's per-worker seed: all workers draw the same sequence of random numbers, so the "
            "samples at the same position in each worker's batches get the same random augmentation, and "
            "unless `persistent_workers=True` every epoch repeats the last"
        )
    return (
        f"{who} is a DataLoader `worker_init_fn` that seeds {shown} only from the worker id "
        f"(`{worker_param}`) and values fixed when the loader is built (constants, arguments the parent bound), replacing torch's "
        "per-epoch worker seed: there are no duplicates within an epoch, but every epoch replays the same "
        "random streams (measured with 2 workers: 64 of 64 values identical across epochs) unless "
        "`persistent_workers=True`"
    )
