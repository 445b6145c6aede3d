"""The shape of each operation's successful answer, built from the field tables of `spec`.

Every answer is parsed and checked in one pass (pydantic-core reads the JSON and checks it while
it parses: as fast as orjson plus a hand-written check, measured). Checks are strict JSON types:
a decimal is a string, a timestamp an integer (or a string where the spec says so), nothing
missing, nothing extra. Values are returned exactly as sent: decimals stay text, and a timestamp
string that is not digits passes, for the warehouse to reject with its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import orjson
from pydantic_core import SchemaValidator
from pydantic_core import ValidationError as ShapeMismatch
from pydantic_core import core_schema as cs

from . import spec
from ._config import EXCERPT_CHARS
from ._errors import ResponseFormatError, excerpt


def _value(field: spec.Field) -> cs.CoreSchema:
    kind = field.type
    schema: cs.CoreSchema
    if kind in (spec.FieldType.STRING, spec.FieldType.DECIMAL, spec.FieldType.TIMESTAMP_STRING):
        schema = cs.str_schema(strict=True)
    elif kind in (spec.FieldType.INTEGER, spec.FieldType.TIMESTAMP):
        schema = cs.int_schema(strict=True)
    elif kind is spec.FieldType.BOOLEAN:
        schema = cs.bool_schema(strict=True)
    elif kind is spec.FieldType.STRING_LIST:
        schema = cs.list_schema(cs.str_schema(strict=True), strict=True)
    else:
        schema = _record(field.fields)
    return cs.nullable_schema(schema, strict=True) if field.nullable else schema


def _object(fields: Mapping[str, cs.CoreSchema]) -> cs.CoreSchema:
    """A JSON object with exactly these fields."""
    return cs.typed_dict_schema(
        {name: cs.typed_dict_field(schema) for name, schema in fields.items()},
        extra_behavior="forbid",
        strict=True,
    )


def _record(fields: Iterable[spec.Field]) -> cs.CoreSchema:
    return _object({f.name: _value(f) for f in fields})


def _list(item: cs.CoreSchema) -> cs.CoreSchema:
    return cs.list_schema(item, strict=True)


_INTEGER = cs.int_schema(strict=True)


def _page(record_fields: Iterable[spec.Field]) -> cs.CoreSchema:
    """A paged answer (sections 4.1, 4.4): ``offset``, ``limit`` and ``records``."""
    return _object(
        {"offset": _INTEGER, "limit": _INTEGER, "records": _list(_record(record_fields))}
    )


def _by_ticker(fields: Iterable[spec.Field]) -> cs.CoreSchema:
    """A balance answer: an object keyed by ticker (section 2.4)."""
    return cs.dict_schema(cs.str_schema(strict=True), _record(fields), strict=True)


_SCHEMAS: Final[Mapping[str, cs.CoreSchema]] = {
    # A JSON array holding the single string "pong" (section 4.8).
    spec.PING.name: cs.list_schema(
        cs.literal_schema(["pong"]), min_length=1, max_length=1, strict=True
    ),
    spec.INVESTMENTS_HISTORY.name: _page(spec.INVESTMENT_FIELDS),
    spec.HEDGE_MODE.name: _record(spec.HEDGE_MODE_FIELDS),
    # An empty object (section 4.3).
    spec.RESET_SUBACCOUNT_KEY.name: _object({}),
    spec.FUNDING_HISTORY.name: _page(spec.FUNDING_ENTRY_FIELDS),
    spec.MAIN_BALANCE.name: _by_ticker(spec.MAIN_BALANCE_FIELDS),
    spec.TRADING_BALANCE.name: _by_ticker(spec.TRADING_BALANCE_FIELDS),
    spec.WATCHER_LINKS.name: _object({"data": _list(_record(spec.WATCHER_LINK_FIELDS))}),
}

#: One validator per operation name; every operation of the spec has one.
VALIDATORS: Final[dict[str, SchemaValidator]] = {
    name: SchemaValidator(schema) for name, schema in _SCHEMAS.items()
}


def _location(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the whole answer)"


def parse(operation: spec.Operation, content: bytes) -> Any:
    """The answer's JSON, checked against the operation's shape, or `ResponseFormatError`."""
    try:
        return VALIDATORS[operation.name].validate_json(content)
    except ShapeMismatch as exc:
        raise format_error(operation, content, exc) from None


def format_error(
    operation: spec.Operation, content: bytes, exc: ShapeMismatch
) -> ResponseFormatError:
    first = exc.errors(include_url=False, include_context=False)[0]
    if first["type"] == "json_invalid":
        # Where the JSON broke is at its end, so quote the end.
        tail = content.decode("utf-8", "replace")[-EXCERPT_CHARS:]
        return ResponseFormatError(
            operation=operation,
            field="(the whole answer)",
            reason=f"not valid JSON ({first['msg']})",
            body_excerpt="the answer ending " + excerpt("…" + tail),
        )
    value = first.get("input")
    try:
        quoted = orjson.dumps(value).decode()
    except TypeError:
        quoted = repr(value)
    others = exc.error_count() - 1
    reason = first["msg"] + (f" (and {others} more mismatch(es))" if others else "")
    return ResponseFormatError(
        operation=operation,
        field=_location(first["loc"]),
        reason=reason,
        body_excerpt=excerpt(quoted),
    )
