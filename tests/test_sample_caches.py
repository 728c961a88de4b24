"""DSL507 leaves alone a loader without workers over a dataset whose ``__getitem__`` caches each sample
it loads on ``self`` (``semantics/sample_caches.py``): in this file or in another, through the summaries."""

from __future__ import annotations

from tests.conftest import check_tree, write_files

_DATA = """
import numpy as np
from PIL import Image
from torch.utils.data import Dataset


class Tiles(Dataset):
    def __init__(self, paths, cache=True):
        self.paths = paths
        self.cache = cache
        self.images = {}

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
{body}
        return image[:256, :256]
"""

_CACHED = """        if i in self.images:
            image = self.images[i]
        else:
            image = np.asarray(Image.open(self.paths[i]))
            if self.cache:
                self.images[i] = image"""

_RUN = """
import torch
from data import Tiles


def train(model, paths, optimizer):
    loader = torch.utils.data.DataLoader(Tiles(paths), batch_size=8, shuffle=True)
    for batch in loader:
        optimizer.zero_grad()
        model(batch).sum().backward()
        optimizer.step()
"""


def _found(tmp_path, body):
    write_files(tmp_path, {"data.py": _DATA.replace("{body}", body), "run.py": _RUN})
    outcome = check_tree(tmp_path, select=["DSL507"], preview=False)
    assert not outcome.result.internal_errors
    return [(d.path, d.row) for d in outcome.diagnostics]


def test_a_dataset_caching_each_sample_it_loads_keeps_its_single_process(tmp_path):
    assert _found(tmp_path / "a", _CACHED) == []
    got = """        image = self.images.get(i)
        if image is None:
            image = self.images[i] = np.asarray(Image.open(self.paths[i]))"""
    assert _found(tmp_path / "b", got) == []


def test_loading_every_time_or_a_fixed_key_is_still_reported(tmp_path):
    assert _found(tmp_path / "a", "        image = np.asarray(Image.open(self.paths[i]))") == [("run.py", 6)]
    # written but never read back: no cache
    written = "        image = np.asarray(Image.open(self.paths[i]))\n        self.images[i] = image"
    assert _found(tmp_path / "b", written) == [("run.py", 6)]
    # one fixed entry, the last image: not one per sample
    last = """        if "last" in self.images:
            print(self.images["last"].shape)
        image = np.asarray(Image.open(self.paths[i]))
        self.images["last"] = image"""
    assert _found(tmp_path / "c", last) == [("run.py", 6)]
