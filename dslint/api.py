"""The programmatic face of ``dslint check``: files in, findings and an exit code out."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

from dslint.cache import Cache, default_cache_dir
from dslint.config import Settings
from dslint.diagnostics import Diagnostic
from dslint.discovery import Discovery
from dslint.engine import CheckResult, Engine, FileInput


@dataclass
class CheckOptions:
    stdin_filename: Optional[str] = None
    use_cache: bool = True
    use_prefilter: bool = True
    jobs: Optional[int] = None


@dataclass
class Outcome:
    result: CheckResult
    diagnostics: List[Diagnostic] = field(default_factory=list)
    no_files: bool = False


def read_inputs(paths: Sequence[str], settings: Settings, options: CheckOptions) -> List[FileInput]:
    discovery = Discovery(settings)
    inputs: List[FileInput] = []
    file_paths = [p for p in paths if p != "-"]
    if "-" in paths:
        name = options.stdin_filename or "-"
        abspath = os.path.abspath(name) if name != "-" else os.path.abspath("<stdin>.py")
        if not (settings.force_exclude and name != "-" and discovery._any_parent_excluded(abspath, False)):
            inputs.append(FileInput(name, abspath, data=sys.stdin.buffer.read()))
    for candidate in discovery.collect(file_paths):
        if candidate.missing:
            inputs.append(FileInput(candidate.path, candidate.abspath, error=f"{candidate.path}: No such file or directory"))
            continue
        try:
            with open(candidate.abspath, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            if exc.errno == 40:  # ELOOP
                reason = "symlink loop"
            inputs.append(FileInput(candidate.path, candidate.abspath, error=f"cannot read {candidate.path}: {reason}"))
            continue
        inputs.append(FileInput(candidate.path, candidate.abspath, data=data))
    return inputs


def check(paths: Sequence[str], settings: Settings, options: Optional[CheckOptions] = None) -> Outcome:
    options = options or CheckOptions()
    inputs = read_inputs(paths, settings, options)
    cache = None
    if options.use_cache and inputs and "-" not in paths:
        cache = Cache(default_cache_dir(Path(settings.root), settings.cache_dir), settings.analysis_key())
    engine = Engine(settings, use_prefilter=options.use_prefilter, jobs=options.jobs, cache=cache)
    result = engine.check(inputs)
    return Outcome(result=result, diagnostics=list(result.diagnostics), no_files=not inputs)
