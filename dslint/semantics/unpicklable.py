"""Is a value a callable or object that pickle cannot send to a DataLoader worker?

A lambda, a function or class defined inside a function (pickle stores them by importable name, and they
have none), ``functools.partial`` of one, the result of a project factory that returns such a closure, and an
instance of a class such a factory returns (``returned_closures``, across files through the summaries).
Answers ``(description, error)`` only when *every* value of the expression is unpicklable.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from dslint.semantics.bindings import class_ref, local_class_path
from dslint.semantics.classes import methods
from dslint.semantics.containers import extended_list, list_fills
from dslint.semantics.held_classes import attribute_constructions, receiver_class
from dslint.semantics.held_datasets import wrapped_datasets
from dslint.semantics.kept_lambdas import TRANSFORM_CONTAINERS, module_lambdas, object_label, stored_callables, stored_defaults
from dslint.semantics.kept_objects import kept_arguments
from dslint.semantics.kwargs_dicts import closed_entries, transform_entries
from dslint.semantics.libraries import pipeline_callables
from dslint.semantics.module_calls import positional_args
from dslint.semantics.scopes import is_none, none_replacements
from dslint.semantics.returned_closures import returned_closure
from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import body_buckets, iter_subtree, plain_returns

_PARTIAL = frozenset({"functools.partial"})

Problem = Tuple[str, str]


def is_local_def(ctx, node: cst.CSTNode) -> bool:
    """Defined inside a function (so pickle cannot find it by name)."""
    return any(isinstance(a, (cst.FunctionDef, cst.Lambda)) for a in ctx.ancestors(node))


def unpicklable(ctx, index, expr, depth: int = 0) -> Optional[Problem]:
    """(description, error) when every value of ``expr`` but ``None`` (no callable: torch's default)
    is an unpicklable callable (``collate = None`` on one branch, a nested function on the other).
    A parameter that callers may fill is judged by what the function puts there when they do not
    (``if collate_fn is None: collate_fn = make_collate()``: the default path)."""
    if expr is None or depth > 3:
        return None
    nodes = index.value_nodes(expr)
    if nodes is None and isinstance(expr, cst.Name):
        func = ctx.enclosing_function(expr, through_lambdas=False)
        defaults = none_replacements(ctx, func, expr.value) if func is not None else None
        found = [unpicklable(ctx, index, value, depth + 1) for value in defaults or ()]
        if found and all(found):
            return (f"{found[0][0]} when the caller passes none", found[0][1])
        return None
    if not nodes:
        return None
    found = []
    for node in nodes:
        if is_none(node):
            continue
        problem = None
        if isinstance(node, cst.Lambda):
            owner = ctx.enclosing_function(node, through_lambdas=False)
            if owner is not None:
                error = f"AttributeError: Can't pickle local object '{ctx.qualname_of_def(owner)}.<locals>.<lambda>'"
            else:
                error = "_pickle.PicklingError: Can't pickle <function <lambda> ...>: attribute lookup <lambda> failed"
            problem = ("a lambda", error)
        elif isinstance(node, cst.FunctionDef) and is_local_def(ctx, node):
            qual = ctx.qualname_of_def(node)
            problem = (f"the nested function `{node.name.value}`", f"AttributeError: Can't pickle local object '{qual}'")
        elif isinstance(node, cst.Call):
            if ctx.call_name(node) in _PARTIAL:
                args = positional_args(node)
                inner = unpicklable(ctx, index, args[0], depth + 1) if args else None
                if inner:
                    problem = (f"`functools.partial` of {inner[0]}", inner[1])
            else:
                problem = local_instance(ctx, index, node) or factory_closure(ctx, index, node)
        if problem is None:
            return None
        found.append(problem)
    return found[0] if found else None


def caller_callables(ctx, index, node) -> List[cst.CSTNode]:
    """The lambdas and nested functions the callers pass for ``node`` (an argument or expression
    that is a parameter of the function holding it, ``super().__init__(collate_fn=collate_fn)`` in
    a loader subclass): where each fix goes, leaving out a call that passes ``num_workers=0`` itself.
    Empty unless every value of the parameter but None is such a callable written outside that function."""
    expr = node.value if isinstance(node, cst.Arg) else node
    func = ctx.enclosing_function(expr, through_lambdas=False) if isinstance(expr, cst.Name) else None
    params = func.params if func is not None else None
    if params is None or expr.value not in {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}:
        return []
    found = []
    for value in index.value_nodes(expr) or ():
        if is_none(value):
            continue
        if not isinstance(value, (cst.Lambda, cst.FunctionDef)) or any(a is func for a in ctx.ancestors(value)):
            return []
        if not _pinned_call(ctx, value):
            found.append(value)
    return found


def _pinned_call(ctx, value) -> bool:
    """``value`` is an argument of a call that passes ``num_workers=0`` itself (no worker sees it)."""
    parent = ctx.parent(value)
    call = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
    return isinstance(call, cst.Call) and any(
        arg.keyword is not None and arg.keyword.value == "num_workers" and ctx.literal(arg.value) == 0 for arg in call.args)


def factory_closure(ctx, index, call: cst.Call) -> Optional[Problem]:
    """(description, error) when ``call`` calls a module-level function of the project (this
    file or another) whose every return value is a function or lambda defined inside it."""
    func = call.func
    answer = None
    if isinstance(func, cst.Name):
        _, bindings = index.name_bindings(func.value, call)
        if bindings is not None and len(bindings) == 1 and isinstance(bindings[0].node, cst.FunctionDef):
            target = bindings[0].node
            if is_local_def(ctx, target) or target.decorators:
                return None
            answer = returned_closure(target, ctx.qualname_of_def, ctx.tree)
            return _described(target.name.value, answer)
    if not isinstance(func, (cst.Name, cst.Attribute)):
        return None
    qualified = ctx.call_name(call)
    if qualified is None or qualified.startswith("builtins.") or "." not in qualified:
        return None
    answer = ctx.view.returned_closure(qualified)
    return _described(qualified.rsplit(".", 1)[-1], answer)


def _described(factory: str, answer) -> Optional[Problem]:
    if not answer:
        return None
    return (f"{answer[0]} returned by `{factory}(...)`", f"AttributeError: Can't pickle local object '{answer[1]}'")


def local_instance(ctx, index, expr) -> Optional[Problem]:
    """(description, error) when ``expr`` is always an instance of a class defined in a function."""
    found = local_instance_class(ctx, index, expr)
    return found[1] if found else None


def local_instance_class(ctx, index, expr) -> Optional[Tuple[cst.CSTNode, Problem]]:
    """(where the class is defined, (description, error)) when ``expr`` is always an instance of a
    class defined in a function (``local_instance``): the class's name, or ``expr`` for a factory's class."""
    if expr is None:
        return None
    nodes = index.value_nodes(expr)
    if not nodes:
        return None
    found = None
    for node in nodes:
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Name):
            return None
        _, bindings = index.name_bindings(node.func.value, node)
        if not bindings or len(bindings) != 1:
            return None
        problem = _returned_class(ctx, index, bindings[0])
        cls = bindings[0].node
        if problem is None and isinstance(cls, cst.ClassDef) and is_local_def(ctx, cls):
            problem = (f"an instance of the local class `{cls.name.value}`",
                       f"AttributeError: Can't pickle local object '{ctx.qualname_of_def(cls)}'")
        if problem is None:
            return None
        found = found or ((cls.name if isinstance(cls, cst.ClassDef) else expr), problem)
    return found


def _returned_class(ctx, index, binding) -> Optional[Problem]:
    """A name bound once to a project factory's result that is always a class it defines (``Cls = make(...)``)."""
    value = binding.value if binding.kind == "value" and binding.index is None else None
    if not isinstance(value, cst.Call):
        return None
    problem = factory_closure(ctx, index, value)
    if problem is None or not problem[0].startswith("the local class"):
        return None
    return (f"an instance of {problem[0]}", problem[1])


def held_unpicklable(ctx, expr) -> Optional[str]:
    """How the object ``expr`` constructs keeps state that pickle cannot copy: an instance of a
    project class whose ``__init__`` chain stores a lock, thread or open handle on ``self``
    (``ProjectIndex.unpicklable_attribute``), for a message; None otherwise or when unknown."""
    ref = class_ref(ctx.tree, ctx.names, expr)
    if ref is None:
        return None
    if ref[0] == "local":
        found = ctx.view.unpicklable_attribute(ctx.qualname_of_def(ref[1]), local=True)
    else:
        found = ctx.view.unpicklable_attribute(ref[1])
    return f"`self.{found[0]}` (`{found[1]}`)" if found else None


def kept_callables(ctx, index, expr) -> List[Tuple[cst.CSTNode, Problem]]:
    """[(node, (description, error))]: a lambda, nested function or local-class instance that the
    dataset object ``expr`` constructs is handed to keep and run per sample, so the dataset cannot
    be pickled either. Looked for in the stages of a webdataset or torchdata pipeline, and in the construction's
    arguments (not a method of an object's: ``table.map(f)``; a keyword only when it names a transform, its value
    is a transform container, or the project class keeps that parameter on ``self``), through names (each value
    they may hold: one path is enough), into transform containers and what a factory of the file returns; or
    kept by the dataset's own class from its ``__init__`` (``class_kept_callable``; for a name, the
    class of each construction it may hold, one finding per lambda: ``ds = A(**kw) if crop else B(**kw)``)."""
    for held in [expr, *wrapped_datasets(ctx, index, expr)]:  # (and the datasets a ``ConcatDataset``... keeps)
        found = _kept_by_dataset(ctx, index, held)
        if found:
            return found
    return []


_DATASET_COPIES = frozenset({"copy.copy", "copy.deepcopy"})


def _kept_by_dataset(ctx, index, expr, depth: int = 0) -> List[Tuple[cst.CSTNode, Problem]]:
    nodes = index.value_nodes(expr) if isinstance(expr, cst.Name) else [expr]
    for node in nodes or () if depth < 4 else ():  # a copy keeps what the copied dataset keeps
        if isinstance(node, cst.Call) and ctx.call_name(node) in _DATASET_COPIES and len(node.args) == 1 and not node.args[0].star:
            found = _kept_by_dataset(ctx, index, node.args[0].value, depth + 1)
            if found:
                return found
    for node in nodes or ():  # (any construction the name may hold: the loader fails on that path)
        for stage in pipeline_callables(ctx, node, index.value_nodes):  # ``wds.WebDataset(urls).map(f)``
            found = _kept(ctx, index, stage, 0)
            if found:
                return [(found[0], (f"a pipeline keeping {found[1][0]} as a stage", found[1][1]))]
        constructed = isinstance(node, cst.Call) and not _method_of_object(ctx, node)
        stored = {id(value) for value in (_kept_by_project_class(ctx, node) if constructed else ())}
        for arg in node.args if constructed else ():
            for entry in transform_entries(ctx, index, arg.value) if arg.star == "**" else ():  # ``Images(**options)``
                found = _kept(ctx, index, entry, 0)
                if found:
                    return [(found[0], (f"given {found[1][0]} to keep", found[1][1]))]
            if arg.star or (arg.keyword is not None and "transform" not in arg.keyword.value.lower()
                            and not _container(ctx, arg.value) and id(arg.value) not in stored):
                continue
            every = _kept_every(ctx, index, arg.value, 0)  # (each lambda a factory's pipelines keep: each needs its fix)
            if every:
                return [(node, (f"given {what} to keep", error)) for node, (what, error) in every]
    for value in _transform_stores(ctx, expr) if nodes and isinstance(expr, cst.Name) else ():
        found = _kept(ctx, index, value, 0)
        if found:
            return [(found[0], (f"given {found[1][0]} to keep", found[1][1]))]
    found = class_kept_callable(ctx, expr)  # (a name bound once, or by the assignment reaching the read)
    every = [found] if found else []
    if found is None and not isinstance(expr, cst.Name):
        nodes = attribute_constructions(ctx, expr)  # ``self.dataset``: each construction the class stores there
    for node in nodes or () if found is None else ():
        found = class_kept_callable(ctx, node) if isinstance(node, cst.Call) else None  # each construction it may hold
        if found and not any(found[0] is other[0] for other in every):
            every.append(found)
    return [(node, (f"an instance of {what}", error)) for node, (what, error) in every]


def _method_of_object(ctx, call: cst.Call) -> bool:
    """``call`` is a method of an object (``table.map(f)``, ``load(...).filter(f)``), not the
    construction of a class: what it returns need not keep its arguments (a Hugging Face
    ``map`` runs ``f`` at once; a webdataset stage is ``pipeline_callables``'s question)."""
    return isinstance(call.func, cst.Attribute) and ctx.call_name(call) is None


def class_kept_callable(ctx, expr) -> Optional[Tuple[cst.CSTNode, Problem]]:
    """(node, (description, error)): ``expr`` constructs a project class (this file or another)
    whose ``__init__`` chain keeps a lambda, a nested function or a pipeline holding one on
    ``self`` (``kept_lambdas``, through the summaries), so its instances cannot be pickled; or whose
    own ``__init__`` keeps a parameter defaulting to one that the construction (a call) leaves out.
    The node is that lambda (or nested function's name) when this file's class keeps it, else ``expr``."""
    ref = class_ref(ctx.tree, ctx.names, expr) if expr is not None else None
    method = ctx.enclosing_function(expr, through_lambdas=False) if ref is None and isinstance(expr, cst.Name) else None
    if method is not None and ctx.method_class(method) is not None and self_name(method) == expr.value:
        ref = ("local", ctx.method_class(method))  # ``DataLoader(self, ...)`` in a method of the dataset's own class
    held = receiver_class(ctx, expr) if ref is None and isinstance(expr, cst.Attribute) else None  # ``self.dataset``
    if held is not None:
        ref = ("qualified", held) if not held.startswith(f"{ctx.names.modname}.") else \
            ("local", local_class_path(ctx.tree, held[len(ctx.names.modname) + 1:]))
    if ref is None or ref[1] is None:
        return None
    local = ref[0] == "local"
    name = ref[1].name.value if local else ref[1].rsplit(".", 1)[-1]
    for attr, held, param, position in ctx.view.kept_callable_attributes(ctx.qualname_of_def(ref[1]) if local else ref[1], local=local):
        if param is not None and (not isinstance(expr, cst.Call) or _passes(ctx, expr, param, position)):
            continue  # the construction gives its own value (or may: ``*args``, ``**kw``, or not a call we see)
        if ctx.view.kept_elsewhere(ctx.qualname_of_def(ref[1]) if local else ref[1], attr, local=local):
            continue  # reported at the lambda, in the file of the class that keeps it (``kept_elsewhere``)
        node = (_stored_node(ctx, ref[1], attr, held, default=param is not None) if local else None) or expr
        return (node, _kept_problem(name, attr, held, param, "as the construction does", "which the construction leaves out"))
    return None


def foreign_kept_callables(ctx) -> List[Tuple[cst.CSTNode, Problem, str]]:
    """(the lambda, (description, error), path) for what a class of this file keeps on ``self`` from its
    own ``__init__`` when a DataLoader with workers of the file ``path`` is built over an instance of it
    or of a subclass (``kept_elsewhere``: that file leaves the finding to this one, where the fix goes)."""
    out = []
    for cls in ctx.nodes(cst.ClassDef):
        qual = ctx.qualname_of_def(cls)
        for attr, held, param, _ in ctx.view.kept_callable_attributes(qual, local=True):
            path = ctx.view.foreign_loader(qual, attr)
            node = _stored_node(ctx, cls, attr, held, default=param is not None) if path else None
            if node is not None:
                out.append((node, _kept_problem(cls.name.value, attr, held, param, "as a construction there does",
                                                "which a construction there leaves out"), path))
    return out


def unloaded_kept_callables(ctx) -> List[Tuple[cst.CSTNode, Problem, bool]]:
    """(the lambda, (description, error), by default) for what a dataset class of this file keeps from its own
    ``__init__`` (always, or as a default) that the project leaves to its users (``kept_elsewhere.unloaded``)."""
    out = []
    for cls in ctx.nodes(cst.ClassDef):
        qual = ctx.qualname_of_def(cls)
        if is_local_def(ctx, cls) or not ctx.view.class_kind(qual):
            continue
        for attr, held, param, position in ctx.view.kept_callable_attributes(qual, local=True):
            node = _stored_node(ctx, cls, attr, held, default=param is not None) if ctx.view.unloaded(qual, param, position) else None
            if node is not None:
                out.append((node, _kept_problem(cls.name.value, attr, held, param, "as a user's construction may",
                                                "which a user's construction may leave out"), param is not None))
    return out


def _kept_problem(name: str, attr: str, held: str, param: Optional[str], fallback: str, default: str) -> Problem:
    """(description, error) for the lambda or nested function ``held`` that class ``name`` keeps on
    ``self.<attr>``: always, or when a construction leaves ``param`` out (its default, or a fallback)."""
    label = "<lambda>" if held.endswith("<lambda>") else held.rsplit(".<locals>.", 1)[-1]
    if label.startswith("<") and label != "<lambda>":  # an object (``kept_lambdas.object_label``)
        what, error = _object_what(label)
        return (f"`{name}` holding {what} on `self.{attr}`", error)
    what = "a lambda" if label == "<lambda>" else f"the nested function `{label}`"
    error = f"AttributeError: Can't pickle local object '{held}'"
    if param is not None and ".<locals>." in held:  # a fallback the method writes in its body
        what += f" (its fallback when `{param}` is not given, {fallback})"
    elif param is not None:
        what += f" (the default of `{param}`, {default})"
        error = f"_pickle.PicklingError: Can't pickle <function {held}>: attribute lookup {held} failed"
    return (f"`{name}` holding {what} on `self.{attr}`", error)


def _object_what(label: str) -> Problem:
    """(what, error) for an object label of ``kept_lambdas.object_label``."""
    if label.startswith("<module "):
        return f"the module `{label[8:-1]}`", "TypeError: cannot pickle 'module' object"
    if label == "<lru_cache>":
        return ("a `functools` cache wrapper", "_pickle.PicklingError: Can't pickle <functools._lru_cache_wrapper object>: "
                "it's not the same object as the function it wraps")
    if label.startswith("<cv2.create"):
        return f"an OpenCV object (`{label[1:-1]}()`)", f"TypeError: cannot pickle 'cv2.{label[11:-1]}' object"
    return "a generator object", "TypeError: cannot pickle 'generator' object"


def _passes(ctx, call: cst.Call, param: str, position: int) -> bool:
    """``call`` gives parameter ``param`` (at ``position`` after ``self``) a value, or may: a ``*``
    argument, or a ``**`` dict not followed to every key it can hold (``kwargs_dicts``)."""
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    if any(arg.keyword is not None and arg.keyword.value == param for arg in call.args) or 0 <= position < len(positional):
        return True
    if not any(arg.star for arg in call.args):
        return False
    found, closed = closed_entries(ctx, call, param)
    return bool(found) or not closed


def _stored_node(ctx, cls: cst.ClassDef, attr: str, held: str, default: bool = False, depth: int = 0) -> Optional[cst.CSTNode]:
    """The lambda (or nested function's name) that ``cls``'s own ``__init__`` keeps on ``self.<attr>``
    (or that an object of a class of this file it keeps there keeps);
    with ``default``, the lambda the default of the parameter it keeps there holds (what the summary
    recorded: ``stored_callables``, ``stored_defaults``). ``held`` is the summary's label for it
    (``held_state.kept_callable_attributes``): a call's result counts only when that says generator or closure."""
    init = methods(cls).get("__init__")
    if init is None:
        return None
    buckets, qualname = body_buckets(init, ctx.tree), lambda func: ctx.names.qualname(func)
    if default:
        stored = [(held_attr, node) for held_attr, node, _, _ in stored_defaults(buckets.get(cst.Assign, ()), self_name(init), init.params, qualname, module_lambdas(ctx.names), init)]
    else:
        stored = stored_callables(buckets.get(cst.Assign, ()), self_name(init), [d.name.value for d in buckets.get(cst.FunctionDef, ())], qualname, init.params)
    found = next((node for held_attr, node in stored if held_attr == attr), None)
    label = object_label(found, qualname, self_name(init)) if found is not None else None
    if label and label.startswith("<call ") and not held.endswith(".<generator>") \
            and not held.startswith(label[len("<call "):-1].rsplit(".", 1)[-1] + ".<locals>."):
        found = None  # a call's result, kept only when ``held_state`` found the callee a generator or closure factory (``held``)
    return found if found is not None or default or depth > 3 else _held_object_node(ctx, init, buckets, attr, depth)


def _held_object_node(ctx, init: cst.FunctionDef, buckets, attr: str, depth: int) -> Optional[cst.CSTNode]:
    """The lambda an object of this file's class keeps, built and kept on ``self.<attr>`` by ``init``."""
    selfp = self_name(init)
    for node in buckets.get(cst.Assign, ()):
        if type(node.value) is not cst.Call or not any(self_attr(t.target, selfp) == attr for t in node.targets):
            continue
        ref = class_ref(ctx.tree, ctx.names, node.value)
        if ref is not None and ref[0] == "local":
            inner = next(((a, h) for a, h, p, _ in ctx.view.kept_callable_attributes(ctx.qualname_of_def(ref[1]), local=True) if p is None), None)
            found = _stored_node(ctx, ref[1], *inner, depth=depth + 1) if inner else None
            if found is not None:
                return found
    return None


def _transform_stores(ctx, name: cst.Name) -> List[cst.BaseExpression]:
    """What the scope of ``name`` installs as the object's transform after constructing it
    (``train_set.transform = pipeline``: an attribute whose name says transform)."""
    scope = ctx.tree.scope_node(name)
    out = []
    for node in iter_subtree(scope.body if scope is not None else ctx.module, into_scopes=False):
        if not isinstance(node, cst.Assign):
            continue
        for target in node.targets:
            held = target.target
            if (isinstance(held, cst.Attribute) and isinstance(held.value, cst.Name) and held.value.value == name.value
                    and "transform" in held.attr.value.lower()):
                out.append(node.value)
    return out


def _container(ctx, expr) -> bool:
    """A transform container (``T.Compose``, ``T.Lambda``...), or a project class (any file) deriving
    from containers alone whose chain defines no ``__init__`` of its own: it keeps what it is given
    as the container does (``class Compose(T.Compose): def randomize(self): ...``)."""
    name = ctx.call_name(expr) if isinstance(expr, cst.Call) else None
    if name is None or name in TRANSFORM_CONTAINERS:
        return name is not None
    bases = ctx.view.external_bases(name)
    init = ctx.view.class_method(name, "__init__") if bases else None
    return bool(bases) and all(base in TRANSFORM_CONTAINERS for base in bases) and init is not None and init["defined"] is not True


def _kept_by_project_class(ctx, call: cst.Call) -> List[cst.BaseExpression]:
    """The arguments of a construction of a project class that the object keeps on ``self``
    (``kept_objects.kept_arguments``): a pipeline class of the project holding its transforms."""
    qualified = ctx.call_name(call)
    if not qualified or not ctx.view.in_project(qualified):
        return []
    return [arg.value for arg in kept_arguments(ctx, call, qualified)]


def _returned(ctx, call: cst.Call) -> List[cst.BaseExpression]:
    """What a call of a module-level function of this file returns (each ``return``'s value): a
    factory of the pipeline (``T = get_transforms(size)``)."""
    func = call.func
    if not isinstance(func, cst.Name) or ctx.call_name(call) != f"{ctx.names.modname}.{func.value}":
        return []
    defs = [d for d in ctx.nodes(cst.FunctionDef) if d.name.value == func.value and isinstance(ctx.parent(d), cst.Module)]
    returns = plain_returns(defs[0], ctx.tree) if len(defs) == 1 else None
    return [node.value for node in returns or () if node.value is not None]


def _kept(ctx, index, expr, depth: int) -> Optional[Tuple[cst.CSTNode, Problem]]:
    found = _kept_every(ctx, index, expr, depth)
    return found[0] if found else None


def _kept_every(ctx, index, expr, depth: int) -> List[Tuple[cst.CSTNode, Problem]]:
    """A lambda (nested function, local-class instance) of each pipeline ``expr`` may hold, once (each value, return)."""
    if depth > 8:
        return []
    if isinstance(expr, cst.Name):
        nodes = index.value_nodes(expr)
        nodes = extended_list(ctx, expr) if nodes is None else nodes  # (``steps += [...]``: the flow stops there)
        if any(isinstance(node, (cst.Lambda, cst.FunctionDef)) for node in nodes):
            problem = unpicklable(ctx, index, expr)
            lam = next((node for node in nodes if isinstance(node, cst.Lambda)), None)
            return [(lam or expr, problem)] if problem else []
        if any(isinstance(node, cst.List) for node in nodes):  # and what the scope adds to it (``steps.append(...)``)
            nodes = nodes + list_fills(ctx, expr)
        elements = [node for node in nodes if node is not expr]  # each value the name may hold: a path
    elif isinstance(expr, cst.Lambda):
        problem = unpicklable(ctx, index, expr)
        return [(expr, problem)] if problem else []
    elif isinstance(expr, (cst.List, cst.Tuple)) or _container(ctx, expr):  # one pipeline: its first lambda
        elements = [element.value for element in expr.elements] if isinstance(expr, (cst.List, cst.Tuple)) else \
            [arg.value for arg in expr.args if not arg.star]
        return next(([found] for found in (_kept(ctx, index, e, depth + 1) for e in elements) if found), [])
    elif isinstance(expr, cst.Call):
        held = class_kept_callable(ctx, expr)
        if held:
            return [(held[0], (f"a {held[1][0]}", held[1][1]))]
        elements = _kept_by_project_class(ctx, expr) or _returned(ctx, expr)
    else:
        return []
    found: List[Tuple[cst.CSTNode, Problem]] = []
    for element in elements:
        found += [one for one in _kept_every(ctx, index, element, depth + 1) if not any(one[0] is other[0] for other in found)]
    return found
