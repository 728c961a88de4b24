"""DSL505 across files: a loader handed to a project class that keeps it on ``self`` and
re-iterates it every epoch (``semantics/epoch_attrs.py``, ``loader_results.kept_for_epochs``)."""

from __future__ import annotations

from tests.conftest import check_tree, write_files

_TRAINER = """
import torch

class Trainer:
    def __init__(self, model, train_loader, val_loader=None, *, epochs=3):
        self.model = model
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.epochs = epochs

    def fit(self):
        for epoch in range(self.epochs):
            self.train_one_epoch()
            self.evaluate()

    def train_one_epoch(self):
        for i, batch in enumerate(self.train_loader):
            self.model(batch).backward()

    def evaluate(self):
        with torch.no_grad():
            for batch in self.val_loader:
                self.model(batch)

class Scorer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader

    def run(self):
        for batch in self.loader:
            self.model(batch)
"""

_MAIN = """
from torch.utils.data import DataLoader, DistributedSampler
from trainer import Trainer, Scorer

def main(ds, val, model):
    train_loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
    val_loader = DataLoader(val, batch_size=8, sampler=DistributedSampler(val))
    Trainer(model, train_loader, val_loader).fit()

def score(ds, model):
    loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
    Scorer(model, loader).run()
"""


def _rows(tmp_path, files):
    write_files(tmp_path, files)
    outcome = check_tree(tmp_path, select=["DSL505"])
    assert not outcome.result.internal_errors
    return sorted((d.path, d.row) for d in outcome.diagnostics if d.code == "DSL505")


def test_a_trainer_class_of_another_file_keeps_the_loader_and_iterates_it_every_epoch(tmp_path):
    # the training loader only: the validation loop runs under no_grad, the scorer iterates once
    assert _rows(tmp_path / "a", {"main.py": _MAIN, "trainer.py": _TRAINER}) == [("main.py", 5)]


def test_silent_where_the_project_names_set_epoch_or_the_class_does_not_iterate_per_epoch(tmp_path):
    setter = "def reset(loader, epoch):\n    loader.sampler.set_epoch(epoch)\n"
    files = {"main.py": _MAIN, "trainer.py": _TRAINER, "utils.py": setter}
    assert _rows(tmp_path / "a", files) == []
    once = _TRAINER.replace("for epoch in range(self.epochs):", "if self.epochs:")
    assert _rows(tmp_path / "b", {"main.py": _MAIN, "trainer.py": once}) == []
    copied = _TRAINER.replace("self.train_loader = train_loader", "self.train_loader = list(train_loader)")
    assert _rows(tmp_path / "c", {"main.py": _MAIN, "trainer.py": copied}) == []


_ENGINE = """
import torch

def fit(model, loader, epochs):
    for epoch in range(epochs):
        for step, batch in enumerate(loader):
            model(batch).backward()

@torch.no_grad()
def evaluate(model, loader, rounds):
    for _ in range(rounds):
        for batch in loader:
            model(batch)

def summary(model, loader):
    for batch in loader:
        model(batch)

class Runner:
    def __init__(self, model):
        self.model = model

    def train(self, loader, epochs):
        for epoch in range(epochs):
            for batch in loader:
                self.model(batch).backward()

    def check(self, loader):
        for batch in loader:
            self.model(batch)
"""

_RUN = """
from torch.utils.data import DataLoader, DistributedSampler
from engine import fit, evaluate, summary, Runner

def main(ds, val, model):
    loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
    fit(model, loader, 10)
    checked = DataLoader(val, sampler=DistributedSampler(val))
    evaluate(model, checked, 3)
    once = DataLoader(val, sampler=DistributedSampler(val))
    summary(model, once)
    runner = Runner(model)
    runner.train(DataLoader(ds, sampler=DistributedSampler(ds)), 5)
    runner.check(DataLoader(val, sampler=DistributedSampler(val)))
"""


def test_a_function_of_another_file_iterates_its_parameter_inside_its_own_epoch_loop(tmp_path):
    # evaluate runs under no_grad, summary and Runner.check iterate once: the loaders handed to fit
    # and to the method of an object a project class made
    assert _rows(tmp_path / "a", {"run.py": _RUN, "engine.py": _ENGINE}) == [("run.py", 5), ("run.py", 12)]
    rebound = _ENGINE.replace("\n    for epoch in range(epochs):\n", "\n    loader = list(loader)\n    for epoch in range(epochs):\n", 1)
    assert _rows(tmp_path / "b", {"run.py": _RUN, "engine.py": rebound}) == [("run.py", 12)]


_HELPERS = """
import torch

def _one_epoch(model, data, epoch):
    model.train()
    for step, batch in enumerate(data):
        model(batch).sum().backward()

def _score(model, data):
    model.eval()
    for batch in data:
        model(batch)

def train(model, train_data, val_data, epochs=1):
    for epoch in range(epochs):
        _one_epoch(model, train_data, epoch)
        _score(model, val_data)

def once(model, data):
    _one_epoch(model, data, 0)

class Runner:
    def __init__(self, model):
        self.model = model

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            self.step_epoch(data=loader)

    def step_epoch(self, data):
        for batch in data:
            self.model(batch).backward()
"""

_CALLER = """
from torch.utils.data import DataLoader, DistributedSampler
from engine import train, once, Runner

def main(ds, val, model):
    loader = DataLoader(ds, sampler=DistributedSampler(ds))
    checked = DataLoader(val, sampler=DistributedSampler(val))
    train(model, loader, checked, epochs=5)
    single = DataLoader(ds, sampler=DistributedSampler(ds))
    once(model, single)
    Runner(model).fit(DataLoader(ds, sampler=DistributedSampler(ds)), 3)
"""


def test_the_epoch_loop_hands_the_parameter_to_a_training_helper_that_iterates_it(tmp_path):
    # train's epoch loop hands train_data to _one_epoch (it trains and iterates it): the training
    # loader; _score only evaluates, once calls the helper outside any loop; Runner.fit hands its
    # parameter by keyword to a method of its class
    files = {"main.py": _CALLER, "engine.py": _HELPERS}
    assert _rows(tmp_path / "a", files) == [("main.py", 5), ("main.py", 10)]
    untrained = _HELPERS.replace("        model(batch).sum().backward()", "        model(batch)").replace(
        "    model.train()\n", "")
    assert _rows(tmp_path / "b", {"main.py": _CALLER, "engine.py": untrained}) == [("main.py", 10)]
    looped = _HELPERS.replace("        self.step_epoch(data=loader)", "        self.step_epoch(data=list(loader))")
    assert _rows(tmp_path / "c", {"main.py": _CALLER, "engine.py": looped}) == [("main.py", 5)]
