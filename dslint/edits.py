"""Building blocks for fixes, in terms of CST nodes (positions are resolved later).

Each builder returns ``dslint.rules.base.NodeEdit``s that touch as little source as
possible, so code and comments outside the fixed range stay byte-identical.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Set

import libcst as cst

from dslint.report import NodeEdit


def remove_args(call: cst.Call, remove: Iterable[cst.Arg]) -> List[NodeEdit]:
    """Delete arguments from a call, with their commas, keeping the others as written."""
    args = list(call.args)
    doomed = {id(a) for a in remove}
    edits: List[NodeEdit] = []
    i = 0
    while i < len(args):
        if id(args[i]) not in doomed:
            i += 1
            continue
        j = i
        while j + 1 < len(args) and id(args[j + 1]) in doomed:
            j += 1
        last = args[j]
        last_end = last.comma if isinstance(last.comma, cst.Comma) else last
        if j + 1 < len(args):
            # "a, REMOVED, b" -> "a, b": from this run's start to the next kept argument
            edits.append(NodeEdit(start=args[i], end=args[j + 1], end_at_start=True))
        elif i > 0:
            # "a, REMOVED)" -> "a)": from the end of the previous kept argument
            edits.append(NodeEdit(start=args[i - 1], end=last_end, start_at_end=True))
        else:
            edits.append(NodeEdit(start=args[i], end=last_end))
        i = j + 1
    return edits


def replace(node: cst.CSTNode, content: str) -> NodeEdit:
    return NodeEdit(start=node, end=node, content=content)


def used_names(root: cst.CSTNode) -> Set[str]:
    from dslint.semantics.walk import iter_subtree

    return {n.value for n in iter_subtree(root) if isinstance(n, cst.Name)}


def fresh_name(taken: Set[str], preferred: Sequence[str]) -> str:
    for name in preferred:
        if name not in taken:
            return name
    base = preferred[0]
    k = 1
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"


_VALUE_HOLDERS = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return, cst.Expr)


def with_statement_fix(ctx, call: cst.Call, preferred_names: Sequence[str]) -> Optional[List[NodeEdit]]:
    """Rewrite the statement holding an unnamed opener call into a ``with`` block.

    ``x = Image.open(p).convert("RGB")`` becomes::

        with Image.open(p) as im:
            x = im.convert("RGB")

    Only when moving the opener call in front of its statement cannot change what
    runs or in which order: the call sits directly in a one-statement line of a
    block, reached only through assignment/return values, method-chain heads and
    call arguments whose preceding arguments have no calls (no conditionals,
    boolean operators, comprehensions, lambdas or awaits on the way).
    """
    node: cst.CSTNode = call
    statement = None
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, cst.SimpleStatementLine):
            statement = ancestor
            break
        if isinstance(ancestor, _VALUE_HOLDERS) and ancestor.value is node:
            node = ancestor
            continue
        if isinstance(ancestor, cst.Attribute) and ancestor.value is node:
            node = ancestor
            continue
        if isinstance(ancestor, cst.Call) and ancestor.func is node:
            node = ancestor
            continue
        if isinstance(ancestor, cst.Arg) and ancestor.value is node:
            outer = ctx.parent(ancestor)
            if not isinstance(outer, cst.Call) or not _plain(outer.func):
                return None
            for earlier in outer.args:
                if earlier is ancestor:
                    break
                if not _plain(earlier.value):
                    return None
            node = ancestor
            continue
        if isinstance(ancestor, cst.Element) and ancestor.value is node:
            display = ctx.parent(ancestor)
            if not isinstance(display, (cst.Tuple, cst.List)):
                return None
            for earlier in display.elements:
                if earlier is ancestor:
                    break
                if not _plain(earlier.value):
                    return None
            node = ancestor
            continue
        if isinstance(ancestor, (cst.Tuple, cst.List)) and any(e is node for e in ancestor.elements):
            node = ancestor
            continue
        if isinstance(ancestor, cst.Call) and any(arg is node for arg in ancestor.args):
            node = ancestor  # the call whose argument we came through (checked above)
            continue
        return None
    if statement is None or len(statement.body) != 1:
        return None
    block = ctx.parent(statement)
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return None
    func = ctx.enclosing_function(statement)
    taken = used_names(func if func is not None else ctx.module)
    name = fresh_name(taken, preferred_names)
    opener = ctx.code(call).strip()
    inner = ctx.module.code_for_node(
        _replace_node(statement.body[0], call, cst.Name(name))
    ).strip()
    indent = _indent_of(ctx, statement)
    unit = ctx.module.default_indent
    content = f"with {opener} as {name}:\n{indent}{unit}{inner}"
    return [NodeEdit(start=statement, end=statement, content=content)]


def _plain(expr: cst.CSTNode) -> bool:
    """Evaluating it runs no user code worth ordering (names, attributes, literals)."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(expr, cst.Attribute):
        return _plain(expr.value)
    return False


def _replace_node(root: cst.CSTNode, target: cst.CSTNode, new: cst.CSTNode) -> cst.CSTNode:
    class _Swap(cst.CSTTransformer):
        def on_leave(self, original, updated):
            return new if original is target else updated

    return root.visit(_Swap())


def _indent_of(ctx, statement: cst.CSTNode) -> str:
    from dslint.positions import node_ranges
    from dslint.source import split_lines

    (row, col), _ = node_ranges(ctx.module, [statement])[id(statement)]
    line = split_lines(ctx.text)[row - 1]  # Python's rows: a form feed or U+2028 is not a line break
    return line[:col]
