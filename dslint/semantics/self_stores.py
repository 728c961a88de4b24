"""What the methods of a class assign to ``self.<a>`` (``attribute_stores``: the statements, for
``cuda`` and ``loader_partials``) and to ``self.<a>.<b>`` (``self.cfg.num_workers = 0``, for
``values.py``: a configuration object kept on ``self`` and filled in by the class itself)."""

from __future__ import annotations

from typing import Dict, List

import libcst as cst

from dslint.semantics.regions import self_attr, self_name
from dslint.semantics.walk import iter_subtree


def nested_self_stores(ctx, expr: cst.Attribute) -> List[cst.BaseExpression]:
    """The values the methods of the enclosing class assign to ``self.<a>.<b>`` when ``expr`` reads
    it (``self.cfg.num_workers = 0`` after ``if self.cfg.num_workers is None:``)."""
    holder = expr.value
    if not (isinstance(holder, cst.Attribute) and isinstance(holder.value, cst.Name)):
        return []
    func = ctx.enclosing_function(expr)
    cls = ctx.method_class(func) if func is not None else None
    if cls is None or holder.value.value != self_name(func):
        return []

    def compute():
        stores: Dict[tuple, List[cst.BaseExpression]] = {}
        for method in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
            selfp = self_name(method) if isinstance(method, cst.FunctionDef) else None
            for assign in iter_subtree(method.body, into_scopes=False) if selfp else ():
                if not isinstance(assign, cst.Assign):
                    continue
                for target in assign.targets:
                    node = target.target
                    if isinstance(node, cst.Attribute) and self_attr(node.value, selfp):
                        stores.setdefault((node.value.attr.value, node.attr.value), []).append(assign.value)
        return stores

    return ctx.memo(("self_stores.stores", id(cls)), compute).get((holder.attr.value, expr.attr.value), [])


def attribute_stores(ctx, cls: cst.ClassDef, attr: str) -> List[cst.CSTNode]:
    """The statements of the methods of ``cls`` (not of nested scopes) that bind ``self.<attr>``:
    assignments (any of their targets), annotated and augmented assignments."""
    return attribute_store_table(ctx, cls).get(attr, [])


def attribute_store_table(ctx, cls: cst.ClassDef) -> Dict[str, List[cst.CSTNode]]:
    """``attribute_stores`` for every attribute of ``self`` the methods of ``cls`` bind (computed once per class)."""

    def compute():
        stores: Dict[str, List[cst.CSTNode]] = {}
        for method in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
            selfp = self_name(method) if isinstance(method, cst.FunctionDef) else None
            for node in iter_subtree(method.body, into_scopes=False) if selfp else ():
                if isinstance(node, cst.Assign):
                    bound = {self_attr(t.target, selfp) for t in node.targets}
                elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
                    bound = {self_attr(node.target, selfp)}
                else:
                    continue
                for name in bound - {None}:
                    stores.setdefault(name, []).append(node)
        return stores

    return ctx.memo(("self_stores.attributes", id(cls)), compute)


__all__ = ["attribute_store_table", "attribute_stores", "nested_self_stores"]
