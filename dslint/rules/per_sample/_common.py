"""What the per-sample cost rules (DSL201-DSL203) share: finding candidate calls,
showing a call and where it runs per sample, and one finding per defect."""

from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

import libcst as cst

from dslint.rules.base import Symptom
from dslint.semantics.call_facts import last_name
from dslint.semantics.regions import LOOP

#: what the runtime companion measures for a per-sample cost
TIME_RATIO = Symptom("time_ratio", "per-sample time, bad / good", exclusive=True)


def candidates(ctx, tails) -> Iterator[cst.Call]:
    """Calls whose last name component may be one of ``tails`` (import aliases included)."""
    accepted = ctx.names.call_tails(frozenset(tails))
    for call in ctx.nodes(cst.Call):
        if last_name(call.func) in accepted:
            yield call


def call_text(ctx, call: cst.Call, qualified: Optional[str] = None) -> str:
    """The call as a message shows it (``os.listdir()``): its callee's source, or a
    short stand-in for a long one."""
    text = ctx.code(call.func).strip()
    if len(text) > 40 or "\n" in text:
        text = f".{last_name(call.func)}" if isinstance(call.func, cst.Attribute) else (qualified or "call")
    return f"{text}()"


def where(ctx, node: cst.CSTNode) -> str:
    """Why ``node`` runs once per sample, for the message."""
    func = ctx.enclosing_function(node)
    if func is None:
        return "per-sample code"
    name = func.name.value
    label = ctx.per_sample_label(func)
    mode = ctx.per_sample_mode(func)
    if mode == LOOP:
        return f"the loop that yields in `{name}` runs once per sample of `{label}`"
    return f"`{name}` runs once per sample of `{label}`"


def outermost(ctx, found: List[Tuple[cst.CSTNode, str]]) -> Iterator[Tuple[cst.CSTNode, str]]:
    """One defect, one finding: drop findings nested inside another finding of the same rule."""
    ids = {id(node) for node, _ in found}
    for node, message in found:
        nested = False
        for ancestor in ctx.ancestors(node):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                break
            if id(ancestor) in ids:
                nested = True
                break
        if not nested:
            yield node, message
