"""The shape of each operation's successful answer, compiled from the field tables of `spec`.

Checks are strict JSON types: a decimal is a string, a timestamp an integer (or a string where
the spec says so), nothing missing, nothing extra. Values are returned exactly as sent: decimals
stay text, and a timestamp string that is not digits passes, for the warehouse to reject.

Hand-compiled rather than pydantic-core, because this check runs on every page of every walk and
orjson plus these checks costs less CPU than pydantic-core's one-pass ``validate_json``. A fast
yes/no pass runs first; only an answer that fails it is walked again to say where and why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any, Final

import orjson

from pipeline import spec

from ._config import EXCERPT_CHARS
from ._errors import ResponseFormatError, excerpt

#: Python types of the spec's JSON types; `type(value) is kind` keeps booleans out of integers.
_SCALARS: Final[Mapping[spec.FieldType, type]] = {
    spec.FieldType.STRING: str,
    spec.FieldType.DECIMAL: str,
    spec.FieldType.TIMESTAMP_STRING: str,
    spec.FieldType.INTEGER: int,
    spec.FieldType.TIMESTAMP: int,
    spec.FieldType.BOOLEAN: bool,
}
_JSON_NAMES: Final[Mapping[type, str]] = {
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    list: "an array",
    dict: "an object",
}


class _Mismatch(Exception):
    def __init__(self, path: str, reason: str, value: Any) -> None:
        super().__init__(reason)
        self.path, self.reason, self.value = path, reason, value


@dataclass(frozen=True, slots=True)
class Shape:
    """A JSON value's expected shape: ``ok`` answers fast, ``explain`` says what is wrong."""

    ok: Callable[[Any], bool]
    explain: Callable[[Any, str], None]
    #: A plain scalar's exact Python type, so that an object checks it inline, without a call.
    kind: type | None = None
    #: For an object of plain scalars: ``ok`` of a whole list of them at once, at C speed.
    all_ok: Callable[[list[Any]], bool] | None = None


def _scalar(kind: type) -> Shape:
    def ok(value: Any) -> bool:
        return type(value) is kind

    def explain(value: Any, path: str) -> None:
        if type(value) is not kind:
            raise _Mismatch(path, f"expected {_JSON_NAMES[kind]}, got {_json_type(value)}", value)

    return Shape(ok, explain, kind)


def _nullable(inner: Shape) -> Shape:
    def ok(value: Any) -> bool:
        return value is None or inner.ok(value)

    def explain(value: Any, path: str) -> None:
        if value is not None:
            inner.explain(value, path)

    return Shape(ok, explain)


def _array(item: Shape, *, exactly: int | None = None) -> Shape:
    item_ok = item.ok
    all_ok = item.all_ok or (lambda items: all(map(item_ok, items)))

    def ok(value: Any) -> bool:
        return type(value) is list and (exactly is None or len(value) == exactly) and all_ok(value)

    def explain(value: Any, path: str) -> None:
        if type(value) is not list:
            raise _Mismatch(path, f"expected an array, got {_json_type(value)}", value)
        if exactly is not None and len(value) != exactly:
            raise _Mismatch(path, f"expected {exactly} item(s), got {len(value)}", value)
        for i, element in enumerate(value):
            item.explain(element, f"{path}[{i}]")

    return Shape(ok, explain)


def _object(fields: Mapping[str, Shape]) -> Shape:
    """A JSON object with exactly these fields."""
    names = frozenset(fields)
    # Plain scalars are checked inline; only nested values cost a call.
    scalars = tuple((name, shape.kind) for name, shape in fields.items() if shape.kind)
    nested = tuple((name, shape.ok) for name, shape in fields.items() if not shape.kind)

    def ok(value: Any) -> bool:
        if type(value) is not dict or value.keys() != names:
            return False
        for name, kind in scalars:
            if type(value[name]) is not kind:
                return False
        return all(check(value[name]) for name, check in nested)

    def explain(value: Any, path: str) -> None:
        if type(value) is not dict:
            raise _Mismatch(path, f"expected an object, got {_json_type(value)}", value)
        for name in value.keys() - names:
            raise _Mismatch(_join(path, name), "a field the spec does not have", value[name])
        for name, shape in fields.items():
            if name not in value:
                raise _Mismatch(_join(path, name), "a field the spec requires is missing", value)
            shape.explain(value[name], _join(path, name))

    return Shape(ok, explain, all_ok=None if nested or not scalars else _all_ok(scalars))


def _all_ok(scalars: tuple[tuple[str, type], ...]) -> Callable[[list[Any]], bool]:
    """Objects with exactly these scalar fields, checked a whole list at a time: every item a
    dict, of as many fields as named, holding every name (so no other), each value of its
    field's type. `map` and `itemgetter` do the loops in C, so a whole page costs less than
    the record-by-record check, which still explains a failure."""
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


def _keyed(item: Shape) -> Shape:
    """An object keyed by free names (a ticker), each value of one shape."""
    item_ok = item.ok

    def ok(value: Any) -> bool:
        return type(value) is dict and all(map(item_ok, value.values()))

    def explain(value: Any, path: str) -> None:
        if type(value) is not dict:
            raise _Mismatch(path, f"expected an object, got {_json_type(value)}", value)
        for key, element in value.items():
            item.explain(element, _join(path, key))

    return Shape(ok, explain)


def _literal(expected: str) -> Shape:
    def ok(value: Any) -> bool:
        return value == expected and type(value) is str

    def explain(value: Any, path: str) -> None:
        if not ok(value):
            raise _Mismatch(path, f"expected {expected!r}", value)

    return Shape(ok, explain)


def _field(field: spec.Field) -> Shape:
    shape: Shape
    if field.type in _SCALARS:
        shape = _scalar(_SCALARS[field.type])
    elif field.type is spec.FieldType.STRING_LIST:
        shape = _array(_scalar(str))
    else:
        shape = _record(field.fields)
    return _nullable(shape) if field.nullable else shape


def _record(fields: Iterable[spec.Field]) -> Shape:
    return _object({f.name: _field(f) for f in fields})


_INTEGER = _scalar(int)


def _page(record_fields: Iterable[spec.Field]) -> Shape:
    """A paged answer (sections 4.1, 4.4): ``offset``, ``limit`` and ``records``."""
    return _object(
        {"offset": _INTEGER, "limit": _INTEGER, "records": _array(_record(record_fields))}
    )


#: The answer of each operation, by operation name; every operation of the spec has one.
SHAPES: Final[Mapping[str, Shape]] = {
    # A JSON array holding the single string "pong" (section 4.8).
    spec.PING.name: _array(_literal("pong"), exactly=1),
    spec.INVESTMENTS_HISTORY.name: _page(spec.INVESTMENT_FIELDS),
    spec.HEDGE_MODE.name: _record(spec.HEDGE_MODE_FIELDS),
    # An empty object (section 4.3).
    spec.RESET_SUBACCOUNT_KEY.name: _object({}),
    spec.FUNDING_HISTORY.name: _page(spec.FUNDING_ENTRY_FIELDS),
    spec.MAIN_BALANCE.name: _keyed(_record(spec.MAIN_BALANCE_FIELDS)),
    spec.TRADING_BALANCE.name: _keyed(_record(spec.TRADING_BALANCE_FIELDS)),
    spec.WATCHER_LINKS.name: _object({"data": _array(_record(spec.WATCHER_LINK_FIELDS))}),
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return _JSON_NAMES.get(type(value), "a number" if isinstance(value, float) else "a value")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def parse(operation: spec.Operation, content: bytes) -> Any:
    """The answer's JSON, checked against the operation's shape, or `ResponseFormatError`."""
    try:
        doc = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        # Where JSON breaks is usually at its end, so quote the end.
        tail = content.decode("utf-8", "replace")[-EXCERPT_CHARS:]
        raise ResponseFormatError(
            operation=operation,
            field="(the whole answer)",
            reason=f"not valid JSON ({exc})",
            body_excerpt="the answer ending " + excerpt("…" + tail),
        ) from None
    shape = SHAPES[operation.name]
    if shape.ok(doc):
        return doc
    try:
        shape.explain(doc, "")
    except _Mismatch as mismatch:
        raise ResponseFormatError(
            operation=operation,
            field=mismatch.path or "(the whole answer)",
            reason=mismatch.reason,
            body_excerpt=_quote(mismatch.value),
        ) from None
    raise AssertionError(f"{operation.name}: a shape refused an answer it cannot explain")


def _quote(value: Any) -> str:
    try:
        return excerpt(orjson.dumps(value))
    except TypeError:
        return excerpt(repr(value))
