"""DSL203 per-sample-setup: an object that is the same for every sample (model,
transform, tokenizer) is built for every sample (what a call builds:
``dslint.semantics.constructions``)."""

from __future__ import annotations

import libcst as cst

from dslint.rules.base import WARNING, Rule, Valid
from dslint.rules.per_sample._common import TIME_RATIO, call_text, outermost, setup_message, where
from dslint.semantics import dataflow as df
from dslint.semantics.call_facts import has_star, last_name
from dslint.semantics.constructions import (
    construction_kind,
    in_dependent_pipeline,
    maybe_model_builder,
    pipeline_takers,
    project_module_kind,
    stored_factory,
    vocab_comprehension,
)

SETUP_TAILS = frozenset(
    {"from_pretrained", "Counter", "pipeline", "from_file", "load", "blank", "get_tokenizer", "build_vocab_from_iterator"}
    | {"vocab", "Vocab", "SentencePieceProcessor", "GloVe", "FastText", "Vectors", "CharNGram"}
)


class PerSampleSetup(Rule):
    """
    ## What it does
    Flags construction work that is the same for every sample, done in per-sample code: `nn.Module` construction
    (torch's own `torch.nn` classes and project classes derived from `nn.Module`, across files), any
    `*.from_pretrained(...)`, and tokenizer/vocabulary building (`spacy.load`, `torchtext` vocabularies, `Counter`
    over a fixed corpus, `{tok: i for i, tok in enumerate(tokens)}`). A callable stored on the dataset (not a method
    of its class, e.g. a `transform` argument) that is called with the same arguments for every sample and whose
    result is applied to the sample at once, `self.transform(self.cfg)(image)`, is a factory: the object it builds
    is rebuilt per item.

    ## Preview
    With `--preview`, also transform pipelines built the same for every sample: torchvision/albumentations
    transforms (`T.Compose(...)`) and any library's or the project's own `Compose([...])`. A pipeline is one finding,
    at the `Compose`: its parts (nested in it, or in a local list or name it takes: `.append`, `+=`) are not
    reported apart. Off by default: on torch 2.13 (torchvision 0.28, one thread) building a four-step `Compose`
    (random resized crop, flip, to-tensor, normalize) took 28 µs, under 1% of the 3 ms that decoding and
    transforming a 500x375 JPEG took (`bench/transform_build_cost.py`), and reviewers judged every such finding
    on public code true but not worth a change (none of about sixty).

    ## When it does not fire
    - Constructions whose arguments depend on the sample (`T.RandomCrop(self.sizes[idx])`, `nn.Linear(x.shape[-1],
      8)`) or on a random draw, and constant parts of such a pipeline (`T.Normalize(...)` in a `Compose` whose crop
      size comes from the sample); argument-less transforms such as `T.ToTensor()`.
    - `re.compile`: Python caches compiled patterns (measured 0.7 µs vs 0.4 µs). A stored transform applied directly,
      a factory given the sample, a method; code under an option every loader's dataset leaves off (`if self.vis:`).
    - Objects built in `__init__`, lazily once per worker or in a cached helper; project classes that are not
      `nn.Module`s; code outside datasets; an `except` handler; a dataset whose `__len__` returns `1`.

    ## Why is this bad?
    The object is rebuilt for every item although it never changes. Measured on torch 2.13: building a small
    `nn.Module` per item was 55x slower per item (7.4x per 2-worker epoch); building a vocabulary/tokenizer per item
    was 5,600x slower (10.3x per epoch). `from_pretrained` reads and deserialises weights or vocabulary files from
    disk on every item.

    ## Example
    ```python
    class Embedded(Dataset):
        def __getitem__(self, idx):
            encoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU())
            with torch.no_grad():
                return encoder(self.features[idx])
    ```

    ## Use instead
    ```python
    class Embedded(Dataset):
        def __init__(self, features):
            self.features = features
            self.encoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU())

        def __getitem__(self, idx):
            with torch.no_grad():
                return self.encoder(self.features[idx])
    ```

    ## References
    - [evidence: PERF-1](../docs/evidence.md#perf-1) (measured per-item and per-epoch ratios; `re.compile` is a myth)
    """

    code = "DSL203"
    name = "per-sample-setup"
    symptom = TIME_RATIO
    level = WARNING
    summary = "An object that is the same for every sample (model, transform, tokenizer) is built for every sample"
    help = "Build it once in `__init__` (or lazily once per worker) and reuse it"

    valid = (
        # sample-dependent and random constructions, re.compile, argument-less transforms
        """
        import random
        import re
        import torch.nn as nn
        import torchvision.transforms as T
        from torch.utils.data import Dataset
        class D(Dataset):
            def __getitem__(self, idx):
                x = self.data[idx]
                crop = T.Compose([T.RandomCrop(self.sizes[idx]), T.Normalize([0.5], [0.5])])  # built per sample as a whole
                scale = T.Resize(random.choice(self.scales))
                proj = nn.Linear(x.shape[-1], 8)
                pattern = re.compile(r"(\\d+)_(\\w+)")
                return proj(T.ToTensor()(crop(scale(x)))), pattern
        """,
        # a stored transform applied directly, a factory given the sample or nothing, a method
        """
        from torch.utils.data import Dataset
        class Images(Dataset):
            def pick(self, name):
                return self.table[name]
            def __getitem__(self, idx):
                x = self.items[idx]
                return self.transform(x), self.sized(self.sizes[idx])(x), self.pick("rgb")(x), self.make()(x)
        """,
        # built once in __init__, lazily per worker, or in a cached helper
        """
        import functools
        import torch.nn as nn
        from transformers import AutoTokenizer
        from torchvision import transforms
        from torch.utils.data import Dataset

        @functools.lru_cache(maxsize=1)
        def tokenizer(name):
            return AutoTokenizer.from_pretrained(name)

        class D(Dataset):
            def __init__(self):
                self.tf = transforms.Compose([transforms.Resize(256), transforms.ToTensor()])
                self.encoder = nn.Sequential(nn.Linear(4, 4))
                self.model = None

            def __getitem__(self, idx):
                if self.model is None:
                    self.model = nn.Linear(4, 4)
                tok = tokenizer("bert-base-uncased")
                return self.tf(self.images[idx]), tok(self.texts[idx])
        """,
        # a project class that is not an nn.Module, and non-dataset code
        {
            "things.py": """
                class Record:
                    def __init__(self, path):
                        self.path = path
            """,
            "ds.py": """
                import torch.nn as nn
                from torch.utils.data import Dataset
                from things import Record
                class D(Dataset):
                    def __getitem__(self, idx):
                        return Record(self.root)
                def make_model():
                    return nn.Linear(4, 4)
            """,
        },
        Valid(  # by default, a transform pipeline built per sample (microseconds): a preview form
            """
            import torchvision.transforms as T
            from torch.utils.data import Dataset
            class D(Dataset):
                def __getitem__(self, idx):
                    return T.Compose([T.Resize(self.size), T.ToTensor()])(self.images[idx])
            """,
            preview=False,
        ),
    )
    invalid = (
        # a factory given at construction, called per item with the same configuration
        """
        from torch.utils.data import Dataset
        class Images(Dataset):
            def __getitem__(self, idx):
                out = self.transform(self.cfg)(image=self.items[idx])  # expect: DSL203
                return out["image"]
        """,
        """
        import torch.nn as nn
        import torchvision.transforms as T
        from torch import nn as tnn
        from transformers import AutoTokenizer
        from torchvision.models import resnet18
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, idx):
                tf = T.Compose([T.Resize(self.size), T.ToTensor()])  # expect: DSL203
                tok = AutoTokenizer.from_pretrained(self.model_name)  # expect: DSL203
                head = nn.Sequential(  # expect: DSL203
                    nn.Linear(16, 16),
                    tnn.ReLU(),
                )
                norm = tnn.LayerNorm(16)  # expect: DSL203
                backbone = resnet18(weights=None)  # expect: DSL203
                return head(norm(tf(self.images[idx]))), tok(self.texts[idx]), backbone
        """,
        # the project's own Compose, built by a method that __getitem__ calls and applies
        {
            "augment.py": """
                class Compose:
                    def __init__(self, steps):
                        self.steps = steps
            """,
            "faces.py": """
                from torch.utils.data import Dataset
                from augment import Compose
                class Faces(Dataset):
                    def get_transform(self):
                        return Compose([self.flip, self.crop])  # expect: DSL203
                    def __getitem__(self, idx):
                        return self.get_transform()(self.images[idx])
            """,
        },
        # vocab building in a module-level helper reached from __getitem__
        """
        from collections import Counter
        from torch.utils.data import Dataset

        CORPUS = ["a b", "b c"]

        def build_vocab():
            counts = Counter(w for line in CORPUS for w in line.split())  # expect: DSL203
            words = sorted(counts)
            return {w: i for i, w in enumerate(words)}  # expect: DSL203

        class Text(Dataset):
            def __getitem__(self, idx):
                vocab = build_vocab()
                return [vocab[w] for w in self.lines[idx].split()]
        """,
        # a project nn.Module (defined in another file) built per sample by a subclass's helper
        {
            "models.py": """
                import torch.nn as nn

                class Backbone(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(8, 8)
                class Small(Backbone):
                    pass
            """,
            "base.py": """
                from torch.utils.data import Dataset
                class Base(Dataset):
                    def __getitem__(self, idx):
                        return self.features(idx)
            """,
            "feats.py": """
                from base import Base
                from models import Small
                class Feats(Base):
                    def features(self, idx):
                        net = Small()  # expect: DSL203
                        return net(self.data[idx])
            """,
        },
    )

    def check(self, ctx):
        found = []
        for comp in ctx.nodes(cst.DictComp):
            if df.per_item(ctx, comp) and vocab_comprehension(ctx, comp):
                found.append((comp, setup_message("{token: index}", "vocab", where(ctx, comp))))
        aliases = ctx.names.call_tails(SETUP_TAILS)
        for call in ctx.nodes(cst.Call):
            if isinstance(call.func, cst.Call):
                factory = stored_factory(ctx, call) if df.per_item(ctx, call) else None
                if factory is not None:
                    text = call_text(ctx, factory)
                    found.append((factory, setup_message(text, "factory", where(ctx, factory))))
                continue
            tail = last_name(call.func)
            if tail is None or not (tail in aliases or tail[:1].isupper() or maybe_model_builder(call)):
                continue
            if has_star(call):
                continue
            kind = construction_kind(ctx, call)  # resolves names only; the project index is asked last
            if kind is None and tail[:1].isupper() and df.per_item(ctx, call):
                kind = project_module_kind(ctx, call)
            elif kind is not None and not df.per_item(ctx, call):
                continue
            if kind is None or df.inputs_depend(ctx, call) or in_dependent_pipeline(ctx, call):
                continue
            kind_name, qualified = kind
            if kind_name == "transform" and not self.preview_forms:
                continue  # microseconds per sample: a preview form (the page's "Preview")
            found.append((call, setup_message(call_text(ctx, call, qualified), kind_name, where(ctx, call))))
        reported = {id(node) for node, _ in found}  # one pipeline, one finding: its parts fold into it
        for node, message in outermost(ctx, found):
            if not (isinstance(node, cst.Call) and any(id(t) in reported for t in pipeline_takers(ctx, node))):
                yield self.report(node, message)
