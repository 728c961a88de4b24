"""One case of ``dslint verify``: a fixture pair's bad and good builders, measured side by side.

``Case.both(what, probe)`` runs ``probe(side)`` on bad.py, then on good.py, each in its
own phase (``dslint.runtime.isolate.phase``); a side that raises becomes a ``SideError``
naming it. ``judge``, ``pair_verdict`` and ``result`` turn the two figures into the case's
plain-data result (``bad``, ``good``, ``verdict``, ``note``, ``data``).

No torch at import (the fixtures import it when loaded).
"""

from __future__ import annotations

import inspect
import itertools
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from dslint.runtime import fixtures
from dslint.runtime.common import CONFIRMED, NOT_REPRODUCED, shorten
from dslint.runtime.isolate import describe, phase

SIDES = ("bad", "good")


class SideError(Exception):
    def __init__(self, side: str, message: str, tb: str = ""):
        super().__init__(f"{side}: {message}")
        self.side = side
        self.message = message
        self.tb = tb


@dataclass
class Case:
    code: str
    probe: str
    pair: fixtures.Pair
    name: str  # builder name
    bad_module: Any
    good_module: Any
    bad_builder: Callable
    good_builder: Callable
    tmp: str
    limit: float
    workers: int
    cuda: bool

    @property
    def label(self) -> str:
        parts = [self.code]
        if self.pair.folder_label or self.pair.form:
            parts.append(self.pair.label)
        if self.name != "build":
            parts.append(self.name)
        return " ".join(parts)

    def epochs(self) -> int:
        return max(fixtures.epochs(self.bad_module), fixtures.epochs(self.good_module))

    def module(self, side: str):
        return self.bad_module if side == "bad" else self.good_module

    def builder(self, side: str) -> Callable:
        return self.bad_builder if side == "bad" else self.good_builder

    def loader_kwargs(self, side: str) -> dict:
        return fixtures.loader_kwargs(self.module(side), self.builder(side))

    _counter = itertools.count()

    def new_root(self, side: str) -> Path:
        root = Path(self.tmp) / f"{self.code}-{side}-{next(Case._counter)}"
        root.mkdir(parents=True, exist_ok=True)
        return root

    def make(self, side: str) -> Callable[[], Any]:
        builder = self.builder(side)
        return lambda: builder(self.new_root(side))

    def measure(self, side: str, what: str, fn: Callable[[], Any]):
        phase(f"{self.label} {side}: {what}", self.limit)
        try:
            return fn()
        except SideError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported as the row's error
            raise SideError(side, shorten(describe(exc), 300), traceback.format_exc()) from None

    def both(self, what: str, probe: Callable[[str], Any]) -> Dict[str, Any]:
        """``probe(side)``'s figure for bad.py, then for good.py."""
        return {side: self.measure(side, what, lambda s=side: probe(s)) for side in SIDES}

    def training_loop(self, side: str, *, required: bool, epochs: int, steps: int = 20):
        """(a zero-argument callable running the module's own training loop over a fresh build,
        the loop's name), or (None, None) when the module has no loop and none is ``required``."""
        loop = fixtures.find_loop(self.module(side))
        if loop is None:
            if required:
                raise SideError(side, f"{side}.py defines no training loop function ({', '.join(fixtures.LOOP_NAMES[:4])}, ...)")
            return None, None

        def run():
            from torch.utils.data import DataLoader

            root = self.new_root(side)
            target = self.builder(side)(root)
            if isinstance(target, DataLoader):
                loader, dataset = target, target.dataset
            else:
                dataset, loader = target, None
            values = {"dataset": getattr(dataset, "inner", dataset), "epochs": epochs, "steps": steps, "root": root}
            roles = fixtures.loop_roles(loop)
            if "loader" in roles:
                values["loader"] = loader or DataLoader(dataset, **self.loader_kwargs(side))
            bound = fixtures.bind_loop(loop, values)
            if bound is None:
                raise SideError(side, f"cannot call {loop.__name__}{call_signature(loop)}: verify fills loader, dataset, epochs, steps, root")
            return bound()

        return run, loop.__name__


def call_signature(fn) -> str:
    """``(loader, epochs=2)``: how ``fn`` is called, or ``(...)``."""
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


def result(bad, good, verdict: str, note: str = "", bad_text: Optional[str] = None,
           good_text: Optional[str] = None) -> dict:
    """A case's plain-data result from the two sides' figures."""
    return {"bad": bad_text or bad.text, "good": good_text or good.text, "verdict": verdict, "note": note,
            "data": {"bad": bad.data, "good": good.data}}


def pair_verdict(bad_symptom: bool, good_symptom: bool, what: str) -> tuple:
    """(verdict, note): confirmed when bad.py shows ``what`` and good.py does not."""
    if bad_symptom and not good_symptom:
        return CONFIRMED, ""
    if not bad_symptom:
        return NOT_REPRODUCED, f"bad.py does not show {what}"
    return NOT_REPRODUCED, f"good.py shows {what} too"


def judge(figs: Dict[str, Any], what: str) -> dict:
    """The result when each figure's own ``symptom`` decides: bad shows ``what``, good does not."""
    verdict, note = pair_verdict(figs["bad"].symptom, figs["good"].symptom, what)
    return result(figs["bad"], figs["good"], verdict, note)
