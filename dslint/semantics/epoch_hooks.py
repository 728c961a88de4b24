"""A dataset's own ``set_epoch`` that a library calls every epoch, while its loader keeps its workers.

Accelerate's prepared loaders (``Accelerator.prepare(loader)``) call ``dataset.set_epoch(epoch)``
at the start of every iteration when the loader's sampler has no ``set_epoch`` of its own (no
``shuffle=True``, no ``sampler``/``batch_sampler``). The call runs in the main process: with
``persistent_workers=True`` the workers keep the dataset copy they made at the first epoch, and
whatever ``set_epoch`` changes for the next samples never reaches them (DSL510). No line of the
project shows the call, so the finding is the state the method changes, in the dataset's class.

Phase 1 (``hook_facts``) records per file:

* ``loaders``: the DataLoader constructions that certainly keep their workers in the default
  configuration and take no sampler that could have a ``set_epoch``: ``persistent_workers`` is
  ``True``, or a config lookup's default (``cfg.get("persistent_workers", True)``,
  ``getattr(cfg, "persistent_workers", True)``, through ``bool(...)`` and names bound once), passed
  directly or as an entry of a local ``**dict`` (a literal entry or ``d["persistent_workers"] = v``,
  unconditional or under a test that the loader has workers: ``if workers > 0:`` where ``workers``
  is its ``num_workers``); each with the qualified callee that made its dataset (``Mixture(...)``,
  ``ds = build_dataset(cfg)``: a class, or a function);
* ``returns``: the functions whose every ``return`` constructs the same class (capitalised callee),
  so that a loader over ``build_dataset(cfg)`` is known to be over that class;
* ``prepares``: the file calls ``x.prepare(...)``/``x.prepare_data_loader(...)`` with arguments.

``epoch_hook_index.hook_loaders(index, key)`` answers, for a project dataset class, whether such a loader is built
over it (or a subclass) in a project that imports accelerate's ``Accelerator`` and prepares something.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from dslint.semantics.bindings import single_assignment
from dslint.semantics.classes import find_method
from dslint.semantics.epoch_facts import dataloader_calls
from dslint.semantics.epochs import per_sample_state_set_by
from dslint.semantics.names import ModuleNames
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import TreeIndex, iter_subtree, plain_returns

_SAMPLING = ("shuffle", "sampler", "batch_sampler")
#: the calls that wrap a loader into one that calls ``dataset.set_epoch`` (``accelerator.prepare(loader)``)
PREPARE = frozenset({"prepare", "prepare_data_loader"})


def _key_of(node) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    return None


def _default_true(tree, names, expr, depth: int = 0) -> bool:
    """``True``, or the default a config lookup falls back to when that is ``True``."""
    if depth > 4 or expr is None:
        return False
    if isinstance(expr, cst.Name):
        if expr.value == "True":
            return True
        return _default_true(tree, names, single_assignment(tree, expr), depth + 1)
    if not isinstance(expr, cst.Call):
        return False
    args = [a for a in expr.args if not a.star]
    qualified = names.qualname(expr.func) if isinstance(expr.func, (cst.Name, cst.Attribute)) else None
    if qualified == "builtins.bool" and len(args) == 1:
        return _default_true(tree, names, args[0].value, depth + 1)
    if qualified == "builtins.getattr" and len(args) == 3:
        return _default_true(tree, names, args[2].value, depth + 1)
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "get" and len(args) == 2:
        return _default_true(tree, names, args[1].value, depth + 1)
    return False


def _entries(tree, call: cst.Call, star: cst.Name) -> Optional[Dict[str, List[tuple]]]:
    """key -> [(value, statement)] of the local dict ``star`` passed as ``**star``; None when the
    dict is not a literal (or ``dict(...)``) bound once."""
    bound = single_assignment(tree, star)
    found: Dict[str, List[tuple]] = {}
    if isinstance(bound, cst.Dict):
        for element in bound.elements:
            if not isinstance(element, cst.DictElement) or _key_of(element.key) is None:
                return None
            found.setdefault(_key_of(element.key), []).append((element.value, None))
    elif isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) and bound.func.value == "dict":
        for arg in bound.args:
            if arg.keyword is None:
                return None
            found.setdefault(arg.keyword.value, []).append((arg.value, None))
    else:
        return None
    for assign in tree.scope_nodes(tree.scope_node(call), cst.Assign):
        for target in assign.targets:
            target = target.target
            name = target.value if isinstance(target, cst.Subscript) else None
            if isinstance(name, cst.Name) and name.value == star.value:
                key = _key_of(target.slice[0].slice.value) if len(target.slice) == 1 and isinstance(
                    target.slice[0].slice, cst.Index) else None
                if key is None:
                    return None
                found.setdefault(key, []).append((assign.value, assign))
    return found


def _with_workers(tree, statement, workers, call) -> bool:
    """Every test above ``statement`` that does not hold the loader's call too only asks that the
    loader has workers."""
    around = {id(a) for a in tree.ancestors(call)}
    child = statement
    for ancestor in tree.ancestors(statement):
        if id(ancestor) in around or isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            return True
        if isinstance(ancestor, (cst.For, cst.While, cst.Try, cst.With)):
            return False
        if isinstance(ancestor, cst.If) and (child is not ancestor.body or not _workers_test(ancestor.test, workers)):
            return False
        child = ancestor
    return True


def _workers_test(test, workers) -> bool:
    if not isinstance(workers, cst.Name):
        return False
    if isinstance(test, cst.Name):
        return test.value == workers.value
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        op, right = test.comparisons[0].operator, test.comparisons[0].comparator
        bound = {cst.GreaterThan: "0", cst.NotEqual: "0", cst.GreaterThanEqual: "1"}.get(type(op))
        return test.left.value == workers.value and isinstance(right, cst.Integer) and right.value == bound
    return False


def _loader(tree, names, call: cst.Call) -> Optional[dict]:
    named = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    stars = [a.value for a in call.args if a.star == "**"]
    if any(a.star == "*" for a in call.args) or len(stars) > 1 or any(not isinstance(s, cst.Name) for s in stars):
        return None
    entries = _entries(tree, call, stars[0]) if stars else {}
    if entries is None:
        return None
    given = [[v] for k, v in named.items() if k in _SAMPLING] + [[v for v, _ in e] for k, e in entries.items() if k in _SAMPLING]
    if any(not all(_false(v) for v in values) for values in given):
        return None  # a sampler that may have its own set_epoch (shuffle=False and sampler=None are none)
    if "persistent_workers" in named:
        persistent = _default_true(tree, names, named["persistent_workers"])
    else:
        workers = named.get("num_workers") or next((v for v, _ in entries.get("num_workers", ())), None)
        values = entries.get("persistent_workers", ())
        persistent = bool(values) and all(
            _default_true(tree, names, v) and (s is None or _with_workers(tree, s, workers, call)) for v, s in values)
    if not persistent:
        return None
    dataset = named.get("dataset") or next((a.value for a in call.args if a.keyword is None and not a.star), None)
    if isinstance(dataset, cst.Name):
        dataset = single_assignment(tree, dataset)
    if not isinstance(dataset, cst.Call) or not isinstance(dataset.func, (cst.Name, cst.Attribute)):
        return None
    made = names.qualname(dataset.func)
    return {"dataset": made} if made and not made.startswith("builtins.") else None


def _false(expr) -> bool:
    return isinstance(expr, cst.Name) and expr.value in ("False", "None")


def _returned_class(tree, names, func: cst.FunctionDef) -> Optional[str]:
    returns = plain_returns(func, tree)
    if returns is None:
        return None
    found = set()
    for node in returns:
        value = node.value
        if isinstance(value, cst.Name):
            value = single_assignment(tree, value)
        if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
            return None
        found.add(names.qualname(value.func))
    made = found.pop() if len(found) == 1 else None
    return made if made and made.rpartition(".")[2][:1].isupper() else None


def hook_facts(tree: TreeIndex, names: ModuleNames, qualname) -> dict:
    """Phase 1: the persistent, unsampled loaders of a file and the functions returning one class."""
    loaders = [facts for facts in (_loader(tree, names, call) for call in dataloader_calls(tree, names)) if facts]
    returns = {}
    for func in tree.nodes(cst.FunctionDef):
        made = _returned_class(tree, names, func)
        if made:
            returns[qualname(func, tree)] = made
    prepares = any(isinstance(c.func, cst.Attribute) and c.func.attr.value in PREPARE and c.args for c in tree.nodes(cst.Call))
    return {"loaders": loaders, "returns": returns, "prepares": prepares}


# ---------------------------------------------------------------- the dataset's file


def hidden_set_epochs(ctx):
    """(statement, attribute, loader modules) for each assignment in a dataset class's ``set_epoch``
    (of this file) to state its per-sample methods read, when ``hook_loaders`` finds a loader."""
    for cls in ctx.nodes(cst.ClassDef):
        method = find_method(ctx, cls, "set_epoch")
        if method is None or ctx.method_class(method) is not cls or not ctx.class_kind(cls):
            continue
        changed = per_sample_state_set_by(ctx, cls, "set_epoch")
        files = ctx.view.epoch_hook_loaders(ctx.qualname_of_def(cls)) if changed else []
        if not files:
            continue
        selfp = self_name(method)
        for node in iter_subtree(method.body, into_scopes=False):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else (
                [node.target] if isinstance(node, (cst.AnnAssign, cst.AugAssign)) else [])
            attr = next((a for a in (self_attr(t, selfp) for t in targets) if a in changed), None)
            if attr is not None:
                yield node, attr, files
