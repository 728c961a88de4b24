"""DSL0xx: what the engine itself reports about a file."""

from __future__ import annotations

from dslint.rules.base import ERROR, WARNING, Rule


class SyntaxErrorRule(Rule):
    """
    ## What it does
    Reports a file that does not parse as Python, at the position of the parse
    error. The run goes on with the other files.

    ## Why is this bad?
    dslint cannot check a file it cannot parse, and neither can Python run it.
    Files that cannot contain dataset code (see "Which files are parsed" in the
    README) are not parsed, so their syntax errors are not reported unless
    `--no-prefilter` is given.
    """

    code = "DSL000"
    name = "syntax-error"
    summary = "The file does not parse"
    help = "Fix the syntax error"
    engine_rule = True


class IoErrorRule(Rule):
    """
    ## What it does
    Reports a path that cannot be read as Python source: a missing file, a
    permission error, a symlink loop, a binary file, or bytes that do not decode
    in the file's declared encoding (PEP 263 cookies and BOMs are honoured).

    ## Why is this bad?
    The file is silently unchecked otherwise. The run goes on with the other
    files and exits 1.
    """

    code = "DSL002"
    name = "io-error"
    summary = "The file cannot be read or decoded"
    help = "Make the file readable UTF-8 (or declare its encoding), or exclude it"
    engine_rule = True


class UnusedNoqa(Rule):
    """
    ## What it does
    Reports a `# noqa: DSLxxx` code that suppresses nothing on its line: the
    finding was fixed, moved, or never existed. Codes of other tools
    (`# noqa: E501`) and bare `# noqa` comments are left alone, and codes of
    rules that are not selected are not judged.

    ## Why is this bad?
    A stale suppression hides the next real finding on that line.

    ## Example
    ```python
    loader = DataLoader(ds, shuffle=True)  # noqa: DSL501
    ```

    ## Use instead
    ```python
    loader = DataLoader(ds, shuffle=True)
    ```

    ## Fix safety
    The fix removes the stale code (or the whole comment when nothing else is
    left in it). It is safe: the code suppressed nothing.
    """

    code = "DSL001"
    name = "unused-noqa"
    level = WARNING
    summary = "A `# noqa` code that suppresses nothing"
    help = "Remove the unused code from the `# noqa` comment"
    engine_rule = True
    fix_availability = "always"


__all__ = ["SyntaxErrorRule", "IoErrorRule", "UnusedNoqa", "ERROR"]
