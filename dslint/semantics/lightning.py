"""Lightning's classes and hooks: is a class a ``LightningModule``/``LightningDataModule`` (through
any project classes, or inside Lightning's own source), and does code run in a hook Lightning calls
on every rank."""

from __future__ import annotations

from typing import Optional

import libcst as cst

LIGHTNING_CLASSES = frozenset({"LightningDataModule", "LightningModule"})
LIGHTNING_PACKAGES = ("pytorch_lightning.", "lightning.", "lightning_fabric.")

LIGHTNING_ROOTS = sorted(
    f"{package}{module}{name}"
    for package in ("pytorch_lightning.", "lightning.", "lightning.pytorch.")
    for module in ("", "core.", "core.datamodule.", "core.module.", "core.lightning.")
    for name in LIGHTNING_CLASSES
)


def is_lightning_class(ctx, cls: cst.ClassDef) -> bool:
    """A subclass (through any project classes) of Lightning's ``LightningDataModule``/``LightningModule``
    (also inside Lightning's own source, where those are project classes)."""
    qual = ctx.qualname_of_def(cls)
    if ctx.view.is_subclass(qual, LIGHTNING_ROOTS):
        return True
    bases = ctx.view.external_bases(f"{ctx.names.modname}.{qual}") or []
    return any(b.startswith(LIGHTNING_PACKAGES) and b.rsplit(".", 1)[-1] in LIGHTNING_CLASSES for b in bases)


def lightning_hook(ctx, node: cst.CSTNode) -> Optional[str]:
    """``Class.method`` when ``node`` runs in a method of a Lightning module or datamodule that
    Lightning calls on every rank (all but ``prepare_data``, which runs on one process)."""
    func = ctx.enclosing_function(node)
    while func is not None:
        cls = ctx.method_class(func)
        if cls is not None:
            if func.name.value == "prepare_data" or not is_lightning_class(ctx, cls):
                return None
            return f"{cls.name.value}.{func.name.value}"
        func = ctx.enclosing_function(func)
    return None
