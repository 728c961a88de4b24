"""Does a project class keep, from its construction, an object that pickle cannot copy?

``unpicklable_attribute(index, key)`` answers from the file summaries alone (no libcst): the
``__init__`` methods along the class's MRO and what they store on ``self`` (``self_news``).
A dataset holding such an object cannot be sent to spawn- or forkserver-started DataLoader
workers, whatever else the loader is given.
"""

from __future__ import annotations

from typing import List, Optional

from dslint.semantics.modules import canonical

#: constructors of objects that pickle cannot copy (so a spawn- or forkserver-started DataLoader
#: worker cannot receive a dataset holding one): locks, threads, open files and database handles
HELD_UNPICKLABLE = frozenset({
    "threading.Lock", "threading.RLock", "threading.Condition", "threading.Event", "threading.Semaphore",
    "threading.BoundedSemaphore", "threading.Thread", "queue.Queue", "builtins.open", "io.open", "h5py.File",
    "lmdb.open", "lmdb.Environment", "zipfile.ZipFile", "tarfile.open", "sqlite3.connect", "socket.socket",
})
#: methods by which a class decides what pickle stores
PICKLING_HOOKS = frozenset({"__getstate__", "__reduce__", "__reduce_ex__"})


def unpicklable_attribute(index, key) -> Optional[list]:
    """``[attr, constructor]``: an object pickle cannot copy (``HELD_UNPICKLABLE``) that the
    ``__init__`` chain of the project class ``key`` keeps on ``self``; None when there is none,
    or when a class of its MRO controls its own pickling (``__getstate__``, ``__reduce__``...)."""
    mro = index.mro(key)
    if _pickles_itself(index, mro):
        return None
    for cls in mro:
        facts = index.class_info(cls)["methods"].get("__init__") or {}
        for attr, qualified in facts.get("self_news", ()):
            if canonical(qualified) in HELD_UNPICKLABLE:
                return [attr, qualified]
    return None


def kept_callable_attributes(index, key, _seen: Optional[set] = None) -> List[list]:
    """``[attr, local object, parameter, position]`` for each lambda, nested function or pipeline
    holding one that the ``__init__`` chain of the project class ``key`` keeps on ``self`` (the
    summary fact ``kept_callables``: ``kept_lambdas``; parameter and position None), then for each
    default of a parameter of the class's own ``__init__`` that it keeps (``kept_defaults``: kept
    when a construction leaves ``parameter``, at ``position`` after ``self``, out; the object is
    ``"Cls.<lambda>"``, ``"Cls.__init__.<locals>.<lambda>"`` for a fallback in its body: ``p or (lambda x: x)``, ``"<lambda>"`` for a module-level one the default names,
    ``"make_namer.<locals>.name"`` for a fallback calling a module-level factory that returns a closure). An object of a project class that an ``__init__`` of the
    chain builds and keeps (``self.reader = Reader(path)``, the summary fact ``self_news``) counts with the first lambda
    that class always keeps (``[attr, "Reader.__init__.<locals>.<lambda>", None, None]``). Empty when a class of its MRO
    controls its own pickling."""
    mro = index.mro(key)
    if _pickles_itself(index, mro):
        return []
    found, stored = [], set()  # (set by an ``__init__`` before in the MRO, which a subclass's runs last)
    seen = (_seen or set()) | set(mro)  # (the classes whose objects are being followed: no cycle)
    for cls in mro:
        facts = index.class_info(cls)["methods"].get("__init__") or {}
        for attr, label in facts.get("kept_callables", ()):
            held = _call_result(index, mro, cls, label) if label.startswith("<call ") else f"{cls[1]}.__init__.<locals>.{label}"
            if held is not None and attr not in stored:
                found.append([attr, held, None, None])
        for attr, qualified in facts.get("self_news", ()) if len(seen) < 12 else ():  # an object it builds and keeps
            inner = index.locate(qualified, cls[0])
            held = next((h for a, h, p, _ in kept_callable_attributes(index, inner, seen) if p is None), None) \
                if inner is not None and inner not in seen and attr not in stored else None
            if held is not None and not any(attr == f[0] for f in found):
                found.append([attr, held, None, None])
        stored.update(facts.get("self_stores", ()))
    own = (index.class_info(mro[0])["methods"].get("__init__") or {}) if mro else {}
    labels = {True: f"{mro[0][1]}.__init__.<locals>.<lambda>", False: f"{mro[0][1]}.<lambda>", "module": "<lambda>"}
    for attr, param, position, kind in own.get("kept_defaults", ()):  # (a factory's call: the closure it returns)
        held = _call_result(index, mro, mro[0], kind) if isinstance(kind, str) and kind.startswith("<call ") else labels[kind]
        if held is not None:
            found.append([attr, held, param, position])
    return found


def _call_result(index, mro, cls, label: str) -> Optional[str]:
    """What pickle cannot copy in the result of the call a ``"<call mod.f>"``/``"<call self.m>"`` label names
    (``kept_lambdas.object_label``): ``"Cls.__init__.<locals>.<generator>"`` for a project generator function or
    method (its result is a generator object), pickle's name of the closure for a module-level project function
    whose every ``return`` gives a function or lambda defined inside it (``returned_closures``:
    ``"make_namer.<locals>.name"``), else None."""
    name = label[len("<call "):-1]
    if name.startswith("self."):
        key, closure = index.find_method(mro, name[len("self."):]), None  # (a method is no closure factory)
    else:
        key, closure = index.locate(canonical(name), cls[0], table="functions"), index.returned_closure(canonical(name), cls[0])
    facts = index.function_facts(key) if key is not None else None
    if facts and facts.get("gen"):
        return f"{cls[1]}.__init__.<locals>.<generator>"
    return closure[1] if closure else None


def _pickles_itself(index, mro) -> bool:
    """A class of ``mro`` decides what pickle stores (``__getstate__``, ``__reduce__``...)."""
    return any(PICKLING_HOOKS & set(index.class_info(cls)["methods"]) for cls in mro)
