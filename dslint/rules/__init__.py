"""Every rule family lives in a module of this package; ``import_families()``
imports them all, which registers every rule (``Rule.__init_subclass__``).
Adding a rule is writing its class in a family module (or a new module here).

Importing the package itself imports no family (so that the rule API, and
``all_rules()`` answered from its manifest, need neither the families nor libcst);
``dslint.rules.base.all_rules()`` imports them when it must.
"""

import importlib
import pkgutil


def import_families() -> None:
    for module in pkgutil.iter_modules(__path__):
        if module.name != "base":
            importlib.import_module(f"{__name__}.{module.name}")
