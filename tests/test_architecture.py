"""The shape of the code base, as CONTRIBUTING and docs/architecture.md describe it.

These read the sources (``ast``), they import nothing of what they check.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Set

from dslint.rules.base import all_rules

PACKAGE = Path(__file__).resolve().parent.parent / "dslint"
RULES = PACKAGE / "rules"


def _modules() -> Dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> List[tuple]:
    """(imported dslint module, imported names) for every import statement, at any depth."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names if alias.name.startswith("dslint"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not base.startswith("dslint"):
                continue
            names = tuple(alias.name for alias in node.names)
            submodules = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            if submodules:
                found.extend((m, ()) for m in submodules)
                names = tuple(n for n in names if f"{base}.{n}" not in MODULES)
            if names or not submodules:
                found.append((base, names))
    return found


def test_no_file_is_too_long():
    too_long = {}
    for name, path in MODULES.items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        limit = 300 if re.fullmatch(r"dslint\.rules\.\w+\.dsl\d{3}_\w+", name) else 500
        if lines > limit:
            too_long[str(path.relative_to(PACKAGE.parent))] = (lines, limit)
    assert not too_long, too_long


def test_no_private_name_is_imported_from_another_module():
    offenders = []
    for name, path in MODULES.items():
        for module, names in _imports(name, path):
            offenders.extend(f"{name} imports {module}.{n}" for n in names if n.startswith("_") and not n.startswith("__"))
            if module.rpartition(".")[2].startswith("_") and not module.endswith("._common") and module != name:
                if not module.endswith("__main__"):
                    offenders.append(f"{name} imports the private module {module}")
    assert not offenders, offenders


def test_no_import_cycles():
    graph: Dict[str, Set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, _ in _imports(name, path):
            if module in MODULES and module != name:
                graph[name].add(module)
    cycles = []
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, cycles


def test_one_rule_per_file_under_its_family():
    for code, rule in all_rules().items():
        module = rule.__module__
        expected = f"dslint.rules.{rule.family}.{code.lower()}_{rule.name.replace('-', '_')}"
        assert module == expected, f"{code} lives in {module}, expected {expected}"
        siblings = [c for c, r in all_rules().items() if r.__module__ == module]
        assert siblings == [code], f"{module} holds {siblings}"


def test_rules_import_only_the_rule_api_their_family_helpers_and_semantics():
    allowed = re.compile(r"dslint\.(report|edits|rules\.base|rules\.\w+\._common|semantics(\.\w+)?)$")
    offenders = []
    for name, path in MODULES.items():
        if not name.startswith("dslint.rules.") or name == "dslint.rules.base":
            continue
        family = name.split(".")[2]
        for module, _ in _imports(name, path):
            if not allowed.match(module):
                offenders.append(f"{name} imports {module}")
            elif module.endswith("._common") and module != f"dslint.rules.{family}._common":
                offenders.append(f"{name} imports another family's helpers {module}")
    assert not offenders, offenders


def test_rules_never_touch_private_state_of_the_context():
    offenders = [name for name, path in MODULES.items()
                 if name.startswith("dslint.rules.") and re.search(r"\bctx\._\w", path.read_text(encoding="utf-8"))]
    assert not offenders, offenders
