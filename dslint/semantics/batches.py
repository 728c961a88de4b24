"""What a loop over a DataLoader does with its batches.

* ``BatchViews`` follows which names hold the batch, or a view of it, through the
  loop body in execution order: names bound to it, its items and slices, methods
  called on it, unpacking and loops over it. A name rebound to anything else
  (``x = preprocess(x)``, ``x = torch.stack(x)``, ``x = x / 255``) holds a new
  object made in the main process. Subclasses look at each call (``on_call``).
* ``evaluation_loop``: the loop evaluates (no training step; gradients off, or a function
  that puts the model in ``eval()`` mode).
* ``training_step``: the loop trains, i.e. calls ``.backward()`` or
  ``optimizer.step()`` on every iteration (in its body or a same-module helper).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from dslint.semantics.loader_roles import eval_name
from dslint.semantics.names import dotted_parts, dotted_text
from dslint.semantics.sampler_passes import iterated_by
from dslint.semantics.scopes import COMPREHENSIONS, names_used
from dslint.semantics.values import possible

_TRANSPARENT_CALLS = frozenset({"enumerate", "zip", "iter", "list", "tuple", "reversed", "sorted", "next"})


class BatchViews:
    """Follows which names hold the batch (or a view of it) through a loop body, in order.

    ``visit(loop.body)`` walks the body in execution order; each call met while
    ``found`` is None goes to ``on_call`` with the names that hold the batch there.
    """

    def __init__(self, ctx, index, tainted) -> None:
        self.ctx = ctx
        self.index = index
        self.tainted = tainted
        self.found: Optional[object] = None

    # what holds the batch
    def derived(self, expr, tainted=None) -> bool:
        tainted = self.tainted if tainted is None else tainted
        if isinstance(expr, cst.Name):
            return expr.value in tainted
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return self.derived(expr.value, tainted)
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute):
                return self.derived(expr.func.value, tainted)  # a method of the batch: .float(), .items()
            if isinstance(expr.func, cst.Name) and expr.func.value in _TRANSPARENT_CALLS:
                return any(self.derived(arg.value, tainted) for arg in expr.args)
            return False  # preprocess(x), torch.stack(x): a new tensor
        if isinstance(expr, (cst.Tuple, cst.List)):
            return any(self.derived(e.value, tainted) for e in expr.elements)
        if isinstance(expr, cst.IfExp):
            return self.derived(expr.body, tainted) and self.derived(expr.orelse, tainted)
        if isinstance(expr, COMPREHENSIONS):
            local = set(tainted)
            comp = expr.for_in
            while comp is not None:
                self._bind_iter(comp.target, comp.iter, local)
                comp = comp.inner_for_in
            elt = expr.value if isinstance(expr, cst.DictComp) else expr.elt
            return self.derived(elt, local)
        return False

    def _bind(self, target, value, tainted) -> None:
        if isinstance(target, cst.Name):
            if self.derived(value, tainted):
                tainted.add(target.value)
            else:
                tainted.discard(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            if (
                isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == len(elements)
                and not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements))
            ):
                for sub, val in zip(elements, [e.value for e in value.elements]):
                    self._bind(sub, val, tainted)
            else:
                keep = self.derived(value, tainted)
                for name in names_used(target):
                    (tainted.add if keep else tainted.discard)(name)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, value, tainted)

    def _bind_iter(self, target, iterable, tainted) -> None:
        keep = self.derived(iterable, tainted)
        for name in names_used(target):
            (tainted.add if keep else tainted.discard)(name)

    # execution order
    def visit(self, node, tainted=None, depth: int = 0) -> None:
        tainted = self.tainted if tainted is None else tainted
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) or depth > 150:
            return  # nested scopes are not the loop body; absurdly deep expressions are left alone
        if isinstance(node, cst.Assign):
            self.visit(node.value, tainted, depth + 1)
            for target in node.targets:
                self._bind(target.target, node.value, tainted)
            return
        if isinstance(node, (cst.AnnAssign, cst.NamedExpr)):
            if node.value is not None:
                self.visit(node.value, tainted, depth + 1)
                self._bind(node.target, node.value, tainted)
            return
        if isinstance(node, cst.AugAssign):
            self.visit(node.value, tainted, depth + 1)
            return
        if isinstance(node, cst.For):
            self.visit(node.iter, tainted, depth + 1)
            self._bind_iter(node.target, node.iter, tainted)
            self.visit(node.body, tainted, depth + 1)
            if node.orelse is not None:
                self.visit(node.orelse, tainted, depth + 1)
            return
        if isinstance(node, COMPREHENSIONS):
            local = set(tainted)
            comp = node.for_in
            while comp is not None:
                self.visit(comp.iter, local, depth + 1)
                self._bind_iter(comp.target, comp.iter, local)
                for cond in comp.ifs:
                    self.visit(cond, local, depth + 1)
                comp = comp.inner_for_in
            if isinstance(node, cst.DictComp):
                self.visit(node.key, local, depth + 1)
                self.visit(node.value, local, depth + 1)
            else:
                self.visit(node.elt, local, depth + 1)
            return
        for child in node.children:
            self.visit(child, tainted, depth + 1)
        if isinstance(node, cst.Call) and self.found is None:
            self.on_call(node, tainted)

    def on_call(self, call: cst.Call, tainted) -> None:
        """A call in the body (in execution order, after its arguments); sets ``found`` to stop looking."""


def training_step(ctx, index, loop) -> Optional[str]:
    """``.backward()`` or ``optimizer.step()`` in the loop body (or a function's body) or a same-module
    helper it calls."""
    for call in index.loop_calls(loop, unconditional=True):
        func = call.func
        if not isinstance(func, cst.Attribute):
            continue
        if func.attr.value == "backward":
            return ".backward()"
        if func.attr.value == "step" and is_optimizer(ctx, index, func.value):
            return f"{ctx.code(func.value).strip()}.step()"
    return None


def is_optimizer(ctx, index, expr) -> bool:
    parts = dotted_parts(expr)
    if parts and ("optim" in parts[-1].lower() or parts[-1] in ("opt", "optimiser")):
        return True
    nodes = index.value_nodes(expr) or []
    return any(
        isinstance(n, cst.Call)
        and (ctx.call_name(n) or "").startswith("torch.optim.")
        and "lr_scheduler" not in (ctx.call_name(n) or "")
        for n in nodes
    )


_EVAL_SPLITS = frozenset({"test", "val", "valid", "validation", "dev", "eval", "evaluation"})


def evaluation_split(ctx, index, dataset) -> Optional[str]:
    """The dataset is an evaluation split on every path: built with ``train=False`` or
    ``split="test"``/``"val"``/... (torchvision, Hugging Face and most dataset classes spell it
    so), as a literal or as a value every source the code shows gives (``values.possible``: a
    parameter whose default and callers all pass ``"val"``); the keyword, for a message. None otherwise."""
    nodes = index.value_nodes(dataset) if dataset is not None else None
    if not nodes:
        return None
    found = None
    for node in nodes:
        if not isinstance(node, cst.Call):
            return None
        shown = None
        for arg in node.args:
            if arg.keyword is None or arg.keyword.value not in ("train", "split"):
                continue
            values = [v.value for v in possible(ctx, arg.value).values]
            if not values:
                continue
            if arg.keyword.value == "train" and all(v is False for v in values):
                shown = "train=False"
            elif arg.keyword.value == "split" and all(isinstance(v, str) and v.lower() in _EVAL_SPLITS for v in values):
                shown = f"split={values[0]!r}"
        if shown is None:
            return None
        found = found or shown
    return found


def fresh_iterator_advances(ctx) -> list:
    """(the call that takes one item, the iterated expression) for each expression that makes a
    new iterator and takes its first item: ``next(iter(x))``, ``iter(x).next()`` (the old
    iterator API), ``iter(x).__next__()`` and ``next(x.__iter__())``; ``x`` is a name or attribute.
    Computed once per file (the loader rules ask it for every loader)."""
    return ctx.memo(("batches.fresh_iterator_advances",), lambda: list(_advances(ctx)))


def _advances(ctx):
    for call in ctx.nodes(cst.Call):
        inner = None
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("next", "__next__") and not call.args:
            inner = func.value
        elif ctx.call_name(call) == "builtins.next" and len(call.args) == 1 and call.args[0].keyword is None:
            inner = call.args[0].value
        if not isinstance(inner, cst.Call):
            continue
        target = iterated_by(ctx, inner)
        if isinstance(target, (cst.Name, cst.Attribute)):
            yield call, target


def evaluation_named(ctx, bound) -> Optional[str]:
    """The loader is kept under a name that says evaluation (``test_loader = DataLoader(...)``,
    ``self.val_dl = ...``, ``loaders["test"] = ...``) or built over one (``DataLoader(test_set)``, also through
    a local name bound once to a ``Subset`` of one: ``picked = Subset(test_set, ids)``,
    tokens ``val``/``valid``/``eval``/``test``...: ``loader_roles.eval_name``): the name, for a
    message. None otherwise."""
    names = []
    parent = ctx.parent(bound.call)
    if isinstance(parent, (cst.Assign, cst.AnnAssign)):
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        for target in targets:
            if isinstance(target, (cst.Name, cst.Attribute)):
                names.append((target.value if isinstance(target, cst.Name) else target.attr.value))
            elif isinstance(target, cst.Subscript) and len(target.slice) == 1:
                key = ctx.literal(getattr(target.slice[0].slice, "value", None))
                names += [key] if isinstance(key, str) else []
    dataset = bound.expr("dataset")
    for _ in range(3):  # (through local names bound once to a ``Subset`` of one: ``Subset(test_set, picked)``)
        if isinstance(dataset, (cst.Name, cst.Attribute)):
            names.append(dataset.value if isinstance(dataset, cst.Name) else dataset.attr.value)
        value = ctx.single_assignment(dataset) if isinstance(dataset, cst.Name) else None
        if not (isinstance(value, cst.Call) and ctx.call_name(value) in _SUBSETS and value.args and not value.args[0].star):
            break
        dataset = value.args[0].value
    return next((f"`{name}`" for name in names if eval_name(name)), None)


_SUBSETS = frozenset({"torch.utils.data.Subset", "torch.utils.data.dataset.Subset"})


def evaluation_only(ctx, index, loader, advances) -> bool:
    """Every use of the loader this file shows is evaluation or a look at a batch, and it goes
    nowhere else: it is iterated (at least once) only in loops with gradients off
    (``torch.no_grad``/``inference_mode``, or after ``model.eval()`` in the same function with no
    training step) or in a loop that ends with ``break`` (one batch: ``runs_once``), or advanced
    by ``next(it)`` in such a loop of an evaluating function over ``it = iter(loader)`` kept there
    (``_evaluated_iterator``), or by ``next(iter(loader))`` outside any loop (``advances``: the
    (call, iterated expression) pairs of the file), and never handed to a function of another
    module nor returned from a function that nothing here calls."""
    loops = index.loops_of(loader) + index.possible_loops(loader)  # (a loop that may iterate it uses it too)
    peeks = [call for call, target in advances if any(r.loader is loader for r in index.resolve_loader(target))]
    peeked = {id(call.args[0].value) if call.args else id(call.func.value) for call in peeks}
    kept = [call for call in ctx.nodes(cst.Call) if ctx.call_name(call) == "builtins.iter" and id(call) not in peeked
            and call.args and any(r.loader is loader for r in index.resolve_loader(call.args[0].value))]
    if not loops and not peeks and not kept:
        return False
    for call in peeks:
        found = index.step_loop(call)
        if found is not None and not _once_per_epoch(index, call, found):
            return False
    if not all(_inspects(ctx, index, loop) or evaluation_loop(ctx, index, loop) for loop in loops):
        return False
    if not all(_evaluated_iterator(ctx, index, call) for call in kept):
        return False  # an iterator kept (``it = iter(loader)``) is advanced out of sight
    for comp in ctx.nodes(cst.CompFor):  # ``sum(... for x, y in loader)``: evaluation only under no_grad
        if any(r.loader is loader for r in index.resolve_loader(comp.iter)) and not _no_grad_around(ctx, index, comp):
            return False
    return not _escapes(ctx, index, loader)


def _evaluated_iterator(ctx, index, call: cst.Call) -> bool:
    """``it = iter(loader)`` in a function that evaluates (``_evaluates``), whose every other use there is
    ``len(it)`` or ``next(it)`` in a loop that makes no training step (an inference script's sampling loop)."""
    assign, func = ctx.parent(call), ctx.enclosing_function(call)
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)):
        return False
    if func is None or not _evaluates(index, func):
        return False
    target = assign.targets[0].target
    uses = [n for n in index.body_nodes(func.body) if isinstance(n, cst.Name) and n.value == target.value and n is not target]
    for use in uses:
        arg = ctx.parent(use)
        if (isinstance(arg, cst.Attribute) and arg.attr is use) or (isinstance(arg, cst.Arg) and arg.keyword is use):
            continue  # (``th.utils.data``, ``f(data=...)``: not the name)
        used_by = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        name = ctx.call_name(used_by) if isinstance(used_by, cst.Call) and len(used_by.args) == 1 else None
        if name not in ("builtins.next", "builtins.len"):
            return False
        loop = next((a for a in ctx.ancestors(used_by) if isinstance(a, (cst.For, cst.While))), None)
        if name == "builtins.next" and (loop is None or training_step(ctx, index, loop)):
            return False
    return bool(uses)


def _once_per_epoch(index, peek: cst.Call, found) -> bool:
    """The loop that runs ``peek`` on every iteration (``found``: ``index.step_loop(peek)``) is the
    epoch loop of a loop over another loader (``for epoch ...: for x in train_loader: ...`` then
    ``next(iter(val_loader))``): one batch per epoch, a preview beside the training, not a
    training step of its own."""
    if found[1]:
        return False
    around = found[0]
    return any(index.epoch(loop) is around and not index.inside(peek, loop.loop) for loop in index.loops)


def runs_once(loop: cst.CSTNode) -> bool:
    """A ``for`` loop whose body ends with an unconditional ``break``: it looks at one batch."""
    body = loop.body if isinstance(loop, cst.For) else None
    last = body.body[-1] if isinstance(body, cst.IndentedBlock) and body.body else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in last.body)


#: methods a loop may call and still only look at its batches: sizes, logging and conversions to host values
_LOOK_METHODS = frozenset({"size", "dim", "numel", "keys", "items", "info", "debug", "format", "numpy", "tolist", "item"})
#: libraries whose functions only compute on the values they are given (no model, no device)
_ARRAY_LIBRARIES = ("numpy.", "math.", "statistics.", "os.path.")
#: functions that write what they are given to an image file: a loop that only writes its batches exports them
_IMAGE_WRITERS = frozenset({
    "cv2.imwrite", "imageio.imwrite", "imageio.imsave", "imageio.v2.imwrite", "imageio.v3.imwrite",
    "skimage.io.imsave", "matplotlib.pyplot.imsave", "torchvision.utils.save_image",
})
_CONTAINER_METHODS = frozenset({"append", "extend", "add", "update", "setdefault"})
_CONTAINERS = (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)


def only_looks(ctx, index, loop: cst.CSTNode) -> bool:
    """A loop that only looks at its batches, so nothing (no model, no GPU) waits on them: it
    prints or logs them and their sizes (``for x, y in loader: print(x.shape)``, a smoke test),
    tallies them (``counts.append(np.count_nonzero(y))``, a data check), or writes them out as
    image files (``cv2.imwrite(os.path.join(out, f"{i}.png"), x.numpy())``, an export). Each
    call it makes is one of those: a builtin, a size, log or host-conversion method (``.numpy()``,
    ``.item()``), a function of numpy, ``math``, ``statistics`` or ``os.path``, an image writer, or
    an ``append``/``update``... of a list, dict or set the code builds as a literal; at least one
    prints, logs, tallies or writes. Any other call (a model, a project helper, ``.cuda()``) is work."""
    calls = index.loop_calls(loop, depth=0)
    shown = False
    for call in calls:
        func, name = call.func, ctx.call_name(call) or ""
        if name == "builtins.print" or name in _IMAGE_WRITERS:
            shown = True
        elif isinstance(func, cst.Attribute) and func.attr.value in _LOOK_METHODS:
            shown = shown or func.attr.value in ("info", "debug")
        elif name.startswith(_ARRAY_LIBRARIES) or name.startswith("builtins.") or _star_spelled(ctx, name, func):
            continue
        elif isinstance(func, cst.Attribute) and func.attr.value in _CONTAINER_METHODS and _built_container(index, func.value):
            shown = True
        else:
            return False
    return shown


def _star_spelled(ctx, name: str, func) -> bool:
    """``os.path.join(...)`` where ``os`` comes from a star import (the name resolves to this
    module): a function of those libraries all the same."""
    spelled = dotted_text(func)
    return name == f"{ctx.names.modname}.{spelled}" and bool(spelled) and spelled.startswith(_ARRAY_LIBRARIES)


def _built_container(index, expr) -> bool:
    nodes = index.value_nodes(expr) if isinstance(expr, cst.Name) else None
    return bool(nodes) and all(isinstance(node, _CONTAINERS) for node in nodes)


def _no_grad_around(ctx, index, node) -> bool:
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.With) and any(index.is_no_grad(item.item) for item in ancestor.items):
            return True
        if isinstance(ancestor, cst.FunctionDef):
            return any(index.is_no_grad(d.decorator) for d in ancestor.decorators)
    return False


def evaluation_loop(ctx, index, loop) -> bool:
    """The loop evaluates: it makes no training step, and it runs under ``no_grad``/``inference_mode``
    or sits in a function that calls ``.eval()`` and never ``.train()``. A loop that is a call
    (``iter(loader)`` in a wrapper, a callee that iterates) evaluates under ``no_grad``/
    ``inference_mode``, or when a function between it and its epoch loop is such an evaluation
    function (``validate(val_loader)`` wraps it in a prefetcher)."""
    if isinstance(loop.loop, (cst.For, cst.While)):
        if training_step(ctx, index, loop.loop):
            return False
        if index.is_eval(loop):
            return True
        func = ctx.enclosing_function(loop.loop)
        return func is not None and _evaluates(index, func)
    if index.is_eval(loop):
        return True
    return any(_evaluates(index, func) and training_step(ctx, index, func) is None
               for func, _ in index.epoch_functions(loop))


def _inspects(ctx, index, loop) -> bool:
    """A loop with no training step that stops after one batch or only looks at its batches."""
    if not isinstance(loop.loop, (cst.For, cst.While)) or training_step(ctx, index, loop.loop):
        return False
    return runs_once(loop.loop) or only_looks(ctx, index, loop.loop)


def _evaluates(index, func: cst.FunctionDef) -> bool:
    """``func`` calls ``.eval()`` and never ``.train()`` (a model put in evaluation mode)."""
    modes = [n.func.attr.value for n in index.body_nodes(func.body) if isinstance(n, cst.Call)
             and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("eval", "train") and not n.args]
    return "eval" in modes and "train" not in modes


def _escapes(ctx, index, loader) -> bool:
    for call in ctx.nodes(cst.Call):
        if index.wrapper_kind(call) or index.call_target(call) is not None or index.process_target(call) is not None:
            continue  # iterated where the value flow follows it
        if (ctx.call_name(call) or "").startswith("builtins."):
            continue
        for arg in call.args:
            if isinstance(arg.value, (cst.Name, cst.Attribute, cst.Tuple, cst.List)):
                exprs = [e.value for e in arg.value.elements] if isinstance(arg.value, (cst.Tuple, cst.List)) else [arg.value]
                if any(r.loader is loader for e in exprs for r in index.resolve_loader(e)):
                    return True
    for func in ctx.nodes(cst.FunctionDef):
        if index.callers(func):
            continue
        for ret in index.returns(func) or ():
            exprs = [e.value for e in ret.elements] if isinstance(ret, (cst.Tuple, cst.List)) else [ret]
            if any(r.loader is loader for e in exprs for r in index.resolve_loader(e)):
                return True
    return False
