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

``list_fills(ctx, name)``: what a scope adds to the list a name holds (``append``, ``insert``,
``extend``, ``+=``), and ``extended_list``: the displays of a list only ever extended in place.
"""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.lifetimes import ADDERS
from dslint.semantics.sizes import counted_loop
from dslint.semantics.walk import iter_subtree

#: list methods that add what they are given: the position of the added argument, and whether
#: that argument is one item (``append``/``insert``) or an iterable of items (``extend``)
_FILLERS = {"append": (0, True), "insert": (1, True), "extend": (0, False)}

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


def list_fills(ctx, name: cst.Name) -> List[cst.BaseExpression]:
    """What the scope of ``name`` adds to the list that name holds: ``x`` of ``name.append(x)``
    and ``name.insert(i, x)``, and the iterables of ``name.extend(xs)`` and ``name += xs`` (a
    display's elements are the items added). A transform list filled step by step
    (``steps.append(T.Lambda(f))``, then ``T.Compose(steps)``) holds all of these."""
    out: List[cst.BaseExpression] = []
    for node in ctx.tree.scope_nodes(ctx.tree.scope_node(name), cst.Name):
        if node.value != name.value:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.AugAssign) and parent.target is node and isinstance(parent.operator, cst.AddAssign):
            out.extend(_items(parent.value, False))
            continue
        call = ctx.parent(parent) if isinstance(parent, cst.Attribute) and parent.value is node else None
        filler = _FILLERS.get(parent.attr.value) if isinstance(call, cst.Call) and call.func is parent else None
        args = [arg.value for arg in call.args if not arg.star and arg.keyword is None] if filler else []
        if filler and len(args) > filler[0]:
            out.extend(_items(args[filler[0]], filler[1]))
    return out


def extended_list(ctx, name: cst.Name) -> List[cst.List]:
    """The list displays ``name`` holds when its scope binds it only by plain assignments of
    displays and by ``+=`` (``steps = [...]`` then ``steps += [...]``: one list, extended in
    place, where the value flow stops at the augmented assignment); [] for any other binding."""
    displays: List[cst.List] = []
    for node in ctx.tree.scope_nodes(ctx.tree.scope_node(name), cst.Name):
        if node.value != name.value:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            if not isinstance(parent.operator, cst.AddAssign):
                return []
        elif isinstance(parent, cst.AssignTarget) and parent.target is node:
            value = ctx.parent(parent).value
            if not isinstance(value, cst.List):
                return []
            displays.append(value)
        elif isinstance(parent, (cst.For, cst.AsName, cst.NamedExpr, cst.Param, cst.Global, cst.Nonlocal)) or (
                isinstance(parent, (cst.Element, cst.StarredElement))
                and isinstance(ctx.parent(ctx.parent(parent)), (cst.AssignTarget, cst.For))):
            return []
    return displays


def _items(value, one: bool) -> List[cst.BaseExpression]:
    if not one and isinstance(value, (cst.List, cst.Tuple)):
        return [element.value for element in value.elements]
    return [value]


def stays_bounded(ctx, call, site) -> bool:
    """The handles that ``call`` adds at ``site`` do not grow with the data: ``site`` replaces a
    closed one (``replaces_closed``), or ``call`` runs in a loop over a set count
    (``sizes.counted_loop``: one handle per batch slot)."""
    return replaces_closed(ctx, site) or counted_loop(ctx, call)


def replaces_closed(ctx, site) -> bool:
    """``site`` stores into a container slot (``self.files[b] = h5py.File(p)``) that an earlier
    statement of its block closes (``self.files[b].close()``, also under ``if b in self.files:``):
    the new handle takes the place of a closed one, so the handles kept do not grow."""
    if not isinstance(site, cst.Assign) or len(site.targets) != 1 or not isinstance(site.targets[0].target, cst.Subscript):
        return False
    slot, line = site.targets[0].target, ctx.parent(site)
    statements = list(getattr(ctx.parent(line), "body", ()))
    for statement in statements[:next((i for i, s in enumerate(statements) if s is line), 0)]:
        for value in iter_subtree(statement, into_scopes=False):
            if isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute) \
                    and value.func.attr.value == "close" and value.func.value.deep_equals(slot):
                return True
    return False
