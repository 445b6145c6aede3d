"""Intake: the JSON an endpoint returned -> the records that go on to field checks, each field
read into one Arrow array.

An `Intake` keeps every record as it was received (by its position in the input, for the raw JSON
of a reject and the content of a duplicate), sets aside those that are not JSON objects (early
rejects), and reads a field of the objects with `Intake.field` as a `Field`: one Arrow array of
the JSON type the field must have, null wherever the value is missing, null or of another JSON
type, and per record the reason for each of those. After intake nothing sees JSON values: the
converters (`_convert`) take `Field`s. A received value goes on as JSON text, exact
(`json_text`: a reject's raw text, an array kept whole) or canonical (`canonical_json`: two
records compared).
"""

from __future__ import annotations

import json
import math
import re
import secrets
from bisect import bisect_right
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from operator import itemgetter
from typing import Final, cast

import pyarrow as pa
import pyarrow.compute as pc

from warehouse import schemas
from warehouse.normalize._reasons import first_reason, no_reasons, reason_where


@dataclass(frozen=True, slots=True)
class Field:
    """One field of every record in intake: its values as one Arrow array (null where the value
    is missing, null or of another JSON type) and, per record, why the value cannot be used
    (null: it can)."""

    name: str
    values: pa.Array
    reasons: pa.Array


@dataclass(frozen=True, slots=True)
class Expected:
    """The JSON type a field must have: its Arrow type, how a reason names it, and the test of a
    value (Python's types as the JSON parser gives them). With ``as_text``, an accepted value is
    read as that text (an exact number, a JSON array)."""

    arrow_type: pa.DataType
    description: str
    accepts: Callable[[object], bool]
    as_text: Callable[[object], str] | None = None


def _is_str(value: object) -> bool:
    return type(value) is str


def _is_int64(value: object) -> bool:
    return type(value) is int and -(2**63) <= value < 2**63


def _is_bool(value: object) -> bool:
    return type(value) is bool


def _is_str_list(value: object) -> bool:
    return type(value) is list and all(type(v) is str for v in value)


def _is_exact_number(value: object) -> bool:
    """An integer, or a number with a fraction parsed exactly (never a float)."""
    return type(value) is int or (type(value) is Decimal and value.is_finite())


def _is_object_list(value: object) -> bool:
    return type(value) is list and bool(value) and all(type(v) is dict for v in value)


DECIMAL_STRING: Final = Expected(pa.string(), "a decimal string", _is_str)
#: Where the API contract carries a Unix time as a string (funding times).
SECONDS_STRING: Final = Expected(pa.string(), "a string of Unix seconds", _is_str)
UNIX_TIME: Final = Expected(pa.int64(), "an integer Unix timestamp", _is_int64)
STRING: Final = Expected(pa.string(), "a string", _is_str)
INTEGER: Final = Expected(pa.int64(), "an integer", _is_int64)
BOOLEAN: Final = Expected(pa.bool_(), "a boolean", _is_bool)
STRINGS: Final = Expected(schemas.TEXT_LIST, "an array of strings", _is_str_list)
#: Seconds with their fraction (to the microsecond), a JSON number parsed exactly: as its text.
SECONDS_NUMBER: Final = Expected(pa.string(), "a number of Unix seconds", _is_exact_number, str)
OBJECTS: Final = Expected(
    pa.string(), "a non-empty array of objects", _is_object_list, lambda v: json_text(v)
)


@dataclass(slots=True)
class Intake:
    """The JSON objects of a batch that go on to field checks, and those rejected before.

    ``objects[i]`` came from input position ``indices[i]``; ``raw[position]`` is the record as
    received; ``context[position]`` prefixes its reject reason (a nested plan's record), and so
    does the text of the span ``(start, end, text)`` of ``spans`` holding it (the owner of a run
    of records: a mining account, a market); ``owners[i]`` is the key ``objects[i]`` was listed
    under, where records come keyed (a ticker, a mining account).
    """

    objects: list[dict[str, object]]
    indices: list[int]
    raw: Mapping[int, object] | Sequence[object]
    received: int
    early_rejects: list[tuple[int, str]] = field(default_factory=list)
    owners: list[object] = field(default_factory=list)
    context: dict[int, str] = field(default_factory=dict)
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    #: Identical copies set aside before field checks (nested plans seen twice).
    duplicates: int = 0

    def __len__(self) -> int:
        return len(self.objects)

    def prefix(self, position: int) -> str:
        """What prefixes the reject reason of the record at ``position``."""
        if position in self.context:
            return self.context[position]
        at = bisect_right(self.spans, (position, math.inf)) - 1
        return self.spans[at][2] if at >= 0 and position < self.spans[at][1] else ""

    # --- What a response holds -----------------------------------------------------------------

    @classmethod
    def of_array(cls, records: object, what: str) -> Intake:
        """A JSON array of objects."""
        if not isinstance(records, list):
            return cls([], [], {0: records}, 1, [(0, f"expected a JSON array of {what}")])
        if all(isinstance(record, dict) for record in records):
            objects = cast(list[dict[str, object]], records)
            return cls(objects, list(range(len(records))), records, len(records))
        intake = cls([], [], records, len(records))
        for position, record in enumerate(records):
            intake._take(position, record)
        return intake

    @classmethod
    def of_single_object(cls, value: object, what: str) -> Intake:
        intake = cls([], [], {0: value}, 1)
        intake._take(0, value, what)
        return intake

    @classmethod
    def of_objects_by_key(cls, value: object, what: str, *, key: str) -> Intake:
        """A JSON object whose every value is an object (a balance per ticker): one record per
        key, received as ``{key: value}``; ``owners`` holds the keys."""
        if not isinstance(value, dict):
            return cls([], [], {0: value}, 1, [(0, f"expected a JSON object keyed by {key}")])
        raw: dict[int, object] = {}
        intake = cls([], [], raw, len(value))
        for position, (name, nested) in enumerate(value.items()):
            raw[position] = {name: nested}
            if intake._take(position, nested, f"{what} of {name!r}"):
                intake.owners.append(name)
        return intake

    @classmethod
    def of_arrays_by_owner(cls, arrays: Mapping[str, object], what: str, *, owner: str) -> Intake:
        """Several JSON arrays of objects, each under its owner's name (a mining account)."""
        raw: list[object] = []
        intake = cls([], [], raw, 0)
        for name, records in arrays.items():
            position, context = len(raw), f"{owner} {name!r}: "
            if not isinstance(records, list):
                raw.append(records)
                intake.context[position] = context
                intake.early_rejects.append((position, f"expected a JSON array of {what}"))
                continue
            raw.extend(records)
            intake.spans.append((position, len(raw), context))
            if set(map(type, records)) <= {dict}:  # nearly always: at once
                intake.objects.extend(records)
                intake.indices.extend(range(position, len(raw)))
                intake.owners.extend([name] * len(records))
                continue
            for offset, record in enumerate(records):
                if intake._take(position + offset, record):
                    intake.owners.append(name)
        intake.received = len(raw)
        return intake

    @classmethod
    def of_nested_objects(cls, records: object, key: str) -> Intake:
        """The distinct objects under ``key`` of each record; identical copies are duplicates."""
        raw: dict[int, object] = {}
        intake = cls([], [], raw, 0)
        if not isinstance(records, list):
            return intake
        first_seen: dict[str, int] = {}
        for position, record in enumerate(records):
            nested = record.get(key) if isinstance(record, dict) else None
            if not isinstance(nested, dict):
                continue  # the owning record is rejected for it; no plan was received
            intake.received += 1
            identity = canonical_json(nested)
            if identity in first_seen:
                intake.duplicates += 1
                continue
            first_seen[identity] = position
            raw[position] = nested
            intake.context[position] = f"{key} of record {position}: "
            intake._take(position, nested)
        return intake

    def _take(self, position: int, record: object, what: str = "record") -> bool:
        if isinstance(record, dict):
            self.objects.append(record)
            self.indices.append(position)
            return True
        self.early_rejects.append((position, f"{what}: expected a JSON object"))
        return False

    def require_object(self, key: str) -> Intake:
        """Reject, before field checks, the records whose ``key`` is not a JSON object."""
        kept = list(zip(self.objects, self.indices, strict=True))
        self.objects, self.indices = [], []
        for record, position in kept:
            if isinstance(record.get(key), dict):
                self.objects.append(record)
                self.indices.append(position)
            else:
                self.early_rejects.append((position, f"{key}: missing or not a JSON object"))
        return self

    # --- Fields --------------------------------------------------------------------------------

    def field(
        self,
        *path: str | int,
        expected: Expected,
        nullable: bool = False,
        optional: bool = False,
    ) -> Field:
        """The values at ``path``: a key, or keys (and indexes into arrays) down nested values.

        A missing value is a reason, and so is JSON null, each its own; a ``nullable`` field may
        be JSON null, but must be there, and where it is nested, a null object on the way makes
        it null; an ``optional`` one may also be absent. An object or array on the way that is
        not one is a reason naming it (a first-level object a non-nullable field needs is
        checked before, by `require_object`).
        """
        name = ".".join(map(str, path))
        *parents, key = path
        if not parents:
            objects = self.objects
            values = _values(objects, str(key))
            presence = (
                _presence(objects, str(key)) if not optional else lambda: [True] * len(objects)
            )
            field = read(name, values, expected, presence=presence, nullable=nullable or optional)
            return field
        values, present, wrong = [], [], []
        for record in self.objects:
            value, here, why = _descend(record, path, nullable)
            values.append(value)
            present.append(here or optional)
            wrong.append(why)
        field = read(
            name, values, expected, presence=lambda: present, nullable=nullable or optional
        )
        if any(wrong):
            return Field(
                name, field.values, first_reason(pa.array(wrong, pa.string()), field.reasons)
            )
        return field

    def owner_field(self, name: str, expected: Expected) -> Field:
        """The key each record was listed under, as a field of the record."""
        return read(name, self.owners, expected)

    def strings(
        self,
        expected: Mapping[str, Expected],
        *,
        nullable: Collection[str] = (),
        optional: Collection[str] = (),
    ) -> dict[str, Field]:
        """First-level fields that must all be strings: read in one pass (Arrow's converter, not
        a Python loop per field) when every value is a string, null or missing; else field by
        field, so that each value of another JSON type gets its reason. The same `Field`s as
        `field` gives, ``nullable`` and ``optional`` as there."""
        if any(e.arrow_type != pa.string() or e.as_text is not None for e in expected.values()):
            raise ValueError("strings() reads string fields only")
        try:
            struct = pa.array(self.objects, type=pa.struct([(k, pa.string()) for k in expected]))
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):
            return {
                k: self.field(k, expected=e, nullable=k in nullable, optional=k in optional)
                for k, e in expected.items()
            }
        length, present = len(struct), lambda: [True] * length
        return {
            k: _field(
                k,
                struct.field(k),
                no_reasons(length),
                present if k in optional else _presence(self.objects, k),
                nullable=k in nullable or k in optional,
            )
            for k in expected
        }


def _descend(
    record: dict[str, object], path: Sequence[str | int], nullable: bool
) -> tuple[object, bool, str | None]:
    """The value at ``path`` in ``record``: (value, whether its key is there, why it cannot be
    read). A null object on the way gives a present null where the field is ``nullable``."""
    value: object = record
    for depth, step in enumerate(path):
        where = ".".join(map(str, path[:depth])) or "record"
        if value is None and depth and nullable:
            return None, True, None
        if isinstance(step, int):
            if not isinstance(value, list) or not value or not isinstance(value[step], dict):
                return None, True, f"{where}: not a non-empty JSON array of objects"
            value = value[step]
        elif isinstance(value, dict):
            if step not in value:
                return None, False, None
            value = value[step]
        else:
            return None, True, f"{where}: not a JSON object"
    return value, True, None


def _values(objects: list[dict[str, object]], key: str) -> list[object]:
    """Each object's value of ``key``, None where absent: taken in C where every object has it
    (nearly always), else one `dict.get` each."""
    try:
        return list(map(itemgetter(key), objects))
    except KeyError:
        return [o.get(key) for o in objects]


def _presence(objects: list[dict[str, object]], key: str) -> Callable[[], list[bool]]:
    """Whether each object has ``key``: worked out only where a value is null, which is rare."""
    return lambda: [key in o for o in objects]


def read(
    name: str,
    values: Sequence[object],
    expected: Expected,
    *,
    presence: Callable[[], list[bool]] | None = None,
    nullable: bool = False,
) -> Field:
    """JSON values -> a `Field`. ``presence`` (one flag per value) tells an absent key from JSON
    null; ``nullable`` makes null a value, and only an absent key missing."""
    typed, wrong_type = _typed(name, values, expected)
    return _field(name, typed, wrong_type, presence, nullable=nullable)


def _field(
    name: str,
    typed: pa.Array,
    wrong_type: pa.Array,
    presence: Callable[[], list[bool]] | None = None,
    *,
    nullable: bool = False,
) -> Field:
    if not typed.null_count:
        missing = no_reasons(len(typed))
    elif presence is None:  # values without their objects: nothing tells absent from null
        missing = reason_where(pc.is_null(typed), f"{name}: missing or null")
    else:
        absent = pc.invert(pa.array(presence(), pa.bool_()))
        if nullable:
            missing = reason_where(absent, f"{name}: missing (null is allowed, absence is not)")
        else:
            missing = first_reason(
                reason_where(absent, f"{name}: missing"),
                reason_where(pc.is_null(typed), f"{name}: null"),
            )
    return Field(name, typed, first_reason(wrong_type, missing))


def _typed(name: str, raw: Sequence[object], expected: Expected) -> tuple[pa.Array, pa.Array]:
    """Raw JSON values as one Arrow type, and a reason where a value has another JSON type.

    Arrow's own type inference is the fast path; it is only trusted when it lands on the expected
    type, because an explicitly typed conversion would truncate 1.5 to 1.
    """
    if expected is SECONDS_NUMBER and (texts := _exact_number_texts(raw)) is not None:
        return texts, no_reasons(len(raw))
    if expected.as_text is not None:
        reasons = [_wrong_value(name, v, expected) for v in raw]
        texts = [
            expected.as_text(v) if reason is None and v is not None else None
            for v, reason in zip(raw, reasons, strict=True)
        ]
        return pa.array(texts, pa.string()), pa.array(reasons, pa.string())
    try:
        inferred = pa.array(raw)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError):
        inferred = None
    if inferred is not None and _inferred_cleanly(inferred, expected.arrow_type):
        return inferred.cast(expected.arrow_type), no_reasons(len(raw))
    # Slow path, only for a batch holding a value of another JSON type.
    reasons = [_wrong_value(name, v, expected) for v in raw]
    kept = [v if reason is None else None for v, reason in zip(raw, reasons, strict=True)]
    return pa.array(kept, expected.arrow_type), pa.array(reasons, pa.string())


#: The text of a `Decimal` that is not a finite number.
_NOT_FINITE: Final = pa.array(["NaN", "-NaN", "sNaN", "-sNaN", "Infinity", "-Infinity"])


def _exact_number_texts(raw: Sequence[object]) -> pa.Array | None:
    """The texts of values that are all integers or finite `Decimal`s, each `str` as
    `SECONDS_NUMBER` reads it, at C speed (no check per value in Python); None otherwise."""
    if not set(map(type, raw)) <= {int, Decimal}:
        return None
    texts = pa.array(list(map(str, raw)), pa.string())
    return None if pc.any(pc.is_in(texts, value_set=_NOT_FINITE)).as_py() else texts


def _inferred_cleanly(inferred: pa.Array, arrow_type: pa.DataType) -> bool:
    if inferred.type == pa.null():
        return True
    if pa.types.is_list(arrow_type):
        if not pa.types.is_list(inferred.type):
            return False
        items = pc.list_flatten(inferred)
        return bool(items.type in (pa.null(), pa.string()) and items.null_count == 0)
    return bool(inferred.type == arrow_type)


def _wrong_value(name: str, value: object, expected: Expected) -> str | None:
    if value is None:
        return None
    if not expected.accepts(value):
        return _wrong_type(name, value, expected.description)
    if _unencodable(value):
        return f"{name}: text that is not valid Unicode (a lone surrogate)"
    return None


def _unencodable(value: object) -> bool:
    """A string (or strings in a list) that UTF-8, and so Parquet, cannot hold."""
    texts = value if isinstance(value, list) else [value]
    try:
        for text in texts:
            if isinstance(text, str):
                text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _wrong_type(name: str, value: object, expected: str) -> str:
    if type(value) is float and expected == SECONDS_NUMBER.description:
        return (
            f"{name}: a number parsed as binary floating point (not exact) where {expected} belongs"
        )
    if type(value) is int and expected.startswith("an integer"):
        return f"{name}: integer outside the 64-bit range"
    if type(value) is list and expected == STRINGS.description:
        return f"{name}: array holding a non-string item"
    return f"{name}: {_json_type(value)} where {expected} belongs"


def _json_type(value: object) -> str:
    match value:
        case bool():
            return "boolean"
        case int():
            return "integer"
        case float() | Decimal():  # a number, parsed exactly or not
            return "number"
        case str():
            return "string"
        case list():
            return "array"
        case dict():
            return "object"
    return type(value).__name__


def json_text(value: object, *, ascii_only: bool = False) -> str:
    """A JSON value as compact text, in the order received, every number exact (a `Decimal` as
    its digits, not as a float); ``ascii_only`` escapes every other character."""
    numbers: list[str] = []
    # A NUL (escaped in JSON text) and a fresh token: no received string can match it.
    mark = f"\x00{secrets.token_hex(8)}#"

    def exact(item: object) -> object:
        if isinstance(item, Decimal):
            numbers.append(str(item))
            return f"{mark}{len(numbers) - 1}"
        return repr(item)

    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"), default=exact)
    if numbers:
        escaped = re.escape(json.dumps(mark)[1:-1])
        text = re.sub(f'"{escaped}(\\d+)"', lambda m: numbers[int(m[1])], text)
    return text


def canonical_json(value: object) -> str:
    """A JSON value's content, whatever the order of its objects' keys."""
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=repr
    )
