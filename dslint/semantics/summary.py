"""A file's cross-file facts, as plain JSON-able data.

The project index (``project.py``) is built from these summaries alone, so a file
that is unchanged never needs re-parsing to take part in cross-file analysis
(dataset classes derived across files, methods inherited from another file,
``worker_init_fn`` helpers). Everything here is derived from the one parse of the
file and kept small.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from dslint.semantics.self_loads import self_loads
from dslint.semantics.bindings import annotated_class, class_ref, parameter_default, referenced_callables
from dslint.semantics.bound_collates import bound_collates, param_collates
from dslint.semantics.dataset_uses import use_facts
from dslint.semantics.device_flow import device_facts
from dslint.semantics.calls import DATALOADER, UNKNOWN, BoundCall, literal_value
from dslint.semantics.epoch_hooks import hook_facts
from dslint.semantics.epoch_attrs import epoch_iterated_params, epoch_stored_params
from dslint.semantics.epoch_methods import epoch_iterated_methods
from dslint.semantics.epoch_facts import (dataloader_calls, drained_params, epoch_iterated_results, iterated_params,
                                          loader_receivers)
from dslint.semantics.handle_exports import exported_handles
from dslint.semantics.kept_lambdas import kept_facts
from dslint.semantics.kept_objects import kept_objects
from dslint.semantics.built_datasets import built_classes
from dslint.semantics.call_costs import costly_calls
from dslint.semantics.call_facts import passed_arguments
from dslint.semantics.loader_roles import role_facts
from dslint.semantics.rank_entries import entry_facts, seed_references, seeder_facts
from dslint.semantics.trained_results import trained_facts
from dslint.semantics.handed_evals import delegated_classes, eval_facts, eval_references
from dslint.semantics.modules import canonical
from dslint.semantics.names import ModuleNames, dotted_parts
from dslint.semantics.option_guards import guard_facts, init_facts
from dslint.semantics.regions import RegionCache, is_cached
from dslint.semantics.rng_holders import holder_facts
from dslint.semantics.distributed import construction_reads_world
from dslint.semantics.kwargs_dicts import FileSource
from dslint.semantics.sample_caches import sample_caches
from dslint.semantics.kwargs_forwarders import kwargs_forwards
from dslint.semantics.function_values import handed_functions
from dslint.semantics.library_loaders import kwargs_loader_signatures
from dslint.semantics.returned_closures import closure_returns
from dslint.semantics.returned_datasets import loader_results
from dslint.semantics.length_probes import attribute_probes, summary_probes
from dslint.semantics.start_methods import start_methods
from dslint.semantics.walk import TreeIndex, body_buckets
from dslint.semantics.worker_counts import names_workers, worker_count_callees

WORKER_INFO = "torch.utils.data.get_worker_info"


def local_qualname(node: cst.CSTNode, tree: TreeIndex) -> str:
    """``Outer.Inner`` / ``func.<locals>.Local`` path of a class or function in its module."""
    memo = tree.memo(("summary.local_qualname",), dict)
    found = memo.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    parts = [node.name.value]
    for ancestor in tree.ancestors(node):
        kind = type(ancestor)
        if kind is cst.ClassDef:
            parts.append(ancestor.name.value)
        elif kind is cst.FunctionDef:
            parts.append("<locals>")
            parts.append(ancestor.name.value)
    result = ".".join(reversed(parts))
    memo[id(node)] = (node, result)
    return result


class Summarizer:
    def __init__(self, tree: TreeIndex, names: ModuleNames, regions: RegionCache) -> None:
        self.tree = tree
        self.names = names
        self.kwargs_source = FileSource(tree, names)  # (``passed_arguments`` reads the ``**`` dicts a call is given)
        if getattr(regions, "tree", None) is None:
            regions.tree = tree  # per-function facts from the tree's per-scope node lists
        self.regions = regions
        self.worker_info_tails = names.call_tails({"get_worker_info"})
        self.class_paths: Dict[str, List[str]] = {}
        for node in tree.nodes(cst.ClassDef):
            self.class_paths.setdefault(node.name.value, []).append(local_qualname(node, tree))

    def resolve_class_ref(self, expr: cst.CSTNode, owner: Optional[cst.ClassDef] = None) -> Optional[str]:
        """Qualified name of a base-class expression (``Dataset[int]`` counts as ``Dataset``).

        A base evaluates before its class's name is bound: in ``class Dataset(Dataset)``
        the base is the imported ``Dataset``, not the class itself."""
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        parts = dotted_parts(expr)
        if not parts:
            return None
        if owner is not None and parts[0] == owner.name.value and self.names.scope_node(owner) is None:
            targets = self.names.imports.get(parts[0])
            if targets is not None and len(targets) == 1:
                return canonical(".".join([next(iter(targets)), *parts[1:]]))
        qualified = self.names.qualname(expr)
        if qualified is None and len(parts) == 1:
            local = self.class_paths.get(parts[0], [])
            if len(local) == 1:
                return f"{self.names.modname}.{local[0]}"
        return qualified

    def function_facts(self, func: cst.FunctionDef) -> dict:
        """Calls (in source order), ``get_worker_info`` use and attributes assigned on
        other objects, in the body of ``func`` (nested scopes excluded).

        The body's nodes come by type from the tree's one walk
        (``TreeIndex.scope_buckets``), not from a walk of their own."""
        regions = self.regions.get(func)
        tree = self.tree
        buckets = body_buckets(func, tree)
        self_param = regions.self_param
        calls, call_args = [], []  # (what each call passes: ``sample_calls``)
        uses_worker_info = False
        assigned, self_stores = set(), set()
        Attribute, Name = cst.Attribute, cst.Name
        for node in buckets.get(cst.AssignTarget, ()):
            target = node.target
            if type(target) is Attribute:
                owner = target.value
                if not (type(owner) is Name and owner.value == self_param):
                    assigned.add(target.attr.value)
                else:
                    self_stores.add(target.attr.value)
        plain = not regions._loop_bodies and not regions.lazy_bodies
        parent = tree.parent
        draws, held_calls = self_draws(tree, buckets.get(Attribute, ()), self_param, func, regions, plain)
        news, recorded = self.self_news(buckets.get(cst.Assign, ()), self_param), []
        for node in buckets.get(cst.Call, ()):
            target = self.call_target(node, self_param)
            if target is None:
                continue
            in_loop = False if plain else loop_position(node, parent.get(id(node)), func, parent, regions)
            if in_loop is None and target[1] != "numpy.random.seed":  # (a lazy block's reseeding counts: ``numpy_rng``)
                continue
            calls.append([target[0], target[1], in_loop])
            call_args.append(passed_arguments(node, self.kwargs_source))
            recorded.append(node)
        tails = self.worker_info_tails
        for node in buckets.get(Name, ()):
            if node.value in tails and _is_worker_info_ref(node, self.names):
                uses_worker_info = True
                break
        if not uses_worker_info:
            for node in buckets.get(Attribute, ()):
                if node.attr.value in tails and _is_worker_info_ref(node, self.names):
                    uses_worker_info = True
                    break
        iterated = iterated_params(func, buckets.get(cst.For, ()))
        return {
            "calls": calls,
            "call_args": call_args,
            "gen": regions.is_generator,
            "cached": is_cached(func),
            "worker_info": uses_worker_info,
            "assigns": sorted(assigned),
            # calls that do more than index data in memory (``indexing.costly_calls``)
            "costly_calls": costly_calls(buckets.get(cst.Call, ()), self.names.qualname, self_param,
                                         [*buckets.get(cst.Attribute, ()), *buckets.get(cst.Subscript, ())], parent),
            "iterates": iterated,
            "drains": drained_params(func, buckets.get(cst.For, ())) if iterated else [],  # (in full: ``reiteration``)
            # for a function that iterates a parameter: trains / de-duplicates / gathers (DSL704, other files)
            "evals": eval_facts(func, self.names, iterated) if iterated else None,
            # a method calling its own name on other objects: the classes of this module defining it
            "delegates": delegated_classes(func, tree, self.names, local_qualname) if self_param else [],
            # self attributes whose object is used here: ``self.x.m(...)`` or ``f(self.x)``
            # ([name, in a per-item loop]), and those given a value (for cross-file DSL402)
            "self_draws": draws,
            # ``self.x(...)`` / ``self.x.m(...)``: [x, "__call__" | m, in a per-item loop]
            "held_calls": held_calls,
            "self_news": news,  # ``self.x = Cls(...)``: [x, qualified name of the callee]
            "self_stores": sorted(self_stores),
            "self_loads": self_loads(buckets, self_param, parent), "sample_caches": sample_caches(buckets, self_param, parent),
            # ``self.x = lambda ...`` / a nested function / a pipeline holding one, or a parameter defaulting to one
            **kept_facts(buckets.get(cst.Assign, ()), buckets.get(cst.FunctionDef, ()), self_param, func.params, self.names, func),
            # the ``if`` tests that guard calls, the options they test, what calls forward (``option_guards``)
            **guard_facts(func, self_param, recorded, parent, buckets),
        }

    def self_news(self, assigns, self_param: Optional[str]) -> List[list]:
        found = []
        for node in assigns if self_param else ():
            value = node.value
            if type(value) is not cst.Call or type(value.func) not in (cst.Name, cst.Attribute):
                continue
            attrs = [
                t.target.attr.value for t in node.targets
                if type(t.target) is cst.Attribute and type(t.target.value) is cst.Name
                and t.target.value.value == self_param
            ]
            qualified = self.names.qualname(value.func) if attrs else None
            if qualified and (not qualified.startswith("builtins.") or qualified == "builtins.open"):
                found.extend([attr, qualified] for attr in attrs)
        return found

    def loader_facts(self, call: cst.Call, signature=DATALOADER) -> dict:
        """What other files need to know about a DataLoader built here."""
        bound = BoundCall(call, signature)

        def qualify(ref) -> str:
            return f"{self.names.modname}.{local_qualname(ref[1], self.tree)}" if ref[0] == "local" else ref[1]

        def constant(name_node):
            values = self.names.assigns.get(name_node.value)
            return values[0] if values and len(values) == 1 and name_node.value not in self.names.imports else None

        def literal(name, default=False):  # (``default``: a builder parameter's default when the caller keeps it)
            if bound.passed(name):
                expr = bound.expr(name)
                value = literal_value((default and parameter_default(self.tree, expr)) or expr, constant)
            else:
                value = UNKNOWN if bound.is_open else signature.defaults.get(name)
            return None if value is UNKNOWN else value

        ref = class_ref(self.tree, self.names, bound.expr("dataset"))  # (else a parameter annotated with the class)
        return {
            "dataset": qualify(ref) if ref is not None else annotated_class(self.tree, self.names, bound.expr("dataset")),
            "num_workers": literal("num_workers"),
            "persistent_workers": literal("persistent_workers", default=True),
            "worker_init_fn": self.function_ref(bound.expr("worker_init_fn")),
            "collate_fn": self.function_ref(bound.expr("collate_fn")),
            "built": built_classes(self.tree, self.names, bound.expr("dataset"), qualify),  # (``kept_elsewhere``)
        }

    def function_ref(self, expr) -> Optional[str]:
        """Qualified name of a function passed by name (through functools.partial, a conditional, a local
        alias: ``init = debug_init`` under a test, then ``worker_init_fn=init``; ``referenced_callables``)."""
        for value in referenced_callables(self.tree, self.names, expr):
            return self.names.qualname(value)
        return None

    def call_target(self, call: cst.Call, self_param: Optional[str]):
        func = call.func
        kind = type(func)
        if kind is cst.Attribute:
            value = func.value
            if self_param and type(value) is cst.Name and value.value == self_param:
                return ("self", func.attr.value)
            if (
                type(value) is cst.Call
                and type(value.func) is cst.Name
                and value.func.value == "super"
            ):
                return ("super", func.attr.value)
        if kind is cst.Name or kind is cst.Attribute:
            qualified = self.names.qualname(func)
            if qualified and not qualified.startswith("builtins."):
                return ("func", qualified)
        return None


def loop_position(node, start, func, parent, regions) -> Optional[bool]:
    """Is ``node`` (whose ancestors from ``start`` up to ``func`` are followed through the
    ``parent`` map) in the function's per-item loop? None: in a lazy block, not counted."""
    ancestors = []
    current = start
    while current is not None and current is not func:
        ancestors.append(current)
        current = parent.get(id(current))
    in_loop, lazy = regions.classify(node, ancestors)
    return None if lazy else in_loop


def self_draws(tree: TreeIndex, attributes, self_param, func, regions, plain: bool):
    """[attr, in_loop] for ``self.<attr>`` whose object the body uses: a method called on it
    (``self.rng.normal()``) or passed as an argument (``f(generator=self.g)``); and
    [attr, method, in_loop] for the calls on it (``self.t(x)``: ``"__call__"``)."""
    found = {}
    held = {}
    parent = tree.parent
    for node in attributes:
        owner = node.value
        if not (self_param and type(owner) is cst.Name and owner.value == self_param):
            continue
        up = parent.get(id(node))
        method = up.attr.value if type(up) is cst.Attribute and up.value is node else None
        if method is not None and not (type(parent.get(id(up))) is cst.Call and parent.get(id(up)).func is up):
            method = None
        if method is None and type(up) is cst.Call and up.func is node:
            method = "__call__"
        if method is None and type(up) is not cst.Arg:
            continue
        in_loop = False if plain else loop_position(node, up, func, parent, regions)
        if in_loop is None:
            continue
        name = node.attr.value
        if method != "__call__":
            found[name] = found.get(name, False) or bool(in_loop)
        if method is not None:
            held[(name, method)] = held.get((name, method), False) or bool(in_loop)
    return [[name, found[name]] for name in sorted(found)], [[*key, held[key]] for key in sorted(held)]


RESEED_METHODS = frozenset({"seed", "manual_seed", "set_state", "setstate", "set_seed", "bit_generator"})


def _reseeded_attrs(tree: TreeIndex) -> List[str]:
    """Attributes reseeded anywhere in the file: ``<any>.<attr>.seed(...)`` (a ``worker_init_fn``
    reseeding ``dataset.rng``), also through ``manual_seed``/``set_state``..."""
    found = set()
    for node in tree.nodes(cst.Attribute):
        if node.attr.value in RESEED_METHODS and type(node.value) is cst.Attribute:
            found.add(node.value.attr.value)
    return sorted(found)


_ONE_SHOT_BUILTINS = frozenset({"builtins.iter", "builtins.map", "builtins.filter", "builtins.zip", "builtins.enumerate", "builtins.reversed"})


def _passed_iterators(tree: TreeIndex, names: ModuleNames) -> List[list]:
    """Arguments of class constructions (a called name whose last part, less leading
    underscores, is capitalised) that may be one-shot iterators: ``[callee, position or
    keyword, "gen" | "iter" | "call", the called function for "call"]``. The index decides
    whether a "call" makes a generator (a generator function of the project)."""
    found = []
    for call in tree.nodes(cst.Call):
        if not isinstance(call.func, (cst.Name, cst.Attribute)):
            continue
        last = (call.func.attr if isinstance(call.func, cst.Attribute) else call.func).value.lstrip("_")
        if not last[:1].isupper() or any(
            type(a) is cst.FunctionDef and a.name.value.startswith("test_") for a in tree.ancestors(call)
        ):
            continue  # (a test function drains what it passes once, on purpose)
        callee = None
        position = 0
        for arg in call.args:
            if arg.star:
                if arg.keyword is None and arg.star == "*":
                    position = None  # positions after *args are unknown
                continue
            where = arg.keyword.value if arg.keyword is not None else position
            if arg.keyword is None and position is not None:
                position += 1
            if where is None:
                continue
            value, kind, target = arg.value, None, None
            if isinstance(value, cst.GeneratorExp):
                kind = "gen"
            elif isinstance(value, cst.Call) and isinstance(value.func, (cst.Name, cst.Attribute)):
                target = names.qualname(value.func)
                if target in _ONE_SHOT_BUILTINS and not (target == "builtins.iter" and len(value.args) != 1):
                    kind, target = "iter", None
                elif target and not target.startswith("builtins."):
                    kind = "call"
            if kind is None:
                continue
            callee = callee or names.qualname(call.func)
            if callee is None:
                break
            found.append([callee, where, kind, target])
    return found


def _is_worker_info_ref(node: cst.CSTNode, names: ModuleNames) -> bool:
    parts = dotted_parts(node)
    if not parts or parts[-1] not in names.call_tails({"get_worker_info"}):  # aliases too
        return False
    return names.qualname(node) == WORKER_INFO


def summarize(tree: TreeIndex, names: ModuleNames, regions: RegionCache) -> dict:
    s = Summarizer(tree, names, regions)

    def qualname_of(node):
        return local_qualname(node, tree)
    classes: Dict[str, dict] = {}
    functions: Dict[str, dict] = {}
    worker_inits = worker_init_classes(tree)
    for node in tree.nodes(cst.ClassDef):
        qual = local_qualname(node, tree)
        methods = {}
        for stmt in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if isinstance(stmt, cst.FunctionDef):
                methods[stmt.name.value] = s.function_facts(stmt)
        classes[qual] = {
            "bases": [s.resolve_class_ref(arg.value, node) for arg in node.bases if arg.keyword is None],
            "methods": methods,
            "worker_init": id(node) in worker_inits,
            "world_sharded": construction_reads_world(names, node),
            **init_facts(node, tree),
        }
    for node in tree.nodes(cst.FunctionDef):
        parent = tree.parent_of(node)
        # methods are recorded with their class; everything else by its path
        if type(parent) is cst.IndentedBlock and type(tree.parent_of(parent)) is cst.ClassDef:
            continue
        functions[local_qualname(node, tree)] = s.function_facts(node)
    imports = {k: next(iter(v)) for k, v in names.imports.items() if len(v) == 1}
    loaders = [s.loader_facts(call) for call in dataloader_calls(tree, names)]
    loaders += [s.loader_facts(call, signature) for call, signature in kwargs_loader_signatures(tree, names)]
    references = {ref for facts in loaders for ref in (facts["worker_init_fn"], facts["collate_fn"]) if ref}
    receivers = loader_receivers(tree, names, same_module=True)
    references.update(r for r in receivers if not r.startswith(names.modname + "."))
    references.update(kept_objects(tree, names))
    epoch_results = epoch_iterated_results(tree, names)
    # what a function that evaluates a loader calls into: followed only for the functions some
    # file hands a loader to (``project_files.reached_files``)
    evaluated = list(functions.items())
    evaluated += [(f"{cls}.{name}", facts) for cls, c in classes.items() for name, facts in c["methods"].items()]
    eval_refs = {f"{names.modname}.{qual}": refs for qual, facts in evaluated if (refs := eval_references([facts]))}
    rank_entry, rank_seeders = entry_facts(tree, names), seeder_facts(tree, names)
    # the project helpers a DDP script (or a seeding helper) seeds through (``rank_entries``)
    references.update(seed_references(rank_entry, rank_seeders))
    references = sorted(references)
    return {
        "module": names.modname,
        "package": names.is_package,
        "imports": imports,
        "star_imports": list(names.star_imports),
        # those in a branch of an ``if``/``try``: each may bind a name (``ProjectIndex.locate_all``)
        "star_branches": sorted(names.branch_stars),
        "classes": classes,
        "functions": functions,
        "loaders": loaders,
        # classes used as datasets, parameters a DataLoader receives, constructions passed... (``dataset_uses``)
        **use_facts(tree, names, qualname_of),
        "references": references,
        # {function: [what it calls into]} for functions that evaluate a loader they are given,
        # and the functions this file hands a loader to (this module's included)
        "eval_references": eval_refs,
        "receivers": receivers,
        # the file names ``set_epoch`` (a call, a definition, ``getattr(x, "set_epoch")``)
        "epoch_results": epoch_results,
        # [class, method, "result" | "element"]: a method of an annotated object re-iterated per epoch
        "epoch_methods": epoch_iterated_methods(tree, names),
        "set_epoch": any(n.value == "set_epoch" for n in tree.nodes(cst.Name))
        or any("set_epoch" in n.value for n in tree.nodes(cst.SimpleString)),
        "passed_iterators": _passed_iterators(tree, names),
        # functions and methods that return a handle they opened: qualname -> [kind, position]
        "handle_returns": {local_qualname(f, tree): list(answer) for f, answer in exported_handles(tree, names)},
        "reseeded_attrs": _reseeded_attrs(tree),
        # functions that return an object holding a random generator they create (``rng_holders``)
        "rng_holders": holder_facts(tree, names, local_qualname),
        # persistent loaders whose dataset's own set_epoch a library calls (``epoch_hooks``)
        "epoch_hooks": hook_facts(tree, names, local_qualname),
        # {class: [[position, name]]}: ``__init__`` parameters kept on self and re-iterated per epoch (``epoch_attrs``)
        "epoch_stored": epoch_stored_params(tree, names, qualname_of),
        # {function: [[position, name]]}: parameters a module-level function re-iterates in an outer loop
        "epoch_params": epoch_iterated_params(tree, names, qualname_of),
        # module-level functions that return a function or lambda defined inside them (``returned_closures``)
        "closure_returns": closure_returns(tree, qualname_of),
        "loader_results": loader_results(tree, names),  # loaders with workers over another file's function's result
        "kwargs_forwards": kwargs_forwards(tree, names, qualname_of),
        # [collate, num_workers]: ``collate_fn=self.m`` and ``loader.collate_fn = f`` (``bound_collates``)
        "bound_collates": bound_collates(tree, names, qualname_of, s.loader_facts),
        # ``collate_fn=p.m`` for an unannotated parameter, and constructions passed to classes (``bound_collates``)
        "param_collates": param_collates(tree, names, qualname_of, s.loader_facts),
        # devices kept by ``__init__``, handed to ``super().__init__``, passed to constructors (``device_flow``)
        "devices": device_facts(tree, names, qualname_of),
        # the start methods the file sets (``multiprocessing.set_start_method``; ``start_methods``)
        "start_methods": start_methods(tree, names),
        # evaluation names callers keep a function's result under, and functions returning another's result
        "loader_roles": role_facts(tree, names, local_qualname),
        # what starts the distributed state in a DDP entry script, and whether each global seed names the rank
        "rank_entry": rank_entry,
        # module-level functions that seed torch's global RNG: per rank, or per rank given a parameter (``rank_entries``)
        "rank_seeders": rank_seeders,
        # in a DDP file: training loops over a project function's result ([callee, position])
        "trained_results": trained_facts(tree, names),
        # module-level functions that probe a parameter for a length: [position, name, loader] (``length_probes``)
        "length_probes": summary_probes(tree, names, local_qualname),
        # classes whose methods probe ``self.x`` for a length: [attr, callee, position, loader] (``length_probes``)
        "attr_probes": attribute_probes(tree, names, local_qualname),
        # what the file calls with a worker count, may it start workers at all; functions handed on (``function_values``)
        "worker_kwargs": worker_count_callees(tree, names), "names_workers": names_workers(tree, names), **handed_functions(tree, names, qualname_of),
    }


def worker_init_classes(tree: TreeIndex) -> set:
    """ids of the classes whose body chooses a ``worker_init_fn`` itself: passes ``worker_init_fn=``
    anything but a parameter of that name (whose default is ``None``), or assigns an attribute
    ``worker_init_fn`` (from the tree's nodes by type: most files have none)."""
    chosen = []
    for node in tree.nodes(cst.Arg):
        if node.keyword is not None and node.keyword.value == "worker_init_fn" \
                and not (type(node.value) is cst.Name and node.value.value == "worker_init_fn"):
            chosen.append(node)
    for node in tree.nodes(cst.AssignTarget):
        if type(node.target) is cst.Attribute and node.target.attr.value == "worker_init_fn":
            chosen.append(node)
    for node in tree.nodes(cst.Param):
        if node.name.value == "worker_init_fn" and node.default is not None \
                and not (type(node.default) is cst.Name and node.default.value == "None"):
            chosen.append(node)
    found = set()
    for node in chosen:
        previous = node
        for ancestor in tree.ancestors(node):
            if type(ancestor) is cst.ClassDef and previous is ancestor.body:
                found.add(id(ancestor))
            previous = ancestor
    return found
