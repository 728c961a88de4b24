"""Which lambdas a class keeps are reported in the class's own file.

A project class whose own ``__init__`` keeps a lambda or a nested function on ``self``
(``kept_lambdas``: ``self.t = lambda x: x``, or a parameter's default the construction leaves
out, ``def __init__(self, t=identity)``) cannot be pickled, and the fix goes where the class
keeps it. When a DataLoader of *another* file is built over an instance of the class (or of a
subclass that inherits what it keeps) and may start workers, DSL506 reports at that lambda in
the class's file, and the file of the construction says nothing of it: one finding where the
fix goes, however many files build the class. The loader is judged from its summary facts
(``num_workers`` passed and not a literal 0; the preview-only forms are not told apart there,
as for ``returned_datasets``). For a parameter's default, only a construction known to leave
the parameter out counts. The loader fact ``built`` (``built_datasets``, phase 1) says which
classes a loader's dataset may be an instance of, and what each construction passes.

``foreign_loader(index, key, attr)``: the path of a file other than the class's whose DataLoader
over the class ``key`` (or a subclass) makes its own ``__init__``'s ``self.<attr>`` reach workers, or None.

``kept_owner(index, key, attr)``: the class of ``key``'s MRO whose ``__init__`` keeps that lambda.

``unloaded(index, key, param, position)``: no summarised DataLoader of the project (any file, any
worker count) is known to be built over the class ``key`` or a subclass (for the default of
``param``, at ``position``: over a construction that leaves it out), and no function or method of
the project constructs one (for the default: constructs the class leaving it out, or maybe, through
``*``/``**``; ``caller_index``): a dataset, or a default, the project leaves to its users, whose
workers are theirs to choose (DSL506's preview form). Test code does not count.
"""

from __future__ import annotations

from typing import Optional

from dslint.semantics.caller_index import project_call_arguments
from dslint.semantics.held_state import kept_callable_attributes
from dslint.semantics.test_paths import is_test_path


def foreign_loader(index, key, attr: str) -> Optional[str]:
    """See the module docstring."""
    if key[1] not in index.summaries[key[0]]["classes"]:
        return None
    for path, summary in sorted(index.summaries.items()):
        for facts in summary.get("loaders", ()) if path != key[0] else ():
            for qualified, passes in facts.get("built", ()) if facts.get("num_workers") != 0 else ():
                built = index.locate(qualified, path)
                kept = _kept(index, built, attr) if built is not None else None
                if kept is None or kept[0] != key:
                    continue
                _, param, position = kept
                if param is None or (passes is not None and param not in passes[0] and not 0 <= position < passes[1]):
                    return path
    return None


def unloaded(index, key, param: Optional[str] = None, position: int = -1) -> bool:
    """See the module docstring."""
    for path, summary in index.summaries.items():
        for facts in summary.get("loaders", ()) if not is_test_path(path) else ():
            for qualified, passes in facts.get("built", ()):
                built = index.locate(qualified, path)
                if built is None or key not in index.mro(built):
                    continue
                if param is None or passes is None or (param not in passes[0] and not 0 <= position < passes[1]):
                    return False
    if param is None:  # constructed anywhere (a subclass too): the project's own loaders may take it
        subclasses = [(path, qual) for path, summary in index.summaries.items() for qual in summary["classes"]]
        return not any(not is_test_path(call[0]) for cls in subclasses if key in index.mro(cls)
                       for call in project_call_arguments(index, cls, table="classes"))
    for path, _, positional, keywords in project_call_arguments(index, key, table="classes"):
        if is_test_path(path):
            continue  # (a test exercising the default)
        if param not in keywords and (positional is None or "**" in keywords or not 0 <= position < len(positional)):
            return False  # a construction of the project that may leave it out
    return True


def kept_owner(index, key, attr: str):
    """The class of ``key``'s MRO whose own ``__init__`` keeps the lambda an instance of ``key`` holds
    on ``self.<attr>`` (``held_state.kept_callable_attributes``), or None."""
    kept = _kept(index, key, attr)
    return kept[0] if kept else None


def _kept(index, key, attr: str):
    """(the owner, ``kept_owner``; the parameter and position a construction leaves out, or None)."""
    for found, held, param, position in kept_callable_attributes(index, key):
        if found == attr:
            owner = held.split(".__init__.<locals>.")[0] if param is None else key[1]
            return next((cls for cls in index.mro(key) if cls[1] == owner), None), param, position
    return None
