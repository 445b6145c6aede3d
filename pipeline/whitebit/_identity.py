"""What tells a record of a time-window walk apart (`spec.TimeWindows.identity`), and a page's
records the window has not yielded yet.

Both run on every record of every page, so a page is taken whole where it can be: its keys made
by `operator.itemgetter` over the page and checked by their types at once, and a page whose keys
are all new (nearly every page: only pages read again bring records seen before) kept as it
came, with the set doing the work. Any other page goes record by record, as each record's key
is defined by `identity`.
"""

from __future__ import annotations

from collections.abc import Hashable
from decimal import Decimal
from itertools import chain
from operator import itemgetter
from typing import Any, Final

import orjson

from ._exact import decimal_text

#: The types an identity field's value may have for the record to be told by it.
_IDENTITY_TYPES: Final = frozenset({int, str, Decimal})


def identity(record: Any, fields: tuple[str, ...], owner: str | None) -> Hashable:
    """What tells a record apart: its identity field's value, or its identity fields' values
    (a tuple); for a record without usable ones (which the warehouse rejects), its owner and
    content, so it is yielded once, never dropped for another's."""
    if type(record) is dict:
        try:
            key = tuple(record[name] for name in fields)
        except KeyError:
            pass
        else:
            if all(type(value) in _IDENTITY_TYPES for value in key):
                return key[0] if len(key) == 1 else key
    content = orjson.dumps(record, default=decimal_text, option=orjson.OPT_SORT_KEYS)
    return ("", owner, content)


def identities(records: list[Any], fields: tuple[str, ...], owner: str | None) -> list[Hashable]:
    """`identity` of each record, in order."""
    if set(map(type, records)) == {dict}:
        try:
            values = list(map(itemgetter(*fields), records))
        except KeyError:
            pass
        else:
            # One field's getter gives its value, several a tuple: each is the key `identity` makes.
            one = len(fields) == 1
            if set(map(type, values if one else chain.from_iterable(values))) <= _IDENTITY_TYPES:
                return values
    return [identity(record, fields, owner) for record in records]


def unseen(
    records: list[Any], fields: tuple[str, ...], owner: str | None, seen: set[Hashable]
) -> list[Any]:
    """The records whose identity is not in ``seen`` (nor earlier in ``records``), in order;
    their identities are added to ``seen``."""
    keys = identities(records, fields, owner)
    fresh = set(keys)
    if len(fresh) == len(keys) and seen.isdisjoint(fresh):
        seen |= fresh
        return records
    new = []
    for key, record in zip(keys, records, strict=True):
        if key not in seen:
            seen.add(key)
            new.append(record)
    return new
