"""Reading an account's ledger back through the API, as the warehouse will: every history paged
to its end, every record checked against the spec's fields."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from pipeline import spec
from pipeline.simulator import Credentials, Simulator
from tests.support.signing import post


def ok(sim: Simulator, op: spec.Operation, params: dict[str, Any], creds: Credentials) -> Any:
    """The answer's JSON."""
    r = post(sim.url, op.path, params, creds)
    assert r.status_code == 200, (op.name, params, r.status_code, r.text[:300])
    return orjson.loads(r.content)


def records(page: Any) -> list[Any]:
    """A page's records, whatever its envelope: a plain array, ``records`` or ``data``, or an
    object of arrays keyed by market (each record then told its market)."""
    if isinstance(page, list):
        return page
    if "records" in page:
        return list(page["records"])
    if "data" in page:
        return list(page["data"])
    return [dict(r, market=market) for market, group in page.items() for r in group]


def every(
    sim: Simulator,
    op: spec.Operation,
    params: dict[str, Any],
    creds: Credentials,
    limit: int | None = None,
) -> list[Any]:
    """Every record of a history (within ``params``), newest first, paged to its end."""
    size = limit or op.bound("limit")
    out: list[Any] = []
    while True:
        page = records(ok(sim, op, {**params, "offset": len(out), "limit": size}, creds))
        out += page
        if len(page) < size:
            return out


_DECIMAL = re.compile(r"^-?\d{1,20}(\.\d{1,18})?$")
#: Whether a value is of a field type (objects and arrays of them are checked field by field).
_TYPES: dict[spec.FieldType, Callable[[Any], bool]] = {
    spec.FieldType.DECIMAL: lambda v: isinstance(v, str) and bool(_DECIMAL.match(v)),
    spec.FieldType.TIMESTAMP_FRACTIONAL: lambda v: type(v) in (float, int) and v > 1e9,
    spec.FieldType.TIMESTAMP_STRING: lambda v: isinstance(v, str) and v.isdigit(),
    spec.FieldType.INTEGER: lambda v: type(v) is int,
    spec.FieldType.TIMESTAMP: lambda v: type(v) is int,
    spec.FieldType.STRING: lambda v: isinstance(v, str),
    spec.FieldType.BOOLEAN: lambda v: type(v) is bool,
    spec.FieldType.STRING_LIST: lambda v: isinstance(v, list) and all(type(x) is str for x in v),
}


def check_shape(record: Any, fields: tuple[spec.Field, ...]) -> None:
    """The record has the spec's fields (an optional one may be absent), none other, each of the
    spec's JSON type; decimals fit DECIMAL(38,18)."""
    names = {f.name for f in fields}
    required = {f.name for f in fields if not f.optional}
    assert required <= set(record) <= names, (sorted(set(record) ^ names), record)
    for f in fields:
        value = record.get(f.name)
        if value is None:
            assert f.nullable or f.name not in record, (f.name, record)
        elif f.type in _TYPES:
            assert _TYPES[f.type](value), (f.name, value)
        elif f.type is spec.FieldType.OBJECT_LIST:
            assert isinstance(value, list), (f.name, value)
            for item in value:
                check_shape(item, f.fields)
        else:
            check_shape(value, f.fields)
