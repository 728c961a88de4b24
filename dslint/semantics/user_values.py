"""Values the user chooses: a setting read from a configuration, a command-line option,
or a parameter that whoever calls the code fills in.

``chosen_by_user(ctx, expr)`` says where the value of ``expr`` is set by someone outside
the code that uses it, for a message (```self.hparams["num_workers"]```, "`--workers`",
"parameter `workers` of `make_loader`"), or None when the code fixes it or it cannot
be followed. It follows, inside the file:

- names to every value assigned to them (one chosen value is enough);
- a function's parameter to what this file's calls pass for it; a parameter of a
  public function (no leading ``_``) that no call here passes is chosen by its
  callers elsewhere. In a module outside any package (a script's neighbour, which
  only the project imports) that a function of another project file calls (or
  whose class it constructs), the project's calls decide it, as this file's would;
- ``self.x`` to what ``__init__`` stores in it;
- a read from a configuration: ``cfg.x``, ``cfg["x"]``, ``cfg.get("x")`` (any depth)
  whose root is a parameter, ``self.<attr>`` stored from a parameter, Lightning's
  ``self.hparams``, or a name bound to ``parse_args()`` or a configuration loader.
  An argparse option of this file whose ``choices`` are listed is not free: the
  caller asks ``options.option_values`` for those.

Anything computed (``max(1, n)``, ``os.cpu_count()``, arithmetic) is not a bare
choice and gives None: the code constrains it.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.instance_state import self_stores
from dslint.semantics.names import dotted_parts
from dslint.semantics.call_sites import call_sites
from dslint.semantics.values import PARSE_ARGS

MAX_DEPTH = 8
#: calls whose result is a configuration the user writes (the last name of the callee)
CONFIG_LOADERS = frozenset({"load", "safe_load", "full_load", "loads", "create", "merge", "from_cli", "to_container",
                            "get_cfg", "read_config", "load_config", "get_config", "parse_config"})
#: attributes of a ``LightningModule``/``LightningDataModule`` that hold the user's hyperparameters
LIGHTNING_SETTINGS = frozenset({"hparams"})


def chosen_by_user(ctx, expr: Optional[cst.CSTNode]) -> Optional[str]:
    """Where the user sets the value of ``expr`` (see the module docstring), or None."""
    if expr is None:
        return None
    return ctx.memo(("user_values.chosen", id(expr)), lambda: _chosen(ctx, expr, 0, set()))


def _chosen(ctx, expr, depth: int, active: set) -> Optional[str]:
    if depth > MAX_DEPTH or id(expr) in active:
        return None
    active = active | {id(expr)}
    if isinstance(expr, cst.Call):
        if ctx.call_name(expr) == "builtins.int" and len(expr.args) == 1 and not expr.args[0].star:
            return _chosen(ctx, expr.args[0].value, depth + 1, active)
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value == "get" and expr.args and _is_setting_read(ctx, func.value, depth, active):
            return f"`{_code(ctx, expr)}`"
        return None
    if isinstance(expr, cst.Name):
        return _name(ctx, expr, depth, active)
    if isinstance(expr, (cst.Attribute, cst.Subscript)):
        if _self_attr(expr) is not None:
            return _self_value(ctx, expr, depth, active)
        if _is_setting_read(ctx, expr.value, depth, active):
            return f"`{_code(ctx, expr)}`"
    return None


def _name(ctx, name: cst.Name, depth: int, active: set) -> Optional[str]:
    scope = ctx.tree.scope_node(name)
    param = _parameter(ctx, scope, name.value)
    if param is not None:
        return _parameter_choice(ctx, scope, param, depth, active)
    assigned = scope_assignments(ctx.tree, scope, name.value)
    for value in assigned or ():
        found = _chosen(ctx, value, depth + 1, active)
        if found is not None:
            return found
    return None


def _parameter_choice(ctx, func: cst.FunctionDef, param: cst.Param, depth: int, active: set) -> Optional[str]:
    sites = call_sites(ctx, func, param)
    for _, arg in sites:
        if arg is not None:
            found = _chosen(ctx, arg, depth + 1, active)
            if found is not None:
                return found
    if sites:
        return None  # the file's own calls decide it
    owner = ctx.method_class(func)
    name = owner.name.value if owner is not None and func.name.value == "__init__" else func.name.value
    if name.startswith("_") or (owner is not None and owner.name.value.startswith("_")):
        return None
    if _called_by_neighbours(ctx, func, owner):
        return None  # the project's own calls decide it, as this file's would
    return f"what a caller of `{name}` passes for parameter `{param.name.value}`"


def _called_by_neighbours(ctx, func: cst.FunctionDef, owner: Optional[cst.ClassDef]) -> bool:
    """``func`` is in a module outside any package (a script's neighbour: nothing outside the
    project imports it) and a function of another project file calls it (constructs ``owner``
    for ``__init__``). A package's functions are an API: its users' calls choose too."""
    if "." in ctx.names.modname:
        return False
    if owner is not None and func.name.value == "__init__":
        return ctx.view.called_elsewhere(ctx.qualname_of_def(owner), "classes")
    if owner is not None:
        return False  # a method: its callers hold an instance, not followed
    return ctx.view.called_elsewhere(ctx.qualname_of_def(func))


def _self_value(ctx, expr, depth: int, active: set) -> Optional[str]:
    """``self.x`` (or a read below it: ``self.cfg.x``, ``self.hparams["x"]``)."""
    attr, rest = _self_attr(expr)
    if attr in LIGHTNING_SETTINGS and rest:
        return f"`{_code(ctx, expr)}`"
    stored = _init_store(ctx, expr, attr)
    if stored is None:
        return None
    if not rest:
        return _chosen(ctx, stored, depth + 1, active)
    # a read below an attribute stored from a parameter or a configuration
    if _is_setting_root(ctx, stored, depth + 1, active):
        return f"`{_code(ctx, expr)}`"
    return None


def _init_store(ctx, expr, attr: str) -> Optional[cst.CSTNode]:
    func = ctx.enclosing_function(expr)
    owner = ctx.method_class(func) if func is not None else None
    if owner is None:
        return None
    for stmt in owner.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            params = stmt.params.params
            if not params:
                return None
            node = self_stores(stmt, params[0].name.value).get(attr)
            return node.value if node is not None else None
    return None


def _is_setting_read(ctx, base, depth: int, active: set) -> bool:
    """``base`` is a configuration (so ``base.x`` / ``base["x"]`` is a setting)."""
    if isinstance(base, (cst.Attribute, cst.Subscript)):
        if _self_attr(base) is not None:
            attr, rest = _self_attr(base)
            if attr in LIGHTNING_SETTINGS:
                return True
            stored = _init_store(ctx, base, attr)
            return stored is not None and _is_setting_root(ctx, stored, depth + 1, active)
        return _is_setting_read(ctx, base.value, depth + 1, active)
    return _is_setting_root(ctx, base, depth + 1, active)


def _is_setting_root(ctx, expr, depth: int, active: set) -> bool:
    """A configuration object: a parameter handed in (not ``self``), the result of
    ``parse_args()`` or of a configuration loader, or a read below one of those."""
    if depth > MAX_DEPTH or id(expr) in active:
        return False
    active = active | {id(expr)}
    if isinstance(expr, cst.Call):
        parts = dotted_parts(expr.func) or []
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in PARSE_ARGS:
            return True
        return bool(parts) and parts[-1] in CONFIG_LOADERS and len(parts) > 1
    if isinstance(expr, (cst.Attribute, cst.Subscript)):
        return _is_setting_read(ctx, expr.value, depth + 1, active)
    if not isinstance(expr, cst.Name):
        return False
    scope = ctx.tree.scope_node(expr)
    param = _parameter(ctx, scope, expr.value)
    if param is not None:
        sites = [arg for _, arg in call_sites(ctx, scope, param) if arg is not None]
        return not sites or any(_is_setting_root(ctx, arg, depth + 1, active) for arg in sites)
    assigned = scope_assignments(ctx.tree, scope, expr.value)
    if not assigned and scope is not None and assigned is not None:
        assigned = scope_assignments(ctx.tree, None, expr.value)
    return any(_is_setting_root(ctx, value, depth + 1, active) for value in assigned or ())


def _self_attr(expr):
    """(attr, rest) for ``self.attr`` followed by ``rest`` more reads, else None."""
    rest = 0
    node = expr
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        inner = node.value
        if isinstance(node, cst.Attribute) and isinstance(inner, cst.Name) and inner.value == "self":
            return node.attr.value, rest
        rest += 1
        node = inner
    return None


def _parameter(ctx, scope, name: str) -> Optional[cst.Param]:
    """The parameter ``name`` of function ``scope``, not a method's ``self``/``cls``."""
    if not isinstance(scope, cst.FunctionDef):
        return None
    params = (*scope.params.posonly_params, *scope.params.params, *scope.params.kwonly_params)
    for index, param in enumerate(params):
        if param.name.value == name:
            if index == 0 and ctx.method_class(scope) is not None and param in (*scope.params.posonly_params, *scope.params.params):
                return None
            return param
    return None


def _code(ctx, expr) -> str:
    text = " ".join(ctx.code(expr).split())
    return text if len(text) <= 50 else text[:47] + "..."


def kwargs_expr(ctx, call: cst.Call, key: str) -> Optional[cst.CSTNode]:
    """The expression a ``**name`` argument of ``call`` gives for ``key``, where ``name`` is
    bound once to a dict display or ``dict(...)`` that spells the key."""
    for arg in call.args:
        if arg.star != "**" or not isinstance(arg.value, cst.Name):
            continue
        assigned = scope_assignments(ctx.tree, ctx.tree.scope_node(arg.value), arg.value.value)
        if not assigned or len(assigned) != 1:
            continue
        built = assigned[0]
        if isinstance(built, cst.Dict):
            for element in built.elements:
                if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) \
                        and element.key.evaluated_value == key:
                    return element.value
        elif isinstance(built, cst.Call) and ctx.call_name(built) == "builtins.dict":
            for item in built.args:
                if item.keyword is not None and item.keyword.value == key:
                    return item.value
    return None
