"""Does code run only after the sample's own attempt failed?

``on_failure_path(ctx, node)``: ``node`` runs only when loading the requested sample did
not work: inside an ``except`` handler, or in the body of a retry loop after a statement of
that body that returns when the attempt succeeded (``if data is not None: return data``),
so reaching ``node`` means it did not. Detectron2's ``MapDataset`` and the projects that
copy it draw a replacement index this way: a random draw there happens once per failed
sample, not once per sample.
"""

from __future__ import annotations

import libcst as cst

from dslint.semantics.walk import iter_subtree


def on_failure_path(ctx, node) -> bool:
    """See the module docstring."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(ancestor, cst.ExceptHandler):
            return True
        if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
            statement = _statement_in(ctx, node, ancestor.body)
            body = list(ancestor.body.body)
            if statement is not None and any(_returns_on_success(s) for s in body[: body.index(statement)]):
                return True
        child = ancestor
    return False


def _statement_in(ctx, node, block: cst.IndentedBlock):
    """The statement of ``block`` that contains ``node``."""
    ids = {id(s): s for s in block.body}
    for ancestor in (node, *ctx.ancestors(node)):
        if id(ancestor) in ids:
            return ids[id(ancestor)]
        if ancestor is block:
            return None
    return None


def _returns_on_success(statement) -> bool:
    """``if <test>: ... return <value>`` with no ``else``: the loop ends here when the attempt worked."""
    if not isinstance(statement, cst.If) or statement.orelse is not None:
        return False
    return any(isinstance(n, cst.Return) and n.value is not None for n in iter_subtree(statement.body, into_scopes=False))
