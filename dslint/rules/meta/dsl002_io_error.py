"""DSL002: the file cannot be read or decoded (reported by the engine)."""

from __future__ import annotations

from dslint.rules.base import Rule


class IoErrorRule(Rule):
    """
    ## What it does
    Reports a path that cannot be read as Python source: a missing file, a
    permission error, a symlink loop, a binary file, or bytes that do not decode
    in the file's declared encoding (PEP 263 cookies and BOMs are honoured).

    ## Why is this bad?
    The file is silently unchecked otherwise. The run goes on with the other
    files and exits 1.

    ## When it does not fire
    A macOS AppleDouble companion: a `._name.py` file that starts with the
    AppleDouble header (`00 05 16 07`). macOS writes one next to each file it
    copies to a volume without resource forks (a zip, a tar, a network share),
    and it holds that file's metadata, not code: it is skipped, like a file that
    is not Python.

    A symlink found walking a directory whose target does not exist: a link into
    a submodule that is not checked out, or to a path on the author's machine.
    There is nothing to check and nothing in the file to fix, so it is skipped
    with a warning on stderr (`dslint: warning: skipped data/x.py: a symlink whose
    target does not exist`) and the exit code is not changed. Named on the command
    line, it is a missing file like any other and is reported. A symlink loop is
    reported either way.

    A PEP 263 cookie naming a codec this Python does not have, on a file that is
    Python source read as UTF-8 (`# -*- coding: future_fstrings -*-`). Packages
    such as `future-fstrings` register these codecs when the interpreter starts,
    to rewrite UTF-8 source for older interpreters; the file is checked as UTF-8,
    the way ruff reads every file. When the file is not Python read that way (a
    codec for a template language), it is reported.
    """

    code = "DSL002"
    name = "io-error"
    summary = "The file cannot be read or decoded"
    help = "Make the file readable UTF-8 (or declare its encoding), or exclude it"
    engine_rule = True
