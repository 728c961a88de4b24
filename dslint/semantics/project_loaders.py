"""The project index's questions about DataLoaders: which loaders are built over a class or
take a function as their ``collate_fn``/``worker_init_fn``, and which results are iterated
epoch after epoch. A mixin of ``ProjectIndex`` (``project.py``), over the same summaries."""

from __future__ import annotations

from typing import List, Optional, Tuple

from dslint.semantics.collate_reach import collate_table
from dslint.semantics.device_index import attribute_origin, device_table, init_param_origin, kept_attribute, partial_origin
from dslint.semantics.handle_index import handle_table
from dslint.semantics.modules import canonical
from dslint.semantics.sample_calls import parameter_arguments, sample_call_table

Key = Tuple[str, str]  # (path, local qualified name)

#: libraries whose training loops call ``set_epoch`` on the samplers of the loaders handed to them
EPOCH_DRIVERS = frozenset({
    "accelerate", "lightning", "pytorch_lightning", "lightning_fabric", "ignite", "mmcv", "mmengine",
    "composer", "ray", "speechbrain", "colossalai", "torchtnt", "fastai",
})


class LoaderQueries:
    def loaders_over(self, key: Key) -> List[dict]:
        """Facts of every DataLoader in the project built over an instance of class ``key``."""
        if self._loaders is None:
            self._loaders = {}
            for path, summary in self.summaries.items():
                for facts in summary.get("loaders", ()):
                    if not facts["dataset"]:
                        continue
                    located = self.locate(facts["dataset"], path)
                    if located is not None:
                        self._loaders.setdefault(located, []).append(facts)
        return self._loaders.get(key, [])

    def sets_epoch(self) -> bool:
        """Some file of the project names ``set_epoch`` (a summary without the fact counts), or
        imports a library whose trainers call it on the samplers of the loaders they are given."""
        for summary in self.summaries.values():
            if summary.get("set_epoch", True):
                return True
            if any(target.split(".")[0] in EPOCH_DRIVERS for target in summary.get("imports", {}).values()):
                return True
        return False

    def epoch_iterated(self, key: Key) -> bool:
        """The project function ``key`` returns what a loop of another file re-iterates inside an
        outer loop (``loader = build(...)`` ... ``for epoch ...: for batch in loader``), or hands in
        a loop to a project function that trains on it (``for epoch ...: train(model, loader)``).
        For a project class ``key``: a loop of another file re-iterates its instances that way
        (``batches = Batches(...)``, also as an instance of a subclass that inherits its ``__iter__``)."""
        if self._epoch_keys is None:
            self._epoch_keys = set()
            for path, summary in self.summaries.items():
                for qualified, *handed in summary.get("epoch_results", ()):
                    located = self.locate(qualified, path, table="functions")
                    if located is not None and (not handed or self._iterates(handed[0], handed[1], path)):
                        self._epoch_keys.add(located)
                    located = self.locate(qualified, path) if located is None and not handed else None
                    for cls in self.mro(located) if located is not None else ():
                        self._epoch_keys.add(cls)
                        if "__iter__" in self.class_info(cls)["methods"]:
                            break  # the bases' ``__iter__`` does not run
        return key in self._epoch_keys

    def _iterates(self, qualified: str, slot, path: str) -> bool:
        """The project function ``qualified`` trains (``.backward()``) on its parameter at ``slot`` (a
        position or a name), which it iterates: an evaluation pass's order does not matter."""
        key = self.locate(qualified, path, table="functions")
        facts = (self.function_facts(key) if key is not None else None) or {}
        return bool((facts.get("evals") or {}).get("trains")) and any(slot in pair for pair in facts.get("iterates", ()))

    def epoch_iterated_method(self, key: Key, method: str, kind: str) -> bool:
        """Some file calls ``method`` on an object annotated with the class ``key`` or one of its
        project bases and re-iterates ``kind`` of the result epoch after epoch (``epoch_methods``)."""
        if self._epoch_methods is None:
            self._epoch_methods = set()
            for path, summary in self.summaries.items():
                for qualified, name, found in summary.get("epoch_methods", ()):
                    located = self.locate(qualified, path)
                    if located is not None:
                        self._epoch_methods.add((located, name, found))
        return any((base, method, kind) in self._epoch_methods for base in self.mro(key))

    def collate_loaders(self, key: Key) -> List[dict]:
        """Facts of every DataLoader in the project whose ``collate_fn`` is the function ``key``
        (given by name, as a bound method, or installed on a loader: ``bound_collates``)."""
        table = getattr(self, "_collate_table", None)
        if table is None:  # overrides in subclasses and ``self.m()`` callees too (``collate_reach``)
            table = self._collate_table = collate_table(self)
        return table.get(key, [])

    def function_key(self, qualified: str, from_path: str):
        """Where a function or a method (``mod.Class.method``, along the class's bases) is defined."""
        return self._function_key(qualified, from_path)

    def cuda_attribute(self, key: Key, attr: str, kind: str = "device"):
        """How ``self.<attr>`` of an instance of class ``key`` can hold a CUDA device (or an object
        put on one, ``kind`` "placed") that a construction hands its ``__init__`` (``device_flow``)."""
        return attribute_origin(self, self.device_facts(), key, attr, kind)

    def cuda_partial(self, key: Key, param: str):
        """How a ``functools.partial`` binds the parameter ``param`` of function ``key`` to a CUDA device."""
        return partial_origin(self, self.device_facts(), key, param)

    def kept_attribute(self, qualified: str, from_path: str, slot):
        """The attribute in which the project class ``qualified`` keeps the constructor argument at
        ``slot`` (keyword or position; ``device_flow``), or None."""
        located = self.locate(canonical(qualified), from_path)
        return kept_attribute(self, self.device_facts(), located, slot) if located is not None else None

    def cuda_init_param(self, key: Key, param: str):
        """How a construction hands a CUDA device to ``param`` of class ``key``'s ``__init__`` (``device_flow``)."""
        return init_param_origin(self, self.device_facts(), key, param)

    def handle_init_param(self, key: Key, param: str):
        """``[kind, origin]``: a construction in the project hands an opened handle to ``param`` of class
        ``key``'s ``__init__`` (``handle_flow``), or None."""
        table = getattr(self, "_handle_table", None)
        if table is None:
            table = self._handle_table = handle_table(self, self.device_facts()[3])
        return table.get((key, param))

    def per_sample_arguments(self, key: Key, param: str, position):
        """What the per-sample calls of function ``key`` pass its parameter (``sample_calls``)."""
        table = getattr(self, "_sample_calls", None)
        if table is None:
            table = self._sample_calls = sample_call_table(self)
        return parameter_arguments(table, key, param, position)

    def device_facts(self):
        table = getattr(self, "_device_table", None)
        if table is None:
            table = self._device_table = device_table(self)
        return table

    def worker_init_loaders(self, key: Key) -> List[dict]:
        """Facts of every DataLoader in the project whose ``worker_init_fn`` is the function ``key``."""
        table = getattr(self, "_worker_init_table", None)
        if table is None:
            table = self._worker_init_table = self._loaders_by_function("worker_init_fn")
        return table.get(key, [])

    def _loaders_by_function(self, argument: str) -> dict:
        """{function key: [loader facts]} for the loaders whose ``argument`` names a project function."""
        table: dict = {}
        for path, summary in self.summaries.items():
            for facts in summary.get("loaders", ()):
                ref = facts.get(argument)
                located = self._function_key(canonical(ref), path) if ref else None
                if located is not None:
                    table.setdefault(located, []).append(facts)
        return table

    def world_sharded(self, qualified: str, from_path: str) -> bool:
        """The project class ``qualified``, or a base of it, reads the world size in ``__init__``
        (class fact ``world_sharded``, ``distributed.construction_reads_world``)."""
        located = self.locate(qualified, from_path)
        return located is not None and any(self.class_info(k).get("world_sharded") for k in self.mro(located))

    def kwargs_forwarder_names(self) -> List[str]:
        """The names of the project's functions whose ``**kwargs`` reaches a DataLoader (``kwargs_forwarders``)."""
        if getattr(self, "_forwarder_names", None) is None:
            self._forwarder_names = sorted({
                qual.rsplit(".", 1)[-1] for path, summary in self.summaries.items() for qual in summary.get("kwargs_forwards", {})
                if chain_params(self.summaries, self._forward_target, (path, qual)) is not None
            })
        return self._forwarder_names

    def kwargs_loader(self, qualified: str, from_path: str) -> Optional[List[str]]:
        """The parameters taken along the way when the project function ``qualified`` hands its
        ``**kwargs`` on to a DataLoader; None otherwise."""
        located = self.locate(qualified, from_path, table="functions")
        return chain_params(self.summaries, self._forward_target, located) if located is not None else None

    def _forward_target(self, qualified: str, from_path: str):
        return self.locate(canonical(qualified), from_path, table="functions")

    def returned_closure(self, qualified: str, from_path: str):
        """[what, pickle's name] when the project's module-level function ``qualified`` returns
        a function or lambda defined inside it (``returned_closures``)."""
        located = self.locate(qualified, from_path, table="functions")
        if located is None:
            return None
        return self.summaries[located[0]].get("closure_returns", {}).get(located[1])

    def length_probe(self, qualified: str, from_path: str):
        """[position, name, loader] when the project's module-level function ``qualified`` probes
        that parameter for a length (``length_probes``)."""
        located = self.locate(qualified, from_path, table="functions")
        if located is None:
            return None
        return self.summaries[located[0]].get("length_probes", {}).get(located[1])

    def probed_attribute(self, qualified: str, attr: str, from_path: str, _depth: int = 0):
        """[class, loader] when the project class ``qualified`` (or a base of it) probes its
        ``self.<attr>`` for a length (``length_probes``)."""
        located = self.locate(qualified, from_path)
        if located is None or _depth > 8:
            return None
        path, qual = located
        summary = self.summaries[path]
        for name, callee, position, loader in summary.get("attr_probes", {}).get(qual, ()):
            if name != attr:
                continue
            if not callee:
                return [f"{summary['module']}.{qual}", bool(loader)]
            probe = self.length_probe(callee, path)
            if probe and probe[0] == position:
                return [f"{summary['module']}.{qual}", bool(probe[2])]
        for base in summary.get("classes", {}).get(qual, {}).get("bases", ()):
            found = self.probed_attribute(base, attr, path, _depth + 1) if base else None
            if found:
                return found
        return None

    def may_start_workers(self) -> bool:
        """Some DataLoader of the project may start workers: a file names a worker count other than
        as ``num_workers=0`` (``worker_counts.names_workers``), or no file builds a DataLoader (a
        library: its users' loaders are not seen)."""
        summaries = self.summaries.values()
        return not any(s.get("loaders") for s in summaries) or any(s.get("names_workers", True) for s in summaries)

    def start_methods(self) -> List[str]:
        """The start methods the project's files set for new processes (``start_methods``)."""
        return sorted({m for summary in self.summaries.values() for m in summary.get("start_methods", ())})

    def epoch_stored_params(self, qualified: str, from_path: str) -> List[list]:
        """[position, name] of the ``__init__`` parameters that the project class ``qualified`` (or
        the first class of its MRO that defines ``__init__``) keeps on ``self`` and re-iterates
        epoch after epoch (``epoch_attrs``); position -1: keyword-only."""
        located = self.locate(qualified, from_path)
        for key in self.mro(located) if located is not None else ():
            summary = self.summaries.get(key[0], {})
            if "__init__" in summary.get("classes", {}).get(key[1], {}).get("methods", {}):
                return summary.get("epoch_stored", {}).get(key[1], [])
        return []

    def epoch_iterated_params(self, qualified: str, from_path: str) -> List[list]:
        """[position, name] of the parameters the project's module-level function ``qualified``
        iterates inside an outer loop of its own body (``epoch_attrs``)."""
        located = self.locate(qualified, from_path, table="functions")
        if located is None:
            return []
        return self.summaries.get(located[0], {}).get("epoch_params", {}).get(located[1], [])

    def epoch_iterated_method_params(self, qualified: str, method: str, from_path: str) -> List[list]:
        """``epoch_iterated_params`` of the method ``method`` that an instance of the project class
        ``qualified`` runs (the first class of its MRO that defines it)."""
        located = self.locate(qualified, from_path)
        for key in self.mro(located) if located is not None else ():
            summary = self.summaries.get(key[0], {})
            if method in summary.get("classes", {}).get(key[1], {}).get("methods", {}):
                return summary.get("epoch_params", {}).get(f"{key[1]}.{method}", [])
        return []


FORWARDED_LOADER = "torch.utils.data.DataLoader"
MAX_FORWARDS = 3  #: forwarding functions between a call and the DataLoader


def chain_params(summaries: dict, locate, key, hops: int = 0, seen: Optional[set] = None) -> Optional[List[str]]:
    """The named parameters along the ``kwargs_forwards`` chain (``kwargs_forwarders.py``) from
    function ``key`` to a DataLoader, or None when its ``**kwargs`` reaches none.
    ``locate(qualified, from_path)`` finds a callee's key."""
    seen = set() if seen is None else seen
    if key in seen or hops > MAX_FORWARDS:
        return None
    seen.add(key)
    entry = summaries.get(key[0], {}).get("kwargs_forwards", {}).get(key[1])
    if entry is None:
        return None
    params, callees = entry
    for callee in callees:
        if callee == FORWARDED_LOADER:
            return list(params)
        located = locate(callee, key[0])
        further = chain_params(summaries, locate, located, hops + 1, seen) if located is not None else None
        if further is not None:
            return sorted(set(params) | set(further))
    return None
