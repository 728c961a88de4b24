"""Whether evaluation results are stored under each sample's own key, so that the duplicates a
padding ``DistributedSampler`` adds land on the same entry (rather than being counted twice).

- ``sample_index_name(name)``: a name for sample indices (``idx``, ``original_indices``), not a
  counter (``batch_idx``, ``step``);
- ``sample_id_key(expr)``: a key that names each sample (``target["image_id"]``, ``idx``);
- ``keyed_store(node)``: an assignment ``results[key] = ...`` under such a key (a duplicate
  rewrites its own slot; ``+=`` would count it twice, so it does not count);
- ``INDEX_WRITES``: tensor methods that write by index (``index_copy_``, ``scatter_``);
- ``unique_ids(node)``: ``np.unique(ids, return_index=True)`` over sample ids: the first entry
  of each sample picked out, padded repeats dropped.
"""

from __future__ import annotations

import libcst as cst

from dslint.semantics.walk import iter_subtree

INDEX_WRITES = frozenset({"index_copy_", "index_copy", "index_put_", "index_put", "index_add_", "scatter_", "scatter"})
INDEX_WORDS = ("index", "indices", "idx", "ids")


def sample_index_name(name: str) -> bool:
    """A name for sample indices (``index``, ``idx``, ``original_indices``), not a counter (``batch_idx``)."""
    lower = name.lower()
    if lower.startswith(("batch", "step", "epoch", "iter", "it_")):
        return False
    return lower in INDEX_WORDS or lower.endswith(("_index", "_indices", "_idx", "_ids", "index", "indices"))


def sample_id_key(expr: cst.CSTNode) -> bool:
    """A dictionary key that names each sample (``target["image_id"]``, ``idx``, ``sample.uid``):
    results stored under it land a padded duplicate on the same entry."""
    for node in iter_subtree(expr, into_scopes=False):
        text = (node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute)
                else node.raw_value if isinstance(node, cst.SimpleString) else None)
        if text and (text.lower() in ("id", "uid") or text.lower().endswith("_id") or sample_index_name(text)):
            return True
    return False


def keyed_store(node: cst.CSTNode) -> bool:
    """``results[key] = ...`` (plain assignment) whose one subscript names each sample."""
    return isinstance(node, cst.Assign) and any(
        isinstance(t.target, cst.Subscript) and len(t.target.slice) == 1
        and isinstance(t.target.slice[0].slice, cst.Index) and sample_id_key(t.target.slice[0].slice.value)
        for t in node.targets)


def unique_ids(node: cst.CSTNode) -> bool:
    """A ``unique`` call (numpy's, torch's) asked for the first index of each value, over sample
    ids or indices (``_, keep = np.unique(img_ids, return_index=True)``)."""
    if not isinstance(node, cst.Call) or not node.args or node.args[0].keyword is not None:
        return False
    func = node.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "unique") and not (isinstance(func, cst.Name) and func.value == "unique"):
        return False
    asks = any(a.keyword is not None and a.keyword.value in ("return_index", "return_inverse")
               and isinstance(a.value, cst.Name) and a.value.value == "True" for a in node.args)
    return asks and sample_id_key(node.args[0].value)
