"""Fixture pairs: ``fixtures/<CODE>-<name>/[<form>/]{bad,good}.py`` (see fixtures/README.md).

Discovery needs no torch; loading (``load_side``) imports the module, which does.

Each module may define:

- ``build(root)`` and ``build_<case>(root)``: write data under ``root``, return a
  Dataset or a DataLoader;
- ``LOADER``: DataLoader keywords for a returned dataset; ``EPOCHS`` (default 2);
- ``EXPECT_ERROR`` (module attribute, or an attribute of a builder): the exact
  ``Type: message`` torch raises (a prefix is enough);
- a training loop, for rules whose symptom lives in the loop (DSL505 set_epoch,
  DSL510 state set per epoch, DSL511 ``next(iter(loader))`` per step): a function
  named ``run``, ``train``, ``fit``, ``loop``, ``epoch_loop``, ``train_loop``,
  ``train_epochs``, ``training_loop`` or ``main`` whose parameters verify can fill
  by name: ``loader``/``dataloader``/``train_loader``/``dl``, ``dataset``/``ds``,
  ``epochs``/``num_epochs``/``n_epochs``, ``steps``/``num_steps``/``iterations``,
  ``root``, ``sampler``. ``LOOP = "name"`` picks one explicitly.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

CODE_DIR = re.compile(r"^(DSL\d{3})-(.+)$")

LOOP_NAMES = ("run", "train", "fit", "loop", "epoch_loop", "train_loop", "train_epochs", "training_loop", "main")
PARAM_ROLES = {
    "loader": ("loader", "dataloader", "data_loader", "train_loader", "dl", "train_dl"),
    "dataset": ("dataset", "ds", "data", "train_dataset", "train_set"),
    "epochs": ("epochs", "num_epochs", "n_epochs", "max_epochs"),
    "steps": ("steps", "num_steps", "n_steps", "iterations", "max_steps"),
    "root": ("root", "path", "data_root", "tmp", "tmp_path"),
    "sampler": ("sampler",),
}


@dataclass
class Pair:
    code: str
    name: str
    directory: Path
    #: "" for fixtures/<CODE>-<name>/, else the sub-folder holding the pair
    form: str = ""

    #: set when the code has several fixture folders (fixtures/DSL202-a/, fixtures/DSL202-b/)
    folder_label: str = ""

    @property
    def label(self) -> str:
        return "/".join(p for p in (self.folder_label, self.form) if p) or self.name


@dataclass
class Rule:
    code: str
    name: str
    pairs: List[Pair] = field(default_factory=list)


def discover(paths: List[str]) -> Dict[str, Rule]:
    """Rule code -> its fixture pairs, from fixture roots or individual fixture folders."""
    rules: Dict[str, Rule] = {}

    def add(folder: Path) -> None:
        m = CODE_DIR.match(folder.name)
        if not m:
            return
        code, name = m.groups()
        rule = rules.setdefault(code, Rule(code, name))
        found = []
        for bad in sorted(folder.rglob("bad.py")):
            if (bad.parent / "good.py").is_file() and "__pycache__" not in bad.parts:
                form = bad.parent.relative_to(folder).as_posix()
                found.append(Pair(code, name, bad.parent, "" if form == "." else form))
        rule.pairs.extend(found)

    for raw in paths:
        path = Path(raw)
        if path.is_file():
            path = path.parent
        if CODE_DIR.match(path.name):
            add(path)
            continue
        for parent in [path, *path.parents]:
            if CODE_DIR.match(parent.name):
                add(parent)
                break
        else:
            if path.is_dir():
                for child in sorted(path.iterdir()):
                    if child.is_dir():
                        add(child)
    for rule in rules.values():
        folders = {_folder_of(p) for p in rule.pairs}
        if len(folders) > 1:
            for p in rule.pairs:
                p.folder_label = _folder_of(p).split("-", 1)[1]
        rule.name = min((_folder_of(p) for p in rule.pairs), key=len, default=rule.code + "-" + rule.name).split("-", 1)[1]
    return dict(sorted(rules.items()))


def _folder_of(pair: Pair) -> str:
    """The fixtures/<CODE>-<name> folder a pair lives in."""
    directory = pair.directory
    for _ in Path(pair.form).parts if pair.form else ():
        directory = directory.parent
    return directory.name


# --------------------------------------------------------------------- loading


def load_side(directory: Path, side: str):
    """Import ``bad``/``good`` from ``directory`` as top-level modules, importable by name in
    spawned workers too (the directory goes first on sys.path, which spawn passes on)."""
    folder = str(directory.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    existing = sys.modules.get(side)
    if existing is not None and Path(getattr(existing, "__file__", "") or "").parent.resolve() != directory.resolve():
        del sys.modules[side]
    return importlib.import_module(side)


def builders(module) -> Dict[str, Callable]:
    out = {}
    for name in dir(module):
        if name == "build" or name.startswith("build_"):
            value = getattr(module, name)
            if callable(value) and getattr(value, "__module__", None) == module.__name__:
                out[name] = value
    if "build" in out:
        out = {"build": out.pop("build"), **dict(sorted(out.items()))}
    return out


def expect_error(module, builder: Callable) -> Optional[str]:
    value = getattr(builder, "EXPECT_ERROR", None)
    if value is None and getattr(builder, "__name__", "") == "build":
        value = getattr(module, "EXPECT_ERROR", None)
    if value is None:
        value = getattr(module, "EXPECT_ERROR", None)
    return value


def loader_kwargs(module, builder: Optional[Callable] = None) -> Dict[str, Any]:
    value = getattr(builder, "LOADER", None) if builder is not None else None
    if value is None:
        value = getattr(module, "LOADER", None)
    return dict(value or {})


def epochs(module, default: int = 2) -> int:
    try:
        return max(2, int(getattr(module, "EPOCHS", default)))
    except (TypeError, ValueError):
        return default


def find_loop(module) -> Optional[Callable]:
    explicit = getattr(module, "LOOP", None)
    if isinstance(explicit, str) and callable(getattr(module, explicit, None)):
        return getattr(module, explicit)
    if callable(explicit):
        return explicit
    for name in LOOP_NAMES:
        fn = getattr(module, name, None)
        if callable(fn) and inspect.isfunction(fn) and getattr(fn, "__module__", None) == module.__name__:
            return fn
    return None


def bind_loop(fn: Callable, values: Dict[str, Any]) -> Optional[Callable[[], Any]]:
    """``fn`` with its parameters filled by role (loader, dataset, epochs, steps, root), or None."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    args: Dict[str, Any] = {}
    for param in sig.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        role = next((r for r, names in PARAM_ROLES.items() if param.name in names), None)
        if role is not None and values.get(role) is not None:
            args[param.name] = values[role]
        elif param.default is param.empty:
            return None
    return lambda: fn(**args)


def loop_roles(fn: Callable) -> List[str]:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return []
    return [r for p in params for r, names in PARAM_ROLES.items() if p in names]
