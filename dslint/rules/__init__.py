"""The rules: one rule a module, ``dslint/rules/<family>/dslNNN_<name>.py``.

``import_families()`` imports every module of every family package (found by
package discovery, ``pkgutil.walk_packages``), which registers each rule class
(``Rule.__init_subclass__``). Adding a rule is adding its module; nothing else
lists it. ``_common.py`` modules hold the helpers one family shares.

Importing the package itself imports no family (so that the rule API, and
``all_rules()`` answered from its manifest, need neither the families nor libcst);
``dslint.rules.base.all_rules()`` imports them when it must.
"""

import importlib
import pkgutil


def import_families() -> None:
    for module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        if module.name != f"{__name__}.base":
            importlib.import_module(module.name)
