"""Raw WhiteBIT API records -> typed Arrow tables in the shapes of `warehouse.schemas`, exactly.

`normalize` takes a history's answer, the parsed JSON exactly as the API returned it, and gives
back its table's `Batch`: the typed rows, the rejected records (raw JSON and reason) and the counts,
so that ``received == normalized + rejected + duplicates`` always holds. Nothing is dropped
silently, rounded, truncated or coerced. Which field goes through which rule into which column is
the history's declaration (`pipeline.spec`).

Rules (the tests pin each one):

Decimals -> ``decimal128(38, 18)``
    A JSON string matching ``-?digits[.digits]``. Leading zeros of the integer part and trailing
    zeros beyond the 18th fraction digit are accepted, because the value is still exact. ``-0`` is
    zero. Rejected, each with its own reason: another JSON type (a JSON number is never coerced:
    it may already have been rounded by a float), null or missing, not a decimal number (empty,
    whitespace, ``+1``, ``.5``, ``5.``, ``1e5``, ``NaN``, ``Infinity``, ``1,000``), more than 20
    integer digits (would overflow), more than 18 significant fraction digits (would round).

Unix timestamps -> ``timestamp("us", "UTC")``
    Seconds, as the API contract says: a JSON integer, or a string of ASCII digits where the
    contract carries the time as a string. A value at or above `MILLISECONDS_FROM` (1e11: as
    seconds that is the year 5138, as milliseconds 1973) is read as milliseconds. Rejected:
    another JSON type (floats and booleans included), a string that is not digits, a negative
    value, a time before `EARLIEST` (2009-01-01, before any exchange existed), and a time more
    than `FUTURE_TOLERANCE` (one day) after ``extracted_at``; fields that may lie in the future
    (an investment's payment time, a link's expiry) are instead bounded by `LATEST_SCHEDULED`
    (2100-01-01).

Keys
    A record whose key equals another record's key in the same batch: when the two are the same
    JSON value (compared with sorted keys) the copy is counted in ``duplicates`` and one row is
    kept; when they differ, every record of that key is rejected, since nothing tells which one is
    right.

The work goes in three steps, a module each:

- `_intake`: the JSON -> the records that go on to field checks (anything but an object is
  rejected there), each field read into one Arrow array, with a reason wherever a value has
  another JSON type or is missing;
- `_convert`: each field -> its typed column and the reasons of the values that break a rule;
- `_assemble`: the columns -> the valid rows, duplicate keys resolved, and the ``_rejects`` rows.

`_tables` reads a declaration: which field of the record goes through which converter into
which column.
Everything is vectorized with `pyarrow.compute`. Intake reads at C speed wherever the values
have their JSON types (nearly always): a record's string fields in one pass, an exact number's
text at once, one list per other field; where a value has another type, that field is read
record by record, each value checked in Python, for its reason. Both ways give the same fields,
so the same table and the same rejects (the tests hold them side by side).
"""

from warehouse.normalize._assemble import Batch, Seen, has_equal_keys, has_equal_neighbours
from warehouse.normalize._convert import (
    EARLIEST,
    FRACTION_DIGITS,
    FUTURE_TOLERANCE,
    INTEGER_DIGITS,
    LATEST_SCHEDULED,
    MILLISECONDS_FROM,
)
from warehouse.normalize._tables import (
    OWNER_MAX_LENGTH,
    nested,
    normalize,
    parse_decimals,
    records_received,
)

__all__ = [
    "EARLIEST",
    "FRACTION_DIGITS",
    "FUTURE_TOLERANCE",
    "INTEGER_DIGITS",
    "LATEST_SCHEDULED",
    "MILLISECONDS_FROM",
    "OWNER_MAX_LENGTH",
    "Batch",
    "Seen",
    "has_equal_keys",
    "has_equal_neighbours",
    "nested",
    "normalize",
    "parse_decimals",
    "records_received",
]
