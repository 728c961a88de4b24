"""``Possible``: the values an expression can take, each with where it came from.

The result type of ``semantics/values.py`` (and of ``semantics/options.py``), in a
module of its own so that both can build one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from dslint.semantics.calls import UNKNOWN


@dataclass(frozen=True)
class Value:
    value: object
    #: where it comes from, for messages: "the default of `--workers`"
    origin: str


@dataclass(frozen=True)
class Possible:
    values: Tuple[Value, ...] = ()
    #: every value the expression can take is listed
    complete: bool = False

    @property
    def known(self):
        """The one value, when it is the only possibility; else UNKNOWN."""
        distinct = {_key(v.value) for v in self.values}
        if self.complete and len(distinct) == 1:
            return self.values[0].value
        return UNKNOWN

    def can_be(self, predicate) -> Optional[Value]:
        """The first possible value for which ``predicate`` holds, if any."""
        for value in self.values:
            try:
                if predicate(value.value):
                    return value
            except TypeError:
                continue
        return None

    def must_be(self, predicate) -> bool:
        return self.complete and bool(self.values) and all(holds(predicate, v.value) for v in self.values)

    def __or__(self, other: "Possible") -> "Possible":
        seen = {(_key(v.value), v.origin) for v in self.values}
        extra = tuple(v for v in other.values if (_key(v.value), v.origin) not in seen)
        return Possible(self.values + extra, self.complete and other.complete)


NOTHING = Possible((), False)


def _key(value):
    return (type(value).__name__, repr(value))


def is_zero(value) -> bool:
    """The integer 0 (not ``False``)."""
    return isinstance(value, int) and not isinstance(value, bool) and value == 0


def holds(predicate, value) -> bool:
    try:
        return bool(predicate(value))
    except TypeError:
        return False


def exactly(value, origin: str) -> Possible:
    return Possible((Value(value, origin),), True)


def either_dict(alternatives):
    """The entries of a dict that is one of ``alternatives`` (each ``({key: Possible}, closed)``,
    one per path) when all but one of them are empty (``{...} if cuda else {}``): the keys of
    that one, possible but not complete (on the other paths they are absent, and the callee's
    default applies); closed when every one is. None when two or more have entries: their keys
    come on different paths, and one flat dict would pair a key of one path with another's
    (``batch_sampler=`` on one branch, ``sampler=`` on the other)."""
    filled = [found for found, _ in alternatives if found]
    if len(filled) > 1:
        return None
    entries = {key: Possible(value.values, False) for key, value in (filled[0] if filled else {}).items()}
    return entries, all(closed for _, closed in alternatives)
