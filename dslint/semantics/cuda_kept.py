"""Whether a CUDA value made in a function stays in what the function keeps.

A dataset's ``__init__`` may use the GPU for a while (encode the data once with a model on
the GPU, then bring the result back with ``.cpu()``) without keeping any CUDA data: its
workers then never touch CUDA. ``kept_on_instance(ctx, call)`` follows the value of a call
that puts data on CUDA (``x.cuda()``, ``x.to(device)``, ``torch.zeros(3, device=...)``) up
through the expressions that carry it and through the local names it is bound to, and
answers whether it reaches:

* ``self`` -- assigned to an attribute of the instance or an entry of one, added to a
  container the instance holds (``self.xs.append(v)``), or moved in place on an object the
  instance holds (``self.model.cuda()``);
* the function's caller -- returned or yielded.

It stops, and the value is not kept, where it turns into something without CUDA data:
``.cpu()``, ``.numpy()``, ``.item()``, ``.tolist()``, ``.shape``/``.dtype``/``.device``,
``float()``/``int()``/``len()``, a comparison or a test; where it is dropped (an expression
statement, ``del``, a ``with`` item bound to no name); where the name is bound again before
it is read (``reaching``: ``x = x.cuda()``, then ``x = f(x).cpu()``, then ``self.xs.append(x)``); and where it is handed to the
constructor of a project class whose ``__init__`` does not keep that argument on ``self``
(``device_flow``). Anything else that takes it in (a model call, ``torch.cat``, an unknown
call, a container) carries it on. What cannot be followed (a nested function that reads
the name, a binding it cannot see through) counts as kept: the question errs towards the
finding.

A dataset's ``__init__`` may also keep a CUDA value for the main process alone (class
weights the training script hands to its loss). ``main_process_only_attribute(ctx, call)``
answers whether the statement of ``call`` stores its value in one attribute of the instance,
and nothing else, that no method but ``__init__`` reads, nor may (``attr_reads``, any file).

API: ``kept_on_instance(ctx, call) -> bool``, ``main_process_only_attribute(ctx, call) -> bool``.
"""

from __future__ import annotations

import libcst as cst

from dslint.semantics.instance_state import is_read
from dslint.semantics.reaching import rebound_between
from dslint.semantics.regions import self_attr
from dslint.semantics.walk import iter_subtree

# methods whose result holds no CUDA data
_TO_HOST = frozenset({"cpu", "numpy", "item", "tolist", "size", "dim", "numel", "element_size", "get_device"})
# attributes that are no CUDA data
_PLAIN_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad"})
# builtins whose result holds no CUDA data
_PLAIN_CALLS = frozenset({
    "builtins.float", "builtins.int", "builtins.bool", "builtins.len", "builtins.str", "builtins.repr",
    "builtins.print", "builtins.isinstance", "builtins.hasattr", "builtins.id", "builtins.type",
})
# methods that put their argument into the container they are called on
_ADDS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "put", "appendleft"})
# expressions whose value carries an operand's data on
_CARRIERS = (cst.BinaryOperation, cst.UnaryOperation, cst.IfExp, cst.BooleanOperation, cst.Await,
             cst.List, cst.Tuple, cst.Set, cst.Dict, cst.StarredElement, cst.Element, cst.DictElement,
             cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_DEPTH = 8


def kept_on_instance(ctx, call: cst.Call) -> bool:
    """Does the CUDA value ``call`` makes reach ``self`` or the function's caller?"""
    func = call.func
    statement = ctx.parent(call)
    if isinstance(func, cst.Attribute) and func.attr.value in ("cuda", "to") and isinstance(statement, cst.Expr):
        # ``self.model.cuda()`` / ``model.to(device)`` as a statement: a module moves in place
        receiver = _root(func.value)
        if isinstance(receiver, cst.Name):
            return _self_rooted(ctx, func.value) or _name_kept(ctx, receiver, call, set(), 0)
        return True
    return _kept(ctx, call, set(), 0)


def _kept(ctx, node: cst.CSTNode, seen: set, depth: int) -> bool:
    if depth > _DEPTH:
        return True
    parent = ctx.parent(node)
    if parent is None:
        return True
    if isinstance(parent, cst.Attribute) and parent.value is node:
        outer = ctx.parent(parent)
        if isinstance(outer, cst.Call) and outer.func is parent:
            return parent.attr.value not in _TO_HOST and _kept(ctx, outer, seen, depth + 1)
        return parent.attr.value not in _PLAIN_ATTRS and _kept(ctx, parent, seen, depth + 1)
    if isinstance(parent, cst.Call) and parent.func is node:  # a model on CUDA, called: its output is on CUDA
        return _kept(ctx, parent, seen, depth + 1)
    if isinstance(parent, cst.Arg):
        return _argument_kept(ctx, parent, seen, depth)
    if isinstance(parent, cst.Subscript):
        return parent.value is node and _kept(ctx, parent, seen, depth + 1)
    if isinstance(parent, cst.SubscriptElement) or isinstance(parent, cst.Index):
        return False  # an index into something else
    if isinstance(parent, (cst.CompFor, cst.CompIf)):
        return _kept(ctx, ctx.parent(parent), seen, depth + 1) if parent.iter is node else False
    if isinstance(parent, _CARRIERS):
        if isinstance(parent, (cst.IfExp, cst.BooleanOperation)) and getattr(parent, "test", None) is node:
            return False
        return _kept(ctx, parent, seen, depth + 1)
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.If, cst.While, cst.Assert, cst.Del, cst.Expr,
                           cst.FormattedStringExpression)):
        return False
    if isinstance(parent, cst.WithItem):
        return parent.asname is not None
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
        return any(_target_kept(ctx, target, parent, seen, depth) for target in targets)
    return True  # returned, yielded, or a form not followed


def _argument_kept(ctx, arg: cst.Arg, seen: set, depth: int) -> bool:
    call = ctx.parent(arg)
    func = call.func
    qualified = ctx.call_name(call)
    if qualified in _PLAIN_CALLS:
        return False
    if isinstance(func, cst.Attribute) and (func.attr.value in _ADDS or func.attr.value == "__init__"):
        return func.attr.value == "__init__" or _container_kept(ctx, func.value, call, seen, depth)
    if isinstance(func, cst.Attribute) and (_self_rooted(ctx, func.value) or _is_self(ctx, func.value)):
        return True  # a method of the instance, or of an object it holds, may keep it
    if qualified and qualified.rsplit(".", 1)[-1][:1].isupper() and not qualified.startswith(("torch.", "builtins.")) \
            and ctx.view.in_project(qualified):
        slot = arg.keyword.value if arg.keyword is not None else _position(call, arg)
        if slot is None:
            return True
        if ctx.view.kept_attribute(qualified, slot) is None:
            return False  # a project class that does not keep this argument on its instance
    return _kept(ctx, call, seen, depth + 1)


def _position(call: cst.Call, arg: cst.Arg):
    for position, each in enumerate(call.args):
        if each.star or each.keyword is not None:
            return None
        if each is arg:
            return position
    return None


def _container_kept(ctx, container: cst.BaseExpression, site: cst.CSTNode, seen: set, depth: int) -> bool:
    """A value added to ``container``: kept when the container is the instance's or is kept."""
    if _self_rooted(ctx, container):
        return True
    root = _root(container)
    return not isinstance(root, cst.Name) or _name_kept(ctx, root, site, seen, depth + 1)


def _target_kept(ctx, target: cst.CSTNode, statement: cst.CSTNode, seen: set, depth: int) -> bool:
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_target_kept(ctx, e.value, statement, seen, depth) for e in target.elements)
    if isinstance(target, cst.StarredElement):
        return _target_kept(ctx, target.value, statement, seen, depth)
    if isinstance(target, cst.Name):
        return _name_kept(ctx, target, statement, seen, depth + 1)
    if isinstance(target, (cst.Attribute, cst.Subscript)):
        return _container_kept(ctx, target, statement, seen, depth)
    return True


def _name_kept(ctx, name: cst.Name, site: cst.CSTNode, seen: set, depth: int) -> bool:
    """Does a read of the local ``name`` in the function of ``site`` keep its value?"""
    func = ctx.enclosing_function(site, through_lambdas=False)
    if func is None:
        return True  # module level: the name itself outlives the statement
    key = (id(func), name.value)
    if key in seen:
        return False  # (already being followed)
    seen.add(key)
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            if any(isinstance(n, cst.Name) and n.value == name.value for n in iter_subtree(node)):
                return True  # read by a nested scope: not followed
            continue
        if not isinstance(node, cst.Name) or node.value != name.value or not is_read(ctx, node):
            continue
        if rebound_between(ctx, site, node, name.value):
            continue  # the name holds another value there (``x = f(x).cpu()`` first)
        if _kept(ctx, node, seen, depth):
            return True
    return False


def _root(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr


def _is_self(ctx, expr: cst.BaseExpression) -> bool:
    func = _method(ctx, expr)
    return isinstance(expr, cst.Name) and func is not None and expr.value == ctx.regions.get(func).self_param


def _method(ctx, node: cst.CSTNode):
    func = ctx.enclosing_function(node)
    while func is not None and ctx.method_class(func) is None:
        func = ctx.enclosing_function(func)
    return func


def _self_rooted(ctx, expr: cst.BaseExpression) -> bool:
    """``self.x``, ``self.x[k]``, ``self.x.y`` in a method (``self`` its first parameter)."""
    root = _root(expr)
    if not isinstance(root, cst.Name) or root is expr:
        return False
    return _is_self(ctx, root)


def main_process_only_attribute(ctx, call: cst.Call) -> bool:
    """Is the CUDA value ``call`` makes in a dataset's ``__init__`` stored, by its statement alone,
    in one attribute that no method other than ``__init__`` reads (in any file)?"""
    func = ctx.enclosing_function(call, through_lambdas=False)
    owner = ctx.method_class(func) if func is not None and func.name.value == "__init__" else None
    site = _stored_attribute(ctx, call, func) if owner is not None else None
    if site is None:
        return False
    self_param, attr = site.value.value, site.attr.value
    for node in iter_subtree(func.body):
        if node is not site and self_attr(node, self_param) == attr:
            return False  # ``__init__`` itself reads it again (``self.b = self.a * 2``) or stores it again
    return not ctx.view.read_after_construction(ctx.qualname_of_def(owner), attr)


def _stored_attribute(ctx, call: cst.Call, func: cst.FunctionDef):
    """``self.a`` of ``self.a = <expression holding call>`` and of ``self.a.cuda()`` as a statement; None
    when the statement may put the value anywhere else (a walrus, a call on ``self`` that may keep
    its argument, several targets)."""
    self_param = ctx.regions.get(func).self_param
    node = call
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, (cst.Assign, cst.AnnAssign, cst.Expr)):
            node = ancestor
            break
        if isinstance(ancestor, (cst.NamedExpr, cst.BaseSuite, cst.FunctionDef, cst.Lambda)):
            return None
        caller = ctx.parent(ancestor) if isinstance(ancestor, cst.Arg) else None
        if isinstance(caller, cst.Call) and (_self_rooted(ctx, caller.func) or _is_self(ctx, caller.func)):
            return None  # ``self.prepare(x.cuda())``: a method of the instance may keep it elsewhere
    if isinstance(node, cst.Expr):
        moved = call.func
        if node.value is call and isinstance(moved, cst.Attribute) and moved.attr.value in ("cuda", "to"):
            return moved.value if self_attr(moved.value, self_param) else None
        return None
    if isinstance(node, cst.Assign):
        if len(node.targets) != 1:
            return None
        target = node.targets[0].target
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
        target = node.target
    else:
        return None
    return target if self_attr(target, self_param) else None
