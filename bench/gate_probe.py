#!/usr/bin/env python
"""What a precise gate before libcst could save on a corpus, measured rather than guessed.

dslint's prefilter (a text pass) hands libcst every file that mentions a data-loading
word. A finer gate would parse each chosen file with the standard library's ``ast``
first and drop the files in which those words occur only in comments and strings,
where no rule can fire. This script measures, on one corpus, in one process:

- the files and lines the prefilter chooses;
- the chosen files whose words occur in no code token (comments and strings only):
  what the gate could drop;
- the CPU seconds of ``ast.parse`` over every chosen file (what the gate costs), and
  of ``libcst.parse_module`` over the files it could drop (what it saves).

    python bench/gate_probe.py /path/to/corpus

Prints one JSON object. A gate is worth building only when ``saved_s`` clearly exceeds
``gate_cost_s``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time

SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn"}


def _texts(top: str) -> dict:
    out = {}
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, "rb") as handle:
                    out[path] = handle.read().decode("utf-8", "surrogateescape")
    return out


def _code_words(tree: ast.AST) -> str:
    """Every identifier the code uses (names, attributes, imported and defined names), joined."""
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.alias):
            words.append(node.name)
            words.append(node.asname or "")
        elif isinstance(node, ast.ImportFrom):
            words.append(node.module or "")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append(node.name)
        elif isinstance(node, ast.keyword):
            words.append(node.arg or "")
    return " ".join(words)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    args = parser.parse_args(argv)
    import libcst

    from dslint.prefilter import CORE_WORDS, select

    texts = _texts(args.corpus)
    chosen = sorted(select(texts))
    start = time.process_time()
    droppable = []
    for path in chosen:
        try:
            tree = ast.parse(texts[path])
        except (SyntaxError, ValueError):
            continue
        words = _code_words(tree)
        text = texts[path]
        if not any(word.split(".")[-1] in words for word in CORE_WORDS) and "noqa" not in text and "dslint:" not in text:
            droppable.append(path)
    gate_cost = time.process_time() - start
    start = time.process_time()
    for path in droppable:
        try:
            libcst.parse_module(texts[path])
        except Exception:  # a file libcst rejects costs what it cost
            pass
    saved = time.process_time() - start
    print(json.dumps({
        "files": len(texts),
        "chosen_files": len(chosen),
        "chosen_lines": sum(texts[p].count("\n") for p in chosen),
        "droppable_files": len(droppable),
        "droppable_lines": sum(texts[p].count("\n") for p in droppable),
        "gate_cost_s": round(gate_cost, 2),
        "saved_s": round(saved, 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
