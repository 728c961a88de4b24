"""DSL401-403: state that forked DataLoader workers inherit from the parent.

Everything a dataset's ``__init__`` creates is copied into every worker at fork:
an open file keeps one shared offset, an RNG object keeps one shared state. A
``worker_init_fn`` that seeds from the worker id alone gives every epoch the same
random streams. These rules find the three forms, and stay silent wherever the
project visibly re-creates the state per worker (lazy opening, ``get_worker_info()``,
``os.getpid()`` checks, a ``worker_init_fn`` that reassigns the attribute) or where
the facts are unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

from dslint.rules.base import ERROR, WARNING, Rule, Symptom
from dslint.semantics import lifetimes as lt
from dslint.semantics.classes import class_family, dataset_inits
from dslint.semantics.bindings import class_ref, local_class_path, single_assignment
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.names import dotted_parts
from dslint.semantics.regions import LOOP, self_name
from dslint.semantics.walk import iter_subtree

WORKER_INFO = "torch.utils.data.get_worker_info"
PER_PROCESS_CHECKS = frozenset({"os.getpid", "multiprocessing.current_process", "os.getppid"})
FUNCTOOLS_PARTIAL = "functools.partial"

# --------------------------------------------------------------------------- classes


def _method_of(ctx, node: cst.CSTNode, family_ids: Optional[Set[int]]) -> Optional[cst.FunctionDef]:
    """The method of a family class (of any class: ``None``) that lexically contains ``node``."""
    func = ctx.enclosing_function(node)
    while func is not None:
        owner = ctx.method_class(func)
        if owner is not None:
            return func if family_ids is None or id(owner) in family_ids else None
        func = ctx.enclosing_function(func)
    return None


def _is_store(ctx, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    if isinstance(parent, cst.AssignTarget) and parent.target is node:
        return True
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign)) and parent.target is node:
        return True
    if isinstance(parent, cst.Del):
        return True
    if isinstance(parent, (cst.Element, cst.StarredElement)):
        grand = ctx.parent(parent)
        if isinstance(grand, (cst.Tuple, cst.List)):
            return _is_store(ctx, grand)
    return False


@dataclass
class AttrUse:
    node: cst.Attribute
    method: cst.FunctionDef
    store: bool


def self_attr_uses(ctx, family: List[cst.ClassDef], attr: str) -> List[AttrUse]:
    """Every ``self.<attr>`` in the methods of ``family`` (loads and stores)."""
    family_ids = {id(c) for c in family}
    uses = []
    for node in ctx.nodes(cst.Attribute):
        if node.attr.value != attr or not isinstance(node.value, cst.Name):
            continue
        method = _method_of(ctx, node, family_ids)
        if method is None or node.value.value != self_name(method):
            continue
        uses.append(AttrUse(node, method, _is_store(ctx, node)))
    return uses


def _store_value(ctx, target: cst.CSTNode) -> Optional[cst.CSTNode]:
    parent = ctx.parent(target)
    if isinstance(parent, cst.AssignTarget):
        assign = ctx.parent(parent)
        return assign.value if isinstance(assign, cst.Assign) else None
    if isinstance(parent, cst.AnnAssign):
        return parent.value
    if isinstance(parent, cst.AugAssign):
        return parent.value
    return None


def _is_none(expr: Optional[cst.CSTNode]) -> bool:
    return expr is None or (isinstance(expr, cst.Name) and expr.value == "None")


def stores_elsewhere(ctx, family: List[cst.ClassDef], attr: str, init: cst.FunctionDef) -> bool:
    """Is ``attr`` given a new (non-None) value outside ``init``?

    On ``self`` in any method of the class family (a lazy or per-worker reopen, a
    ``__setstate__``, a ``worker_init`` method...), on any other object anywhere in
    the file (``get_worker_info().dataset.<attr> = ...``), or via ``setattr``.
    """
    family_ids = {id(c) for c in family}
    for node in ctx.nodes(cst.Attribute):
        if node.attr.value != attr or not _is_store(ctx, node):
            continue
        if ctx.enclosing_function(node) is init:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Del):
            continue
        if _is_none(_store_value(ctx, node)) and not isinstance(parent, (cst.Element, cst.StarredElement)):
            continue
        method = _method_of(ctx, node, None)  # innermost method, of any class
        on_self = method is not None and isinstance(node.value, cst.Name) and node.value.value == self_name(method)
        if on_self and id(ctx.method_class(method)) not in family_ids:
            continue  # self.<attr> of an unrelated class: not this instance
        return True
    for call in ctx.calls_to("builtins.setattr"):
        if len(call.args) >= 2:
            name = ctx.literal(call.args[1].value)
            if name is UNKNOWN or name == attr:
                return True
    return False


def family_consults_worker(ctx, cls: cst.ClassDef, family: List[cst.ClassDef]) -> bool:
    """Does the dataset's own code look at which worker or process it runs in?

    ``get_worker_info()`` or ``os.getpid()`` anywhere in the class family (this
    file), or in what its entry points reach across the project.
    """
    family_ids = {id(c) for c in family}
    memo = ctx.memo(("fork.consults",), dict)
    if id(cls) in memo:
        return memo[id(cls)]
    answer = False
    for node in (*ctx.nodes(cst.Name), *ctx.nodes(cst.Attribute)):
        parts = dotted_parts(node)
        if not parts or parts[-1] not in ("get_worker_info", "getpid", "getppid", "current_process"):
            continue
        if isinstance(ctx.parent(node), cst.Attribute) and ctx.parent(node).value is node:
            continue  # the inner part of a longer chain
        if _method_of(ctx, node, family_ids) is None:
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


def _function_target(ctx, expr: Optional[cst.CSTNode]) -> Optional[cst.CSTNode]:
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
        if arg is None or _is_none(arg.value):
            continue
        target = _function_target(ctx, arg.value)
        if not isinstance(target, (cst.Name, cst.Attribute)) or ctx.qualname(target) is None:
            return False  # a worker_init_fn we cannot follow
    if loaders and all(facts.get("num_workers") == 0 for facts in loaders):
        return False
    return True


# --------------------------------------------------------------------------- holders


@dataclass
class Held:
    """An object created in ``__init__`` and the ``self`` attributes that keep it."""

    call: cst.Call
    attrs: Dict[str, cst.CSTNode] = field(default_factory=dict)  # attr -> storing statement


def _is_key_subscript(sub: cst.Subscript) -> bool:
    """``f["images"]`` (a group or dataset of an HDF5 file), not ``d[:]``/``d[0]`` (loaded data).

    A string key anywhere in the chain; a variable key only directly on the file,
    where subscripts are always names (further down it may be an index).
    """
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return False
    index = sub.slice[0].slice.value
    if isinstance(index, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    return isinstance(index, (cst.Name, cst.Attribute)) and not isinstance(sub.value, cst.Subscript)


def _strip(ctx, expr: cst.CSTNode, derive_methods, derive_subscript: bool) -> cst.CSTNode:
    """Peel derivations that keep the object alive (``f["x"]``, ``env.begin()``)."""
    while True:
        if derive_subscript and isinstance(expr, cst.Subscript) and _is_key_subscript(expr):
            expr = expr.value
            continue
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in derive_methods
        ):
            expr = expr.func.value
            continue
        return expr


def _assign_targets(stmt: cst.CSTNode) -> List[cst.CSTNode]:
    if isinstance(stmt, cst.Assign):
        return [t.target for t in stmt.targets]
    if isinstance(stmt, cst.AnnAssign) and stmt.value is not None:
        return [stmt.target]
    return []


def held_on_self(
    ctx, init: cst.FunctionDef, self_param: str, call: cst.Call, derive_methods=(), derive_subscript=False
) -> Optional[Held]:
    """Which ``self`` attributes of ``init`` keep what ``call`` creates.

    ``self.x = call`` (also through derivations such as ``call["key"]`` or
    ``call.begin()``), or ``name = call`` followed by ``self.x = name``. None when
    the object is closed in ``__init__`` (``with``, ``.close()``), or kept nowhere.
    """
    node: cst.CSTNode = call
    while True:
        parent = ctx.parent(node)
        if derive_subscript and isinstance(parent, cst.Subscript) and parent.value is node and _is_key_subscript(parent):
            node = parent
            continue
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in derive_methods:
            grand = ctx.parent(parent)
            if isinstance(grand, cst.Call) and grand.func is parent:
                node = grand
                continue
        break
    parent = ctx.parent(node)
    if not isinstance(parent, (cst.Assign, cst.AnnAssign)) or parent.value is not node:
        return None
    held = Held(call)
    local = None
    for target in _assign_targets(parent):
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == self_param:
            held.attrs[target.attr.value] = parent
        elif isinstance(target, cst.Name):
            local = target.value
    body_nodes = list(iter_subtree(init.body, into_scopes=False))
    if local is not None:
        for sub in body_nodes:
            # the local is closed, or handed to a with block: nothing kept
            if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute):
                if isinstance(sub.func.value, cst.Name) and sub.func.value.value == local and sub.func.attr.value == "close":
                    return None
            if isinstance(sub, cst.WithItem) and isinstance(sub.item, cst.Name) and sub.item.value == local:
                return None
            if not isinstance(sub, (cst.Assign, cst.AnnAssign)) or sub is parent:
                continue
            value = sub.value
            if value is None:
                continue
            base = _strip(ctx, value, derive_methods, derive_subscript)
            if isinstance(base, cst.Name) and base.value == local:
                for target in _assign_targets(sub):
                    if (
                        isinstance(target, cst.Attribute)
                        and isinstance(target.value, cst.Name)
                        and target.value.value == self_param
                    ):
                        held.attrs[target.attr.value] = sub
    # self attributes derived from a kept one (self.txn = self.env.begin())
    for sub in body_nodes:
        if not isinstance(sub, (cst.Assign, cst.AnnAssign)) or sub.value is None:
            continue
        base = _strip(ctx, sub.value, derive_methods, derive_subscript)
        if base is sub.value:
            continue
        if isinstance(base, cst.Attribute) and isinstance(base.value, cst.Name) and base.value.value == self_param:
            if base.attr.value in held.attrs:
                for target in _assign_targets(sub):
                    if (
                        isinstance(target, cst.Attribute)
                        and isinstance(target.value, cst.Name)
                        and target.value.value == self_param
                    ):
                        held.attrs.setdefault(target.attr.value, sub)
    return held if held.attrs else None


def dropped_in_init(ctx, init: cst.FunctionDef, self_param: str, attr: str, site: cst.CSTNode, methods=("close",)) -> bool:
    """After ``site``, ``__init__`` closes, deletes or replaces ``self.<attr>``."""
    seen_site = False
    inside = {id(node) for node in iter_subtree(site, into_scopes=False)}
    for sub in iter_subtree(init.body, into_scopes=False):
        if sub is site:
            seen_site = True
            continue
        if not seen_site or id(sub) in inside:
            continue
        if isinstance(sub, cst.Attribute) and sub.attr.value == attr and isinstance(sub.value, cst.Name):
            if sub.value.value != self_param:
                continue
            if _is_store(ctx, sub):
                return True
            parent = ctx.parent(sub)
            if isinstance(parent, cst.Attribute) and parent.value is sub and parent.attr.value in methods:
                grand = ctx.parent(parent)
                if isinstance(grand, cst.Call) and grand.func is parent:
                    return True
            if isinstance(parent, cst.WithItem) and parent.item is sub:
                return True  # ``with self.f:`` closes it at the end of the block
    return False


def _in_iteration(ctx, node: cst.CSTNode) -> bool:
    """Is this ``self.x`` consumed by iteration (``for .. in self.x``, ``next(self.x)``)?"""
    parent = ctx.parent(node)
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node:
        return True
    if isinstance(parent, cst.Yield) and isinstance(parent.value, cst.From):
        return True
    if isinstance(parent, cst.From) and parent.item is node:
        return True
    if isinstance(parent, cst.Arg):
        outer = ctx.parent(parent)
        if isinstance(outer, cst.Call) and ctx.call_name(outer) in (
            "builtins.iter",
            "builtins.next",
            "builtins.enumerate",
            "builtins.zip",
            "builtins.list",
            "builtins.tuple",
            "builtins.map",
            "builtins.filter",
            "csv.reader",
            "csv.DictReader",
            "itertools.islice",
            "itertools.chain",
        ):
            return True
    if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in (
        "__next__",
        "__iter__",
        "readline",
        "readlines",
        "fetchone",
        "fetchmany",
        "fetchall",
    ):
        return True
    return False


def consumed_by_iter(ctx, uses: List[AttrUse]) -> bool:
    """The attribute is iterated in ``__iter__`` (or a generator it reaches): DSL302's."""
    for use in uses:
        if use.store or not _in_iteration(ctx, use.node):
            continue
        func = ctx.enclosing_function(use.node)
        if func is None:
            continue
        if func.name.value in ("__iter__", "__next__") or ctx.per_sample_mode(func) == LOOP:
            return True
        if ctx.regions.get(func).is_generator:
            return True
    return False


def per_sample_loads(ctx, uses: List[AttrUse]) -> List[AttrUse]:
    return [use for use in uses if not use.store and ctx.is_per_sample(use.node)]


def _call_text(ctx, call: cst.Call) -> str:
    text = " ".join(ctx.code(call.func).split())
    return f"{text}()"


# --------------------------------------------------------------------------- DSL401

_HANDLE_KINDS = {
    "builtins.open": "file",
    "gzip.open": "file",
    "bz2.open": "file",
    "lzma.open": "file",
    "codecs.open": "file",
    "gzip.GzipFile": "file",
    "bz2.BZ2File": "file",
    "lzma.LZMAFile": "file",
    "io.FileIO": "file",
    "os.fdopen": "file",
    "tarfile.open": "tar",
    "tarfile.TarFile": "tar",
    "tarfile.TarFile.open": "tar",
    "zipfile.ZipFile": "zip",
    "h5py.File": "h5py",
    "lmdb.open": "lmdb",
    "lmdb.Environment": "lmdb",
    "sqlite3.connect": "sqlite",
    "PIL.Image.open": "image",
    "socket.socket": "socket",
    "socket.create_connection": "socket",
    "psycopg2.connect": "db",
    "psycopg.connect": "db",
    "pymysql.connect": "db",
    "MySQLdb.connect": "db",
    "mysql.connector.connect": "db",
    "pymongo.MongoClient": "db",
    "requests.Session": "session",
    "requests.session": "session",
    "httpx.Client": "session",
    "urllib3.PoolManager": "session",
}
_HANDLE_TAILS = frozenset(q.rsplit(".", 1)[-1] for q in _HANDLE_KINDS)
_DERIVE = {
    "h5py": (("get",), True),
    "lmdb": (("begin",), False),
    "sqlite": (("cursor",), False),
    "db": (("cursor",), False),
    "zip": (("open",), False),
    "tar": (("extractfile",), False),
}
_SESSION_REQUESTS = frozenset({"get", "post", "put", "patch", "delete", "head", "options", "request", "send", "urlopen"})


def handle_kind(ctx, call: cst.Call) -> Optional[str]:
    func = call.func
    tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
    if tail is None:
        return None
    if tail == "open" and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        return "file" if lt.opener_kind(ctx, call) == "file" else None  # Path(p).open()
    if tail not in ctx.names.call_tails(_HANDLE_TAILS):
        return None
    kind = _HANDLE_KINDS.get(ctx.call_name(call) or "")
    if kind == "image" and lt.opener_kind(ctx, call) != "image":
        return None  # Image.open(BytesIO(...)) or of a file object: not Pillow's handle
    return kind


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


def _keyword_literal(ctx, call: cst.Call, name: str):
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return ctx.literal(arg.value)
    return UNKNOWN


def _write_only(ctx, call: cst.Call) -> bool:
    """``open(p, "w")``/``"a"``/``"x"`` without ``+``: nothing is read back through the offset."""
    qualified = ctx.call_name(call)
    if qualified not in ("builtins.open", "gzip.open", "bz2.open", "lzma.open", "codecs.open"):
        return False
    mode = _keyword_literal(ctx, call, "mode")
    if mode is UNKNOWN:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        mode = ctx.literal(positional[1].value) if len(positional) > 1 else "r"
    return isinstance(mode, str) and "+" not in mode and any(c in mode for c in "wax")


def _handle_message(ctx, kind: str, call: cst.Call, attr: str) -> str:
    text = _call_text(ctx, call)
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
            if _keyword_literal(ctx, call, "lock") is False
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


def _session_used_in_init(ctx, init: cst.FunctionDef, self_param: str, held: Held) -> bool:
    for sub in iter_subtree(init.body, into_scopes=False):
        if not (isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute)):
            continue
        if sub.func.attr.value not in _SESSION_REQUESTS:
            continue
        owner = sub.func.value
        if owner is held.call:
            return True
        if isinstance(owner, cst.Attribute) and isinstance(owner.value, cst.Name) and owner.value.value == self_param:
            if owner.attr.value in held.attrs:
                return True
        if isinstance(owner, cst.Name):
            parent = ctx.parent(held.call)
            if isinstance(parent, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == owner.value for t in parent.targets
            ):
                return True
    return False


class HandleInInit(Rule):
    """
    ## What it does
    Flags a file, archive (`gzip`, `bz2`, `lzma`, `tarfile`, `zipfile`), `h5py.File`,
    `lmdb.open`, `sqlite3.connect`, `PIL.Image.open`, socket, database client or
    HTTP session handle that a dataset's `__init__` creates and keeps on `self`
    (directly, or through `f["key"]`, `env.begin()`, `conn.cursor()`), when
    per-sample code (`__getitem__`, the yielding loop of `__iter__`, and what they
    call) uses it.

    It stays silent for the lazy pattern (`self.db = None` in `__init__`, opened on
    first use in each worker), for handles that the project re-creates per worker
    (reassigned in another method or in a `worker_init_fn`, or a dataset that checks
    `get_worker_info()` or `os.getpid()`), for read-only `np.load(mmap_mode=...)`
    maps (a shared read-only mapping is safe), for handles that `__iter__` consumes
    by iteration (DSL302 reports those), and when every DataLoader over the class
    has `num_workers=0`.

    ## Why is this bad?
    DataLoader workers are forked from the process that built the dataset, so they
    all inherit the *same* open file description: one worker's `seek()` moves the
    offset another worker is about to `read()` from. Measured on torch 2.13 with 2
    workers reading fixed-size records with `seek`+`read`: 54 wrong records in
    60,000 buffered reads, silently. Archives and image decoders fail louder
    (`zipfile.BadZipFile: Bad CRC-32`, `OSError: image file is truncated`), h5py gives
    `KeyError: 'Unable to open object (bad object header version number)'`, LMDB
    forbids using an environment across `fork()`, and SQLite connections must not
    cross `fork()` either (`sqlite3.DatabaseError: database disk image is
    malformed`). Under the spawn or forkserver start methods (macOS, Windows, and
    Linux from Python 3.14) the dataset cannot even be sent to the workers:
    `TypeError: cannot pickle '_io.BufferedReader' object`.

    ## Example
    ```python
    class Records(Dataset):
        def __init__(self, path):
            self.f = open(path, "rb")

        def __getitem__(self, i):
            self.f.seek(i * RECORD)
            return self.f.read(RECORD)
    ```

    ## Use instead
    ```python
    class Records(Dataset):
        def __init__(self, path):
            self.path = path
            self.f = None  # opened lazily, once in each worker

        def __getitem__(self, i):
            if self.f is None:
                self.f = open(self.path, "rb")
            self.f.seek(i * RECORD)
            return self.f.read(RECORD)
    ```

    ## References
    - pytorch/pytorch#11887, #11929 (h5py), pytorch/vision#689 (lmdb)
    - SQLite FAQ: "Can multiple applications or multiple instances of SQLite access the same database file?" (fork)
    - LMDB documentation: "Do not use an environment in a process that forked after opening it"
    """

    code = "DSL401"
    name = "handle-in-init"
    symptom = Symptom("integrity", "shared file offset across forked workers: wrong records; spawn: cannot pickle")
    level = ERROR
    summary = "A file, database or network handle opened in a dataset's `__init__` is shared by forked workers"
    help = (
        "Store the path in `__init__` (`self.f = None`) and open the handle lazily on first use in "
        "`__getitem__`, so that every worker opens its own"
    )

    valid = (
        """
        from torch.utils.data import Dataset

        class Lazy(Dataset):
            def __init__(self, path):
                self.path = path
                self.f = None

            def __getitem__(self, i):
                if self.f is None:
                    self.f = open(self.path, "rb")
                self.f.seek(i * 8)
                return self.f.read(8)
        """,
        """
        import h5py
        from torch.utils.data import Dataset

        class Meta(Dataset):
            def __init__(self, path):
                self.path = path
                with h5py.File(path, "r") as f:  # closed before the fork
                    self.n = len(f["x"])
                self.h5 = h5py.File(path, "r")
                self.length = len(self.h5["x"])
                self.h5.close()
                self.h5 = None

            def __getitem__(self, i):
                if self.h5 is None:
                    self.h5 = h5py.File(self.path, "r")
                return self.h5["x"][i]
        """,
        """
        import numpy as np
        from torch.utils.data import Dataset

        class Mapped(Dataset):
            def __init__(self, path):
                self.data = np.load(path, mmap_mode="r")  # read-only mapping: safe to share

            def __getitem__(self, i):
                return self.data[i]
        """,
        """
        import os
        import sqlite3
        from torch.utils.data import Dataset

        class PerProcess(Dataset):
            def __init__(self, path):
                self.path = path
                self.conn = sqlite3.connect(path)
                self.pid = os.getpid()

            def __getitem__(self, i):
                if self.pid != os.getpid():
                    self._reconnect()
                return self.conn.execute("select v from t where k=?", (i,)).fetchone()

            def _reconnect(self):
                self.conn = sqlite3.connect(self.path)
                self.pid = os.getpid()
        """,
        """
        import lmdb
        from torch.utils.data import DataLoader, Dataset, get_worker_info

        class Env(Dataset):
            def __init__(self, path):
                self.path = path
                self.env = lmdb.open(path, readonly=True, lock=False)

            def __getitem__(self, i):
                with self.env.begin() as txn:
                    return txn.get(str(i).encode())

        def reopen(worker_id):
            ds = get_worker_info().dataset
            ds.env = lmdb.open(ds.path, readonly=True, lock=False)

        loader = DataLoader(Env("db"), num_workers=4, worker_init_fn=reopen)
        """,
        {
            "data.py": """
                import lmdb
                from torch.utils.data import Dataset

                class Env(Dataset):
                    def __init__(self, path):
                        self.path = path
                        self.env = lmdb.open(path, readonly=True, lock=False)

                    def __getitem__(self, i):
                        with self.env.begin() as txn:
                            return txn.get(str(i).encode())
                """,
            "train.py": """
                from torch.utils.data import DataLoader
                from data import Env
                from workers import reopen

                loader = DataLoader(Env("db"), num_workers=4, worker_init_fn=reopen)
                """,
            "workers.py": """
                import lmdb
                import torch

                def reopen(worker_id):
                    info = torch.utils.data.get_worker_info()
                    info.dataset.env = lmdb.open(info.dataset.path, readonly=True)
                """,
        },
        """
        from torch.utils.data import IterableDataset

        class Lines(IterableDataset):
            def __init__(self, path):
                self.f = open(path)  # consumed by iteration: DSL302 reports it

            def __iter__(self):
                for line in self.f:
                    yield line.strip()
        """,
        """
        import json
        from torch.utils.data import Dataset

        class Loaded(Dataset):
            def __init__(self, path):
                self.f = open(path)
                self.items = json.load(self.f)  # only __init__ uses the handle

            def __getitem__(self, i):
                return self.items[i]
        """,
        """
        from torch.utils.data import DataLoader, Dataset

        class Single(Dataset):
            def __init__(self, path):
                self.f = open(path, "rb")

            def __getitem__(self, i):
                self.f.seek(i * 8)
                return self.f.read(8)

        loader = DataLoader(Single("x.bin"), batch_size=4, num_workers=0)
        """,
        """
        import zipfile
        from torch.utils.data import Dataset

        class Members(Dataset):
            def __init__(self, path):
                self.zf = zipfile.ZipFile(path)
                self.names = self.zf.namelist()

            def __getitem__(self, i):
                return self.names[i]

        def not_a_dataset(path):
            handle = open(path)
            return handle
        """,
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class Background(Dataset):
            def __init__(self, path):
                self.bg = Image.open(path)
                self.bg.load()  # decoded in the parent: single-frame files are closed

            def __getitem__(self, i):
                return self.bg.crop((i, i, i + 8, i + 8))
        """,
        """
        import requests
        from torch.utils.data import Dataset

        class Remote(Dataset):
            def __init__(self, urls):
                self.urls = urls
                self.session = requests.Session()  # no connection yet

            def __getitem__(self, i):
                return self.session.get(self.urls[i]).content
        """,
    )
    invalid = (
        """
        from torch.utils.data import Dataset

        RECORD = 16

        class Records(Dataset):
            def __init__(self, path):
                self.f = open(path, "rb")  # expect: DSL401

            def __getitem__(self, i):
                self.f.seek(i * RECORD)
                return self.f.read(RECORD)
        """,
        """
        import h5py as h
        import torch.utils.data as tud

        class Frames(tud.Dataset):
            def __init__(self, path):
                self.images = h.File(path, "r")["images"]  # expect: DSL401

            def __len__(self):
                return len(self.images)

            def __getitem__(self, i):
                return self._load(i)

            def _load(self, i):
                return self.images[i]
        """,
        """
        from lmdb import open as lmdb_open
        from torch.utils.data import Dataset

        class Env(Dataset):
            def __init__(self, path):
                env = lmdb_open(path, readonly=True, lock=False)  # expect: DSL401
                self.txn = env.begin()

            def __getitem__(self, i):
                return self.txn.get(str(i).encode())
        """,
        """
        import sqlite3
        from torch.utils.data import Dataset

        class Table(Dataset):
            def __init__(self, path):
                self.conn = sqlite3.connect(path)  # expect: DSL401
                self.n = self.conn.execute("select count(*) from t").fetchone()[0]

            def __getitem__(self, i):
                return self.conn.execute("select v from t where k=?", (i,)).fetchone()
        """,
        {
            "base.py": """
                from torch.utils.data import Dataset

                class Base(Dataset):
                    def __getitem__(self, i):
                        return self.read(i)
                """,
            "zipped.py": """
                import zipfile
                from base import Base

                class Zipped(Base):
                    def __init__(self, path):
                        self.zf = zipfile.ZipFile(path)  # expect: DSL401
                        self.names = self.zf.namelist()

                    def read(self, i):
                        return self.zf.read(self.names[i])
                """,
        },
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class Atlas(Dataset):
            def __init__(self, path, size):
                self.atlas = Image.open(path)  # expect: DSL401
                self.size = size

            def __getitem__(self, i):
                return self.atlas.crop((i * self.size, 0, (i + 1) * self.size, self.size))
        """,
        """
        import gzip
        from torch.utils.data import DataLoader, Dataset

        class Packed(Dataset):
            def __init__(self, path):
                self.f = gzip.open(path)  # expect: DSL401

            def __getitem__(self, i):
                self.f.seek(i * 4)
                return self.f.read(4)

        def seed_worker(worker_id):
            import numpy as np, torch
            np.random.seed(torch.initial_seed() % 2**32)

        loader = DataLoader(Packed("a.gz"), num_workers=2, worker_init_fn=seed_worker)
        """,
    )

    def check(self, ctx):
        for cls, init, self_param in dataset_inits(ctx):
            family = None
            for call in iter_subtree(init.body, into_scopes=False):
                if not isinstance(call, cst.Call):
                    continue
                kind = handle_kind(ctx, call)
                if kind is None or (kind == "file" and _write_only(ctx, call)):
                    continue
                if kind == "sqlite" and call.args and ctx.literal(call.args[0].value) == ":memory:":
                    continue  # a private in-memory database: each worker gets its own copy
                methods, subscript = _DERIVE.get(kind, ((), False))
                held = held_on_self(ctx, init, self_param, call, methods, subscript)
                if held is None:
                    continue
                if kind == "session" and not _session_used_in_init(ctx, init, self_param, held):
                    continue
                family = family or class_family(ctx, cls)
                used: List[str] = []
                for attr, site in held.attrs.items():
                    close_methods = ("close", *lt.IMAGE_LOADING_METHODS) if kind == "image" else ("close",)
                    if dropped_in_init(ctx, init, self_param, attr, site, close_methods):
                        continue
                    uses = self_attr_uses(ctx, family, attr)
                    if consumed_by_iter(ctx, uses):
                        used = []
                        break
                    if stores_elsewhere(ctx, family, attr, init):
                        used = []
                        break
                    if per_sample_loads(ctx, uses):
                        used.append(attr)
                if not used:
                    continue
                if family_consults_worker(ctx, cls, family):
                    continue
                if not loaders_allow(ctx, cls, set(held.attrs)):
                    continue
                level = WARNING if kind == "sqlite" else None
                yield self.report(call, _handle_message(ctx, kind, call, used[0]), level=level)


# --------------------------------------------------------------------------- DSL402

_RNG_KINDS = {
    "numpy.random.default_rng": "numpy",
    "numpy.random.RandomState": "numpy",
    "numpy.random.Generator": "numpy",
    "numpy.random.mtrand.RandomState": "numpy",
    "random.Random": "random",
    "torch.Generator": "torch",
    "torch._C.Generator": "torch",
}
_RNG_TAILS = frozenset(q.rsplit(".", 1)[-1] for q in _RNG_KINDS)
_RESEED_METHODS = frozenset({"seed", "manual_seed", "set_state", "setstate", "set_seed", "bit_generator"})


def rng_kind(ctx, call: cst.Call) -> Optional[str]:
    func = call.func
    tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
    if tail is None or tail not in ctx.names.call_tails(_RNG_TAILS):
        return None
    return _RNG_KINDS.get(ctx.call_name(call) or "")


def _reseeded(ctx, uses: List[AttrUse]) -> bool:
    """``self.rng.seed(...)``, ``self.rng.manual_seed(...)``... outside ``__init__``."""
    for use in uses:
        parent = ctx.parent(use.node)
        if isinstance(parent, cst.Attribute) and parent.value is use.node and parent.attr.value in _RESEED_METHODS:
            if use.method.name.value != "__init__":
                return True
    return False


def _reseeded_anywhere(ctx, attr: str, init: cst.FunctionDef) -> bool:
    """``<anything>.<attr>.seed(...)`` outside ``__init__`` (a worker_init_fn reseeding it)."""
    for node in ctx.nodes(cst.Attribute):
        if node.attr.value not in _RESEED_METHODS:
            continue
        owner = node.value
        if isinstance(owner, cst.Attribute) and owner.attr.value == attr and ctx.enclosing_function(node) is not init:
            return True
    return False


class RngStateInInit(Rule):
    """
    ## What it does
    Flags a random generator object (`np.random.default_rng`, `np.random.RandomState`,
    `np.random.Generator`, `random.Random`, `torch.Generator`) that a dataset's
    `__init__` creates and keeps on `self`, when per-sample code draws from it and
    nothing reseeds it per worker: no `get_worker_info()` or `os.getpid()` in the
    dataset, no other method or `worker_init_fn` in the project that reassigns or
    reseeds it.

    Global RNG use (`np.random.rand()`, `random.random()`, `torch.rand()` in
    `__getitem__`) is *not* flagged: since torch 1.9 every worker reseeds the
    global `random`, `numpy` and `torch` generators from its own per-epoch seed.

    ## Why is this bad?
    torch reseeds only the global generators in each worker. A generator *object*
    created in `__init__` is copied into every forked worker with the same state, so
    all workers draw the same numbers, and because workers are re-created from the
    untouched parent copy every epoch, every epoch draws them again. Measured on
    torch 2.13 with 2 workers and 64 samples: 32 of 64 augmentations duplicated
    within each epoch, and 64 of 64 identical to the previous epoch's. With
    `persistent_workers=True` the duplicates remain (epochs then differ).

    ## Example
    ```python
    class Augmented(Dataset):
        def __init__(self, data, seed=0):
            self.data = data
            self.rng = np.random.default_rng(seed)

        def __getitem__(self, i):
            return self.data[i] + self.rng.normal(size=self.data[i].shape)
    ```

    ## Use instead
    ```python
    class Augmented(Dataset):
        def __init__(self, data):
            self.data = data

        def __getitem__(self, i):
            # the global RNGs are reseeded per worker and per epoch by torch
            return self.data[i] + np.random.normal(size=self.data[i].shape)
    ```
    or create the generator in each worker from `get_worker_info().seed`.

    ## References
    - PyTorch docs, "Randomness in multi-process data loading"
    - pytorch/pytorch#5059, PR#56488
    """

    code = "DSL402"
    name = "rng-state-in-init"
    symptom = Symptom("rng", "random draws duplicated across workers and repeated every epoch")
    level = ERROR
    summary = "A random generator created in a dataset's `__init__` gives every worker the same random stream"
    help = (
        "Draw from the global `np.random`/`random`/`torch` RNGs (torch reseeds them per worker and epoch), "
        "or create the generator in the worker from `torch.utils.data.get_worker_info().seed`"
    )

    valid = (
        """
        import numpy as np
        from torch.utils.data import Dataset

        class GlobalRng(Dataset):
            def __getitem__(self, i):
                return np.random.rand()  # reseeded per worker since torch 1.9
        """,
        """
        import numpy as np
        from torch.utils.data import Dataset, get_worker_info

        class Reseeded(Dataset):
            def __init__(self):
                self.rng = np.random.default_rng(0)

            def __getitem__(self, i):
                info = get_worker_info()
                if info is not None and not getattr(self, "_seeded", False):
                    self.rng = np.random.default_rng(info.seed)
                    self._seeded = True
                return self.rng.random()
        """,
        """
        import random
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Jitter(Dataset):
            def __init__(self):
                self.rng = random.Random(0)

            def __getitem__(self, i):
                return self.rng.random()

        def worker_init_fn(worker_id):
            torch.utils.data.get_worker_info().dataset.rng.seed(torch.initial_seed())

        loader = DataLoader(Jitter(), num_workers=2, worker_init_fn=worker_init_fn)
        """,
        """
        import torch
        from torch.utils.data import IterableDataset, get_worker_info

        class Shuffled(IterableDataset):
            def __init__(self, items, seed):
                self.items = items
                self.g = torch.Generator().manual_seed(seed)

            def __iter__(self):
                order = torch.randperm(len(self.items), generator=self.g)  # once per epoch, same in all workers
                info = get_worker_info()
                for k in order[info.id :: info.num_workers]:
                    yield self.items[k]
        """,
        """
        import numpy as np
        from torch.utils.data import Dataset

        class PerIndex(Dataset):
            def __init__(self, seed):
                self.seed = seed
                self.rng = np.random.RandomState(seed)

            def __getitem__(self, i):
                self.rng.seed(self.seed + i)  # deterministic per index
                return self.rng.rand()
        """,
        """
        import numpy as np
        from torch.utils.data import Dataset

        class OnlyInit(Dataset):
            def __init__(self, n):
                self.rng = np.random.default_rng(0)
                self.noise = self.rng.normal(size=n)  # drawn once, in the parent

            def __getitem__(self, i):
                return self.noise[i]
        """,
        """
        import numpy as np
        from torch.utils.data import Dataset

        class Epochs(Dataset):
            def __init__(self):
                self.rng = np.random.default_rng(0)

            def set_epoch(self, epoch):
                self.rng = np.random.default_rng(epoch)

            def __getitem__(self, i):
                return self.rng.random()
        """,
    )
    invalid = (
        """
        import numpy as np
        from torch.utils.data import Dataset

        class Augmented(Dataset):
            def __init__(self, data, seed=0):
                self.data = data
                self.rng = np.random.default_rng(seed)  # expect: DSL402

            def __getitem__(self, i):
                return self.data[i] + self.rng.normal()
        """,
        """
        from numpy.random import default_rng
        import random as r
        import torch.utils.data as tud

        class Two(tud.Dataset):
            def __init__(self):
                self.np_rng = default_rng()  # expect: DSL402
                self.py_rng = r.Random(0)  # expect: DSL402

            def __getitem__(self, i):
                return self.augment(i)

            def augment(self, i):
                return i + self.np_rng.random() + self.py_rng.random()
        """,
        """
        import torch
        from torch.utils.data import IterableDataset

        class Noisy(IterableDataset):
            def __init__(self, n):
                self.n = n
                self.g = torch.Generator().manual_seed(1)  # expect: DSL402

            def __iter__(self):
                for i in range(self.n):
                    yield torch.randn(3, generator=self.g)
        """,
        {
            "base.py": """
                from torch.utils.data import Dataset

                class Base(Dataset):
                    def __getitem__(self, i):
                        return self.transform(i)
                """,
            "aug.py": """
                import numpy.random as npr
                from base import Base

                class Aug(Base):
                    def __init__(self):
                        self.state = npr.RandomState(0)  # expect: DSL402

                    def transform(self, i):
                        return i * self.state.uniform()
                """,
        },
    )

    def check(self, ctx):
        for cls, init, self_param in dataset_inits(ctx):
            family = None
            for call in iter_subtree(init.body, into_scopes=False):
                if not isinstance(call, cst.Call):
                    continue
                kind = rng_kind(ctx, call)
                if kind is None:
                    continue
                if kind == "numpy" and isinstance(ctx.parent(call), cst.Arg):
                    continue  # e.g. Generator(PCG64(...)) is reported at the outer call
                held = held_on_self(ctx, init, self_param, call, ("manual_seed",), False)
                if held is None:
                    continue
                family = family or class_family(ctx, cls)
                used: List[str] = []
                silent = False
                for attr, site in held.attrs.items():
                    if dropped_in_init(ctx, init, self_param, attr, site, ()):
                        continue
                    uses = self_attr_uses(ctx, family, attr)
                    if (
                        _reseeded(ctx, uses)
                        or _reseeded_anywhere(ctx, attr, init)
                        or stores_elsewhere(ctx, family, attr, init)
                    ):
                        silent = True
                        break
                    if per_sample_loads(ctx, uses):
                        used.append(attr)
                if silent or not used:
                    continue
                if family_consults_worker(ctx, cls, family):
                    continue
                if not loaders_allow(ctx, cls, set(held.attrs)):
                    continue
                yield self.report(
                    call,
                    f"`{_call_text(ctx, call)}` in `__init__` is kept on `self.{used[0]}` and drawn from per "
                    "sample, but every DataLoader worker inherits a copy of the same generator state: workers "
                    "draw identical numbers (measured with 2 workers: 32 of 64 per-sample draws, e.g. augmentations, "
                    "duplicated per epoch) and every epoch repeats them (64 of 64 identical); torch reseeds only the global "
                    "`random`/`numpy`/`torch` generators per worker",
                )


# --------------------------------------------------------------------------- DSL403

_SEEDERS = {
    "numpy.random.seed": "numpy",
    "numpy.random.mtrand.seed": "numpy",
    "random.seed": "random",
    "torch.manual_seed": "torch",
    "torch.random.manual_seed": "torch",
    "torch.cuda.manual_seed": "torch.cuda",
    "torch.cuda.manual_seed_all": "torch.cuda",
    "imgaug.seed": "imgaug",
    "imgaug.random.seed": "imgaug",
    "lightning.seed_everything": "all",
    "lightning.pytorch.seed_everything": "all",
    "lightning.fabric.seed_everything": "all",
    "pytorch_lightning.seed_everything": "all",
    "lightning_fabric.seed_everything": "all",
    "transformers.set_seed": "all",
    "accelerate.utils.set_seed": "all",
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


def _positional_params(func) -> List[str]:
    params = func.params
    return [p.name.value for p in (*params.posonly_params, *params.params)]


def fixed_seedings(ctx, func, worker_param: str, _depth: int = 0) -> List[Tuple[str, cst.Call]]:
    """(RNG family, call) for every seeding in ``func`` whose seed is fixed per worker id.

    Empty when any family is also seeded from something else (``torch.initial_seed()``,
    ``get_worker_info().seed``, an unknown value): only families seeded from the
    worker id and constants alone are returned.
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
                params = _positional_params(helper)
                first = _seed_arg(node)
                if params and first is not None and fixed_seedings(ctx, helper, params[0], _depth + 1):
                    family = f"helper:{qualified}"
        if family is None:
            continue
        seed = _seed_arg(node)
        is_fixed = seed is not None and analysis.fixed(seed)
        by_family.setdefault(family, []).append((node, is_fixed))
    found = []
    for family, calls in by_family.items():
        if all(is_fixed for _, is_fixed in calls):
            found.extend((family, call) for call, _ in calls)
    return found


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


class WorkerSeedFromWorkerId(Rule):
    """
    ## What it does
    Flags a function used as a DataLoader `worker_init_fn` (in this file or, through
    the project's DataLoader calls, in another one) that seeds an RNG
    (`np.random.seed`, `random.seed`, `torch.manual_seed`, a global
    `np.random.default_rng(...)`...) only from `worker_id` and constants, not from
    `torch.initial_seed()` or `get_worker_info().seed`.

    A seed that also depends on anything else (another parameter, an epoch, an
    unknown value) is not flagged, nor is a function used only with
    `persistent_workers=True` (its streams then continue across epochs).

    ## Why is this bad?
    torch already gives each worker its own seed, `base_seed + worker_id`, where
    `base_seed` is drawn anew every epoch. Reseeding from `worker_id` alone throws
    that away: each worker gets a different stream (no duplicates within an epoch),
    but the same worker gets the same stream every epoch. Measured on torch 2.13
    with 2 workers and `np.random.seed(worker_id)`: 0 duplicates within an epoch,
    and 64 of 64 random values identical from one epoch to the next, so every epoch
    sees the same augmentations.

    ## Example
    ```python
    def worker_init_fn(worker_id):
        np.random.seed(worker_id)

    loader = DataLoader(ds, num_workers=4, worker_init_fn=worker_init_fn)
    ```

    ## Use instead
    ```python
    def worker_init_fn(worker_id):
        np.random.seed(torch.initial_seed() % 2**32)  # differs per worker and per epoch
    ```

    ## References
    - PyTorch docs, "Reproducibility: DataLoader" (`seed_worker`)
    - pytorch/pytorch#5059; xingyizhou/CenterNet#233
    """

    code = "DSL403"
    name = "worker-seed-from-worker-id"
    symptom = Symptom("rng", "identical random streams every epoch")
    level = ERROR
    summary = "A `worker_init_fn` seeds from `worker_id` only, so every epoch repeats the same random streams"
    help = "Seed from `torch.initial_seed() % 2**32` (or `get_worker_info().seed`), which torch varies per worker and per epoch"

    valid = (
        """
        import numpy as np
        import random
        import torch
        from torch.utils.data import DataLoader

        def seed_worker(worker_id):
            worker_seed = torch.initial_seed() % 2**32
            np.random.seed(worker_seed)
            random.seed(worker_seed)

        loader = DataLoader(ds, num_workers=2, worker_init_fn=seed_worker)
        """,
        """
        import numpy as np
        from torch.utils.data import DataLoader, get_worker_info

        def init(worker_id):
            np.random.seed(get_worker_info().seed % 2**32)

        loader = DataLoader(ds, num_workers=2, worker_init_fn=init)
        """,
        """
        import numpy as np
        from torch.utils.data import DataLoader

        def init(worker_id):
            np.random.seed(worker_id)

        loader = DataLoader(ds, num_workers=2, persistent_workers=True, worker_init_fn=init)
        """,
        """
        import numpy as np

        def not_a_worker_init_fn(worker_id):
            np.random.seed(worker_id)
        """,
        """
        import functools
        import numpy as np
        from torch.utils.data import DataLoader

        def init(worker_id, base_seed):
            np.random.seed(base_seed + worker_id)  # base_seed: unknown

        loader = DataLoader(ds, num_workers=2, worker_init_fn=functools.partial(init, base_seed=seed))
        """,
        """
        import numpy as np
        from torch.utils.data import DataLoader

        def init(worker_id):
            np.random.seed(np.random.get_state()[1][0] + worker_id)

        loader = DataLoader(ds, num_workers=2, worker_init_fn=init)
        """,
    )
    invalid = (
        """
        import numpy as np
        from torch.utils.data import DataLoader

        def worker_init_fn(worker_id):  # expect: DSL403
            np.random.seed(worker_id)

        loader = DataLoader(ds, batch_size=8, num_workers=4, worker_init_fn=worker_init_fn)
        """,
        """
        import random as rnd
        from numpy.random import seed as np_seed
        import torch
        import torch.utils.data as tud

        BASE = 1234

        def init_worker(wid):  # expect: DSL403
            s = BASE + wid
            np_seed(s)
            rnd.seed(s)
            torch.manual_seed(s)

        loader = tud.DataLoader(ds, num_workers=2, worker_init_fn=init_worker)
        """,
        {
            "utils/seeding.py": """
                import numpy as np

                def worker_init(worker_id):  # expect: DSL403
                    np.random.seed(42 + worker_id)
                """,
            "utils/__init__.py": "",
            "train.py": """
                from torch.utils.data import DataLoader
                from utils.seeding import worker_init

                loader = DataLoader(ds, num_workers=8, worker_init_fn=worker_init)
                """,
        },
        """
        import numpy as np
        from torch.utils.data import DataLoader, get_worker_info

        def init(worker_id):  # expect: DSL403
            info = get_worker_info()
            info.dataset.rng = np.random.default_rng(info.id)

        loader = DataLoader(ds, num_workers=2, worker_init_fn=init)
        """,
        """
        import random
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, num_workers=2, worker_init_fn=lambda i: random.seed(i))  # expect: DSL403
        """,
    )

    def check(self, ctx):
        reported: Set[int] = set()
        # functions of this file that a DataLoader anywhere in the project uses
        for func in ctx.nodes(cst.FunctionDef):
            if ctx.enclosing_function(func) is not None or ctx.method_class(func) is not None:
                continue
            params = _positional_params(func)
            if not params:
                continue
            seedings = fixed_seedings(ctx, func, params[0])
            if not seedings:
                continue
            users = ctx.view.worker_init_loaders(ctx.qualname_of_def(func))
            if not users or not any(_loader_repeats(facts) for facts in users):
                continue
            reported.add(id(func))
            yield self.report(func, _seed_message(ctx, seedings, params[0], func), end_node=func.name)
        # lambdas and methods passed in this file
        for bound in ctx.dataloader_calls():
            arg = bound.arg("worker_init_fn")
            if arg is None:
                continue
            target = _function_target(ctx, arg.value)
            func, offset = self._local_callable(ctx, target)
            if func is None or id(func) in reported:
                continue
            params = _positional_params(func)
            if len(params) <= offset:
                continue
            if isinstance(arg.value, cst.Call):
                continue  # partial(...) of a lambda or method: arguments unknown
            persistent = ctx.value(bound, "persistent_workers")
            workers = ctx.value(bound, "num_workers")
            if persistent is True or workers == 0:
                continue
            seedings = _lambda_seedings(ctx, func, params[offset]) if isinstance(func, cst.Lambda) else fixed_seedings(
                ctx, func, params[offset]
            )
            if not seedings:
                continue
            reported.add(id(func))
            yield self.report(
                func,
                _seed_message(ctx, seedings, params[offset], func),
                end_node=None if isinstance(func, cst.Lambda) else func.name,
            )

    @staticmethod
    def _local_callable(ctx, target):
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


def _lambda_seedings(ctx, func: cst.Lambda, worker_param: str):
    """A lambda body is one expression: a seeding call on the worker id."""
    body = func.body
    if not isinstance(body, cst.Call):
        return []
    family = _SEEDERS.get(ctx.call_name(body) or "")
    seed = _seed_arg(body)
    if family is None or seed is None:
        return []
    analysis = _SeedAnalysis(ctx, func, worker_param)
    return [(family, body)] if analysis.fixed(seed) else []


def _loader_repeats(facts: dict) -> bool:
    """Could the streams repeat across epochs under this DataLoader?"""
    if facts.get("persistent_workers") is True:
        return False
    if facts.get("num_workers") == 0:
        return False
    return True


def _seed_message(ctx, seedings, worker_param: str, func=None) -> str:
    names = []
    for family, call in seedings:
        text = _call_text(ctx, call)
        if text not in names:
            names.append(text)
    shown = ", ".join(f"`{n}`" for n in names[:3])
    who = f"`{func.name.value}`" if isinstance(func, cst.FunctionDef) else "this lambda"
    return (
        f"{who} is a DataLoader `worker_init_fn` that seeds {shown} only from the worker id "
        f"(`{worker_param}`) and constants, replacing torch's "
        "per-epoch worker seed: there are no duplicates within an epoch, but every epoch replays the same "
        "random streams (measured with 2 workers: 64 of 64 values identical across epochs) unless "
        "`persistent_workers=True`"
    )
