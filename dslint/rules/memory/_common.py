"""Which ``__init__`` values are per-sample indexes of Python objects: lists or dicts of
strings or tuples (paths, ``(path, label)`` pairs, parsed annotations) built by a
comprehension, a listing, a parser, ``.tolist()``, or ``[]`` filled in a loop."""

from __future__ import annotations

import math
import re
from itertools import takewhile
from typing import Optional

import libcst as cst

from dslint.semantics.bindings import class_ref, single_assignment
from dslint.semantics.classes import class_family, dataset_inits, find_method
from dslint.semantics.instance_state import indexed_by_local, self_attr_uses, self_stores
from dslint.semantics.init_code import family_construction, fills, fills_under
from dslint.semantics.once import in_once_block
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.sizes import known_size
from dslint.semantics.values import possible
from dslint.semantics.walk import iter_subtree

# Calls returning a list (or dict) of Python strings / objects.
_LISTINGS = frozenset({"os.listdir", "glob.glob", "glob.iglob", "os.scandir"})
_PARSERS = frozenset({"json.load", "json.loads", "ujson.load", "orjson.loads", "yaml.safe_load", "yaml.full_load"})
_PATH_LISTING_METHODS = frozenset({"glob", "rglob", "iterdir"})
_LINE_METHODS = frozenset({"readlines", "splitlines", "split"})
_WRAPPERS = frozenset({"builtins.list", "builtins.sorted", "builtins.tuple", "builtins.dict", "builtins.set"})
_PATH_FUNCTIONS = ("join", "basename", "splitext", "relpath", "abspath")
_STRING_CALLS = frozenset({*(f"os.path.{f}" for f in _PATH_FUNCTIONS), "builtins.str", "builtins.tuple", "pathlib.Path"})
_STRING_METHODS = frozenset(
    {"strip", "rstrip", "lstrip", "split", "format", "join", "replace", "lower", "upper", "rsplit", "decode"}
)
# Readers whose payload is Python objects when a project helper turns it into records.
_PAYLOAD_READERS = _PARSERS | {"pickle.load", "pickle.loads", "yaml.load", "mmengine.load", "mmcv.load", "joblib.load"}
# An index of fewer entries than this, known statically, is too small to matter.
SMALL = 10_000


class _Source:
    """Is an ``__init__`` expression a Python container of per-sample strings/tuples?"""

    def __init__(self, ctx, init: cst.FunctionDef, attr: Optional[str] = None) -> None:
        self.ctx = ctx
        self.init = init
        self.attr = attr  # the attribute being stored: ``self.x = helper(self.x)`` follows it

    def describe(self, expr: cst.CSTNode, depth: int = 0) -> Optional[str]:
        """A short description of the container ``expr`` builds, or None when unknown."""
        if depth > 4:
            return None
        ctx = self.ctx
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.DictComp)) and small_loop(ctx, expr.for_in):
            return None
        if isinstance(expr, (cst.ListComp, cst.SetComp)):
            return "list" if self._stringish(expr.elt, expr.for_in, depth) else None
        if isinstance(expr, cst.DictComp):
            return "dict" if self._stringish(expr.value, expr.for_in, depth) else None
        if isinstance(expr, cst.Call):
            helper = self._helper_over_payload(expr, depth)
            if helper is not None:
                return helper
            qualified = ctx.call_name(expr)
            if qualified in _PARSERS:
                return f"`{qualified}` result"
            if qualified in ("os.listdir",):
                return "`os.listdir` list"
            if qualified == "glob.glob":
                return "`glob.glob` list"
            if qualified in _WRAPPERS and expr.args:
                inner = expr.args[0].value
                if self._listing(inner) or self.describe(inner, depth + 1) or self._generator_of_strings(inner, depth):
                    return f"`{qualified.split('.')[-1]}(...)` list"
                return None
            if isinstance(expr.func, cst.Attribute):
                method = expr.func.attr.value
                if method == "tolist":
                    return "`.tolist()` list"
                if method in _LINE_METHODS and self._text_source(expr.func.value):
                    return "list of lines"
        return None

    # -- records a project helper builds from a file's payload
    def _helper_over_payload(self, call: cst.Call, depth: int) -> Optional[str]:
        """``helper(payload)``: a project function (or a method of the class) given the
        content of a parsed file, or an index built earlier in ``__init__``, that builds
        no numpy/torch/pandas object: the records it returns are Python objects."""
        ctx = self.ctx
        if any(arg.star for arg in call.args):
            return None
        func = call.func
        self_param = self_name(self.init)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == self_param:
            owner = ctx.method_class(self.init)
            method = find_method(ctx, owner, func.attr.value) if owner is not None else None
            if method is None or _builds_arrays(ctx, method):
                return None
            name = f"self.{func.attr.value}"
        else:
            qualified = ctx.call_name(call)
            facts = ctx.view.function_facts(qualified) if qualified and not qualified.startswith("builtins.") else None
            if not facts or any(target.startswith(_ARRAY_PREFIXES) for _, target, _ in facts["calls"]):
                return None
            name = qualified.rsplit(".", 1)[-1]
        for arg in call.args:
            source = self._payload(arg.value, depth + 1)
            if source is not None:
                return f"records `{name}()` builds from {source}"
        return None

    def _payload(self, expr: cst.CSTNode, depth: int) -> Optional[str]:
        """What parsed file ``expr`` holds (``data["infos"]`` of ``data = pickle.load(f)``),
        or the index being stored as it was built before (``self.items =
        self.keep(self.items)``)."""
        if depth > 4:
            return None
        ctx = self.ctx
        if isinstance(expr, cst.Call):
            qualified = ctx.call_name(expr)
            return f"the `{qualified}` payload" if qualified in _PAYLOAD_READERS else None
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            if isinstance(ctx.literal(expr.slice[0].slice.value), str):
                return self._payload(expr.value, depth + 1)
            return None
        if isinstance(expr, cst.Name):
            value = single_assignment(ctx.tree, expr)
            return self._payload(value, depth + 1) if value is not None else None
        attr = self_attr(expr, self_name(self.init))
        if attr is None or attr != self.attr:
            return None  # only the index itself, filtered or rebuilt in place
        for node in iter_subtree(self.init.body, into_scopes=False):
            if isinstance(node, cst.Assign) and node.value is not expr and len(node.targets) == 1:
                if self_attr(node.targets[0].target, self_name(self.init)) == attr:
                    if any(sub is expr for sub in iter_subtree(node.value)):
                        continue
                    what = self.describe(node.value, depth + 1)
                    if what is not None and " builds from " in what:
                        return what.split(" builds from ", 1)[1]
                    if what is not None:
                        return f"the index `self.{attr}` ({what})"
        return None

    # -- helpers
    def _listing(self, expr: cst.CSTNode) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        if self.ctx.call_name(expr) in _LISTINGS:
            return True
        func = expr.func
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value in _PATH_LISTING_METHODS
            and self._is_path(func.value)
        )

    def _is_path(self, expr: cst.CSTNode) -> bool:
        if isinstance(expr, cst.Call):
            return self.ctx.call_name(expr) in ("pathlib.Path", "pathlib.PurePath")
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
            return self._is_path(expr.left)
        if isinstance(expr, cst.Name):
            value = single_assignment(self.ctx.tree, expr)
            return value is not None and self._is_path(value)
        return False

    def _text_source(self, expr: cst.CSTNode) -> bool:
        """``f.read()``, ``open(p).read()``, ``Path(p).read_text()``, ``f`` (readlines)."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            if expr.func.attr.value in ("read", "read_text", "strip", "rstrip"):
                return True
        if isinstance(expr, cst.Name):
            return self._file_name(expr)
        return False

    def _file_name(self, name: cst.Name) -> bool:
        for item in self.ctx.nodes(cst.WithItem):
            if (
                item.asname is not None
                and isinstance(item.asname.name, cst.Name)
                and item.asname.name.value == name.value
                and self.ctx.enclosing_function(item) is self.init
                and isinstance(item.item, cst.Call)
                and self.ctx.call_name(item.item) == "builtins.open"
            ):
                return True
        return False

    def _generator_of_strings(self, expr: cst.CSTNode, depth: int) -> bool:
        return isinstance(expr, cst.GeneratorExp) and self._stringish(expr.elt, expr.for_in, depth)

    def _iter_is_strings(self, for_in: cst.CompFor, depth: int) -> bool:
        source = for_in.iter
        if self._listing(source) or (isinstance(source, cst.Name) and self._file_name(source)):
            return True
        if isinstance(source, cst.Call) and self.ctx.call_name(source) in _WRAPPERS and source.args:
            return self._listing(source.args[0].value) or self.describe(source.args[0].value, depth + 1) is not None
        return self.describe(source, depth + 1) is not None

    def _stringish(self, elt: cst.CSTNode, for_in: cst.CompFor, depth: int) -> bool:
        """Is each element a str or tuple object (not an array, tensor or handle)?"""
        if isinstance(elt, cst.Tuple):
            return not _holds_arrays(self.ctx, elt)
        if isinstance(elt, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return True
        if isinstance(elt, cst.BinaryOperation) and isinstance(elt.operator, (cst.Add, cst.Modulo)):
            return any(isinstance(side, (cst.SimpleString, cst.FormattedString)) for side in (elt.left, elt.right))
        if isinstance(elt, cst.Call):
            if self.ctx.call_name(elt) in _STRING_CALLS:
                return True
            if isinstance(elt.func, cst.Attribute) and elt.func.attr.value in _STRING_METHODS:
                return True
            return False
        if isinstance(elt, (cst.Name, cst.Subscript, cst.Attribute)):
            # the loop item itself (or a field of it): strings when the source is
            return self._iter_is_strings(for_in, depth)
        return False


def _fills(ctx, init: cst.FunctionDef, self_param: str, attr: str) -> Optional[str]:
    """``self.<attr> = []`` filled in a loop with strings, tuples or small lists, in ``__init__``
    or in construction code of the class family (``init_code.family_construction``)."""
    cls = ctx.method_class(init)
    funcs = family_construction(ctx, cls) if cls is not None else [init]
    for node, item in fills(ctx, funcs if any(f is init for f in funcs) else [init, *funcs], attr):
        if isinstance(node, cst.Call) and node.func.attr.value == "add":
            continue  # a set: not indexed
        func = ctx.enclosing_function(node)
        loops = [a for a in takewhile(lambda a: a is not func, ctx.ancestors(node)) if isinstance(a, (cst.For, cst.While))]
        if not loops:
            continue
        if all(isinstance(loop, cst.For) for loop in loops):
            sizes = [known_size(ctx, loop.iter) for loop in loops]
            if all(size is not None for size in sizes) and math.prod(sizes) < SMALL:
                continue  # a loop over a small fixed collection
        if _fill_item_stringish(ctx, item, init):
            return "list filled in a loop"
    return None


def _builds_arrays(ctx, func: cst.FunctionDef) -> bool:
    calls = (n for n in iter_subtree(func.body, into_scopes=False) if isinstance(n, cst.Call))
    return any((ctx.call_name(c) or "").startswith(_ARRAY_PREFIXES) for c in calls)


def small_loop(ctx, for_in: Optional[cst.CompFor]) -> bool:
    """Every ``for`` of a comprehension runs over a source of known size, and together
    they give fewer than ``SMALL`` items."""
    total = 1
    while for_in is not None:
        size = known_size(ctx, for_in.iter)
        if size is None:
            return False
        total *= size
        for_in = for_in.inner_for_in
    return total < SMALL


_ARRAY_PREFIXES = ("torch.", "numpy.", "PIL.", "cv2.", "h5py.", "pandas.", "scipy.", "librosa.", "soundfile.")


def _holds_arrays(ctx, display) -> bool:
    """A tuple built from arrays/tensors/images: its payload is not in the objects refcounts touch."""
    calls = [e.value for e in display.elements if isinstance(e.value, cst.Call)]
    names = [ctx.call_name(c) or "" for c in calls]
    return any(n.startswith(_ARRAY_PREFIXES) or n == "builtins.open" for n in names)


def _fill_item_stringish(ctx, item: cst.CSTNode, init) -> bool:
    if isinstance(item, (cst.Tuple, cst.List)):  # a record: a tuple or a small list
        return not _holds_arrays(ctx, item)
    if isinstance(item, cst.BinaryOperation) and isinstance(item.operator, cst.Add):
        sides = (item.left, item.right)  # [label, k] + list(row): a list record
        return any(isinstance(s, (cst.Tuple, cst.List)) for s in sides) and not any(
            isinstance(s, (cst.Tuple, cst.List)) and _holds_arrays(ctx, s) for s in sides
        )
    if isinstance(item, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(item, cst.Call):
        if ctx.call_name(item) in _STRING_CALLS or ctx.call_name(item) in _PARSERS:  # a path, a parsed record
            return True
        return isinstance(item.func, cst.Attribute) and item.func.attr.value in _STRING_METHODS
    if isinstance(item, cst.Name):
        value = single_assignment(ctx.tree, item)
        if value is not None and value is not item:
            return _fill_item_stringish(ctx, value, init)
    return _loop_record(ctx, item)


def _loop_record(ctx, item: cst.CSTNode) -> bool:
    """``item`` is the item (or a field of it) of a ``for`` loop over a listing, a parsed
    file's payload (``for a in data["annotations"]``) or another index of Python objects."""
    root = item
    while isinstance(root, (cst.Subscript, cst.Attribute)):
        root = root.value
    func = ctx.enclosing_function(item)
    if not isinstance(root, cst.Name) or func is None:
        return False
    for loop in takewhile(lambda a: a is not func, ctx.ancestors(item)):
        if not isinstance(loop, cst.For):
            continue
        names = [loop.target] if isinstance(loop.target, cst.Name) else [
            e.value for e in getattr(loop.target, "elements", ()) if isinstance(e.value, cst.Name)
        ]
        if any(n.value == root.value for n in names):
            source = _Source(ctx, func)
            iters = [loop.iter]
            attr = self_attr(loop.iter, self_name(func))
            if attr is not None:  # for a in self.anns: what __init__ (or this method) bound to it
                iters = [stmt.value for f in _with_init(ctx, func) for a, stmt in self_stores(f, self_name(f)).items()
                         if a == attr]
            return any(source.describe(it) is not None or source._payload(it, 0) is not None for it in iters)
    return False


def _with_init(ctx, func: cst.FunctionDef) -> list:
    cls = ctx.method_class(func)
    init = find_method(ctx, cls, "__init__") if cls is not None else None
    return [func] if init is None or init is func else [func, init]


def _empty_container(expr: cst.CSTNode) -> bool:
    if isinstance(expr, (cst.List, cst.Dict)) and not expr.elements:
        return True
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "dict") and not expr.args


def python_objects(ctx, init: cst.FunctionDef, self_param: str, attr: str, value: cst.CSTNode) -> Optional[str]:
    """A short description of the Python-object container ``self.<attr> = value`` builds, or None."""
    what = _Source(ctx, init, attr).describe(value)
    mapping = isinstance(value, cst.Call) and (
        (ctx.call_name(value) == "collections.defaultdict" and len(value.args) <= 1)
        or (ctx.call_name(value) in ("builtins.dict", "collections.OrderedDict") and not value.args)
    )
    if what is None and (_empty_container(value) or mapping):
        what = _fills(ctx, init, self_param, attr)
        if what is not None and (isinstance(value, cst.Dict) or mapping):
            what = "dict filled in a loop"
    return what


def index_message(attr: str, what: str) -> str:
    return (
        f"`self.{attr}` ({what}) is built in `__init__` and indexed per sample: reading Python "
        "objects writes their reference counts, so every forked worker gradually copies the pages "
        "holding them (copy-on-read; measured with 2 workers over 2M paths: 293 MiB private memory "
        "per worker for a list of `str` vs 27 MiB for a numpy bytes array)"
    )


def python_object_indexes(ctx):
    """(value, attr, description) for DSL601: a Python-object container an ``__init__`` binds
    to ``self.<attr>``, indexed per sample, in a dataset that forked workers may hold."""
    for cls, init, self_param in dataset_inits(ctx):
        family = None
        for attr, stmt in self_stores(init, self_param).items():
            what = python_objects(ctx, init, self_param, attr, stmt.value)
            if what is None:
                continue
            family = family or class_family(ctx, cls)
            uses = self_attr_uses(ctx, family, attr)
            if not any(not u.store and ctx.is_per_sample(u.node) and indexed_by_local(ctx, u) and not in_once_block(ctx, u.node)
                       for u in uses):  # (a read behind a once-per-key guard is no read per sample)
                continue
            if loaders_fork_free(ctx, cls, family) or evaluation_split(ctx, init, self_param, attr, stmt.value):
                continue
            yield stmt.value, attr, what


_FORK_FREE_CONTEXTS = ("spawn", "forkserver")


def loaders_fork_free(ctx, cls: cst.ClassDef, family) -> bool:
    """Every DataLoader known over the class runs without forked workers.

    ``num_workers=0``, or a ``spawn``/``forkserver`` context (in the DataLoader
    call or through ``set_start_method`` in this file): the dataset is then not
    shared copy-on-write, so there is no copy-on-read either.
    """
    for call in ctx.calls_to("multiprocessing.set_start_method", "torch.multiprocessing.set_start_method"):
        if call.args and ctx.literal(call.args[0].value) in _FORK_FREE_CONTEXTS:
            return True
    family_ids = {id(c) for c in family}
    local = []
    for bound in ctx.dataloader_calls():
        ref = class_ref(ctx.tree, ctx.names, bound.expr("dataset"))
        if ref is not None and ref[0] == "local" and id(ref[1]) in family_ids:
            local.append(bound)
    if local and all(
        ctx.value(b, "num_workers") == 0 or ctx.value(b, "multiprocessing_context") in _FORK_FREE_CONTEXTS
        for b in local
    ):
        return True
    loaders = ctx.view.loaders_over(ctx.qualname_of_def(cls))
    if not loaders and not ctx.dataloader_calls() and _is_script(ctx):
        return True  # a script's own dataset that no DataLoader uses: it is iterated in one process
    return bool(loaders) and all(facts.get("num_workers") == 0 for facts in loaders) and not local


def _is_script(ctx) -> bool:
    """The module runs as a script: it has a top-level ``if __name__ == "__main__":`` block."""
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.If) and isinstance(stmt.test, cst.Comparison):
            test = stmt.test
            sides = [test.left, *(c.comparator for c in test.comparisons)]
            if any(isinstance(n, cst.Name) and n.value == "__name__" for n in sides) and any(
                isinstance(n, cst.SimpleString) and n.evaluated_value == "__main__" for n in sides
            ):
                return True
    return False


# ------------------------------------------------------------ evaluation/test splits

_FILE_READERS = frozenset(
    {"builtins.open", "io.open", "numpy.loadtxt", "numpy.genfromtxt", "mmengine.load", "mmcv.load"}
    | {f"pandas.read_{kind}" for kind in ("csv", "json", "table", "parquet", "pickle", "feather")}
)
_EVAL_TOKENS = frozenset({"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev"})


def evaluation_split(ctx, init: cst.FunctionDef, self_param: str, attr: str, value: cst.CSTNode) -> bool:
    """The index is read from files, and every name each file can have (literals,
    constants, a dict of file names looked up by split, ``os.path.join``'s last part)
    is an evaluation/test split file (``coco_val.json``, ``test_list.txt``)."""
    loops = [n for n in iter_subtree(init.body, into_scopes=False) if isinstance(n, cst.For)]
    roots = [value] + [loop.iter for loop in loops if _fills_in(loop, self_param, attr)]
    paths = [path for root in roots for path in _read_paths(ctx, init, root, 0)]
    return bool(paths) and all(_is_eval_file(ctx, path) for path in paths)


def _fills_in(loop: cst.For, self_param: str, attr: str) -> bool:
    return any(True for _ in fills_under(loop.body, self_param, attr))


def _read_paths(ctx, init, root: cst.CSTNode, depth: int) -> list:
    """The path arguments of the file reads ``root`` is built from: readers inside it,
    ``with open(p) as f`` names it uses, names ``__init__`` binds once to such reads."""
    found = []
    for node in iter_subtree(root, into_scopes=True):
        if isinstance(node, cst.Call) and ctx.call_name(node) in _FILE_READERS and node.args:
            found.append(node.args[0].value)
        elif isinstance(node, cst.Name) and depth < 3:
            for item in ctx.nodes(cst.WithItem):
                target = item.asname.name if item.asname is not None else None
                if isinstance(target, cst.Name) and target.value == node.value and ctx.enclosing_function(item) is init:
                    found.extend(_read_paths(ctx, init, item.item, depth + 1))
            bound = single_assignment(ctx.tree, node)
            if bound is not None and ctx.enclosing_function(bound) is init:
                found.extend(_read_paths(ctx, init, bound, depth + 1))
    return found


def _is_eval_file(ctx, path: cst.CSTNode) -> bool:
    names = _file_names(ctx, path, 0)
    tokens = [set(re.split(r"[^a-z0-9]+", n.replace("\\", "/").rsplit("/", 1)[-1].lower())) for n in names or ()]
    return bool(tokens) and all(t & _EVAL_TOKENS and "train" not in t for t in tokens)


def _file_names(ctx, expr: cst.CSTNode, depth: int) -> Optional[set]:
    """Every text the end of a path can have, or None when something is unknown."""
    if depth > 4:
        return None
    value = ctx.literal(expr)
    if isinstance(value, str):
        return {value}
    if isinstance(expr, cst.Call) and ctx.call_name(expr) == "os.path.join" and expr.args:
        return _file_names(ctx, expr.args[-1].value, depth + 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Divide)):
        right = _file_names(ctx, expr.right, depth + 1)
        left = _file_names(ctx, expr.left, depth + 1) if isinstance(expr.operator, cst.Add) else None
        if right is None or left is None or len(left) * len(right) > 16:
            return right
        return {a + b for a in left for b in right}
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name):  # {"val": "a_val.json", ...}[split]
        table = single_assignment(ctx.tree, expr.value) or ctx.module_constant(expr.value)
        if not isinstance(table, cst.Dict) or not table.elements:
            return None
        found = [_file_names(ctx, e.value, depth + 1) if isinstance(e, cst.DictElement) else None for e in table.elements]
        return None if None in found else set().union(*found)
    if isinstance(expr, cst.Name):
        values = possible(ctx, expr)
        if values.complete and values.values and all(isinstance(v.value, str) for v in values.values):
            return {v.value for v in values.values}
    return None
