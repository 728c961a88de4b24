import os
import sys

# ``python -m dslint`` puts the current directory first on sys.path, so a checked
# project's ``json.py`` or ``typing.py`` would be imported (run) in place of the
# standard library's. dslint itself is already imported by now; drop that entry
# (what ``python -P`` does on 3.11+) before importing anything else.
if sys.path and sys.path[0] in ("", os.curdir, os.getcwd()):
    del sys.path[0]

from dslint.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
