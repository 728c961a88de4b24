"""TARGET of ``dslint probe`` / ``dslint bench``: ``module:attr`` or ``path/to/file.py:attr``.

``attr`` (dotted: ``module:Factory.make`` works too) names

- a Dataset (or DataLoader) instance;
- a Dataset class, constructed with ``--kwargs`` (none by default);
- a factory returning a Dataset or a DataLoader, called with ``--kwargs``.

A required parameter named ``root`` (or ``path``, ``data_root``, ``data_dir``,
``root_dir``, ``tmp_path``) that ``--kwargs`` does not give receives a fresh empty
temporary directory (a ``pathlib.Path``) on every call: that is the fixture contract
(``build(root)`` writes its own data there). Any other required parameter must come
from ``--kwargs``.

For a returned dataset (not a loader), a module-level ``LOADER`` dict in the target's
module supplies the DataLoader keywords (the fixture convention); a DataLoader target
keeps its own settings.

Importing the target runs the user's code: this module is used only by the runtime
commands, inside their isolated child processes, never by ``dslint check``.
No torch at import (``Maker`` imports it when called).
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from dslint.runtime.common import CommandError, one_line

ROOT_NAMES = ("root", "path", "data_root", "data_dir", "root_dir", "tmp_path")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TargetError(CommandError):
    """A one-line, user-facing problem with TARGET (exit 2)."""


@dataclass(frozen=True)
class TargetSpec:
    #: as given on the command line
    text: str
    #: dotted module name (for ``module:attr``) or the absolute path of the file
    module: str
    #: dotted attribute path inside the module
    attr: str
    #: True for ``path/to/file.py:attr``
    is_file: bool
    #: the directory that goes first on sys.path (the file's package root, or the cwd)
    base: str

    @property
    def short(self) -> str:
        return self.text


def parse(text: str, cwd: Optional[str] = None) -> TargetSpec:
    """Check TARGET's syntax (and that a file exists) without importing anything."""
    cwd = cwd or os.getcwd()
    if ":" not in text:
        raise TargetError(f"TARGET must be module:attr or path/to/file.py:attr, got {text!r}")
    left, attr = text.rsplit(":", 1)
    if not left or not attr or not all(_IDENT.match(p) for p in attr.split(".")):
        raise TargetError(f"TARGET must be module:attr or path/to/file.py:attr, got {text!r}")
    looks_like_file = left.endswith(".py") or "/" in left or os.sep in left
    if looks_like_file:
        path = Path(left if os.path.isabs(left) else os.path.join(cwd, left)).resolve()
        if not path.is_file():
            raise TargetError(f"no such file: {left}")
        name, base = module_name_for(path)
        return TargetSpec(text, str(path), attr, True, base)
    if not all(_IDENT.match(p) for p in left.split(".")):
        raise TargetError(f"not a module name: {left!r} (give a path ending in .py for a file)")
    return TargetSpec(text, left, attr, False, cwd)


def module_name_for(path: Path) -> Tuple[str, str]:
    """(dotted module name, sys.path entry) for a .py file: packages (folders with
    ``__init__.py``) above it are part of the name, as Python would import it."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and _IDENT.match(folder.name):
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts), str(folder)


def import_module(spec: TargetSpec):
    """Import the target's module (runs the user's code). Its folder goes first on
    sys.path, which spawned DataLoader workers inherit, so they can import it too."""
    if spec.base not in sys.path:
        sys.path.insert(0, spec.base)
    # a script that parses its arguments on import must not see dslint's own
    sys.argv = [spec.module if spec.is_file else spec.module.replace(".", os.sep) + ".py"]
    if not spec.is_file:
        try:
            return importlib.import_module(spec.module)
        except ModuleNotFoundError as exc:
            if exc.name and spec.module.split(".")[0] == exc.name.split(".")[0]:
                raise TargetError(f"no module named {spec.module!r} (from {spec.base})") from None
            raise
    name, _ = module_name_for(Path(spec.module))
    existing = sys.modules.get(name)
    if existing is not None:
        if os.path.realpath(getattr(existing, "__file__", "") or "") == os.path.realpath(spec.module):
            return existing
        # the name is taken (e.g. a file called random.py): load it under a private name;
        # fork workers are fine, spawn workers cannot import it by that name
        name = f"_dslint_target_{Path(spec.module).stem}"
        loader_spec = importlib.util.spec_from_file_location(name, spec.module)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        loader_spec.loader.exec_module(module)
        return module
    return importlib.import_module(name)


def load_attr(spec: TargetSpec):
    module = import_module(spec)
    obj: Any = module
    for part in spec.attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            where = spec.module if not spec.is_file else os.path.relpath(spec.module)
            raise TargetError(f"{where} has no attribute {spec.attr!r}") from None
    return module, obj


def _call_plan(fn: Callable, kwargs: Dict[str, Any], label: str) -> Tuple[Dict[str, Any], list]:
    """The keywords to call ``fn`` with and the parameter names that get a fresh temp dir."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return dict(kwargs), []
    params = sig.parameters
    accepts_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
    unknown = [k for k in kwargs if k not in params and not accepts_any]
    if unknown:
        raise TargetError(f"{label} takes no argument {unknown[0]!r} (given in --kwargs); "
                          f"its signature is {label}{sig}")
    roots = []
    for p in params.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty or p.name in kwargs:
            continue
        if p.kind == p.POSITIONAL_ONLY:
            raise TargetError(f"{label} takes a positional-only argument {p.name!r}, which --kwargs cannot give")
        if p.name in ROOT_NAMES:
            roots.append(p.name)
        else:
            raise TargetError(f"{label} needs the argument {p.name!r}: give it with --kwargs "
                              f"'{{\"{p.name}\": ...}}' (only a parameter named {', '.join(ROOT_NAMES[:2])}, ... "
                              f"gets a temporary directory)")
    return dict(kwargs), roots


# ------------------------------------------------------------------ in the child


class Maker:
    """``make()`` -> a fresh Dataset or DataLoader from the target, on every call.

    Factories and classes are called again each time (so state one probe configuration
    consumes never leaks into the next); an instance is deep-copied from a pristine copy
    when it can be (else the same object is returned each time).

    ``limit``: at most this many samples per epoch: a map-style dataset longer than that is
    cut to its first ``limit`` indices, an iterable one stops after ``limit`` samples per
    worker and epoch (``dslint.runtime.limit``). ``spread``: instead, a map-style dataset is
    replaced by ``spread`` indices evenly spaced over its whole length. ``overrides``: DataLoader
    keywords applied to a returned loader (rebuilt) and to ``loader_kwargs()``.
    """

    def __init__(self, spec: TargetSpec, kwargs: Optional[Dict[str, Any]] = None, tmp: Optional[str] = None,
                 *, limit: Optional[int] = None, spread: Optional[int] = None, overrides: Optional[Dict[str, Any]] = None,
                 loaded=None):
        self.spec = spec
        self.kwargs = dict(kwargs or {})
        self.tmp = tmp or tempfile.gettempdir()
        self.limit = limit
        self.spread = spread
        self.overrides = dict(overrides or {})
        self.module, self.obj = loaded if loaded is not None else load_attr(spec)
        self.kind = classify(self.obj)
        self.label = spec.attr
        self.roots: list = []
        self._pristine = None
        self.shared_instance = False
        self.calls = 0
        if self.kind in ("class", "factory"):
            fn = self.obj
            self.kwargs, self.roots = _call_plan(fn, self.kwargs, self.label)
        elif self.kind in ("dataset", "loader"):
            if self.kwargs:
                raise TargetError(f"--kwargs is for a class or factory; {spec.attr} is already a "
                                  f"{'DataLoader' if self.kind == 'loader' else 'Dataset'} instance")
            try:
                self._pristine = copy.deepcopy(self.obj)
            except Exception:  # noqa: BLE001 - handles, generators: not copyable
                self.shared_instance = True
        else:
            raise TargetError(f"{spec.attr} is a {type(self.obj).__name__}, not a Dataset, DataLoader, "
                              f"Dataset class or factory")

    def variant(self, **changes) -> "Maker":
        other = copy.copy(self)
        for key, value in changes.items():
            setattr(other, key, value)
        return other

    # -- building --------------------------------------------------------------------
    def raw(self):
        """The target's Dataset or DataLoader, unlimited."""
        self.calls += 1
        if self.kind in ("dataset", "loader"):
            if self._pristine is None:
                return self.obj
            return copy.deepcopy(self._pristine)
        call_kwargs = dict(self.kwargs)
        for name in self.roots:
            call_kwargs[name] = self.new_root()
        value = self.obj(**call_kwargs)
        if classify(value) not in ("dataset", "loader"):
            raise TargetError(f"{self.call_text()} returned {type(value).__name__}, not a Dataset or DataLoader")
        return value

    def raw_checked(self):
        """``raw()``, the user's code raising a one-line ``CommandError`` instead."""
        try:
            return self.raw()
        except TargetError:
            raise
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's factory raised
            raise CommandError(raised_message(self.call_text(), exc, self.spec)) from None

    def __call__(self):
        value = self.raw()
        if self.limit is None and self.spread is None and not self.overrides:
            return value
        from dslint.runtime import limit

        return limit.limited(value, first=self.limit, spread=self.spread, overrides=self.overrides)

    def new_root(self) -> Path:
        root = Path(tempfile.mkdtemp(prefix="root-", dir=self.tmp))
        return root

    def call_text(self) -> str:
        if self.kind not in ("class", "factory"):
            return self.spec.attr
        args = [f"{k}={v!r}" for k, v in self.kwargs.items()] + [f"{r}=<a temporary directory>" for r in self.roots]
        return f"{self.spec.attr}({', '.join(args)})"

    def loader_kwargs(self) -> Dict[str, Any]:
        """DataLoader keywords for a returned dataset: the module's ``LOADER`` dict, if any."""
        value = getattr(self.module, "LOADER", None)
        kw = dict(value) if isinstance(value, dict) else {}
        kw.update(self.overrides)
        return kw

    def loader_source(self) -> str:
        value = getattr(self.module, "LOADER", None)
        if isinstance(value, dict):
            return f"LOADER in {os.path.basename(getattr(self.module, '__file__', '') or self.spec.module)}"
        return ""


def classify(obj) -> str:
    """dataset | loader | class | factory | other (imports torch)."""
    from torch.utils.data import DataLoader, Dataset

    if isinstance(obj, DataLoader):
        return "loader"
    if isinstance(obj, Dataset):
        return "dataset"
    if inspect.isclass(obj):
        if issubclass(obj, Dataset):
            return "class"
        if issubclass(obj, DataLoader):
            return "other"
        return "factory" if callable(obj) else "other"
    if not inspect.isclass(obj) and hasattr(obj, "__getitem__") and hasattr(obj, "__len__") and not callable(obj):
        return "dataset"  # any map-style object DataLoader accepts (a list, a numpy array ...)
    if callable(obj):
        return "factory"
    return "other"


# ------------------------------------------------------------------ model step (bench)


def load_step(spec: TargetSpec, loaded=None) -> Tuple[Callable, str]:
    """The training step ``step(batch)``: a callable taking one argument, a zero-argument
    factory returning one, or a class whose instance (made without arguments) is one."""
    _, obj = loaded if loaded is not None else load_attr(spec)
    label = spec.attr
    if inspect.isclass(obj):
        try:
            obj = obj()
        except TypeError as exc:
            raise TargetError(f"--model-step {spec.text}: cannot construct {label}() without arguments: {exc}") from None
        label = f"{label}()"
    if not callable(obj):
        raise TargetError(f"--model-step {spec.text} is a {type(obj).__name__}, not a callable")
    required = _required_params(obj)
    if required is not None and required == 0 and not _takes_varargs(obj):
        step = obj()
        if not callable(step):
            raise TargetError(f"--model-step {spec.text}: {label}() returned {type(step).__name__}, not a step function")
        return step, f"{label}()"
    if required is not None and required > 1:
        raise TargetError(f"--model-step {spec.text}: {label} must take one argument (the batch)")
    return obj, label


def _required_params(fn) -> Optional[int]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return sum(1 for p in sig.parameters.values()
               if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _takes_varargs(fn) -> bool:
    try:
        return any(p.kind == p.VAR_POSITIONAL for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------ error locations


def user_location(tb, spec: Optional[TargetSpec] = None) -> str:
    """``file.py:12 in __getitem__`` for the innermost frame of the user's code in a traceback."""
    import traceback as _tb

    frames = _tb.extract_tb(tb)
    for frame in reversed(frames):
        if is_user_file(frame.filename, spec):
            return f"{relative_path(frame.filename)}:{frame.lineno} in {frame.name}"
    return ""


def raised_message(what: str, exc: BaseException, spec: TargetSpec) -> str:
    """``<what> raised X: message (file.py:12 in f)``: the user's code at TARGET raised ``exc``."""
    where = user_location(exc.__traceback__, spec)
    if isinstance(exc, SystemExit):
        return (f"{what} called sys.exit({exc.code!r})" + (f" ({where})" if where else "")
                + ": code at the top level of the module runs on import; put it under `if __name__ == \"__main__\":`")
    message = one_line(f"{type(exc).__name__}: {exc}")
    return f"{what} raised {message}" + (f" ({where})" if where else "")


_LIBRARY_DIRS: Optional[tuple] = None


def library_dirs() -> tuple:
    global _LIBRARY_DIRS
    if _LIBRARY_DIRS is None:
        import sysconfig

        dirs = set()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            try:
                dirs.add(os.path.realpath(sysconfig.get_paths()[key]))
            except KeyError:
                pass
        dirs.add(os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # dslint/
        _LIBRARY_DIRS = tuple(sorted(d + os.sep for d in dirs))
    return _LIBRARY_DIRS


def is_user_file(filename: str, spec: Optional[TargetSpec] = None) -> bool:
    if not filename or filename.startswith("<"):
        return False
    real = os.path.realpath(filename)
    if spec is not None and spec.is_file and real == os.path.realpath(spec.module):
        return True
    return not real.startswith(library_dirs())


def relative_path(path: str) -> str:
    """``path`` relative to the working directory, unless that climbs more than one level."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("../../") else rel
