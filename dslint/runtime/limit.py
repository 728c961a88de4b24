"""Sample limits for ``dslint probe``: fewer samples per epoch from a user's dataset.

- ``FirstSamples``: a map-style dataset cut to its first ``count`` indices;
- ``SpreadSamples``: ``count`` indices evenly spaced over the whole dataset (the memory
  check: copy-on-read grows with the pages touched, so the reads must span the index);
- ``FirstSamplesIterable``: an iterable dataset that stops after ``count`` samples per
  worker and epoch (an infinite stream ends).

The wrappers delegate attribute reads and writes to the dataset (``set_epoch``,
``loader.dataset.classes``) and are module-level classes, so spawned workers can
unpickle them. A DataLoader target is rebuilt over the wrapper with its own settings
(standard samplers are re-made for the new length; custom ones are filtered).

Imports torch: used only in probe child processes.
"""

from __future__ import annotations

from typing import Optional

from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

from dslint.runtime.common import INNER
from dslint.runtime.instrument import apply_overrides, loader_kwargs_of


class _Delegating:
    def __getattr__(self, name):
        if name.startswith("__") or name.startswith("_dslint"):
            raise AttributeError(name)
        inner = self.__dict__.get(INNER)
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def __setattr__(self, name, value):
        if name.startswith("_dslint") or INNER not in self.__dict__:
            object.__setattr__(self, name, value)
        else:
            setattr(self.__dict__[INNER], name, value)


class FirstSamples(_Delegating, Dataset):
    def __init__(self, dataset, count: int):
        self._dslint_inner = dataset
        self._dslint_count = count

    def __len__(self):
        return min(len(self._dslint_inner), self._dslint_count)

    def __getitem__(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for the first {len(self)} samples")
        return self._dslint_inner[index]

    def __getitems__(self, indices):
        # what torch's fetcher does itself when the dataset has no __getitems__
        many = getattr(self._dslint_inner, "__getitems__", None)
        return many(indices) if callable(many) else [self._dslint_inner[i] for i in indices]


class SpreadSamples(_Delegating, Dataset):
    def __init__(self, dataset, count: int):
        self._dslint_inner = dataset
        self._dslint_count = count
        self._dslint_total = len(dataset)

    def __len__(self):
        return min(self._dslint_total, self._dslint_count)

    def __getitem__(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        return self._dslint_inner[index * self._dslint_total // len(self)]


class FirstSamplesIterable(_Delegating, IterableDataset):
    def __init__(self, dataset, count: int):
        self._dslint_inner = dataset
        self._dslint_count = count

    def __len__(self):
        return len(self._dslint_inner)  # TypeError when the stream has no length, as before

    def __iter__(self):
        if self._dslint_count <= 0:
            return
        produced = 0
        for sample in self._dslint_inner:
            yield sample
            produced += 1
            if produced >= self._dslint_count:
                return


class _Below(Sampler):
    """The indices of ``sampler`` below ``count`` (a custom sampler over a shortened dataset)."""

    def __init__(self, sampler, count: int):
        self.sampler = sampler
        self.count = count

    def __iter__(self):
        return (i for i in self.sampler if i < self.count)

    def __len__(self):
        return min(len(self.sampler), self.count)


class _BatchesBelow(Sampler):
    def __init__(self, batch_sampler, count: int):
        self.batch_sampler = batch_sampler
        self.count = count

    def __iter__(self):
        for batch in self.batch_sampler:
            kept = [i for i in batch if i < self.count]
            if kept:
                yield kept

    def __len__(self):
        return len(self.batch_sampler)


def unwrap_recording(dataset):
    """The user's dataset under ``dslint.runtime.instrument``'s recording wrapper."""
    return dataset.inner if getattr(dataset, "_dslint_wrapped", False) else dataset


def limited(value, *, first: Optional[int] = None, spread: Optional[int] = None, overrides: Optional[dict] = None):
    """``value`` (a Dataset or DataLoader) with at most ``first`` samples per epoch, or a
    map-style dataset replaced by ``spread`` evenly spaced samples; a loader is rebuilt with
    ``overrides`` applied to its settings."""
    is_loader = isinstance(value, DataLoader)
    dataset = unwrap_recording(value.dataset) if is_loader else value
    wrapped = _shorten(dataset, first, spread)
    if not is_loader:
        return wrapped
    if wrapped is dataset and not overrides:
        return value
    return rebuild(value, wrapped, overrides)


def _shorten(dataset, first: Optional[int], spread: Optional[int]):
    if isinstance(dataset, IterableDataset):
        return dataset if first is None else FirstSamplesIterable(dataset, first)
    try:
        size = len(dataset)
    except TypeError:
        return dataset
    count = spread if spread is not None else first
    if count is None or size <= count:
        return dataset
    return SpreadSamples(dataset, count) if spread is not None else FirstSamples(dataset, count)


def rebuild(loader: DataLoader, dataset, overrides: Optional[dict] = None) -> DataLoader:
    """A DataLoader with ``loader``'s settings (and ``overrides``) over ``dataset``, the loader's
    own dataset or a shortened version of it."""
    kw = apply_overrides(loader_kwargs_of(loader), overrides)
    if not isinstance(dataset, IterableDataset) and dataset is not unwrap_recording(loader.dataset):
        size = len(dataset)
        if kw.get("batch_sampler") is not None:
            bs = kw["batch_sampler"]
            if type(bs) is BatchSampler:
                kw["batch_sampler"] = BatchSampler(_resample(bs.sampler, dataset, size), bs.batch_size, bs.drop_last)
            else:
                kw["batch_sampler"] = _BatchesBelow(bs, size)
        elif kw.get("sampler") is not None:
            kw["sampler"] = _resample(kw["sampler"], dataset, size)
    return DataLoader(dataset, **kw)


def _resample(sampler, dataset, size: int):
    if type(sampler) is SequentialSampler:
        return SequentialSampler(dataset)
    if type(sampler) is RandomSampler:
        num = getattr(sampler, "_num_samples", None)
        return RandomSampler(dataset, replacement=sampler.replacement, num_samples=min(num, size) if num else None,
                             generator=sampler.generator)
    return _Below(sampler, size)

