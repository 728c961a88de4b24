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

``cannot_reach(ctx, site, read)`` answers True when ``site`` (a binding, or the value it binds)
never runs before ``read`` in one call of their function: they sit in the two arms of one ``if``
with no loop around it in the function, or ``site`` sits in an arm that ends in ``return`` (or
in ``raise`` with no ``try`` around it) and ``read`` is outside that arm::

    if workers == 0:
        it.workers = 0       # site: this arm returns
        return it
    it.workers = workers
    DataLoader(it, num_workers=it.workers)   # read: only the second store reaches it

API: ``rebound_between(ctx, site, read, name) -> bool``; ``cannot_reach(ctx, site, read) -> bool``;
``rebinds(statement, name)``: a simple statement line that assigns ``name`` unconditionally
(``lifetimes`` asks it too).
"""

from __future__ import annotations

import libcst as cst

from dslint.semantics.scopes import names_in_target
from dslint.semantics.walk import last_statement

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


def cannot_reach(ctx, site: cst.CSTNode, read: cst.CSTNode) -> bool:
    """Can ``site`` never run before ``read`` (see the module docstring)?"""
    around_read = {id(a) for a in ctx.ancestors(read)}
    child = site
    for parent in ctx.ancestors(site):
        if isinstance(parent, _SCOPES):
            return False
        if id(parent) in around_read:
            return _exclusive(ctx, parent, child, around_read)
        if isinstance(parent, (cst.If, cst.Else)) and child is parent.body and _ends_in_exit(ctx, child):
            return True
        child = parent
    return False


def _exclusive(ctx, common: cst.CSTNode, site_side: cst.CSTNode, around_read) -> bool:
    """``site`` and ``read`` meet in ``common``: an ``if`` whose two arms hold them, no loop around."""
    if not isinstance(common, cst.If) or site_side is common.test:
        return False
    read_side = common.orelse if site_side is common.body else common.body
    if read_side is None or id(read_side) not in around_read:
        return False
    for outer in ctx.ancestors(common):
        if isinstance(outer, _SCOPES):
            return True
        if isinstance(outer, (cst.For, cst.While)):
            return False
    return True


def _ends_in_exit(ctx, arm: cst.BaseSuite) -> bool:
    """The arm's last statement is ``return`` or ``raise``, with no ``try`` around the arm in the
    function that could run more code after it (a ``finally``; for ``raise``, any handler)."""
    last = last_statement(arm)
    if not isinstance(last, (cst.Return, cst.Raise)):
        return False
    for outer in ctx.ancestors(arm):
        if isinstance(outer, _SCOPES):
            return True
        if isinstance(outer, cst.Try) and (isinstance(last, cst.Raise) or outer.finalbody is not None):
            return False
    return True


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
