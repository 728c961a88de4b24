"""What a call constructs: models, pretrained files, transforms, tokenizers, vocabularies.

torch's own ``nn.Module`` classes (``torch.nn.Linear``) and project classes derived
from ``nn.Module`` in any file (asked of the project index), model builders
(``torchvision.models.resnet50``, ``timm.create_model``), any ``*.from_pretrained``,
torchvision/albumentations transforms and any ``Compose(...)`` pipeline (a library's
or the project's own), tokenizer and vocabulary builders
(``spacy.load``, ``torchtext`` vocabularies, ``Counter`` over a collection) and
``{tok: i for i, tok in enumerate(tokens)}``.

API: ``construction_kind(ctx, call)`` and ``project_module_kind(ctx, call)`` answer
``(kind, qualified name or None)``; ``vocab_comprehension(ctx, comp)``;
``maybe_model_builder(call)`` is a cheap syntactic pre-check.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from dslint.semantics import dataflow as df
from dslint.semantics.call_facts import last_name
from dslint.semantics.calls import UNKNOWN
from dslint.semantics.walk import iter_subtree

NOT_MODULES = frozenset({"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "LinearCrossEntropyOptions"})
MODULE_ROOTS = frozenset(
    {"lightning.LightningModule", "lightning.pytorch.LightningModule", "pytorch_lightning.LightningModule"}
    | {"transformers.PreTrainedModel"}
)
TRANSFORM_PREFIXES = ("torchvision.transforms.", "albumentations.")
TRANSFORM_CONTAINERS = frozenset({"Compose", "RandomApply", "RandomChoice", "RandomOrder", "OneOf", "SomeOf", "Sequential"})
NOT_TRANSFORMS = frozenset({"InterpolationMode"})
TOKENIZER_CALLS = frozenset(
    {"torchtext.vocab.build_vocab_from_iterator", "torchtext.vocab.vocab", "torchtext.vocab.Vocab", "torchtext.vocab.GloVe"}
    | {"torchtext.vocab.FastText", "torchtext.vocab.Vectors", "torchtext.vocab.CharNGram"}
    | {"torchtext.data.utils.get_tokenizer", "torchtext.data.get_tokenizer", "spacy.load", "spacy.blank"}
    | {"transformers.pipeline", "tokenizers.Tokenizer.from_file", "sentencepiece.SentencePieceProcessor"}
    | {"collections.Counter"}
)
NOT_MODEL_BUILDERS = frozenset({"get_weight", "get_model_weights", "list_models", "get_model_builder", "Weights", "WeightsEnum"})


def torch_module_class(qualified: Optional[str]) -> bool:
    """``torch.nn.Linear``, ``torch.nn.modules.conv.Conv2d``: torch's own ``nn.Module`` classes."""
    if not qualified or not qualified.startswith("torch.nn."):
        return False
    parts = qualified[len("torch.nn.") :].split(".")
    last = parts[-1]
    if not last[:1].isupper() or last in NOT_MODULES:
        return False
    return len(parts) == 1 or parts[0] == "modules"


def model_builder(qualified: str) -> bool:
    """``torchvision.models.resnet50()``, ``timm.create_model()``: functions that build an ``nn.Module``."""
    if qualified in ("timm.create_model", "timm.models.create_model"):
        return True
    if not qualified.startswith("torchvision.models."):
        return False
    last = qualified.rsplit(".", 1)[-1]
    return not (last in NOT_MODEL_BUILDERS or last.endswith("_Weights") or "feature_extraction" in qualified)


def transform_class(qualified: str) -> Optional[str]:
    """The class name of a torchvision/albumentations transform, or None."""
    if not qualified.startswith(TRANSFORM_PREFIXES):
        return None
    parts = qualified.split(".")
    last = parts[-1]
    if not last[:1].isupper() or last in NOT_TRANSFORMS or "functional" in parts:
        return None
    return last


def project_module_class(ctx, qualified: str) -> bool:
    """A class derived from ``nn.Module`` (or a Lightning/transformers model), in any file."""

    def compute() -> bool:
        bases = ctx.view.external_bases(qualified)
        return bool(bases) and any(torch_module_class(b) or b in MODULE_ROOTS for b in bases)

    return ctx.memo(("constructions.module_class", qualified), compute)


def construction_kind(ctx, call: cst.Call) -> Optional[Tuple[str, Optional[str]]]:
    """(kind, qualified name) of a call that builds something ("module", "pretrained",
    "transform", "tokenizer", "vocab"), or None. Resolves names only: project classes
    are ``project_module_kind``'s question."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained":
        return "pretrained", None
    qualified = ctx.call_name(call)
    if not qualified or qualified.startswith("builtins."):
        return None
    transform = transform_class(qualified)
    if transform is None and qualified.rsplit(".", 1)[-1] == "Compose" and call.args:
        transform = "Compose"  # any library's or the project's own pipeline container
    if transform is not None:
        if not call.args and transform not in TRANSFORM_CONTAINERS:
            return None  # `ToTensor()`: nothing is set up
        return "transform", qualified
    if qualified in TOKENIZER_CALLS:
        if not call.args:
            return None
        if qualified == "collections.Counter" and ctx.literal(call.args[0].value) is not UNKNOWN:
            return None
        return ("vocab" if qualified == "collections.Counter" else "tokenizer"), qualified
    if qualified.startswith("transformers.") and "Tokenizer" in qualified.rsplit(".", 1)[-1] and call.args:
        return "tokenizer", qualified
    if torch_module_class(qualified) or model_builder(qualified):
        return "module", qualified
    return None


def project_module_kind(ctx, call: cst.Call) -> Optional[Tuple[str, Optional[str]]]:
    """A project class derived from ``nn.Module`` (in any file), constructed (asks the project index)."""
    qualified = ctx.call_name(call)
    if not qualified or qualified.startswith("builtins.") or not qualified.rsplit(".", 1)[-1][:1].isupper():
        return None
    if project_module_class(ctx, qualified):
        return "module", qualified
    return None


def maybe_model_builder(call: cst.Call) -> bool:
    """Cheap pre-check: ``models.resnet50(...)``, ``timm.create_model(...)`` (resolved later)."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value == "create_model" or (
            isinstance(func.value, (cst.Name, cst.Attribute)) and last_name(func.value) in ("models", "tvm", "torchvision")
        )
    return isinstance(func, cst.Name)


def vocab_comprehension(ctx, comp: cst.DictComp) -> bool:
    """``{tok: i for i, tok in enumerate(self.tokens)}`` over an index-invariant collection."""
    loop = comp.for_in
    if loop.inner_for_in is not None or loop.ifs:
        return False
    if not isinstance(loop.iter, cst.Call) or ctx.call_name(loop.iter) != "builtins.enumerate" or not loop.iter.args:
        return False
    target = loop.target
    if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
        return False
    names = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
    if len(names) != 2:
        return False
    key, value = comp.key, comp.value
    if not (isinstance(key, cst.Name) and isinstance(value, cst.Name) and {key.value, value.value} == set(names)):
        return False
    return not df.depends_on_sample(ctx, loop.iter)


def stored_factory(ctx, call: cst.Call) -> Optional[cst.Call]:
    """``self.make(cfg)(sample)``: a callable stored on the object (not a method of its
    class: a value given at construction, like a ``transform`` argument) is called
    with the same arguments for every sample, and what it returns is applied to the
    sample at once. The stored value is then a factory, and the object it builds
    (a transform pipeline) is built again per sample. Returns the factory call.

    Not answered: factories called without arguments, with a per-sample or random
    argument, or a name that is a method of the class (its body is checked where it
    is defined), or whose class has a base outside the project that may define it."""
    inner = call.func
    if not isinstance(inner, cst.Call) or not inner.args or any(arg.star for arg in inner.args):
        return None
    func = ctx.enclosing_function(call)
    owner = ctx.method_class(func) if func is not None else None
    if owner is None or not isinstance(inner.func, cst.Attribute):
        return None
    receiver = inner.func.value
    self_param = ctx.regions.get(func).self_param
    if not (isinstance(receiver, cst.Name) and receiver.value == self_param):
        return None
    if any(df.depends_on_sample(ctx, arg.value) for arg in inner.args):
        return None
    if not any(df.depends_on_sample(ctx, arg.value) for arg in call.args):
        return None
    qualified = f"{ctx.names.modname}.{ctx.qualname_of_def(owner)}"
    answer = ctx.view.class_method(qualified, inner.func.attr.value)
    if not answer or answer.get("defined") is not False:
        return None
    return inner


def in_dependent_pipeline(ctx, call: cst.Call) -> bool:
    """``call`` is taken (``pipeline_takers``) by another construction whose inputs depend on the
    sample (``T.Compose([T.Resize(size_of(idx)), T.Normalize(m, s)])``): the pipeline is built
    per sample as a whole, so its constant parts cannot move to ``__init__`` on their own, and
    they cost microseconds next to the sample-dependent parts. Which parts a collected list gets
    may itself depend on the sample (``if h < size: steps.append(...)``)."""
    return any(construction_kind(ctx, taker) is not None and df.inputs_depend(ctx, taker)
               for taker in pipeline_takers(ctx, call))


def pipeline_takers(ctx, call: cst.Call) -> List[cst.Call]:
    """The calls that take what ``call`` builds: the calls around it in its statement
    (``Compose([ToTensor()])``), and the calls of the same function given the local list it is
    collected in (``steps.append(ToTensor())``, ``steps = [ToTensor()]`` or ``steps += [ToTensor()]``, then ``Compose(steps)``)
    or the local name bound to it (``norm = Normalize(m, s)``, then ``Compose([ToTensor(), norm])``)."""
    takers: List[cst.Call] = []
    collected = None
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            break
        if isinstance(ancestor, cst.Call) and isinstance(ancestor.func, cst.Attribute) and ancestor.func.attr.value in _COLLECTING:
            collected = collected or (ancestor.func.value if isinstance(ancestor.func.value, cst.Name) else None)
        elif isinstance(ancestor, cst.Call):
            takers.append(ancestor)
        if isinstance(ancestor, cst.Assign) and len(ancestor.targets) == 1 and isinstance(ancestor.targets[0].target, cst.Name):
            if isinstance(ancestor.value, (cst.List, cst.Tuple)) or ancestor.value is call:
                collected = collected or ancestor.targets[0].target
        if isinstance(ancestor, cst.AugAssign) and isinstance(ancestor.operator, cst.AddAssign) \
                and isinstance(ancestor.target, cst.Name) and isinstance(ancestor.value, (cst.List, cst.Tuple)):
            collected = collected or ancestor.target  # `steps += [Normalize(m, s)]`
    return takers + (_takers_of_local(ctx, collected) if collected is not None else [])


#: list methods that add their argument to the list
_COLLECTING = frozenset({"append", "extend", "insert"})


def _takers_of_local(ctx, name: cst.Name) -> List[cst.Call]:
    """The calls in the same function given the local ``name`` as an argument, as an element of
    a list or tuple argument, or in a sum of lists (``steps + [norm]``)."""
    func = ctx.enclosing_function(name)
    if func is None:
        return []
    found = []
    for node in iter_subtree(func.body, into_scopes=False):
        if isinstance(node, cst.Call) and any(_names(arg.value, name.value) for arg in node.args):
            found.append(node)
    return found


def _names(expr: cst.CSTNode, name: str) -> bool:
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(_names(element.value, name) for element in expr.elements)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _names(expr.left, name) or _names(expr.right, name)  # `steps + [norm]`
    return isinstance(expr, cst.Name) and expr.value == name
