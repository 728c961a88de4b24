"""Is a call a random draw (a new random value), as opposed to a reordering or a seeding?

``random.random()``, ``np.random.randint(...)``, ``torch.randint(...)`` make new values;
``random.shuffle(pool)``, ``np.random.permutation(n)`` and ``torch.randperm(n)`` only reorder
what exists (every worker still replays the same data), and ``seed``/``default_rng`` draw
nothing. ``method_draws`` answers for a method of a project class (any file) from the summaries:
whether it, or any project function it reaches, calls such a function.
"""

from __future__ import annotations

from typing import Optional

from dslint.semantics.modules import canonical

_PREFIXES = ("random.", "numpy.random.", "torch.rand", "torch.normal", "torch.bernoulli", "torch.multinomial", "torch.poisson")
#: random calls that draw no sample: they reorder what they are given, seed, or make a generator
_NO_DRAWS = frozenset({
    "random.shuffle", "numpy.random.shuffle", "numpy.random.permutation", "torch.randperm", "random.seed",
    "numpy.random.seed", "numpy.random.default_rng", "numpy.random.RandomState", "random.Random",
})
#: methods of generator objects that draw (``rng.integers``, ``self.random.choice``)
DRAW_METHODS = frozenset({
    "normal", "uniform", "integers", "standard_normal", "randint", "randn", "rand", "random", "gauss", "choice",
    "binomial", "poisson",
})


def is_random_draw(qualified: Optional[str]) -> bool:
    """``qualified`` names a function that draws a new random value."""
    return bool(qualified) and qualified.startswith(_PREFIXES) and qualified not in _NO_DRAWS


def method_draws(index, qualified: str, method: str, from_path: str) -> bool:
    """Calling ``method`` on an instance of the project class ``qualified`` draws a random value:
    the method (along the class's project bases) or a project function it reaches calls one."""
    located = index.locate(canonical(qualified), from_path)
    if located is None:
        return False
    for key in index.reachable(located, method):
        calls = (index.function_facts(key) or {}).get("calls", ())
        if any(kind == "func" and is_random_draw(target) for kind, target, _ in calls):
            return True
    return False
