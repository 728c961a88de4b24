"""Every rule family lives in a module of this package; importing the package
imports them all, which registers every rule (``Rule.__init_subclass__``).
Adding a rule is writing its class in a family module (or a new module here)."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")
