"""Project functions handed to other functions as values, and the calls made through them.

Configuration-driven code passes a loader builder by name and lets another function call it::

    # build.py
    def make_loaders(cfg, get_loader_fn, **kwargs):
        return get_loader_fn(cfg.train_path, num_workers=cfg.workers, **kwargs)

    # train.py
    loaders = make_loaders(cfg, get_csc_loader, tokenizer=tokenizer)

The call through the parameter ``get_loader_fn`` is a call of ``get_csc_loader`` with a worker
count, as if ``train.py`` had written it: ``get_csc_loader``'s own ``**kwargs`` may hold
``num_workers`` (``worker_counts.may_have_workers``).

Phase 1 (``handed_functions(tree, names, qualname_of)``, summary facts):

- ``worker_params``: ``[function, parameter, position]`` for each module-level function that calls
  one of its parameters (never rebound in it) with ``num_workers=`` other than a literal 0; the
  position counts the positional parameters (-1: keyword-only).
- ``function_args``: ``[callee, position or keyword, function]`` for each argument of a call of this
  file that names a module-level function of the file or an imported name.

Phase 2 (``function_value_index.handed_to_worker_calls``: no parser there): some call of the
project hands the function ``key`` to a function that calls that parameter with a worker count.
"""

from __future__ import annotations

from typing import Callable, Dict

import libcst as cst

from dslint.semantics.bindings import scope_assignments
from dslint.semantics.walk import iter_subtree
from dslint.semantics.worker_counts import passes_workers

__all__ = ["handed_functions"]


def handed_functions(tree, names, qualname_of: Callable[[cst.CSTNode], str]) -> Dict[str, list]:
    """See the module docstring."""
    functions = [node for node in tree.nodes(cst.FunctionDef) if type(tree.parent_of(node)) is cst.Module]
    worker_params = []
    for func in functions:
        positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        params = {name: i for i, name in enumerate(positional)}
        params.update((p.name.value, -1) for p in func.params.kwonly_params)
        for node in iter_subtree(func.body, into_scopes=False):
            name = node.func.value if type(node) is cst.Call and type(node.func) is cst.Name else None
            if name in params and passes_workers(node) and scope_assignments(tree, func, name) == []:
                worker_params.append([qualname_of(func), name, params[name]])
    named = {func.name.value for func in functions} | set(names.imports)
    function_args = []
    for call in tree.nodes(cst.Call):
        handed = [(i, arg) for i, arg in enumerate(call.args)
                  if not arg.star and type(arg.value) is cst.Name and arg.value.value in named]
        callee = names.qualname(call.func) if handed and isinstance(call.func, (cst.Name, cst.Attribute)) else None
        if callee is None or callee.startswith(("builtins.", "torch.")):
            continue
        for i, arg in handed:
            qualified = names.qualname(arg.value)
            if qualified:
                function_args.append([callee, arg.keyword.value if arg.keyword is not None else i, qualified])
    return {"worker_params": sorted(worker_params), "function_args": function_args}
