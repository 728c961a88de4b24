"""Whether a value bound to a local name at one point can still be in the name at a later read.

``rebound_between(ctx, site, read, name)`` answers True when every path from ``site`` (the
statement or expression that binds ``name``) to ``read`` (a read of ``name`` in the same
function) passes a statement that binds ``name`` again unconditionally: a plain assignment
(also as one of a tuple's targets) that is a statement of a block the read is nested in,
before the read, with ``site`` not between the two::

    data = x.cuda()          # site
    data = f(data).cpu()     # rebinds: the next read sees this value
    self.items.append(data)  # read: rebound_between(...) is True

It is False where it cannot tell: the rebinding is under an ``if``, a loop, a ``with`` or a
``try`` the read is not in; ``site`` and the read are in one compound statement whose parts
may run in either order (a loop that binds after it reads); the read is in a nested
function, lambda or class. A ``False`` keeps the earlier value's reads, so callers that
treat a read as a use only ever see fewer uses than the flow-insensitive view.

API: ``rebound_between(ctx, site, read, name) -> bool``; ``rebinds(statement, name)``: a simple
statement line that assigns ``name`` unconditionally (``lifetimes`` asks it too).
"""

from __future__ import annotations

import libcst as cst

from dslint.semantics.scopes import names_in_target

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def rebound_between(ctx, site: cst.CSTNode, read: cst.CSTNode, name: str) -> bool:
    """Does every path from ``site`` to ``read`` rebind ``name`` first?"""
    around_site = {id(site)} | {id(a) for a in ctx.ancestors(site)}
    child = read
    for parent in ctx.ancestors(read):
        if isinstance(parent, _SCOPES):
            return False
        if isinstance(parent, (cst.IndentedBlock, cst.Module)) and isinstance(child, cst.BaseStatement):
            if isinstance(child, cst.BaseCompoundStatement) and id(child) in around_site:
                return False  # one loop (or branch) holds both: the site may run before the read
            body = list(parent.body)
            index = next((i for i, stmt in enumerate(body) if stmt is child), None)
            for before in reversed(body[:index] if index is not None else []):
                if id(before) in around_site:
                    return False  # the site is between: its value reaches the read
                if rebinds(before, name):
                    return True
        child = parent
    return False


def rebinds(statement: cst.BaseStatement, name: str) -> bool:
    """A simple statement line that assigns ``name`` unconditionally."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            targets = [small.target]
        else:
            continue
        if any(name in names_in_target(target) for target in targets):
            return True
    return False
