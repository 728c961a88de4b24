"""Across files: the persistent, unsampled loaders (``epoch_hooks`` phase 1 facts) over a dataset
class whose own ``set_epoch`` a library calls every epoch. No libcst here: a cached run replays
these answers without parsing."""

from __future__ import annotations

from typing import List

from dslint.semantics.modules import canonical

#: what prepares loaders that call ``dataset.set_epoch(epoch)`` every epoch (accelerate)
DATASET_EPOCH_CALLERS = frozenset({
    "accelerate.Accelerator", "accelerate.accelerator.Accelerator", "accelerate.prepare_data_loader",
    "accelerate.data_loader.prepare_data_loader",
})


def hook_loaders(index, key) -> List[str]:
    """Modules with a loader (``hook_facts``) over an instance of the class ``key`` or a subclass,
    when the project imports what prepares loaders that call the dataset's ``set_epoch`` every epoch
    and some file calls its ``prepare``."""
    summaries = index.summaries.values()
    if not any(target in DATASET_EPOCH_CALLERS for summary in summaries for target in summary.get("imports", {}).values()):
        return []
    if not any(summary.get("epoch_hooks", {}).get("prepares") for summary in summaries):
        return []  # nothing is prepared: no loader of the project is accelerate's
    found = []
    for path, summary in index.summaries.items():
        for facts in summary.get("epoch_hooks", {}).get("loaders", ()):
            made = canonical(facts["dataset"])
            located = index.locate(made, path)
            if located is None:
                function = index.locate(made, path, table="functions")
                returned = index.summaries[function[0]].get("epoch_hooks", {}).get("returns", {}).get(
                    function[1]) if function is not None else None
                located = index.locate(canonical(returned), function[0]) if returned else None
            if located is not None and key in index.mro(located):
                found.append(summary["module"])
    return sorted(set(found))
