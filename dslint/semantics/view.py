"""The project index as one file sees it: every question and answer is recorded.

Rules reach cross-file facts only through a ``View`` (``ctx.view``); the cache keeps
each file's log and ``replay`` asks the same questions of a new index to know whether
the file's cached findings still hold.
"""

from __future__ import annotations

from typing import List, Optional

from dslint.semantics.attr_reads import read_after_construction
from dslint.semantics.caller_index import project_call_arguments
from dslint.semantics.construction_trace import construction_runs
from dslint.semantics.epoch_hook_index import hook_loaders
from dslint.semantics.function_value_index import handed_to_worker_calls
from dslint.semantics.held_state import kept_callable_attributes, unpicklable_attribute
from dslint.semantics.indexing import indexes_only, moves_to_cuda
from dslint.semantics.inheritance import iterable_heirs, one_shot_arguments
from dslint.semantics.kept_elsewhere import foreign_loader, kept_owner, unloaded
from dslint.semantics.modules import canonical
from dslint.semantics.numpy_rng import loader_draws
from dslint.semantics.project import ProjectIndex
from dslint.semantics.random_draws import method_draws
from dslint.semantics.rng_heirs import state_heirs
from dslint.semantics.rng_holder_index import holder_returned
from dslint.semantics.torch_version import old_torch


class View:
    """The index as seen from one file; every answer is recorded for the cache."""

    def __init__(self, index: ProjectIndex, path: str) -> None:
        self._index = index
        self.path = path
        self.log: List[list] = []

    def _record(self, name: str, args: list, answer):
        self.log.append([name, args, answer])
        return answer

    def class_kind(self, qual: str) -> Optional[str]:
        return self._record("class_kind", [qual], self._index.class_kind((self.path, qual)))

    def kind_of(self, qualified: Optional[str]) -> Optional[str]:
        return self._record("kind_of", [qualified], self._index.kind_of(qualified, self.path))

    def per_sample(self, qual: str):
        answer = self._index.per_sample_mode(self.path, qual)
        return self._record("per_sample", [qual], list(answer) if answer else None)

    def off_guards(self, qual: str) -> list:
        """``[kind, name]`` of the options and parameters off at every per-sample arrival of this
        file's function ``qual`` (``option_reach``)."""
        return self._record("off_guards", [qual], sorted(map(list, self._index.off_guards.get((self.path, qual), ()))))

    def built_by(self, qual: str) -> Optional[str]:
        """The dataset class whose ``__init__`` reaches this file's function ``qual`` (``alternatives``)."""
        return self._record("built_by", [qual], self._index.built.get((self.path, qual)))

    def is_subclass(self, qual: str, roots: List[str]) -> bool:
        key = (self.path, qual)
        answer = self._index.is_subclass_of(key, frozenset(roots)) if qual in self._index.summaries.get(self.path, {}).get("classes", {}) else False
        return self._record("is_subclass", [qual, roots], answer)

    def function_facts(self, qualified: str) -> Optional[dict]:
        """Summary facts of a project function (by qualified name), if it is in the project."""
        return self._record("function_facts", [qualified], self._index.function_by_name(qualified, self.path))

    def factory_classes(self, qualified: str) -> list:
        """The classes whose instances the project function ``qualified`` returns (``dataset_uses``)."""
        key = self._index.function_key(qualified, self.path)
        answer = self._index.summaries[key[0]].get("factory_returns", {}).get(key[1], []) if key else []
        return self._record("factory_classes", [qualified], answer)

    def project_sets_epoch(self) -> bool:
        """Some file of the project names ``set_epoch`` (every file that does is summarised)."""
        return self._record("project_sets_epoch", [], self._index.sets_epoch())

    def epoch_iterated(self, qual: str) -> bool:
        """This file's function ``qual`` returns what a loop of another file re-iterates every epoch
        (for a class ``qual``: another file re-iterates its instances, or a subclass's)."""
        return self._record("epoch_iterated", [qual], self._index.epoch_iterated((self.path, qual)))

    def epoch_iterated_method(self, qual: str, method: str, kind: str) -> bool:
        """Another file re-iterates ``kind`` ("result" or "element") of what ``method`` of this
        file's class ``qual`` (or of a project base it overrides) returns, epoch after epoch."""
        answer = self._index.epoch_iterated_method((self.path, qual), method, kind)
        return self._record("epoch_iterated_method", [qual, method, kind], answer)

    def called_elsewhere(self, qual: str, table: str = "functions") -> bool:
        """A function of another file of the project calls this file's function ``qual`` (or
        constructs its class, ``table="classes"``)."""
        answer = self._index.called_from_other_files((self.path, qual), table)
        return self._record("called_elsewhere", [qual, table], answer)

    def caller_arguments(self, qual: str) -> list:
        """``[path, caller, positional, keywords]`` of each summarised call of this file's module-level
        function ``qual`` in the project (``builder_args``: literals, ``"?"`` for other expressions)."""
        return self._record("caller_arguments", [qual], project_call_arguments(self._index, (self.path, qual)))

    def workers_passed(self, qual: str) -> bool:
        """Some file of the project calls this file's function ``qual`` with a worker count."""
        key = (self.path, qual)
        return self._record("workers_passed", [qual], self._index.workers_passed(key) or handed_to_worker_calls(self._index, key))

    def in_project(self, qualified: str) -> bool:
        """The qualified name is defined in a module of the project (a checked file)."""
        return self._record("in_project", [qualified], self._index.in_project(qualified))

    def defines_method(self, name: str) -> bool:
        """Some class of the project defines a method called ``name``."""
        return self._record("defines_method", [name], self._index.defines_method(name))

    def has_method(self, qual: str, name: str) -> bool:
        return self._record("has_method", [qual, name], self._index.has_method((self.path, qual), name))

    def loaders_over(self, qual: str) -> List[dict]:
        return self._record("loaders_over", [qual], self._index.loaders_over((self.path, qual)))

    def reachable_facts(self, qual: str, method: str) -> List[dict]:
        """Facts of the functions reached from ``method`` of this file's class ``qual``."""
        keys = self._index.reachable((self.path, qual), method)
        return self._record("reachable_facts", [qual, method], [self._index.function_facts(k) for k in keys])

    def class_method(self, qualified: str, name: str) -> Optional[dict]:
        """Kind of a class named by qualified name (any file) and whether it has ``name``."""
        return self._record("class_method", [qualified, name], self._index.class_method(qualified, self.path, name))

    def external_bases(self, qualified: str) -> Optional[List[str]]:
        """Bases outside the project of the project class ``qualified`` (None: not a project class)."""
        return self._record("external_bases", [qualified], self._index.external_bases(qualified, self.path))

    def unpicklable_attribute(self, qualified: str, local: bool = False) -> Optional[list]:
        """``[attr, constructor]`` of a lock, thread or open handle that the ``__init__`` chain of a
        project class (``qualified``, or this file's class ``qual`` when ``local``) keeps on ``self``."""
        index = self._index
        key = (self.path, qualified) if local else index.locate(canonical(qualified), self.path)
        found = unpicklable_attribute(index, key) if key is not None and key[1] in index.summaries[key[0]]["classes"] else None
        return self._record("unpicklable_attribute", [qualified, local], found)

    def kept_callable_attributes(self, qualified: str, local: bool = False) -> List[list]:
        """``[attr, local object, parameter, position]``: the lambdas or nested functions that the
        ``__init__`` chain of a project class keeps on ``self`` (``held_state.kept_callable_attributes``)."""
        index = self._index
        key = (self.path, qualified) if local else index.locate(canonical(qualified), self.path)
        found = kept_callable_attributes(index, key) if key is not None and key[1] in index.summaries[key[0]]["classes"] else []
        return self._record("kept_callable_attributes", [qualified, local], found)

    def foreign_loader(self, qual: str, attr: str) -> Optional[str]:
        """The file of another file's DataLoader with workers over this file's class ``qual`` (or a subclass)
        whose own ``__init__`` keeps a lambda on ``self.<attr>``: DSL506 reports it here (``kept_elsewhere``)."""
        return self._record("foreign_loader", [qual, attr], foreign_loader(self._index, (self.path, qual), attr))

    def unloaded(self, qual: str, param: Optional[str] = None, position: int = -1) -> bool:
        """No DataLoader of the project is known to be built over this file's class ``qual`` or a
        subclass (leaving ``param`` out) (``kept_elsewhere.unloaded``)."""
        return self._record("unloaded", [qual, param, position], unloaded(self._index, (self.path, qual), param, position))

    def kept_elsewhere(self, qualified: str, attr: str, local: bool = False) -> bool:
        """The lambda an instance of the project class ``qualified`` keeps on ``self.<attr>`` is kept by the
        ``__init__`` of a class of another file, which reports it there (``kept_elsewhere.foreign_loader``)."""
        index = self._index
        key = (self.path, qualified) if local else index.locate(canonical(qualified), self.path)
        owner = kept_owner(index, key, attr) if key is not None else None
        found = owner is not None and owner[0] != self.path and foreign_loader(index, owner, attr) is not None
        return self._record("kept_elsewhere", [qualified, attr, local], found)

    def collate_loaders(self, qual: str) -> List[dict]:
        """Facts of the DataLoaders (in any file) that use this file's function ``qual`` as ``collate_fn``."""
        return self._record("collate_loaders", [qual], self._index.collate_loaders((self.path, qual)))

    def worker_init_loaders(self, qual: str) -> List[dict]:
        """Facts of the DataLoaders (in any file) that use this file's function ``qual`` as ``worker_init_fn``."""
        return self._record("worker_init_loaders", [qual], self._index.worker_init_loaders((self.path, qual)))

    def method_facts(self, qualified: str, name: str) -> Optional[dict]:
        """Facts of method ``name`` of the project class ``qualified`` (any file, along its project bases)."""
        index, located = self._index, self._index.locate(canonical(qualified), self.path)
        method = index.find_method(index.mro(located), name) if located is not None else None
        return self._record("method_facts", [qualified, name], index.function_facts(method) if method else None)

    def overridden_facts(self, qual: str, name: str) -> Optional[list]:
        """[qualified name, facts] of the method ``name`` that this file's class ``qual`` overrides: the
        next definition along its project bases (any file), or None."""
        index, key = self._index, (self.path, qual)
        known = qual in index.summaries.get(self.path, {}).get("classes", {})
        method = index.find_method(index.mro(key), name, after=key) if known else None
        facts = index.function_facts(method) if method else None
        answer = [f"{index.summaries[method[0]]['module']}.{method[1]}", facts] if facts is not None else None
        return self._record("overridden_facts", [qual, name], answer)

    def method_draws(self, qualified: str, name: str) -> bool:
        """Method ``name`` of the project class ``qualified`` (any file) draws a random value,
        itself or through a project function it reaches (``random_draws.method_draws``)."""
        return self._record("method_draws", [qualified, name], method_draws(self._index, qualified, name, self.path))

    def indexes_only(self, qualified: str, name: str, unset: Optional[List[str]] = None) -> bool:
        """Method ``name`` of the project class ``qualified`` only indexes data in memory
        (``indexing.indexes_only``, following the methods and functions it calls), apart from what
        runs under ``if self.X:`` for an ``X`` in ``unset``."""
        index, located = self._index, self._index.locate(canonical(qualified), self.path)
        method = index.find_method(index.mro(located), name) if located is not None else None
        answer = bool(method) and indexes_only(index, located, method, unset=frozenset(unset or ()))
        return self._record("indexes_only", [qualified, name] + ([unset] if unset else []), answer)

    def moves_to_cuda(self, qualified: str, name: str) -> bool:
        """Method ``name`` of the project class ``qualified`` (any file) calls ``.cuda()``, itself or in
        what it reaches (``indexing.moves_to_cuda``)."""
        index, located = self._index, self._index.locate(canonical(qualified), self.path)
        method = index.find_method(index.mro(located), name) if located is not None else None
        return self._record("moves_to_cuda", [qualified, name], bool(method) and moves_to_cuda(index, located, method))

    def inherited_construction(self, qual: str) -> List[list]:
        """For this file's class ``qual`` whose ``__init__`` comes from another file: [name, attributes
        stored later] for each method of this file that construction runs (``construction_trace``)."""
        index, key = self._index, (self.path, qual)
        known = qual in index.summaries.get(self.path, {}).get("classes", {})
        init = index.find_method(index.mro(key), "__init__") if known else None
        answer = construction_runs(index, key, self.path) if init is not None and init[0] != self.path else []
        return self._record("inherited_construction", [qual], answer)

    def iterable_heirs(self, qual: str, name: str) -> List[dict]:
        """The project's IterableDataset classes that inherit method ``name`` of this file's
        (non-dataset) class ``qual``: their names and the facts of DataLoaders over them."""
        index = self._index
        heirs = [
            {"name": f"{index.summaries[k[0]]['module']}.{k[1]}", "loaders": index.loaders_over(k)}
            for k in iterable_heirs(index, (self.path, qual), name)
        ] if qual in index.summaries.get(self.path, {}).get("classes", {}) else []
        return self._record("iterable_heirs", [qual, name], heirs)

    def one_shot_arguments(self, qual: str, position: Optional[int], keyword: str) -> List[str]:
        """Modules that construct this file's class ``qual`` with a one-shot iterator at that
        parameter of its ``__init__`` (``project.ProjectIndex.one_shot_arguments``)."""
        known = qual in self._index.summaries.get(self.path, {}).get("classes", {})
        answer = one_shot_arguments(self._index, (self.path, qual), position, keyword) if known else []
        return self._record("one_shot_arguments", [qual, position, keyword], answer)

    def old_torch(self) -> Optional[List[str]]:
        """[file, spec] when the project of this file declares torch below 1.9 (``torch_version``);
        the declaring files are read again on replay, so an edit to them re-checks the file."""
        found = old_torch(self.path)
        return self._record("old_torch", [], list(found) if found else None)

    def loader_numpy_draws(self, dataset: Optional[str], unknown: bool, keywords: Optional[List[str]] = None) -> Optional[List[str]]:
        """Where a DataLoader over ``dataset`` (or, ``unknown``, one built with ``keywords``) may draw
        from numpy's global RNG per sample (``numpy_rng``)."""
        answer = loader_draws(self._index, dataset, self.path, unknown, keywords)
        return self._record("loader_numpy_draws", [dataset, unknown, keywords], answer)

    def loader_subclass(self, qualified: str) -> Optional[bool]:
        """For a project class deriving from torch's DataLoader: does it (or a project base) choose
        a ``worker_init_fn`` itself? None: not such a class."""
        index = self._index
        bases = index.external_bases(qualified, self.path)
        answer = None
        if bases and "torch.utils.data.DataLoader" in bases:
            located = index.locate(canonical(qualified), self.path)
            answer = any(index.class_info(key).get("worker_init", True) for key in index.mro(located))
        return self._record("loader_subclass", [qualified], answer)

    def handle_function_names(self) -> List[str]:
        """Names of the project's functions and methods that return a handle they opened."""
        return self._record("handle_function_names", [], self._index.handle_function_names())

    def world_sharded(self, qualified: str) -> bool:
        """The project class ``qualified`` (or a base) reads the world size when it is built."""
        return self._record("world_sharded", [qualified], self._index.world_sharded(canonical(qualified), self.path))

    def kwargs_forwarder_names(self) -> List[str]:
        """Names of the project's functions whose ``**kwargs`` reaches a DataLoader."""
        return self._record("kwargs_forwarder_names", [], self._index.kwargs_forwarder_names())

    def kwargs_loader(self, qualified: str) -> Optional[List[str]]:
        """The parameters the chain takes itself when the project function ``qualified`` hands its
        ``**kwargs`` on to a DataLoader (``kwargs_forwarders``); None otherwise."""
        return self._record("kwargs_loader", [qualified], self._index.kwargs_loader(canonical(qualified), self.path))

    def returned_handle(self, qualified: str) -> Optional[list]:
        """[kind, position in a returned tuple or None] when the project function or method
        ``qualified`` returns a handle it opened (``handle_exports``)."""
        return self._record("returned_handle", [qualified], self._index.returned_handle(canonical(qualified), self.path))

    def state_heirs(self, qual: str, attrs: List[str]) -> List[dict]:
        """The project's dataset classes that run this file's (non-dataset) class ``qual``'s
        ``__init__`` and use one of ``attrs`` per sample as it left them
        (``rng_heirs.state_heirs``): names, attributes, DataLoader facts."""
        known = qual in self._index.summaries.get(self.path, {}).get("classes", {})
        answer = state_heirs(self._index, (self.path, qual), list(attrs)) if known else []
        return self._record("state_heirs", [qual, list(attrs)], answer)

    def rng_holder(self, qualified: str, method: Optional[str]) -> bool:
        """Calling the project function ``qualified`` (or its ``method`` on an instance of what
        it names) returns an object holding a random generator it created (``rng_holders``)."""
        answer = holder_returned(self._index, qualified, method, self.path)
        return self._record("rng_holder", [qualified, method], answer)

    def epoch_hook_loaders(self, qual: str) -> List[str]:
        """Modules with a persistent loader over this file's dataset class ``qual`` in a project whose
        library calls the dataset's ``set_epoch`` every epoch (``epoch_hooks``)."""
        known = qual in self._index.summaries.get(self.path, {}).get("classes", {})
        return self._record("epoch_hook_loaders", [qual], hook_loaders(self._index, (self.path, qual)) if known else [])

    def returned_closure(self, qualified: str) -> Optional[list]:
        """[what, pickle's name] when the project's module-level function ``qualified`` returns a
        function or lambda defined inside it (``returned_closures``)."""
        return self._record("returned_closure", [qualified], self._index.returned_closure(canonical(qualified), self.path))

    def returned_to_loaders(self, qual: str) -> List[list]:
        """[module, position] of the loaders of other files over the result of this file's
        function ``qual`` (-1) or element ``position`` of it (``returned_datasets``)."""
        from dslint.semantics.returned_datasets import loader_positions  # (parses: not imported by a replayed warm run)
        return self._record("returned_to_loaders", [qual], loader_positions(self._index, (self.path, qual)))

    def length_probe(self, qualified: str) -> Optional[list]:
        """[position, name, loader] when the project's module-level function ``qualified`` probes
        that parameter for a length (``length_probes``)."""
        return self._record("length_probe", [qualified], self._index.length_probe(canonical(qualified), self.path))

    def probed_attribute(self, qualified: str, attr: str) -> Optional[list]:
        """[class, loader] when the project class ``qualified`` or a base probes ``self.<attr>``
        for a length (``length_probes``)."""
        answer = self._index.probed_attribute(canonical(qualified), attr, self.path)
        return self._record("probed_attribute", [qualified, attr], answer)

    def cuda_attribute(self, qual: str, attr: str, kind: str = "device") -> Optional[str]:
        """How ``self.<attr>`` of this file's class ``qual`` can hold a CUDA device (or a model put on
        one: ``kind`` "placed") passed to a constructor in the project (``device_flow``), or None."""
        known = qual in self._index.summaries.get(self.path, {}).get("classes", {})
        answer = self._index.cuda_attribute((self.path, qual), attr, kind) if known else None
        return self._record("cuda_attribute", [qual, attr, kind], answer)

    def read_after_construction(self, qual: str, attr: str) -> bool:
        """Some method other than ``__init__`` of this file's class ``qual``, a base or a subclass
        (any file) reads ``self.<attr>``, or may (``attr_reads``); True for a class not summarised."""
        known = qual in self._index.summaries.get(self.path, {}).get("classes", {})
        answer = read_after_construction(self._index, (self.path, qual), attr) if known else True
        return self._record("read_after_construction", [qual, attr], answer)

    def kept_attribute(self, qualified: str, slot) -> Optional[str]:
        """The attribute in which the project class ``qualified`` keeps its constructor argument at
        ``slot`` (keyword or position), through ``super().__init__`` (``device_flow``), or None."""
        return self._record("kept_attribute", [qualified, slot], self._index.kept_attribute(qualified, self.path, slot))

    def cuda_init_param(self, qual: str, param: str) -> Optional[str]:
        """How a construction in the project hands a CUDA device to ``param`` of the ``__init__`` of
        this file's class ``qual`` (``device_flow``), or None."""
        known = qual in self._index.summaries.get(self.path, {}).get("classes", {})
        answer = self._index.cuda_init_param((self.path, qual), param) if known else None
        return self._record("cuda_init_param", [qual, param], answer)

    def handle_init_param(self, qual: str, param: str) -> Optional[list]:
        """``[kind, origin]`` when a construction in the project hands an opened handle to ``param``
        of the ``__init__`` of this file's class ``qual`` (``handle_flow``), or None."""
        known = qual in self._index.summaries.get(self.path, {}).get("classes", {})
        answer = self._index.handle_init_param((self.path, qual), param) if known else None
        return self._record("handle_init_param", [qual, param], answer)

    def cuda_partial(self, qual: str, param: str) -> Optional[str]:
        """How a ``functools.partial`` in the project binds ``param`` of this file's function ``qual``
        to a CUDA device (``device_flow``), or None."""
        return self._record("cuda_partial", [qual, param], self._index.cuda_partial((self.path, qual), param))

    def per_sample_arguments(self, qual: str, param: str, position: Optional[int]) -> Optional[list]:
        """What the per-sample calls of this file's function ``qual`` give its parameter ``param``
        (at ``position``, ``self`` not counted): ``[literal]``, ``"?"`` or ``"default"`` per call;
        None when those calls are not all known (``sample_calls``)."""
        answer = self._index.per_sample_arguments((self.path, qual), param, position)
        return self._record("per_sample_arguments", [qual, param, position], answer)

    def project_may_start_workers(self) -> bool:
        """Some DataLoader of the project may start workers (``ProjectIndex.may_start_workers``)."""
        return self._record("project_may_start_workers", [], self._index.may_start_workers())

    def project_start_methods(self) -> List[str]:
        """The start methods some file of the project sets (``set_start_method``)."""
        return self._record("project_start_methods", [], self._index.start_methods())

    def epoch_stored_params(self, qualified: str) -> List[list]:
        """[position, name] of the ``__init__`` parameters the project class ``qualified`` keeps on
        ``self`` and re-iterates epoch after epoch (``epoch_attrs``)."""
        answer = self._index.epoch_stored_params(canonical(qualified), self.path)
        return self._record("epoch_stored_params", [qualified], answer)

    def epoch_iterated_params(self, qualified: str) -> List[list]:
        """[position, name] of the parameters the project function ``qualified`` iterates inside an
        outer loop of its own body (``epoch_attrs``)."""
        answer = self._index.epoch_iterated_params(canonical(qualified), self.path)
        return self._record("epoch_iterated_params", [qualified], answer)

    def epoch_iterated_method_params(self, qualified: str, method: str) -> List[list]:
        """The same of ``method`` run on an instance of the project class ``qualified``."""
        answer = self._index.epoch_iterated_method_params(canonical(qualified), method, self.path)
        return self._record("epoch_iterated_method_params", [qualified, method], answer)

    def loader_eval_roles(self, qual: str) -> List[list]:
        """[module, name] of the callers (any file, also through functions returning its result)
        that keep the result of this file's function ``qual`` under an evaluation name (``loader_roles``)."""
        from dslint.semantics.loader_roles import eval_roles  # (parses: not imported by a replayed warm run)

        return self._record("loader_eval_roles", [qual], eval_roles(self._index, (self.path, qual)))

    def rank_split_entries(self, qual: str) -> List[list]:
        """[module, what starts it] of the DDP entry scripts (any file) that seed the global RNG per
        rank only and call this file's function ``qual``, up to four calls deep (``rank_entries``)."""
        from dslint.semantics.rank_entries import split_entries  # (parses: not imported by a replayed warm run)

        return self._record("rank_split_entries", [qual], split_entries(self._index, (self.path, qual)))

    def ddp_trained_positions(self, qual: str) -> List[list]:
        """[module, marker, position] of the training loops of DDP files (any file) over the result of
        this file's function ``qual`` (-1) or element ``position`` of it (``trained_results``)."""
        from dslint.semantics.trained_results import trained_positions  # (parses: not imported by a replayed warm run)

        return self._record("ddp_trained_positions", [qual], trained_positions(self._index, (self.path, qual)))

    def helper_seeds_per_rank(self, qualified: str, keywords: List[str], positional: int) -> bool:
        """The project function ``qualified``, called with these keywords and this many positional
        arguments, seeds torch's global RNG per rank (it adds the rank to the seed; ``rank_entries``)."""
        from dslint.semantics.rank_entries import helper_per_rank  # (parses: not imported by a replayed warm run)

        answer = helper_per_rank(self._index, self.path, [qualified, list(keywords), positional])
        return self._record("helper_seeds_per_rank", [qualified, list(keywords), positional], answer)


def replay(index: ProjectIndex, path: str, log: List[list]) -> bool:
    """True when every recorded question still gets the recorded answer."""
    view = View(index, path)
    for name, args, answer in log:
        if getattr(view, name)(*args) != answer:
            return False
    return True
