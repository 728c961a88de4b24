"""Print a hash of every finding dslint reports on a set of trees.

A change meant to keep behaviour (a restructure, a speed-up) must print the same
hashes before and after. Each tree is checked with every rule, preview included,
without the cache, and each finding contributes its code, its path relative to the
tree, its start and end position, its message, its help line and its fix (applicability,
message and every edit).

    python bench/findings_hash.py fixtures/ ~/corpora/fairseq ~/corpora/detectron2
    python bench/findings_hash.py --torch          # the installed torch package too
    python bench/findings_hash.py --dump out.jsonl fixtures/   # the findings themselves

Prints one line per tree (hash, number of findings, path) and a combined hash.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys


def findings(tree: str, jobs: int) -> list:
    cmd = [
        sys.executable, "-m", "dslint", "check", "--select", "ALL", "--preview", "--no-cache",
        "--isolated", "--output-format", "json", "--exit-zero", "-q", "-j", str(jobs), ".",
    ]
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"dslint failed on {tree} (exit {done.returncode}):\n{done.stderr[-2000:]}")
    rows = []
    for item in json.loads(done.stdout or "[]"):
        fix = item.get("fix")
        rows.append({
            "code": item["code"],
            "path": os.path.relpath(item["filename"], tree),
            "start": [item["location"]["row"], item["location"]["column"]],
            "end": [item["end_location"]["row"], item["end_location"]["column"]],
            "message": item["message"],
            "help": item.get("help"),
            "fix": None if fix is None else {
                "applicability": fix["applicability"],
                "message": fix["message"],
                "edits": [[e["content"], e["location"]["row"], e["location"]["column"],
                           e["end_location"]["row"], e["end_location"]["column"]] for e in fix["edits"]],
            },
        })
    rows.sort(key=lambda r: (r["path"], r["start"], r["code"], r["message"]))
    return rows


def digest(rows: list) -> str:
    text = "\n".join(json.dumps(r, sort_keys=True) for r in rows)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def torch_root() -> str:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("--torch: torch is not installed in this interpreter")
    return list(spec.submodule_search_locations)[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*")
    parser.add_argument("--torch", action="store_true", help="also the installed torch package")
    parser.add_argument("--jobs", "-j", type=int, default=2)
    parser.add_argument("--dump", metavar="FILE", help="write every finding as JSON lines")
    args = parser.parse_intermixed_args(argv)
    trees = [os.path.abspath(t) for t in args.trees]
    if args.torch:
        trees.append(torch_root())
    if not trees:
        parser.error("name at least one tree (or --torch)")
    combined = hashlib.sha256()
    dump = open(args.dump, "w", encoding="utf-8") if args.dump else None
    try:
        for tree in trees:
            rows = findings(tree, args.jobs)
            h = digest(rows)
            combined.update(h.encode())
            print(f"{h}  {len(rows):5d}  {tree}")
            for row in rows:
                if dump:
                    dump.write(json.dumps(dict(row, tree=os.path.basename(tree)), sort_keys=True) + "\n")
    finally:
        if dump:
            dump.close()
    print(f"{combined.hexdigest()[:16]}  combined")
    return 0


if __name__ == "__main__":
    sys.exit(main())
