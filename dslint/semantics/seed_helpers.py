"""What a call passes a project seeding helper, for asking the helper whether it seeds per rank.

A DDP script often seeds torch's global RNG through a helper of its own
(``seed_all(cfg.seed, accelerator=accelerator)``) that adds the rank to the seed
only for some of its parameters; ``rank_entries`` answers for the helper from its
summary, given the keywords and the number of positional arguments a call passes.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst


def passed_arguments(call: cst.Call) -> Optional[Tuple[List[str], int]]:
    """(keywords passed other than ``None``, number of positional arguments); None with ``*``/``**``."""
    if any(arg.star for arg in call.args):
        return None
    return ([a.keyword.value for a in call.args if a.keyword is not None and not (isinstance(a.value, cst.Name) and a.value.value == "None")],
            sum(1 for arg in call.args if arg.keyword is None))
