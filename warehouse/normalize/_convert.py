"""Field converters: a `Field` read by intake -> a typed column and, per record, the reason it
cannot be used, by the rules of the package's text.

Each converter keeps the reasons intake noted (a value of another JSON type, a missing one) first
and adds its own for the values that are there, in the order it checks them; a record with a
reason holds a null in the column. Everything is vectorized with `pyarrow.compute`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, cast

import pyarrow as pa
import pyarrow.compute as pc

from warehouse import schemas
from warehouse.normalize._intake import Field
from warehouse.normalize._reasons import TEXT_NULL, first_reason, no_reasons, reason_where

#: A timestamp at or above this is in milliseconds (as seconds it would be the year 5138).
MILLISECONDS_FROM: Final = 100_000_000_000
#: No exchange record predates this.
EARLIEST: Final = datetime(2009, 1, 1, tzinfo=UTC)
#: How far after ``extracted_at`` a past event's time may lie (clock skew between hosts).
FUTURE_TOLERANCE: Final = timedelta(days=1)
#: Upper bound for times that may be in the future (payment times, link expiries).
LATEST_SCHEDULED: Final = datetime(2100, 1, 1, tzinfo=UTC)
#: At most 20 integer and 18 fraction digits: what ``decimal128(38, 18)`` holds exactly.
INTEGER_DIGITS: Final = 20
FRACTION_DIGITS: Final = 18

_DECIMAL_SHAPE: Final = r"^-?[0-9]+(\.[0-9]+)?$"
#: A decimal that ``decimal128(38, 18)`` holds as it is written.
_FITS: Final = rf"^-?[0-9]{{1,{INTEGER_DIGITS}}}(\.[0-9]{{1,{FRACTION_DIGITS}}})?$"
#: Longer digit strings may not fit int64; they are far outside any time bound anyway.
_TIME_DIGITS: Final = 18


@dataclass(frozen=True, slots=True)
class Converted:
    """A typed column (null where invalid) and, per row, why it is invalid (null: valid)."""

    values: pa.Array
    reasons: pa.Array

    @classmethod
    def valid(cls, values: pa.Array) -> Converted:
        """A column derived from others, or given by the caller: no reason of its own."""
        return cls(values, no_reasons(len(values)))


# --- Decimals -----------------------------------------------------------------------------------


def decimal(field: Field) -> Converted:
    """Decimal strings -> ``decimal128(38, 18)``, exactly, or a reason per value."""
    name, text = field.name, field.values
    if not text.null_count and pc.all(pc.match_substring_regex(text, _FITS)).as_py():
        # Every value fits as it is (nearly always): one check, not each rule apart.
        return Converted(pc.cast(text, schemas.MONEY), field.reasons)
    shaped = pc.fill_null(pc.match_substring_regex(text, _DECIMAL_SHAPE), False)
    candidate = text
    integer_digits, fraction_digits = _digit_counts(candidate)
    too_long = pc.greater(integer_digits, INTEGER_DIGITS)
    too_precise = pc.greater(fraction_digits, FRACTION_DIGITS)
    if pc.any(pc.and_(shaped, pc.or_(too_long, too_precise))).as_py():
        # Leading zeros and zeros past the 18th place change nothing: drop them, so that only
        # significant digits count (a rare path, so the common one skips the regexes).
        candidate = pc.replace_substring_regex(candidate, r"^(-?)0+([0-9])", r"\1\2")
        pattern = rf"^(-?[0-9]+\.[0-9]{{{FRACTION_DIGITS}}})0+$"
        candidate = pc.replace_substring_regex(candidate, pattern, r"\1")
        integer_digits, fraction_digits = _digit_counts(candidate)
    too_long = pc.greater(integer_digits, INTEGER_DIGITS)
    too_precise = pc.greater(fraction_digits, FRACTION_DIGITS)
    exact = pc.and_(shaped, pc.invert(pc.or_(too_long, too_precise)))
    if pc.all(exact).as_py():
        values = pc.cast(candidate, schemas.MONEY)  # no validity mask to build
    else:
        values = pc.cast(pc.if_else(exact, candidate, TEXT_NULL), schemas.MONEY)
    reasons = first_reason(
        field.reasons,
        reason_where(
            pc.and_(pc.is_valid(text), pc.invert(shaped)), f"{name}: not a decimal number"
        ),
        reason_where(
            too_long,
            f"{name}: more than {INTEGER_DIGITS} integer digits (would overflow DECIMAL(38,18))",
        ),
        reason_where(
            too_precise,
            f"{name}: more than {FRACTION_DIGITS} decimal places (would round)",
        ),
    )
    return Converted(values, reasons)


def _digit_counts(decimal_text: pa.Array) -> tuple[pa.Array, pa.Array]:
    length = pc.utf8_length(decimal_text)
    dot = pc.find_substring(decimal_text, ".")
    has_dot = pc.greater_equal(dot, 0)
    sign = pc.cast(pc.starts_with(decimal_text, "-"), pa.int32())
    integer_digits = pc.subtract(pc.if_else(has_dot, dot, length), sign)
    fraction_digits = pc.if_else(has_dot, pc.subtract(pc.subtract(length, dot), 1), 0)
    return integer_digits, fraction_digits


# --- Timestamps ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimeBounds:
    """The instants a timestamp field may take, and how a value outside is explained."""

    earliest: datetime
    latest: datetime
    too_late: str

    @classmethod
    def past(cls, extracted_at: datetime) -> TimeBounds:
        latest = extracted_at + FUTURE_TOLERANCE
        return cls(EARLIEST, latest, "more than a day after extracted_at")

    @classmethod
    def scheduled(cls) -> TimeBounds:
        return cls(EARLIEST, LATEST_SCHEDULED, f"after {LATEST_SCHEDULED.date().isoformat()}")


def timestamp(field: Field, bounds: TimeBounds) -> Converted:
    """Unix seconds (or milliseconds, told by magnitude) -> UTC timestamps, or a reason.

    The field is integers, or strings where the API contract carries the time as a string.
    """
    name = field.name
    if pa.types.is_string(field.values.type):
        text = field.values
        digits = pc.fill_null(pc.match_substring_regex(text, r"^[0-9]+$"), False)
        too_long = pc.and_(digits, pc.greater(pc.utf8_length(text), _TIME_DIGITS))
        integers = pc.cast(
            pc.if_else(pc.and_(digits, pc.invert(too_long)), text, TEXT_NULL), pa.int64()
        )
        not_digits = pc.and_(pc.is_valid(text), pc.invert(digits))
        shape_reasons = [
            reason_where(not_digits, f"{name}: not a Unix timestamp (ASCII digits only)"),
            reason_where(
                too_long, f"{name}: more than {_TIME_DIGITS} digits, not a Unix timestamp"
            ),
        ]
    else:
        integers = field.values
        shape_reasons = [reason_where(pc.less(integers, 0), f"{name}: negative Unix timestamp")]
    in_ms = pc.greater_equal(integers, MILLISECONDS_FROM)
    earliest_s, latest_s = int(bounds.earliest.timestamp()), int(bounds.latest.timestamp())
    too_early = pc.less(integers, pc.if_else(in_ms, earliest_s * 1000, earliest_s))
    too_late = pc.greater(integers, pc.if_else(in_ms, latest_s * 1000, latest_s))
    earliest_text = bounds.earliest.date().isoformat()
    reasons = first_reason(
        field.reasons,
        *shape_reasons,
        reason_where(too_early, f"{name}: before {earliest_text}"),
        reason_where(too_late, f"{name}: {bounds.too_late}"),
    )
    bounded = pc.if_else(pc.is_null(reasons), integers, pa.scalar(None, pa.int64()))
    micros = pc.if_else(in_ms, pc.multiply(bounded, 1_000), pc.multiply(bounded, 1_000_000))
    return Converted(pc.cast(micros, schemas.UTC_TIME), reasons)


_SECONDS_FRACTION: Final = r"^(?P<seconds>[0-9]{1,12})(?:\.(?P<fraction>[0-9]+))?$"
#: Microseconds: the finest a warehouse timestamp holds.
MICRO_DIGITS: Final = 6


def fractional_timestamp(field: Field, bounds: TimeBounds) -> Converted:
    """Unix seconds with their fraction (the exact text of a JSON number) -> UTC timestamps to
    the microsecond, or a reason: a seventh decimal place would round."""
    name, text = field.name, field.values
    parts = pc.extract_regex(text, _SECONDS_FRACTION)
    fraction = parts.field("fraction")
    unshaped = pc.and_(pc.is_valid(text), pc.is_null(parts))
    too_fine = pc.greater(pc.utf8_length(fraction), MICRO_DIGITS)
    exact = pc.and_(pc.is_valid(parts), pc.invert(too_fine))
    seconds = pc.cast(pc.if_else(exact, parts.field("seconds"), TEXT_NULL), pa.int64())
    micros = pc.cast(
        pc.utf8_rpad(pc.if_else(exact, fraction, TEXT_NULL), MICRO_DIGITS, "0"), pa.int64()
    )
    values = pc.add(pc.multiply(seconds, 1_000_000), micros)
    earliest = int(bounds.earliest.timestamp()) * 1_000_000
    latest = int(bounds.latest.timestamp()) * 1_000_000
    reasons = first_reason(
        field.reasons,
        _quoting(unshaped, f"{name}: not a Unix time in seconds (", text, ")"),
        _quoting(too_fine, f"{name}: finer than a microsecond (", text, "): would round"),
        reason_where(pc.less(values, earliest), f"{name}: before {bounds.earliest.date()}"),
        reason_where(pc.greater(values, latest), f"{name}: {bounds.too_late}"),
    )
    kept = pc.if_else(pc.is_null(reasons), values, pa.scalar(None, pa.int64()))
    return Converted(pc.cast(kept, schemas.UTC_TIME), reasons)


def _quoting(mask: pa.Array, before: str, value: pa.Array, after: str) -> pa.Array:
    """A reason that quotes the value, where ``mask`` holds."""
    reasons = reason_where(mask, before)
    if reasons.null_count == len(reasons):
        return reasons
    return pc.binary_join_element_wise(reasons, value, after, "")


# --- Integers, statuses, text, lists, booleans -------------------------------------------------


def integer(field: Field, *, minimum: int = 0) -> Converted:
    too_small = pc.less(field.values, minimum)
    reasons = first_reason(
        field.reasons, reason_where(too_small, f"{field.name}: less than {minimum}")
    )
    kept = pc.if_else(pc.fill_null(too_small, False), pa.scalar(None, pa.int64()), field.values)
    return Converted(kept, reasons)


def status(
    field: Field,
    labels: Mapping[int, str] | Mapping[int, Mapping[int, str]],
    column: str,
    *,
    by: pa.Array | None = None,
    keep_unlisted: bool = False,
) -> dict[str, Converted]:
    """An integer status, kept, and its label (looked up in ``labels[by]`` where the labels
    depend on another column's value ``by``). A status the API's documentation does not list is
    a reject, or with ``keep_unlisted`` kept as received with a null label."""
    converted = integer(field, minimum=0)
    tables: Mapping[int, Mapping[int, str]]
    if by is None:  # one table, for every record
        tables = {0: cast("Mapping[int, str]", labels)}
        by = pa.repeat(pa.scalar(0, pa.int64()), len(converted.values))
    else:
        tables = cast("Mapping[int, Mapping[int, str]]", labels)
    label = pa.repeat(pa.scalar(None, pa.string()), len(converted.values))
    for value, table in tables.items():
        named = table
        codes = pa.array(list(named), pa.int64())
        found = pc.take(
            pa.array(list(named.values()), pa.string()),
            pc.index_in(converted.values, value_set=codes),
        )
        here = pc.fill_null(pc.equal(by, value), False)
        label = pc.if_else(here, found, label)
    unknown = pc.and_(pc.is_valid(converted.values), pc.is_null(label))
    reasons = converted.reasons
    if not keep_unlisted:
        known = "; ".join(
            ", ".join(f"{code} ({text})" for code, text in t.items()) for t in tables.values()
        )
        reasons = first_reason(
            reasons, reason_where(unknown, f"{field.name}: not a known status ({known})")
        )
    return {
        column: Converted(converted.values, reasons),
        f"{column}_label": Converted.valid(label),
    }


def text(
    field: Field,
    pattern: str | None = None,
    pattern_description: str = "",
    *,
    allow_empty: bool = False,
    choices: tuple[str, ...] | None = None,
    keep_unlisted: bool = False,
) -> Converted:
    checks = [field.reasons]
    if not allow_empty:
        checks.append(reason_where(pc.equal(field.values, ""), f"{field.name}: empty"))
    if pattern is not None:
        mismatch = pc.invert(pc.match_substring_regex(field.values, pattern))
        checks.append(reason_where(mismatch, f"{field.name}: not {pattern_description}"))
    if choices is not None and not keep_unlisted:
        unlisted = pc.invert(pc.is_in(field.values, value_set=pa.array(choices, pa.string())))
        checks.append(reason_where(unlisted, f"{field.name}: not one of {', '.join(choices)}"))
    return Converted(field.values, first_reason(*checks))


def as_read(field: Field) -> Converted:
    """A field intake's checks suffice for (a boolean, a list of strings): kept as read."""
    return Converted(field.values, field.reasons)
