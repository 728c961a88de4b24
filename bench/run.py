#!/usr/bin/env python
"""Benchmark ``dslint check`` against the anchors, on one corpus, in one run.

Tools (each a fresh process, cwd = the corpus, path ``.``):

- ``dslint-cold``     ``dslint check`` with a fresh, empty cache directory
- ``dslint-warm``     the same command again, right after, with that cache
- ``dslint-nocache``  ``dslint check --no-cache``
- ``libcst-parse``    ``libcst.parse_module`` of every file, ``multiprocessing.Pool(2)``
                      (``bench/bare_parse.py``, dslint's own interpreter and libcst)
- ``libcst-parse-chosen``  the same, of only the files dslint's prefilter chooses: the
                      floor of a cold run (every rule reads libcst trees)
- ``import-libcst``   ``python -c "import libcst"``: the floor of ``dslint-onefile``
- ``dslint-onefile``  ``dslint check --no-cache one.py``: one small dataset file (start-up)
- ``ruff``            ``ruff check --isolated --no-cache --select ALL``
- ``torchfix``        ``torchfix .`` (TorchFix 0.7.0, default rules)
- ``fixit``           ``fixit lint .`` (Fixit 2.2.1, default rules)

Rounds alternate: every tool runs once per round, in a rotated order (``dslint-warm``
always directly after ``dslint-cold``); the table shows the median. TorchFix, Fixit
and ruff are installed by this script into their own venv (``bench/.venv-anchors``).
A tool that fails or times out gets its error in the table; the run goes on.

Usage::

    python bench/run.py                          # torch's utils/, nn/, optim/ (no network)
    python bench/run.py --corpus /path/to/checkouts --rounds 3 --slow-rounds 1
    python bench/run.py --tools dslint-cold,dslint-warm,ruff --output-format json

See bench/README.md for the latest figures.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_VENV = HERE / ".venv-anchors"
ANCHOR_SPECS = ["torchfix==0.7.0", "fixit==2.2.1", "ruff==0.17.6"]
TORCH_SPEC = "torch==2.13.0"  # a CPU build lies on this machine's disk
SUFFIXES = (".py", ".pyi")
SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn"}

ALL_TOOLS = [
    "dslint-cold", "dslint-warm", "dslint-nocache", "dslint-onefile", "libcst-parse", "libcst-parse-chosen", "import-libcst",
    "ruff", "torchfix", "fixit",
]
#: tools timed on something other than the whole corpus (no files/s, no lines/s)
NOT_WHOLE_CORPUS = {"dslint-onefile", "libcst-parse-chosen", "import-libcst"}
SLOW_TOOLS = {"torchfix", "fixit"}
ANCHOR_TOOLS = {"ruff", "torchfix", "fixit"}

# (name, numerator tool, denominator tool, target description, ok(value) )
RATIOS = [
    ("cold dslint vs TorchFix (x faster)", "torchfix", "dslint-cold", ">= 30x", lambda v: v >= 30),
    ("cold dslint vs Fixit (x faster)", "fixit", "dslint-cold", ">= 10x", lambda v: v >= 10),
    ("cold dslint / bare libcst parse (time)", "dslint-cold", "libcst-parse", "<= 1.0x", lambda v: v <= 1.0),
    ("warm / cold dslint (time)", "dslint-warm", "dslint-cold", "<= 0.10", lambda v: v <= 0.10),
    ("cold dslint / ruff --select ALL (time)", "dslint-cold", "ruff", "<= 3x (1M-line corpus)", lambda v: v <= 3.0),
    ("--no-cache dslint / bare libcst parse (time)", "dslint-nocache", "libcst-parse", "(info)", None),
    ("parse of dslint's files alone / ruff (floor)", "libcst-parse-chosen", "ruff", "(info: floor of the 3x)", None),
    ("cold dslint / parse of dslint's files alone", "dslint-cold", "libcst-parse-chosen", "(info)", None),
]


# The one small file of ``dslint-onefile`` (a dataset with a per-sample json.load: it is
# parsed and every rule runs on it, so the run pays libcst's import and the rules').
ONE_FILE = """import json

from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i]) as handle:
            return json.load(handle)


loader = DataLoader(Records(["a.json", "b.json"]), batch_size=2, num_workers=2)
"""


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- corpus


def default_corpus() -> Path:
    """torch's utils/, nn/ and optim/ copied to a fixed temp folder (stable paths)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bench: torch is not installed here; pass --corpus DIR")
    torch_dir = Path(list(spec.submodule_search_locations)[0])
    version = "unknown"
    try:
        from importlib.metadata import version as _v

        version = _v("torch")
    except Exception:
        pass
    target = Path(tempfile.gettempdir()) / f"dslint-bench-torch-{version}"
    if target.exists():
        shutil.rmtree(target)
    for part in ("utils", "nn", "optim"):
        shutil.copytree(
            torch_dir / part,
            target / "torch" / part,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"),
        )
    return target


def python_files(top: Path) -> List[Path]:
    out = []
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        out.extend(Path(root) / f for f in sorted(files) if f.endswith(SUFFIXES))
    return out


def count_corpus(top: Path) -> Dict[str, int]:
    files = python_files(top)
    lines = 0
    size = 0
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        size += len(data)
        lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return {"files": len(files), "lines": lines, "bytes": size}


def corpus_commits(top: Path) -> Dict[str, str]:
    """The commit of each checkout in the corpus: ``git rev-parse HEAD`` of each top
    folder (and the corpus itself) that is a git checkout, then the lines
    ``<folder> [<url>] <commit>`` of a ``COMMITS`` file next to them (for copies
    without ``.git``, e.g. ``git archive`` exports)."""
    out: Dict[str, str] = {}
    for folder in [top] + sorted(p for p in top.iterdir() if p.is_dir()):
        if not (folder / ".git").exists():
            continue
        try:
            proc = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"],
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode == 0 and proc.stdout.strip():
            out["." if folder == top else folder.name] = proc.stdout.strip()
    listing = top / "COMMITS"
    if listing.is_file():
        for line in listing.read_text(encoding="utf-8", errors="replace").splitlines():
            fields = line.split()
            if len(fields) >= 2 and not line.lstrip().startswith("#"):
                out.setdefault(fields[0], " ".join(fields[1:]))
    return out


# ----------------------------------------------------------------------------- anchors venv


def _venv_bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


def _requires_torch(venv: Path, spec: str) -> Optional[bool]:
    """Read torchfix's wheel metadata (without installing it) for a torch requirement."""
    pip = [str(_venv_bin(venv, "python")), "-m", "pip"]
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            pip + ["download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp, spec],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            return None
        for wheel in Path(tmp).glob("*.whl"):
            with zipfile.ZipFile(wheel) as zf:
                meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
                if meta is None:
                    continue
                for line in zf.read(meta).decode("utf-8", "replace").splitlines():
                    if line.startswith("Requires-Dist:"):
                        req = line.split(":", 1)[1].strip()
                        name = req.split(";")[0].strip()
                        for stop in "<>=!~[( ":
                            name = name.split(stop)[0]
                        if name.lower() == "torch" and "extra ==" not in req:
                            return True
        return False


def ensure_anchors(venv: Path, install: bool) -> Dict[str, str]:
    """Create the anchors' venv and install TorchFix, Fixit and ruff; return errors per tool."""
    stamp = venv / ".dslint-bench-installed"
    wanted = "\n".join(ANCHOR_SPECS) + "\n"
    if stamp.exists() and stamp.read_text() == wanted:
        return {}
    if not install:
        missing = [t for t in ANCHOR_TOOLS if not _venv_bin(venv, t).exists()]
        return {t: f"not installed in {venv} (run without --no-install)" for t in missing}
    errors: Dict[str, str] = {}
    try:
        if not _venv_bin(venv, "python").exists():
            log(f"creating {venv}")
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, text=True)
        pip = [str(_venv_bin(venv, "python")), "-m", "pip", "install", "-q"]
        torchfix_spec = next(s for s in ANCHOR_SPECS if s.startswith("torchfix"))
        needs_torch = _requires_torch(venv, torchfix_spec)
        log(f"torchfix requires torch: {needs_torch}")
        if needs_torch:
            # first, so that the resolver takes the local CPU build, not a multi-GB CUDA one
            subprocess.run(pip + [TORCH_SPEC], check=True, capture_output=True, text=True)
        for spec in ANCHOR_SPECS:
            log(f"installing {spec} into {venv}")
            proc = subprocess.run(pip + [spec], capture_output=True, text=True)
            if proc.returncode != 0:
                tool = spec.split("=")[0].split("<")[0].split(">")[0]
                errors[tool] = "pip install failed: " + _tail(proc.stderr or proc.stdout, 300)
        if not errors:
            stamp.write_text(wanted)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", None) or str(exc)
        for tool in ANCHOR_TOOLS:
            errors[tool] = "venv setup failed: " + _tail(str(detail), 300)
    return errors


def tool_versions(venv: Path) -> Dict[str, str]:
    versions: Dict[str, str] = {}
    try:
        import dslint

        versions["dslint"] = dslint.__version__
    except Exception:
        versions["dslint"] = "?"
    try:
        from importlib.metadata import version as _v

        versions["libcst (dslint's)"] = _v("libcst")
    except Exception:
        pass
    python = _venv_bin(venv, "python")
    if python.exists():
        code = (
            "import json\nfrom importlib.metadata import version\nout={}\n"
            "for n in ('torchfix','fixit','ruff','libcst','torch'):\n"
            "    try: out[n]=version(n)\n    except Exception: pass\nprint(json.dumps(out))"
        )
        proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
        if proc.returncode == 0:
            for name, value in json.loads(proc.stdout).items():
                versions[name if name != "libcst" else "libcst (anchors')"] = value
    return versions


# ----------------------------------------------------------------------------- commands


def dslint_command() -> List[str]:
    script = Path(sys.executable).parent / "dslint"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dslint"]


def build_commands(venv: Path, jobs: Optional[int], one_file: Optional[Path] = None) -> Dict[str, List[str]]:
    dslint = dslint_command() + ["check", "--output-format", "concise", "--exit-zero"]
    if jobs:
        dslint += ["--jobs", str(jobs)]
    return {
        # "{cache}" is replaced per round by a fresh directory
        "dslint-cold": dslint + ["--cache-dir", "{cache}", "."],
        "dslint-warm": dslint + ["--cache-dir", "{cache}", "."],
        "dslint-nocache": dslint + ["--no-cache", "."],
        "dslint-onefile": dslint + ["--no-cache", str(one_file or "one.py")],
        "libcst-parse": [sys.executable, str(HERE / "bare_parse.py"), "--jobs", "2", "."],
        "libcst-parse-chosen": [sys.executable, str(HERE / "bare_parse.py"), "--jobs", "2", "--chosen", "."],
        "import-libcst": [sys.executable, "-c", "import libcst"],
        "ruff": [str(_venv_bin(venv, "ruff")), "check", "--isolated", "--no-cache", "--select", "ALL",
                 "--output-format", "concise", "--exit-zero", "."],
        "torchfix": [str(_venv_bin(venv, "torchfix")), "."],
        "fixit": [str(_venv_bin(venv, "fixit")), "lint", "."],
    }


OK_RC = {
    "dslint-cold": {0},
    "dslint-warm": {0},
    "dslint-nocache": {0},
    "dslint-onefile": {0},
    "libcst-parse": {0},
    "libcst-parse-chosen": {0},
    "import-libcst": {0},
    "ruff": {0},
    "torchfix": {0, 1},  # 1 also when a file does not parse
    "fixit": {0, 1},  # 1 = findings
}


def _tail(text: str, limit: int) -> str:
    text = " ".join((text or "").strip().split())
    return text if len(text) <= limit else "..." + text[-limit:]


def run_once(cmd: List[str], cwd: Path, timeout: float, env: Dict[str, str]) -> Dict[str, object]:
    """Wall time and CPU time (user+sys of the whole process tree that was waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    except OSError as exc:
        return {"error": f"cannot start: {exc}"}
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        return {"error": f"timed out after {timeout:.0f} s", "wall": time.perf_counter() - start}
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out.seek(0)
    err.seek(0)
    stdout = out.read().decode("utf-8", "replace")
    stderr = err.read().decode("utf-8", "replace")
    return {"rc": rc, "wall": wall, "cpu": cpu, "stdout_tail": stdout[-2000:], "stderr_tail": stderr[-2000:],
            "stdout_lines": stdout.count("\n")}


def _order(tools: List[str], round_index: int) -> List[str]:
    """Rotate the order each round; dslint-warm stays glued to dslint-cold."""
    groups: List[List[str]] = []
    for tool in tools:
        if tool == "dslint-warm" and "dslint-cold" in tools:
            continue
        if tool == "dslint-cold" and "dslint-warm" in tools:
            groups.append(["dslint-cold", "dslint-warm"])
        else:
            groups.append([tool])
    shift = round_index % len(groups) if groups else 0
    groups = groups[shift:] + groups[:shift]
    return [t for g in groups for t in g]


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark dslint check against TorchFix, Fixit, ruff and a bare libcst parse.")
    parser.add_argument("--corpus", type=Path, help="folder to check (default: a copy of torch's utils/, nn/, optim/)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per tool (median reported) [3]")
    parser.add_argument("--slow-rounds", type=int, default=None, help="rounds for TorchFix and Fixit [= --rounds]")
    parser.add_argument("--tools", default=",".join(ALL_TOOLS), help=f"comma-separated subset of {','.join(ALL_TOOLS)}")
    parser.add_argument("--jobs", type=int, default=None, help="pass --jobs to dslint [its default: CPU count]")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="the anchors' venv [bench/.venv-anchors]")
    parser.add_argument("--no-install", action="store_true", help="do not create or install the anchors' venv")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before one tool run is killed [3600]")
    parser.add_argument("--output-format", choices=["text", "json"], default="text")
    parser.add_argument("-o", "--output", type=Path, help="also write the JSON results to this file")
    args = parser.parse_args(argv)

    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = [t for t in tools if t not in ALL_TOOLS]
    if unknown:
        parser.error(f"unknown tool(s): {', '.join(unknown)}")
    if "dslint-warm" in tools and "dslint-cold" not in tools:
        tools.insert(tools.index("dslint-warm"), "dslint-cold")
    slow_rounds = args.slow_rounds if args.slow_rounds is not None else args.rounds

    corpus = (args.corpus.resolve() if args.corpus else default_corpus())
    if not corpus.is_dir():
        parser.error(f"--corpus {corpus}: not a folder")
    counts = count_corpus(corpus)
    log(f"corpus {corpus}: {counts['files']} files, {counts['lines']} lines")

    errors: Dict[str, str] = {}
    if any(t in ANCHOR_TOOLS for t in tools):
        errors.update(ensure_anchors(args.venv.resolve(), install=not args.no_install))
    one_dir = Path(tempfile.mkdtemp(prefix="dslint-bench-onefile-"))
    one_file = one_dir / "one.py"
    one_file.write_text(ONE_FILE)
    commands = build_commands(args.venv.resolve(), args.jobs, one_file)

    env = dict(os.environ)
    # PYTHONDONTWRITEBYTECODE (set on some CI machines) would make every dslint run
    # compile its own modules again (an editable install has no .pyc files, unlike
    # the pip-installed anchors): the tools run as on a user's machine, with .pyc files.
    for var in ("DSLINT_CACHE_DIR", "DSLINT_OUTPUT_FORMAT", "DSLINT_NO_CACHE", "RUFF_CACHE_DIR", "PYTHONDONTWRITEBYTECODE"):
        env.pop(var, None)
    env["NO_COLOR"] = "1"
    if any(t.startswith("dslint") for t in tools):
        # untimed: writes dslint's .pyc files and its rules' manifest, as any first run does
        run_once(dslint_command() + ["check", "--no-cache", "--exit-zero", str(one_file)], one_dir, args.timeout, env)

    samples: Dict[str, List[dict]] = {t: [] for t in tools}
    load_before = os.getloadavg()
    cache_root = Path(tempfile.mkdtemp(prefix="dslint-bench-cache-"))
    try:
        for r in range(max(args.rounds, slow_rounds)):
            cache = cache_root / f"round-{r}"
            for tool in _order(tools, r):
                wanted = slow_rounds if tool in SLOW_TOOLS else args.rounds
                if r >= wanted or tool in errors:
                    continue
                cmd = [c.replace("{cache}", str(cache)) for c in commands[tool]]
                log(f"round {r + 1}: {tool}")
                sample = run_once(cmd, corpus, args.timeout, env)
                if "error" not in sample and sample["rc"] not in OK_RC[tool]:
                    sample["error"] = f"exit {sample['rc']}: " + _tail(sample["stderr_tail"] or sample["stdout_tail"], 300)
                samples[tool].append(sample)
                if "error" in sample:
                    log(f"  {tool} failed: {sample['error']}")
                else:
                    log(f"  {sample['wall']:.2f} s wall, {sample['cpu']:.2f} s CPU")
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
        shutil.rmtree(one_dir, ignore_errors=True)
    load_after = os.getloadavg()

    results = summarize(tools, samples, errors, counts)
    report = {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in load_after],
        },
        "corpus": {"path": str(corpus), **counts, "commits": corpus_commits(corpus)},
        "rounds": args.rounds,
        "slow_rounds": slow_rounds,
        "versions": tool_versions(args.venv.resolve()),
        "commands": {t: commands[t] for t in tools},
        "tools": results,
        "ratios": ratios(results),
    }
    if args.output:
        args.output.write_text(json.dumps(report, indent=2) + "\n")
    if args.output_format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0


def summarize(tools, samples, errors, counts) -> Dict[str, dict]:
    out: Dict[str, dict] = {}
    for tool in tools:
        good = [s for s in samples[tool] if "error" not in s]
        bad = [s for s in samples[tool] if "error" in s]
        entry: Dict[str, object] = {"runs": len(samples[tool])}
        if tool in errors:
            entry["error"] = errors[tool]
        elif bad and not good:
            entry["error"] = bad[0]["error"]
        elif bad:
            entry["note"] = f"{len(bad)} of {len(samples[tool])} runs failed: {bad[0]['error']}"
        if good:
            walls = [s["wall"] for s in good]
            cpus = [s["cpu"] for s in good]
            wall = statistics.median(walls)
            whole_corpus = tool not in NOT_WHOLE_CORPUS
            entry.update(
                {
                    "wall_s": round(wall, 4),
                    "cpu_s": round(statistics.median(cpus), 4),
                    "walls": [round(w, 4) for w in walls],
                    "cpus": [round(c, 4) for c in cpus],
                    "files_per_s": round(counts["files"] / wall, 1) if wall and whole_corpus else None,
                    "lines_per_s": round(counts["lines"] / wall) if wall and whole_corpus else None,
                }
            )
        out[tool] = entry
    return out


def ratios(results: Dict[str, dict]) -> List[dict]:
    out = []
    for name, num, den, target, ok in RATIOS:
        a = results.get(num, {}).get("wall_s")
        b = results.get(den, {}).get("wall_s")
        if a is None or b is None or not b:
            missing = [t for t, v in ((num, a), (den, b)) if v is None]
            if any(t not in results for t in missing):
                continue
            out.append({"name": name, "value": None, "target": target, "ok": None,
                        "error": "no time for " + ", ".join(missing)})
            continue
        value = a / b
        ca = results[num].get("cpu_s")
        cb = results[den].get("cpu_s")
        cpu = round(ca / cb, 3) if ca and cb else None
        out.append({"name": name, "value": round(value, 3), "cpu_value": cpu, "target": target,
                    "ok": ok(value) if ok else None})
    return out


def render(report: dict) -> str:
    corpus = report["corpus"]
    lines = [
        f"corpus: {corpus['path']}",
        f"        {corpus['files']} files, {corpus['lines']} lines; rounds: {report['rounds']} "
        f"(TorchFix/Fixit: {report['slow_rounds']}); {report['machine']['cpus']} CPUs; "
        f"load {report['machine']['loadavg_before'][0]} -> {report['machine']['loadavg_after'][0]}",
        "versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()),
        *(f"commit: {name} {commit}" for name, commit in corpus.get("commits", {}).items()),
        "",
        f"{'tool':<20} {'wall s (median)':>15} {'CPU s':>9} {'files/s':>10} {'lines/s':>11}  runs (wall s)",
    ]
    for tool, entry in report["tools"].items():
        if "wall_s" in entry:
            runs = ", ".join(f"{w:.2f}" for w in entry["walls"])
            files_per_s = f"{entry['files_per_s']:>10.1f}" if entry["files_per_s"] is not None else f"{'-':>10}"
            lines_per_s = f"{entry['lines_per_s']:>11,}" if entry["lines_per_s"] is not None else f"{'-':>11}"
            lines.append(f"{tool:<20} {entry['wall_s']:>15.2f} {entry['cpu_s']:>9.2f} {files_per_s} {lines_per_s}  {runs}")
            if "note" in entry:
                lines.append(f"{'':<20} note: {entry['note']}")
        else:
            lines.append(f"{tool:<20} ERROR: {entry.get('error', 'no runs')}")
    lines += ["", f"{'ratio (wall; CPU-time ratio in brackets)':<46} {'value':>9} {'(CPU)':>9}  {'target':<24} ok"]
    for ratio in report["ratios"]:
        if ratio["value"] is None:
            lines.append(f"{ratio['name']:<46} {'-':>9} {'':>9}  {ratio['target']:<24} ({ratio['error']})")
        else:
            ok = {True: "yes", False: "NO", None: ""}[ratio["ok"]]
            cpu = f"({ratio['cpu_value']:.3f})" if ratio.get("cpu_value") is not None else ""
            lines.append(f"{ratio['name']:<46} {ratio['value']:>9.3f} {cpu:>9}  {ratio['target']:<24} {ok}")
    one = report["tools"].get("dslint-onefile", {})
    if "wall_s" in one:
        lines.append(
            f"{'dslint check on one small file':<46} {one['wall_s'] * 1000:>7.0f}ms {one['cpu_s'] * 1000:>7.0f}ms  "
            f"{'<= 150 ms':<24} {'yes' if one['wall_s'] <= 0.15 else 'NO'} (wall; CPU {'yes' if one['cpu_s'] <= 0.15 else 'NO'})"
        )
    floor = report["tools"].get("import-libcst", {})
    if "wall_s" in floor:
        name = 'python -c "import libcst" (its floor)'
        lines.append(f"{name:<46} {floor['wall_s'] * 1000:>7.0f}ms {floor['cpu_s'] * 1000:>7.0f}ms  (info)")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
