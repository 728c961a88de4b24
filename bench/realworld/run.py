"""Real-code truth: recall on real reported defects, precision on public repositories.

    python bench/realworld/run.py recall    [--mirrors DIR | --checkouts DIR] [--default-set]
    python bench/realworld/run.py precision [--mirrors DIR | --checkouts DIR] [--default-set] [--unjudged]

Both read manifests next to this script, which hold references only (repository,
commit, path, line, code, a link and a one-line diagnosis or verdict), never code:

- ``defects.toml``: ``[[defect]]`` entries taken from public bug reports and fix PRs
  (the buggy commit, the line a linter should point at, the expected code). A
  ``batch`` field names entries collected together after the rules were built, so that
  ``recall --batch NAME`` scores them apart: defects nobody tuned the rules on.
- ``precision.toml``: ``[[repo]]`` entries (repository, commit, ``set = "tuning"`` or
  ``"unseen"``) and ``[[finding]]`` verdicts (``tp``, ``fp`` or ``borderline``, with the
  reason) for every finding dslint reported there.

Checkouts are local; this script fetches nothing. ``--mirrors DIR`` takes bare git
repositories laid out as ``DIR/<owner>+<name>/repo`` (each commit is exported with
``git archive`` into a temporary directory); ``--checkouts DIR`` takes working trees
``DIR/<owner>+<name>@<commit>``. A repository that is missing is reported as such and
left out of the figures.

Each repository is checked as a whole (``--select ALL --preview``, or the default set
with ``--default-set``), so cross-file facts are seen as a user would see them; recall selects
only the codes of a checkout's defects, and ``--codes`` only those (a code's findings do not
depend on which other rules run).

Recall: a defect is found when a finding of its code is in its file within
``--slack`` lines (default 3) of its line; with ``--span``, also when both lines lie in one simple
statement (a long ``DataLoader(...)`` call: collectors mark its first line or the offending keyword
argument). Precision: each finding is matched to a
verdict by repository, path, code and line (within the slack, the nearest line first; else one in the same
simple statement); findings without a
verdict are listed as unjudged (``--unjudged`` prints them to be judged).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Optional

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent


def load(name: str) -> dict:
    with open(HERE / name, "rb") as handle:
        return tomllib.load(handle)


class Checkouts:
    def __init__(self, mirrors, checkouts):
        self.mirrors = Path(mirrors) if mirrors else None
        self.checkouts = Path(checkouts) if checkouts else None
        self.tmp = tempfile.TemporaryDirectory(prefix="dslint-realworld-")

    def get(self, repo: str, commit: str):
        key = repo.replace("/", "+")
        if self.checkouts is not None:
            path = self.checkouts / f"{key}@{commit}"
            return path if path.is_dir() else None
        if self.mirrors is None:
            return None
        git_dir = self.mirrors / key / "repo"
        if (git_dir / ".git").is_dir():  # a non-bare clone
            git_dir = git_dir / ".git"
        if not git_dir.is_dir():
            return None
        target = Path(self.tmp.name) / f"{key}@{commit[:12]}"
        if target.is_dir():
            return target
        target.mkdir()
        git = ["git", "--git-dir", str(git_dir)]
        # only Python sources matter (the check runs --isolated, gitignore off)
        archive = subprocess.run([*git, "archive", "--format=tar", commit, "--", "*.py"], capture_output=True)
        if archive.returncode == 0:
            with tempfile.TemporaryFile() as handle:
                handle.write(archive.stdout)
                handle.seek(0)
                with tarfile.open(fileobj=handle) as tar:
                    tar.extractall(target, filter="data")
        else:  # a snapshot may lack some blobs (large files): export file by file
            listing = subprocess.run([*git, "ls-tree", "-r", "-z", commit], capture_output=True)
            if listing.returncode != 0:
                return None
            for entry in listing.stdout.split(b"\0"):
                if not entry:
                    continue
                meta, _, name = entry.partition(b"\t")
                mode, kind, sha = meta.split()
                path = name.decode("utf-8", "surrogateescape")
                if kind != b"blob" or not path.endswith(".py") or mode == b"120000":
                    continue
                blob = subprocess.run([*git, "cat-file", "blob", sha.decode()], capture_output=True)
                if blob.returncode == 0:
                    (target / path).parent.mkdir(parents=True, exist_ok=True)
                    (target / path).write_bytes(blob.stdout)
        _export_declarations(git, commit, target)
        return target


#: files that declare the project's dependencies (which torch it runs on), exported beside its sources
DECLARATIONS = ("*requirements*.txt", "*requirements/*.txt", "*requirements*.in", "*environment*.yml",
                "*environment*.yaml", "*setup.cfg", "*pyproject.toml")


def _export_declarations(git: list, commit: str, target: Path) -> None:
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", commit], capture_output=True)
    if listing.returncode != 0:
        return
    for entry in listing.stdout.split(b"\0"):
        meta, _, name = entry.partition(b"\t")
        if not name or meta.split()[1:2] != [b"blob"] or meta.startswith(b"120000"):
            continue
        path = name.decode("utf-8", "surrogateescape")
        if not any(fnmatch.fnmatchcase(path, p) for p in DECLARATIONS):
            continue
        blob = subprocess.run([*git, "cat-file", "blob", meta.split()[2].decode()], capture_output=True)
        if blob.returncode == 0:
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            (target / path).write_bytes(blob.stdout)


def findings(root: Path, default_set: bool, codes=None) -> list:
    """dslint's findings on the checkout ``root``: every rule (the default set with ``default_set``),
    or only the rules ``codes`` (recall needs no other; each rule's findings are the same whatever
    else is selected, and the prefilter then reads only the files those rules need)."""
    cmd = [sys.executable, "-m", "dslint", "check", "--no-cache", "--isolated", "--output-format", "json",
           "--exit-zero", "-q", "--no-respect-gitignore"]
    if codes:
        cmd += ["--select", ",".join(sorted(codes))]
    elif not default_set:
        cmd += ["--select", "ALL"]
    if not default_set:
        cmd += ["--preview"]
    done = subprocess.run(cmd + ["."], cwd=root, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    if done.returncode not in (0, 2):
        raise SystemExit(f"dslint failed on {root}: {done.stderr[-2000:]}")
    out = []
    for item in json.loads(done.stdout or "[]"):
        out.append({"code": item["code"], "path": os.path.relpath(item["filename"], root).replace(os.sep, "/"),
                    "line": item["location"]["row"], "message": item["message"]})
    return out


def python_lines(root: Path) -> int:
    total = 0
    for path in root.rglob("*.py"):
        try:
            with open(path, "rb") as handle:
                total += sum(1 for _ in handle)
        except OSError:
            pass
    return total


def _wanted(code: str, prefixes) -> bool:
    return not prefixes or any(code.startswith(p) for p in prefixes)


def near(finding: dict, entry: dict, slack: int, root: Optional[Path] = None) -> bool:
    """Same code and file, and the finding's line within ``slack`` of the entry's; with ``root``
    (``--span``), also when both lines lie in one simple statement of the file (a finding on a
    ``DataLoader(...)`` call's argument and a report that marks the call's first line)."""
    if finding["code"] != entry["code"] or finding["path"] != entry["path"]:
        return False
    line = int(entry["line"])
    if abs(finding["line"] - line) <= slack:
        return True
    if root is None:
        return False
    return any(start <= line <= end for start, end in _statements(root / finding["path"], finding["line"]))


_STATEMENT_SPANS: dict = {}


def _statements(path: Path, line: int) -> list:
    """(first, last) lines of the simple statements (not ``if``/``def``/``class``...) holding ``line``."""
    if path not in _STATEMENT_SPANS:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError, OSError):
            tree = None
        compound = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
                    ast.With, ast.AsyncWith, ast.Try, getattr(ast, "Match", ast.If), getattr(ast, "TryStar", ast.Try))
        _STATEMENT_SPANS[path] = [(n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, ast.stmt)
                                  and not isinstance(n, compound)] if tree is not None else []
    return [(a, b) for a, b in _STATEMENT_SPANS[path] if a <= line <= b]


def recall(args) -> int:
    defects = [d for d in load("defects.toml")["defect"] if _wanted(d["code"], args.codes)
               and (args.batch is None or d.get("batch") == args.batch)]
    checkouts = Checkouts(args.mirrors, args.checkouts)
    groups = defaultdict(list)
    for entry in defects:
        groups[(entry["repo"], entry["commit"])].append(entry)
    found_by_code, total_by_code = Counter(), Counter()
    missing, misses, in_statement = [], [], []
    for (repo, commit), entries in sorted(groups.items()):
        root = checkouts.get(repo, commit)
        if root is None:
            missing.append(f"{repo}@{commit[:12]}")
            continue
        got = findings(root, args.default_set, {e["code"] for e in entries} if not args.every_rule else None)
        for entry in entries:
            total_by_code[entry["code"]] += 1
            if any(near(f, entry, args.slack, root if args.span else None) for f in got):
                found_by_code[entry["code"]] += 1
            else:
                misses.append(entry)
                if not args.span and any(near(f, entry, args.slack, root) for f in got):
                    in_statement.append(entry["id"])  # (found by ``--span``: the call's first line vs its keyword)
    total, found = sum(total_by_code.values()), sum(found_by_code.values())
    reports = len({e["report"] for e in defects})
    print(f"recall {found}/{total} = {found / total:.2f}" if total else "no defect checked",
          f"({len(defects)} defects from {reports} reports; {'default set' if args.default_set else 'every rule, preview included'}"
          f"{'; or in the same statement' if args.span else ''})")
    if in_statement:
        print(f"(with --span, {found + len(in_statement)}/{total}: {len(in_statement)} more found in the statement the manifest marks)")
    print("| code | found | defects | recall |\n|---|---:|---:|---:|")
    for code in sorted(total_by_code):
        print(f"| {code} | {found_by_code[code]} | {total_by_code[code]} | {found_by_code[code] / total_by_code[code]:.2f} |")
    if args.verbose:
        for entry in misses:
            also = " (in the same statement)" if entry["id"] in in_statement else ""
            print(f"missed {entry['id']}: {entry['code']} {entry['repo']} {entry['path']}:{entry['line']}{also}")
    for item in missing:
        print(f"not checked (no local checkout): {item}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"found": found, "total": total, "per_code": {
            c: [found_by_code[c], total_by_code[c]] for c in total_by_code}, "missed": [e["id"] for e in misses], "in_statement": in_statement,
            "not_checked": missing}, indent=2) + "\n")
    return 0


def precision(args) -> int:
    manifest = load("precision.toml")
    verdicts = manifest.get("finding", [])
    checkouts = Checkouts(args.mirrors, args.checkouts)
    rows, unjudged, missing, listed = [], [], [], []
    per_code = defaultdict(Counter)
    for repo in manifest["repo"]:
        if args.set and repo.get("set") != args.set:
            continue
        if args.repos and repo["repo"] not in args.repos:
            continue
        root = checkouts.get(repo["repo"], repo["commit"])
        if root is None:
            missing.append(repo["repo"])
            continue
        got = findings(root, args.default_set, set(args.codes) if args.codes else None)
        counts = Counter()
        judged = [v for v in verdicts if v["repo"] == repo["repo"]]
        for finding in got:
            if not _wanted(finding["code"], args.codes):
                continue
            # the nearest verdict wins: two findings a line or two apart keep their own verdicts
            close = [v for v in judged if near(finding, v, args.slack)]
            # else a verdict in the same statement (a finding that moved from a call's first line to its argument)
            close = close or [v for v in judged if near(finding, v, 0, root)]
            match = min(close, key=lambda v: abs(finding["line"] - int(v["line"]))) if close else None
            verdict = match["verdict"] if match else "unjudged"
            counts[verdict] += 1
            per_code[finding["code"]][verdict] += 1
            if match is None:
                unjudged.append((repo["repo"], finding))
            elif args.verbose:
                listed.append((repo["repo"], finding, match))
        lines = python_lines(root)
        rows.append((repo["repo"], repo.get("set", "?"), lines, len(got), counts))
    print("| repo | set | lines | findings | tp | fp | borderline | unjudged |\n|---|---|---:|---:|---:|---:|---:|---:|")
    totals = Counter()
    total_lines = 0
    for name, kind, lines, n, counts in rows:
        print(f"| {name} | {kind} | {lines:,} | {n} | {counts['tp']} | {counts['fp']} | {counts['borderline']} | {counts['unjudged']} |")
        totals.update(counts)
        total_lines += lines
    tp, fp, border = totals["tp"], totals["fp"], totals["borderline"]
    print(f"\nTP/(TP+FP) = {tp}/{tp + fp} = {tp / (tp + fp):.2f}" if tp + fp else "\nno judged finding")
    if tp + fp + border:
        print(f"actionable TP/(TP+FP+borderline) = {tp}/{tp + fp + border} = {tp / (tp + fp + border):.2f}")
    if total_lines:
        print(f"false positives per 10k lines = {fp * 10000 / total_lines:.3f} ({fp} in {total_lines:,} lines)")
    print("\n| code | tp | fp | borderline | unjudged |\n|---|---:|---:|---:|---:|")
    for code in sorted(per_code):
        c = per_code[code]
        print(f"| {code} | {c['tp']} | {c['fp']} | {c['borderline']} | {c['unjudged']} |")
    for repo, finding, match in listed:
        print(f"{match['verdict']}: {repo} {finding['path']}:{finding['line']} {finding['code']} {match['reason'][:140]}")
    if args.unjudged:
        for repo, finding in unjudged:
            print(f"unjudged: {repo} {finding['path']}:{finding['line']} {finding['code']} {finding['message'][:140]}")
    for item in missing:
        print(f"not checked (no local checkout): {item}", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Recall on real defects and precision on public repositories.")
    parser.add_argument("what", choices=["recall", "precision"])
    parser.add_argument("--mirrors", help="bare git repositories as DIR/<owner>+<name>/repo")
    parser.add_argument("--checkouts", help="working trees as DIR/<owner>+<name>@<commit>")
    parser.add_argument("--default-set", action="store_true", help="only the default rules (no --select ALL --preview)")
    parser.add_argument("--slack", type=int, default=3, help="lines a finding may be away from the manifest's line")
    parser.add_argument("--span", action="store_true", help="recall: also count a finding in the same simple statement "
                        "as the manifest's line (a long DataLoader(...) call: one collector marks its first line, "
                        "another the offending keyword argument)")
    parser.add_argument("--set", choices=["tuning", "unseen"], help="precision: only repositories of this set")
    parser.add_argument("--repos", nargs="*", metavar="OWNER/NAME", help="precision: only these repositories")
    parser.add_argument("--unjudged", action="store_true", help="precision: print every finding without a verdict")
    parser.add_argument("--json", help="recall: also write the figures as JSON")
    parser.add_argument("--every-rule", action="store_true", help="recall: run every rule on each checkout, not only "
                        "the codes of its defects (slower; the findings of a code are the same either way)")
    parser.add_argument("--batch", help="recall: only the defects collected in this batch (their `batch` field)")
    parser.add_argument("--codes", nargs="*", metavar="PREFIX", help="only these codes (prefixes such as DSL5)")
    parser.add_argument("-v", "--verbose", action="store_true", help="recall: list the missed defects; precision: list every judged finding with its verdict")
    args = parser.parse_args(argv)
    if not (args.mirrors or args.checkouts):
        parser.error("give --mirrors or --checkouts")
    return recall(args) if args.what == "recall" else precision(args)


if __name__ == "__main__":
    sys.exit(main())
