"""The rule API.

A rule is one small class: its code, name, level, the message and help it reports,
its documentation (the class docstring, in ruff's sections: What it does / Why is
this bad? / Example / Use instead / Fix safety / References), and embedded
``valid``/``invalid`` cases that the test suite runs (Fixit style). Registration,
``dslint rule CODE``, the ``rules/`` pages and the fixture tests all read the class.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Dict, Iterable, List, Optional, Sequence, Type, Union

from dslint.report import ERROR, WARNING, Report  # noqa: F401  (ERROR/WARNING re-exported for rules)

if TYPE_CHECKING:  # annotations only: importing the rule API must not import libcst
    import libcst as cst

REGISTRY: Dict[str, Type["Rule"]] = {}

CODE_RE = re.compile(r"^DSL[0-9]{3}$")


Case = Union[str, Dict[str, str]]


@dataclass(frozen=True)
class Valid:
    """Code the rule must not report (a source string, or ``{filename: source}`` for
    cross-file cases). A plain string in ``valid`` means the same.

    Cases run with ``--preview`` on, so that preview rules and the preview forms of stable
    rules are exercised; ``preview=False`` runs the case on the default settings instead
    (a form the rule reports only under ``--preview`` is silent there)."""

    code: Case
    preview: bool = True


@dataclass(frozen=True)
class Invalid:
    """Code with ``# expect: CODE`` on each line the rule must report.

    ``expected_replacement`` is the code after every fix the rule offers (safe and
    unsafe) is applied; a case without it must offer no fix. A plain string in
    ``invalid`` means ``Invalid(code)``. The rule's ``fix_availability`` is derived
    from these: no case with a replacement is "never", every case "always", some
    "sometimes". ``preview=False`` runs the case without ``--preview``, as ``Valid``."""

    code: Case
    expected_replacement: Optional[Case] = None
    preview: bool = True


@dataclass(frozen=True)
class Symptom:
    """What ``dslint verify`` and ``dslint probe`` measure for a rule at runtime."""

    #: a runner in ``dslint.runtime.evidence.RUNNERS``
    probe: str
    #: the symptom, in words (``dslint verify --output-format json``)
    text: str
    #: needs CUDA; on CPU-only machines the row is ``skipped: needs GPU``
    gpu: bool = False
    #: timing-sensitive: run alone, not beside another rule's probe
    exclusive: bool = False


def as_valid(case) -> Valid:
    return case if isinstance(case, Valid) else Valid(case)


def as_invalid(case) -> Invalid:
    return case if isinstance(case, Invalid) else Invalid(case)


def derived_fix_availability(invalid: Sequence[object]) -> str:
    fixed = [as_invalid(case).expected_replacement is not None for case in invalid]
    if fixed and all(fixed):
        return "always"
    return "sometimes" if any(fixed) else "never"


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    #: the family package the rule's module sits in (``handles``, ``loader``, ...)
    family: ClassVar[str] = ""
    level: ClassVar[str] = ERROR
    preview: ClassVar[bool] = False
    #: "never", "sometimes" or "always": derived from the ``invalid`` cases (set by
    #: hand only for engine rules, which have no cases)
    fix_availability: ClassVar[str] = "never"
    #: whether the class itself set ``fix_availability`` (only engine rules may)
    fix_availability_set_by_hand: ClassVar[bool] = False
    #: what the runtime companion measures for this rule (None: nothing to run)
    symptom: ClassVar[Optional[Symptom]] = None
    #: one line: what is wrong, for `dslint rules`, SARIF and the index
    summary: ClassVar[str]
    #: how to fix, shown as the ``help:`` line
    help: ClassVar[Optional[str]] = None
    #: produced by the engine, not by ``check`` (syntax and I/O errors, unused noqa)
    engine_rule: ClassVar[bool] = False
    valid: ClassVar[Sequence[Case]] = ()
    invalid: ClassVar[Sequence[Case]] = ()
    #: default options, overridable in ``[tool.dslint.rules.CODE]``
    options: ClassVar[Dict[str, object]] = {}

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            return  # an abstract intermediate class
        if not CODE_RE.match(cls.code):
            raise ValueError(f"bad rule code {cls.code!r}")
        parts = cls.__module__.split(".")
        if "family" not in cls.__dict__ and len(parts) > 3 and parts[:2] == ["dslint", "rules"]:
            cls.family = parts[2]
        cls.fix_availability_set_by_hand = "fix_availability" in cls.__dict__
        if not cls.engine_rule and not cls.fix_availability_set_by_hand:
            cls.fix_availability = derived_fix_availability(cls.invalid)
        if cls.code in REGISTRY and REGISTRY[cls.code] is not cls:
            raise ValueError(f"duplicate rule code {cls.code}: {REGISTRY[cls.code].__name__} and {cls.__name__}")
        REGISTRY[cls.code] = cls

    def __init__(self, options: Optional[dict] = None, preview: bool = False) -> None:
        merged = dict(self.options)
        merged.update(options or {})
        self.opts = merged
        #: ``--preview`` is on: a stable rule then also reports the forms its page lists under
        #: "Preview" (as ruff's preview behaviours of stable rules); they are off by default
        self.preview_forms = preview

    def check(self, ctx) -> Iterable[Report]:
        return ()

    def report(self, node: cst.CSTNode, message: str, **kwargs) -> Report:
        return Report(node=node, message=message, **kwargs)

    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def url(cls) -> str:
        """Where the rule page lives in the dslint repository (``rules/CODE.md``)."""
        return f"rules/{cls.code}.md"


def all_rules() -> Dict[str, Type[Rule]]:
    """Every rule class by code.

    Before any rule module is imported, this answers from a manifest of the rules'
    class attributes (``MANIFEST_FIELDS``; written next to the package's ``.pyc``
    files by the last process that imported the rules, valid while the rule sources
    are unchanged) with stand-ins that import the rule modules the moment anything
    else is asked of them. Choosing rules, keying the cache and printing cached
    findings then need neither the rule modules nor libcst, which is most of a warm
    run's start-up.
    """
    if not _LOADED:
        stubs = _stubs()
        if stubs is not None:
            return dict(stubs)
    load_all()
    return dict(sorted(REGISTRY.items()))


# ----------------------------------------------------------------- lazy registry

_LOADED: List[bool] = []  # [True] once every rule module is imported
_STUBS: Dict[str, type] = {}
# The class attributes a stand-in answers itself (all JSON-able); anything else loads.
MANIFEST_FIELDS = ("code", "name", "family", "level", "preview", "fix_availability", "summary", "help", "engine_rule", "options")
_MANIFEST_NAME = "dslint-rules-manifest.json"


def load_all() -> None:
    """Import every rule family (which registers its rules), once."""
    if _LOADED:
        return
    from dslint.rules import import_families

    import_families()
    _LOADED.append(True)
    _write_manifest()


def _sources_key() -> Optional[str]:
    """Identifies the rule sources as they are now: dslint's version and the relative
    path, size and modification time of every module under this package (family
    packages included) and of ``report.py`` (whose ERROR/WARNING the rules' levels
    are), as Python tests a ``.pyc`` for staleness."""
    from dslint import __version__

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        stats = []
        for folder, dirs, files in os.walk(here):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    stats.append((os.path.relpath(path, here).replace(os.sep, "/"), os.stat(path)))
        stats.append(("../report.py", os.stat(os.path.join(here, os.pardir, "report.py"))))
    except OSError:
        return None
    return json.dumps([__version__, [[n, st.st_size, st.st_mtime_ns] for n, st in stats]])


def _manifest_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__", _MANIFEST_NAME)


def _stubs() -> Optional[Dict[str, type]]:
    if _STUBS:
        return _STUBS
    key = _sources_key()
    if key is None:
        return None
    try:
        with open(_manifest_path(), encoding="utf-8") as handle:
            manifest = json.load(handle)
        if manifest.get("key") != key:
            return None
        for entry in manifest["rules"]:
            namespace = {name: entry[name] for name in MANIFEST_FIELDS}
            namespace["_dslint_url"] = entry["url"]
            namespace["url"] = classmethod(lambda cls: cls._dslint_url)
            namespace["__module__"] = entry["module"]
            namespace["__qualname__"] = entry["qualname"]
            _STUBS[entry["code"]] = _RuleStub(entry["qualname"], (), namespace)
    except (OSError, ValueError, KeyError, TypeError):
        _STUBS.clear()
        return None
    return _STUBS


def _write_manifest() -> None:
    """Record the rules' class attributes for the next process (best effort: a
    read-only install, or ``PYTHONDONTWRITEBYTECODE``, just goes without)."""
    if sys.dont_write_bytecode or _STUBS:
        return
    key = _sources_key()
    if key is None:
        return
    rules = []
    for code, rule in sorted(REGISTRY.items()):
        entry = {name: getattr(rule, name, None) for name in MANIFEST_FIELDS}
        entry.update(url=rule.url(), module=rule.__module__, qualname=rule.__qualname__)
        rules.append(entry)
    data = {"key": key, "rules": rules}
    try:
        text = json.dumps(data, sort_keys=True)
        if json.loads(text) != data:
            return  # a value JSON would change (a tuple default, say): no manifest
        path = _manifest_path()
        try:
            with open(path, encoding="utf-8") as handle:
                if handle.read() == text:
                    return
        except OSError:
            pass
        import tempfile

        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass


class _RuleStub(type):
    """Metaclass of the stand-ins: the manifest's attributes are answered here; any
    other attribute, setting one, or instantiating imports the rules and forwards to
    the real class."""

    def _dslint_real(cls):
        load_all()
        return REGISTRY[cls.code]

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(cls._dslint_real(), name)

    def __setattr__(cls, name, value):
        setattr(cls._dslint_real(), name, value)

    def __delattr__(cls, name):
        delattr(cls._dslint_real(), name)

    def __call__(cls, *args, **kwargs):
        return cls._dslint_real()(*args, **kwargs)

    def __repr__(cls):
        return f"<rule {cls.code} (not imported yet)>"
