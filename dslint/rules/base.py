"""The rule API.

A rule is one small class: its code, name, level, the message and help it reports,
its documentation (the class docstring, in ruff's sections: What it does / Why is
this bad? / Example / Use instead / Fix safety / References), and embedded
``valid``/``invalid`` cases that the test suite runs (Fixit style). Registration,
``dslint rule CODE``, the ``rules/`` pages and the fixture tests all read the class.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import ClassVar, Dict, Iterable, List, Optional, Sequence, Type, Union

import libcst as cst

from dslint.diagnostics import ERROR, WARNING  # noqa: F401  (re-exported for rules)

REGISTRY: Dict[str, Type["Rule"]] = {}

CODE_RE = re.compile(r"^DSL[0-9]{3}$")


@dataclass
class Edit:
    """Replace the source from the start of ``start`` to the end of ``end`` (nodes).

    ``start_at_end``/``end_at_start`` select the other side of a node, so an edit
    can also cover the gap between two nodes (e.g. an argument and its comma).
    """

    start: cst.CSTNode
    end: Optional[cst.CSTNode] = None
    content: str = ""
    start_at_end: bool = False
    end_at_start: bool = False


@dataclass
class FixSpec:
    applicability: str  # "safe" | "unsafe"
    message: str
    edits: List[Edit] = field(default_factory=list)


@dataclass
class Report:
    node: cst.CSTNode
    message: str
    level: Optional[str] = None
    help: Optional[str] = None
    fix: Optional[FixSpec] = None
    end_node: Optional[cst.CSTNode] = None  # report the range node..end_node


Case = Union[str, Dict[str, str]]


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    level: ClassVar[str] = ERROR
    preview: ClassVar[bool] = False
    #: "never", "sometimes" or "always"
    fix_availability: ClassVar[str] = "never"
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
        if cls.code in REGISTRY and REGISTRY[cls.code] is not cls:
            raise ValueError(f"duplicate rule code {cls.code}: {REGISTRY[cls.code].__name__} and {cls.__name__}")
        REGISTRY[cls.code] = cls

    def __init__(self, options: Optional[dict] = None) -> None:
        merged = dict(self.options)
        merged.update(options or {})
        self.opts = merged

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
    import dslint.rules  # noqa: F401  (imports every family, which registers the rules)

    return dict(sorted(REGISTRY.items()))
