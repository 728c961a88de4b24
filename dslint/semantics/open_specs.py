"""Keyword dicts that take entries from a mapping the code does not know: open specifications.

``DataLoader(**params)`` where ``params`` supplies every argument, the dataset included, and
is filled from another mapping whose keys the code cannot list (``params = merge(spec, params)``,
``params.update(spec)``, ``{**spec, ...}``, ``dict(spec, ...)``): that mapping is a loader
specification someone else writes. When the code itself shows it carries the loader's own
objects (it reads or tests the ``dataset``, ``sampler`` or ``batch_sampler`` entry of it, or of
the merged dict), it can carry any other loader object as well.

* ``open_spec(ctx, call)``: for such a call, the specification's evidence and the entries the
  code writes into the dict on every path after the last merge (``params["shuffle"] = ...``,
  the literal keys of ``{**spec, "shuffle": True}``), each with its value expression;
* ``test_can_be_true(ctx, expr)``: a test the code computes (a comparison, ``not``, ``and``/``or``
  of tests) that is not known to be false: it can be ``True``.

Nothing here guesses: a dict changed in a way that cannot be followed after an entry is
written (handed to a call, ``pop``, ``del``, rebound) drops the entries written before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import libcst as cst

from dslint.semantics.calls import literal_value
from dslint.semantics.forwarding import key_shown
from dslint.semantics.values import expand_kwargs, possible
from dslint.semantics.walk import iter_subtree

OBJECT_KEYS = ("dataset", "sampler", "batch_sampler")


@dataclass
class OpenSpec:
    holder: cst.Name  # the ``**`` dict of the call
    source: cst.CSTNode  # the mapping whose keys are not known
    evidence: cst.CSTNode  # where the code reads or tests a loader object entry
    key: str  # that entry
    written: Dict[str, cst.BaseExpression] = field(default_factory=dict)  # entries set on every path


def open_spec(ctx, call: cst.Call) -> Optional[OpenSpec]:
    """The call takes every argument from one ``**d`` (no positional argument, no ``dataset=``),
    ``d`` takes the entries of a mapping the code does not know and shows to carry loader objects."""
    stars = [a.value for a in call.args if a.star == "**"]
    if len(stars) != 1 or not isinstance(stars[0], cst.Name):
        return None
    if any(a.star == "*" or (a.keyword is None and not a.star) for a in call.args):
        return None
    if any(a.keyword is not None and a.keyword.value in OBJECT_KEYS for a in call.args):
        return None
    holder = stars[0]
    scope = ctx.tree.scope_node(holder)
    if not isinstance(scope, cst.FunctionDef):
        return None
    sources = _open_sources(ctx, scope, holder.value)
    if not sources:
        return None
    found = None
    for source in sources:
        for key in OBJECT_KEYS:
            shown = key_shown(ctx, source, key)
            if shown is not None:
                found = (source, shown, key)
                break
        if found:
            break
    if found is None:
        return None
    return OpenSpec(holder, found[0], found[1], found[2], _written(ctx, call, holder.value))


def test_can_be_true(ctx, expr: cst.CSTNode) -> bool:
    """``expr`` is a test (a comparison, ``not x``, ``a and b`` of which one part is a test and
    none is known to be false, ``a or b`` with a part that can be true) not known to be false."""
    if literal_value(expr) is False:
        return False
    if isinstance(expr, cst.Comparison) or (isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not)):
        found = possible(ctx, expr)
        return not (found.complete and found.values and all(not v.value for v in found.values))
    if isinstance(expr, cst.BooleanOperation):
        parts = _operands(expr, type(expr.operator))
        if isinstance(expr.operator, cst.Or):
            return any(test_can_be_true(ctx, p) for p in parts)
        if not any(test_can_be_true(ctx, p) for p in parts):
            return False
        return all(test_can_be_true(ctx, p) or not _known_false(ctx, p) for p in parts)
    return False


def _known_false(ctx, expr) -> bool:
    found = possible(ctx, expr)
    return bool(found.values) and found.complete and all(not v.value for v in found.values)


def _operands(expr, kind) -> List[cst.BaseExpression]:
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, kind):
        return _operands(expr.left, kind) + _operands(expr.right, kind)
    return [expr]


def _open_sources(ctx, scope, name: str) -> List[cst.CSTNode]:
    """The mappings ``name`` takes entries from that the code cannot list: arguments of a call
    whose result is assigned to it (a merge helper), of ``name.update(...)``, ``**x`` of a dict
    display or ``dict(x, ...)`` assigned to it."""
    out = []
    for node in ctx.tree.scope_nodes(scope, cst.Name):
        if node.value != name:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.AssignTarget) and parent.target is node:
            out.extend(_merged(ctx, ctx.parent(parent).value, name))
        elif isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == "update":
            call = ctx.parent(parent)
            if isinstance(call, cst.Call):
                out.extend(a.value for a in call.args if a.keyword is None and a.star != "*")
    return [s for s in out if isinstance(s, (cst.Name, cst.Attribute)) and _unlisted(ctx, s)]


def _merged(ctx, value, name: str) -> List[cst.CSTNode]:
    if isinstance(value, cst.Dict):
        return [e.value for e in value.elements if isinstance(e, cst.StarredDictElement)]
    if not isinstance(value, cst.Call):
        return []
    if ctx.call_name(value) == "builtins.dict":
        return [a.value for a in value.args if a.keyword is None]
    # a helper that builds it from other mappings: ``params = merge(spec, params)``
    return [a.value for a in value.args if not (isinstance(a.value, cst.Name) and a.value.value == name)]


def _unlisted(ctx, expr) -> bool:
    """The keys of the mapping ``expr`` cannot all be listed (read as ``**expr`` would be)."""
    return not expand_kwargs(ctx, cst.Call(cst.Name("dict"), args=[cst.Arg(expr, star="**")]))[1]


def _written(ctx, call: cst.Call, name: str) -> Dict[str, cst.BaseExpression]:
    """Entries of ``name`` written on every path to ``call``, after anything that rebinds it,
    merges into it or changes it in a way that cannot be followed."""
    written: Dict[str, cst.BaseExpression] = {}
    func = ctx.enclosing_function(call)
    child = call
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, cst.IndentedBlock):
            before = []
            for statement in ancestor.body:
                if statement is child:
                    break
                before.append(statement)
            for statement in reversed(before):
                entry = _entry_write(statement, name)
                if entry is not None:
                    written.setdefault(*entry)
                    continue
                display = _display_binding(statement, name)
                if display is not None:
                    for element in display.elements:
                        key = literal_value(element.key) if isinstance(element, cst.DictElement) else None
                        if isinstance(key, str):
                            written.setdefault(key, element.value)
                    return written
                if _touches(ctx, statement, name):
                    return written
        if ancestor is func:
            break
        child = ancestor
    return written


def _entry_write(statement, name: str):
    """``name["key"] = value`` as a statement of its own: (key, value)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value == name):
        return None
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return None
    key = literal_value(target.slice[0].slice.value)
    return (key, assign.value) if isinstance(key, str) else None


def _display_binding(statement, name: str) -> Optional[cst.Dict]:
    """``name = {...}``: the display (its ``**x`` elements come first or last as written)."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)
            and assign.targets[0].target.value == name and isinstance(assign.value, cst.Dict)):
        return assign.value
    return None


def _touches(ctx, statement, name: str) -> bool:
    """``statement`` may change the dict ``name`` beyond reading it: rebinds it, writes or removes
    entries, calls a method that changes it, or hands it to a call."""
    for node in iter_subtree(statement, into_scopes=False):
        if not isinstance(node, cst.Name) or node.value != name:
            continue
        parent = ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in ("get", "keys", "items", "values", "copy"):
            continue
        if isinstance(parent, cst.Subscript) and parent.value is node and not isinstance(ctx.parent(parent), (cst.AssignTarget, cst.Del)):
            continue
        if isinstance(parent, cst.ComparisonTarget):
            continue
        return True
    return False
