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
    """

    code = "DSL002"
    name = "io-error"
    summary = "The file cannot be read or decoded"
    help = "Make the file readable UTF-8 (or declare its encoding), or exclude it"
    engine_rule = True
