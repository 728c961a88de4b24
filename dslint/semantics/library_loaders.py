"""Third-party DataLoaders that hand torch's arguments through, by qualified name.

PyG's ``DataLoader`` (and its list, dense and sampling loaders), MONAI's ``DataLoader`` and
webdataset's ``WebLoader`` derive from torch's ``DataLoader`` and pass every keyword argument
they do not name themselves on to it unchanged. Torch's checks on those arguments (worker
options, sampler and shuffle) and what the loop-level rules ask of a loader (which loop
iterates it, its sampler, its epoch loop) apply to them as to ``DataLoader(...)``.

``kwargs_loader_signatures`` serves the phase-1 summary (a ``TreeIndex`` and ``ModuleNames``),
``kwargs_loader_bounds`` a file's context: each construction bound to the class's own
positional parameters, then torch's keywords and defaults. The loops' index
(``loops.LoopIndex``) takes ``sampled_loader_bounds``: webdataset's ``WebLoader`` iterates a
pipeline whose stages decide the order (``shuffle``, samplers and epochs mean nothing there).
"""

from __future__ import annotations

from typing import List

import libcst as cst

from dslint.semantics.calls import DATALOADER, BoundCall, loader_signature

# Third-party DataLoader subclasses that hand every keyword argument they do not name
# themselves to torch's DataLoader unchanged, so torch's checks on those arguments (worker
# options, sampler and shuffle) apply to them: qualified name -> their positional parameters.
_PYG_LOADER = ("dataset", "batch_size", "shuffle", "follow_batch", "exclude_keys")
KWARGS_LOADERS = {
    "torch_geometric.loader.DataLoader": _PYG_LOADER,
    "torch_geometric.loader.dataloader.DataLoader": _PYG_LOADER,
    "torch_geometric.data.DataLoader": _PYG_LOADER,
    "torch_geometric.loader.DataListLoader": ("dataset", "batch_size", "shuffle"),
    "torch_geometric.loader.DenseDataLoader": ("dataset", "batch_size", "shuffle"),
    # the sampling loaders: their own arguments are many, torch's come through ``**kwargs``
    "torch_geometric.loader.NeighborLoader": ("data",),
    "torch_geometric.loader.neighbor_loader.NeighborLoader": ("data",),
    "torch_geometric.loader.LinkNeighborLoader": ("data",),
    "torch_geometric.loader.link_neighbor_loader.LinkNeighborLoader": ("data",),
    # MONAI's loader: its own default collate and worker seeding, torch's arguments otherwise
    "monai.data.DataLoader": ("dataset", "num_workers"),
    "monai.data.dataloader.DataLoader": ("dataset", "num_workers"),
    # webdataset's ``WebLoader(*args, **kw)`` wraps ``DataLoader(*args, **kw)``: torch's own signature
    "webdataset.WebLoader": DATALOADER.positional,
    "webdataset.compat.WebLoader": DATALOADER.positional,
}
#: of those, the loaders over a stream whose own stages decide the order (a webdataset pipeline):
#: their ``shuffle``, sampler and epoch facts say nothing, so the loops' index leaves them out
PIPELINE_LOADERS = frozenset({"webdataset.WebLoader", "webdataset.compat.WebLoader"})
#: of those, the loaders that install a ``collate_fn`` of their own (one given is dropped)
OWN_COLLATE_LOADERS = frozenset(name for name in KWARGS_LOADERS if name.startswith("torch_geometric."))


def kwargs_loader_signatures(tree, names) -> list:
    """Phase 1: ``(call, Signature)`` for each construction of a ``KWARGS_LOADERS`` class in the file,
    bound to its own positional parameters and torch's keywords (its loader facts in the summary)."""
    tails = names.call_tails({name.rsplit(".", 1)[-1] for name in KWARGS_LOADERS})
    out = []
    for call in tree.nodes(cst.Call):
        func = call.func
        tail = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else None)
        positional = KWARGS_LOADERS.get(names.qualname(func) or "") if tail in tails else None
        if positional is not None:
            out.append((call, loader_signature(positional)))
    return out


def kwargs_loader_bounds(ctx) -> List[BoundCall]:
    """Each construction of a ``KWARGS_LOADERS`` class, bound to its signature (see the module doc)."""
    return ctx.memo(("library_loaders.bounds",), lambda: [BoundCall(call, loader_signature(KWARGS_LOADERS[ctx.call_name(call)]))
                                                          for call in ctx.calls_to(*KWARGS_LOADERS)])


def sampled_loader_bounds(ctx) -> List[BoundCall]:
    """``kwargs_loader_bounds`` less the ``PIPELINE_LOADERS``: the library loaders whose order their
    ``shuffle`` or sampler decides, as a ``DataLoader``'s does (PyG's, MONAI's)."""
    return [bound for bound in kwargs_loader_bounds(ctx) if ctx.call_name(bound.call) not in PIPELINE_LOADERS]
