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
    statement, child = None, node  # the node before ``child`` on the way up: a loop body's statement
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(ancestor, cst.ExceptHandler):
            return True
        if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body and statement is not None:
            for earlier in ancestor.body.body:
                if earlier is statement:
                    break
                if _returns_on_success(earlier):
                    return True
        statement, child = child, ancestor
    return False


def _returns_on_success(statement) -> bool:
    """``if <test>: ... return <value>`` with no ``else``: the loop ends here when the attempt worked."""
    if not isinstance(statement, cst.If) or statement.orelse is not None:
        return False
    return any(isinstance(n, cst.Return) and n.value is not None for n in iter_subtree(statement.body, into_scopes=False))
