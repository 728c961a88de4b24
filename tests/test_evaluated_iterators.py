"""DSL507: a shuffled loader whose iterator is kept (``it = iter(loader)``) and advanced with ``next(it)`` only in
loops that make no training step, in a function that puts the model in evaluation mode, is an inference loader
(``batches._evaluated_iterator``); any other use of the iterator keeps it a training loader."""

from __future__ import annotations

from tests.conftest import check_tree, write_files

_SCRIPT = """
import torch
from PIL import Image


class Scans(torch.utils.data.Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return torch.as_tensor(Image.open(self.paths[i]).convert("L").getdata())


def main(paths, model, optimizer):
    loader = torch.utils.data.DataLoader(Scans(paths), batch_size=1, shuffle=True)
    batches = iter(loader)
    model.eval()
    for _ in range(len(batches)):
        scan = next(batches)
{body}
"""


def _rows(tmp_path, body):
    write_files(tmp_path, {"sample.py": _SCRIPT.replace("{body}", body)})
    outcome = check_tree(tmp_path, select=["DSL507"], preview=False)
    assert not outcome.result.internal_errors
    return [d.row for d in outcome.diagnostics]


def test_an_iterator_advanced_only_in_an_evaluation_loop_is_inference(tmp_path):
    assert _rows(tmp_path / "a", "        torch.save(model(scan), 'out.pt')") == []


def test_a_training_step_or_another_use_of_the_iterator_keeps_it_training(tmp_path):
    step = "        model(scan).sum().backward()\n        optimizer.step()"
    assert _rows(tmp_path / "a", step) == [17]
    handed = "        torch.save(model(scan), 'out.pt')\n    optimizer.consume(batches)"
    assert _rows(tmp_path / "b", handed) == [17]
    trains = "        torch.save(model(scan), 'out.pt')\n    model.train()"
    assert _rows(tmp_path / "c", trains) == [17]
