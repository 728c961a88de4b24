"""Bare libcst parse of every Python file under a folder, with N processes.

The floor a libcst-based linter is measured against: read, decode and
``libcst.parse_module`` each file, nothing else. Used by ``bench/run.py``;
runnable alone::

    python bench/bare_parse.py --jobs 2 DIR
    python bench/bare_parse.py --jobs 2 --chosen DIR   # only the files dslint parses

``--chosen`` parses only the files dslint's prefilter hands to libcst
(``dslint.prefilter.select``, the text pass before any parse; the files the engine
pulls in later are not counted): the floor a cold ``dslint check`` pays for parsing
whatever its rules do, since every rule reads libcst trees.

Prints one JSON line: files, parse failures, seconds spent inside the pool.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time

SUFFIXES = (".py", ".pyi")
SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn"}


def python_files(top: str):
    out = []
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(SUFFIXES))
    return out


def _parse(path: str) -> int:
    import libcst

    try:
        with open(path, "rb") as handle:
            data = handle.read()
        libcst.parse_module(data.decode("utf-8", "surrogateescape"))
        return 0
    except Exception:  # syntax errors, undecodable files: counted, not fatal
        return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--jobs", "-j", type=int, default=2)
    parser.add_argument("--chosen", action="store_true", help="only the files dslint's prefilter chooses")
    args = parser.parse_args(argv)
    import libcst  # noqa: F401  (imported before the pool forks, as a linter would)

    files = python_files(args.folder)
    if args.chosen:
        from dslint.prefilter import select

        texts = {}
        for path in files:
            with open(path, "rb") as handle:
                texts[path] = handle.read().decode("utf-8", "surrogateescape")
        chosen = select(texts)
        files = [path for path in files if path in chosen]
    start = time.perf_counter()
    if args.jobs <= 1:
        failures = sum(map(_parse, files))
    else:
        with multiprocessing.Pool(args.jobs) as pool:
            failures = sum(pool.imap_unordered(_parse, files, chunksize=4))
    elapsed = time.perf_counter() - start
    print(json.dumps({"files": len(files), "failures": failures, "seconds": round(elapsed, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
