"""DSL001: a ``# noqa`` code that suppresses nothing (reported by the engine)."""

from __future__ import annotations

from dslint.rules.base import WARNING, Rule


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
