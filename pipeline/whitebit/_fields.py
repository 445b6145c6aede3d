"""The records of an answer, compiled from the field tables of `spec`: the words `_shapes` checks
an answer in.

A record is data: the fast pass (`Shape.ok`, `_Record.all_ok`) says whether every record is
exactly the spec's fields of the spec's JSON types; a record that is not passes as received (the
warehouse judges it), and the survey (`_Record.unknown_in`) only notes the fields the spec does
not name, at their path. An array of records (`_records`) is an envelope's: not being an array
breaks the contract (`_Mismatch`).

A time with a fraction (`spec.FieldType.TIMESTAMP_FRACTIONAL`) is a `Decimal`: its answer was
parsed exactly (`_exact`). A field the spec marks ``optional`` may be absent (a spot order has no
position side); an array of objects (a conversion's path) is checked item by item. A field the
documentation names two ways (`spec.Field.alias`) is known under either name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from itertools import chain
from operator import itemgetter
from typing import Any, Final

import orjson

from pipeline import spec

from ._errors import (
    excerpt,
)

#: Fields the spec does not name, seen in answers: path -> one example value as JSON text.
Unknown = dict[str, str]

#: Python types of the spec's JSON types; `type(value) is kind` keeps booleans out of integers.
_SCALARS: Final[Mapping[spec.FieldType, type]] = {
    spec.FieldType.STRING: str,
    spec.FieldType.DECIMAL: str,
    spec.FieldType.TIMESTAMP_STRING: str,
    spec.FieldType.INTEGER: int,
    spec.FieldType.TIMESTAMP: int,
    # Parsed exactly (`_exact.EXACT`): a number with a fraction is a Decimal, never a float.
    spec.FieldType.TIMESTAMP_FRACTIONAL: Decimal,
    spec.FieldType.BOOLEAN: bool,
}
_JSON_NAMES: Final[Mapping[type, str]] = {
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    list: "an array",
    dict: "an object",
    Decimal: "a number",
    float: "a number",
}


class _Mismatch(Exception):
    def __init__(self, path: str, reason: str, value: Any) -> None:
        super().__init__(reason)
        self.path, self.reason, self.value = path, reason, value


@dataclass(frozen=True, slots=True)
class Shape:
    """A JSON value's expected shape: ``ok`` answers fast and strictly; ``survey`` raises
    `_Mismatch` where the contract breaks, and notes unknown fields."""

    ok: Callable[[Any], bool]
    survey: Callable[[Any, str, Unknown], None]
    #: A plain scalar's exact Python type, so that an object checks it inline, without a call.
    kind: type | None = None
    #: For an object of plain scalars: ``ok`` of a whole list of them at once, at C speed.
    all_ok: Callable[[list[Any]], bool] | None = None


def _note(unknown: Unknown, path: str, value: Any) -> None:
    if path not in unknown:
        unknown[path] = _quote(value)


def _record_level(value: Any, path: str, unknown: Unknown) -> None:
    """A record's field value is the warehouse's to judge: nothing to survey."""


def _scalar(kind: type, survey: bool = False) -> Shape:
    """A value of one JSON type; ``survey`` makes another type break the contract (an
    envelope's field), else it is for the warehouse (a record's field)."""

    def ok(value: Any) -> bool:
        return type(value) is kind

    def mismatch(value: Any, path: str, unknown: Unknown) -> None:
        if type(value) is not kind:
            raise _Mismatch(path, f"expected {_JSON_NAMES[kind]}, got {_json_type(value)}", value)

    return Shape(ok, mismatch if survey else _record_level, kind)


def _nullable(inner: Shape) -> Shape:
    def ok(value: Any) -> bool:
        return value is None or inner.ok(value)

    return Shape(ok, _record_level)


def _strings() -> Shape:
    def ok(value: Any) -> bool:
        return type(value) is list and all(type(item) is str for item in value)

    return Shape(ok, _record_level)


def _exact(
    fields: Mapping[str, Shape], optional: frozenset[str] = frozenset()
) -> tuple[Callable[[Any], bool], Callable[..., bool] | None]:
    """``ok`` of an object with exactly these fields (those ``optional`` may be absent), and
    ``all_ok`` when they are all scalars and none is optional."""
    names = frozenset(fields)
    required = names - optional
    # Plain scalars are checked inline; only nested values cost a call.
    scalars = tuple((n, s.kind) for n, s in fields.items() if s.kind and n in required)
    nested = tuple((n, s.ok) for n, s in fields.items() if not s.kind and n in required)
    maybe = tuple((n, s.ok) for n, s in fields.items() if n in optional)

    def ok(value: Any) -> bool:
        if type(value) is not dict or value.keys() != names:
            return False
        for name, kind in scalars:
            if type(value[name]) is not kind:
                return False
        return all(check(value[name]) for name, check in nested)

    def ok_without(value: Any) -> bool:
        """``ok``, an optional field absent or of its type (a spot order has no position side)."""
        if type(value) is not dict:
            return False
        keys = value.keys()
        if not (keys >= required and keys <= names):
            return False
        for name, kind in scalars:
            if type(value[name]) is not kind:
                return False
        return all(check(value[name]) for name, check in nested) and all(
            check(value[name]) for name, check in maybe if name in value
        )

    if optional:
        return ok_without, None
    return ok, (None if nested or not scalars else _all_ok(scalars))


def _all_ok(scalars: tuple[tuple[str, type], ...]) -> Callable[[list[Any]], bool]:
    """Objects with exactly these scalar fields, checked a whole list at a time: every item a
    dict, of as many fields as named, holding every name (so no other), each value of its
    field's type. `map` and `itemgetter` do the loops in C, so a whole page costs less than
    the record-by-record check."""
    count = len(scalars)
    by_kind = []  # (the getter of every field of one type, that type, how many fields)
    for kind in {kind for _, kind in scalars}:
        names = tuple(name for name, k in scalars if k is kind)
        by_kind.append((itemgetter(*names), kind, len(names)))

    def all_ok(items: list[Any]) -> bool:
        if not items:
            return True
        if set(map(type, items)) != {dict} or set(map(len, items)) != {count}:
            return False
        try:
            for get, kind, many in by_kind:
                values = chain.from_iterable(map(get, items)) if many > 1 else map(get, items)
                if set(map(type, values)) != {kind}:
                    return False
        except KeyError:
            return False
        return True

    return all_ok


@dataclass(frozen=True, slots=True)
class _Record:
    """A record: strict ``ok`` (and ``all_ok``) for the fast pass; `unknown_in` for the survey,
    which notes the fields the spec does not name and leaves every value to the warehouse."""

    ok: Callable[[Any], bool]
    all_ok: Callable[[list[Any]], bool]
    names: frozenset[str]
    #: Fields that are objects of their own (an investment's plan), or arrays of them (a
    #: conversion's path: ``listed``), surveyed in turn.
    nested: tuple[tuple[str, _Record, bool], ...]

    def unknown_in(self, records: list[Any], path: str, unknown: Unknown) -> None:
        """Note the unknown fields of these records (those that are objects), at ``path``."""
        objects = [r for r in records if type(r) is dict]
        if not objects:
            return
        for name in sorted(set().union(*objects) - self.names):
            _note(unknown, _join(path, name), next(o[name] for o in objects if name in o))
        for name, record, listed in self.nested:
            values = [o.get(name) for o in objects]
            if listed:
                items = [item for value in values if type(value) is list for item in value]
                record.unknown_in(items, _join(path, name) + "[]", unknown)
            else:
                record.unknown_in(values, _join(path, name), unknown)


_OBJECTS: Final = (spec.FieldType.OBJECT, spec.FieldType.OBJECT_LIST)


def _record(fields: Iterable[spec.Field]) -> _Record:
    fields = tuple(fields)
    shapes = {f.name: _field(f) for f in fields}
    ok, all_ok = _exact(shapes, frozenset(f.name for f in fields if f.optional))
    nested = tuple(
        (f.name, _record(f.fields), f.type is spec.FieldType.OBJECT_LIST)
        for f in fields
        if f.type in _OBJECTS
    )
    return _Record(
        ok,
        all_ok or (lambda items: all(map(ok, items))),
        # A field under its other name (`spec.Field.alias`) is no unknown field; its record
        # fails the fast pass, and passes as received.
        frozenset(shapes) | {f.alias for f in fields if f.alias},
        nested,
    )


def _field(field: spec.Field) -> Shape:
    shape: Shape
    if field.type in _SCALARS:
        shape = _scalar(_SCALARS[field.type])
    elif field.type is spec.FieldType.STRING_LIST:
        shape = _strings()
    elif field.type is spec.FieldType.OBJECT_LIST:
        shape = Shape(_records(_record(field.fields)).ok, _record_level)
    else:
        shape = Shape(_record(field.fields).ok, _record_level)
    return _nullable(shape) if field.nullable else shape


def _records(record: _Record) -> Shape:
    """An array of records; only its being an array is the envelope's."""
    all_ok = record.all_ok

    def ok(value: Any) -> bool:
        return type(value) is list and all_ok(value)

    def survey(value: Any, path: str, unknown: Unknown) -> None:
        if type(value) is not list:
            raise _Mismatch(path, f"expected an array, got {_json_type(value)}", value)
        record.unknown_in(value, f"{path}[]", unknown)

    return Shape(ok, survey)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _JSON_NAMES.get(type(value), "a number" if isinstance(value, float) else "a value")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _quote(value: Any) -> str:
    """A value as JSON, for a message: a number of an answer read exactly as the exchange wrote
    it (not as Python writes a `Decimal`)."""
    try:
        return excerpt(orjson.dumps(value, default=_exact_number))
    except TypeError:
        return excerpt(repr(value))


def _exact_number(value: Any) -> orjson.Fragment:
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))
    raise TypeError(type(value).__name__)
