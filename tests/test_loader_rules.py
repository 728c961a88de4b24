"""Cases of the loader family's rules that do not fit in the rule modules (300 lines each);
they run exactly like the embedded ones (tests/test_rule_cases.py)."""

from __future__ import annotations

import pytest

from tests.conftest import check_tree, expected_markers, write_files
from tests.test_rule_cases import run_case

MORE_CASES = [
    # DSL507: a Subset of an evaluation-named dataset is an evaluation loader (its sampler shuffles by default)
    ("DSL507", "invalid", """
        import numpy as np
        import torch
        from PIL import Image
        from torch.utils.data import DataLoader, Dataset, Subset
        from torch.utils.data.distributed import DistributedSampler


        class Photos(Dataset):
            def __init__(self, paths):
                self.paths = paths

            def __getitem__(self, i):
                with Image.open(self.paths[i]) as im:
                    return np.asarray(im.convert("RGB"))

            def __len__(self):
                return len(self.paths)


        def eval_samples(test_dataset, n, batch_size):
            picked = Subset(test_dataset, np.random.choice(len(test_dataset), n, replace=False))
            return DataLoader(picked, batch_size=batch_size, sampler=DistributedSampler(picked))


        def train_samples(train_dataset, n, batch_size):
            picked = Subset(train_dataset, np.random.choice(len(train_dataset), n, replace=False))
            return DataLoader(picked, batch_size=batch_size, sampler=DistributedSampler(picked))  # expect: DSL507


        test_loader = eval_samples(Photos(["a.jpg"]), 1, 1)
        train_loader = train_samples(Photos(["a.jpg"]), 1, 1)
    """),
    # DSL506: a closure a module-level factory of the project returns (this file or another), kept by __init__
    ("DSL506", "invalid", {
        "namers.py": """
            import os

            def make_namer(root):
                os.makedirs(root, exist_ok=True)

                def name(shard):
                    return os.path.join(root, shard)

                return name
        """,
        "shards.py": """
            from torch.utils.data import DataLoader, Dataset

            from namers import make_namer

            def scaler(k):
                return lambda x: x * k

            class Shards(Dataset):
                def __init__(self, root):
                    self.namer = make_namer(root)  # expect: DSL506

                def __getitem__(self, i):
                    return self.namer(str(i))

                def __len__(self):
                    return 8

            class Scaled(Dataset):
                def __init__(self, k):
                    self.scale = scaler(k)  # expect: DSL506

                def __getitem__(self, i):
                    return self.scale(i)

                def __len__(self):
                    return 8

            loaders = [DataLoader(Shards("/tmp/c"), num_workers=2), DataLoader(Scaled(2), num_workers=2)]
        """,
    }),
    ("DSL506", "valid", """
        import functools
        import os

        from torch.utils.data import DataLoader, Dataset

        def join(root, shard):
            return os.path.join(root, shard)

        def make_namer(root):
            return functools.partial(join, root)

        def maybe_namer(root):
            if root is None:
                return None

            def name(shard):
                return os.path.join(root, shard)

            return name

        class Shards(Dataset):
            def __init__(self, root):
                self.namer = make_namer(root)
                self.other = maybe_namer(root)

            def __getitem__(self, i):
                return self.namer(str(i))

            def __len__(self):
                return 8

        loader = DataLoader(Shards("/tmp/c"), num_workers=2)
    """),
    # DSL506: a loader over self.dataset, which the class sets to one of several constructions
    ("DSL506", "invalid", {
        "data.py": """
            from torch.utils.data import Dataset
            from torchvision import transforms

            class Base(Dataset):
                def __init__(self, root, *args, **kwargs):
                    self.root = root

                def __getitem__(self, i):
                    return i

                def __len__(self):
                    return 4

            class Resized(Base):
                def __init__(self, size, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    self.scale = transforms.Compose([transforms.Lambda(lambda x: x / 255.0)])

            class Cropped(Base):
                def __init__(self, size, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    self.crop = size
        """,
        "train.py": """
            import torch
            from torch.utils.data import Dataset

            from data import Cropped, Resized

            class Trainer:
                def __init__(self, args):
                    self.args = args
                    self.dataset: Dataset = None

                def prepare(self):
                    if self.args.crop:
                        self.dataset = Cropped(64, root="x")
                    else:
                        self.dataset = Resized(64, root="x")  # expect: DSL506
                    self.loader = torch.utils.data.DataLoader(self.dataset, num_workers=self.args.num_workers)
        """,
    }),
    ("DSL506", "valid", {
        "data.py": """
            from torch.utils.data import Dataset
            from torchvision import transforms

            class Resized(Dataset):
                def __init__(self, size):
                    self.scale = transforms.Compose([transforms.Lambda(lambda x: x / 255.0)])

                def __getitem__(self, i):
                    return i

                def __len__(self):
                    return 4
        """,
        "train.py": """
            import torch

            from data import Resized

            class Trainer:
                def __init__(self, args, dataset):
                    self.args = args
                    self.dataset = dataset

                def prepare(self):
                    if self.args.resize:
                        self.dataset = Resized(64)
                    self.loader = torch.utils.data.DataLoader(self.dataset, num_workers=self.args.num_workers)
        """,
    }),
    # DSL506: objects pickle cannot copy, kept by the dataset's __init__: generators, a module, a cache wrapper, OpenCV
    ("DSL506", "invalid", """
        import functools
        import random
        from pathlib import Path

        import cv2
        from torch.utils.data import DataLoader, Dataset

        def cycle(items):
            while True:
                yield from items

        def read(path):
            return Path(path).read_bytes()

        class Base(Dataset):
            def __getitem__(self, i):
                return i

            def __len__(self):
                return 8

        class Masks(Base):
            def __init__(self, root):
                self.masks = Path(root).iterdir()  # expect: DSL506

        class Episodes(Base):
            def __init__(self, groups):
                self.streams = [cycle(g) for g in groups]  # expect: DSL506

        class Batches(Base):
            def __init__(self, workers):
                self.loader = DataLoader(self, num_workers=workers)
                self.stream = self.batches()  # expect: DSL506

            def batches(self):
                while True:
                    yield from self.loader

        class Jitter(Base):
            def __init__(self):
                self.rng = random  # expect: DSL506

        class Cached(Base):
            def __init__(self):
                self.read = functools.lru_cache(maxsize=16)(read)  # expect: DSL506

        class Equalized(Base):
            def __init__(self):
                self.clahe = cv2.createCLAHE(clipLimit=2.0)  # expect: DSL506

        loaders = [DataLoader(Masks("m"), num_workers=2), DataLoader(Episodes([[1]]), num_workers=2),
                   DataLoader(Jitter(), num_workers=2), DataLoader(Cached(), num_workers=2),
                   DataLoader(Equalized(), num_workers=2)]
        """),
    # DSL506: a part the dataset keeps was built with a lambda transform (through a local name and ConcatDataset)
    ("DSL506", "invalid", """
        from torch.utils.data import ConcatDataset, DataLoader, Dataset
        from torchvision.datasets import Omniglot

        class Characters(Dataset):
            def __init__(self, root):
                background = Omniglot(root, background=True)
                evaluation = Omniglot(root, background=False, target_transform=lambda y: y + 964)  # expect: DSL506
                self.parts = ConcatDataset((background, evaluation))

            def __getitem__(self, i):
                return self.parts[i]

            def __len__(self):
                return len(self.parts)

        loader = DataLoader(Characters("data"), batch_size=8, num_workers=4)
        """),
    # DSL506: what pickle copies (a list, a zip, a logger, a method's list result), a class that pickles itself
    ("DSL506", "valid", """
        import glob
        import logging
        import random

        from torch.utils.data import DataLoader, Dataset

        class Frames(Dataset):
            def __init__(self, root, labels):
                self.files = sorted(glob.glob(root + "/*.png"))
                self.pairs = zip(self.files, labels)
                self.log = logging.getLogger(__name__)
                self.index = self.build_index()
                self.rng = random.Random(0)

            def build_index(self):
                return [f for f in self.files]

            def __getitem__(self, i):
                return self.files[i]

            def __len__(self):
                return len(self.files)

        class Streams(Frames):
            def __init__(self, root, labels):
                super().__init__(root, labels)
                self.stream = (f for f in self.files)

            def __getstate__(self):
                return {"files": self.files}

        loaders = [DataLoader(Frames("a", []), num_workers=2), DataLoader(Streams("a", []), num_workers=2)]
        """),
    # DSL507: torchvision's in-memory datasets with conversions only: nothing to load per sample
    ("DSL507", "valid", """
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms

        to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])

        def loaders(root, batch_size):
            train = DataLoader(datasets.MNIST(root, True, to_tensor, download=True), batch_size=batch_size, shuffle=True)
            plain = DataLoader(datasets.FashionMNIST(root, train=True), batch_size=batch_size, shuffle=True)
            cifar = DataLoader(datasets.CIFAR10(root, transform=transforms.ToTensor()), batch_size=batch_size, shuffle=True)
            return train, plain, cifar
        """),
    # DSL507: augmentation (or a transform not shown) is per-sample work, in memory or not
    ("DSL507", "invalid", """
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms as T

        aug = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor()])

        def loaders(root, batch_size, tf):
            train = DataLoader(datasets.CIFAR10(root, transform=aug), batch_size=batch_size, shuffle=True)  # expect: DSL507
            other = DataLoader(datasets.CIFAR100(root, transform=tf), batch_size=batch_size, shuffle=True)  # expect: DSL507
            return train, other
        """),
    # DSL506: the dataset keeps an object of a class of the file that keeps a lambda; the loader takes `self.dataset`
    ("DSL506", "invalid", """
        import numpy as np
        from torch.utils.data import DataLoader, Dataset

        class Features:
            def __init__(self, root):
                self.root = root
                self.decode = lambda b: np.frombuffer(b, dtype=np.float32)  # expect: DSL506

        class Captions(Dataset):
            def __init__(self, root):
                self.features = Features(root)

            def __getitem__(self, i):
                return self.features.decode(b"0000")

            def __len__(self):
                return 4

        class Batches:
            def __init__(self, root, workers):
                self.dataset = Captions(root)
                self.loader = DataLoader(self.dataset, batch_size=2, num_workers=workers)
        """),
    # DSL506: a copy of a dataset keeps what the copied one keeps
    ("DSL506", "invalid", """
        import copy
        import torchvision.transforms as T
        from torch.utils.data import DataLoader
        from torchvision.datasets import CIFAR10

        def loaders(root, workers):
            base = CIFAR10(root, transform=T.Compose([T.ToTensor(), T.Lambda(lambda x: x * 2 - 1)]))  # expect: DSL506
            meta = copy.deepcopy(base)
            return DataLoader(meta, num_workers=workers)
        """),
    # DSL506 (preview): a dataset on a library's base (torchgeo) that the project leaves to its users
    ("DSL506", "invalid", """
        from torchgeo.datasets import NonGeoDataset

        class Tiles(NonGeoDataset):
            def __init__(self, root, transforms=None):
                self.root = root
                self.transforms = transforms if transforms else lambda **sample: sample  # expect: DSL506

            def __getitem__(self, i):
                return self.transforms(image=self.root[i])
        """),
    # DSL506 (preview): a dataset the project constructs itself, loaders unknown: silent; a class that is no dataset
    ("DSL506", "valid", """
        from torch.utils.data import Dataset

        class Scans(Dataset):
            def __init__(self, paths):
                self.paths = paths
                self.scale = lambda x: x / 255

        class Registry:
            def __init__(self):
                self.make = lambda name: name

        def evaluate(paths):
            return Scans(paths).paths
        """),
    # DSL506: a factory of the file returning a pipeline from each arm: each lambda needs its fix
    ("DSL506", "invalid", """
        import torchvision.transforms as T
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        def pipeline(train):
            if train:
                return T.Compose([T.RandomCrop(32), T.Lambda(lambda x: x * 2 - 1)])  # expect: DSL506
            return T.Compose([T.CenterCrop(32), T.Lambda(lambda x: x * 2 - 1)])  # expect: DSL506

        def loader(root, train, workers=4):
            return DataLoader(ImageFolder(root, transform=pipeline(train)), num_workers=workers)
        """),
    # DSL506: a local dataset class, and a lambda or None
    ("DSL506", "invalid", """
        import numpy as np
        from torch.utils.data import DataLoader, Dataset

        def main(paths):
            class Local(Dataset):
                def __getitem__(self, i):
                    return paths[i]

                def __len__(self):
                    return len(paths)

            ds = Local()
            seed = (lambda wid: np.random.seed(wid)) if paths else None  # None on the other branch
            return DataLoader(ds, num_workers=4, worker_init_fn=seed)  # expect: DSL506
        """),
    # DSL506: DataLoader subclasses that pin no workers or start none
    ("DSL506", "valid", """
        from torch.utils.data import DataLoader

        class ListLoader(DataLoader):
            def __init__(self, dataset, **kwargs):
                kwargs["num_workers"] = 0  # pinned: the lambda never reaches a worker
                super().__init__(dataset, collate_fn=lambda items: items, **kwargs)

        class Padded(DataLoader):
            def __init__(self, dataset, batch_size=1):
                def pad(batch): return batch
                super().__init__(dataset, batch_size, collate_fn=pad)  # no workers: nothing is pickled

        def check_batches(ds):
            class Listed(DataLoader):  # built only below, never with workers
                def __init__(self, dataset, **kwargs):
                    super().__init__(dataset, collate_fn=lambda items: items, **kwargs)
            return Listed(ds, batch_size=2)
        """),
    # DSL506: a partial of DataLoader binding a nested function
    ("DSL506", "invalid", """
        import functools
        import torch.utils.data as tud

        def make_loader(ds, workers):
            def collate(batch, pad):
                return batch

            build = functools.partial(tud.DataLoader, collate_fn=functools.partial(collate, pad=0))  # expect: DSL506
            return build(ds, num_workers=workers), build(ds, batch_size=2, num_workers=workers)
        """),
    # DSL503: counts from command-line options, guarded or handled by the loader's own code
    ('DSL503', 'valid', """
    import argparse
    from torch.utils.data import DataLoader

    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--listed", type=int, default=4, choices=[2, 4, 8])
    args = parser.parse_args()
    if args.workers > 0:  # the loader's code handles 0 itself
        loader = DataLoader(ds, num_workers=args.workers, persistent_workers=True)
    fast = DataLoader(ds, num_workers=args.workers, persistent_workers=args.workers > 0)
    prefetched = DataLoader(ds, num_workers=args.workers, prefetch_factor=4 if args.workers else None)
    listed = DataLoader(ds, num_workers=args.listed, persistent_workers=True)
    """),
    # DSL503: a `**` dict bound per path: the path with workers sets the option itself, and a write after the paths join
    # that turns it off; no path pairs 0 workers with a worker-only option
    ("DSL503", "valid", """
        from torch.utils.data import DataLoader

        def build(ds, opt, phase):
            if phase == "train":
                args = {"dataset": ds, "num_workers": opt["workers"], "persistent_workers": True}
            else:
                args = {"dataset": ds, "num_workers": 0}
            return DataLoader(**args)

        def plain(ds, workers, phase):
            if phase == "train":
                args = {"dataset": ds, "num_workers": workers}
            else:
                args = {"dataset": ds, "num_workers": 0}
            args["persistent_workers"] = False
            return DataLoader(**args)
        """),
    # DSL507: rows of a matrix in memory, normalised; a type test of the index is no loading work
    ("DSL507", "valid", """
        import numpy as np
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Rows(Dataset):
            def __init__(self, X, mean=None, std=None):
                self.X, self.mean, self.std = X, mean, std

            def __getitem__(self, idx):
                if torch.is_tensor(idx):
                    idx = idx.tolist()
                row = self.X[idx, :]
                if self.mean is not None and np.isscalar(self.std) is False:
                    row = (row - self.mean) / (self.std + 1e-8)
                return torch.as_tensor(row, dtype=torch.float32)

            def __len__(self):
                return len(self.X)

        def fit(X):
            return DataLoader(Rows(X, X.mean(0), X.std(0)), batch_size=32, shuffle=True, drop_last=True)
        """),
    # DSL507: a dataset of random tensors that fills a dict of its own has nothing to load
    ("DSL507", "valid", """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Synthetic(Dataset):  # random tensors and a dict it fills: nothing to load
            def __init__(self, shapes, extra=None):
                self.shapes, self.extra = shapes, extra

            def __getitem__(self, i):
                out = {k: torch.randn(*shape) for k, shape in self.shapes.items()}
                if self.extra is not None:
                    out.update(self.extra)
                return out

            def __len__(self):
                return 100

        loader = DataLoader(Synthetic({"image": (3, 64, 64)}), batch_size=8, shuffle=True)
        """),
    # DSL503: a `**` dict bound to a different dict on each branch: a key of one path is read on its
    # own (reported at its entry) with the count the call passes itself; a dict that turns the option
    # off, or a count the call never lets be 0, stays silent
    ("DSL503", "invalid", """
        import torch

        def build(config, data, stream, sampler, sharded):
            if sharded:
                kwargs = dict(dataset=stream, persistent_workers=True)  # expect: DSL503
            else:
                kwargs = dict(dataset=data, sampler=sampler)
            return torch.utils.data.DataLoader(**kwargs, batch_size=None, num_workers=config.get("num_workers", 0))
        """),
    ("DSL503", "valid", """
        import torch

        def build(config, data, stream, sampler, sharded):
            if sharded:
                kwargs = {"dataset": stream, "persistent_workers": False}
            else:
                kwargs = {"dataset": data, "sampler": sampler}
            return torch.utils.data.DataLoader(**kwargs, num_workers=config.get("num_workers", 0))

        def build_many(config, data, stream, sampler, sharded):
            if sharded:
                kwargs = {"dataset": stream, "persistent_workers": True}
            else:
                kwargs = {"dataset": data, "sampler": sampler}
            return torch.utils.data.DataLoader(**kwargs, num_workers=max(2, config.workers))
        """),
    # DSL503: the loader in the `else` of a test that holds for 0 workers, its count stored on an object
    # in both arms; the arm for 0 returns, so its store never reaches the loader (narrowing, reaching)
    ("DSL503", "valid", """
        from torch.utils.data import DataLoader

        def build(opt, ds, make, infer):
            workers = opt.workers if hasattr(opt, "workers") else 0
            if workers == 0 or infer:
                it = make(ds)
                it.workers = workers
                return it
            else:
                it = make(ds)
                it.workers = workers
                return DataLoader(it, num_workers=it.workers, multiprocessing_context="spawn")
        """),
    ("DSL503", "invalid", """
        from torch.utils.data import DataLoader

        def build(opt, ds, make, infer):
            workers = opt.workers if hasattr(opt, "workers") else 0
            if infer:
                it = make(ds)
                it.workers = workers
                return it
            else:
                it = make(ds)
                it.workers = workers
                return DataLoader(it, num_workers=it.workers, multiprocessing_context="spawn")  # expect: DSL503
        """),
    # DSL503: a wrapper keeping torch's old defaults on self (DataLoader's own default is now None)
    ("DSL503", "invalid", """
        from torch.utils.data import DataLoader

        class Loader:
            def __init__(self, batch_size=1, num_workers=0, prefetch_factor=2):
                self.batch_size = batch_size
                self.num_workers = num_workers
                self.prefetch_factor = prefetch_factor

            def build(self, ds):
                return DataLoader(ds, num_workers=self.num_workers, prefetch_factor=self.prefetch_factor)  # expect: DSL503
        """),
    # DSL503: counts the project constrains, or options the code resets or leaves to the caller
    ("DSL503", "valid", """
        import os
        from torch.utils.data import DataLoader

        def make_loader(ds, cfg):  # the count is computed: never 0
            return DataLoader(ds, num_workers=max(1, cfg.workers), persistent_workers=True)

        def _loader(ds, workers):  # this file's calls fill the parameter in
            return DataLoader(ds, num_workers=workers, prefetch_factor=4)

        train = _loader(train_set, 8)
        cpus = DataLoader(ds, num_workers=os.cpu_count(), persistent_workers=True)

        def create_loader(ds, num_workers=4, persistent_workers=True):  # the caller sets both
            return DataLoader(ds, num_workers=num_workers, persistent_workers=persistent_workers)
        def debug_loader(ds, opts, no_workers=False):  # every worker-only key the caller may pass is reset
            if no_workers:
                opts["num_workers"] = 0
                opts.update(persistent_workers=False, prefetch_factor=None, timeout=0, multiprocessing_context=None)
            return DataLoader(ds, **opts)
        def build(ds, workers, persistent_workers=False, **kwargs):  # the builder's default is off
            kwargs["persistent_workers"] = persistent_workers
            return DataLoader(ds, num_workers=workers, **kwargs)
        """),
    # DSL505: evaluation passes (`eval()` and no training step) over a shuffling sampler: the order does not matter
    ("DSL505", "valid", """
        import torch
        from torch.utils.data import DataLoader, DistributedSampler
        class Prefetcher:
            def __init__(self, loader): self.it = iter(loader)
            def next(self): return next(self.it, None)
        def validate(loader, model):  # evaluation: `eval()` and no training step; the order does not matter
            model.eval()
            batches = Prefetcher(loader)
            batch = batches.next()
            while batch is not None:
                with torch.no_grad(): model(batch)
                batch = batches.next()
        def score(loader, model):
            model.eval()
            for batch in loader:
                with torch.no_grad(): model(batch)
        def main(train_ds, val_ds, model, optimizer):
            train_sampler = DistributedSampler(train_ds)
            train_loader = DataLoader(train_ds, sampler=train_sampler)
            val_loader = DataLoader(val_ds, sampler=DistributedSampler(val_ds))
            for epoch in range(10):
                train_sampler.set_epoch(epoch)
                for batch in train_loader: model(batch).backward()
                validate(val_loader, model)
                score(val_loader, model)
        """),
    # DSL507: a dataset module's own check (its `__main__` block, and a function only that block calls): the
    # module is the project's library (train.py constructs its dataset), and nothing trains there
    ("DSL507", "valid", {
        "frames.py": """
            import torch
            from PIL import Image
            from torch.utils.data import DataLoader, Dataset

            class Frames(Dataset):
                def __init__(self, paths):
                    self.paths = paths

                def __getitem__(self, i):
                    return torch.tensor(list(Image.open(self.paths[i]).convert("L").getdata()))

            def show(paths, model):
                for batch in DataLoader(Frames(paths), batch_size=2, shuffle=True):
                    model(batch)

            if __name__ == "__main__":
                for x in DataLoader(Frames(["a.png"]), batch_size=1, shuffle=True):
                    breakpoint()
                show(["a.png"], print)
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from frames import Frames

            def main(paths, model, opt):
                loader = DataLoader(Frames(paths), batch_size=8, shuffle=True, num_workers=8)
            """,
    }),
    # DSL507: a dataset that puts each sample on the GPU in a helper it calls (forked workers could not run
    # it: DSL204's finding), and one that only indexes a tensor, reading its sizes and drawing noise
    ("DSL507", "valid", {
        "series.py": """
            import random
            import numpy as np
            import torch
            from torch.utils.data import Dataset

            class Labelled(Dataset):
                def __init__(self, data):
                    self.data = data

                def __getitem__(self, i):
                    return self.augment(self.data[i]), self.label(i)

                def augment(self, x):
                    return np.roll(x, random.randint(0, 5))

                def label(self, i):
                    return torch.from_numpy(np.array(i)).cuda()

            class Jittered(Dataset):
                def __init__(self, data):
                    self.data = data

                def __getitem__(self, i):
                    x = self.data[i % self.data.size(0)]
                    return x + torch.randn(x.size(-1)) * 0.1
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from series import *

            def main(data, model, opt):
                for x, y in DataLoader(Labelled(data), batch_size=8, shuffle=True):
                    model(x, y).backward()
                for x in DataLoader(Jittered(data), batch_size=8, shuffle=True):
                    model(x).backward()
            """,
    }),
    # DSL507: the same block in a module no other file uses is a script: its loader is its training run
    ("DSL507", "invalid", """
        import torch
        from PIL import Image
        from torch.utils.data import DataLoader, Dataset

        class Frames(Dataset):
            def __init__(self, paths):
                self.paths = paths

            def __getitem__(self, i):
                return torch.tensor(list(Image.open(self.paths[i]).convert("L").getdata()))

        if __name__ == "__main__":
            for x in DataLoader(Frames(["a.png"]), batch_size=1, shuffle=True):  # expect: DSL507
                model(x).backward()
        """),
    # DSL506: a dataset keeps a parameter whose default is a lambda: a construction that leaves it out sends the lambda
    # to the workers (reported at the default, where the fix goes, also for another file's loader); one that passes a
    # value, or may (`**kw`), does not
    ("DSL506", "invalid", {
        "clips.py": """
            from torch.utils.data import DataLoader, Dataset

            class Clips(Dataset):
                def __init__(self, paths, augment=lambda audio: audio, *, fmt=lambda b: b):  # expect: DSL506
                    self.paths = paths
                    self.augment = augment
                    self.fmt = str.lower

                def __getitem__(self, i):
                    return self.augment(self.paths[i])

                def __len__(self):
                    return len(self.paths)

            loader = DataLoader(Clips(["a"]), num_workers=2)
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from clips import Clips

            def loaders(paths, workers, **kw):
                given = DataLoader(Clips(paths, str.lower), num_workers=workers)
                forwarded = DataLoader(Clips(paths, **kw), num_workers=workers)
                named = DataLoader(Clips(paths, augment=str.upper), num_workers=workers)
                return given, forwarded, named, DataLoader(Clips(paths), num_workers=workers)  # (reported in clips.py)
            """,
    }),
    # DSL503: a `**` dict with 0 workers that sets `persistent_workers` raises; so does a configuration's `.get`
    # default of True when the user's file leaves the key out, on the path where the code gives 0 workers
    ("DSL503", "invalid", """
        import torch

        def plain(ds):
            args = {"dataset": ds, "num_workers": 0}
            args["persistent_workers"] = True
            return torch.utils.data.DataLoader(**args)  # expect: DSL503

        def build(ds, opt, phase):
            workers = opt["workers"] if phase == "train" else 0
            return torch.utils.data.DataLoader(  # expect: DSL503
                ds, num_workers=workers, persistent_workers=opt.get("persistent_workers", True))

        def unset(ds, opt, phase):  # no default: the key may be absent, and `.get` gives None
            workers = opt["workers"] if phase == "train" else 0
            return torch.utils.data.DataLoader(ds, num_workers=workers, persistent_workers=opt.get("persistent"))
        """),
    # DSL506: a lambda given by keyword to a parameter the project dataset keeps on `self` goes to the workers
    # with it; one it only calls in `__init__` does not
    ("DSL506", "invalid", {
        "folder.py": """
            from torch.utils.data import Dataset

            class Folder(Dataset):
                def __init__(self, root, degrade, key=None):
                    self.files = sorted(root.glob("*"), key=key)
                    self.degrade = degrade

                def __getitem__(self, i):
                    return self.degrade(self.files[i])

                def __len__(self):
                    return len(self.files)
            """,
        "infer.py": """
            from torch.utils.data import DataLoader
            from folder import Folder

            def main(root):
                ds = Folder(root, degrade=lambda x: (x, None))  # expect: DSL506
                sorted_only = Folder(root, degrade=str.lower, key=lambda p: p.name)
                return DataLoader(ds, num_workers=10), DataLoader(sorted_only, num_workers=10)
            """,
    }),
    # DSL506: a fallback the constructor keeps when a parameter defaulting to None is left out (`t or (lambda ...)`,
    # `t if t is not None else ...`) goes to the workers with the dataset; a `**` dict whose every key is followed
    # passes what it holds and nothing else (another file's construction: reported at the class's fallback)
    ("DSL506", "invalid", {
        "tiles.py": """
            import torchvision.transforms as T
            from torch.utils.data import DataLoader, Dataset

            def identity(x):
                return x

            class Tiles(Dataset):
                def __init__(self, paths, transform=None, target=None, fmt=None, scale=T.ToTensor()):
                    self.paths = paths
                    self.transform = transform if transform is not None else lambda x: x  # expect: DSL506
                    self.target = target or T.Compose([T.Lambda(lambda y: y - 1)])  # expect: DSL506
                    self.fmt = fmt or identity  # a module-level function: pickled by name
                    self.scale = scale if scale else (lambda x: x)  # the default is not None: never the fallback

                def __getitem__(self, i):
                    return self.transform(self.paths[i])

                def __len__(self):
                    return len(self.paths)

            loader = DataLoader(Tiles(["a"], target=identity), num_workers=2)
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from tiles import Tiles

            def loaders(paths, workers, kw):
                given = dict(paths=paths, transform=str.lower, target=str.upper)
                partial = {"paths": paths, "transform": str.lower}
                a = DataLoader(Tiles(**given), num_workers=workers)
                b = DataLoader(Tiles(**kw), num_workers=workers)  # any key may be there
                return a, b, DataLoader(Tiles(**partial), num_workers=workers)  # leaves `target` out: at its fallback
            """,
    }),
    # DSL506: a subclass hands its `collate_fn` parameter on by name: reported at the lambda each caller passes
    ("DSL506", "invalid", """
        from torch.utils.data import DataLoader, DistributedSampler

        class ShardedLoader(DataLoader):
            def __init__(self, dataset, batch_size, num_workers=0, collate_fn=None):
                super().__init__(dataset, batch_size=batch_size, num_workers=num_workers,
                                 sampler=DistributedSampler(dataset), collate_fn=collate_fn)

        def build(train, test, cfg):
            first = ShardedLoader(train, 1, num_workers=cfg.workers, collate_fn=lambda batch: batch[0])  # expect: DSL506
            return first, ShardedLoader(test, 1, num_workers=cfg.workers, collate_fn=lambda b: b)  # expect: DSL506
        """),
    # DSL506: a webdataset (or torchdata) pipeline keeps its stages and goes to each spawned worker with them;
    # each problem is reported where its fix goes
    ("DSL506", "invalid", """
        import webdataset as wds
        from torch.utils.data import DataLoader

        def setup(urls, keys):
            def identity(batch):
                return batch
            stream = wds.WebDataset(urls).shuffle(100).decode("pil").to_tuple("jpg", "txt").map(
                lambda x: dict(zip(keys, x)))  # expect: DSL506
            return DataLoader(stream, batch_size=8, num_workers=8, collate_fn=identity)  # expect: DSL506
        """),
    # DSL506: Hugging Face `datasets` apply `map` when it is called; a module-level stage function pickles by name
    ("DSL506", "valid", """
        import datasets
        import webdataset as wds
        from torch.utils.data import DataLoader

        def to_dict(sample):
            return {"image": sample[0]}

        def setup(urls, name):
            table = datasets.load_dataset(name, split="train").map(lambda row: {"n": len(row["text"])})
            stream = wds.WebDataset(urls).decode("pil").to_tuple("jpg").map(to_dict)
            return DataLoader(table, num_workers=4), DataLoader(stream, num_workers=4)
        """),
    # DSL507: a dataset class defined inside the method that builds the loader, whose items only index tensors
    # DSL507: a dataset of random tensors that fills a dict of its own has nothing to load
    ("DSL507", "valid", """
        from torch.utils.data import DataLoader, Dataset

        class Server:
            def calibrate(self, data, targets, model, opt):
                class Features(Dataset):
                    def __init__(self, data, targets):
                        self.data, self.targets = data, targets

                    def __getitem__(self, i):
                        return self.data[i], self.targets[i]

                    def __len__(self):
                        return len(self.targets)

                for x, y in DataLoader(Features(data, targets), batch_size=32, shuffle=True):
                    model(x).sum().backward()
                    opt.step()
        """),
    # DSL507: per-sample code that only indexes arrays in memory, through super() and its own
    # helpers, builds small tensors and draws random numbers: workers would only add IPC
    ("DSL507", "valid", {
        "records.py": """
            import random
            import numpy as np
            import torch
            from torch.utils.data import Dataset

            class Triples(Dataset):
                def __init__(self, rows, cols):
                    self.rows, self.cols = rows, cols
                    self.negatives = np.zeros(len(rows), dtype=np.int64)

                def __len__(self):
                    return len(self.rows)

                def __getitem__(self, i):
                    return self.rows[i], self.cols[i], self.negatives[i]

            class FlaggedTriples(Triples):
                def __getitem__(self, i):
                    row, col, neg = super().__getitem__(i)
                    return row, col, neg, np.random.randint(len(self.rows)), random.random()

            class Sequences(Dataset):
                def __init__(self, seqs, length):
                    self.seqs, self.length = seqs, length

                def _left_pad(self, seq):
                    return [0] * max(0, self.length - len(seq)) + list(seq)[-self.length:]

                def __getitem__(self, i):
                    return torch.LongTensor(self._left_pad(self.seqs[i]))
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from records import FlaggedTriples, Sequences

            pairs = DataLoader(FlaggedTriples(rows, cols), batch_size=256, shuffle=True)
            seqs = DataLoader(Sequences(histories, 50), batch_size=256, shuffle=True)
            """,
    }),
    # DSL507: pandas lookups by label or position, and a mask over a whole column, are work per sample
    ("DSL507", "invalid", """
        import numpy as np
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Pairs(Dataset):
            def __init__(self, pairs, features):
                self.pairs, self.features = pairs, features

            def __getitem__(self, i):
                a, b = self.pairs.iloc[i, 0], self.pairs.iloc[i, 1]
                row = self.features[self.features["id"] == a]
                return torch.tensor(np.array(row["x"].values[0])), b

        loader = DataLoader(Pairs(pairs, features), batch_size=64, shuffle=True)  # expect: DSL507
        """),
    # DSL507: a helper that loads (found through self., in a subclass) is loading work
    ("DSL507", "invalid", {
        "records.py": """
            import numpy as np
            import torch
            from torch.utils.data import Dataset

            class Sequences(Dataset):
                def __init__(self, seqs):
                    self.seqs = seqs

                def _read(self, item):
                    return list(item)

                def __getitem__(self, i):
                    return torch.LongTensor(self._read(self.seqs[i]))

            class StoredSequences(Sequences):
                def _read(self, item):
                    return np.load(item)
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from records import StoredSequences

            seqs = DataLoader(StoredSequences(paths), batch_size=256, shuffle=True)  # expect: DSL507
            """,
    }),
    # DSL506: a pipeline object of the project (re-exported by a star import) keeps the lambda on self, and
    # a nested worker_init_fn reaches the loaders through the `**` dict they share
    ("DSL506", "invalid", {
        "aug/__init__.py": "from .pipeline import *\n",
        "aug/pipeline.py": """
            import random

            class OneOf:
                def __init__(self, choices):
                    self.choices = choices

                def __call__(self, image):
                    return random.choice(self.choices)(image)

            class Checked:
                def __init__(self, check):
                    check(None)  # used once, not kept
            """,
        "train.py": """
            import random
            import aug as A
            from torch.utils.data import DataLoader
            from images import Images

            def main(root):
                def seed(worker_id):
                    random.seed(worker_id)

                augment = A.OneOf([
                    A.Checked(lambda image: None),
                    lambda image: image,  # expect: DSL506
                ])
                train_set = Images(root, transform=augment)
                opts = dict(batch_size=32, num_workers=2, worker_init_fn=seed)  # expect: DSL506
                return DataLoader(train_set, shuffle=True, num_workers=2), DataLoader(Images(root), **opts)
            """,
        "images.py": """
            from torch.utils.data import Dataset

            class Images(Dataset):
                def __init__(self, root, transform=None):
                    self.root, self.transform = root, transform
            """,
    }),
    # DSL506: a project class (another file) deriving from torchvision's Compose/Lambda without an __init__ of
    # its own keeps what it is given as they do; one whose __init__ keeps nothing does not
    ("DSL506", "invalid", {
        "steps.py": """
            from torchvision.transforms import transforms

            class Compose(transforms.Compose):
                def reset(self):
                    pass

            class Lambda(transforms.Lambda):
                def reset(self):
                    pass

            class Logged(transforms.Lambda):
                def __init__(self, fn):
                    fn(None)  # called once here, not kept
                    super().__init__(print)
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from steps import Compose, Lambda, Logged
            from clips import build_clips

            def loaders(opt):
                steps = [Logged(lambda clip: None)]
                if opt.flow:
                    steps.append(Lambda(lambda clip: clip[:2]))  # expect: DSL506
                clips = build_clips(opt.root, Compose(steps))
                return DataLoader(clips, num_workers=opt.workers)
            """,
    }),
    # DSL506: a class built per call by a factory of another file has no importable name
    ("DSL506", "invalid", {
        "factory.py": """
            from torch.utils.data import Dataset

            def dataset_class(base, extra):
                class Combined(base, extra, Dataset):  # a class built per call: no importable name
                    pass
                return Combined
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from factory import dataset_class

            def main(opt, Base, Extra):
                Dataset = dataset_class(Base, Extra)
                return DataLoader(Dataset(opt, "train"), num_workers=opt.workers)  # expect: DSL506
            """,
    }),
    # DSL506: the datasets a factory of another file returns (whole, or an element of a tuple, also handed
    # on by a helper of the loader's file on each branch) to a loader with workers: reported at the lambda
    ("DSL506", "invalid", {
        "sets.py": """
            from torchvision import datasets

            def cifar(root):
                one_hot = lambda y: [int(y == k) for k in range(10)]  # expect: DSL506
                train = datasets.CIFAR10(root, train=True, target_transform=one_hot)
                return 32, train, datasets.CIFAR10(root, train=False)

            def svhn(root):
                return datasets.SVHN(root, target_transform=lambda y: y % 10)  # expect: DSL506

            def mnist(root):
                return datasets.MNIST(root, target_transform=lambda y: y)  # its loader has no workers
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from sets import cifar, mnist, svhn

            def pick(name, root):
                if name == "cifar":
                    size, train, test = cifar(root)
                else:
                    size, train, test = None, svhn(root), None
                return size, train, test

            def main(name, root, workers):
                found = pick(name, root)
                size, train, test = found
                digits = mnist(root)
                return DataLoader(train, num_workers=workers), DataLoader(test, num_workers=workers), DataLoader(digits, num_workers=0)
            """,
    }),
    # DSL506: a dataset given a lambda or nested function to keep (its transform) cannot be pickled either
    ("DSL506", "invalid", """
        import torchvision.transforms as T
        from torch.utils.data import DataLoader, Dataset

        class Glyphs(Dataset):
            def __init__(self, root, transform=None):
                self.root, self.transform = root, transform

        def get_loader(root, workers=4):
            flip = T.Lambda(lambda x: 1.0 - x)  # expect: DSL506
            dataset = Glyphs(root, T.Compose([T.ToTensor(), flip]))
            return DataLoader(dataset, batch_size=8, num_workers=workers)

        def get_other(root):
            def scale(x):
                return x * 2
            data = Glyphs(root, transform=scale)  # expect: DSL506
            return DataLoader(data, num_workers=2)

        def get_installed(root, workers):  # installed after construction, on the object the loader gets
            shift = T.Lambda(lambda x: x - 0.5)  # expect: DSL506
            train = Glyphs(root)
            train.transform = T.Compose([T.ToTensor(), shift])
            return DataLoader(train, num_workers=workers)
        """),
    ("DSL506", "valid", """
        import torchvision.transforms as T
        from torch.utils.data import DataLoader, Dataset

        class Glyphs(Dataset):
            def __init__(self, root, transform=None):
                self.root, self.transform = root, transform

        def get_installed(root, workers):  # another object's transform, and a picklable one for the loader's
            other, train = Glyphs(root), Glyphs(root)
            other.transform = T.Lambda(lambda x: x - 0.5)
            train.transform = T.Compose([T.ToTensor()])
            train.target_transform = None
            return DataLoader(train, num_workers=workers)
        """),
    ("DSL506", "valid", """
        import torchvision.transforms as T
        from torchvision.datasets import ImageFolder
        from torch.utils.data import DataLoader

        def get_loader(root, paths):
            only_png = ImageFolder(root, is_valid_file=lambda p: p.endswith(".png"))  # not kept: used while listing
            ordered = ImageFolder(root, transform=T.Compose(sorted(paths, key=lambda p: len(p))))  # a list is kept
            single = ImageFolder(root, transform=T.Lambda(lambda x: x))
            return (DataLoader(only_png, num_workers=4), DataLoader(ordered, num_workers=4),
                    DataLoader(single, num_workers=0))
        """),
    # DSL506: a transform list filled step by step, the parts a ConcatDataset (or Subset, random_split) keeps,
    # and a transform handed in through a `**` dict: each reaches the spawned worker with the dataset
    ("DSL506", "invalid", """
        import torchvision.transforms as T
        from torch.utils.data import ConcatDataset, DataLoader, Subset, random_split
        from torchvision.datasets import ImageFolder

        def steps_loader(root, opt):
            steps = [T.Resize(64)]
            if opt.gray:
                steps.append(T.Lambda(lambda img: img.convert("L")))  # expect: DSL506
            steps += [T.ToTensor()]
            return DataLoader(ImageFolder(root, transform=T.Compose(steps)), batch_size=32, num_workers=opt.workers)

        def concat_loader(roots, workers):
            parts = []
            for root in roots:
                part = ImageFolder(root, target_transform=lambda y: y + 1)  # expect: DSL506
                parts.append(part)
            return DataLoader(ConcatDataset(parts), batch_size=8, num_workers=workers)

        def split_loader(root, workers):
            whole = ImageFolder(root, transform=T.Compose([T.ToTensor(), T.Lambda(lambda x: x * 2 - 1)]))  # expect: DSL506
            train, held_out = random_split(whole, [0.9, 0.1])
            return DataLoader(Subset(train, range(100)), num_workers=workers)

        def options_loader(root, workers):
            options = dict(root=root, target_transform=lambda y: float(y))  # expect: DSL506
            data = ImageFolder(**options)
            options = {"num_workers": workers}
            return DataLoader(data, batch_size=8, **options)
        """),
    ("DSL506", "valid", """
        import torchvision.transforms as T
        from torch.utils.data import ConcatDataset, DataLoader
        from torchvision.datasets import ImageFolder

        def gray(img):
            return img.convert("L")

        def steps_loader(root, opt):  # module-level functions pickle by name
            steps = [T.Resize(64)]
            steps.append(T.Lambda(gray))
            return DataLoader(ImageFolder(root, transform=T.Compose(steps)), num_workers=opt.workers)

        def concat_loader(roots, workers):  # the lambda is used while listing, not kept; another list is filled
            parts, names = [], []
            for root in roots:
                parts.append(ImageFolder(root, is_valid_file=lambda p: p.endswith(".png")))
                names.append(lambda: root)
            return DataLoader(ConcatDataset(parts), num_workers=workers)

        def options_loader(root, workers):  # the dict's transform is replaced before it is unpacked
            options = dict(root=root, transform=lambda x: x)
            options["transform"] = T.ToTensor()
            return DataLoader(ImageFolder(**options), num_workers=workers)
        """),
    # DSL506: a factory that may return a picklable module-level object, or whose result a decorator may change
    ("DSL506", "valid", {
        "collating.py": """
            import functools
            from torch.utils.data import default_collate

            def make_collate(pad):
                if pad is None:
                    return default_collate  # a module-level function: picklable
                def collate(batch):
                    return [pad] + batch
                return collate

            def pick_collate(pad):
                if pad:
                    def collate(batch):
                        return [pad] + batch
                    return collate  # otherwise None: the default collate

            def dataset_class(base, cached):
                if cached:
                    return base  # may be a module-level class: instances pickle
                class Cached(base):
                    pass
                return Cached

            @functools.cache
            def wrapped_collate():
                def collate(batch):
                    return batch
                return collate
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from collating import dataset_class, make_collate, pick_collate, wrapped_collate

            def loaders(ds, Base):
                Kind = dataset_class(Base, False)
                return (DataLoader(Kind(), num_workers=4),
                        DataLoader(ds, num_workers=4, collate_fn=make_collate(None)),
                        DataLoader(ds, num_workers=4, collate_fn=pick_collate(0)),
                        DataLoader(ds, num_workers=4, collate_fn=wrapped_collate()))
            """,
    }),
]


@pytest.mark.parametrize(
    "code,kind,case", [pytest.param(*case, id=f"{case[0]}-{case[1]}-more-{i}") for i, case in enumerate(MORE_CASES)]
)
def test_more_cases(tmp_path, code, kind, case):
    run_case(tmp_path, code, kind, case)


def test_dsl506_preview_form_is_a_command_line_default_only(tmp_path):
    """Without --preview, DSL506 stays silent on a count only a command-line option's default 0
    gives, and still fires on a parameter's default 0 (callers elsewhere may pass workers)."""
    run_case(tmp_path, "DSL506", "invalid", """
        import argparse
        from torch.utils.data import DataLoader

        def build(ds, num_workers=0):
            return DataLoader(ds, num_workers=num_workers, collate_fn=lambda b: b)  # expect: DSL506

        parser = argparse.ArgumentParser()
        parser.add_argument("-j", "--workers", type=int, default=0)
        args = parser.parse_args()
        loader = DataLoader(ds, num_workers=args.workers, collate_fn=lambda b: b)
        """, preview=False)


def test_dsl506_a_lambda_a_class_keeps_is_reported_once_in_the_class_file(tmp_path):
    """Loaders of other files over a class (or a subclass) whose own ``__init__`` keeps a lambda: one
    finding, at the lambda in the class's file (also a module-level name bound to a lambda that a
    parameter defaults to); none where the loaders are built, none when every construction passes
    the parameter or no loader may start workers."""
    base = """
        from torch.utils.data import Dataset

        identity = lambda y: y  # expect: DSL506

        class Frames(Dataset):
            def __init__(self, paths, target_transform=identity):
                self.paths = paths
                self.scale = lambda x: x / 255.0  # expect: DSL506
                self.target_transform = target_transform

            def __getitem__(self, i):
                return self.scale(self.paths[i]), self.target_transform(i)

            def __len__(self):
                return len(self.paths)
        """
    sub = """
        from base import Frames

        class Resized(Frames):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
        """
    train = """
        from torch.utils.data import DataLoader
        from base import Frames
        from sub import Resized

        def loaders(paths, resize, workers):
            if resize:
                ds = Resized(paths)
            else:
                ds = Frames(paths)
            return DataLoader(ds, num_workers=workers), DataLoader(Frames(paths), num_workers=2)
        """
    write_files(tmp_path, {"base.py": base, "sub.py": sub, "train.py": train})
    found = check_tree(tmp_path, select=["DSL506"]).diagnostics
    assert {(f.path.rsplit("/", 1)[-1], f.row) for f in found} == {
        (path, row) for path, row, _ in expected_markers(tmp_path)}
    assert any("(a DataLoader with workers in `train.py` is built over one)" in f.message for f in found)
    # every construction gives the parameter: only the unconditional lambda (with --preview also the
    # default, left to the users' constructions); no workers: nothing
    write_files(tmp_path, {"train.py": train.replace("(paths)", "(paths, None)")})
    assert [f.row for f in check_tree(tmp_path, select=["DSL506"], preview=False).diagnostics] == [8]
    previewed = check_tree(tmp_path, select=["DSL506"]).diagnostics
    assert [f.row for f in previewed] == [3, 8] and "no DataLoader of this project is built over a construction that leaves it out" in previewed[0].message
    write_files(tmp_path, {"train.py": train.replace("num_workers=workers", "num_workers=0").replace("num_workers=2", "num_workers=0")})
    assert not check_tree(tmp_path, select=["DSL506"]).diagnostics


def test_dsl506_a_local_class_a_factory_returns_to_another_files_loader(tmp_path):
    """A module-level function defines its dataset class inside itself and returns instances (a
    tuple of splits) that another file's DataLoader with workers loads: reported once, at that
    class in the function's file, where the fix goes; silent when the loaders start no workers."""
    data = """
        from torch.utils.data import Dataset

        def load_splits(rows):
            class Split(Dataset):  # expect: DSL506
                def __init__(self, part):
                    self.part = part

                def __getitem__(self, i):
                    return self.part[i]

                def __len__(self):
                    return len(self.part)

            train, test = Split(rows[:8]), Split(rows[8:])
            return train, test, len(rows)
        """
    train = """
        from torch.utils.data import DataLoader
        from data import load_splits

        train_set, test_set, n = load_splits(list(range(10)))
        train_loader = DataLoader(train_set, batch_size=2, num_workers={workers})
        test_loader = DataLoader(test_set, batch_size=2, num_workers={workers})
        """
    write_files(tmp_path, {"data.py": data, "train.py": train.format(workers=4)})
    found = check_tree(tmp_path, select=["DSL506"]).diagnostics
    assert {(f.path.rsplit("/", 1)[-1], f.row) for f in found} == {(p, r) for p, r, _ in expected_markers(tmp_path)}
    assert "the local class `Split`" in found[0].message
    write_files(tmp_path, {"train.py": train.format(workers=0)})
    assert not check_tree(tmp_path, select=["DSL506"]).diagnostics


def test_dsl506_dataset_that_cannot_be_pickled_either_is_a_preview_form(tmp_path):
    """Without --preview, DSL506 stays silent when the dataset (a project class of another file)
    keeps a lock or an open handle from ``__init__``: the loader is fork-only whatever the collate.
    A class that decides its own pickling, or an open handle kept elsewhere, does not count."""
    files = {
        "data.py": """
            import threading
            import h5py
            from torch.utils.data import Dataset

            class Locked(Dataset):
                def __init__(self, items):
                    self.items = items
                    self.lock = threading.Lock()

            class Archive(Locked):
                def __init__(self, path):
                    super().__init__([])
                    self.file = open(path, "rb")

            class Tables(Dataset):
                def __init__(self, path):
                    self.h5 = h5py.File(path, "r")

                def __getstate__(self):  # reopened in each worker
                    return {"path": self.h5.filename}
            """,
        "train.py": """
            from torch.utils.data import DataLoader
            from data import Archive, Locked, Tables

            a = DataLoader(Locked([1, 2]), num_workers=4, collate_fn=lambda b: b)
            ds = Archive("x.bin")
            b = DataLoader(ds, num_workers=4, collate_fn=lambda b: b)
            c = DataLoader(Tables("t.h5"), num_workers=4, collate_fn=lambda b: b)  # expect: DSL506
            """,
    }
    run_case(tmp_path, "DSL506", "invalid", files, preview=False)
    run_case(tmp_path / "preview", "DSL506", "invalid", {
        name: text.replace("lambda b: b)\n", "lambda b: b)  # expect: DSL506\n") for name, text in files.items()})


def test_dsl506_a_worker_count_passed_from_a_file_that_names_no_data_api(tmp_path):
    """The only file that passes ``num_workers`` to a loader factory names nothing else of the
    data API (it imports the factory and calls it): the prefilter still reads it (``num_workers``
    is a core word), so the factory's ``**kwargs`` may start workers and its nested collate
    function is reported (DSL506). With the count left out, nothing is."""
    factory = """
        from torch.utils.data import DataLoader

        def get_loader(path, **kwargs):
            def collate(items):
                return items

            return DataLoader(Lines(path), collate_fn=collate, **kwargs)
        """
    write_files(tmp_path, {"data.py": factory, "main.py": """
        from data import get_loader

        loader = get_loader("train.txt", batch_size=8, num_workers=4)
        """})
    found = [(f.path.rsplit("/", 1)[-1], f.code) for f in check_tree(tmp_path, select=["DSL506"]).diagnostics]
    assert found == [("data.py", "DSL506")]
    write_files(tmp_path, {"main.py": """
        from data import get_loader

        loader = get_loader("train.txt", batch_size=8)
        """})
    assert check_tree(tmp_path, select=["DSL506"]).diagnostics == []


def test_dsl506_a_transform_bound_in_both_arms_of_an_if_is_followed_on_each_path(tmp_path):
    """``transform`` is a pipeline of the project's own ``Compose``/``Lambda`` classes, bound in
    both arms of ``if mode == "train":``; the training arm keeps a lambda (``unpicklable._kept``
    follows every value the name may hold), so the dataset given it cannot reach spawned workers
    (DSL506). With no lambda in either arm, nothing is reported."""
    source = """
        from torch.utils import data
        import transforms as trans

        class Images(data.Dataset):
            def __init__(self, root, transform):
                self.root, self.transform = root, transform

            def __getitem__(self, i):
                return self.transform(load(self.root, i))

        def get_loader(root, mode="train", workers=4):
            mean = 104.0
            if mode == "train":
                transform = trans.Compose([trans.ToTensor(), {train}])
            else:
                transform = trans.Compose([trans.ToTensor()])
            return data.DataLoader(Images(root, transform), batch_size=8, num_workers=workers)
        """
    pipeline = """
        class Compose:
            def __init__(self, transforms):
                self.transforms = transforms

        class Lambda:
            def __init__(self, fn):
                self.fn = fn

        class ToTensor:
            pass

        def shift(x):
            return x - 104.0
        """
    write_files(tmp_path, {"transforms.py": pipeline, "lambdas.py": source.format(train="trans.Lambda(lambda x: x - mean)"),
                           "named.py": source.format(train="trans.Lambda(trans.shift)")})
    found = [(f.path.rsplit("/", 1)[-1], f.code) for f in check_tree(tmp_path, select=["DSL506"]).diagnostics]
    assert found == [("lambdas.py", "DSL506")]



def test_dsl506_a_dataset_built_in_either_arm_of_an_if_keeps_its_class_lambda(tmp_path):
    """The dataset name is bound in both arms of an ``if`` to subclasses of a class (another file)
    whose ``__init__`` keeps a lambda on ``self``: on either path the dataset cannot be pickled
    (``unpicklable.class_kept_callable`` is asked of each construction the name may hold, one path
    being enough, as for arguments), reported once at the lambda in the base class's file. Subclasses whose base
    keeps only a module-level function stay silent."""
    base = """
        import torchvision.transforms as T
        from torch.utils.data import Dataset

        def scale(x):
            return x / 255.0

        class Clips(Dataset):
            def __init__(self, root, flip=None):
                self.root = root
                self.transforms = T.Compose([T.Lambda({step})])

            def __getitem__(self, i):
                return self.transforms(i)

            def __len__(self):
                return 8

        class Resized(Clips):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)

        class Cropped(Clips):
            def __init__(self, mode="center", *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.mode = mode
        """
    script = """
        from torch.utils.data import DataLoader
        from {data} import Cropped, Resized

        def main(args):
            options = {{"root": args.root, "flip": args.flip}}
            if args.mode is None:
                train_set = Resized(**options)
            else:
                train_set = Cropped(mode=args.mode, **options)
            return DataLoader(train_set, batch_size=1, num_workers=args.workers)
        """
    write_files(tmp_path, {"lambdas.py": base.format(step="lambda x: x / 255.0"), "named.py": base.format(step="scale"),
                           "train_a.py": script.format(data="lambdas"), "train_b.py": script.format(data="named")})
    found = [(f.path.rsplit("/", 1)[-1], f.code) for f in check_tree(tmp_path, select=["DSL506"]).diagnostics]
    assert found == [("lambdas.py", "DSL506")]  # at the lambda, where the fix goes (``kept_elsewhere``)

#: a dataset keeping a parameter whose default is a lambda (the DSL506 tests below)
_STEMS = """
        class Stems(Dataset):
            def __init__(self, root, split="train", augment=lambda a: a):  # expect: DSL506
                self.root = root
                self.augment = augment

            def __getitem__(self, i):
                return self.augment(i)

            def __len__(self):
                return 8
        """


def test_dsl506_a_default_lambda_left_out_through_a_dict_the_caller_builds(tmp_path):
    """A class keeps a parameter whose default is a lambda; another file builds it from a ``**`` dict
    that lacks the key (``Stems(split="valid", **common)``) and loads it with workers: reported once,
    at the default in the class's file (``built_datasets`` follows the dict). Silent when the dict
    gives the key."""
    data = """
        from torch.utils.data import Dataset
        """ + _STEMS
    train = """
        from torch.utils.data import DataLoader
        from stems import Stems

        def flip(a):
            return a[::-1]

        def main(cfg):
            common = {{"root": cfg.root{extra}}}
            train_set = Stems(augment=flip, **common)
            valid_set = Stems(split="valid", **common)
            return DataLoader(train_set, num_workers=cfg.workers), DataLoader(valid_set, num_workers=cfg.workers)
        """
    write_files(tmp_path, {"stems.py": data, "train.py": train.format(extra="")})
    found = check_tree(tmp_path, select=["DSL506"]).diagnostics
    assert {(f.path.rsplit("/", 1)[-1], f.row) for f in found} == {(p, r) for p, r, _ in expected_markers(tmp_path)}
    assert "which a construction there leaves out" in found[0].message
    write_files(tmp_path, {"train.py": train.format(extra=', "augment": flip')})
    assert not check_tree(tmp_path, select=["DSL506"], preview=False).diagnostics
    # every construction of the project gives it (the dict is followed): with --preview, left to its users
    left = check_tree(tmp_path, select=["DSL506"]).diagnostics
    assert len(left) == 1 and "a user's construction may" in left[0].message


def test_dsl506_datasets_a_function_returns_from_each_arm_with_its_own_dict(tmp_path):
    """A function builds its ``**`` dict in each arm of an ``if`` and returns the dataset that arm
    constructs; another file loads it with workers given by a conditional dict (``{...} if cuda
    else {}``). Each class whose default lambda its arm's dict leaves out is reported, at the default;
    an arm whose dict gives the key is silent, and so is a loader whose dicts give no workers."""
    data = """
        from torch.utils.data import Dataset

        def flip(a):
            return a[::-1]
        """ + _STEMS + """
        class Tracks(Stems):
            def __init__(self, root, split="train", augment=lambda a: a):  # expect: DSL506
                super().__init__(root, split, flip)
                self.augment = augment

        class Mixes(Stems):
            def __init__(self, root, split="train", augment=lambda a: a):
                super().__init__(root, split, flip)
                self.augment = augment

        def load_valid(args):
            if args.kind == "stems":
                common = {"root": args.root}
                valid = Stems(split="valid", **common)
            elif args.kind == "tracks":
                common = {"root": args.root, "split": "valid"}
                valid = Tracks(**common)
            else:
                common = {"root": args.root, "augment": flip}
                valid = Mixes(split="valid", **common)
            return valid
        """
    train = """
        from torch.utils.data import DataLoader
        from data import load_valid

        def main(args):
            loader_kwargs = {loader} if args.cuda else {{}}
            valid_set = load_valid(args)
            return DataLoader(valid_set, batch_size=1, **loader_kwargs)
        """
    write_files(tmp_path, {"data.py": data, "train.py": train.format(loader='{"num_workers": args.workers, "pin_memory": True}')})
    found = check_tree(tmp_path, select=["DSL506"], preview=False).diagnostics
    assert {(f.path.rsplit("/", 1)[-1], f.row) for f in found} == {(p, r) for p, r, _ in expected_markers(tmp_path)}
    assert all("the dataset `load_valid` returns is an instance of" in f.message for f in found)
    # with --preview, also the default of `Mixes`, which the project's one construction gives: left to its users
    left = [f for f in check_tree(tmp_path, select=["DSL506"]).diagnostics if f not in found]
    assert len(left) == 1 and "Mixes" in left[0].message and "a user's construction may" in left[0].message
    write_files(tmp_path, {"train.py": train.format(loader='{"pin_memory": True}')})
    assert not check_tree(tmp_path, select=["DSL506"], preview=False).diagnostics


def test_dsl506_a_loader_builder_handed_by_name_to_a_function_that_gives_it_workers(tmp_path):
    """``make_loaders(cfg, build_loader)`` hands a builder (re-exported by its package with a star
    import) to a function that calls that parameter with ``num_workers=``: the builder's own
    ``**kwargs`` then hold a worker count, so its nested collate function is reported
    (``function_values``). The script that hands it on names no data API. Silent when the call
    through the parameter passes no workers; when another builder is handed there, only that one."""
    files = {
        "pkg/__init__.py": "",
        "pkg/loaders/__init__.py": "from .text import *\n",
        "pkg/loaders/text.py": """
            from torch.utils.data import DataLoader

            def build_loader(rows, pad, **kwargs):
                def collate(batch):
                    return [row + [pad] for row in batch]

                return DataLoader(rows, collate_fn=collate, **kwargs)  # expect: DSL506

            def plain_loader(rows, pad, **kwargs):
                def collate(batch):
                    return [row + [pad] for row in batch]

                return DataLoader(rows, collate_fn=collate, **kwargs)
            """,
        "pkg/build.py": """
            def make_loaders(cfg, get_loader_fn, **kwargs):
                train = get_loader_fn(cfg.train, shuffle=True, num_workers={workers}, **kwargs)
                return train, cfg.valid
            """,
        "train.py": """
            from pkg.build import make_loaders
            from pkg.loaders import build_loader

            def main(cfg):
                return make_loaders(cfg, build_loader, pad=0)
            """,
    }
    write_files(tmp_path, {**files, "pkg/build.py": files["pkg/build.py"].format(workers="cfg.workers")})
    found = check_tree(tmp_path, select=["DSL506"]).diagnostics
    assert {(f.path, f.row) for f in found} == {(p, r) for p, r, _ in expected_markers(tmp_path)}
    assert "the nested function `collate`" in found[0].message
    write_files(tmp_path, {"pkg/build.py": files["pkg/build.py"].format(workers="0")})
    assert not check_tree(tmp_path, select=["DSL506"]).diagnostics
    write_files(tmp_path, {"pkg/build.py": files["pkg/build.py"].format(workers="cfg.workers"),
                           "train.py": files["train.py"].replace("build_loader", "plain_loader")})
    assert [f.row for f in check_tree(tmp_path, select=["DSL506"]).diagnostics] == [13]  # the one handed there


def test_dsl506_library_and_pass_through_loaders_are_dataloaders(tmp_path):
    """MONAI's ``DataLoader`` and PyG's hand torch's arguments on (``library_loaders.KWARGS_LOADERS``),
    and so does a project subclass whose ``__init__`` takes and forwards ``*args, **kwargs``: their
    constructions with workers are judged like ``DataLoader(...)`` (DSL506). PyG's loader installs
    its own ``collate_fn``, so a lambda given there is dropped, not pickled: silent."""
    write_files(tmp_path, {"train.py": """
        import monai
        import torchvision.transforms as T
        from torch.utils.data import DataLoader
        from torch_geometric.loader import DataLoader as GraphLoader

        class Endless(DataLoader):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)

        def loaders(images, graphs, workers=4):
            pipeline = T.Compose([T.Lambda(lambda x: x / 255)])
            scans = monai.data.DataLoader(monai.data.Dataset(images, transform=pipeline), num_workers=workers)
            ignored = GraphLoader(graphs, collate_fn=lambda b: b, num_workers=workers)
            seeded = GraphLoader(graphs, worker_init_fn=lambda w: None, num_workers=workers)
            endless = Endless(images, collate_fn=lambda b: b, num_workers=workers)
            return scans, ignored, seeded, endless
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL506"]).diagnostics]
    assert found == [("DSL506", 11), ("DSL506", 14), ("DSL506", 15)]


def test_dsl503_a_count_of_cpus_less_one_is_zero_on_a_one_cpu_machine(tmp_path):
    """``num_workers=os.cpu_count() - 1`` (also through ``min(...)`` and a name bound once) is 0
    on a machine with one CPU, where ``persistent_workers=True`` raises: a preview form
    (``worker_counts.zero_on_small_machines``). ``max(1, ...)`` keeps the count positive."""
    write_files(tmp_path, {"train.py": """
        import os
        from torch.utils.data import DataLoader

        def build(ds, limit=8):
            workers = min(limit, os.cpu_count() - 1)
            first = DataLoader(ds, num_workers=workers, persistent_workers=True)
            second = DataLoader(ds, num_workers=os.cpu_count() - 2, prefetch_factor=4)
            kept = DataLoader(ds, num_workers=max(1, os.cpu_count() - 1), persistent_workers=True)
            return first, second, kept
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL503"], preview=True).diagnostics]
    assert found == [("DSL503", 6), ("DSL503", 7)]
    assert check_tree(tmp_path, select=["DSL503"], preview=False).diagnostics == []


def test_dsl503_a_division_by_the_count_before_the_loader_rules_zero_out(tmp_path):
    """A statement before the loader that divides by the worker count (or by a product with it)
    raises ``ZeroDivisionError`` first when the count is 0, so the loader never sees 0 there
    (``narrowing``: the user-set preview form and a parameter defaulting to 0 alike). A division
    the statement may skip (a conditional's arm, the right of ``or``, a lambda) decides nothing."""
    write_files(tmp_path, {"train.py": """
        import math
        from torch.utils.data import DataLoader

        def build(ds, batch, workers):
            steps = math.ceil(len(ds) / (batch * workers))
            return DataLoader(ds, num_workers=workers, persistent_workers=True), steps

        def share(ds, workers=0):
            per_worker = len(ds) // workers
            return DataLoader(ds, num_workers=workers, prefetch_factor=2), per_worker

        def maybe(ds, batch, workers):
            steps = len(ds) / (batch * workers) if workers else 0
            later = lambda: len(ds) % workers
            return DataLoader(ds, num_workers=workers, persistent_workers=True), steps, later

        def short(ds, workers=0):
            steps = workers == 0 or len(ds) / workers
            return DataLoader(ds, num_workers=workers, persistent_workers=True), steps
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL503"], preview=True).diagnostics]
    assert found == [("DSL503", 15), ("DSL503", 19)]
    assert [f.start[0] for f in check_tree(tmp_path, select=["DSL503"]).diagnostics] == [15, 19]  # (the code tests 0 there)


def test_dsl506_a_fork_context_chosen_by_the_worker_count_forks_every_worker(tmp_path):
    """``multiprocessing_context="fork" if num_workers > 0 else None`` forks whenever there are
    workers, so nothing is pickled (``zero_arms.workers_arm``); a test that does not split 0
    from the other counts (``> 1``), or picks fork only without workers, decides nothing."""
    write_files(tmp_path, {"train.py": """
        from torch.utils.data import DataLoader

        def build(ds, num_workers):
            forked = DataLoader(ds, num_workers=num_workers, collate_fn=lambda b: b,
                                multiprocessing_context="fork" if num_workers > 0 else None)
            negated = DataLoader(ds, num_workers=num_workers, collate_fn=lambda b: b,
                                 multiprocessing_context=None if num_workers == 0 else "fork")
            partial = DataLoader(ds, num_workers=num_workers, collate_fn=lambda b: b,
                                 multiprocessing_context="fork" if num_workers > 1 else None)
            backwards = DataLoader(ds, num_workers=num_workers, collate_fn=lambda b: b,
                                   multiprocessing_context=None if num_workers else "fork")
            return forked, negated, partial, backwards
        """})
    found = [(f.code, f.start[0]) for f in check_tree(tmp_path, select=["DSL506"]).diagnostics]
    assert found == [("DSL506", 8), ("DSL506", 10)]


def test_loader_options_through_the_kwargs_of_project_functions(tmp_path):
    """A project function that hands its ``**kwargs`` on, unchanged, to a DataLoader (also through
    another such function, in another file) builds a loader with the keywords its callers pass
    (``kwargs_forwarders``): a nested collate given with workers is reported at the call. A function
    that pops the key, or takes it as its own parameter, decides it itself; and what the call
    does not pass may still come from the function (no DSL503 for a count it leaves out)."""
    write_files(tmp_path, {
        "loaders.py": """
        import torch

        def make_loader(dataset, batch_size=1, **kwargs):
            return torch.utils.data.DataLoader(dataset, batch_size=batch_size, **kwargs)

        def tally(stat, dataset, cache=None, **kwargs):
            return make_loader(dataset, **kwargs)

        def plain(dataset, **kwargs):
            kwargs.pop("collate_fn", None)
            return make_loader(dataset, **kwargs)

        def own(dataset, collate_fn=None, **kwargs):
            return make_loader(dataset, collate_fn=None, **kwargs)
        """,
        "stats.py": """
        from loaders import own, plain, tally

        def padder(width):
            def pad(batch):
                return batch
            return pad

        def collect(stat, ds):
            a = tally(stat, ds, collate_fn=padder(8), num_workers=2)  # expect: DSL506
            b = plain(ds, collate_fn=padder(8), num_workers=2)
            c = own(ds, collate_fn=padder(8), num_workers=2)
            d = tally(stat, ds, persistent_workers=True)
            return a, b, c, d
        """,
    })
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL503", "DSL506"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_webdataset_webloader_takes_torchs_arguments(tmp_path):
    """``wds.WebLoader(*args, **kw)`` builds ``DataLoader(*args, **kw)`` (``library_loaders.KWARGS_LOADERS``):
    torch's checks of worker options apply to it."""
    write_files(tmp_path, {"train.py": """
        import webdataset as wds

        def loaders(pipeline):
            serial = wds.WebLoader(pipeline, batch_size=None, num_workers=0, persistent_workers=True)  # expect: DSL503
            parallel = wds.WebLoader(pipeline, batch_size=None, num_workers=4, persistent_workers=True)
            return serial, parallel
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL503"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_pyg_loaders_are_the_loaders_over_their_datasets(tmp_path):
    """A PyG ``DataLoader`` (a ``library_loaders.KWARGS_LOADERS`` class) is one of the loaders known over
    its dataset (the summary's loader facts): with no workers, CUDA work in the dataset's
    ``__init__`` never reaches a forked worker (DSL204); with workers, it does."""
    write_files(tmp_path, {
        "data.py": """
        import torch
        from torch_geometric.data import Dataset

        class Embedded(Dataset):
            def __init__(self, items):
                self.model = torch.nn.Linear(4, 4).cuda()
                self.items = items
            def len(self):
                return len(self.items)
            def get(self, i):
                return self.items[i]

        class Shared(Dataset):
            def __init__(self, items):
                self.model = torch.nn.Linear(4, 4).cuda()  # expect: DSL204
                self.items = items
            def len(self):
                return len(self.items)
            def get(self, i):
                return self.items[i]
        """,
        "run.py": """
        from torch_geometric.loader import DataLoader
        from data import Embedded, Shared

        def main(items):
            serial = DataLoader(dataset=Embedded(items), batch_size=1, shuffle=False)
            parallel = DataLoader(Shared(items), batch_size=1, num_workers=4)
            return serial, parallel
        """,
    })
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL204"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_loops_over_library_loaders_are_loader_loops(tmp_path):
    """The loops' index (``loops.LoopIndex``) knows the library loaders that hand torch's arguments
    through (``library_loaders.KWARGS_LOADERS``): an epoch loop over a PyG or MONAI loader whose
    ``DistributedSampler`` never gets the epoch repeats one order on every epoch (DSL505), as with
    ``DataLoader(...)``. A sampler given its epoch, and a loader iterated once, stay silent."""
    write_files(tmp_path, {"train.py": """
        import monai
        import torch.distributed as dist
        from torch.utils.data.distributed import DistributedSampler
        from torch_geometric.loader import DataLoader

        def run(graphs, scans, model, opt, epochs):
            dist.init_process_group("gloo")
            sampler = DistributedSampler(graphs)  # expect: DSL505
            loader = DataLoader(graphs, batch_size=32, sampler=sampler)
            told = DistributedSampler(graphs)
            fine = DataLoader(graphs, batch_size=32, sampler=told)
            volumes = monai.data.DataLoader(scans, batch_size=2, sampler=DistributedSampler(scans))  # expect: DSL505
            for epoch in range(epochs):
                told.set_epoch(epoch)
                for batch in loader:
                    model(batch).sum().backward()
                    opt.step()
                for batch in fine:
                    model(batch).sum().backward()
                    opt.step()
                for volume in volumes:
                    model(volume).sum().backward()
            for batch in DataLoader(graphs, sampler=DistributedSampler(graphs)):
                model(batch)
        """})
    found = {(f.path.rsplit("/", 1)[-1], f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL505"]).diagnostics}
    assert found == expected_markers(tmp_path)


def test_a_library_base_the_project_defines_is_read_as_code(tmp_path):
    """Inside PyG's own source, ``torch_geometric.data.Dataset`` is a project class: its real
    ``__getitem__`` (which calls ``self.len()`` for every sample) is followed, not the library
    fallback ``get`` (``project.LIBRARY_ROOTS`` apply only to bases the project does not define)."""
    write_files(tmp_path, {
        "torch_geometric/__init__.py": "",
        "torch_geometric/data/__init__.py": "from torch_geometric.data.dataset import Dataset\n",
        "torch_geometric/data/dataset.py": """
        import torch.utils.data

        class Dataset(torch.utils.data.Dataset):
            def indices(self):
                return range(self.len())
            def __getitem__(self, idx):
                return self.get(self.indices()[idx])
        """,
        "torch_geometric/datasets/__init__.py": "",
        "torch_geometric/datasets/tracks.py": """
        import glob
        from torch_geometric.data import Dataset

        class Tracks(Dataset):
            def len(self):
                return len(glob.glob(self.root + "/event*.csv"))  # expect: DSL201
            def get(self, i):
                return i
        """,
    })
    found = {(f.path.replace(str(tmp_path) + "/", ""), f.start[0], f.code) for f in check_tree(tmp_path, select=["DSL201"]).diagnostics}
    assert {(p.rsplit("/", 1)[-1], r, c) for p, r, c in found} == {(p.rsplit("/", 1)[-1], r, c) for p, r, c in expected_markers(tmp_path)}


def test_dsl501_a_builder_called_from_another_file_with_a_sampler(tmp_path):
    """A function that hands its own ``shuffle`` (default True) and ``sampler`` parameters to a
    DataLoader is judged per call: a method of another file that passes a sampler and keeps the
    default builds a loader that raises; reported at the loader call, naming that caller."""
    loaders = """
        from torch.utils.data import DataLoader

        def create_loader(ds, options, sampler=None, shuffle=True):
            return DataLoader(ds, batch_size=options["batch"], shuffle=shuffle, sampler=sampler)  # expect: DSL501
        """
    train = """
        from torch.utils.data import DistributedSampler
        from data.loaders import create_loader

        class Trainer:
            def setup(self, ds, options, distributed):
                self.sampler = DistributedSampler(ds) if distributed else None
                self.train_loader = create_loader(ds, options, self.sampler)
                self.val_loader = create_loader(ds, options)
        """
    write_files(tmp_path, {"data/__init__.py": "", "data/loaders.py": loaders, "train.py": train})
    found = check_tree(tmp_path, select=["DSL501"]).diagnostics
    assert [(f.path.replace("\\", "/").endswith("data/loaders.py"), f.row) for f in found] == [(True, 4)]
    assert "`Trainer.setup` in `train.py` passes a `sampler`" in found[0].message
    # the caller turns shuffling off with its sampler, or passes it through a `**` dict it does not build: nothing
    write_files(tmp_path, {"train.py": train.replace("self.sampler)", "self.sampler, shuffle=False)")})
    assert not check_tree(tmp_path, select=["DSL501"]).diagnostics
    write_files(tmp_path, {"train.py": train.replace("self.sampler)", "**options.extra)")})
    assert not check_tree(tmp_path, select=["DSL501"]).diagnostics
    # a dict the caller builds is read: its sampler with the default shuffle raises
    write_files(tmp_path, {"train.py": train.replace("self.sampler)", "**{'sampler': self.sampler})")})
    assert [f.row for f in check_tree(tmp_path, select=["DSL501"]).diagnostics] == [4]
