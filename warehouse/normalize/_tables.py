"""A history's answer -> its table's batch, column by column as its declaration says.

Each declared column is read from its record field (intake checks its JSON type, `_intake`),
converted by the rule its type and declaration give (`_convert`: a decimal exactly, a time within
its bounds, text of its form, a status with its label), or derived from another column (a
position's side from the sign of its amount, a record's day from its time); `_assemble` then
makes the batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import spec
from warehouse import schemas
from warehouse.normalize._assemble import Batch, Seen, assemble
from warehouse.normalize._convert import (
    Converted,
    TimeBounds,
    as_read,
    decimal,
    fractional_timestamp,
    integer,
    status,
    text,
    timestamp,
)
from warehouse.normalize._intake import (
    BOOLEAN,
    DECIMAL_STRING,
    INTEGER,
    OBJECTS,
    SECONDS_NUMBER,
    SECONDS_STRING,
    STRING,
    STRINGS,
    UNIX_TIME,
    Expected,
    Field,
    Intake,
    json_text,
    read,
)
from warehouse.normalize._reasons import first_reason

#: How a field of each JSON type is read at intake.
EXPECTED: Final[Mapping[spec.FieldType, Expected]] = {
    spec.FieldType.STRING: STRING,
    spec.FieldType.DECIMAL: DECIMAL_STRING,
    spec.FieldType.INTEGER: INTEGER,
    spec.FieldType.TIMESTAMP: UNIX_TIME,
    spec.FieldType.TIMESTAMP_STRING: SECONDS_STRING,
    spec.FieldType.TIMESTAMP_FRACTIONAL: SECONDS_NUMBER,
    spec.FieldType.BOOLEAN: BOOLEAN,
    spec.FieldType.STRING_LIST: STRINGS,
    spec.FieldType.OBJECT_LIST: OBJECTS,
}
#: Mining-pool account names are at most 255 characters (docs/api.md, section 4.7): the longest
#: value of a fanned-out parameter.
OWNER_MAX_LENGTH: Final = 255


def normalize(
    history: spec.History,
    answer: object,
    *,
    extracted_at: datetime,
    day: date,
    observed_at: datetime | None = None,
    seen: Seen | None = None,
) -> Batch:
    """A history's answer (the JSON as parsed: a page's records, a keyed object, one record, the
    records of each owner (a fanned-out value, a market); for a nested history, the records it
    is nested in) -> its table's `Batch`.

    ``day`` is the snapshot day of a snapshot, ``observed_at`` the exchange's time of its
    answer, and ``seen`` the rest of when it was seen. A history partitioned by month puts each
    row in the day of its own time; a record whose time cannot be read is rejected into the day
    of the record before it in the batch (the exchange lists newest first, so every rerun of that
    day rejects it into that day again), or into ``day`` (the day the caller was reading) when no
    record before it has a readable time.
    """
    extracted_at = _utc(extracted_at)
    schema = schemas.TABLES[history.name]
    intake = _intake(history, answer)
    past = TimeBounds.past(extracted_at)
    fields = _fields(history, intake)
    columns: dict[str, Converted] = {}
    for column in history.columns:
        if column.derived:
            continue
        field = fields[column.name]
        kind = history.field_of(column).type if column.source != spec.OWNER else None
        bounds = TimeBounds.scheduled() if column.scheduled else past
        keep = column.unlisted == "keep"
        if kind in (spec.FieldType.TIMESTAMP, spec.FieldType.TIMESTAMP_STRING):
            columns[column.name] = timestamp(field, bounds)
        elif kind is spec.FieldType.TIMESTAMP_FRACTIONAL:
            columns[column.name] = fractional_timestamp(field, bounds)
        elif kind is spec.FieldType.DECIMAL:
            columns[column.name] = decimal(field)
        elif kind is spec.FieldType.INTEGER:
            if column.labels is not None:
                columns |= status(field, column.labels, column.name, keep_unlisted=keep)
            elif column.labels_by is not None:
                by, tables = column.labels_by
                columns |= status(
                    field, tables, column.name, by=columns[by].values, keep_unlisted=keep
                )
            else:
                columns[column.name] = integer(field)
        elif kind is spec.FieldType.STRING or column.pattern is not None:
            columns[column.name] = text(
                field,
                column.pattern,
                column.form,
                allow_empty=column.allow_empty,
                choices=column.choices,
                keep_unlisted=keep,
            )
        else:
            columns[column.name] = as_read(field)
    for column in history.columns:
        if column.derived:  # after the columns it is derived from
            columns[column.name] = _derived(column, columns)
    if isinstance(history.partition, spec.Monthly):
        days = columns[history.partition.day].values
        # The day of the record before, as text; the caller's day when none has one.
        neighbour = pc.fill_null_forward(pc.cast(days, pa.string()))
        return assemble(
            schema,
            intake,
            columns,
            extracted_at=extracted_at,
            reject_partition=pc.coalesce(neighbour, pa.scalar(day.isoformat())),
            home_partition=day,
        )
    return assemble(
        schema,
        intake,
        columns,
        extracted_at=extracted_at,
        snapshot_date=day,
        observed_at=observed_at,
        seen=seen,
        home_partition=day,
    )


def nested(history: spec.History) -> tuple[spec.History, ...]:
    """The histories made of objects nested in ``history``'s records (an investment's plans)."""
    return tuple(h for h in spec.HISTORIES.values() if h.nested_in is history)


def records_received(history: spec.History, answer: object) -> int:
    """How many records an answer holds, as the history's table counts them."""
    if _owned_arrays(history):
        values = answer.values() if isinstance(answer, dict) else ()
        return sum(len(v) if isinstance(v, list) else 1 for v in values)
    if isinstance(history.operation.answer, spec.Single):
        return 1
    return len(answer) if isinstance(answer, list | dict) else 1


def _noun(history: spec.History) -> str:
    return history.name.replace("_", " ")


def _owner(history: spec.History) -> str | None:
    """The column holding the key or value its records come under, if any."""
    return next((c.name for c in history.columns if c.source == spec.OWNER), None)


def _owned_arrays(history: spec.History) -> bool:
    """Its records come as arrays, each under its owner: a fanned-out value (a mining
    account), a market (fills grouped by market), a sub-account (its transfers)."""
    return _owner(history) is not None and not isinstance(history.operation.answer, spec.Keyed)


def _intake(history: spec.History, answer: object) -> Intake:
    """The records of an answer, as its shape holds them."""
    noun, shape = _noun(history), history.operation.answer
    if history.nested_in is not None:
        return Intake.of_nested_objects(answer, history.nested_at)
    owner = _owner(history)
    if owner is not None and _owned_arrays(history):
        if not isinstance(answer, Mapping):
            raise TypeError(f"{history.name}: the records of each {owner} are needed")
        for value in answer:
            if not isinstance(value, str) or not 0 < len(value) <= OWNER_MAX_LENGTH:
                raise ValueError(
                    f"{history.name}: {owner} must be 1-{OWNER_MAX_LENGTH} characters, "
                    f"got {value!r}"
                )
        return Intake.of_arrays_by_owner(answer, noun, owner=_owner_param(history, owner))
    if isinstance(shape, spec.Keyed):
        return Intake.of_objects_by_key(answer, noun, key=owner or "key")
    if isinstance(shape, spec.Single):
        return Intake.of_single_object(answer, noun)
    intake = Intake.of_array(answer, noun)
    # A first-level object a column needs (a plan, an order's detail) must be one; a nullable
    # column's may be null, and an array's items are checked where they are read.
    for parent in {
        c.source[0]
        for c in history.columns
        if len(c.source) > 1 and not c.nullable and not isinstance(c.source[1], int)
    }:
        intake.require_object(str(parent))
    return intake


def _owner_param(history: spec.History, owner: str) -> str:
    """How a reject names the owner: the parameter it was asked for, else the column."""
    if isinstance(history.paging, spec.Fanout):
        return history.paging.param
    return owner


def _fields(history: spec.History, intake: Intake) -> dict[str, Field]:
    """Each sourced column's field, read at intake: the first-level string fields of the
    records in one pass where they can be (`Intake.strings`), the others field by field."""
    sourced = [c for c in history.columns if c.source]
    owned = [c for c in sourced if c.source == spec.OWNER]
    flat = [c for c in sourced if c.source != spec.OWNER]
    fields = {c.name: intake.owner_field(c.name, STRING) for c in owned}
    expected = {c.name: _expected(history, c) for c in flat}
    # A field the answer may spell two ways (`spec.Field.alias`), by the column reading it.
    aliases = {c.name: history.field_of(c).alias for c in flat if len(c.source) == 1}
    optional = {c.name for c in flat if history.field_of(c).optional}
    strings = [
        c
        for c in flat
        if len(c.source) == 1
        and expected[c.name].arrow_type == pa.string()
        and expected[c.name].as_text is None
        and not aliases[c.name]
    ]
    if strings:
        read_at_once = intake.strings(
            {str(c.source[0]): expected[c.name] for c in strings},
            nullable={str(c.source[0]) for c in strings if c.nullable},
            optional={str(c.source[0]) for c in strings if c.name in optional},
        )
        fields |= {c.name: read_at_once[str(c.source[0])] for c in strings}
    for column in flat:
        if column.name in fields:
            continue
        kind, alias = expected[column.name], aliases.get(column.name, "")
        if alias and any(alias in o for o in intake.objects):
            key = str(column.source[0])
            fields[column.name] = _either(
                intake, key, alias, kind, column.nullable, column.name in optional
            )
            continue
        fields[column.name] = intake.field(
            *column.source,
            expected=kind,
            nullable=column.nullable,
            optional=column.name in optional,
        )
    return fields


def _either(
    intake: Intake, key: str, alias: str, expected: Expected, nullable: bool, optional: bool
) -> Field:
    """A field of the record spelled either way (`spec.Field.alias`): under its name, else its
    alias; both, with different values, is a reason (nothing tells which is right)."""
    values: list[object] = []
    present: list[bool] = []
    clashes: list[str | None] = []
    for o in intake.objects:
        value, other = o.get(key, o.get(alias)), o.get(alias, o.get(key))
        clash = key in o and alias in o and (type(value) is not type(other) or value != other)
        values.append(value)
        present.append(key in o or alias in o or optional)
        clashes.append(
            f"{key} {json_text(value)} and {alias} {json_text(other)}: one field spelled two "
            "ways, with different values"
            if clash
            else None
        )
    field = read(key, values, expected, presence=lambda: present, nullable=nullable or optional)
    if any(clashes):
        return Field(key, field.values, first_reason(pa.array(clashes, pa.string()), field.reasons))
    return field


def _expected(history: spec.History, column: spec.Column) -> Expected:
    return EXPECTED[history.field_of(column).type]


def _derived(column: spec.Column, columns: Mapping[str, Converted]) -> Converted:
    if column.sign_of is not None:
        amount = columns[column.sign_of].values
        zero = pa.scalar(0, schemas.MONEY)
        return Converted.valid(
            pc.if_else(pc.greater_equal(amount, zero), schemas.LONG, schemas.SHORT)
        )
    assert column.day_of is not None  # a derived column is a sign or a day
    return Converted.valid(pc.cast(columns[column.day_of].values, schemas.DAY))


def parse_decimals(values: Sequence[object], field: str = "value") -> tuple[pa.Array, pa.Array]:
    """Decimal strings -> ``decimal128(38, 18)`` by the package's rules, vectorized.

    Returns the typed values (null where rejected) and, per value, the reason it was rejected
    (null where accepted).
    """
    converted = decimal(read(field, values, DECIMAL_STRING))
    return converted.values, converted.reasons


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"extracted_at must be timezone-aware (UTC), got naive {moment!r}")
    return moment.astimezone(UTC)
