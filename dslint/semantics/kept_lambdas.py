"""Which callables that pickle cannot copy does a method store on ``self``?

A lambda, or a function defined inside the method, stored on ``self``: directly
(``self.scale = lambda x: 2 * x``), as an element of a list, tuple, set or dict literal,
or as an argument of a call that keeps what it is given: a transform container
(``T.Compose([T.ToTensor(), T.Lambda(lambda x: x * 2 - 1)])``), ``functools.partial``,
or ``collections.defaultdict`` (its default factory is pickled with it). A call that only
uses the callable (``sorted(rows, key=lambda r: r[0])``, ``map``) keeps nothing.

An object holding one cannot be sent to a spawn- or forkserver-started DataLoader worker.
The summaries record the attributes per method (``stored_callables``); ``held_state``
answers for a class's ``__init__`` chain from them, and the rules find the node here.
"""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Tuple

import libcst as cst

from dslint.semantics.scopes import is_none
from dslint.semantics.walk import iter_subtree

#: transform containers that keep what they are given and run it per sample
TRANSFORM_CONTAINERS = frozenset(
    f"{module}.{name}"
    for module in ("torchvision.transforms", "torchvision.transforms.transforms", "torchvision.transforms.v2")
    for name in ("Compose", "Lambda", "RandomApply", "RandomChoice", "RandomOrder")
) | frozenset({
    "monai.transforms.Compose", "monai.transforms.Lambda", "monai.transforms.Lambdad", "albumentations.Compose",
    "albumentations.Lambda", "albumentations.OneOf", "albumentations.SomeOf",
})
#: calls whose result keeps the callables given to it
KEEPING_CALLS = TRANSFORM_CONTAINERS | frozenset({"functools.partial", "collections.defaultdict"})

_LITERALS = (cst.List, cst.Tuple, cst.Set)
#: modules kept on ``self`` (``self.random = random``): a module object cannot be pickled
KEPT_MODULES = frozenset({"random", "numpy.random", "numpy", "torch", "math", "os", "cv2", "logging"})
_GENERATOR_CALLS = frozenset({"os.walk", "os.scandir", "glob.iglob"})
_PATH_GENERATORS = frozenset({"iterdir", "rglob"})
_CACHES = frozenset({"functools.lru_cache", "functools.cache"})
_DATASET_WRAPPERS = frozenset(f"torch.utils.data{sub}.{name}" for sub in ("", ".dataset") for name in ("ConcatDataset", "Subset"))


def stored_callables(
    assigns: Iterable[cst.Assign], self_param: Optional[str], local_defs: Iterable[str], qualname: Callable,
    params: Optional[cst.Parameters] = None,
) -> List[Tuple[str, cst.CSTNode]]:
    """(attribute, the lambda or the name of the nested function) for each attribute that every
    ``self.<attr> = ...`` of ``assigns`` sets to a value keeping one (a default replaced on another
    path, ``self.t = lambda x: x`` then ``self.t = transform``, is not kept on every path);
    ``local_defs`` are the names of the functions defined in the method, ``qualname`` resolves a
    call's callee; a local name (not one of ``params``) that one assignment binds to a call stands for it."""
    if not self_param:
        return []
    local, assigns = frozenset(local_defs), list(assigns)
    names: dict = {p.name.value: None for p in (*params.params, *params.kwonly_params, *params.posonly_params)} if params else {}
    for node in assigns:  # (a parameter rebound in a fallback arm is ``stored_defaults``' question)
        for target in node.targets:
            if type(target.target) is cst.Name:
                name, first = target.target.value, target.target.value not in names
                names[name] = node.value if first and len(node.targets) == 1 and type(node.value) is cst.Call else None
    held_by: dict = {}  # attr -> what each of its stores keeps (None: something pickle copies)
    for node in assigns:
        for target in node.targets:
            t = target.target
            if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == self_param:
                held_by.setdefault(t.attr.value, []).append(_held(node.value, local, qualname, 0, objects=(self_param, names)))
    return [(attr, held[0]) for attr, held in held_by.items() if all(h is not None for h in held)]


def object_label(node: cst.CSTNode, qualname: Callable, self_param: Optional[str]) -> Optional[str]:
    """For a value pickle cannot copy that is not a function: ``"<generator>"`` (a generator
    expression, ``os.walk``/``os.scandir``/``glob.iglob``, ``Path.iterdir``/``rglob``), ``"<module
    random>"`` (a module of ``KEPT_MODULES``), ``"<lru_cache>"`` (a ``functools`` cache wrapper: pickle
    looks the wrapped function up by name and finds another object), ``"<cv2.createCLAHE>"`` (an OpenCV
    algorithm object); ``"<call mod.f>"``/``"<call self.m>"`` for a call whose result may be one: a generator
    when the project function or method it calls is a generator function, or the closure a module-level project
    factory returns (``held_state`` decides); else None."""
    kind = type(node)
    if kind is cst.GeneratorExp:
        return "<generator>"
    if kind in (cst.Name, cst.Attribute):
        name = qualname(node)
        return f"<module {name}>" if name in KEPT_MODULES else None
    if kind is not cst.Call:
        return None
    func = node.func
    if type(func) is cst.Call and type(func.func) in (cst.Name, cst.Attribute) and qualname(func.func) in _CACHES:
        return "<lru_cache>"  # ``functools.lru_cache(maxsize=8)(load)``
    if type(func) not in (cst.Name, cst.Attribute):
        return None
    name = qualname(func)
    if name in _CACHES and node.args:
        return "<lru_cache>"
    if name in _GENERATOR_CALLS or (name is None and type(func) is cst.Attribute and func.attr.value in _PATH_GENERATORS):
        return "<generator>"
    if name and name.startswith("cv2.create"):
        return f"<{name}>"
    if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == self_param:
        return f"<call self.{func.attr.value}>"
    return f"<call {name}>" if name and not name.startswith(("builtins.", "torch.", "numpy.")) else None


def kept_facts(assigns, defs, self_param: Optional[str], params: cst.Parameters, names, func=None) -> dict:
    """The summary facts of a method: ``kept_callables`` ([attr, "<lambda>" or the nested
    function's name], ``stored_callables``) and ``kept_defaults`` ([attr, parameter, position, whether
    the lambda is the method's own (a fallback in its body: true), the parameter's default (false),
    or a lambda a module-level name holds that the default names (``"module"``); for a fallback that calls
    a module-level function, its ``"<call mod.f>"`` label], ``stored_defaults``)."""
    assigns, lambdas = list(assigns), module_lambdas(names)
    def label(held) -> str:
        return "<lambda>" if type(held) is cst.Lambda else (object_label(held, names.qualname, self_param) or held.value)
    return {
        "kept_callables": [[attr, label(held)]
                           for attr, held in stored_callables(assigns, self_param, [d.name.value for d in defs], names.qualname, params)],
        "kept_defaults": [[attr, param, position, "module" if any(held is v for v in lambdas.values())
                           else object_label(held, names.qualname, self_param) if type(held) is cst.Call else _in_body(held, params)]
                          for attr, held, param, position in stored_defaults(assigns, self_param, params, names.qualname, lambdas, func)],
    }


def module_lambdas(names) -> dict:
    """{name: the lambda}: module-level names bound once, to a lambda (``identity = lambda x: x``). Pickle
    finds a function by its ``__qualname__``, ``<lambda>``, not by such a name: it cannot copy one either."""
    return {name: values[0] for name, values in names.assigns.items()
            if len(values) == 1 and type(values[0]) is cst.Lambda and name not in names.imports}


def stored_defaults(
    assigns: Iterable[cst.Assign], self_param: Optional[str], params: cst.Parameters, qualname: Callable, lambdas: dict,
    func: Optional[cst.FunctionDef] = None,
) -> List[Tuple[str, cst.CSTNode, str, int]]:
    """(attribute, the lambda, parameter, position) for each attribute that every ``self.<attr> = ...``
    of ``assigns`` sets to the same parameter, whose default keeps a lambda (``def __init__(self,
    fmt=lambda b: b): self.fmt = fmt``), or to that parameter with a fallback keeping one when it
    defaults to ``None`` (``self.fmt = fmt or (lambda b: b)``, ``fmt if fmt is not None else ...``):
    the object keeps it when a construction leaves that argument out; a default naming one of ``lambdas``
    (``module_lambdas``) keeps that lambda. With the method ``func``, an ``if`` of its body that tests such a
    parameter (``if fmt is None:``, ``if not fmt:``) counts too: its arm for the parameter left out rebinds
    the parameter to a fallback (``fmt = lambda b: b``) or stores one on the attribute that the other arm
    sets to the parameter. The position counts the parameters after ``self`` (-1: keyword-only)."""
    if not self_param:
        return []
    positional = [p for p in params.params if p.name.value != self_param]
    defaults = {p.name.value: (p.default, i) for i, p in enumerate(positional) if p.default is not None}
    defaults.update((p.name.value, (p.default, -1)) for p in params.kwonly_params if p.default is not None)
    if not defaults:
        return []
    rebound, left_out, given = _none_arms(func, defaults) if func is not None else ({}, {}, {})
    stores: dict = {}  # attr -> its stores
    for node in assigns:
        for target in node.targets:
            t = target.target
            if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == self_param:
                stores.setdefault(t.attr.value, []).append(node)
    found = []
    for attr, nodes in stores.items():
        tested = list(dict.fromkeys(p for node in nodes for p in (*left_out.get(id(node), ()), *given.get(id(node), ()))))
        for param in tested or [None]:  # (each parameter an ``if`` chain tests around the stores, in order)
            held = _kept_default(nodes, param, defaults, rebound, left_out, given, qualname, lambdas)
            if held is not None:
                found.append((attr, held[0], held[1], defaults[held[1]][1]))
                break
    return found


def _kept_default(nodes, param, defaults, rebound, left_out, given, qualname, lambdas) -> Optional[tuple]:
    """(what the stores ``nodes`` of one attribute keep, the parameter) when a construction leaves that
    parameter out, reading the arms of the ``if`` chains that test ``param`` (``_none_arms``)."""
    values = []  # (parameter, what the store keeps then) per store
    for node in nodes:
        if param in left_out.get(id(node), ()):
            value = (param, node.value)
        elif param in given.get(id(node), ()):  # the arm that runs with the parameter given: not the left-out path
            value = (param, _GIVEN)
        else:
            value = _defaulted(node.value, defaults)
            if value is not None and type(node.value) is cst.Name and value[0] in rebound:
                value = (value[0], rebound[value[0]])
        values.append(value)
    kept = [v for v in values if v is not None and v[1] is not _GIVEN]
    if len(kept) < len(values) and all(v is not None for v in values) and kept:
        values = kept  # the arm that keeps the parameter given keeps no fallback
    if len({v[0] if v else None for v in values}) != 1 or values[0] is None:
        return None
    held = [_held(kept, frozenset(), qualname, 0, lambdas) or _factory_call(kept, qualname) for _, kept in values]
    if not all(h is not None for h in held):
        return None
    marked = [node.value for node in nodes if param in left_out.get(id(node), ())]
    fallbacks = [h for (_, kept), h in zip(values, held) if any(kept is value for value in marked)]
    return (fallbacks[-1] if fallbacks else held[0], values[0][0])  # (the last arm's: it runs with all left out)


def _factory_call(value, qualname) -> Optional[cst.Call]:
    """A call of a module-level function (``make_namer(root)``), whose result may be a closure that
    pickle cannot copy (``held_state`` decides, from the callee's ``returned_closures`` fact)."""
    label = object_label(value, qualname, None) if type(value) is cst.Call else None
    return value if label and label.startswith("<call ") else None


_GIVEN = object()  # a store of the parameter itself in the arm where it was given


def _is_name(value, name: str) -> bool:
    return type(value) is cst.Name and value.value == name


def _none_arms(func: cst.FunctionDef, defaults: dict) -> Tuple[dict, dict, dict]:
    """For each ``if`` chain among the statements of ``func``'s body whose arms test a parameter defaulting
    to ``None`` (``_tested``): {parameter: the value an arm for it left out rebinds it to}, and {id of an
    assignment: [parameters]} for the assignments of the arms that may run with each parameter left out and of
    those that run only with it given. With ``p`` left out, the arm testing ``p is None`` runs unless an arm
    before it does (``if cache: ... elif p is None: ...``), and after a ``p is not None`` arm, the others
    (which must end in an ``else``: ``if p is not None: ... elif cache: ... else: ...``)."""
    rebound: dict = {}
    left_out: dict = {}
    given: dict = {}
    body = func.body.body if isinstance(func.body, cst.IndentedBlock) else ()
    for stmt in body:
        chain = _chain(stmt) if type(stmt) is cst.If else []
        complete = bool(chain) and chain[-1][0] is None
        seen = set()
        for k, (test, _) in enumerate(chain):
            tested = _tested(test) if test is not None else None
            if tested is None or tested[0] in seen or tested[0] not in defaults or not is_none(defaults[tested[0]][0]):
                continue
            param, when_given = tested
            seen.add(param)
            if when_given and len(chain) > 1 and not complete:
                continue  # ``if p is not None: ... elif ...``: with ``p`` left out, no arm may run
            for i, (_, arm) in enumerate(chain):
                if i < k and not complete:
                    continue
                marks = given if (i == k) == when_given and i >= k else left_out
                for assign in _arm_assigns(arm):
                    marks.setdefault(id(assign), []).append(param)
                    if marks is left_out and any(_is_name(t.target, param) for t in assign.targets):
                        rebound[param] = assign.value
    return rebound, left_out, given


def _chain(stmt: cst.If) -> List[tuple]:
    """(test, body) for each arm of an ``if``/``elif``/``else`` chain (test None for the ``else``)."""
    arms, node = [], stmt
    while node is not None:
        if type(node) is cst.If:
            arms.append((node.test, node.body))
            node = node.orelse
        else:
            arms.append((None, node.body))
            node = None
    return arms


def _arm_assigns(arm) -> List[cst.Assign]:
    if not isinstance(arm, cst.IndentedBlock):
        return []
    return [small for line in arm.body if isinstance(line, cst.SimpleStatementLine)
            for small in line.body if isinstance(small, cst.Assign)]


def _defaulted(value, defaults: dict) -> Optional[Tuple[str, cst.BaseExpression]]:
    """(parameter, what the store keeps when a construction leaves the parameter out): the
    parameter itself (its default), or the fallback of ``p or <fallback>``, ``p if p else
    <fallback>``, ``p if p is not None else <fallback>`` (``<fallback> if p is None else p``,
    ``<fallback> if not p else p``) for a parameter defaulting to ``None``."""
    if type(value) is cst.Name:
        return (value.value, defaults[value.value][0]) if value.value in defaults else None
    if type(value) is cst.BooleanOperation and type(value.operator) is cst.Or and type(value.left) is cst.Name:
        param, fallback = value.left.value, value.right
    elif type(value) is cst.IfExp:
        tested = _tested(value.test)
        if tested is None:
            return None
        param, when_set = tested
        kept, fallback = (value.body, value.orelse) if when_set else (value.orelse, value.body)
        if not (type(kept) is cst.Name and kept.value == param):
            return None
    else:
        return None
    return (param, fallback) if param in defaults and is_none(defaults[param][0]) else None


def _tested(test) -> Optional[Tuple[str, bool]]:
    """(parameter, whether the test is true when it is given) for ``p``, ``not p``, ``p is None``,
    ``p is not None``."""
    if type(test) is cst.Name:
        return test.value, True
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not and type(test.expression) is cst.Name:
        return test.expression.value, False
    if type(test) is cst.Comparison and type(test.left) is cst.Name and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        if is_none(comparison.comparator) and type(comparison.operator) in (cst.Is, cst.IsNot):
            return test.left.value, type(comparison.operator) is cst.IsNot
    return None


def _held(value, local, qualname, depth: int, lambdas=None, objects: Optional[tuple] = None,
          calls: bool = True) -> Optional[cst.CSTNode]:
    """The lambda or nested function's name ``value`` keeps; with ``objects`` (the method's ``self`` and its
    local names bound once: ``stored_callables``), also a value of ``object_label`` (an element of a list or
    list comprehension too), through those names, and a lambda a construction keeps as its transform
    (``Omniglot(root, target_transform=lambda y: y + 964)``) or a dataset wrapper keeps in its parts.
    ``calls``: a call's result may be such a value (``"<call ...>"``); not for what a construction, a
    keeping call or a name holds."""
    if depth > 4:
        return None
    if type(value) is cst.Lambda:
        return value
    if objects and type(value) is cst.ListComp:
        return _held(value.elt, local, qualname, depth + 1, lambdas, objects, calls)
    keeping = type(value) is cst.Call and type(value.func) in (cst.Name, cst.Attribute) and qualname(value.func) in KEEPING_CALLS
    if objects and type(value) is cst.Call and not keeping:
        for part in _construction_parts(value, qualname):
            held = _held(part, local, qualname, depth + 1, lambdas, objects, calls=False)
            if held is not None:
                return held
    label = object_label(value, qualname, objects[0]) if objects and not keeping else None
    if label is not None and (calls or not label.startswith("<call ")):
        return value
    if type(value) is cst.Name and objects and value.value not in local and objects[1].get(value.value) is not None:
        return _held(objects[1][value.value], local, qualname, depth + 1, lambdas, objects, calls=False)
    if type(value) is cst.Name:
        return value if value.value in local else (lambdas or {}).get(value.value)
    if isinstance(value, _LITERALS):
        parts = [element.value for element in value.elements]
    elif type(value) is cst.Dict:
        parts = [element.value for element in value.elements if isinstance(element, cst.DictElement)]
    elif type(value) is cst.Call and type(value.func) in (cst.Name, cst.Attribute) and qualname(value.func) in KEEPING_CALLS:
        parts = [arg.value for arg in value.args if not arg.star]
    else:
        return None
    candidate = None  # (a call's result that may be a generator: only when nothing surely kept is found)
    for part in parts:
        held = _held(part, local, qualname, depth + 1, lambdas, objects, calls and isinstance(value, _LITERALS))
        if held is not None and not (objects and type(held) is cst.Call
                                     and (object_label(held, qualname, objects[0]) or "").startswith("<call ")):
            return held
        candidate = candidate or held
    return candidate


def _construction_parts(call: cst.Call, qualname: Callable) -> List[cst.BaseExpression]:
    """What a construction keeps to run per sample: its ``*transform*`` keywords; every argument of a
    dataset wrapper (``ConcatDataset((a, b))``, ``Subset(ds, ids)``)."""
    if type(call.func) in (cst.Name, cst.Attribute) and qualname(call.func) in _DATASET_WRAPPERS:
        return [arg.value for arg in call.args if not arg.star]
    return [arg.value for arg in call.args if arg.keyword is not None and "transform" in arg.keyword.value.lower()]


def _in_body(held: cst.CSTNode, params: cst.Parameters) -> bool:
    """The lambda is not one of the parameters' defaults: a fallback written in the method's body."""
    return not any(node is held for p in (*params.params, *params.kwonly_params) if p.default is not None
                   for node in iter_subtree(p.default))
