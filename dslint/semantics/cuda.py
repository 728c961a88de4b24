"""CUDA in data-loading code.

Device values that name CUDA (``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")``,
a name bound only to one of them), calls that initialise CUDA or put data on it
(``.cuda()``, ``.to(cuda)``, ``device=cuda``, ``torch.cuda.*`` but its queries,
``.pin_memory()``), and the data-loading code a node sits in: per-sample dataset
code and ``collate_fn`` functions, which run in DataLoader workers, and a dataset's
``__init__``, which runs in the main process; code whose every DataLoader has
``num_workers=0`` runs in no worker.

API: ``may_touch_cuda(call, cuda_imports)`` (cheap pre-check), ``cuda_use(ctx, call)``, ``may_be_cuda(ctx, expr)``,
``cuda_model_call(ctx, call)``, ``cuda_construction(ctx, call)``,
``collate_lambdas(ctx)``, ``loading_context(ctx, node, lambdas)``.
"""

from __future__ import annotations

from typing import List, Optional, Set, Tuple

import libcst as cst

from dslint.semantics import dataflow as df
from dslint.semantics.bindings import class_ref
from dslint.semantics.call_facts import positional_or_keyword, unresolved_receiver
from dslint.semantics.constructions import project_module_class
from dslint.semantics.device_flow import placed_on_cuda
from dslint.semantics.names import binding_kind
from dslint.semantics.project import ENTRY_METHODS
from dslint.semantics.regions import self_attr
from dslint.semantics.sample_calls import DEFAULT
from dslint.semantics.self_stores import attribute_stores
from dslint.semantics.values import possible

# torch.cuda functions that do not initialise CUDA
CUDA_SAFE = frozenset(
    {"is_available", "is_initialized", "device_count", "get_arch_list", "get_gencode_flags", "manual_seed"}
    | {"manual_seed_all", "seed", "seed_all", "empty_cache", "memory_stats", "memory_stats_as_nested_dict"}
    | {"memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_cached"}
    | {"max_memory_cached", "memory_usage", "utilization", "temperature", "power_draw", "clock_rate"}
    | {"device_memory_used", "is_tf32_supported"}
)
CUDA_TAILS = frozenset({"cuda", "to", "pin_memory"})


def cuda_device(ctx, expr, depth: int = 0) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")`` or a name bound only to one of them."""
    if expr is None or depth > 3:
        return False
    value = ctx.literal(expr)
    if isinstance(value, str):
        return value == "cuda" or value.startswith("cuda:")
    if isinstance(expr, cst.Call) and ctx.call_name(expr) == "torch.device" and expr.args:
        first = ctx.literal(expr.args[0].value)
        return isinstance(first, str) and (first == "cuda" or first.startswith("cuda:"))
    if isinstance(expr, cst.Name):
        values = df.plain_bindings(ctx, expr) if ctx.enclosing_function(expr) is not None else None
        if values is None:
            local = df.bound_values(ctx, expr)
            if local:
                return False
            module_value = ctx.module_constant(expr)
            values = [module_value] if module_value is not None else None
        return bool(values) and all(cuda_device(ctx, v, depth + 1) for v in values)
    return False


def _cuda_text(value) -> bool:
    return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))


def may_be_cuda(ctx, expr, depth: int = 0) -> Optional[str]:
    """Where a CUDA value of the device ``expr`` comes from, when it can be CUDA, or None.

    Certain CUDA devices (``cuda_device``), both arms of a conditional
    (``"cuda" if torch.cuda.is_available() else "cpu"``), ``torch.device(x)`` for such
    an ``x``, ``self.<attr>`` through what the class's methods store in it, and what
    ``dslint.semantics.values`` finds possible (a parameter's default or what this
    file passes, an argparse default, a config class default). A device nothing in
    the file shows stays unknown (None)."""
    if expr is None or depth > 4:
        return None
    if cuda_device(ctx, expr):
        return "a CUDA device"
    if isinstance(expr, cst.IfExp):
        return may_be_cuda(ctx, expr.body, depth + 1) or may_be_cuda(ctx, expr.orelse, depth + 1)
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):  # ``device or DEFAULT``
        found = may_be_cuda(ctx, expr.left, depth + 1)
        return found or (None if _never_falsy(ctx, expr.left) else may_be_cuda(ctx, expr.right, depth + 1))
    if isinstance(expr, cst.Call) and ctx.call_name(expr) == "torch.device" and expr.args:
        return may_be_cuda(ctx, expr.args[0].value, depth + 1)
    if isinstance(expr, cst.Attribute):
        stored = _self_stores(ctx, expr)
        if stored is not None:
            for value in stored:
                found = may_be_cuda(ctx, value, depth + 1)
                if found is not None:
                    return found
            return _constructed_with(ctx, expr)
    if isinstance(expr, cst.Name):
        values = df.plain_bindings(ctx, expr) if ctx.enclosing_function(expr) is not None else None
        if values is not None:
            for value in values:
                found = may_be_cuda(ctx, value, depth + 1)
                if found is not None:
                    return found
            return None
        # a parameter the function rebinds (``if device is None: device = "cuda" if ... else "cpu"``):
        # the values it assigns are possible too
        for value in (df.bound_values(ctx, expr) or ()) if ctx.enclosing_function(expr) is not None else ():
            found = may_be_cuda(ctx, value, depth + 1) if value is not None else None
            if found is not None:
                return found
        found = _partial_binding(ctx, expr) or _init_argument(ctx, expr)
        if found is not None:
            return found
        passed = _sample_arguments(ctx, expr)
        if passed is not None and DEFAULT not in passed:  # every per-sample call gives it: not its default
            hit = next((v[0] for v in passed if v != "?" and _cuda_text(v[0])), None)
            return f"a per-sample call passes {hit!r}" if hit is not None else None
    hit = possible(ctx, expr).can_be(_cuda_text)
    return f"{hit.origin} is {hit.value!r}" if hit is not None else None


def _sample_arguments(ctx, name: cst.Name) -> Optional[list]:
    """What the per-sample calls of the function whose parameter ``name`` is give it
    (``sample_calls``), or None (not a parameter of a function reached per sample)."""
    func = ctx.enclosing_function(name, through_lambdas=False)
    if func is None or ctx.per_sample_mode(func) is None:
        return None
    positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    if ctx.method_class(func) is not None and binding_kind(func) != "staticmethod":
        positional = positional[1:]  # (``self`` or ``cls``: the receiver)
    if name.value not in positional and all(p.name.value != name.value for p in func.params.kwonly_params):
        return None
    position = positional.index(name.value) if name.value in positional else None
    return ctx.view.per_sample_arguments(ctx.qualname_of_def(func), name.value, position)


def _never_falsy(ctx, expr) -> bool:
    """A truthy literal, or a parameter every per-sample call gives a truthy literal."""
    value = ctx.literal(expr)
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return bool(value)
    passed = _sample_arguments(ctx, expr) if isinstance(expr, cst.Name) else None
    return bool(passed) and all(v not in ("?", DEFAULT) and bool(v[0]) for v in passed)


def _self_stores(ctx, expr: cst.Attribute) -> Optional[List[cst.BaseExpression]]:
    """What the methods of the enclosing class store in ``self.<attr>`` (None when
    ``expr`` is not an attribute of ``self`` in a method)."""
    func = ctx.enclosing_function(expr)
    owner = ctx.method_class(func) if func is not None else None
    if owner is None:
        return None
    attr = self_attr(expr, ctx.regions.get(func).self_param)
    if attr is None:
        return None
    return [node.value for node in attribute_stores(ctx, owner, attr) if isinstance(node, cst.Assign)]


def _constructed_with(ctx, expr: cst.Attribute, kind: str = "device") -> Optional[str]:
    """A CUDA device (or an object put on one: ``kind`` "placed") that a construction somewhere in
    the project hands to the ``__init__`` parameter that ``self.<attr>`` keeps, in this class or
    a base of another file (``device_flow``)."""
    func = ctx.enclosing_function(expr)
    owner = ctx.method_class(func)
    attr = self_attr(expr, ctx.regions.get(func).self_param)
    found = ctx.memo(
        ("cuda.constructed_with", id(owner), attr, kind),
        lambda: ctx.view.cuda_attribute(ctx.qualname_of_def(owner), attr, kind),
    )
    return f"`self.{attr}`: {found}" if found else None


def _partial_binding(ctx, name: cst.Name) -> Optional[str]:
    """A ``functools.partial(f, <name>=cuda)`` somewhere in the project, for a parameter of the
    module-level function ``f`` that encloses ``name`` (``device_flow``)."""
    func = ctx.enclosing_function(name)
    if func is None or ctx.method_class(func) is not None or ctx.enclosing_function(func) is not None:
        return None
    params = func.params
    if not any(p.name.value == name.value for p in (*params.params, *params.kwonly_params)):
        return None
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    slots = [name.value] + ([positional.index(name.value)] if name.value in positional else [])

    def ask():
        qual = ctx.qualname_of_def(func)
        return next((found for slot in slots if (found := ctx.view.cuda_partial(qual, slot))), None)

    return ctx.memo(("cuda.partial", id(func), name.value), ask)


def cuda_construction(ctx, call: cst.Call) -> Optional[Tuple[str, cst.CSTNode]]:
    """(what, the argument) when ``call`` constructs a project class (of any file) and hands it a
    tensor or model put on CUDA (``x.cuda()``, ``x.to("cuda")``, a name bound to one; a device
    from the command line does not count) that its ``__init__`` keeps on ``self``
    (``device_flow``), else None."""
    if not isinstance(call.func, (cst.Name, cst.Attribute)):
        return None
    qualified = ctx.call_name(call)
    if not qualified or qualified.split(".")[0] in ("torch", "builtins", "numpy"):
        return None
    for position, arg in enumerate(call.args):
        if arg.star or not placed_on_cuda(ctx.tree, ctx.names, arg.value, options=False) or _moves_itself(ctx, arg.value):
            continue
        slot = arg.keyword.value if arg.keyword is not None else position
        attr = ctx.view.kept_attribute(qualified, slot)
        if attr is not None:
            shown = ctx.code(arg.value).strip()
            shown = shown if len(shown) < 40 else "a CUDA tensor"
            return f"`{ctx.code(call.func).strip()}` keeps `{shown}` in `self.{attr}`", arg.value
    return None


def _moves_itself(ctx, expr) -> bool:
    """``expr`` is a name that may hold an object of a project class with its own ``cuda`` method
    (``model = Wrapper(...)``, ``Wrapper.load(p)``, a factory returning one; then ``model.cuda()``):
    that method decides what moves, so the object is no CUDA tensor of its own. A project class
    whose file is not analysed may be one."""
    if not isinstance(expr, cst.Name):
        return False
    assigns = ctx.tree.scope_nodes(ctx.tree.scope_node(expr), cst.Assign)  # (any that binds it: it may hold that)
    for value in [a.value for a in assigns if any(type(t.target) is cst.Name and t.target.value == expr.value for t in a.targets)]:
        func = value.func if isinstance(value, cst.Call) else None
        name = ctx.call_name(value) if func is not None else None
        classes = list(ctx.view.factory_classes(name)) if name and ctx.view.function_facts(name) is not None else []
        ref = class_ref(ctx.tree, ctx.names, value) if func is not None else None
        classes += [ctx.qualname_of_def(ref[1]) if ref[0] == "local" else ref[1]] if ref else []
        if isinstance(func, cst.Attribute):  # ``Wrapper.load(p)``: a static or class method of the class
            classes.append(ctx.qualname(func.value) or "")
        for c in filter(None, classes):
            info = ctx.view.class_method(c, "cuda")  # (None: not summarised; a class of the project: unknown)
            if (info.get("defined") and not project_module_class(ctx, c)) if info else ctx.view.in_project(c):
                return True
    return False


def _init_argument(ctx, name: cst.Name) -> Optional[str]:
    """A CUDA device that a construction in the project hands to the parameter ``name`` of the
    ``__init__`` that reads it (``device_flow``)."""
    func = ctx.enclosing_function(name)
    owner = ctx.method_class(func) if func is not None and func.name.value == "__init__" else None
    if owner is None or not func.params.params:
        return None
    if not any(p.name.value == name.value for p in (*func.params.params[1:], *func.params.kwonly_params)):
        return None
    return ctx.memo(
        ("cuda.init_argument", id(func), name.value),
        lambda: ctx.view.cuda_init_param(ctx.qualname_of_def(owner), name.value),
    )


def cuda_use(ctx, call: cst.Call) -> Optional[str]:
    """What makes ``call`` touch CUDA, as it will be shown, or None."""
    func = call.func
    qualified = ctx.call_name(call)
    if qualified is not None and qualified.startswith("torch.cuda."):
        rest = qualified[len("torch.cuda.") :]
        if rest.split(".")[0] in ("nvtx", "amp") or rest in CUDA_SAFE:
            return None
        return f"`{qualified}()`"
    if isinstance(func, cst.Attribute) and qualified is None and unresolved_receiver(ctx, func):
        method = func.attr.value
        if method == "cuda":
            return "`.cuda()`"
        if method == "pin_memory" and not call.args:
            return "`.pin_memory()`"
        if method == "to":
            device = positional_or_keyword(call, 0, "device")
            origin = may_be_cuda(ctx, device.value) if device is not None else None
            if origin is not None:
                text = ctx.code(device.value).strip()
                return _shown(f"`.to({text})`" if len(text) < 30 else "`.to(cuda)`", origin)
    forwards = _forwards_to_base(call)
    for arg in call.args:
        if arg.keyword is None:
            continue
        origin = may_be_cuda(ctx, arg.value) if arg.keyword.value == "device" and not forwards else None
        if origin is not None and origin != "a CUDA device" and _project_class(ctx, qualified):
            origin = None  # a project class given a device that may be CUDA keeps it: its methods use it
        if origin is not None:
            text = ctx.code(arg.value).strip()
            return _shown(f"`device={text}`" if len(text) < 30 else "`device=cuda`", origin)
        if (
            arg.keyword.value == "pin_memory"
            and qualified is not None
            and qualified.startswith("torch.")
            and not qualified.startswith("torch.utils.data")
            and ctx.literal(arg.value) is True
        ):
            return "`pin_memory=True`"
    return None


def _project_class(ctx, qualified: Optional[str]) -> bool:
    """``qualified`` names a class (a capitalised name) of the project."""
    if not qualified or not qualified.rsplit(".", 1)[-1][:1].isupper() or qualified.startswith("torch."):
        return False
    return ctx.view.in_project(qualified)


def _forwards_to_base(call: cst.Call) -> bool:
    """``super().__init__(..., device=device)`` or ``Base.__init__(self, ...)``: the device is handed
    on to a base class's ``__init__``, which is where anything is done with it."""
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "__init__"


def cuda_model_call(ctx, call: cst.Call) -> Optional[str]:
    """``self.model(x)`` or ``self.model.encode(x)``, where a method of the class stores
    in ``self.model`` a value it puts on a device that can be CUDA
    (``build().cuda()``, ``.to(device)``, ``device=...``): the call runs CUDA kernels.
    Returns how it is shown, or None."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    holder = func
    if isinstance(func.value, cst.Attribute):
        holder = func.value  # self.model.encode(x)
    if func.attr.value in _NOT_RUNS or not isinstance(holder.value, cst.Name):
        return None
    stored = _self_stores(ctx, holder)
    if stored is None:
        return None
    for value in stored:
        placed = _placed_on_cuda(ctx, value)
        if placed is not None:
            return f"`{ctx.code(func).strip()}(...)` (a model stored with {placed})"
    passed = _constructed_with(ctx, holder, "placed")  # a model the constructor is handed, put on CUDA
    return f"`{ctx.code(func).strip()}(...)` ({passed})" if passed else None


# methods of a module that move it or ask about it, not run it
_NOT_RUNS = frozenset({"cpu", "to", "cuda", "eval", "train", "parameters", "state_dict", "half", "float", "requires_grad_"})


def _placed_on_cuda(ctx, value) -> Optional[str]:
    """``X.cuda()``, ``X.to(device)`` for a device that can be CUDA, or a call given such a
    ``device=``, at the end of ``value``'s chain of calls."""
    if not isinstance(value, cst.Call):
        return None
    func = value.func
    if isinstance(func, cst.Attribute) and unresolved_receiver(ctx, func):
        if func.attr.value == "cuda":
            return "`.cuda()`"
        if func.attr.value == "to":
            device = positional_or_keyword(value, 0, "device")
            if device is not None and may_be_cuda(ctx, device.value) is not None:
                return f"`.to({ctx.code(device.value).strip()})`"
        if func.attr.value in ("eval", "requires_grad_", "half", "float"):
            return _placed_on_cuda(ctx, func.value)
    for arg in value.args:
        if arg.keyword is not None and arg.keyword.value == "device" and may_be_cuda(ctx, arg.value) is not None:
            return f"`device={ctx.code(arg.value).strip()}`"
    return None


def _shown(text: str, origin: str) -> str:
    return text if origin == "a CUDA device" else f"{text} ({origin})"


def may_touch_cuda(call: cst.Call, cuda_imports: bool) -> bool:
    """Cheap syntactic pre-check before any name resolution (``cuda_imports``: the file
    imports something from ``torch.cuda``)."""
    func = call.func
    if isinstance(func, cst.Attribute):
        if func.attr.value in CUDA_TAILS:
            return True
        inner = func.value
        while isinstance(inner, cst.Attribute):
            if inner.attr.value == "cuda":
                return True
            inner = inner.value
        if cuda_imports and isinstance(inner, cst.Name):
            return True
    elif isinstance(func, cst.Name) and cuda_imports:
        return True
    return any(arg.keyword is not None and arg.keyword.value in ("device", "pin_memory") for arg in call.args)


def collate_lambdas(ctx) -> Set[int]:
    """Lambdas passed as ``collate_fn`` to a DataLoader whose ``num_workers`` is not a literal 0."""
    found = set()
    for bound in ctx.dataloader_calls():
        expr = bound.expr("collate_fn")
        if isinstance(expr, cst.Lambda) and ctx.value(bound, "num_workers") != 0:
            found.add(id(expr))
    return found


def workers_possible(loaders: List[dict]) -> bool:
    """Some loader may run workers (``num_workers`` not a literal 0)."""
    return any(facts.get("num_workers") != 0 for facts in loaders)


def loading_context(ctx, node, lambdas: Set[int]) -> Optional[Tuple[str, str]]:
    """("sample" | "init" | "collate", where) for a node in code that runs in workers or
    builds a dataset (``lambdas``: from ``collate_lambdas``)."""
    for ancestor in ctx.ancestors(node):
        if id(ancestor) in lambdas:
            return "collate", "a `collate_fn` lambda"
    func = ctx.enclosing_function(node)
    while func is not None:
        owner = ctx.method_class(func)
        dataset = owner is not None and ctx.class_kind(owner)
        name = func.name.value
        if ctx.per_sample_mode(func) or (dataset and name in ENTRY_METHODS):
            if ctx.in_off_branch(node, func):
                return None  # under an option every loader's dataset leaves off
            if dataset:
                loaders = ctx.view.loaders_over(ctx.qualname_of_def(owner))
                if loaders and not workers_possible(loaders):
                    return None  # every DataLoader over it loads in the main process
            label = ctx.per_sample_label(func) or (owner.name.value if owner is not None else name)
            return "sample", f"`{name}` of `{label}`"
        if dataset and name == "__init__":
            loaders = ctx.view.loaders_over(ctx.qualname_of_def(owner))
            if loaders and not workers_possible(loaders):
                return None
            return "init", f"`{owner.name.value}.__init__`"
        loaders = ctx.view.collate_loaders(ctx.qualname_of_def(func))
        if loaders:
            if not workers_possible(loaders):
                return None
            return "collate", f"`{name}` is the `collate_fn` of a DataLoader"
        func = ctx.enclosing_function(func)
    return None
