"""Does a dataset draw from numpy's global RNG per sample (across files, from summaries)?

numpy's module-level functions (``np.random.rand``, ``choice``, ``shuffle``...) draw from one
global state that a forked worker copies from its parent; a ``Generator`` or ``RandomState``
object is not counted (whoever made it chose its seed), nor are ``seed``/``get_state``.

``dataset_draws(index, key)`` walks what runs per sample in the project class ``key``
(``__getitem__``/``__iter__``/``__next__`` and every project function they reach) and answers:

- ``["draws", function]``: a reached function calls numpy's global RNG;
- ``["chosen", [attrs]]``: none does, but the code calls callables held on the instance
  (``self.transform(x)`` where ``transform`` is no method of the class: a function handed in
  at run time), so what runs per sample is chosen at run time;
- ``None``: neither, or its per-sample code reseeds numpy's global RNG itself (``np.random.seed(index)``:
  each worker then leaves the state it inherited).

``chosen_draws(index, attrs)``: a callable chosen at run time may be any project function or
method of that name (the receiver's class is unknown): the first that draws.
``project_draws(index, from_path, keywords)``: the first project dataset class whose per-sample
code draws, among those a file names that a construction with those keywords can build.
"""

from __future__ import annotations

from typing import Iterable, List, Optional

from dslint.semantics.test_paths import is_test_path

NOT_DRAWS = frozenset({
    "seed", "get_state", "set_state", "default_rng", "RandomState", "Generator", "SeedSequence",
    "BitGenerator", "PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64",
})
PER_SAMPLE = ("__getitem__", "__iter__", "__next__", "__getitems__")


def draws(facts: Optional[dict]) -> Optional[str]:
    """The numpy global-RNG function this function's body calls, if any."""
    for kind, target, _ in facts["calls"] if facts else ():
        if kind != "func" or not target.startswith("numpy.random."):
            continue
        tail = target[len("numpy.random."):]
        if "." not in tail and tail not in NOT_DRAWS and tail[:1].islower():
            return tail
    return None


def _name(index, key) -> str:
    return f"{index.summaries[key[0]]['module']}.{key[1]}"


def dataset_draws(index, key) -> Optional[list]:
    mro = index.mro(key)
    chosen: List[str] = []
    reached = [func for method in PER_SAMPLE for func in index.reachable(key, method)]
    if any(kind == "func" and target == "numpy.random.seed"
           for func in reached for kind, target, _ in (index.function_facts(func) or {}).get("calls", ())):
        return None  # it reseeds numpy itself per sample (``np.random.seed(index)`` in a worker's first call)
    for func in reached:
        facts = index.function_facts(func)
        tail = draws(facts)
        if tail:
            return ["draws", f"{_name(index, func)} (np.random.{tail})"]
        for kind, target, _ in facts["calls"] if facts else ():
            if kind == "self" and index.find_method(mro, target) is None and target not in chosen:
                chosen.append(target)
    return ["chosen", chosen] if chosen else None


def _all_functions(index) -> Iterable[tuple]:
    for path, summary in index.summaries.items():
        for qual in summary.get("functions", {}):
            yield (path, qual), None, qual.rpartition(".")[2]
        for cls, facts in summary.get("classes", {}).items():
            for name in facts.get("methods", {}):
                yield (path, f"{cls}.{name}"), (path, cls), name


def chosen_draws(index, attrs: List[str]) -> Optional[str]:
    wanted = set(attrs)
    for func, cls, name in _all_functions(index):
        if name not in wanted:
            continue
        if cls is not None:
            reached = index.reachable(cls, name)
        else:
            reached = [func]
        for each in reached:
            tail = draws(index.function_facts(each))
            if tail:
                return f"{_name(index, each)} (np.random.{tail})"
    return None


def project_draws(index, from_path: Optional[str] = None, keywords: Optional[List[str]] = None) -> Optional[str]:
    """(Dataset classes of test files, which make up data for tests, are not counted.) With
    ``from_path``, only the dataset classes that file names (defines, imports, star-imports) when
    it names any (``data_dict = {"m4": M4, ...}``; ``data_dict[args.data](...)``); with ``keywords``
    (what the construction passes), only classes whose ``__init__`` takes them all."""
    candidates = [(path, cls) for path, summary in index.summaries.items() if not is_test_path(path)
                  for cls in summary.get("classes", {})]
    named = [key for key in _named_classes(index, from_path) if index.class_kind(key) is not None] if from_path else []
    for key in named or candidates:
        if index.class_kind(key) is None or not _takes(index, key, keywords or ()):
            continue
        found = dataset_draws(index, key)
        if found and found[0] == "draws":
            return found[1]
    return None


def _named_classes(index, path: str) -> List[tuple]:
    """The project classes the file ``path`` defines or imports by name (also by star import)."""
    summary = index.summaries[path]
    found = [(path, cls) for cls in summary.get("classes", {})]
    for qualified in summary.get("imports", {}).values():
        key = index.locate(qualified, path)
        if key is not None:
            found.append(key)
    for module in summary.get("star_imports", ()):
        for other in index.by_module.get(module, ()):
            found += [(other, cls) for cls in index.summaries.get(other, {}).get("classes", {}) if "." not in cls]
    return found


def _takes(index, key, keywords) -> bool:
    """The ``__init__`` of class ``key`` (the first along its bases) accepts every keyword."""
    init = index.find_method(index.mro(key), "__init__") if keywords else None
    if init is None:
        return True
    params = index.class_info((init[0], init[1].rpartition(".")[0])).get("init_params")
    return params is None or all(k in params for k in keywords)


def loader_draws(index, dataset: Optional[str], from_path: str, unknown: bool, keywords: Optional[List[str]] = None) -> Optional[list]:
    """The numpy global-RNG use a DataLoader over ``dataset`` (a qualified class name; None with
    ``unknown``: chosen at run time) may run per sample: a dataset class of the project that
    draws, a function chosen at run time of the name its dataset calls, or (dataset unknown) any
    dataset class of the project that draws: ``[how, where]``, ``how`` one of ``"dataset"``,
    ``"chosen"`` (a callable its dataset was handed), ``"project"`` (dataset unknown: a class the
    loader's file names, taking the construction's ``keywords``; ``project_draws``). None: none
    can be shown."""
    memo = index.__dict__.setdefault("numpy_rng_memo", {})
    key = (dataset, from_path, unknown, tuple(keywords or ()))
    if key not in memo:
        memo[key] = _loader_draws(index, dataset, from_path, unknown, keywords)
    return memo[key]


def _loader_draws(index, dataset: Optional[str], from_path: str, unknown: bool, keywords) -> Optional[list]:
    if dataset is None:
        where = project_draws(index, from_path, keywords) if unknown else None
        return ["project", where] if where else None
    key = index.locate(dataset, from_path)
    if key is None or index.class_kind(key) is None:
        return None
    found = dataset_draws(index, key)
    if found is None:
        return None
    if found[0] == "draws":
        return ["dataset", found[1]]
    where = chosen_draws(index, found[1])
    return ["chosen", where] if where else None


__all__ = ["loader_draws", "dataset_draws", "chosen_draws", "project_draws", "draws"]
