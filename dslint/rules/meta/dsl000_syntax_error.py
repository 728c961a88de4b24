"""DSL000: the file does not parse (reported by the engine)."""

from __future__ import annotations

from dslint.rules.base import Rule


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

    Two exceptions are analysed anyway. A file that Python 3 rejects only for
    mixing tabs and spaces in its indentation (`TabError`), as code written for
    Python 2 often does. Python 2 reads a tab in the indentation as a move to
    the next multiple of 8 columns; the file is checked as Python 2 read it,
    and its findings are reported beside the DSL000, on the same rows, without
    fixes (their columns are those of the expanded indentation). And a file
    that Python 3.7+ rejects only for `async` as a keyword argument's name
    (`x.cuda(async=True)`, torch 0.3's spelling of `non_blocking`): it is
    checked as Python 3.6 read it, its findings beside the DSL000, without fixes.

    ## When it does not fire
    A mix of tabs and spaces that Python 3 accepts (it means the same at every
    tab width) but dslint's parser, libcst, refuses: the file is analysed with
    its indentation's tabs expanded as CPython reads them, and its findings come
    without fixes.
    """

    code = "DSL000"
    name = "syntax-error"
    summary = "The file does not parse"
    help = "Fix the syntax error"
    engine_rule = True
