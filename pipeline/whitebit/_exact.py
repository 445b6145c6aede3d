"""Exact numbers: a JSON number with a fraction never passes through a float.

Most answers carry their amounts as decimal strings and are parsed with orjson, the fastest. A few
carry JSON numbers with a fraction: times to the microsecond (``1593342324.613711``, a fill's, an
order's, a position's) and the collateral balance (up to 18 decimals). A float holds neither
exactly (a time of today has 16 significant digits, a float 15 to 17), so those answers are parsed
with msgspec's parser, each such number read as a `decimal.Decimal` of the very digits sent
(``float_hook=Decimal``), which orjson cannot do; at twice the standard library's speed with
``parse_float=Decimal`` (a fills page, 500 records, in 0.43 ms against 0.86 ms). An integer stays an
`int`, however large.

`EXACT` names the operations parsed so (`spec.Operation.exact_numbers`): those whose records hold
a `spec.FieldType.TIMESTAMP_FRACTIONAL` field, at any depth, and those whose answer is
`spec.KeyedNumbers`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Final

import msgspec
import orjson

from pipeline import spec

#: Operations whose answers are parsed with every fractional number a `Decimal`.
EXACT: Final = frozenset(op.name for op in spec.OPERATIONS if op.exact_numbers)


class NotExactJSON(ValueError):
    """What the exact parser refused, where orjson took the answer (a nesting deeper than it
    allows, say): the answer cannot be read exactly."""


#: Every number with a fraction or an exponent a `Decimal` of its digits; NaN and Infinity are
#: no JSON, refused as orjson refuses them.
_EXACT: Final = msgspec.json.Decoder(float_hook=Decimal)


def loads_exact(content: bytes) -> Any:
    """The answer's JSON with every number that has a fraction (or an exponent) a `Decimal`.

    Raises `orjson.JSONDecodeError` where orjson would (so an answer is judged alike whichever
    parser reads it: cut short, invalid UTF-8, not JSON), and `NotExactJSON` in the rare case
    where only the exact parser refuses it."""
    try:
        return _EXACT.decode(content)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as refused:
        orjson.loads(content)  # raises its own error for anything not JSON
        raise NotExactJSON(f"{type(refused).__name__}: {refused}") from None


def decimal_text(value: Any) -> orjson.Fragment:
    """For ``orjson.dumps(default=...)``: a `Decimal` as the JSON number of its own digits."""
    if isinstance(value, Decimal) and value.is_finite():
        return orjson.Fragment(str(value))
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
