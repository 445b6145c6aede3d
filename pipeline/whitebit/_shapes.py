"""The shape of each operation's successful answer, compiled from the field tables of `spec`.

An answer has two levels, checked differently:

- its envelope (the page's ``offset``, ``limit`` and ``records``, a watcher-link list's ``data``,
  a balance answer being an object keyed by ticker, any answer being an object at all) is what a
  walk relies on: anything else there is a `ContractError`;
- its records (a funding entry, an investment, a balance, a link, the hedge-mode object) are data:
  a field missing, null or of another JSON type, or a record that is not an object, passes as
  received, and the warehouse rejects that record with its reason, the rest of the page loading.

A field the spec does not name, in a record or in an envelope, is tolerated (exchanges add
fields without notice) and noted in ``unknown``: its path (``records[].newField``,
``BTC.newField``, ``*[].newField`` in records grouped by market, ``path[].newField`` in an array
of objects, ``newField``) and one example value as JSON text. Values are returned exactly as sent,
unknown fields included: decimals stay text, numbers with a fraction are `Decimal` (`_exact`),
and the warehouse reads only its own fields. The words records are checked in are `_fields`'.

Hand-compiled rather than pydantic-core, because this check runs on every page of every walk and
orjson plus these checks costs less CPU than pydantic-core's one-pass ``validate_json``. A fast,
strict yes/no pass (exactly the spec's fields and types) runs first; only an answer that fails it
is surveyed again, record by record, for what breaks the contract and what is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from itertools import chain
from typing import Any, Final

from pipeline import spec

from ._fields import (
    Shape,
    Unknown,
    _exact,
    _join,
    _json_type,
    _Mismatch,
    _note,
    _quote,
    _Record,
    _record,
    _records,
    _scalar,
)

__all__ = ["SHAPES", "Shape", "Unknown", "_Mismatch", "_quote"]


# --- Envelopes: what a walk relies on ----------------------------------------------------------


def _envelope(fields: Mapping[str, Shape]) -> Shape:
    """A JSON object holding these fields (others are unknown, and tolerated)."""
    ok, _ = _exact(fields)
    names = frozenset(fields)

    def survey(value: Any, path: str, unknown: Unknown) -> None:
        if type(value) is not dict:
            raise _Mismatch(path, f"expected an object, got {_json_type(value)}", value)
        for name, shape in fields.items():
            if name not in value:
                raise _Mismatch(_join(path, name), "a field the spec requires is missing", value)
            shape.survey(value[name], _join(path, name), unknown)
        for name in sorted(value.keys() - names):
            _note(unknown, _join(path, name), value[name])

    return Shape(ok, survey)


def _single(record: _Record) -> Shape:
    """An answer that is one record (hedge mode): it must be an object; its fields are data."""

    def survey(value: Any, path: str, unknown: Unknown) -> None:
        if type(value) is not dict:
            raise _Mismatch(path, f"expected an object, got {_json_type(value)}", value)
        record.unknown_in([value], path, unknown)

    return Shape(record.ok, survey)


def _keyed(record: _Record) -> Shape:
    """An object keyed by free names (a ticker), each value a record. An unknown field is noted
    once, under the first key whose record has it (``BTC.newField``)."""

    def ok(value: Any) -> bool:
        return type(value) is dict and all(map(record.ok, value.values()))

    def survey(value: Any, path: str, unknown: Unknown) -> None:
        if type(value) is not dict:
            raise _Mismatch(path, f"expected an object, got {_json_type(value)}", value)
        objects = {key: v for key, v in value.items() if type(v) is dict}
        for name in sorted(set().union(*objects.values()) - record.names):
            key = next(key for key, v in objects.items() if name in v)
            _note(unknown, _join(path, f"{key}.{name}"), objects[key][name])

    return Shape(ok, survey)


def _pong() -> Shape:
    """Ping's answer: a JSON array holding the string "pong" (section 4.8); more items are
    tolerated, as more fields are elsewhere."""

    def ok(value: Any) -> bool:
        return value == ["pong"] and type(value) is list and type(value[0]) is str

    def survey(value: Any, path: str, unknown: Unknown) -> None:
        if type(value) is not list or not any(v == "pong" and type(v) is str for v in value):
            raise _Mismatch(path, 'expected an array holding "pong"', value)

    return Shape(ok, survey)


def _grouped(record: _Record) -> Shape:
    """Records grouped by market (executed and order history): an object whose every value is
    an array of records, or a plain array of them (a request naming a market); nothing is ``{}``
    or ``[]``. Each group being an array is the envelope's; the records are data. An unknown
    field is noted once, as ``*[].newField`` whichever market's records have it."""
    array = _records(record)
    all_ok = record.all_ok

    def ok(value: Any) -> bool:
        if type(value) is list:
            return all_ok(value)
        # The page's records checked at once, not market by market: a page holds dozens.
        groups = value.values() if type(value) is dict else None
        return groups is not None and set(map(type, groups)) <= {list} and all_ok(_flat(groups))

    def survey(value: Any, path: str, unknown: Unknown) -> None:
        if type(value) is list:
            array.survey(value, path, unknown)
            return
        if type(value) is not dict:
            why = f"expected an object of arrays by market, got {_json_type(value)}"
            raise _Mismatch(path, why, value)
        for market, group in value.items():
            if type(group) is not list:
                why = f"expected an array of records, got {_json_type(group)}"
                raise _Mismatch(_join(path, market), why, group)
        record.unknown_in(list(chain.from_iterable(value.values())), _join(path, "*[]"), unknown)

    return Shape(ok, survey)


def _flat(groups: Iterable[list[Any]]) -> list[Any]:
    return list(chain.from_iterable(groups))


def _keyed_numbers() -> Shape:
    """An object keyed by ticker whose values are JSON numbers (the collateral balance), read
    exactly: an `int`, or a `Decimal` of the digits sent. The object is the envelope; a value of
    another type is data, passed as received."""
    numbers = {int, Decimal}

    def ok(value: Any) -> bool:
        return type(value) is dict and set(map(type, value.values())) <= numbers

    def survey(value: Any, path: str, unknown: Unknown) -> None:
        if type(value) is not dict:
            raise _Mismatch(path, f"expected an object, got {_json_type(value)}", value)

    return Shape(ok, survey)


def _wrapped(fields: tuple[spec.Field, ...]) -> Shape:
    """The public v1 envelope (the kline, section 4.22): ``success`` true and ``result`` an
    array of rows, each an array of ``fields`` in order. Rows are data; a value past the last
    field is unknown (``result[][7]``)."""
    kinds = tuple(_SCALAR_KINDS[f.type] for f in fields)
    width = len(kinds)

    def row_ok(row: Any) -> bool:
        return (
            type(row) is list
            and len(row) == width
            and all(type(v) is k for v, k in zip(row, kinds, strict=True))
        )

    def ok(value: Any) -> bool:
        return (
            type(value) is dict
            and value.get("success") is True
            and type(value.get("result")) is list
            and all(map(row_ok, value["result"]))
        )

    def survey(value: Any, path: str, unknown: Unknown) -> None:
        if type(value) is not dict:
            raise _Mismatch(path, f"expected an object, got {_json_type(value)}", value)
        if value.get("success") is not True:
            raise _Mismatch(_join(path, "success"), "expected true", value.get("success"))
        rows = value.get("result")
        if type(rows) is not list:
            raise _Mismatch(
                _join(path, "result"), f"expected an array, got {_json_type(rows)}", rows
            )
        for row in rows:
            if type(row) is list and len(row) > width:
                _note(unknown, _join(path, f"result[][{width}]"), row[width])
        for name in sorted(value.keys() - {"success", "message", "result"}):
            _note(unknown, _join(path, name), value[name])

    return Shape(ok, survey)


_SCALAR_KINDS: Final[Mapping[spec.FieldType, type]] = {
    spec.FieldType.TIMESTAMP: int,
    spec.FieldType.DECIMAL: str,
}
_OFFSET_OR_LIMIT = _scalar(int, survey=True)


def _page(record_fields: Iterable[spec.Field]) -> Shape:
    """A paged answer (sections 4.1, 4.4): ``offset``, ``limit`` and ``records``."""
    return _envelope(
        {
            "offset": _OFFSET_OR_LIMIT,
            "limit": _OFFSET_OR_LIMIT,
            "records": _records(_record(record_fields)),
        }
    )


def _shape(answer: spec.Answer) -> Shape:
    """The shape of one kind of answer (docs/api.md, section 4)."""
    if isinstance(answer, spec.Page):
        return _page(answer.records)
    if isinstance(answer, spec.Keyed):
        return _keyed(_record(answer.record))
    if isinstance(answer, spec.Single):
        return _single(_record(answer.record))
    if isinstance(answer, spec.Listed):
        return _envelope({answer.envelope: _records(_record(answer.records))})
    if isinstance(answer, spec.Pong):
        return _pong()
    if isinstance(answer, spec.PageEnvelope):
        page = {"offset": _OFFSET_OR_LIMIT, "limit": _OFFSET_OR_LIMIT}
        page[answer.under] = _records(_record(answer.records))
        return _envelope({**page, "total": _OFFSET_OR_LIMIT} if answer.total else page)
    if isinstance(answer, spec.Array):
        return _records(_record(answer.records))
    if isinstance(answer, spec.Grouped):
        return _grouped(_record(answer.records))
    if isinstance(answer, spec.KeyedNumbers):
        return _keyed_numbers()
    if isinstance(answer, spec.Wrapped):
        return _wrapped(answer.fields)
    return _envelope({})


#: The answer of each operation, by operation name; every operation of the spec has one.
SHAPES: Final[Mapping[str, Shape]] = {op.name: _shape(op.answer) for op in spec.OPERATIONS}
