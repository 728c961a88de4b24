"""Does a container live only inside the function that fills it?

``local_to(ctx, site, func)``: ``site`` is where a value is put in a container (what
``lifetimes.fate`` reports for a stored handle): a call of an adding method
(``views.append(x)``, ``d.update(...)``), a subscript assignment (``found[k] = x``), or a
list, tuple, set or dict display or comprehension, or an entry of one (``{"mask": mask}``, for a
handle put there by its name). The container is local to ``func`` when
it is a name ``func`` binds (not a parameter, not declared ``global``/``nonlocal``), or a display that is bound to
such names, returned or yielded, given to an adding method of such a name, or nested in a
display that is one of these. Anything else (an attribute, a module name, a display handed to
another call) may outlive the call.
"""

from __future__ import annotations

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.lifetimes import ADDERS

_DISPLAYS = (cst.List, cst.Tuple, cst.Set, cst.Dict, cst.ListComp, cst.SetComp, cst.DictComp)
_MAX_NESTING = 4


def local_to(ctx, site, func) -> bool:
    """See the module docstring."""
    return _local_to(ctx, site, func, 0)


def _local_to(ctx, site, func, depth: int) -> bool:
    if isinstance(site, (cst.Element, cst.DictElement, cst.StarredElement)):
        site = ctx.parent(site)  # a handle's name as an entry (``{"mask": mask}``): the display holding it
    if isinstance(site, cst.Call) and isinstance(site.func, cst.Attribute):
        return _local_name(ctx, site.func.value, func)
    if isinstance(site, cst.Assign) and len(site.targets) == 1 and isinstance(site.targets[0].target, cst.Subscript):
        return _local_name(ctx, site.targets[0].target.value, func)
    if not isinstance(site, _DISPLAYS) or depth > _MAX_NESTING:
        return False
    parent = ctx.parent(site)
    if isinstance(parent, (cst.Element, cst.StarredElement, cst.DictElement)):
        return _local_to(ctx, ctx.parent(parent), func, depth + 1)  # a display inside a display
    if isinstance(parent, (cst.Return, cst.Yield)):
        return True
    if isinstance(parent, cst.Assign) and parent.value is site:
        return all(_local_name(ctx, t.target, func) for t in parent.targets)
    if isinstance(parent, cst.Arg):
        outer = ctx.parent(parent)
        return isinstance(outer, cst.Call) and isinstance(outer.func, cst.Attribute) \
            and outer.func.attr.value in ADDERS and _local_name(ctx, outer.func.value, func)
    return False


def _local_name(ctx, expr, func) -> bool:
    """A name ``func`` binds itself (an assignment or another binding there), not declared
    ``global``/``nonlocal``: not a parameter (the caller's object) nor a module name."""
    if not isinstance(expr, cst.Name) or ctx.enclosing_function(expr) is not func:
        return False
    declared = {g.name.value for stmt in ctx.nodes(cst.Global) + ctx.nodes(cst.Nonlocal) for g in stmt.names}
    bound = scope_assignments(ctx.tree, func, expr.value)
    return expr.value not in declared and (bound is None or bool(bound))
